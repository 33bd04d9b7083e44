'use strict';
// MLflow Model Registry REST API 2.0 subset, with MLflow's error codes and HTTP statuses.

class MlflowError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
const notExist = (m) => new MlflowError(404, 'RESOURCE_DOES_NOT_EXIST', m);
const invalid = (m) => new MlflowError(400, 'INVALID_PARAMETER_VALUE', m);

class Mlflow {
  constructor() { this.reset(); }
  reset() { this.models = new Map(); }

  req(params, k) {
    const v = params[k];
    if (v === undefined || v === null || v === '') throw invalid(`Missing value for required parameter '${k}'. See the API docs for more information about request parameters.`);
    return String(v);
  }

  model(name) {
    const m = this.models.get(name);
    if (!m) throw notExist(`Registered Model with name=${name} not found`);
    return m;
  }

  version(m, v) {
    const mv = m.versions.get(String(v));
    if (!mv) throw notExist(`Model Version (name=${m.name}, version=${v}) not found`);
    return mv;
  }

  aliasesOf(m, version) {
    return [...m.aliases].filter(([, v]) => version === undefined || v === version).map(([a]) => a).sort();
  }

  viewModel(m) {
    const out = { name: m.name, creation_timestamp: m.created, last_updated_timestamp: m.updated };
    if (m.description) out.description = m.description;
    const latest = [...m.versions.values()].pop();
    if (latest) out.latest_versions = [this.viewVersion(m, latest)];
    if (m.tags.length) out.tags = m.tags;
    if (m.aliases.size) out.aliases = [...m.aliases].map(([alias, version]) => ({ alias, version })).sort((a, b) => (a.alias < b.alias ? -1 : 1));
    return out;
  }

  viewVersion(m, mv) {
    const out = { name: m.name, version: mv.version, creation_timestamp: mv.created, last_updated_timestamp: mv.updated,
      current_stage: 'None', description: mv.description || '', source: mv.source, run_id: mv.run_id || '', status: 'READY' };
    if (mv.tags.length) out.tags = mv.tags;
    const al = this.aliasesOf(m, mv.version);
    if (al.length) out.aliases = al;
    return out;
  }

  // Returns {status, body}.
  handle(method, endpoint, params) {
    try {
      return { status: 200, body: this.dispatch(method, endpoint, params) };
    } catch (e) {
      if (e instanceof MlflowError) return { status: e.status, body: { error_code: e.code, message: e.message } };
      throw e;
    }
  }

  dispatch(method, ep, p) {
    const now = Date.now();
    const is = (m, e) => (Array.isArray(m) ? m.includes(method) : method === m) && ep === e;
    if (is('POST', 'registered-models/create')) {
      const name = this.req(p, 'name');
      if (this.models.has(name)) throw new MlflowError(400, 'RESOURCE_ALREADY_EXISTS', `Registered Model (name=${name}) already exists.`);
      const m = { name, created: now, updated: now, description: p.description || '', tags: p.tags || [], versions: new Map(), aliases: new Map(), next: 1 };
      this.models.set(name, m);
      return { registered_model: this.viewModel(m) };
    }
    if (is('GET', 'registered-models/get')) return { registered_model: this.viewModel(this.model(this.req(p, 'name'))) };
    if (is('DELETE', 'registered-models/delete')) { const n = this.req(p, 'name'); this.model(n); this.models.delete(n); return {}; }
    if (is(['GET', 'POST'], 'registered-models/get-latest-versions')) {
      const m = this.model(this.req(p, 'name'));
      const latest = [...m.versions.values()].pop();
      return latest ? { model_versions: [this.viewVersion(m, latest)] } : {};
    }
    if (is('POST', 'model-versions/create')) {
      const m = this.model(this.req(p, 'name'));
      const source = this.req(p, 'source');
      const v = String(m.next++);
      const mv = { version: v, created: now, updated: now, source, run_id: p.run_id, description: p.description, tags: p.tags || [] };
      m.versions.set(v, mv); m.updated = now;
      return { model_version: this.viewVersion(m, mv) };
    }
    if (is('GET', 'model-versions/get')) {
      const m = this.model(this.req(p, 'name'));
      return { model_version: this.viewVersion(m, this.version(m, this.req(p, 'version'))) };
    }
    if (ep === 'registered-models/alias') {
      const name = this.req(p, 'name'), alias = this.req(p, 'alias');
      if (method === 'POST') {
        const version = this.req(p, 'version');
        if (/^v\d+$/i.test(alias) || alias.toLowerCase() === 'latest') throw invalid(`Invalid alias name: '${alias}'. Aliases cannot be in the form of 'v<number>' or 'latest'.`);
        const m = this.model(name);
        this.version(m, version);
        m.aliases.set(alias, version); m.updated = now;
        return {};
      }
      if (method === 'DELETE') { const m = this.model(name); m.aliases.delete(alias); m.updated = now; return {}; }
      if (method === 'GET') {
        const m = this.model(name);
        if (!m.aliases.has(alias)) throw invalid(`Registered model alias ${alias} not found.`);
        return { model_version: this.viewVersion(m, this.version(m, m.aliases.get(alias))) };
      }
    }
    throw new MlflowError(404, 'ENDPOINT_NOT_FOUND', `No API route for ${method} /api/2.0/mlflow/${ep}`);
  }
}

module.exports = { Mlflow };
