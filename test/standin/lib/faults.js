'use strict';
// Fault rules set at run time. Randomness comes from the seeded PRNG so a run is reproducible.
//   {method, path, resource, verb: get|list|watch, status: 500|503|429|400|422, rate, retryAfter, latencyMs, latencyRate, drop, forbidden, times, s3,
//    hold: 'before'|'after'}
// hold parks a matching request until the admin API releases it: 'before' it is applied (a
// request in flight), or 'after' it was applied with its answer not yet sent (an answer in
// flight).  Tests use it to stop a leader at an exact point of an external write.

const { E } = require('./errors');

const VERB = { GET: 'get', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };

class Faults {
  constructor(rng) { this.rng = rng; this.reset(); }
  reset() { this.rules = []; this.nextId = 1; }

  add(rule) {
    const r = { ...rule, id: this.nextId++, fired: 0 };
    if (r.path) new RegExp(r.path); // validate early
    if (r.method) new RegExp(`^(${r.method})$`, 'i');
    if (r.status !== undefined && ![500, 503, 429, 400, 422].includes(Number(r.status))) throw new Error('status must be 500, 503, 429, 400 or 422');
    if (r.hold !== undefined && !['before', 'after'].includes(r.hold)) throw new Error('hold must be "before" or "after"');
    this.rules.push(r);
    return r;
  }
  remove(id) { this.rules = this.rules.filter((r) => r.id !== id); }

  draw(rate) {
    const x = this.rng();
    return x < (rate === undefined ? 1 : Number(rate));
  }

  // Decide what happens to a request. info: {method, path, rt} (rt = kube route or null).
  // opts.verb: a Kubernetes GET's verb (get, list or watch), for rules that name one.
  // Returns {latencyMs, error (ApiError|{mlflow}), drop, ruleIds}.
  // opts.explicitPath: only rules with a path (OTLP: rules written for it, never the catch-alls).
  // opts.s3: the request came through the S3 front; only rules with {s3: true} apply there,
  // and only rules without it elsewhere.
  evaluate(method, path, rt, opts = {}) {
    const out = { latencyMs: 0, error: null, drop: false, hold: null, rules: [] };
    for (const r of this.rules) {
      if (opts.explicitPath && !r.path) continue;
      if (r.times !== undefined && r.fired >= r.times) continue;
      if (!!r.s3 !== !!opts.s3) continue;
      if (r.method && !new RegExp(`^(${r.method})$`, 'i').test(method)) continue;
      if (r.path && !new RegExp(r.path).test(path)) continue;
      if (r.resource && !(rt && rt.res && (rt.res.plural === r.resource || rt.res.kind === r.resource))) continue;
      // verb: a GET told apart by its query (a watch and a LIST share their path)
      if (r.verb && r.verb !== opts.verb) continue;
      let fired = false;
      // latencyRate makes the delay a spike on a fraction of requests instead of every one
      if (r.latencyMs && (r.latencyRate === undefined || this.draw(r.latencyRate))) { out.latencyMs += Number(r.latencyMs); fired = true; }
      if (!out.error && r.forbidden && rt && rt.res) {
        const res = rt.res;
        const verb = method === 'GET' && !rt.name ? 'list' : VERB[method] || method.toLowerCase();
        const who = r.user || 'system:serviceaccount:mlplat-system:mlplat';
        const where = res.namespaced && rt.ns ? ` in the namespace "${rt.ns}"` : (res.namespaced ? '' : ' at the cluster scope');
        out.error = E.forbidden(res, rt.name, `${res.qualified}${rt.name ? ` "${rt.name}"` : ''} is forbidden: User "${who}" cannot ${verb} resource "${res.plural}" in API group "${res.group}"${where}`);
        fired = true;
      } else if (!out.error && r.status && this.draw(r.rate)) {
        const s = Number(r.status);
        // 400 and 422: a request the API server (or an admission policy) refuses for good, as
        // its own Status says it
        const kind = rt && rt.res ? rt.res.kind : 'object';
        out.error = s === 429 ? E.tooMany(Number(r.retryAfter || 1)) : s === 503 ? E.unavailable()
          : s === 422 ? E.invalidRaw(`${kind} is invalid: spec: Invalid value: injected fault`, { kind, causes: [{ reason: 'FieldValueInvalid', field: 'spec', message: 'Invalid value: injected fault' }] })
          : s === 400 ? E.badRequest(`${kind} refused: injected fault`) : E.internal('injected fault');
        fired = true;
      }
      if (!out.hold && r.hold) { out.hold = { phase: r.hold, rule: r.id }; fired = true; }
      if (!out.drop && r.drop !== undefined && r.drop !== false && this.draw(r.drop === true ? 1 : r.drop)) { out.drop = true; fired = true; }
      if (fired) { r.fired++; out.rules.push(r.id); }
    }
    return out;
  }
}

// Requests parked by a hold rule, until released (all, or those of one rule).
class Holds {
  constructor() { this.parked = []; this.nextId = 1; }
  park(hold, info) {
    return new Promise((resolve) => {
      this.parked.push({ id: this.nextId++, rule: hold.rule, phase: hold.phase, ...info, at: new Date().toISOString(), resolve });
    });
  }
  list() { return this.parked.map(({ resolve: _r, ...h }) => h); }
  // how: 'go' (carry on) or 'drop' (a held-before request is never applied; the socket is closed)
  release(rule, how = 'go') {
    const out = this.parked.filter((h) => rule === undefined || h.rule === rule);
    this.parked = this.parked.filter((h) => !out.includes(h));
    for (const h of out) h.resolve(how);
    return out.length;
  }
}

module.exports = { Faults, Holds };
