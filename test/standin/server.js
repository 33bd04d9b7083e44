#!/usr/bin/env node
'use strict';
// mlplat stand-in cluster: Kubernetes API (+KServe, Argo, Jobs), MLflow registry REST,
// OTLP/HTTP traces, Prometheus metrics and an admin API on one port; S3 (s3rver) on another.
// See README.md for the contract.

const http = require('http');
const https = require('https');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const S3rver = require('s3rver');

const U = require('./lib/util');
const R = require('./lib/resources');
const { E, ApiError } = require('./lib/errors');
const { Store } = require('./lib/store');
const { Kube } = require('./lib/kube');
const kserve = require('./lib/kserve');
const { Argo, Jobs, Plans, admitJob } = require('./lib/argo');
const { Rbac } = require('./lib/rbac');
const { Mlflow } = require('./lib/mlflow');
const builtin = require('./lib/builtin');
const { Metrics } = require('./lib/metrics');
const { Faults, Holds } = require('./lib/faults');
const T = require('./lib/table');
const { Pruner } = require('./lib/prune');

// ---------------------------------------------------------------- options
function parseArgs(argv) {
  const o = { crdSchemas: path.join(__dirname, '..', 'schemas'), port: 0, s3Port: 0, tlsPort: null, tlsCert: null, tlsKey: null, host: '127.0.0.1', seed: 1, stateDir: null, token: null, readyDelayMs: 200,
    argoStepMs: 100, continueTtlMs: 60000, nsDeleteMs: 300, jobDeleteMs: 300, watchMaxS: 60, s3Buckets: 'models,artifacts,mlflow', domain: 'example.com', logFile: true };
  const map = { '--port': 'port', '--s3-port': 's3Port', '--host': 'host', '--seed': 'seed', '--state-dir': 'stateDir', '--token': 'token',
    '--ready-delay-ms': 'readyDelayMs', '--argo-step-ms': 'argoStepMs', '--continue-ttl-ms': 'continueTtlMs', '--ns-delete-ms': 'nsDeleteMs', '--job-delete-ms': 'jobDeleteMs',
    '--watch-max-s': 'watchMaxS', '--tls-port': 'tlsPort', '--crd-schemas': 'crdSchemas', '--tls-cert': 'tlsCert', '--tls-key': 'tlsKey', '--s3-buckets': 's3Buckets', '--domain': 'domain' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i], v;
    if (a === '--help' || a === '-h') { console.log('usage: server.js [options]\n' + ((fs.readFileSync(path.join(__dirname, 'README.md'), 'utf8').split('\n## Options')[1] || '').split('\n## ')[0])); process.exit(0); }
    if (a === '--no-log-file') { o.logFile = false; continue; }
    if (a.includes('=')) [a, v] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)];
    const k = map[a];
    if (!k) { console.error(`standin: unknown option ${a}`); process.exit(2); }
    if (v === undefined) v = argv[++i];
    if (v === undefined) { console.error(`standin: ${a} needs a value`); process.exit(2); }
    o[k] = ['host', 'stateDir', 'token', 's3Buckets', 'domain', 'tlsCert', 'tlsKey', 'crdSchemas'].includes(k) ? v : Number(v);
    if (typeof o[k] === 'number' && !Number.isFinite(o[k])) { console.error(`standin: ${a} needs a number`); process.exit(2); }
  }
  if (o.host !== '127.0.0.1' && o.host !== 'localhost' && o.host !== '::1') { console.error('standin: listens on loopback only'); process.exit(2); }
  if (!o.stateDir) { o.stateDir = fs.mkdtempSync('/tmp/standin-'); o.stateDirAuto = true; } // removed at exit
  return o;
}

const opt = parseArgs(process.argv.slice(2));
fs.mkdirSync(opt.stateDir, { recursive: true });
const pruner = new Pruner(opt.crdSchemas && fs.existsSync(opt.crdSchemas) ? opt.crdSchemas : null);
if (!pruner.kinds().length) console.error(`standin: no CRD schemas in ${opt.crdSchemas}: unknown CRD fields are kept, not pruned`);
const cfg = { pruner, readyDelayMs: opt.readyDelayMs, argoStepMs: opt.argoStepMs, continueTtlMs: opt.continueTtlMs, nsDeleteMs: opt.nsDeleteMs, jobDeleteMs: opt.jobDeleteMs, deadlineScale: 1, watchMaxS: opt.watchMaxS, domain: opt.domain };

