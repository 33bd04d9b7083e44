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
//   task, phase labels set, as the workflow controller writes them; one with
//   an artifactGC strategy gets the finalizer workflows.argoproj.io/artifact-gc
//   until its artifact GC has run (mlplat renders none: only such Workflows).
// - batch/v1 Jobs as the Job controller, the scheduler and a kubelet report
//   them, with a real Pod per Job (see "Jobs, Pods, kubelet" below); the lab
//   worker's output goes to S3 (--s3-endpoint URL --s3-credentials FILE).
//
// A loopback control port (port-file) lets a test steer it:
//   POST /storage?uri=U&bad=1     a storage URI that fails to load (bad=0 repairs)
//   POST /hold?ns=N&name=X&on=1   keep the finalizer on (a stuck cleanup)
//   POST /child-bump?ns=N&name=X  the child's generation moves on its own
//   POST /default-mode?mode=M     Serverless or RawDeployment for InferenceServices without the annotation
//   POST /freeze?on=1             the KServe controller is down (status stays as it is); on=0 restarts it
//   GET  /state                   what the controller thinks
//   POST /job-plan {namespace, name, ticks, exitCode, output}
//                                 how a Job's Pod runs (name exact or a prefix ending
//                                 in '-'; output: what the worker writes, null: nothing)
//   POST /kubelet-hold?ns=N&job=J&on=1  the kubelet does not confirm the deletion of
//                                 J's Pods (a foreground delete lingers); on=0 releases
//   POST /node?name=N&gpus=G&ready=1&labels=k=v,...  a kubelet registers its Node / posts status
//   GET  /jobs                    the Jobs seen: pod, node, phase, last status written
//   POST /wf-hold?ns=N&name=X&on=1  a Workflow's artifact GC does not finish
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

// Argo adds this finalizer to a Workflow with an artifactGC strategy (workflow-wide or on
// an output artifact) and removes it once its artifact GC has run: on deletion for
// OnWorkflowDeletion, on completion for OnWorkflowCompletion.  mlplat renders no
// artifactGC, so its own Workflows never carry it (docs/fidelity.md).
const ARTIFACT_GC = 'workflows.argoproj.io/artifact-gc';
const wfHeld = new Set();   // ns/name whose artifact GC does not finish (POST /wf-hold)
function gcStrategies(o) {
  const out = new Set();
  const add = (g) => { if (g && g.strategy && g.strategy !== 'Never') out.add(g.strategy); };
  add((o.spec || {}).artifactGC);
  for (const t of (o.spec || {}).templates || []) for (const a of ((t.outputs || {}).artifacts || [])) add(a.artifactGC);
  return out;
}

async function wfFinalizer(o, phase) {
  const fins = o.metadata.finalizers || [];
  const gc = gcStrategies(o);
  const key = `${o.metadata.namespace}/${o.metadata.name}`;
  const done = ['Succeeded', 'Failed', 'Error'].includes(phase);
  let ops = null;
  if (fins.includes(ARTIFACT_GC)) {
    if (wfHeld.has(key) || !(o.metadata.deletionTimestamp || (done && !gc.has('OnWorkflowDeletion')))) return false;
    await sleep(FIN_MS);   // the artifact GC pods
    ops = [{ op: 'replace', path: '/metadata/finalizers', value: fins.filter((f) => f !== ARTIFACT_GC) }];
  } else if (gc.size && !o.metadata.deletionTimestamp && !done) {
    ops = [{ op: 'add', path: '/metadata/finalizers', value: [...fins, ARTIFACT_GC] }];
  } else return false;
  const r = await request('PATCH', wfPath(o.metadata.namespace, o.metadata.name),
    [{ op: 'test', path: '/metadata/resourceVersion', value: o.metadata.resourceVersion }, ...ops], 'application/json-patch+json');
  if (r.status !== 200 && r.status !== 404) log('workflow finalizer', key, r.status, r.text.slice(0, 200));
  return true;   // the change comes back as a watch event
}

