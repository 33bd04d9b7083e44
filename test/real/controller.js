#!/usr/bin/env node
'use strict';
// The controllers a real cluster runs on its nodes, for the real-peers suite:
// KServe (with Knative Serving under it) and Argo Workflows, writing status
// to a real kube-apiserver the way they do — only faster, and without pods.
//
//   controller.js --url URL --ca FILE --token-file FILE [--ready-delay-ms N]
//                 [--finalizer-delay-ms N] [--port-file FILE]
//                 [--slow-prefix P --slow-ms N]   a Workflow named P... runs N ms
//                 [--webhook-cert F --webhook-key F --webhook-port-file F]
//                                 also serve KServe's defaulting webhook (webhook.js)
//
// What it reproduces (see docs/fidelity.md):
// - KServe adds the finalizer "inferenceservice.finalizers" to every
//   InferenceService and removes it only after its cleanup, so a delete
//   lingers with a deletionTimestamp (longer while a test holds it).
// - KServe's status.observedGeneration is copied from the child Knative
//   Service, whose generation counts the child's own spec changes (the
//   predictor, and the InferenceService's labels and annotations propagated
//   into the revision template), not the InferenceService's
//   metadata.generation (kserve#6081).
// - A new child spec makes a new revision: Ready goes Unknown, then True
//   after the ready delay (or False for a storage URI marked bad); traffic,
//   latestCreated/Ready/RolledoutRevision and URLs as serverless mode reports.
// - RawDeployment mode (the annotation serving.kserve.io/deploymentMode, or
//   the default a test sets, as KServe's inferenceservice-config does): no
//   Knative revisions or traffic; status.observedGeneration is the child
//   Deployment's, PredictorReady follows its Available/Progressing conditions
//   (ReplicaSetUpdated while it rolls out, NewReplicaSetAvailable, or False
//   with ProgressDeadlineExceeded for a model that does not load), the URL
//   http://<name>-<namespace>.<domain> once ready (KServe's PropagateRawStatus).
// - Argo: a Workflow goes Pending -> Running -> Succeeded with a node per
//   task, phase labels set, as the workflow controller writes them.
//
// A loopback control port (port-file) lets a test steer it:
//   POST /storage?uri=U&bad=1     a storage URI that fails to load (bad=0 repairs)
//   POST /hold?ns=N&name=X&on=1   keep the finalizer on (a stuck cleanup)
//   POST /child-bump?ns=N&name=X  the child's generation moves on its own
//   POST /default-mode?mode=M     Serverless or RawDeployment for InferenceServices without the annotation
//   POST /freeze?on=1             the KServe controller is down (status stays as it is); on=0 restarts it
//   GET  /state                   what the controller thinks
//   POST /metrics/revision {revision, namespace, behaviour, rps, service}
//                                 script a revision's serving metrics
//   GET  /metrics                 per-revision metrics in the shape of the
//                                 knative-opencensus preset (queue-proxy's
//                                 revision_request_count/_latencies), each
//                                 revision serving its share of the split
//                                 this controller last wrote into status
//                                 (test/standin/lib/metrics.js: one model
//                                 of healthy, regressing and silent traffic)

const fs = require('fs');
const http = require('http');
const https = require('https');
const crypto = require('crypto');
const path = require('path');
const { Metrics } = require(path.join(__dirname, '..', 'standin', 'lib', 'metrics.js'));
const { serveWebhook } = require(path.join(__dirname, 'webhook.js'));

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const BASE = new URL(args.url);
const CA = fs.readFileSync(args.ca);
const TOKEN = fs.readFileSync(args['token-file'], 'utf8').trim();
const READY_MS = Number(args['ready-delay-ms'] || 500);
const FIN_MS = Number(args['finalizer-delay-ms'] || 300);
const FINALIZER = 'inferenceservice.finalizers';
const DOMAIN = 'example.com';
const agent = new https.Agent({ ca: CA, keepAlive: true, maxSockets: 8 });

function log(...a) { console.log(new Date().toISOString(), ...a); }