// ---------------------------------------------------------------- state
let rng = U.makeRng(opt.seed);
const rngProxy = () => rng();
cfg.rng = rngProxy;
const res = (kind) => R.RESOURCES.find((r) => r.kind === kind);
const plans = new Plans();
let isvc, argo, jobs;
const store = new Store({
  hooks: {
    admit(r, old, obj) {
      if (r.kind === 'Namespace') {
        obj.metadata.labels = { ...(obj.metadata.labels || {}), 'kubernetes.io/metadata.name': obj.metadata.name };
        obj.spec = obj.spec || {};
        if (!obj.spec.finalizers) obj.spec.finalizers = ['kubernetes'];
        if (!old) obj.status = { phase: 'Active' };
      }
      if (r.kind === 'InferenceService') kserve.admit(old, obj, cfg);
      if (r.kind === 'Secret') {
        // stringData is write-only: merged into data (base64), as the API server does
        if (obj.stringData) {
          obj.data = { ...(obj.data || {}) };
          for (const [key, v] of Object.entries(obj.stringData)) obj.data[key] = Buffer.from(String(v), 'utf8').toString('base64');
          delete obj.stringData;
        }
        if (!obj.type) obj.type = 'Opaque';
      }
    },
    validate(r, old, obj) {
      let causes = [];
      if (r.kind === 'RoleBinding') {
        const rr = obj.roleRef;
        if (!rr || !rr.name) causes.push({ reason: 'FieldValueRequired', field: 'roleRef.name', message: 'Required value' });
        if (!rr || !['Role', 'ClusterRole'].includes(rr.kind)) causes.push({ reason: 'FieldValueNotSupported', field: 'roleRef.kind', message: `Unsupported value: "${(rr && rr.kind) || ''}": supported values: "Role", "ClusterRole"` });
        if (old && !U.deepEqual(old.roleRef, rr)) {
          const o = rr || {};
          causes = [{ reason: 'FieldValueInvalid', field: 'roleRef', message: `Invalid value: rbac.RoleRef{APIGroup:"${o.apiGroup || ''}", Kind:"${o.kind || ''}", Name:"${o.name || ''}"}: cannot change roleRef` }];
        }
      }
      if (r.kind === 'InferenceService') causes = kserve.validate(old, obj);
      if (['ResourceQuota', 'LimitRange', 'NetworkPolicy'].includes(r.kind)) causes = builtin.validate(r.kind, obj);
      if (r.kind === 'Job') causes = admitJob(old, obj);
      if (r.kind === 'Secret' && old && old.immutable === true) {
        if (!U.deepEqual(old.data || {}, obj.data || {})) causes.push({ reason: 'FieldValueForbidden', field: 'data', message: 'Forbidden: field is immutable when `immutable` is set' });
        if (obj.immutable !== true) causes.push({ reason: 'FieldValueForbidden', field: 'immutable', message: 'Forbidden: field is immutable when `immutable` is set' });
      }
      if (r.kind === 'Lease' && obj.spec && obj.spec.leaseDurationSeconds !== undefined && !(Number.isInteger(obj.spec.leaseDurationSeconds) && obj.spec.leaseDurationSeconds > 0)) {
        causes.push({ reason: 'FieldValueInvalid', field: 'spec.leaseDurationSeconds', message: `Invalid value: ${obj.spec.leaseDurationSeconds}: must be greater than 0` });
      }
      if (causes.length) throw E.invalid(r, obj.metadata.name, causes);
    },
    changed(r, rec, type) {
      if (r.kind === 'InferenceService') isvc.changed(rec, type);
      else if (r.kind === 'Workflow') argo.changed(rec, type);
      else if (r.kind === 'Job') jobs.changed(rec, type);
      else if (r.kind === 'ServiceAccount' && type === 'ADDED') isvc.serviceAccountAdded(rec.obj.metadata.namespace, rec.obj.metadata.name);
    },
  },
});
const kube = new Kube(store, cfg);
isvc = new kserve.KServe(store, res('InferenceService'), cfg, new Rbac(store, res));
argo = new Argo(store, res('Workflow'), cfg, plans, new Rbac(store, res));
jobs = new Jobs(store, res('Job'), cfg, plans, new Rbac(store, res));
cfg.jobs = jobs;
cfg.isvc = isvc;
// may a pod pinned to this node (nodeSelector kubernetes.io/hostname) start: it exists, is
// Ready and not cordoned
cfg.nodeSchedulable = (name) => {
  const n = store.get(res('Node'), null, name);
  if (!n) return false;
  const rd = (((n.obj.status || {}).conditions) || []).find((c) => c.type === 'Ready');
  return !(n.obj.spec && n.obj.spec.unschedulable) && Boolean(rd && rd.status === 'True');
};
cfg.s3Write = (o) => seedObject(o);
const mlflow = new Mlflow();
// a revision's share of its InferenceService's traffic, as the simulated KServe reports it
const metrics = new Metrics((ns, name, rev) => {
  const rec = store.get(res('InferenceService'), ns, name);
  const t = ((((rec && rec.obj.status) || {}).components || {}).predictor || {}).traffic || [];
  return t.filter((e) => e.revisionName === rev).reduce((a, e) => a + (Number(e.percent) || 0), 0) / 100;
});
const faults = new Faults(rngProxy);
const holds = new Holds();
let spans = [];
let requestLog = [];
let seq = 0;
let writes = new Map();
const logStream = opt.logFile ? fs.createWriteStream(path.join(opt.stateDir, 'requests.jsonl'), { flags: 'a' }) : null;

function resetAll() {
  for (const t of kube.timers) clearTimeout(t);
  kube.reset(); isvc.reset(); argo.reset(); jobs.reset(); store.reset();
  plans.reset(); mlflow.reset(); metrics.reset(); faults.reset(); holds.release();
  spans = []; requestLog = []; writes = new Map(); seq = 0;
  rng = U.makeRng(opt.seed);
}