async function wfReconcile(ns, name) {
  let g = await request('GET', wfPath(ns, name));
  if (g.status !== 200) return;
  let o = g.json;
  const phase = (o.status && o.status.phase) || '';
  if (await wfFinalizer(o, phase)) return;
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

// ---------------------------------------------------------------- Jobs, Pods, kubelet
// The Job controller, the scheduler and a kubelet, as far as a lab Job needs them:
// - the first sync sets status.startTime and creates one Pod (generateName <job>-, the
//   finalizer batch.kubernetes.io/job-tracking, a controller ownerReference that blocks
//   the owner's deletion); status.active counts it while it is Pending, as Kubernetes
//   does (a Pod the ServiceAccount admission or a quota refuses is retried, active 0);
// - the scheduler binds it (pods/binding) only to the Node its nodeSelector
//   kubernetes.io/hostname names, when that Node is Ready and not cordoned: until then
//   the Pod stays Pending with PodScheduled False/Unschedulable and the Job's ready 0;
// - the kubelet starts it once the Secrets it mounts exist (Running, Ready; Job ready 1),
//   and after the plan's ticks it ends: exit 0 writes the worker's output to S3 at the
//   Job's MLPLAT_OUTPUT_URI (SigV4, the credentials mlplat is given), as the lab worker
//   image does; the Job gets succeeded 1, SuccessCriteriaMet then Complete and
//   completionTime (Kubernetes >= 1.31), or failed 1, FailureTarget then Failed
//   (BackoffLimitExceeded; DeadlineExceeded past activeDeadlineSeconds from startTime,
//   after the Pod is deleted);
// - a Pod being deleted (the garbage collector, for a foreground Job delete) is
//   confirmed by the kubelet (DELETE gracePeriodSeconds=0) after the job-tracking
//   finalizer is dropped, unless the test holds that Job's kubelet (/kubelet-hold).
const JOB_TRACKING = 'batch.kubernetes.io/job-tracking';
const jobPath = (ns, name, sub) => `/apis/batch/v1/namespaces/${ns}/jobs/${name}${sub ? '/' + sub : ''}`;
const podPath = (ns, name, sub) => `/api/v1/namespaces/${ns}/pods${name ? '/' + name : ''}${sub ? '/' + sub : ''}`;
const jobPlans = [];          // {namespace, name (exact or a prefix ending in '-'), ticks, exitCode, output}
const kubeletHeld = new Set();   // ns/job whose Pods' deletion the kubelet does not confirm
const jobSeen = new Map();    // ns/name -> {uid, node, pod, phase, conditions}
const S3 = args['s3-endpoint'] ? new URL(args['s3-endpoint']) : null;
const S3_CRED = args['s3-credentials'] || null;

function jobPlan(ns, name) {
  for (let i = jobPlans.length - 1; i >= 0; i--) {
    const p = jobPlans[i];
    if (p.namespace && p.namespace !== ns) continue;
    if (!p.name || p.name === name || (p.name.endsWith('-') && name.startsWith(p.name))) return p;
  }
  return {};
}

const sha256 = (b) => crypto.createHash('sha256').update(b).digest();
const hmac = (k, d) => crypto.createHmac('sha256', k).update(d).digest();

// PUT s3://bucket/key with a SigV4 signature (path-style, us-east-1) and its SHA-256 checksum
function s3Put(uri, text) {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri || '');
  if (!m || !S3 || !S3_CRED) return Promise.reject(new Error(`no S3 for ${uri}`));
  const ini = fs.readFileSync(S3_CRED, 'utf8');
  const ak = /aws_access_key_id\s*=\s*(\S+)/.exec(ini)[1], sk = /aws_secret_access_key\s*=\s*(\S+)/.exec(ini)[1];
  const body = Buffer.from(text);
  const p = `/${m[1]}/${m[2].split('/').map(encodeURIComponent).join('/')}`;
  const amz = new Date().toISOString().replace(/[:-]|\.\d{3}/g, '');
  const scope = `${amz.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const h = { host: S3.host, 'x-amz-checksum-sha256': sha256(body).toString('base64'), 'x-amz-content-sha256': sha256(body).toString('hex'), 'x-amz-date': amz };
  const names = Object.keys(h).sort();
  const canon = ['PUT', p, '', ...names.map((n) => `${n}:${h[n]}`), '', names.join(';'), h['x-amz-content-sha256']].join('\n');
  const sts = ['AWS4-HMAC-SHA256', amz, scope, sha256(canon).toString('hex')].join('\n');
  const key = ['us-east-1', 's3', 'aws4_request'].reduce((k, d) => hmac(k, d), hmac(`AWS4${sk}`, amz.slice(0, 8)));
  h.authorization = `AWS4-HMAC-SHA256 Credential=${ak}/${scope}, SignedHeaders=${names.join(';')}, Signature=${hmac(key, sts).toString('hex')}`;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: S3.hostname, port: S3.port, method: 'PUT', path: p, headers: { ...h, 'Content-Length': body.length } }, (res) => {
      const c = []; res.on('data', (d) => c.push(d));
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`S3 PUT ${uri}: ${res.statusCode} ${Buffer.concat(c).toString().slice(0, 300)}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function jobStatus(ns, name, status) {
  const r = await request('PATCH', jobPath(ns, name, 'status'), { status }, 'application/merge-patch+json');
  if (r.status !== 200 && r.status !== 404) log('job status', ns, name, r.status, r.text.slice(0, 300));
  const e = jobSeen.get(`${ns}/${name}`);
  if (r.status === 200 && e) e.status = r.json.status;
  return r.status === 200;
}

const cond = (type, reason, message) => { const now = nowIso(); return { type, status: 'True', reason, message, lastProbeTime: now, lastTransitionTime: now }; };

// the Node can take a Pod pinned to it: there, Ready and not cordoned
async function schedulable(host) {
  const r = await request('GET', `/api/v1/nodes/${host}`);
  if (r.status !== 200) return false;
  return !(r.json.spec || {}).unschedulable && ((r.json.status || {}).conditions || []).some((c) => c.type === 'Ready' && c.status === 'True');
}

async function runJob(ns, name, uid) {
  const key = `${ns}/${name}`;
  const live = async () => {
    const g = await request('GET', jobPath(ns, name));
    return g.status === 200 && g.json.metadata.uid === uid && !g.json.metadata.deletionTimestamp ? g.json : null;
  };
  let job = await live();
  if (!job || (job.status && (job.status.conditions || []).length)) return;
  const plan = jobPlan(ns, name);
  const tpl = job.spec.template;
  const host = (tpl.spec.nodeSelector || {})['kubernetes.io/hostname'];
  const started = (job.status && job.status.startTime) || nowIso();
  const deadline = job.spec.activeDeadlineSeconds ? Date.parse(started) + job.spec.activeDeadlineSeconds * 1000 : Infinity;
  const seen = { uid, node: host || null, pod: null, phase: 'Pending' };
  jobSeen.set(key, seen);
  const podBody = {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { generateName: `${name}-`, namespace: ns, labels: { ...((tpl.metadata || {}).labels || {}) }, annotations: { ...((tpl.metadata || {}).annotations || {}) },
      finalizers: [JOB_TRACKING],
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid, controller: true, blockOwnerDeletion: true }] },
    spec: JSON.parse(JSON.stringify(tpl.spec)),
  };
  let pod = null, first = true;
  while (!pod) {
    const r = await request('POST', podPath(ns), podBody);
    if (r.status === 201) pod = r.json;
    else log('job', key, 'pod create refused:', r.status, r.text.slice(0, 300));
    if (first || pod) await jobStatus(ns, name, { startTime: started, active: pod ? 1 : 0, ready: 0, terminating: 0, uncountedTerminatedPods: {} });
    first = false;
    if (!pod) { await sleep(STEP_MS * 2); if (!(job = await live())) return; }
  }
  seen.pod = pod.metadata.name;
  const podName = pod.metadata.name;
  const failJob = async (reason, message, n) => {
    await jobStatus(ns, name, { failed: 1, active: n, ready: 0, terminating: 0, conditions: [cond('FailureTarget', reason, message)] });
    return reason;
  };
  const deadlineFail = async () => {
    await failJob('DeadlineExceeded', 'Job was active longer than specified deadline', 1);
    await request('DELETE', podPath(ns, podName), { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: pod.metadata.uid } });
    for (let i = 0; i < 100 && (await request('GET', podPath(ns, podName))).status === 200; i++) await sleep(100);
    await jobStatus(ns, name, { active: 0, conditions: [cond('FailureTarget', 'DeadlineExceeded', 'Job was active longer than specified deadline'),
      cond('Failed', 'DeadlineExceeded', 'Job was active longer than specified deadline')] });
    seen.phase = 'Failed';
  };
  // the scheduler: bind to the pinned Node once it can take the Pod
  let unsched = false;
  for (;;) {
    if (!(job = await live())) return;
    if (Date.now() >= deadline) return deadlineFail();
    if (!host || await schedulable(host)) break;
    if (!unsched) {
      unsched = true;
      await request('PATCH', podPath(ns, podName, 'status'), { status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable',
        message: `0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector or were not ready.`, lastProbeTime: null, lastTransitionTime: nowIso() }] } }, 'application/merge-patch+json');
    }
    await sleep(STEP_MS);
  }
  if (host) {
    const b = await request('POST', podPath(ns, podName, 'binding'), { apiVersion: 'v1', kind: 'Binding', metadata: { name: podName }, target: { apiVersion: 'v1', kind: 'Node', name: host } });
    if (b.status !== 201) { log('job', key, 'bind:', b.status, b.text.slice(0, 200)); return; }
  }
  // the kubelet: the container starts once the Secrets it mounts are there
  const secrets = (tpl.spec.volumes || []).filter((v) => v.secret && !v.secret.optional).map((v) => v.secret.secretName);
  for (;;) {
    if (!(job = await live())) return;
    if (Date.now() >= deadline) return deadlineFail();
    let ok = true;
    for (const s of secrets) if ((await request('GET', `/api/v1/namespaces/${ns}/secrets/${s}`)).status !== 200) ok = false;
    if (ok) break;
    await sleep(STEP_MS);
  }
  const c0 = tpl.spec.containers[0];
  const t0 = nowIso();
  const running = { name: c0.name, image: c0.image, imageID: '', ready: true, restartCount: 0, started: true, state: { running: { startedAt: t0 } } };
  await request('PATCH', podPath(ns, podName, 'status'), { status: { phase: 'Running', hostIP: '127.0.0.1', hostIPs: [{ ip: '127.0.0.1' }], podIP: '10.0.0.2', podIPs: [{ ip: '10.0.0.2' }], startTime: t0,
    conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: t0 }, { type: 'Initialized', status: 'True', lastTransitionTime: t0 },
      { type: 'ContainersReady', status: 'True', lastTransitionTime: t0 }, { type: 'Ready', status: 'True', lastTransitionTime: t0 }],
    containerStatuses: [running] } }, 'application/merge-patch+json');
  seen.phase = 'Running';
  await jobStatus(ns, name, { active: 1, ready: 1 });
  for (let n = 0; n < Number(plan.ticks || 2); n++) {
    await sleep(STEP_MS);
    if (!(job = await live())) return;
    if (Date.now() >= deadline) return deadlineFail();
  }
  let exit = Number(plan.exitCode || 0);
  if (!exit) {
    const out = (c0.env || []).find((e) => e.name === 'MLPLAT_OUTPUT_URI');
    if (out && plan.output !== null) {
      try { await s3Put(out.value, plan.output === undefined ? JSON.stringify({ outputs: [{ text: 'ok' }] }) : plan.output); }
      catch (e) { log('job', key, e.message); exit = 1; }
    }
  }
  const t1 = nowIso();
  await request('PATCH', podPath(ns, podName, 'status'), { status: { phase: exit ? 'Failed' : 'Succeeded', conditions: [{ type: 'Ready', status: 'False', reason: 'PodCompleted', lastTransitionTime: t1 }, { type: 'ContainersReady', status: 'False', reason: 'PodCompleted', lastTransitionTime: t1 }],
    containerStatuses: [{ ...running, ready: false, started: false, state: { terminated: { exitCode: exit, reason: exit ? 'Error' : 'Completed', startedAt: t0, finishedAt: t1 } } }] } }, 'application/merge-patch+json');
  if (!(job = await live())) return;
  // counted: the Pod's finalizer goes, then the Job's terminal conditions
  await jobStatus(ns, name, { active: 0, ready: 0, uncountedTerminatedPods: exit ? { failed: [pod.metadata.uid] } : { succeeded: [pod.metadata.uid] } });
  await dropTracking(ns, podName);
  if (exit) {
    const msg = 'Job has reached the specified backoff limit';
    await jobStatus(ns, name, { failed: 1, uncountedTerminatedPods: { failed: null }, conditions: [cond('FailureTarget', 'BackoffLimitExceeded', msg)] });
    await jobStatus(ns, name, { conditions: [cond('FailureTarget', 'BackoffLimitExceeded', msg), cond('Failed', 'BackoffLimitExceeded', msg)] });
  } else {
    const msg = 'Reached expected number of succeeded pods';
    await jobStatus(ns, name, { succeeded: 1, uncountedTerminatedPods: { succeeded: null }, conditions: [cond('SuccessCriteriaMet', 'CompletionsReached', msg)] });
    await jobStatus(ns, name, { completionTime: nowIso(), conditions: [cond('SuccessCriteriaMet', 'CompletionsReached', msg), cond('Complete', 'CompletionsReached', msg)] });
  }
  seen.phase = exit ? 'Failed' : 'Succeeded';
}