function request(method, path, body, ctype) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? null : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const req = https.request({
      agent, host: BASE.hostname, port: BASE.port, method, path,
      headers: { Authorization: `Bearer ${TOKEN}`, Accept: 'application/json',
        ...(data ? { 'Content-Type': ctype || 'application/json', 'Content-Length': data.length } : {}) },
      timeout: 30000,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json = null;
        try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
        resolve({ status: res.statusCode, json, text });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

// LIST then WATCH a resource in all namespaces; onEvent(type, obj) per change.
function informer(path, onEvent) {
  let rv = null;
  async function list() {
    const r = await request('GET', path);
    if (r.status !== 200) throw new Error(`LIST ${path}: ${r.status} ${r.text.slice(0, 200)}`);
    rv = r.json.metadata.resourceVersion;
    for (const o of r.json.items) onEvent('ADDED', o);
  }
  function watch() {
    return new Promise((resolve) => {
      const req = https.request({
        agent: new https.Agent({ ca: CA }), host: BASE.hostname, port: BASE.port, method: 'GET',
        path: `${path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion=${rv}`,
        headers: { Authorization: `Bearer ${TOKEN}`, Accept: 'application/json' },
      }, (res) => {
        if (res.statusCode !== 200) { rv = null; res.resume(); res.on('end', resolve); return; }
        let buf = '';
        res.on('data', (c) => {
          buf += c;
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i); buf = buf.slice(i + 1);
            if (!line.trim()) continue;
            let ev;
            try { ev = JSON.parse(line); } catch (e) { continue; }
            if (ev.type === 'ERROR') { rv = null; continue; }   // 410 Gone: list again
            rv = ev.object.metadata.resourceVersion;
            if (ev.type !== 'BOOKMARK') onEvent(ev.type, ev.object);
          }
        });
        res.on('end', resolve);
        res.on('error', resolve);
      });
      req.on('error', () => resolve());
      req.end();
    });
  }
  (async () => {
    for (;;) {
      try {
        if (rv === null) await list();
        await watch();
      } catch (e) {
        log('informer', path, e.message);
        rv = null;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();
}

// One serialised work queue per object key, so status writes never race each other.
const queues = new Map();
function enqueue(key, fn) {
  const prev = queues.get(key) || Promise.resolve();
  const next = prev.then(fn).catch((e) => log('reconcile', key, e.stack || e.message));
  queues.set(key, next);
  next.then(() => { if (queues.get(key) === next) queues.delete(key); });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowIso = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const hash = (v) => crypto.createHash('sha256').update(JSON.stringify(v)).digest('hex');

// ---------------------------------------------------------------- KServe
const ISVC = '/apis/serving.kserve.io/v1beta1';
const isvcPath = (ns, name, sub) => `${ISVC}/namespaces/${ns}/inferenceservices/${name}${sub ? '/' + sub : ''}`;
const badUris = new Map();
const held = new Set();
const kstate = new Map();   // ns/name -> child {gen, specHash, canary, revisions[], rolled, prev, uid}
let defaultMode = 'Serverless';
let frozen = false;
const isRaw = (o) => ((o.metadata.annotations || {})['serving.kserve.io/deploymentMode'] || defaultMode) === 'RawDeployment';

// The parts of an InferenceService KServe puts into the child Knative Service:
// the predictor (less the traffic split) and the labels and annotations it
// propagates into the revision template.
function childSpec(o) {
  const p = JSON.parse(JSON.stringify((o.spec && o.spec.predictor) || {}));
  delete p.canaryTrafficPercent;
  const ann = { ...(o.metadata.annotations || {}) };
  delete ann['kubectl.kubernetes.io/last-applied-configuration'];
  return { predictor: p, labels: o.metadata.labels || {}, annotations: ann };
}

const COND_TYPES = ['IngressReady', 'LatestDeploymentReady', 'PredictorConfigurationReady', 'PredictorReady', 'PredictorRouteReady', 'Ready', 'RoutesReady'];
const RAW_COND_TYPES = ['IngressReady', 'PredictorReady', 'Ready'];
function conditions(prevList, status, reason, message, types) {
  const prev = new Map((prevList || []).map((c) => [c.type, c]));
  const now = nowIso();
  return (types || COND_TYPES).map((type) => {
    let s = status, r = reason, m = message;
    // the route stays ready on the previous revision while a new one is not
    if (['IngressReady', 'PredictorRouteReady', 'RoutesReady'].includes(type) && prev.get(type) && prev.get(type).status === 'True') { s = 'True'; r = null; m = null; }
    const c = { lastTransitionTime: prev.has(type) && prev.get(type).status === s ? prev.get(type).lastTransitionTime : now, status: s, type };
    if (r) c.reason = r;
    if (m) c.message = m;
    if (!['Ready', 'PredictorReady', 'IngressReady'].includes(type)) c.severity = 'Info';
    return c;
  });
}

async function patchStatus(ns, name, status) {
  const r = await request('PATCH', isvcPath(ns, name, 'status'), { status }, 'application/merge-patch+json');
  if (r.status !== 200 && r.status !== 404) log('status', ns, name, r.status, r.text.slice(0, 300));
  return r;
}

async function isvcReconcile(ns, name) {
  if (frozen) return;
  const g = await request('GET', isvcPath(ns, name));
  if (g.status === 404) { kstate.delete(`${ns}/${name}`); return; }
  if (g.status !== 200) throw new Error(`GET isvc ${ns}/${name}: ${g.status}`);
  const o = g.json;
  const key = `${ns}/${name}`;
  const fins = o.metadata.finalizers || [];
  if (o.metadata.deletionTimestamp) {
    if (!fins.includes(FINALIZER) || held.has(key)) return;
    await sleep(FIN_MS);   // KServe's cleanup before it lets go
    const idx = fins.indexOf(FINALIZER);
    const r = await request('PATCH', isvcPath(ns, name), [
      { op: 'test', path: '/metadata/resourceVersion', value: o.metadata.resourceVersion },
      { op: 'remove', path: `/metadata/finalizers/${idx}` }], 'application/json-patch+json');
    if (r.status === 409 || r.status === 422) enqueue(key, () => isvcReconcile(ns, name));
    kstate.delete(key);
    return;
  }
  if (!fins.includes(FINALIZER)) {
    const r = await request('PATCH', isvcPath(ns, name), o.metadata.finalizers
      ? [{ op: 'test', path: '/metadata/resourceVersion', value: o.metadata.resourceVersion }, { op: 'add', path: '/metadata/finalizers/-', value: FINALIZER }]
      : [{ op: 'test', path: '/metadata/resourceVersion', value: o.metadata.resourceVersion }, { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] }],
    'application/json-patch+json');
    if (r.status !== 200) { enqueue(key, () => isvcReconcile(ns, name)); return; }
    return;   // the update comes back as a watch event
  }
  let s = kstate.get(key);
  if (!s || s.uid !== o.metadata.uid) {
    s = { uid: o.metadata.uid, gen: 0, specHash: null, canary: undefined, revisions: [], rolled: null, prev: null, token: 0, readyFor: null };
    kstate.set(key, s);
  }
  const spec = childSpec(o);
  const h = hash(spec.predictor) + hash([spec.labels, spec.annotations]);
  const predHash = hash(spec.predictor) + hash(spec.annotations);
  const canary = o.spec && o.spec.predictor ? o.spec.predictor.canaryTrafficPercent : undefined;
  if (h !== s.specHash || canary !== s.canary || s.bump) {
    // the child Knative Service is updated: its generation moves on
    s.gen += 1;
    s.bump = false;
    const last = s.revisions[s.revisions.length - 1];
    if (!last || last.hash !== predHash) s.revisions.push({ name: `${name}-predictor-${String(s.revisions.length + 1).padStart(5, '0')}`, hash: predHash });
    s.specHash = h; s.canary = canary;
  } else if (s.readyFor === s.gen && !s.uriChanged) {
    return;   // nothing new for the child: no status write (KServe writes only on change)
  }
  s.uriChanged = false;
  if (isRaw(o)) {
    // the Deployment rolls out a new ReplicaSet
    const gen = s.gen;
    await patchStatus(ns, name, {
      observedGeneration: gen, deploymentMode: 'RawDeployment',
      conditions: conditions(o.status && o.status.conditions, 'Unknown', 'ReplicaSetUpdated', `ReplicaSet "${name}-predictor-${gen}" is progressing.`, RAW_COND_TYPES),
      modelStatus: { states: { activeModelState: (o.status && o.status.url) ? 'Loaded' : 'Pending', targetModelState: 'Loading' }, transitionStatus: 'InProgress' },
    });
    const token = ++s.token;
    setTimeout(() => enqueue(key, () => (s.token === token ? rawSettle(ns, name, s, gen) : null)), READY_MS);
    return;
  }
  const latest = s.revisions[s.revisions.length - 1].name;
  const st = JSON.parse(JSON.stringify(o.status || {}));
  const comp = ((st.components = st.components || {}).predictor = st.components.predictor || {});
  comp.latestCreatedRevision = latest;
  const gen = s.gen;
  await patchStatus(ns, name, {
    observedGeneration: gen, deploymentMode: 'Serverless',
    components: { predictor: { ...comp } },
    conditions: conditions(st.conditions, 'Unknown', 'RevisionMissing', `Configuration "${name}-predictor" is waiting for a Revision to become ready.`),
    modelStatus: { states: { activeModelState: comp.latestReadyRevision ? 'Loaded' : 'Pending', targetModelState: 'Loading' }, transitionStatus: 'InProgress' },
  });
  const token = ++s.token;
  setTimeout(() => enqueue(key, () => (s.token === token ? isvcSettle(ns, name, s, gen, latest) : null)), READY_MS);
}

async function rawSettle(ns, name, s, gen) {
  if (frozen) return;
  const g = await request('GET', isvcPath(ns, name));
  if (g.status !== 200 || g.json.metadata.deletionTimestamp || s.gen !== gen) return;
  const o = g.json;
  const uri = o.spec.predictor && o.spec.predictor.model && o.spec.predictor.model.storageUri;
  const bad = badUris.get(uri);
  const prev = o.status && o.status.conditions;
  const out = { observedGeneration: gen, deploymentMode: 'RawDeployment' };
  if (bad) {
    out.conditions = conditions(prev, 'False', 'ProgressDeadlineExceeded', `ReplicaSet "${name}-predictor-${gen}" has timed out progressing.`, RAW_COND_TYPES);
    out.modelStatus = { states: { activeModelState: 'FailedToLoad', targetModelState: 'FailedToLoad' }, transitionStatus: 'BlockedByFailedLoad',
      lastFailureInfo: { reason: 'ModelLoadFailed', message: bad, location: uri, time: nowIso() } };
  } else {
    out.url = `http://${name}-${ns}.${DOMAIN}`;
    out.address = { url: `http://${name}-predictor.${ns}.svc.cluster.local` };
    out.components = { predictor: { url: `http://${name}-predictor-${ns}.${DOMAIN}` } };
    out.conditions = conditions(prev, 'True', null, null, RAW_COND_TYPES);
    out.modelStatus = { states: { activeModelState: 'Loaded', targetModelState: 'Loaded' }, transitionStatus: 'UpToDate', copies: { failedCopies: 0, totalCopies: 1 } };
  }
  await patchStatus(ns, name, out);
  s.readyFor = gen;
}

async function isvcSettle(ns, name, s, gen, latest) {
  if (frozen) return;
  const g = await request('GET', isvcPath(ns, name));
  if (g.status !== 200 || g.json.metadata.deletionTimestamp || s.gen !== gen) return;
  const o = g.json;
  const spec = o.spec.predictor || {};
  const uri = spec.model && spec.model.storageUri;
  const bad = badUris.get(uri);
  const host = `${ns}.${DOMAIN}`;
  const st = JSON.parse(JSON.stringify(o.status || {}));
  const comp = ((st.components = st.components || {}).predictor = st.components.predictor || {});
  const out = { observedGeneration: gen, url: `http://${name}.${host}`, address: { url: `http://${name}.${ns}.svc.cluster.local` } };
  comp.url = `http://${name}-predictor.${host}`;
  comp.address = { url: `http://${name}-predictor.${ns}.svc.cluster.local` };
  const now = nowIso();
  if (bad) {
    out.conditions = conditions(st.conditions, 'False', 'RevisionFailed', `Revision "${latest}" failed with message: ${bad}.`);
    out.modelStatus = { states: { activeModelState: comp.latestReadyRevision ? 'Loaded' : 'FailedToLoad', targetModelState: 'FailedToLoad' }, transitionStatus: 'BlockedByFailedLoad',
      lastFailureInfo: { reason: 'ModelLoadFailed', message: bad, location: uri, modelRevisionName: latest, time: now } };
    if (!comp.traffic) comp.traffic = [];
  } else {
    comp.latestReadyRevision = latest;
    const canary = spec.canaryTrafficPercent;
    const rolled = comp.latestRolledoutRevision;
    if (canary !== undefined && canary !== 100 && rolled && rolled !== latest) {
      comp.traffic = [
        { latestRevision: true, percent: canary, revisionName: latest, tag: 'latest', url: `http://latest-${name}-predictor.${host}` },
        { latestRevision: false, percent: 100 - canary, revisionName: rolled, tag: 'prev', url: `http://prev-${name}-predictor.${host}` }];
    } else {
      comp.traffic = [{ latestRevision: true, percent: 100, revisionName: latest }];
      if (rolled !== latest) {
        if (rolled) comp.previousRolledoutRevision = rolled;
        comp.latestRolledoutRevision = latest;
      }
    }
    out.conditions = conditions(st.conditions, 'True', null, null);
    out.modelStatus = { states: { activeModelState: 'Loaded', targetModelState: 'Loaded' }, transitionStatus: 'UpToDate', copies: { failedCopies: 0, totalCopies: 1 } };
  }
  out.components = { predictor: comp };
  const r = await patchStatus(ns, name, out);
  if (r.status === 200) s.traffic = comp.traffic || [];
  s.readyFor = gen;
}

// ---------------------------------------------------------------- Argo Workflows
const WF = '/apis/argoproj.io/v1alpha1';
const wfPath = (ns, name) => `${WF}/namespaces/${ns}/workflows/${name}`;
const STEP_MS = Number(args['argo-step-ms'] || 300);
// A Workflow whose name starts with SLOW_PREFIX stays Running for SLOW_MS (the
// soak cancels such runs while they run, as the stand-in's argo plans allow).
const SLOW_PREFIX = args['slow-prefix'] || null;
const SLOW_MS = Number(args['slow-ms'] || 30000);

async function wfWrite(o, status, phase) {
  const labels = { ...(o.metadata.labels || {}), 'workflows.argoproj.io/phase': phase,
    'workflows.argoproj.io/completed': ['Succeeded', 'Failed', 'Error'].includes(phase) ? 'true' : 'false' };
  const r = await request('PATCH', wfPath(o.metadata.namespace, o.metadata.name),
    { metadata: { labels, resourceVersion: o.metadata.resourceVersion }, status }, 'application/merge-patch+json');
  return r.status === 200 ? r.json : null;
}

function wfTasks(o) {
  const spec = o.spec || {};
  const entry = (spec.templates || []).find((t) => t.name === spec.entrypoint) || {};
  if (entry.dag && Array.isArray(entry.dag.tasks)) return entry.dag.tasks.map((t) => t.name);
  if (Array.isArray(entry.steps)) return entry.steps.flat().map((t) => t.name);
  return [];
}

async function wfReconcile(ns, name) {
  let g = await request('GET', wfPath(ns, name));
  if (g.status !== 200) return;
  let o = g.json;
  const phase = (o.status && o.status.phase) || '';
  if (['Succeeded', 'Failed', 'Error'].includes(phase) || o.metadata.deletionTimestamp) return;
  const shutdown = o.spec && o.spec.shutdown;
  const id = o.metadata.name;
  const started = (o.status && o.status.startedAt) || nowIso();
  if (shutdown === 'Terminate' || shutdown === 'Stop') {
    await wfWrite(o, { ...(o.status || {}), phase: 'Failed', finishedAt: nowIso(), message: `Stopped with strategy '${shutdown}'` }, 'Failed');
    return;
  }
  if (phase === '') {
    await wfWrite(o, { phase: 'Pending', startedAt: started, progress: '0/1' }, 'Pending');
    return;
  }
  await sleep(STEP_MS);
  g = await request('GET', wfPath(ns, name));
  if (g.status !== 200) return;
  o = g.json;
  const tasks = wfTasks(o);
  const nodes = { [id]: { id, name: id, displayName: id, type: tasks.length ? 'DAG' : 'Pod', templateName: o.spec.entrypoint, phase: 'Running', startedAt: started } };
  const exit0 = { outputs: { exitCode: '0' } };   // Argo writes a Pod node's exit code as a string
  if (o.status.phase === 'Pending') {
    await wfWrite(o, { ...o.status, phase: 'Running', nodes, progress: `0/${Math.max(tasks.length, 1)}` }, 'Running');
    return;
  }
  const left = SLOW_PREFIX && name.startsWith(SLOW_PREFIX) ? Date.parse(started) + SLOW_MS - Date.now() : 0;
  if (left > 0) {
    // still running: look again later; a shutdown comes as a watch event meanwhile
    setTimeout(() => enqueue(`wf/${ns}/${name}`, () => wfReconcile(ns, name)), left);
    return;
  }
  const finished = nowIso();
  nodes[id] = { ...nodes[id], phase: 'Succeeded', finishedAt: finished, ...(tasks.length ? {} : exit0) };
  for (const t of tasks) {
    const tid = `${id}-${crypto.createHash('sha1').update(t).digest('hex').slice(0, 10)}`;
    nodes[tid] = { id: tid, name: `${id}.${t}`, displayName: t, type: 'Pod', phase: 'Succeeded', startedAt: started, finishedAt: finished, boundaryID: id, ...exit0 };
  }
  await wfWrite(o, { ...o.status, phase: 'Succeeded', finishedAt: finished, nodes, progress: `${Math.max(tasks.length, 1)}/${Math.max(tasks.length, 1)}` }, 'Succeeded');
}

// ---------------------------------------------------------------- main
informer(`${ISVC}/inferenceservices`, (type, o) => {
  if (type === 'DELETED') { kstate.delete(`${o.metadata.namespace}/${o.metadata.name}`); return; }
  const { namespace: ns, name } = o.metadata;
  enqueue(`${ns}/${name}`, () => isvcReconcile(ns, name));
});
informer(`${WF}/workflows`, (type, o) => {
  if (type === 'DELETED') return;
  const { namespace: ns, name } = o.metadata;
  enqueue(`wf/${ns}/${name}`, () => wfReconcile(ns, name));
});

// a revision's share of its InferenceService's traffic, as this KServe last reported it
const metrics = new Metrics((ns, name, rev) => {
  const s = kstate.get(`${ns}/${name}`);
  return ((s && s.traffic) || []).filter((e) => e.revisionName === rev).reduce((a, e) => a + (Number(e.percent) || 0), 0) / 100;
});

const control = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/metrics/revision') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let code = 200, body = { ok: true };
      try { const b = JSON.parse(Buffer.concat(chunks).toString() || '{}'); metrics.set(b.revision, b); } catch (e) { code = 400; body = { error: e.message }; }
      res.writeHead(code, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(body));
    });
    return;
  }
  if (req.method === 'GET' && req.url === '/metrics') {
    const t = metrics.expose();
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(t) });
    res.end(t);
    return;
  }
  const u = new URL(req.url, 'http://x');
  const q = Object.fromEntries(u.searchParams);
  const done = (code, body) => { res.writeHead(code, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(body || {})); };
  const again = (ns, name) => enqueue(`${ns}/${name}`, () => isvcReconcile(ns, name));
  if (req.method === 'POST' && u.pathname === '/storage') {
    if (q.bad === '1') badUris.set(q.uri, q.message || `failed to download model from ${q.uri}: storage error`);
    else badUris.delete(q.uri);
    for (const [k, s] of kstate) { s.uriChanged = true; const [ns, name] = k.split('/'); again(ns, name); }
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/hold') {
    const k = `${q.ns}/${q.name}`;
    if (q.on === '1') held.add(k); else { held.delete(k); again(q.ns, q.name); }
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/child-bump') {
    const s = kstate.get(`${q.ns}/${q.name}`);
    if (!s) return done(404, { error: 'unknown' });
    s.bump = true; again(q.ns, q.name);
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/default-mode') {
    if (!['Serverless', 'RawDeployment'].includes(q.mode)) return done(400, { error: 'mode: Serverless or RawDeployment' });
    defaultMode = q.mode;
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/freeze') {
    frozen = q.on === '1';
    if (!frozen) for (const k of kstate.keys()) { const [ns, name] = k.split('/'); again(ns, name); }
    return done(200);
  }
  if (u.pathname === '/state') return done(200, Object.fromEntries([...kstate].map(([k, s]) => [k, { gen: s.gen, revisions: s.revisions.map((r) => r.name), readyFor: s.readyFor }])));
  return done(404, { error: 'no such control' });
});
// KServe's defaulting webhook (test/real/webhook.js), when given a serving certificate
if (args['webhook-cert']) {
  serveWebhook({ cert: fs.readFileSync(args['webhook-cert']), key: fs.readFileSync(args['webhook-key']), defaultMode: () => defaultMode, log },
    (port) => { fs.writeFileSync(args['webhook-port-file'], `${port}\n`); log('controller: webhook on', port); });
}
control.listen(0, '127.0.0.1', () => {
  if (args['port-file']) fs.writeFileSync(args['port-file'], `${control.address().port}\n`);
  log('controller: watching', BASE.href, 'control on', control.address().port);
});