// ---------------------------------------------------------------- HTTP plumbing
function send(resp, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  resp.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  resp.end(text);
}

const BUILTIN_ITEM = (r) => !r.crd;
function recJson(rec) {
  if (!rec.json) rec.json = JSON.stringify(rec.obj);
  return rec.json;
}
function itemJson(rec) {
  if (!BUILTIN_ITEM(rec.res)) return recJson(rec);
  if (!rec.itemJson) { const { apiVersion, kind, ...rest } = rec.obj; rec.itemJson = JSON.stringify(rest); }
  return rec.itemJson;
}
function listJson(l) {
  return `{"kind":"${l.res.kind}List","apiVersion":"${l.res.apiVersion}","metadata":${JSON.stringify(l.meta)},"items":[${l.items.map(itemJson).join(',')}]}`;
}

function readBody(req, limit = 3 * 1024 * 1024) {
  return new Promise((resolve, reject) => {
    const chunks = []; let n = 0;
    req.on('data', (c) => { n += c.length; if (n > limit) { reject(new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728')); req.destroy(); } else chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let logBuf = [];
let logTimer = null;
function flushLog() {
  logTimer = null;
  if (logStream && logBuf.length) logStream.write(logBuf.join('\n') + '\n');
  logBuf = [];
}

function logRequest(e) {
  e.seq = ++seq;
  requestLog.push(e);
  if (requestLog.length > 200000) requestLog.splice(0, 100000);
  if (logStream) {
    // Batched: one write per 50 ms instead of one per request keeps the log cheap at load.
    logBuf.push(JSON.stringify(e));
    if (!logTimer) logTimer = setTimeout(flushLog, 50);
  }
  if (e.write && e.kind) {
    const k = `${e.kind}/${e.namespace || ''}/${e.name || ''}`;
    const w = writes.get(k) || { create: 0, update: 0, patch: 0, apply: 0, delete: 0, status: 0 };
    w[e.write] = (w[e.write] || 0) + 1;
    writes.set(k, w);
  }
}

function authorized(req, area) {
  // MLflow's basic-auth app (admin config mlflowBasicAuth "user:password"): HTTP Basic only;
  // a bearer token, even the right one, is refused as the real app refuses it
  if (area === 'mlflow' && cfg.mlflowBasicAuth) return (req.headers.authorization || '') === `Basic ${Buffer.from(cfg.mlflowBasicAuth).toString('base64')}`;
  if (!opt.token) return true;
  return (req.headers.authorization || '') === `Bearer ${opt.token}`;
}

const VERSION = { major: '1', minor: '31', gitVersion: 'v1.31.0-standin', gitCommit: '0000000000000000000000000000000000000000', gitTreeState: 'clean',
  buildDate: '2026-01-01T00:00:00Z', goVersion: 'go1.22.5', compiler: 'gc', platform: 'linux/amd64' };

async function handle(req, resp) {
  const t0 = process.hrtime.bigint();
  const url = new URL(req.url, 'http://127.0.0.1');
  const p = url.pathname;
  const seg = p.split('/').filter(Boolean);
  const entry = { time: new Date().toISOString(), method: req.method, path: req.url };
  const finish = (status, extra) => { Object.assign(entry, extra, { status, ms: Number(process.hrtime.bigint() - t0) / 1e6 }); logRequest(entry); };
  let area;
  if (seg[0] === '_standin') area = 'admin';
  else if (p === '/metrics') area = 'metrics';
  else if (p === '/v1/traces') area = 'otlp';
  else if (seg[0] === 'api' && seg[1] === '2.0' && seg[2] === 'mlflow') area = 'mlflow';
  else if (seg[0] === 'api' || seg[0] === 'apis' || seg[0] === 'version' || seg[0] === 'openapi' || p === '/healthz' || p === '/readyz' || p === '/livez') area = 'kube';
  else area = 'none';

  let raw;
  try { raw = await readBody(req); } catch (e) { send(resp, 413, e.body ? e.body() : { message: String(e) }); return; }

  if (area === 'admin') {
    let r;
    try { r = await admin(req, url, seg.slice(1), raw); } catch (e) { r = { status: 400, body: { error: e.message || String(e) } }; }
    send(resp, r.status, r.body);
    return;
  }
  if (area === 'metrics') { const t = metrics.expose(); resp.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(t) }); resp.end(t); return; }
  if (area === 'otlp') {
    // only rules that name the OTLP path explicitly apply here (a rule with no path is for Kubernetes/MLflow)
    const f = faults.evaluate(req.method, p, null, { explicitPath: true });
    if (f.latencyMs) await sleep(f.latencyMs);
    if (f.drop) { req.socket.destroy(); finish(0, { area, dropped: true, faults: f.rules }); return; }
    if (f.error) { send(resp, f.error.code, f.error.body(), f.error.headers); finish(f.error.code, { area, fault: f.error.reason, faults: f.rules }); return; }
    const r = otlp(req, raw); send(resp, r.status, r.body); finish(r.status, { area, spans: r.n }); return;
  }
  if (area === 'none') { send(resp, 404, E.pathNotFound().body()); finish(404, {}); return; }

  // Kubernetes and MLflow: authentication, then faults, then the real handler.
  const rt = area === 'kube' && (seg[0] === 'api' || seg[0] === 'apis') ? kube.route(p) : null;
  Object.assign(entry, kube.describe(rt));
  if (rt && rt.res && req.method === 'GET') entry.verb = rt.name ? 'get' : (url.searchParams.get('watch') ? 'watch' : 'list');
  if (!authorized(req, area)) {
    if (area === 'mlflow' && cfg.mlflowBasicAuth) {
      // what MLflow's basic-auth app answers (mlflow/server/auth/__init__.py)
      resp.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'WWW-Authenticate': 'Basic realm="mlflow"' });
      resp.end('You are not authenticated. Please see https://www.mlflow.org/docs/latest/auth/index.html#authenticating-to-mlflow on how to authenticate.');
    } else if (area === 'mlflow') send(resp, 401, { error_code: 'UNAUTHENTICATED', message: 'Invalid or missing bearer token' });
    else send(resp, 401, E.unauthorized().body());
    finish(401, { area });
    return;
  }
  const f = faults.evaluate(req.method, p, rt, { verb: entry.verb });
  if (f.rules.length) entry.faults = f.rules;
  if (f.latencyMs) await sleep(f.latencyMs);
  if (f.hold && f.hold.phase === 'before') {
    entry.held = 'before';
    if (await holds.park(f.hold, { method: req.method, path: p }) === 'drop') { req.socket.destroy(); finish(0, { dropped: true }); return; }
  }
  if (f.error) {
    if (area === 'mlflow') {
      const code = f.error.code === 429 ? 'REQUEST_LIMIT_EXCEEDED' : f.error.code === 403 ? 'PERMISSION_DENIED' : f.error.code === 503 ? 'TEMPORARILY_UNAVAILABLE' : 'INTERNAL_ERROR';
      send(resp, f.error.code, { error_code: code, message: f.error.message }, f.error.headers);
    } else send(resp, f.error.code, f.error.body(), f.error.headers);
    finish(f.error.code, { fault: f.error.reason });
    return;
  }

  let out;
  try {
    if (area === 'mlflow') {
      const ep = seg.slice(3).join('/');
      // As MLflow's handlers read a request: a GET with a query string from the query only,
      // anything else (DELETE included) from the JSON body only, the query ignored.
      let params = {};
      if (req.method === 'GET' && [...url.searchParams].length) params = Object.fromEntries(url.searchParams);
      else if (raw.length) {
        try { params = JSON.parse(raw.toString('utf8')); } catch (e) { throw new ApiError(400, 'BadRequest', 'malformed JSON'); }
      }
      const r = mlflow.handle(req.method, ep, params);
      out = { status: r.status, text: JSON.stringify(r.body), extra: { area, mlflow: ep, write: req.method !== 'GET' && r.status === 200 ? 'mlflow' : undefined } };
    } else if (p === '/version') out = { status: 200, text: JSON.stringify(VERSION) };
    else if (p === '/healthz' || p === '/readyz' || p === '/livez') { resp.writeHead(200, { 'Content-Type': 'text/plain' }); resp.end('ok'); finish(200, {}); return; }
    else if (p === '/openapi/v3') out = { status: 200, text: JSON.stringify(R.openapiV3Root()) };
    else if (seg[0] === 'openapi' && seg[1] === 'v3') {
      const doc = R.openapiV3GroupVersion(seg.slice(2).join('/'));
      if (!doc) throw E.pathNotFound();
      out = { status: 200, text: JSON.stringify(doc) };
    } else if (seg[0] === 'openapi') throw E.pathNotFound(); // v2 is not served: kubectl uses v3
    else {
      const r = await kube.handle(req, rt, url, raw);
      if (r.watch) { kube.watch(req, resp, rt, url); finish(200, { verb: 'watch' }); return; }
      const extra = {};
      if (r.write) { extra.write = r.write; entry.fieldManager = url.searchParams.get('fieldManager') || undefined; }
      if (r.rec) { extra.name = r.rec.obj.metadata.name; extra.namespace = r.rec.obj.metadata.namespace; }
      let text;
      if (req.method === 'GET' && T.wantsTable(req) && (r.list || r.rec)) {
        text = JSON.stringify(r.list ? T.table(r.list.res, r.list.items, r.list.meta) : T.table(r.rec.res, [r.rec], { resourceVersion: r.rec.obj.metadata.resourceVersion }));
      } else text = r.list ? listJson(r.list) : r.rec ? recJson(r.rec) : JSON.stringify(r.body);
      out = { status: r.status, text, extra, headers: r.warnings && r.warnings.length ? { Warning: r.warnings } : undefined };
    }
  } catch (e) {
    if (!(e instanceof ApiError)) { console.error('standin: internal error', e); e = E.internal(e.message || String(e)); }
    if (area === 'mlflow') out = { status: e.code, text: JSON.stringify({ error_code: 'BAD_REQUEST', message: e.message }) };
    else out = { status: e.code, text: JSON.stringify(e.body()), headers: e.headers };
  }
  if (f.hold && f.hold.phase === 'after') { entry.held = 'after'; await holds.park(f.hold, { method: req.method, path: p, status: out.status }); }
  if (req.socket.destroyed) {
    // the client went away while the request was held: applied, never answered
    finish(out.status, { ...out.extra, dropped: true });
    return;
  }
  if (f.drop) {
    // The request took effect; the client never hears about it.
    finish(out.status, { ...out.extra, dropped: true });
    req.socket.destroy();
    return;
  }
  resp.writeHead(out.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(out.text), ...(out.headers || {}) });
  resp.end(out.text);
  finish(out.status, out.extra);
}

// ---------------------------------------------------------------- OTLP/HTTP JSON
function otlp(req, raw) {
  if (req.method !== 'POST') return { status: 405, body: { message: 'method not allowed' } };
  const ct = (req.headers['content-type'] || '').toLowerCase();
  if (!ct.startsWith('application/json')) return { status: 415, body: { message: 'only application/json OTLP is supported by the stand-in' } };
  let doc;
  try { doc = JSON.parse(raw.toString('utf8')); } catch (e) { return { status: 400, body: { message: 'invalid JSON' } }; }
  const flat = (attrs) => Object.fromEntries((attrs || []).map((a) => [a.key, a.value ? Object.values(a.value)[0] : null]));
  let n = 0;
  for (const rs of doc.resourceSpans || []) {
    const resource = flat(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        spans.push({ service: resource['service.name'], resource, scope: ss.scope && ss.scope.name, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || '',
          name: s.name, kind: s.kind, startTimeUnixNano: s.startTimeUnixNano, endTimeUnixNano: s.endTimeUnixNano, attributes: flat(s.attributes), status: s.status || {} });
        n++;
      }
    }
  }
  if (spans.length > 20000) spans.splice(0, spans.length - 20000);
  return { status: 200, body: { partialSuccess: {} }, n };
}

// ---------------------------------------------------------------- S3 (s3rver) and seeding
let s3 = null;
let s3Port = 0; // the front's port (what clients use)
let s3Inner = 0; // s3rver itself, behind the front
let s3Front = null;
// s3rver accepts any V4 signature; the front checks them against this pair (s3rver's own
// default account), so a client that signs wrongly is refused as real S3 would refuse it.
const S3_KEYS = { S3RVER: 'S3RVER' };
const s3Dir = path.join(opt.stateDir, 's3');
const buckets = opt.s3Buckets.split(',').filter(Boolean);

function s3Request(method, p, body, headers) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port: s3Inner, method, path: p, headers: { ...headers, 'Content-Length': body ? body.length : 0 } }, (resp) => {
      const c = []; resp.on('data', (d) => c.push(d)); resp.on('end', () => resolve({ status: resp.statusCode, headers: resp.headers, body: Buffer.concat(c) }));
    });
    r.on('error', reject);
    r.setTimeout(5000, () => r.destroy(new Error('s3 timeout')));
    r.end(body);
  });
}