async function dropTracking(ns, podName) {
  const g = await request('GET', podPath(ns, podName));
  if (g.status !== 200) return;
  const fins = g.json.metadata.finalizers || [];
  if (!fins.includes(JOB_TRACKING)) return;
  await request('PATCH', podPath(ns, podName), [{ op: 'test', path: '/metadata/resourceVersion', value: g.json.metadata.resourceVersion },
    { op: 'replace', path: '/metadata/finalizers', value: fins.filter((f) => f !== JOB_TRACKING) }], 'application/json-patch+json');
}

// the kubelet confirms a Pod's deletion (the Job controller first drops its finalizer)
async function podTerminating(ns, name) {
  const g = await request('GET', podPath(ns, name));
  if (g.status !== 200 || !g.json.metadata.deletionTimestamp) return;
  const job = (g.json.metadata.labels || {})['batch.kubernetes.io/job-name'];
  if (job && kubeletHeld.has(`${ns}/${job}`)) return;
  await dropTracking(ns, name);
  await request('DELETE', `${podPath(ns, name)}?gracePeriodSeconds=0`, { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0, preconditions: { uid: g.json.metadata.uid } });
}

// POST /node?name=N&gpus=G&ready=0|1[&labels=k=v,k=v]: a kubelet's Node registration and status
async function nodeRegister(q) {
  const labels = { 'kubernetes.io/hostname': q.name, 'kubernetes.io/os': 'linux' };
  for (const kv of (q.labels || '').split(',').filter(Boolean)) { const i = kv.indexOf('='); labels[kv.slice(0, i)] = kv.slice(i + 1); }
  let g = await request('GET', `/api/v1/nodes/${q.name}`);
  if (g.status === 404) {
    g = await request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: q.name, labels }, spec: {} });
    if (g.status !== 201) return g;
  }
  const now = nowIso();
  const ready = q.ready !== '0';
  const gpus = String(q.gpus || 0);
  const res = { cpu: '8', memory: '64Gi', pods: '110', 'nvidia.com/gpu': gpus };
  return request('PATCH', `/api/v1/nodes/${q.name}/status`, { status: { capacity: res, allocatable: res,
    conditions: [{ type: 'Ready', status: ready ? 'True' : 'False', reason: ready ? 'KubeletReady' : 'KubeletNotReady',
      message: ready ? 'kubelet is posting ready status' : 'container runtime network not ready', lastHeartbeatTime: now, lastTransitionTime: now }],
    nodeInfo: { kubeletVersion: 'v1.37.2', containerRuntimeVersion: 'containerd://2.1.0', operatingSystem: 'linux', architecture: 'amd64',
      kernelVersion: '6.1.0', osImage: 'Debian GNU/Linux 12', machineID: '', systemUUID: '', bootID: '', kubeProxyVersion: '' } } }, 'application/merge-patch+json');
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

