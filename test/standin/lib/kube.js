'use strict';
// Kubernetes REST routes: discovery, GET/LIST/WATCH, POST, PUT, PATCH (apply, merge, json,
// strategic for built-ins), DELETE, with the real Status error bodies.

const YAML = require('yaml');
const U = require('./util');
const R = require('./resources');
const { E, ApiError } = require('./errors');
const { ownablePaths } = require('./store');
const S = require('./selectors');
const T = require('./table');

const NS = R.RESOURCES.find((r) => r.kind === 'Namespace');

class Kube {
  constructor(store, cfg) {
    this.store = store;
    this.cfg = cfg;            // {continueTtlMs, nsDeleteMs, watchMaxS, bookmarkMs, bookmarks}
    this.continues = new Map(); // token -> {items, rv, t, remaining}
    this.timers = new Set();
  }

  reset() {
    this.continues.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  later(ms, fn) {
    const t = setTimeout(() => { this.timers.delete(t); fn(); }, ms);
    this.timers.add(t);
  }

  // Parse a Kubernetes path. Returns null when it is not one of ours.
  route(pathname) {
    const seg = pathname.split('/').filter((s) => s.length).map(decodeURIComponent);
    let group, version, rest;
    if (seg[0] === 'api') {
      if (seg.length === 1) return { discovery: 'api' };
      group = ''; version = seg[1]; rest = seg.slice(2);
    } else if (seg[0] === 'apis') {
      if (seg.length === 1) return { discovery: 'apis' };
      if (seg.length === 2) return { discovery: 'group', group: seg[1] };
      group = seg[1]; version = seg[2]; rest = seg.slice(3);
    } else return null;
    if (!rest.length) return { discovery: 'resources', group, version };
    let ns = null;
    if (rest[0] === 'namespaces' && rest.length >= 3 && !(group === '' && rest.length <= 3 && rest[2] === 'status')) {
      // /namespaces/{ns}/{plural}...  (but /api/v1/namespaces/{name}/status is the namespace's own status)
      ns = rest[1]; rest = rest.slice(2);
    }
    const res = R.findResource(group, version, rest[0]);
    if (!res) return { notFound: true };
    if (ns && !res.namespaced) return { notFound: true };
    const name = rest[1] || null;
    const sub = rest[2] || null;
    if (rest.length > 3 || (sub && !(sub === 'status' && res.status))) return { notFound: true };
    return { res, ns, name, sub };
  }

  describe(rt) {
    if (!rt || !rt.res) return {};
    return { kind: rt.res.kind, namespace: rt.ns || undefined, name: rt.name || undefined };
  }

  // Drop (or with fieldValidation=Strict, reject) fields the CRD schema does not declare.
  // Returns warnings for the `Warning` header (fieldValidation=Warn, the default).
  pruneCrd(res, obj, q) {
    if (!res.crd || !this.cfg.pruner) return [];
    const unknown = this.cfg.pruner.prune(res.kind, obj);
    if (!unknown.length) return [];
    const mode = q.get('fieldValidation') || 'Warn';
    if (mode === 'Strict') {
      throw E.badRequest(`${res.kind} in version "${res.version}" cannot be handled as a ${res.kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`);
    }
    return mode === 'Ignore' ? [] : unknown.map((f) => `299 - "unknown field \\"${f}\\""`);
  }

  // ?dryRun=All runs the write through admission and defaulting without storing it.
  dry(q) {
    const d = q.getAll('dryRun');
    if (!d.length) return false;
    if (d.some((v) => v !== 'All')) throw E.invalidRaw(`dryRun: Unsupported value: "${d.find((v) => v !== 'All')}": supported values: "All"`);
    return true;
  }

  managerFrom(q, req) {
    const fm = q.get('fieldManager');
    if (fm) return fm;
    const ua = req.headers['user-agent'] || '';
    return ua.split('/')[0] || 'unknown';
  }

  parseBody(raw, ct) {
    if (!raw || !raw.length) throw E.badRequest('the request body is empty');
    const text = raw.toString('utf8');
    try {
      if (ct.startsWith('application/apply-patch+yaml') || ct.includes('yaml')) {
        // JSON is YAML, and most apply bodies are JSON: JSON.parse reads them ~50x faster than
        // the YAML parser, which was most of an apply's CPU. Anything else is YAML's to read.
        if (text.trimStart()[0] === '{') { try { return JSON.parse(text); } catch (e) { /* YAML after all */ } }
        return YAML.parse(text);
      }
      return JSON.parse(text);
    } catch (e) {
      throw E.badRequest(`error decoding request body: ${e.message.split('\n')[0]}`);
    }
  }

  checkKind(res, obj) {
    if (!U.isObj(obj)) throw E.badRequest('the request body must be an object');
    if (obj.kind !== undefined && obj.kind !== res.kind) throw E.badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${res.apiVersion})`);
    if (obj.apiVersion !== undefined && obj.apiVersion !== res.apiVersion) throw E.badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${res.apiVersion})`);
    if (!U.isObj(obj.metadata)) obj.metadata = {};
  }

  checkNamespace(res, ns, obj, name) {
    if (!res.namespaced) { delete obj.metadata.namespace; return; }
    if (obj.metadata.namespace && obj.metadata.namespace !== ns) throw E.badRequest('the namespace of the provided object does not match the namespace sent on the request');
    obj.metadata.namespace = ns;
  }

  requireNamespaceOpen(res, ns, name) {
    if (!res.namespaced) return;
    const nsRec = this.store.get(NS, null, ns);
    if (!nsRec) throw E.notFound(NS, ns);
    if (nsRec.obj.metadata.deletionTimestamp) {
      throw E.forbidden(res, name, `${res.qualified} "${name}" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`);
    }
  }

  async handle(req, rt, url, raw) {
    const q = url.searchParams;
    const m = req.method;
    if (rt.discovery) {
      if (m !== 'GET') throw E.methodNotAllowed();
      let doc = null;
      if (rt.discovery === 'api') doc = R.apiVersionsDoc();
      else if (rt.discovery === 'apis') doc = R.apiGroupListDoc();
      else if (rt.discovery === 'group') doc = R.apiGroupDoc(rt.group);
      else doc = R.resourceListDoc(rt.group, rt.version);
      if (!doc) throw E.pathNotFound();
      return { status: 200, body: doc };
    }
    if (rt.notFound) throw E.pathNotFound();
    const { res, ns, name, sub } = rt;
    const isList = !name;
    if (m === 'GET') {
      if (isList) {
        if (q.get('watch') === 'true' || q.get('watch') === '1') return { watch: true };
        return this.list(res, ns, q);
      }
      const rec = this.store.get(res, ns, name);
      if (!rec) throw E.notFound(res, name);
      return { status: 200, rec };
    }
    const ct = (req.headers['content-type'] || 'application/json').toLowerCase();
    if (m === 'POST' && isList) return this.create(res, ns, this.parseBody(raw, ct), q, req);
    if (m === 'PUT' && !isList) return this.update(res, ns, name, sub, this.parseBody(raw, ct), q, req);
    if (m === 'PATCH' && !isList) return this.patch(res, ns, name, sub, raw, ct, q, req);
    if (m === 'DELETE' && !isList && !sub) return this.remove(res, ns, name, raw && raw.length ? this.parseBody(raw, 'application/json') : null, this.dry(q), q);
    throw E.methodNotAllowed();
  }

  // ---- LIST with selectors and consistent, expiring pagination ----
  list(res, ns, q) {
    let labelReqs, fieldReqs;
    try {
      labelReqs = S.parseLabelSelector(q.get('labelSelector') || '');
      fieldReqs = S.parseFieldSelector(q.get('fieldSelector') || '', res.kind === 'Namespace' ? ['status.phase'] : []);
    } catch (e) {
      if (e instanceof S.SelectorError) throw E.badRequest(e.message);
      throw e;
    }
    const limit = Math.max(0, parseInt(q.get('limit') || '0', 10) || 0);
    const cont = q.get('continue');
    let items, rv;
    if (cont) {
      let tok;
      try { tok = JSON.parse(Buffer.from(cont, 'base64').toString('utf8')); } catch (e) { tok = null; }
      if (!tok || tok.v !== 'meta.k8s.io/v1' || !tok.id) throw E.badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
      const snap = this.continues.get(tok.id);
      if (!snap || Date.now() - snap.t > this.cfg.continueTtlMs) {
        this.continues.delete(tok.id);
        throw E.expired();
      }
      this.continues.delete(tok.id);
      items = snap.items; rv = snap.rv;
    } else {
      items = this.store.list(res, ns).filter((r) => S.matchLabels(labelReqs, r.obj.metadata.labels) && S.matchFields(fieldReqs, r.obj));
      rv = String(this.store.rv);
    }
    const meta = { resourceVersion: rv };
    let page = items;
    // test hook listEndlessContinue: every page of a paginated LIST names a next page (the
    // same objects again), so the chain never ends
    const endless = !!this.cfg.listEndlessContinue && limit > 0;
    if (limit > 0 && (items.length > limit || endless)) {
      page = items.slice(0, limit);
      const rest = items.length > limit ? items.slice(limit) : items;
      const id = `${rv}-${Math.random().toString(36).slice(2)}`;
      this.continues.set(id, { items: rest, rv, t: Date.now() });
      if (this.continues.size > 5000) this.continues.delete(this.continues.keys().next().value);
      const last = page[page.length - 1];
      meta.continue = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: Number(rv), start: `${last ? last.sortKey : ''}\u0000`, id })).toString('base64');
      if (!labelReqs.length && !fieldReqs.length) meta.remainingItemCount = rest.length;
    }
    // test hook listPadBytes: pages this large (a field clients ignore carries the bulk)
    if (this.cfg.listPadBytes > 0) meta.padding = 'x'.repeat(Number(this.cfg.listPadBytes));
    return { status: 200, list: { res, meta, items: page } };
  }

  // ---- CREATE ----
  create(res, ns, obj, q, req) {
    this.checkKind(res, obj);
    if (q.get('force')) throw E.invalidRaw('CreateOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch');
    this.checkNamespace(res, ns, obj);
    if (!obj.metadata.name) {
      if (obj.metadata.generateName) {
        const rng = this.cfg.rng;
        const abc = 'bcdfghjklmnpqrstvwxz2456789';
        let s = '';
        for (let i = 0; i < 5; i++) s += abc[Math.floor(rng() * abc.length)];
        obj.metadata.name = obj.metadata.generateName + s;
      } else {
        throw E.invalid(res, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
      }
    }
    const name = obj.metadata.name;
    this.requireNamespaceOpen(res, ns, name);
    if (this.store.get(res, ns, name)) throw E.alreadyExists(res, name);
    if (res.status) delete obj.status;
    const warnings = this.pruneCrd(res, obj, q);
    const { rec } = this.store.commit(res, null, obj, { manager: this.managerFrom(q, req), operation: 'Update' }, { verb: 'create', dryRun: this.dry(q) });
    return { status: 201, rec, write: this.dry(q) ? null : 'create', warnings };
  }

  // ---- UPDATE (PUT) ----
  update(res, ns, name, sub, obj, q, req) {
    this.checkKind(res, obj);
    const old = this.store.get(res, ns, name);
    if (obj.metadata.name && obj.metadata.name !== name) throw E.badRequest(`the name of the object (${obj.metadata.name}) does not match the name on the URL (${name})`);
    this.checkNamespace(res, ns, obj);
    if (!old) throw E.notFound(res, name);
    const rv = obj.metadata.resourceVersion;
    if (!rv && res.crd) throw E.invalid(res, name, [{ reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
    if (rv && rv !== old.obj.metadata.resourceVersion) throw E.conflict(res, name);
    let next;
    if (sub === 'status') { next = U.clone(old.obj); next.status = obj.status; }
    else { next = obj; if (res.status) { if (old.obj.status !== undefined) next.status = U.clone(old.obj.status); else delete next.status; } }
    next.metadata.name = name;
    const warnings = this.pruneCrd(res, next, q);
    const { rec, changed } = this.store.commit(res, old, next, { manager: this.managerFrom(q, req), operation: 'Update', subresource: sub || undefined }, { verb: 'update', dryRun: this.dry(q) });
    return { status: 200, rec, write: changed && !this.dry(q) ? (sub ? 'status' : 'update') : null, warnings };
  }

  // ---- PATCH ----
  patch(res, ns, name, sub, raw, ct, q, req) {
    const old = this.store.get(res, ns, name);
    const isApply = ct.startsWith('application/apply-patch+yaml');
    if (!isApply && q.get('force') !== null) throw E.invalidRaw('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch', { group: 'meta.k8s.io', kind: 'PatchOptions', causes: [{ reason: 'FieldValueForbidden', message: 'Forbidden: may not be specified for non-apply patch', field: 'force' }] });
    if (isApply) return this.apply(res, ns, name, sub, old, this.parseBody(raw, ct), q);
    let next;
    const patchBody = this.parseBody(raw, 'application/json');
    if (!old) throw E.notFound(res, name);
    if (ct.startsWith('application/merge-patch+json') || (ct.startsWith('application/strategic-merge-patch+json') && !res.crd)) {
      if (!U.isObj(patchBody)) throw E.badRequest('merge patch must be a JSON object');
      next = U.mergePatch(old.obj, patchBody);
    } else if (ct.startsWith('application/json-patch+json')) {
      try { next = U.jsonPatch(old.obj, patchBody); } catch (e) {
        if (e.patchError) throw E.invalidRaw(`the server rejected our request due to an error in our request`, { causes: [{ message: e.patchError }] });
        throw e;
      }
    } else {
      throw E.unsupportedMedia(ct);
    }
    const prv = U.getPath(patchBody, ['metadata', 'resourceVersion']);
    if (prv && prv !== old.obj.metadata.resourceVersion) throw E.conflict(res, name);
    if (!U.isObj(next) || !U.isObj(next.metadata)) throw E.badRequest('patch produced an invalid object');
    if (next.metadata.name !== name) throw E.badRequest(`the name of the object (${next.metadata.name}) does not match the name on the URL (${name})`);
    if (sub === 'status') { const n = U.clone(old.obj); n.status = next.status; next = n; }
    else if (res.status) { if (old.obj.status !== undefined) next.status = U.clone(old.obj.status); else delete next.status; }
    next.apiVersion = res.apiVersion; next.kind = res.kind;
    const warnings = this.pruneCrd(res, next, q);
    const { rec, changed } = this.store.commit(res, old, next, { manager: this.managerFrom(q, req), operation: 'Update', subresource: sub || undefined }, { verb: 'patch', dryRun: this.dry(q) });
    return { status: 200, rec, write: changed && !this.dry(q) ? (sub ? 'status' : 'patch') : null, warnings };
  }

  apply(res, ns, name, sub, old, applied, q) {
    const manager = q.get('fieldManager');
    if (!manager) {
      throw E.invalidRaw('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        { group: 'meta.k8s.io', kind: 'PatchOptions', causes: [{ reason: 'FieldValueRequired', message: 'Required value: is required for apply patch', field: 'fieldManager' }] });
    }
    const force = q.get('force') === 'true';
    if (!U.isObj(applied)) throw E.badRequest('error decoding YAML: the request body must be an object');
    if (!applied.apiVersion || !applied.kind) throw E.badRequest(`error decoding YAML: Object 'Kind' is missing in '${JSON.stringify(applied)}'`);
    this.checkKind(res, applied);
    if (applied.metadata.name !== undefined && applied.metadata.name !== name) throw E.badRequest(`the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`);
    this.checkNamespace(res, ns, applied);
    const rv = applied.metadata.resourceVersion;
    if (rv && (!old || rv !== old.obj.metadata.resourceVersion)) throw E.conflict(res, name);
    if (!old) this.requireNamespaceOpen(res, ns, name);
    if (!old && sub === 'status') throw E.notFound(res, name);
    const warnings = this.pruneCrd(res, applied, q);
    const paths = new Set(ownablePaths(applied, res, sub || undefined));
    const conflicts = this.store.applyConflicts(res, old, manager, paths, applied);
    if (conflicts.length && !force) {
      const byMgr = new Map();
      for (const c of conflicts) {
        const k = `conflict with "${c.manager}" using ${c.apiVersion}`;
        if (!byMgr.has(k)) byMgr.set(k, []);
        byMgr.get(k).push(c.field);
      }
      let msg;
      if (conflicts.length === 1) msg = `Apply failed with 1 conflict: ${[...byMgr.keys()][0]}: ${conflicts[0].field}`;
      else msg = `Apply failed with ${conflicts.length} conflicts: ` + [...byMgr].map(([k, fs]) => `${k.replace('conflict with', 'conflicts with')}:\n${fs.map((f) => `- ${f}`).join('\n')}`).join('\n');
      throw new ApiError(409, 'Conflict', msg, { name, group: res.group || undefined, kind: res.plural,
        causes: conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: `conflict with "${c.manager}" using ${c.apiVersion}`, field: c.field })) });
    }
    const next = old ? U.clone(old.obj) : { apiVersion: res.apiVersion, kind: res.kind, metadata: { name } };
    if (res.namespaced) next.metadata.namespace = ns;
    for (const k of paths) {
      const p = U.keyPath(k);
      const v = U.getPath(applied, p);
      if (U.isObj(v) && Object.keys(v).length === 0 && U.getPath(next, p) !== undefined) continue;
      U.setPath(next, p, U.clone(v));
    }
    // Fields this manager applied before and no longer applies are removed, unless someone else owns them.
    if (old) {
      const mine = old.managers.find((m) => m.manager === manager && m.operation === 'Apply' && (m.subresource || '') === (sub || ''));
      if (mine) {
        for (const k of mine.paths) {
          if (paths.has(k) || [...paths].some((q2) => U.overlaps(k, q2))) continue;
          const others = old.managers.some((m) => m !== mine && [...m.paths].some((o) => U.overlaps(o, k)));
          if (!others) U.deletePath(next, U.keyPath(k));
        }
      }
    }
    if (!old && res.status) delete next.status;
    if (!U.isObj(next.metadata)) next.metadata = { name };
    const { rec, changed } = this.store.commit(res, old, next, { manager, operation: 'Apply', paths, force, conflicts, subresource: sub || undefined }, { verb: 'apply', dryRun: this.dry(q) });
    return { status: old ? 200 : 201, rec, write: changed && !this.dry(q) ? (old ? 'apply' : 'create') : null, warnings };
  }

  // ---- DELETE ----
  remove(res, ns, name, opts, dryRun, q) {
    const rec = this.store.get(res, ns, name);
    if (!rec) throw E.notFound(res, name);
    if (dryRun) {
      if (res.kind === 'Namespace') return { status: 200, rec };
      return { status: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, group: res.group || undefined, kind: res.plural, uid: rec.obj.metadata.uid } } };
    }
    const pre = opts && opts.preconditions;
    if (pre && pre.uid && pre.uid !== rec.obj.metadata.uid) throw E.conflict(res, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${rec.obj.metadata.uid}`);
    if (pre && pre.resourceVersion && pre.resourceVersion !== rec.obj.metadata.resourceVersion) throw E.conflict(res, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${rec.obj.metadata.resourceVersion}`);
    if (res.kind === 'Namespace') {
      if (!rec.obj.metadata.deletionTimestamp) {
        const next = U.clone(rec.obj);
        next.metadata.deletionTimestamp = U.nowIso();
        next.status = { ...(next.status || {}), phase: 'Terminating' };
        const { rec: r2 } = this.store.commit(res, rec, next, null, { verb: 'delete', internal: true });
        this.later(this.cfg.nsDeleteMs, () => this.finishNamespace(name));
        return { status: 200, rec: r2, write: 'delete' };
      }
      return { status: 200, rec };
    }
    // a Job deleted with propagationPolicy Foreground (query or DeleteOptions) waits for its
    // pods: it is returned with deletionTimestamp and the foregroundDeletion finalizer (Job
    // controller: lib/argo.js); a second DELETE of a terminating Job returns it unchanged
    const policy = (opts && opts.propagationPolicy) || (q && q.get('propagationPolicy'));
    if (res.kind === 'Job' && this.cfg.jobs && (policy === 'Foreground' || rec.obj.metadata.deletionTimestamp)) {
      const was = Boolean(rec.obj.metadata.deletionTimestamp);
      return { status: 200, rec: this.cfg.jobs.foreground(rec), write: was ? null : 'delete' };
    }
    // an InferenceService whose deletion KServe's finalizer holds (lib/kserve.js)
    const held = res.kind === 'InferenceService' && this.cfg.isvc ? this.cfg.isvc.terminate(rec) : null;
    if (held) return { status: 200, rec: held.rec, write: held.write };
    this.store.remove(res, rec);
    return { status: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, group: res.group || undefined, kind: res.plural, uid: rec.obj.metadata.uid } }, write: 'delete' };
  }

  // The namespace controller's sweep: every object in the namespace is deleted; one a
  // finalizer holds (a held InferenceService, a stuck Job, anything already terminating with
  // finalizers) stays, and so does the namespace, Terminating, with the two conditions the
  // real controller sets naming what remains; it sweeps again after nsDeleteMs.
  finishNamespace(name) {
    const nsRec = this.store.get(NS, null, name);
    if (!nsRec || !nsRec.obj.metadata.deletionTimestamp) return;
    const content = new Map(); // "plural.group" -> count
    const fins = new Map();    // finalizer -> count
    for (const r of R.RESOURCES) {
      if (!r.namespaced) continue;
      for (const rec of this.store.list(r, name)) {
        let held = null;
        if (r.kind === 'InferenceService' && this.cfg.isvc) { const h = this.cfg.isvc.terminate(rec); held = h && h.rec; }
        else if (r.kind === 'Job' && this.cfg.jobs && this.cfg.jobs.stuck.has(`${name}/${rec.obj.metadata.name}`)) held = this.cfg.jobs.foreground(rec);
        else if (rec.obj.metadata.deletionTimestamp && (rec.obj.metadata.finalizers || []).length) held = rec;
        if (!held) { this.store.remove(r, rec); continue; }
        const key = r.group ? `${r.plural}.${r.group}` : r.plural;
        content.set(key, (content.get(key) || 0) + 1);
        for (const f of held.obj.metadata.finalizers || []) fins.set(f, (fins.get(f) || 0) + 1);
      }
    }
    if (!content.size) { this.store.remove(NS, nsRec); return; }
    const now = U.nowIso();
    const list = (m, fmt) => [...m.keys()].sort().map((k) => fmt(k, m.get(k))).join(', ');
    const next = U.clone(nsRec.obj);
    next.status = { ...(next.status || {}), phase: 'Terminating', conditions: [
      { type: 'NamespaceContentRemaining', status: 'True', lastTransitionTime: now, reason: 'SomeResourcesRemain',
        message: `Some resources are remaining: ${list(content, (k, n) => `${k} has ${n} resource instances`)}` },
      { type: 'NamespaceFinalizersRemaining', status: 'True', lastTransitionTime: now, reason: 'SomeFinalizersRemain',
        message: `Some content in the namespace has finalizers remaining: ${list(fins, (k, n) => `${k} in ${n} resource instances`)}` }] };
    const said = (o) => ((o.status || {}).conditions || []).map((c) => `${c.type}=${c.message}`).join('\n');
    if (said(next) !== said(nsRec.obj)) this.store.commit(NS, nsRec, next, null, { verb: 'update', internal: true });
    this.later(this.cfg.nsDeleteMs, () => this.finishNamespace(name));
  }

  // ---- WATCH (bounded; enough for kubectl delete --wait and informers in tests) ----
  watch(req, resp, rt, url) {
    const q = url.searchParams;
    const { res, ns } = rt;
    let labelReqs, fieldReqs;
    try {
      labelReqs = S.parseLabelSelector(q.get('labelSelector') || '');
      fieldReqs = S.parseFieldSelector(q.get('fieldSelector') || '', res.kind === 'Namespace' ? ['status.phase'] : []);
    } catch (e) { throw E.badRequest(e.message); }
    const timeout = Math.min(Number(q.get('timeoutSeconds') || this.cfg.watchMaxS), this.cfg.watchMaxS) * 1000;
    resp.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache, private' });
    resp.flushHeaders(); // clients wait for the headers before they start reading events
    const match = (ev) => ev.res === res && (!ns || ev.ns === ns) && S.matchLabels(labelReqs, ev.object.metadata.labels) && S.matchFields(fieldReqs, ev.object);
    const asTable = T.wantsTable(req);
    // watchDelayMs (test hook): every line of an open stream is written that much later, in
    // order, as a loaded API server's watch lags behind the writes it has already answered
    const later = (fn) => {
      const delay = Number(this.cfg.watchDelayMs) || 0;
      if (delay > 0) setTimeout(fn, delay); else fn();
    };
    const write = (line) => later(() => { if (!resp.writableEnded) resp.write(line); });
    const send = (ev) => {
      if (!match(ev)) return;
      const object = asTable ? T.table(res, [{ obj: ev.object }], { resourceVersion: ev.object.metadata.resourceVersion }) : ev.object;
      write(JSON.stringify({ type: ev.type, object }) + '\n');
    };
    // allowWatchBookmarks=true: a BOOKMARK (the kind, only metadata.resourceVersion: the store's
    // latest) every bookmarkMs and just before the server ends the watch, as the apiserver's
    // watch cache sends them, so a client whose selector matched nothing still moves its version on.
    // bookmarks: 0 (test hook) ignores the flag, as a server without bookmarks may (it is a hint):
    // a quiet watch is then empty until the server ends it
    const bookmarks = q.get('allowWatchBookmarks') === 'true' && this.cfg.bookmarks !== 0;
    const bookmark = () => write(JSON.stringify({ type: 'BOOKMARK', object: { kind: res.kind,
      apiVersion: res.group ? `${res.group}/${res.version}` : res.version, metadata: { resourceVersion: String(this.store.rv) } } }) + '\n');
    const from = q.get('resourceVersion');
    if (from && from !== '0') {
      const fromN = Number(from);
      // too old: before the oldest event kept, or at/before a compaction (admin POST watch/compact)
      if ((this.store.events.length && this.store.events[0].rv > fromN + 1 && fromN < this.store.rv) || fromN < this.store.compactedRv) {
        resp.write(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${Math.max(this.store.compactedRv, this.store.events.length ? this.store.events[0].rv - 1 : 0)})`, reason: 'Expired', code: 410 } }) + '\n');
        resp.end(); return;
      }
      for (const ev of this.store.events) if (ev.rv > fromN) send(ev);
    } else {
      for (const rec of this.store.list(res, ns)) send({ type: 'ADDED', res, ns: rec.obj.metadata.namespace, object: rec.obj });
    }
    const w = (ev) => send(ev);
    this.store.watchers.add(w);
    const bt = bookmarks ? setInterval(bookmark, Math.max(10, Number(this.cfg.bookmarkMs) || 1000)) : null;
    // admin: watch/drop cuts the connection mid-stream; watch/compact {expire: true} ends it with ERROR 410,
    // as an API server does when the watch cache can no longer serve the client's version
    const stream = {
      kill: () => { done(); resp.destroy(); },
      expire: (message) => { done(); resp.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'Expired', code: 410 } }) + '\n'); },
    };
    this.store.streams.add(stream);
    const done = () => { this.store.watchers.delete(w); this.store.streams.delete(stream); clearTimeout(t); if (bt) clearInterval(bt); };
    const t = setTimeout(() => { done(); if (bookmarks) bookmark(); later(() => resp.end()); }, timeout);
    // the client went away: the response's close (a request's own close can come as soon as its
    // body is read, before this stream began, and then never again)
    req.on('close', done);
    resp.on('close', done);
  }
}

module.exports = { Kube };