async function seedObject(b) {
  if (!b.bucket || !b.key) throw new Error('bucket and key are required');
  const content = b.contentBase64 !== undefined ? Buffer.from(b.contentBase64, 'base64') : Buffer.from(b.content !== undefined ? String(b.content) : '', 'utf8');
  const sha256 = crypto.createHash('sha256').update(content).digest('hex');
  const headers = { 'Content-Type': b.contentType || 'application/octet-stream' };
  // sha256Meta: false stores no digest (the client must download and hash); checksum: true
  // makes HEAD/GET with x-amz-checksum-mode: ENABLED answer x-amz-checksum-sha256 (base64), as
  // real S3 does for an object uploaded with a SHA-256 checksum.
  if (b.sha256Meta !== false) headers['x-amz-meta-sha256'] = sha256;
  if (b.checksum) headers['x-amz-meta-standin-checksum-sha256'] = crypto.createHash('sha256').update(content).digest('base64');
  for (const [k, v] of Object.entries(b.metadata || {})) headers[`x-amz-meta-${k.toLowerCase()}`] = String(v);
  const key = b.key.split('/').map(encodeURIComponent).join('/');
  const r = await s3Request('PUT', `/${encodeURIComponent(b.bucket)}/${key}`, content, headers);
  if (r.status !== 200) throw new Error(`s3 PUT failed with ${r.status}: ${r.body.toString()}`);
  return { bucket: b.bucket, key: b.key, size: content.length, etag: r.headers.etag, sha256, uri: `s3://${b.bucket}/${b.key}` };
}