informer('/apis/batch/v1/jobs', (type, o) => {
  const { namespace: ns, name, uid } = o.metadata;
  if (type === 'ADDED' && !jobSeen.has(`${ns}/${name}`) || (type === 'ADDED' && jobSeen.get(`${ns}/${name}`).uid !== uid)) {
    jobSeen.set(`${ns}/${name}`, { uid });
    runJob(ns, name, uid).catch((e) => log('job', ns, name, e.stack || e.message));
  }
});
informer('/api/v1/pods', (type, o) => {
  if (type === 'DELETED' || !o.metadata.deletionTimestamp) return;
  const { namespace: ns, name } = o.metadata;
  enqueue(`pod/${ns}/${name}`, () => podTerminating(ns, name));
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
  if (req.method === 'POST' && req.url === '/job-plan') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try { jobPlans.push(JSON.parse(Buffer.concat(chunks).toString())); res.writeHead(200); res.end('{}'); } catch (e) { res.writeHead(400); res.end(JSON.stringify({ error: e.message })); }
    });
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
  if (req.method === 'POST' && u.pathname === '/kubelet-hold') {
    const k = `${q.ns}/${q.job}`;
    if (q.on === '1') { kubeletHeld.add(k); return done(200); }
    kubeletHeld.delete(k);
    request('GET', `${podPath(q.ns)}?labelSelector=${encodeURIComponent(`batch.kubernetes.io/job-name=${q.job}`)}`).then((r) => {
      for (const p of (r.json && r.json.items) || []) enqueue(`pod/${q.ns}/${p.metadata.name}`, () => podTerminating(q.ns, p.metadata.name));
    });
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/wf-hold') {
    const k = `${q.ns}/${q.name}`;
    if (q.on === '1') wfHeld.add(k); else { wfHeld.delete(k); enqueue(`wf/${q.ns}/${q.name}`, () => wfReconcile(q.ns, q.name)); }
    return done(200);
  }
  if (req.method === 'POST' && u.pathname === '/node') {
    // the kubelet registers its Node and posts its status: Ready (or not), its GPUs
    nodeRegister(q).then((r) => done(r.status === 200 || r.status === 201 ? 200 : 500, r.json), (e) => done(500, { error: e.message }));
    return;
  }
  if (u.pathname === '/jobs') return done(200, Object.fromEntries(jobSeen));
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