function resetS3() {
  for (const b of buckets) {
    const d = path.join(s3Dir, b);
    if (fs.existsSync(d)) for (const f of fs.readdirSync(d)) fs.rmSync(path.join(d, f), { recursive: true, force: true });
  }
}

// The S3 front: every S3 request passes through here to s3rver, so it is logged (area "s3")
// and fault rules with {s3: true} apply; V4 signatures are checked (see S3_KEYS).
function sigv4Check(req, url) {
  const auth = req.headers.authorization || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return 'malformed';
  const [, akid, date, region, service, signed, sig] = m;
  const secret = S3_KEYS[akid];
  if (!secret) return 'unknown key';
  const amzDate = req.headers['x-amz-date'] || '';
  if (amzDate.slice(0, 8) !== date) return 'date mismatch';
  const q = [...url.searchParams].map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join('&');
  const names = signed.split(';');
  if (!names.includes('host')) return 'host not signed';
  const canon = [req.method, url.pathname, q, ...names.map((n) => `${n}:${String(req.headers[n] || '').trim().replace(/\s+/g, ' ')}`), '', signed, req.headers['x-amz-content-sha256'] || ''].join('\n');
  const sts = ['AWS4-HMAC-SHA256', amzDate, `${date}/${region}/${service}/aws4_request`, crypto.createHash('sha256').update(canon).digest('hex')].join('\n');
  let k = crypto.createHmac('sha256', `AWS4${secret}`).update(date).digest();
  for (const part of [region, service, 'aws4_request']) k = crypto.createHmac('sha256', k).update(part).digest();
  return crypto.createHmac('sha256', k).update(sts).digest('hex') === sig ? 'valid' : 'invalid';
}

async function s3FrontHandle(req, resp) {
  const t0 = process.hrtime.bigint();
  const url = new URL(req.url, 'http://127.0.0.1');
  const entry = { time: new Date().toISOString(), area: 's3', method: req.method, path: req.url };
  let bytes = 0;
  const finish = (status, extra) => { Object.assign(entry, extra, { status, bytes, ms: Number(process.hrtime.bigint() - t0) / 1e6 }); logRequest(entry); };
  const s3Error = (status, code, message, headers = {}) => {
    const text = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><Resource>${url.pathname}</Resource></Error>`;
    resp.writeHead(status, { 'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(text), ...headers });
    resp.end(req.method === 'HEAD' ? undefined : text);
    finish(status, { fault: code });
  };
  if (req.headers.authorization) {
    entry.sigv4 = sigv4Check(req, url);
    if (entry.sigv4 !== 'valid') { req.resume(); s3Error(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.'); return; }
  }
  const f = faults.evaluate(req.method, url.pathname, null, { s3: true });
  if (f.rules.length) entry.faults = f.rules;
  if (f.latencyMs) await sleep(f.latencyMs);
  if (f.error) {
    req.resume();
    const c = f.error.code;
    s3Error(c, c === 503 ? 'SlowDown' : c === 429 ? 'TooManyRequests' : 'InternalError', c === 503 ? 'Please reduce your request rate.' : 'We encountered an internal error. Please try again.', f.error.headers);
    return;
  }
  const checksumMode = String(req.headers['x-amz-checksum-mode'] || '').toUpperCase() === 'ENABLED';
  const up = http.request({ host: '127.0.0.1', port: s3Inner, method: req.method, path: req.url, headers: req.headers }, (ur) => {
    const h = { ...ur.headers };
    const cs = h['x-amz-meta-standin-checksum-sha256'];
    delete h['x-amz-meta-standin-checksum-sha256'];
    if (cs && checksumMode) h['x-amz-checksum-sha256'] = cs;
    if (f.drop) { ur.resume(); req.socket.destroy(); finish(ur.statusCode, { dropped: true }); return; }
    resp.writeHead(ur.statusCode, h);
    ur.on('data', (d) => { bytes += d.length; });
    ur.pipe(resp);
    ur.on('end', () => finish(ur.statusCode, {}));
  });
  up.on('error', (e) => { if (!resp.headersSent) s3Error(502, 'BadGateway', String(e.message)); });
  req.pipe(up);
}

// ---------------------------------------------------------------- admin API
async function admin(req, url, seg, raw) {
  const m = req.method;
  const body = raw.length ? JSON.parse(raw.toString('utf8')) : {};
  const route = seg.join('/');
  const q = url.searchParams;
  if (route === 'health') return { status: 200, body: { ok: true, port: server.address().port, s3Port, seed: opt.seed, resourceVersion: String(store.rv), stateDir: opt.stateDir } };
  if (route === 'config') {
    if (m === 'PUT' || m === 'PATCH' || m === 'POST') {
      for (const k of ['readyDelayMs', 'argoStepMs', 'continueTtlMs', 'nsDeleteMs', 'jobDeleteMs', 'deadlineScale', 'watchMaxS', 'bookmarkMs', 'bookmarks', 'watchDelayMs', 'listEndlessContinue', 'listPadBytes']) if (body[k] !== undefined) cfg[k] = Number(body[k]);
      // KServe's defaultDeploymentMode (inferenceservice-config), for InferenceServices without the annotation
      if (body.deploymentMode !== undefined) {
        if (!['Serverless', 'RawDeployment'].includes(body.deploymentMode)) return { status: 400, body: { error: 'deploymentMode: Serverless or RawDeployment' } };
        cfg.deploymentMode = body.deploymentMode;
      }
      if (body.mlflowBasicAuth !== undefined) cfg.mlflowBasicAuth = body.mlflowBasicAuth ? String(body.mlflowBasicAuth) : null;
      if (body.kserveFrozen !== undefined) {
        const was = !!cfg.kserveFrozen;
        cfg.kserveFrozen = !!body.kserveFrozen;
        if (was && !cfg.kserveFrozen) isvc.thaw();
      }
    }
    // Only the settings: cfg also carries the controllers (cfg.isvc refers back to cfg, which
    // made this answer a 500 "circular structure"), the random source and hooks. The basic-auth
    // password is not shown; whether one is set is.
    const shown = Object.fromEntries(Object.entries(cfg).filter(([k, v]) => k !== 'mlflowBasicAuth' && (v === null || ['number', 'string', 'boolean'].includes(typeof v))));
    shown.mlflowBasicAuth = Boolean(cfg.mlflowBasicAuth);
    return { status: 200, body: shown };
  }
  if (route === 'reset' && m === 'POST') { resetAll(); resetS3(); return { status: 200, body: { ok: true } }; }
  if (route === 'faults') {
    if (m === 'GET') return { status: 200, body: { rules: faults.rules } };
    if (m === 'DELETE') { faults.reset(); return { status: 200, body: { ok: true } }; }
    if (m === 'PUT') { faults.rules = []; }
    if (m === 'POST' || m === 'PUT') {
      const rules = Array.isArray(body.rules) ? body.rules : [body];
      return { status: 200, body: { rules: rules.map((r) => faults.add(r)) } };
    }
  }
  if (route === 'watch/compact' && m === 'POST') {
    const rv = store.compact();
    const open = [...store.streams];
    if (body && body.expire) for (const st of open) st.expire(`too old resource version: compacted at ${rv}`);
    return { status: 200, body: { compactedRv: String(rv), expired: body && body.expire ? open.length : 0 } };
  }
  if (route === 'watch/drop' && m === 'POST') {
    const open = [...store.streams];
    for (const st of open) st.kill();
    return { status: 200, body: { dropped: open.length } };
  }
  if (route === 'holds' && m === 'GET') return { status: 200, body: { items: holds.list() } };
  if (route === 'holds/release' && m === 'POST') return { status: 200, body: { released: holds.release(body.rule === undefined ? undefined : Number(body.rule), body.drop ? 'drop' : 'go') } };
  if (seg[0] === 'faults' && seg[1] && m === 'DELETE') { faults.remove(Number(seg[1])); return { status: 200, body: { ok: true } }; }
  if (route === 'requests') {
    if (m === 'DELETE') { requestLog = []; return { status: 200, body: { ok: true } }; }
    const since = Number(q.get('since') || 0);
    let items = requestLog.filter((e) => e.seq > since);
    // write=true: any write (the entries record which: create, update, patch, apply, delete...)
    for (const k of ['method', 'kind', 'namespace', 'name', 'write', 'verb', 'area']) {
      if (!q.get(k)) continue;
      items = k === 'write' && q.get(k) === 'true' ? items.filter((e) => Boolean(e.write)) : items.filter((e) => e[k] === q.get(k));
    }
    return { status: 200, body: { items, seq } };
  }
  if (route === 'writes') return { status: 200, body: Object.fromEntries(writes) };
  if (route === 'objects') {
    const which = q.get('resource');
    const out = [];
    for (const r of R.RESOURCES) if (!which || which === r.plural || which === r.kind) for (const rec of store.list(r, q.get('namespace'))) out.push(rec.obj);
    return { status: 200, body: { items: out } };
  }
  if (route === 'edit' && m === 'POST') {
    // Out-of-band edit: someone changes the object behind mlplat's back. Without `manager` the
    // field ownership is left as it was; with one, it is recorded as that manager's Update.
    const r = R.RESOURCES.find((x) => x.plural === body.resource || x.kind === body.kind);
    if (!r) throw new Error('resource (plural) or kind is required');
    const rec = store.get(r, r.namespaced ? body.namespace : null, body.name);
    if (!rec) return { status: 404, body: { error: 'not found' } };
    let next = body.jsonPatch ? U.jsonPatch(rec.obj, body.jsonPatch) : U.mergePatch(rec.obj, body.patch || {});
    const { rec: out, changed } = store.commit(r, rec, next, body.manager ? { manager: body.manager, operation: 'Update' } : null, { verb: 'edit' });
    return { status: 200, body: { changed, object: out.obj } };
  }
  if (route === 'kserve/storage' && m === 'POST') {
    if (!body.uri) throw new Error('uri is required');
    isvc.setStorage(body.uri, body.bad !== false, body.reason, body.message);
    return { status: 200, body: { bad: [...isvc.badUris.keys()] } };
  }
  if (route === 'argo/plan' && m === 'POST') { plans.add(body); return { status: 200, body: { plans: plans.list.length } }; }
  if (route === 'nodes' && m === 'POST') {
    // POST /_standin/nodes {name, labels, gpus, ready, unschedulable}: make or change a Node
    if (!body.name) throw new Error('name is required');
    const r = res('Node');
    const rec = store.get(r, null, body.name);
    const now = U.nowIso();
    const gpus = String(body.gpus === undefined ? 0 : body.gpus);
    const node = rec ? U.clone(rec.obj) : { apiVersion: 'v1', kind: 'Node', metadata: { name: body.name } };
    node.metadata.labels = { 'kubernetes.io/hostname': body.name, ...(body.labels || (rec && rec.obj.metadata.labels) || {}) };
    node.spec = { ...(node.spec || {}) };
    if (body.unschedulable) node.spec.unschedulable = true; else delete node.spec.unschedulable;
    node.status = { ...(node.status || {}),
      capacity: { cpu: '8', memory: '64Gi', 'nvidia.com/gpu': gpus }, allocatable: { cpu: '8', memory: '64Gi', 'nvidia.com/gpu': gpus },
      conditions: [{ type: 'Ready', status: body.ready === false ? 'False' : 'True', reason: body.ready === false ? 'KubeletNotReady' : 'KubeletReady',
                     message: body.ready === false ? 'container runtime network not ready' : 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now }] };
    const out = store.commit(r, rec || null, node, { manager: 'kubelet', operation: 'Update' }, { verb: 'edit' }).rec;
    return { status: 200, body: { object: out.obj } };
  }
  if (route === 'isvc/hold' && m === 'POST') return { status: 200, body: isvc.hold(body.namespace, body.name, body.hold !== false) };
  if (route === 'jobs/stuck' && m === 'POST') return { status: 200, body: jobs.setStuck(body.namespace, body.name, body.stuck !== false) };
  if (route === 'metrics/revision' && m === 'POST') { metrics.set(body.revision, body); return { status: 200, body: { ok: true } }; }
  if (route === 'spans') {
    if (m === 'DELETE') { spans = []; return { status: 200, body: { ok: true } }; }
    const tid = q.get('traceId');
    return { status: 200, body: { spans: tid ? spans.filter((s) => s.traceId === tid) : spans } };
  }
  if (route === 's3/object' && m === 'POST') return { status: 200, body: await seedObject(body) };
  return { status: 404, body: { error: `no admin route ${m} /_standin/${route}` } };
}

// ---------------------------------------------------------------- start / stop
function onRequest(req, resp) {
  handle(req, resp).catch((e) => {
    console.error('standin: unhandled', e);
    if (!resp.headersSent) send(resp, 500, E.internal(String(e)).body());
  });
}
const server = http.createServer(onRequest);
let tlsServer = null;
server.keepAliveTimeout = 30000;
server.headersTimeout = 35000;
server.requestTimeout = 120000;

async function main() {
  fs.mkdirSync(s3Dir, { recursive: true });
  s3 = new S3rver({ address: opt.host, port: 0, silent: true, directory: s3Dir, configureBuckets: buckets.map((name) => ({ name })) });
  const addr = await s3.run();
  s3Inner = addr.port;
  s3Front = http.createServer((req, resp) => s3FrontHandle(req, resp).catch((e) => {
    console.error('standin: s3 front', e);
    if (!resp.headersSent) { resp.writeHead(500); resp.end(); }
  }));
  s3Front.keepAliveTimeout = 30000;
  await new Promise((resolve, reject) => { s3Front.once('error', reject); s3Front.listen(opt.s3Port, opt.host, resolve); });
  s3Port = s3Front.address().port;
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(opt.port, opt.host, resolve); });
  const ports = { port: server.address().port, s3Port };
  let line = `standin ready port=${ports.port} s3_port=${s3Port}`;
  if (opt.tlsPort !== null) {
    // The same routes over HTTPS. kubectl only sends kubeconfig credentials over TLS, so
    // token-authenticated kubectl needs this; the certificate is self-signed for 127.0.0.1.
    let cert = opt.tlsCert, key = opt.tlsKey;
    if (!cert || !key) {
      cert = path.join(opt.stateDir, 'tls.crt'); key = path.join(opt.stateDir, 'tls.key');
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
        '-subj', '/CN=standin', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert], { stdio: 'ignore', timeout: 10000 });
    }
    tlsServer = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, onRequest);
    tlsServer.keepAliveTimeout = 30000;
    await new Promise((resolve, reject) => { tlsServer.once('error', reject); tlsServer.listen(opt.tlsPort, opt.host, resolve); });
    ports.tlsPort = tlsServer.address().port; ports.tlsCert = cert;
    line += ` tls_port=${ports.tlsPort}`;
  }
  fs.writeFileSync(path.join(opt.stateDir, 'ports.json'), JSON.stringify(ports));
  console.log(line);
}

let stopping = false;
async function stop(sig) {
  if (stopping) return;
  stopping = true;
  resetAll();
  server.close();
  server.closeAllConnections();
  if (tlsServer) { tlsServer.close(); tlsServer.closeAllConnections(); }
  if (s3Front) { s3Front.close(); s3Front.closeAllConnections(); }
  try { await Promise.race([s3.close(), sleep(2000)]); } catch (e) { /* ignore */ }
  if (logTimer) clearTimeout(logTimer);
  flushLog();
  if (logStream) await new Promise((r) => logStream.end(r));
  if (opt.stateDirAuto) fs.rmSync(opt.stateDir, { recursive: true, force: true });
  console.log(`standin stopped (${sig})`);
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

main().catch((e) => { console.error('standin: failed to start:', e.message); process.exit(1); });
