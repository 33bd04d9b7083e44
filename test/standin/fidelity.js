#!/usr/bin/env node
'use strict';
// Direct HTTP fidelity checks against a running stand-in. Prints one `ok - ...` or
// `not ok - ...` line per check (test.sh numbers them and adds the TAP plan).
//   node fidelity.js --port P --s3-port Q --token T --validator PATH

const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const http = require('http');
const { spawnSync } = require('child_process');

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const BASE = `http://127.0.0.1:${args.port}`;
const S3 = `http://127.0.0.1:${args['s3-port']}`;
const TOKEN = args.token;
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

// ---------------------------------------------------------------- tiny client
function request(method, url, body, { ct, token = TOKEN, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const data = body === undefined ? null : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const h = { ...headers };
    if (token) h.Authorization = `Bearer ${token}`;
    if (data) { h['Content-Type'] = ct || 'application/json'; h['Content-Length'] = data.length; }
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h, agent }, (resp) => {
      const chunks = [];
      resp.on('data', (c) => chunks.push(c));
      resp.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
        resolve({ status: resp.statusCode, headers: resp.headers, text, body: json });
      });
    });
    r.on('error', reject);
    r.setTimeout(10000, () => r.destroy(new Error('timeout')));
    r.end(data);
  });
}
const k = (m, p, b, o) => request(m, BASE + p, b, o);
const admin = (m, p, b) => request(m, `${BASE}/_standin/${p}`, b, { token: null });
const apply = (p, obj, manager = 'mlplat', force = true) => k('PATCH', `${p}?fieldManager=${manager}${force ? '&force=true' : ''}`, obj, { ct: 'application/apply-patch+yaml' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, ms = 5000, step = 20) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) { last = await fn(); if (last) return last; await sleep(step); }
  throw new Error(`condition not met within ${ms} ms`);
}

// ---------------------------------------------------------------- harness
const checks = [];
const check = (name, fn) => checks.push({ name, fn });
class Fail extends Error {}
function expect(cond, msg, extra) { if (!cond) throw new Fail(msg + (extra !== undefined ? `: ${JSON.stringify(extra).slice(0, 600)}` : '')); }
function eq(a, b, msg) { expect(JSON.stringify(a) === JSON.stringify(b), `${msg}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`); }

const ISVC = '/apis/serving.kserve.io/v1beta1';
const WF = '/apis/argoproj.io/v1alpha1';
const isvcObj = (name, model, extra = {}) => ({ apiVersion: 'serving.kserve.io/v1beta1', kind: 'InferenceService', metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'mlplat' } }, spec: { predictor: { model, ...extra } } });
const ready = (o) => ((o.status && o.status.conditions) || []).find((c) => c.type === 'Ready');
// Wait until the KServe controller has settled what it last observed (no status write pending),
// so a GET-then-PUT is not raced by the controller's own status update (which is a real 409).
// observedGeneration is the child's counter, as KServe reports it (kserve#6081), so it cannot
// be compared with the InferenceService's generation: the controller observes a change at once
// (Ready Unknown) and settles it after readyDelayMs (Ready True or False), so a Ready that is
// no longer Unknown is settled.
const settle = (p) => until(async () => { const o = (await k('GET', p)).body; const r = ready(o); return o.status && r && r.status !== 'Unknown' && o; });
async function ns(name, labels = {}) {
  const r = await k('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
  expect(r.status === 201, `create namespace ${name}`, r.body);
  return r.body;
}

// ---------------------------------------------------------------- checks
check('requests without the bearer token get a 401 Status', async () => {
  const r = await k('GET', '/api/v1/namespaces', undefined, { token: 'wrong' });
  eq(r.status, 401, 'status');
  eq([r.body.kind, r.body.status, r.body.reason, r.body.code], ['Status', 'Failure', 'Unauthorized', 401], 'Status body');
  const m = await k('GET', '/api/2.0/mlflow/registered-models/get?name=x', undefined, { token: null });
  eq(m.status, 401, 'mlflow status');
});

check('discovery lists core, groups and resources with status subresources', async () => {
  const a = await k('GET', '/api');
  eq(a.body.versions, ['v1'], '/api versions');
  const g = await k('GET', '/apis');
  const names = g.body.groups.map((x) => x.name);
  for (const n of ['serving.kserve.io', 'argoproj.io', 'batch', 'coordination.k8s.io', 'rbac.authorization.k8s.io', 'networking.k8s.io']) expect(names.includes(n), `group ${n} listed`, names);
  const rl = await k('GET', `${ISVC}`);
  const rs = rl.body.resources.map((x) => x.name);
  expect(rs.includes('inferenceservices') && rs.includes('inferenceservices/status'), 'isvc and status subresource', rs);
  const v = await k('GET', '/version');
  expect(v.body.major === '1' && /^v1\./.test(v.body.gitVersion), 'version doc', v.body);
  const core = await k('GET', '/api/v1');
  expect(core.body.resources.find((x) => x.name === 'namespaces' && x.namespaced === false), 'namespaces cluster-scoped');
});

check('namespace create sets the metadata.name label, Active phase, uid, rv; duplicate is 409 AlreadyExists', async () => {
  const o = await ns('fid-a', { team: 'a' });
  eq(o.metadata.labels['kubernetes.io/metadata.name'], 'fid-a', 'label');
  eq(o.status.phase, 'Active', 'phase');
  expect(/^[0-9a-f-]{36}$/.test(o.metadata.uid) && /^\d+$/.test(o.metadata.resourceVersion) && /Z$/.test(o.metadata.creationTimestamp), 'server metadata', o.metadata);
  const d = await k('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'fid-a' } });
  eq([d.status, d.body.reason, d.body.message], [409, 'AlreadyExists', 'namespaces "fid-a" already exists'], 'duplicate');
  eq(d.body.details, { name: 'fid-a', kind: 'namespaces' }, 'details');
});

check('KServe storage credentials: an s3:// model fails without them (boto3: Unable to locate credentials), loads with a Secret on the predictor ServiceAccount', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/nocreds`;
  await apply(p, isvcObj('nocreds', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/nocreds' }));
  const failed = await until(async () => { const o = (await k('GET', p)).body; return ready(o) && ready(o).status === 'False' && o; });
  expect(/NoCredentialsError: Unable to locate credentials/.test(ready(failed).message), 'no credentials', ready(failed));
  // the predictor account named by the spec: while it does not exist Ready stays Unknown
  const q = `${ISVC}/namespaces/fid-a/inferenceservices/withsa`;
  await apply(q, isvcObj('withsa', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/withsa' }, { serviceAccountName: 'predictor' }));
  await sleep(300);
  eq((ready((await k('GET', q)).body) || {}).status, 'Unknown', 'no ServiceAccount yet: no pods, no verdict');
  eq((await k('POST', '/api/v1/namespaces/fid-a/serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'predictor',
    annotations: { 'serving.kserve.io/s3-endpoint': 'minio.storage:9000', 'serving.kserve.io/s3-usehttps': '0' } },
    automountServiceAccountToken: false, secrets: [{ name: 's3creds' }] })).status, 201, 'predictor sa');
  await until(async () => { const o = (await k('GET', q)).body; return ready(o) && ready(o).status === 'True'; });
  await k('DELETE', p); await k('DELETE', q);
  // the checks below use fid-a's default account, as a quick start would: give it the Secret
  eq((await k('POST', '/api/v1/namespaces/fid-a/serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' }, secrets: [{ name: 's3creds' }] })).status, 201, 'default sa');
});

check('GET of a missing object is 404 NotFound with the real message and details', async () => {
  const r = await k('GET', `${ISVC}/namespaces/fid-a/inferenceservices/nope`);
  eq([r.status, r.body.reason, r.body.message], [404, 'NotFound', 'inferenceservices.serving.kserve.io "nope" not found'], 'not found');
  eq(r.body.details, { name: 'nope', group: 'serving.kserve.io', kind: 'inferenceservices' }, 'details');
});

check('creating in a missing namespace is 404 for the namespace; bad names are 422 Invalid', async () => {
  const r = await k('POST', '/apis/coordination.k8s.io/v1/namespaces/nowhere/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l' } });
  eq([r.status, r.body.message], [404, 'namespaces "nowhere" not found'], 'missing ns');
  const b = await k('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'Bad_Name' } });
  eq([b.status, b.body.reason], [422, 'Invalid'], 'invalid name');
  expect(b.body.details.causes[0].field === 'metadata.name', 'cause field', b.body);
});

check('server-side apply: create 201, no-op keeps resourceVersion, spec change bumps generation, label change does not', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const obj = isvcObj('ssa', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/ssa/1' });
  const c = await apply(p, obj);
  eq([c.status, c.body.metadata.generation], [201, 1], 'create');
  const before = await settle(p);
  const n = await apply(p, obj);
  eq([n.status, n.body.metadata.resourceVersion, n.body.metadata.generation], [200, before.metadata.resourceVersion, 1], 'no-op apply');
  obj.spec.predictor.model.storageUri = 's3://models/ssa/2';
  const u = await apply(p, obj);
  expect(Number(u.body.metadata.resourceVersion) > Number(before.metadata.resourceVersion), 'rv bumped');
  eq(u.body.metadata.generation, 2, 'generation after spec change');
  obj.metadata.labels.extra = 'x';
  const l = await apply(p, obj);
  eq(l.body.metadata.generation, 2, 'generation after label change');
  expect(l.body.metadata.resourceVersion !== u.body.metadata.resourceVersion, 'rv bumped by label change');
  const mf = l.body.metadata.managedFields.find((m) => m.manager === 'mlplat');
  eq([mf.operation, mf.fieldsType], ['Apply', 'FieldsV1'], 'managedFields entry');
  expect(mf.fieldsV1['f:spec']['f:predictor']['f:model']['f:storageUri'], 'owns storageUri', mf);
});

check('dryRun=All: apply returns the defaulted object and stores nothing', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/dry`;
  const r = await k('PATCH', `${p}?fieldManager=mlplat&force=true&dryRun=All`, isvcObj('dry', { modelFormat: { name: 'sklearn' }, storageUri: 's3://x', env: [] }), { ct: 'application/apply-patch+yaml' });
  eq([r.status, r.body.metadata.generation, 'env' in r.body.spec.predictor.model], [201, 1, false], 'dry-run create');
  eq((await k('GET', p)).status, 404, 'not stored');
  const cur = await settle(`${ISVC}/namespaces/fid-a/inferenceservices/ssa`);
  const u = await k('PATCH', `${ISVC}/namespaces/fid-a/inferenceservices/ssa?dryRun=All`, { metadata: { labels: { dry: 'yes' } } }, { ct: 'application/merge-patch+json' });
  eq([u.body.metadata.labels.dry, u.body.metadata.resourceVersion], ['yes', cur.metadata.resourceVersion], 'dry-run patch');
  eq((await k('GET', `${ISVC}/namespaces/fid-a/inferenceservices/ssa`)).body.metadata.resourceVersion, cur.metadata.resourceVersion, 'unchanged');
  eq((await k('DELETE', `${ISVC}/namespaces/fid-a/inferenceservices/ssa?dryRun=All`)).status, 200, 'dry-run delete');
  eq((await k('GET', `${ISVC}/namespaces/fid-a/inferenceservices/ssa`)).status, 200, 'still there');
  eq((await k('GET', `${ISVC}/namespaces/fid-a/inferenceservices/ssa?dryRun=Bogus`)).status, 200, 'GET ignores dryRun');
});

check('CRD pruning: undeclared fields are dropped with a Warning header, or rejected with fieldValidation=Strict', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/prune`;
  const obj = isvcObj('prune', { modelFormat: { name: 'sklearn' }, storageUri: 's3://x', notInSchema: true });
  const s = await k('PATCH', `${p}?fieldManager=mlplat&force=true&fieldValidation=Strict`, obj, { ct: 'application/apply-patch+yaml' });
  eq([s.status, s.body.reason], [400, 'BadRequest'], 'strict');
  expect(/strict decoding error: unknown field "spec.predictor.model.notInSchema"/.test(s.body.message), 'strict message', s.body.message);
  const w = await apply(p, obj);
  eq([w.status, 'notInSchema' in w.body.spec.predictor.model], [201, false], 'pruned');
  expect(/unknown field \\"spec.predictor.model.notInSchema\\"/.test(w.headers.warning || ''), 'Warning header', w.headers.warning);
  const again = await apply(p, obj);
  eq(again.status, 200, 're-apply of the same (pruned) config');
});

check('server-side apply: a field dropped from the applied config is removed', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const cur = (await k('GET', p)).body;
  expect(cur.metadata.labels.extra === 'x', 'label present first');
  const obj = isvcObj('ssa', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/ssa/2' });
  const r = await apply(p, obj);
  expect(r.body.metadata.labels.extra === undefined, 'label removed', r.body.metadata.labels);
});

check('server-side apply without fieldManager is 422 Invalid (PatchOptions), as the real server answers', async () => {
  const r = await k('PATCH', `${ISVC}/namespaces/fid-a/inferenceservices/ssa`, isvcObj('ssa', {}), { ct: 'application/apply-patch+yaml' });
  eq([r.status, r.body.reason], [422, 'Invalid'], 'status');
  expect(/fieldManager: Required value/.test(r.body.message), 'message', r.body.message);
});

check('server-side apply conflict: another manager changing an owned field gets 409 without force, takes it with force', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const other = isvcObj('ssa', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/ssa/evil' });
  delete other.metadata.labels;
  const c = await apply(p, other, 'someone-else', false);
  eq([c.status, c.body.reason], [409, 'Conflict'], 'conflict');
  expect(/^Apply failed with 1 conflict: conflict with "mlplat"/.test(c.body.message), 'message', c.body.message);
  eq(c.body.details.causes[0], { reason: 'FieldManagerConflict', message: 'conflict with "mlplat" using serving.kserve.io/v1beta1', field: '.spec.predictor.model.storageUri' }, 'cause');
  const same = isvcObj('ssa', { modelFormat: { name: 'sklearn' } });
  delete same.metadata.labels;
  const s = await apply(p, same, 'someone-else', false);
  eq(s.status, 200, 'applying an equal value shares ownership without conflict');
  const f = await apply(p, other, 'someone-else', true);
  eq([f.status, f.body.spec.predictor.model.storageUri], [200, 's3://models/ssa/evil'], 'forced');
  const mine = f.body.metadata.managedFields.find((m) => m.manager === 'mlplat');
  expect(!mine.fieldsV1['f:spec']['f:predictor']['f:model']['f:storageUri'], 'mlplat lost ownership', mine);
  const back = await apply(p, isvcObj('ssa', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/ssa/2' }));
  eq(back.body.spec.predictor.model.storageUri, 's3://models/ssa/2', 'mlplat forces it back');
});

check('PUT with a stale resourceVersion is 409 Conflict; current one succeeds; CRD PUT without rv is 422', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const cur = await settle(p);
  const stale = JSON.parse(JSON.stringify(cur));
  stale.metadata.resourceVersion = String(Number(cur.metadata.resourceVersion) - 1);
  const r = await k('PUT', p, stale);
  eq([r.status, r.body.reason], [409, 'Conflict'], 'stale');
  eq(r.body.message, 'Operation cannot be fulfilled on inferenceservices.serving.kserve.io "ssa": the object has been modified; please apply your changes to the latest version and try again', 'message');
  cur.metadata.annotations.note = 'put';
  const ok = await k('PUT', p, cur);
  expect(ok.status === 200 && ok.body.metadata.resourceVersion !== cur.metadata.resourceVersion, 'put ok', ok.body);
  const norv = JSON.parse(JSON.stringify(ok.body));
  delete norv.metadata.resourceVersion;
  const n = await k('PUT', p, norv);
  eq([n.status, n.body.reason], [422, 'Invalid'], 'no rv on a CRD');
});

check('merge-patch and json-patch apply; a failed json-patch test is 422; status in a main-resource patch is ignored', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const m = await k('PATCH', `${p}?fieldManager=editor`, { metadata: { annotations: { a: '1' } }, status: { url: 'http://evil' } }, { ct: 'application/merge-patch+json' });
  eq([m.status, m.body.metadata.annotations.a], [200, '1'], 'merge');
  expect(m.body.status.url !== 'http://evil', 'status untouched', m.body.status.url);
  const j = await k('PATCH', p, [{ op: 'add', path: '/metadata/annotations/b', value: '2' }, { op: 'remove', path: '/metadata/annotations/a' }], { ct: 'application/json-patch+json' });
  expect(j.status === 200 && j.body.metadata.annotations.b === '2' && !('a' in j.body.metadata.annotations), 'json patch', j.body.metadata.annotations);
  const t = await k('PATCH', p, [{ op: 'test', path: '/metadata/annotations/b', value: 'nope' }], { ct: 'application/json-patch+json' });
  eq(t.status, 422, 'failed test op');
  const smp = await k('PATCH', p, { metadata: { labels: { x: 'y' } } }, { ct: 'application/strategic-merge-patch+json' });
  eq(smp.status, 415, 'strategic merge patch on a CRD is unsupported');
  const miss = await k('PATCH', `${ISVC}/namespaces/fid-a/inferenceservices/none`, { metadata: {} }, { ct: 'application/merge-patch+json' });
  eq(miss.status, 404, 'patch of a missing object');
});

check('status subresource: PUT /status changes status only and leaves generation alone', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/ssa`;
  const cur = await settle(p);
  const body = JSON.parse(JSON.stringify(cur));
  body.status.url = 'http://changed.example.com';
  body.spec.predictor.model.storageUri = 's3://ignored';
  const r = await k('PUT', `${p}/status`, body);
  eq([r.status, r.body.status.url, r.body.spec.predictor.model.storageUri, r.body.metadata.generation], [200, 'http://changed.example.com', cur.spec.predictor.model.storageUri, cur.metadata.generation], 'status put');
});

check('Secrets: stringData becomes base64 data, type Opaque; immutable: true refuses a data change (422) and allows labels', async () => {
  await ns('fid-sec');
  const P = '/api/v1/namespaces/fid-sec/secrets';
  let r = await k('POST', P, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'lab-1-input' }, immutable: true, stringData: { 'inputs.json': '[1]' } });
  expect(r.status === 201, 'create secret', r.body);
  eq([r.body.type, r.body.data, r.body.stringData], ['Opaque', { 'inputs.json': Buffer.from('[1]').toString('base64') }, undefined], 'stored as data');
  r = await k('PATCH', `${P}/lab-1-input`, { data: { 'inputs.json': Buffer.from('[2]').toString('base64') } }, { ct: 'application/merge-patch+json' });
  expect(r.status === 422 && r.body.reason === 'Invalid' && /immutable/.test(JSON.stringify(r.body.details)), 'immutable data change is 422', r.body);
  r = await k('PATCH', `${P}/lab-1-input`, { metadata: { labels: { a: 'b' } } }, { ct: 'application/merge-patch+json' });
  expect(r.status === 200, 'a label change is allowed', r.body);
  r = await k('GET', `${P}?labelSelector=a%3Db`);
  eq(r.body.items.map((x) => x.metadata.name), ['lab-1-input'], 'listed by label');
  const log = (await admin('GET', 'requests')).body;
  expect(!JSON.stringify(log).includes(Buffer.from('[1]').toString('base64')), 'the request log carries no secret data');
  r = await k('DELETE', `${P}/lab-1-input`);
  expect(r.status === 200, 'delete', r.body);
});

check('Nodes: admin-made, cluster-scoped, LIST by label; a Job pinned to a NotReady or cordoned node is started (startTime, active 1) but not ready until the node can take it', async () => {
  await ns('fid-node');
  let r = await admin('POST', 'nodes', { name: 'gpu-a', labels: { 'mlplat.io/lab': 'true' }, gpus: 4, ready: false });
  expect(r.status === 200, 'node made', r.body);
  await admin('POST', 'nodes', { name: 'cpu-b', gpus: 0 });
  r = await k('GET', '/api/v1/nodes?labelSelector=mlplat.io%2Flab%3Dtrue');
  eq(r.body.items.map((x) => [x.metadata.name, x.status.allocatable['nvidia.com/gpu'], x.status.conditions[0].status]), [['gpu-a', '4', 'False']], 'LIST by label');
  const job = (name, node) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, template: { spec: { restartPolicy: 'Never',
    nodeSelector: { 'kubernetes.io/hostname': node }, containers: [{ name: 'w', image: 'w' }] } } } });
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-node', name: 'pinned', steps: { '*': { ticks: 1000 } } });
  r = await k('POST', '/apis/batch/v1/namespaces/fid-node/jobs', job('pinned', 'gpu-a'));
  expect(r.status === 201, 'job created', r.body);
  await sleep(400);
  let st = (await k('GET', '/apis/batch/v1/namespaces/fid-node/jobs/pinned')).body.status || {};
  expect(st.startTime && st.active === 1 && st.ready === 0, 'started, its pod Pending on a NotReady node', st);
  await admin('POST', 'nodes', { name: 'gpu-a', labels: { 'mlplat.io/lab': 'true' }, gpus: 4, ready: true, unschedulable: true });
  await sleep(400);
  st = (await k('GET', '/apis/batch/v1/namespaces/fid-node/jobs/pinned')).body.status || {};
  expect(st.active === 1 && st.ready === 0 && !st.succeeded, 'still Pending on a cordoned node', st);
  await admin('POST', 'nodes', { name: 'gpu-a', labels: { 'mlplat.io/lab': 'true' }, gpus: 4, ready: true });
  st = await until(async () => { const s = (await k('GET', '/apis/batch/v1/namespaces/fid-node/jobs/pinned')).body.status; return s && s.ready === 1 && s; });
  eq(st.active, 1, 'running once the node is Ready and schedulable');
  r = await k('POST', '/apis/batch/v1/namespaces/fid-node/jobs', job('nowhere', 'no-such-node'));
  await sleep(400);
  st = (await k('GET', '/apis/batch/v1/namespaces/fid-node/jobs/nowhere')).body.status || {};
  expect(st.active === 1 && st.ready === 0, 'Pending on a node that does not exist', st);
});

check('Jobs: a pod whose ServiceAccount does not exist is not created; the Job starts once it exists', async () => {
  await ns('fid-jsa');
  const job = (name, sa) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, template: { spec: { restartPolicy: 'Never',
    ...(sa ? { serviceAccountName: sa } : {}), automountServiceAccountToken: false, containers: [{ name: 'w', image: 'w' }] } } } });
  const status = async (n) => (await k('GET', `/apis/batch/v1/namespaces/fid-jsa/jobs/${n}`)).body.status || {};
  eq((await k('POST', '/apis/batch/v1/namespaces/fid-jsa/jobs', job('no-sa', 'runner'))).status, 201, 'created');
  // a Job created after it, as "default" (which every namespace has), completes: by then the
  // controller has passed over the first one more than once
  eq((await k('POST', '/apis/batch/v1/namespaces/fid-jsa/jobs', job('as-default'))).status, 201, 'created default');
  await until(async () => (await status('as-default')).succeeded === 1);
  const st = await status('no-sa');
  expect(st.startTime && !st.active && !st.succeeded, 'startTime set, no pod (active 0) while serviceaccount "runner" is missing', st);
  eq((await k('POST', '/api/v1/namespaces/fid-jsa/serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'runner' }, automountServiceAccountToken: false })).status, 201, 'sa');
  await until(async () => (await status('no-sa')).succeeded === 1);
});

check('RoleBinding roleRef is immutable: changing it is 422 with "cannot change roleRef"', async () => {
  const p = '/apis/rbac.authorization.k8s.io/v1/namespaces/fid-a/rolebindings';
  const rb = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'members' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' }, subjects: [{ kind: 'User', name: 'ann', apiGroup: 'rbac.authorization.k8s.io' }] };
  eq((await k('POST', p, rb)).status, 201, 'create');
  rb.roleRef.name = 'edit';
  const r = await apply(`${p}/members`, rb);
  eq([r.status, r.body.reason], [422, 'Invalid'], 'immutable');
  eq(r.body.message, 'RoleBinding.rbac.authorization.k8s.io "members" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef', 'message');
  rb.roleRef.name = 'view';
  rb.subjects.push({ kind: 'User', name: 'bob', apiGroup: 'rbac.authorization.k8s.io' });
  eq((await apply(`${p}/members`, rb)).status, 200, 'subjects can change');
});

check('label selectors: =, ==, !=, in, notin, exists, !key; a malformed one is 400', async () => {
  await ns('fid-sel');
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases';
  const specs = { l1: { env: 'prod', tier: 'a' }, l2: { env: 'dev', tier: 'b' }, l3: { env: 'test' }, l4: { tier: 'a' }, l5: {} };
  for (const [name, labels] of Object.entries(specs)) eq((await k('POST', p, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, labels }, spec: { holderIdentity: name } })).status, 201, `create ${name}`);
  const sel = async (s) => (await k('GET', `${p}?labelSelector=${encodeURIComponent(s)}`)).body.items.map((i) => i.metadata.name).join(',');
  eq(await sel('env=prod'), 'l1', '=');
  eq(await sel('env==dev'), 'l2', '==');
  eq(await sel('env!=prod'), 'l2,l3,l4,l5', '!=');
  eq(await sel('env in (prod,test)'), 'l1,l3', 'in');
  eq(await sel('env notin (prod,test)'), 'l2,l4,l5', 'notin');
  eq(await sel('tier'), 'l1,l2,l4', 'exists');
  eq(await sel('!env'), 'l4,l5', '!key');
  eq(await sel('env in (prod,dev),tier=a'), 'l1', 'and');
  const bad = await k('GET', `${p}?labelSelector=${encodeURIComponent('env in (prod')}`);
  eq([bad.status, bad.body.reason], [400, 'BadRequest'], 'malformed');
  const fs1 = await k('GET', `${p}?fieldSelector=metadata.name%3Dl3`);
  eq(fs1.body.items.map((i) => i.metadata.name), ['l3'], 'field selector');
  const l = await k('GET', p);
  eq([l.body.kind, l.body.apiVersion, l.body.items[0].kind], ['LeaseList', 'coordination.k8s.io/v1', undefined], 'built-in list shape');
});

check('pagination: limit/continue returns every item once, in order, with remainingItemCount', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases';
  let names = [], cont = '', pages = 0, first;
  do {
    const r = await k('GET', `${p}?limit=2${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
    eq(r.status, 200, 'page status');
    if (!pages) first = r.body.metadata;
    names = names.concat(r.body.items.map((i) => i.metadata.name));
    cont = r.body.metadata.continue;
    pages++;
  } while (cont && pages < 10);
  eq(names, ['l1', 'l2', 'l3', 'l4', 'l5'], 'all items');
  eq([pages, first.remainingItemCount], [3, 3], 'pages and remaining');
});

check('admin config: GET and a change answer 200 with the settings as JSON, no password', async () => {
  const g = await admin('GET', 'config');
  eq(g.status, 200, 'GET config');
  const p = await admin('POST', 'config', { readyDelayMs: 150, mlflowBasicAuth: 'u:secret' });
  try {
    eq([p.status, p.body.readyDelayMs, p.body.mlflowBasicAuth], [200, 150, true], 'POST config');
    expect(!JSON.stringify(p.body).includes('secret'), 'the password is not shown', p.body);
  } finally { await admin('PUT', 'config', { readyDelayMs: g.body.readyDelayMs, mlflowBasicAuth: '' }); }
});

check('pagination: an expired continue token is 410 Expired; a garbage one is 400', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases';
  await admin('PUT', 'config', { continueTtlMs: 50 });
  try {
    const r = await k('GET', `${p}?limit=2`);
    await sleep(120);
    const e = await k('GET', `${p}?limit=2&continue=${encodeURIComponent(r.body.metadata.continue)}`);
    eq([e.status, e.body.reason, e.body.code], [410, 'Expired', 410], 'expired');
    expect(/continue parameter is too old/.test(e.body.message), 'message', e.body.message);
  } finally { await admin('PUT', 'config', { continueTtlMs: 60000 }); }
  const g = await k('GET', `${p}?limit=2&continue=garbage`);
  eq(g.status, 400, 'garbage token');
});

check('LIST across all namespaces for inferenceservices; CRD list items carry apiVersion/kind', async () => {
  await ns('fid-b');
  await apply(`${ISVC}/namespaces/fid-b/inferenceservices/other`, isvcObj('other', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/o' }));
  const r = await k('GET', `${ISVC}/inferenceservices?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmlplat`);
  const ids = r.body.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`);
  expect(ids.includes('fid-a/ssa') && ids.includes('fid-b/other'), 'both namespaces', ids);
  eq([r.body.kind, r.body.items[0].kind], ['InferenceServiceList', 'InferenceService'], 'list kinds');
});

check('DELETE returns a Status Success with details; the object is gone', async () => {
  const p = `${ISVC}/namespaces/fid-b/inferenceservices/other`;
  const uid = (await k('GET', p)).body.metadata.uid;
  const d = await k('DELETE', p);
  eq([d.status, d.body.kind, d.body.status], [200, 'Status', 'Success'], 'status');
  eq(d.body.details, { name: 'other', group: 'serving.kserve.io', kind: 'inferenceservices', uid }, 'details');
  eq((await k('GET', p)).status, 404, 'gone');
  eq((await k('DELETE', p)).status, 404, 'second delete');
});

check('namespace DELETE returns it Terminating, refuses new content (403), then removes contents and itself', async () => {
  const d = await k('DELETE', '/api/v1/namespaces/fid-b');
  eq([d.status, d.body.kind, d.body.status.phase], [200, 'Namespace', 'Terminating'], 'terminating');
  expect(d.body.metadata.deletionTimestamp, 'deletionTimestamp');
  const g = await k('GET', '/api/v1/namespaces/fid-b');
  eq(g.body.status.phase, 'Terminating', 'GET shows Terminating');
  const c = await k('POST', '/apis/coordination.k8s.io/v1/namespaces/fid-b/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'late' } });
  eq([c.status, c.body.reason], [403, 'Forbidden'], 'create in terminating namespace');
  expect(/because it is being terminated/.test(c.body.message), 'message', c.body.message);
  await until(async () => (await k('GET', '/api/v1/namespaces/fid-b')).status === 404, 5000);
});

check('namespace DELETE with content a finalizer holds: Terminating with NamespaceContentRemaining/NamespaceFinalizersRemaining until it is released', async () => {
  await k('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'fid-h' } });
  const p = `${ISVC}/namespaces/fid-h/inferenceservices/kept`;
  await apply(p, isvcObj('kept', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/s' }));
  await apply(`${ISVC}/namespaces/fid-h/inferenceservices/free`, isvcObj('free', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/s' }));
  await admin('POST', 'isvc/hold', { namespace: 'fid-h', name: 'kept' });
  eq((await k('DELETE', '/api/v1/namespaces/fid-h')).status, 200, 'delete');
  const held = await until(async () => { const o = (await k('GET', '/api/v1/namespaces/fid-h')).body; return (o.status.conditions || []).length && o; }, 5000);
  eq(held.status.phase, 'Terminating', 'still Terminating');
  const cond = Object.fromEntries(held.status.conditions.map((c) => [c.type, [c.status, c.reason, c.message]]));
  eq(cond.NamespaceContentRemaining, ['True', 'SomeResourcesRemain', 'Some resources are remaining: inferenceservices.serving.kserve.io has 1 resource instances'], 'content remaining');
  eq(cond.NamespaceFinalizersRemaining, ['True', 'SomeFinalizersRemain', 'Some content in the namespace has finalizers remaining: inferenceservice.finalizers in 1 resource instances'], 'finalizers remaining');
  const o = (await k('GET', p)).body;
  expect(o.metadata.deletionTimestamp && o.metadata.finalizers.includes('inferenceservice.finalizers'), 'the held object is terminating with its finalizer', o.metadata);
  eq((await k('GET', `${ISVC}/namespaces/fid-h/inferenceservices/free`)).status, 404, 'content no finalizer holds is gone');
  await admin('POST', 'isvc/hold', { namespace: 'fid-h', name: 'kept', hold: false });
  await until(async () => (await k('GET', '/api/v1/namespaces/fid-h')).status === 404, 5000);
});

check('KServe defaulting: probe zero delay, empty env and an env value "" dropped, deploymentMode annotation, protocolVersion v2 for triton', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/deflt`;
  const r = await apply(p, isvcObj('deflt', { modelFormat: { name: 'triton' }, storageUri: 's3://models/t', env: [], readinessProbe: { initialDelaySeconds: 0, periodSeconds: 10 } }));
  const m = r.body.spec.predictor.model;
  expect(!('env' in m), 'env dropped', m);
  eq(m.readinessProbe, { periodSeconds: 10 }, 'probe');
  eq(m.protocolVersion, 'v2', 'protocolVersion');
  eq(r.body.metadata.annotations['serving.kserve.io/deploymentMode'], 'Serverless', 'annotation');
  const settled = await until(async () => { const o = (await k('GET', p)).body; return ready(o) && ready(o).status === 'True' && o; });
  const again = await apply(p, isvcObj('deflt', { modelFormat: { name: 'triton' }, storageUri: 's3://models/t', env: [], readinessProbe: { initialDelaySeconds: 0, periodSeconds: 10 } }));
  eq(again.body.metadata.resourceVersion, settled.metadata.resourceVersion, 're-applying the same (defaulted) spec is a no-op');
  const s = await apply(`${ISVC}/namespaces/fid-a/inferenceservices/sk`, isvcObj('sk', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/s', env: [{ name: 'E', value: '' }] }));
  expect(!('protocolVersion' in s.body.spec.predictor.model), 'no protocolVersion for sklearn');
  eq(s.body.spec.predictor.model.env, [{ name: 'E' }], 'an env value "" dropped (omitempty)');
});

check('KServe readiness: Ready Unknown for the new generation, then True with url and 100% traffic on revision 00001', async () => {
  await admin('PUT', 'config', { readyDelayMs: 800 });
  try {
    const p = `${ISVC}/namespaces/fid-a/inferenceservices/rd`;
    await apply(p, isvcObj('rd', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/rd/1' }));
    const u = await until(async () => { const o = (await k('GET', p)).body; return o.status && o.status.observedGeneration === 1 && o; });
    eq(ready(u).status, 'Unknown', 'first Unknown');
    const t = await until(async () => { const o = (await k('GET', p)).body; return ready(o) && ready(o).status === 'True' && o; });
    eq(t.status.url, 'http://rd.fid-a.example.com', 'url');
    const c = t.status.components.predictor;
    eq([c.latestCreatedRevision, c.latestReadyRevision, c.latestRolledoutRevision], ['rd-predictor-00001', 'rd-predictor-00001', 'rd-predictor-00001'], 'revisions');
    eq(c.traffic, [{ latestRevision: true, percent: 100, revisionName: 'rd-predictor-00001' }], 'traffic');
  } finally { await admin('PUT', 'config', { readyDelayMs: 100 }); }
});

check('KServe canary: split latest/prev, 0 sends all to previous, removing the field promotes latest', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/rd`;
  const settled = (gen) => until(async () => { const o = (await k('GET', p)).body; return o.status.observedGeneration === gen && ready(o).status === 'True' && o; });
  let o = await apply(p, isvcObj('rd', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/rd/2' }, { canaryTrafficPercent: 10 }));
  o = await settled(o.body.metadata.generation);
  let c = o.status.components.predictor;
  eq(c.traffic.map((t) => [t.revisionName, t.percent, t.tag, t.latestRevision]), [['rd-predictor-00002', 10, 'latest', true], ['rd-predictor-00001', 90, 'prev', false]], 'canary 10');
  eq([c.latestCreatedRevision, c.latestRolledoutRevision], ['rd-predictor-00002', 'rd-predictor-00001'], 'not rolled out yet');
  o = await apply(p, isvcObj('rd', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/rd/2' }, { canaryTrafficPercent: 0 }));
  o = await settled(o.body.metadata.generation);
  c = o.status.components.predictor;
  eq(c.latestCreatedRevision, 'rd-predictor-00002', 'a traffic-only change mints no revision');
  eq(c.traffic.map((t) => [t.revisionName, t.percent]), [['rd-predictor-00002', 0], ['rd-predictor-00001', 100]], 'canary 0');
  o = await apply(p, isvcObj('rd', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/rd/2' }));
  expect(o.body.spec.predictor.canaryTrafficPercent === undefined, 'apply removed the field');
  o = await settled(o.body.metadata.generation);
  c = o.status.components.predictor;
  eq(c.traffic.map((t) => [t.revisionName, t.percent]), [['rd-predictor-00002', 100]], 'promoted');
  eq([c.latestRolledoutRevision, c.previousRolledoutRevision], ['rd-predictor-00002', 'rd-predictor-00001'], 'rolled-out revisions');
});

check('KServe: a storage URI flagged bad gives Ready=False (RevisionFailed) with ModelLoadFailed', async () => {
  await admin('POST', 'kserve/storage', { uri: 's3://models/broken', bad: true });
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/broken`;
  await apply(p, isvcObj('broken', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/broken' }));
  const o = await until(async () => { const x = (await k('GET', p)).body; return ready(x) && ready(x).status === 'False' && x; });
  eq(ready(o).reason, 'RevisionFailed', 'reason');
  eq([o.status.modelStatus.transitionStatus, o.status.modelStatus.lastFailureInfo.reason], ['BlockedByFailedLoad', 'ModelLoadFailed'], 'modelStatus');
  await admin('POST', 'kserve/storage', { uri: 's3://models/broken', bad: false });
  await until(async () => { const x = (await k('GET', p)).body; return ready(x).status === 'True'; });
});

// Record every phase a workflow goes through, from a watch (so no short-lived phase is missed).
function watchPhases(p, until_, fromRv) {
  const slash = p.lastIndexOf('/');
  const coll = p.slice(0, slash), name = p.slice(slash + 1);
  return new Promise((resolve, reject) => {
    const seen = [];
    let buf = '';
    const u = new URL(`${BASE}${coll}?watch=true&fieldSelector=metadata.name%3D${name}&timeoutSeconds=20${fromRv ? `&resourceVersion=${fromRv}` : ''}`);
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers: { Authorization: `Bearer ${TOKEN}` } }, (resp) => {
      resp.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const ev = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1);
          const ph = (ev.object.status && ev.object.status.phase) || '';
          if (seen[seen.length - 1] !== ph) seen.push(ph);
          if (until_(ph)) { r.destroy(); resolve({ seen, o: ev.object }); return; }
        }
      });
      resp.on('end', () => reject(new Fail(`watch ended; phases seen ${JSON.stringify(seen)}`)));
    });
    r.on('error', (e) => { if (!r.destroyed || !seen.length) reject(e); });
    r.end();
  });
}

check('Argo identity: no executor Role errors each step as "forbidden"; a missing ServiceAccount fails pod creation; a Role makes it run', async () => {
  const single = (name, spec) => ({ apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', metadata: { name },
    spec: { entrypoint: 'main', templates: [{ name: 'main', container: { image: 'busybox' } }], ...spec } });
  const done = (ph) => ph === 'Succeeded' || ph === 'Failed' || ph === 'Error';
  await k('POST', `${WF}/namespaces/fid-a/workflows`, single('no-rbac', {}));
  let r = await watchPhases(`${WF}/namespaces/fid-a/workflows/no-rbac`, done);
  eq([r.o.status.phase, r.o.status.nodes['no-rbac'].phase, r.o.status.message],
    ['Error', 'Error', 'Error (exit code 64): workflowtaskresults.argoproj.io is forbidden: User "system:serviceaccount:fid-a:default" cannot create resource "workflowtaskresults" in API group "argoproj.io" in the namespace "fid-a"'],
    'the default ServiceAccount may not write task results');
  await k('POST', `${WF}/namespaces/fid-a/workflows`, single('ghost-sa', { serviceAccountName: 'ghost' }));
  r = await watchPhases(`${WF}/namespaces/fid-a/workflows/ghost-sa`, done);
  eq([r.o.status.phase, r.o.status.message], ['Error', 'pods "ghost-sa" is forbidden: error looking up service account fid-a/ghost: serviceaccount "ghost" not found'], 'missing ServiceAccount');
  await k('POST', `${WF}/namespaces/fid-a/workflows`, single('no-exec-sa', { automountServiceAccountToken: false }));
  r = await watchPhases(`${WF}/namespaces/fid-a/workflows/no-exec-sa`, done);
  eq(r.o.status.phase, 'Error', 'no token and no executor ServiceAccount');
  // Argo's documented executor minimum, bound to a runner and to default (the tests below use default)
  eq((await k('POST', '/api/v1/namespaces/fid-a/serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'runner' }, automountServiceAccountToken: false })).status, 201, 'sa');
  eq((await k('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/fid-a/roles', { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'executor' },
    rules: [{ apiGroups: ['argoproj.io'], resources: ['workflowtaskresults'], verbs: ['create', 'patch'] }] })).status, 201, 'role');
  eq((await k('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/fid-a/rolebindings', { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'executor' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'executor' },
    subjects: [{ kind: 'ServiceAccount', name: 'runner', namespace: 'fid-a' }, { kind: 'ServiceAccount', name: 'default', namespace: 'fid-a' }] })).status, 201, 'binding');
  await k('POST', `${WF}/namespaces/fid-a/workflows`, single('runner-ok', { serviceAccountName: 'runner', automountServiceAccountToken: false, executor: { serviceAccountName: 'runner' } }));
  r = await watchPhases(`${WF}/namespaces/fid-a/workflows/runner-ok`, done);
  eq(r.o.status.phase, 'Succeeded', 'the runner with the executor Role, no token in the pod');
});

const dagWorkflow = (name) => ({ apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'mlplat' } },
  spec: { entrypoint: 'main', templates: [
    { name: 'main', dag: { tasks: [{ name: 'prepare', template: 'step' }, { name: 'train', template: 'step', dependencies: ['prepare'] }, { name: 'evaluate', template: 'step', dependencies: ['train'] }] } },
    { name: 'step', container: { image: 'python:3.12', command: ['python', '-c', 'print(1)'] } }] } });

check('Argo: "" -> Pending -> Running -> Failed; the scripted train step exits "2"; dependents never start', async () => {
  await admin('POST', 'argo/plan', { namespace: 'fid-a', name: 'wf-fail', steps: { train: { exitCode: 2 } } });
  const rv = (await k('GET', `${WF}/namespaces/fid-a/workflows`)).body.metadata.resourceVersion;
  const c = await k('POST', `${WF}/namespaces/fid-a/workflows`, dagWorkflow('wf-fail'));
  eq(c.status, 201, 'create');
  expect(!c.body.status || !c.body.status.phase, 'phase "" at creation');
  const { seen, o } = await watchPhases(`${WF}/namespaces/fid-a/workflows/wf-fail`, (ph) => ph === 'Failed' || ph === 'Succeeded', rv);
  eq(seen, ['', 'Pending', 'Running', 'Failed'], 'phase sequence');
  const nodes = Object.values(o.status.nodes);
  const by = (d) => nodes.find((n) => n.displayName === d);
  eq([by('prepare').phase, by('prepare').outputs.exitCode], ['Succeeded', '0'], 'prepare');
  eq([by('train').phase, by('train').outputs.exitCode, by('train').message, by('train').type], ['Failed', '2', 'Error (exit code 2)', 'Pod'], 'train');
  expect(typeof by('train').outputs.exitCode === 'string', 'exit code is a string');
  expect(!by('evaluate'), 'evaluate never started');
  const root = o.status.nodes['wf-fail'];
  eq([root.type, root.phase], ['DAG', 'Failed'], 'root node');
  eq(o.status.message, `child '${by('train').id}' failed`, 'workflow message');
  expect(by('train').id === Object.keys(o.status.nodes).find((id) => o.status.nodes[id] === by('train')), 'nodes keyed by id');
  expect(by('train').startedAt && by('train').finishedAt && o.status.startedAt && o.status.finishedAt, 'timestamps');
  eq(o.metadata.labels['workflows.argoproj.io/phase'], 'Failed', 'phase label');
});

check('Argo: DAG tasks run in dependency order and the workflow Succeeds', async () => {
  await k('POST', `${WF}/namespaces/fid-a/workflows`, dagWorkflow('wf-ok'));
  const { o } = await watchPhases(`${WF}/namespaces/fid-a/workflows/wf-ok`, (ph) => ph === 'Failed' || ph === 'Succeeded');
  eq(o.status.phase, 'Succeeded', 'phase');
  const n = Object.values(o.status.nodes).filter((x) => x.type === 'Pod').sort((a, b) => (a.startedAt < b.startedAt ? -1 : 1));
  eq(n.length, 3, 'three pods');
  const by = (d) => n.find((x) => x.displayName === d);
  expect(by('prepare').finishedAt <= by('train').startedAt && by('train').finishedAt <= by('evaluate').startedAt, 'order', n.map((x) => [x.displayName, x.startedAt, x.finishedAt]));
  eq(o.status.progress, '3/3', 'progress');
});

check('Argo: spec.shutdown=Terminate ends a running workflow as Failed "Stopped with strategy \'Terminate\'"', async () => {
  await admin('POST', 'argo/plan', { namespace: 'fid-a', name: 'wf-term', steps: { prepare: { ticks: 1000 } } });
  const p = `${WF}/namespaces/fid-a/workflows/wf-term`;
  await k('POST', `${WF}/namespaces/fid-a/workflows`, dagWorkflow('wf-term'));
  await watchPhases(p, (ph) => ph === 'Running');
  const r = await k('PATCH', p, { spec: { shutdown: 'Terminate' } }, { ct: 'application/merge-patch+json' });
  eq(r.status, 200, 'patch');
  const { o } = await watchPhases(p, (ph) => ph === 'Failed');
  eq(o.status.message, "Stopped with strategy 'Terminate'", 'message');
  const prep = Object.values(o.status.nodes).find((x) => x.displayName === 'prepare');
  eq([prep.phase, prep.message], ['Failed', "Stopped with strategy 'Terminate'"], 'running node stopped');
});

check('Argo: steps workflow (generateName) and a single-container workflow exiting 3', async () => {
  const steps = { apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', metadata: { generateName: 'train-' },
    spec: { entrypoint: 'main', templates: [{ name: 'main', steps: [[{ name: 'fetch', template: 'c' }], [{ name: 'a', template: 'c' }, { name: 'b', template: 'c' }]] }, { name: 'c', container: { image: 'busybox' } }] } };
  const c = await k('POST', `${WF}/namespaces/fid-a/workflows`, steps);
  expect(c.status === 201 && /^train-[a-z0-9]{5}$/.test(c.body.metadata.name), 'generateName', c.body.metadata);
  const { o } = await watchPhases(`${WF}/namespaces/fid-a/workflows/${c.body.metadata.name}`, (ph) => ph === 'Succeeded' || ph === 'Failed');
  const n = Object.values(o.status.nodes);
  eq([o.status.phase, o.status.nodes[o.metadata.name].type, n.filter((x) => x.type === 'Pod').map((x) => x.name).sort()],
    ['Succeeded', 'Steps', [`${o.metadata.name}[0].fetch`, `${o.metadata.name}[1].a`, `${o.metadata.name}[1].b`]], 'steps');
  const fetch = n.find((x) => x.displayName === 'fetch'), a = n.find((x) => x.displayName === 'a');
  expect(fetch.finishedAt <= a.startedAt, 'groups in order');
  await admin('POST', 'argo/plan', { namespace: 'fid-a', name: 'single', steps: { main: { exitCode: 3 } } });
  await k('POST', `${WF}/namespaces/fid-a/workflows`, { apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', metadata: { name: 'single' }, spec: { entrypoint: 'main', templates: [{ name: 'main', container: { image: 'busybox' } }] } });
  const r = await watchPhases(`${WF}/namespaces/fid-a/workflows/single`, (ph) => ph === 'Succeeded' || ph === 'Failed');
  const root = r.o.status.nodes.single;
  eq([r.o.status.phase, root.type, root.outputs.exitCode, r.o.status.message], ['Failed', 'Pod', '3', 'Error (exit code 3)'], 'single pod');
});

check('Jobs: Complete condition on success, Failed (BackoffLimitExceeded) per the plan', async () => {
  const job = (name) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } } } });
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-bad', steps: { '*': { exitCode: 1 } } });
  eq((await k('POST', '/apis/batch/v1/namespaces/fid-a/jobs', job('job-ok'))).status, 201, 'create ok');
  const c = await k('POST', '/apis/batch/v1/namespaces/fid-a/jobs', job('job-bad'));
  eq(c.body.spec.backoffLimit, 6, 'defaulted backoffLimit');
  const cond = async (n, t) => until(async () => ((await k('GET', `/apis/batch/v1/namespaces/fid-a/jobs/${n}`)).body.status?.conditions || []).find((x) => x.type === t && x.status === 'True'));
  await cond('job-ok', 'Complete');
  eq((await cond('job-bad', 'Failed')).reason, 'BackoffLimitExceeded', 'failed reason');
});

check('Jobs: ticks, pending, activeDeadlineSeconds -> DeadlineExceeded, plan s3 outputs on Complete and onFailure', async () => {
  const job = (name, spec = {}) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, ...spec, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'builder', image: 'busybox' }] } } } });
  const get = async (n) => (await k('GET', `/apis/batch/v1/namespaces/fid-a/jobs/${n}`)).body;
  const cond = async (n, t) => until(async () => ((await get(n)).status?.conditions || []).find((x) => x.type === t && x.status === 'True'), 8000);
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-out', steps: { '*': { ticks: 3, s3: [
    { bucket: 'artifacts', key: 'opt/fid/1/artifact', content: 'weights', checksum: true },
    { bucket: 'artifacts', key: 'opt/fid/1/attestation.json', content: '{"type": "x"}' }] } } });
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-partial', steps: { '*': { failReason: 'BackoffLimitExceeded', s3: [
    { bucket: 'artifacts', key: 'opt/fid/2/artifact', content: 'half', onFailure: true },
    { bucket: 'artifacts', key: 'opt/fid/2/attestation.json', content: '{}' }] } } });
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-pending', steps: { '*': { pending: true } } });
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-slow', steps: { '*': { ticks: 1000 } } });
  await admin('PUT', 'config', { deadlineScale: 0.001 });
  try {
    for (const n of ['job-out', 'job-partial', 'job-pending']) eq((await k('POST', '/apis/batch/v1/namespaces/fid-a/jobs', job(n))).status, 201, `create ${n}`);
    eq((await k('POST', '/apis/batch/v1/namespaces/fid-a/jobs', job('job-slow', { activeDeadlineSeconds: 60 }))).status, 201, 'create job-slow');
    await until(async () => (await get('job-out')).status?.active === 1, 8000);
    expect(!((await get('job-out')).status?.conditions), 'active for several ticks, no condition yet');
    await cond('job-out', 'Complete');
    const art = await request('HEAD', `${S3}/artifacts/opt/fid/1/artifact`, undefined, { token: null, headers: { 'x-amz-checksum-mode': 'ENABLED' } });
    eq([art.status, art.headers['x-amz-checksum-sha256']], [200, crypto.createHash('sha256').update('weights').digest('base64')], 'output written before Complete, with its checksum');
    eq((await request('GET', `${S3}/artifacts/opt/fid/1/attestation.json`, undefined, { token: null })).text, '{"type": "x"}', 'attestation written');
    const f = await cond('job-partial', 'Failed');
    eq([f.reason, f.message], ['BackoffLimitExceeded', 'Job has reached the specified backoff limit'], 'failed as planned');
    eq((await request('HEAD', `${S3}/artifacts/opt/fid/2/artifact`, undefined, { token: null })).status, 200, 'partial output (onFailure) written');
    eq((await request('HEAD', `${S3}/artifacts/opt/fid/2/attestation.json`, undefined, { token: null })).status, 404, 'nothing else on failure');
    const d = await cond('job-slow', 'Failed');
    eq([d.reason, d.message], ['DeadlineExceeded', 'Job was active longer than specified deadline'], 'deadline exceeded');
    const p = await get('job-pending');
    eq([p.status?.startTime, p.status?.active, p.status?.conditions], [undefined, undefined, undefined], 'a pending Job never starts');
  } finally {
    await admin('PUT', 'config', { deadlineScale: 1 });
  }
});

check('Jobs: Foreground DELETE keeps the Job terminating for --job-delete-ms or while stuck; Background removes at once', async () => {
  const job = (name) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name }, spec: { backoffLimit: 0, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'builder', image: 'busybox' }] } } } });
  const url = (n) => `/apis/batch/v1/namespaces/fid-a/jobs/${n}`;
  await admin('POST', 'argo/plan', { kind: 'job', namespace: 'fid-a', name: 'job-del-', steps: { '*': { ticks: 100000 } } });
  await admin('PUT', 'config', { jobDeleteMs: 200 });
  try {
    for (const n of ['job-del-fg', 'job-del-bg', 'job-del-stuck']) await k('POST', '/apis/batch/v1/namespaces/fid-a/jobs', job(n));
    await until(async () => (await k('GET', url('job-del-fg'))).body.status?.active === 1, 8000);
    const fg = await k('DELETE', `${url('job-del-fg')}?propagationPolicy=Foreground`);
    eq([fg.status, fg.body.metadata.finalizers, Boolean(fg.body.metadata.deletionTimestamp), fg.body.status.active, fg.body.status.terminating],
      [200, ['foregroundDeletion'], true, 0, 1], 'foreground: the Job is returned terminating');
    eq((await k('GET', url('job-del-fg'))).status, 200, 'still there while its pods terminate');
    eq((await k('DELETE', url('job-del-fg'), { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' })).status, 200, 'a second DELETE answers the terminating Job');
    await until(async () => (await k('GET', url('job-del-fg'))).status === 404, 5000);
    eq((await k('DELETE', url('job-del-bg'), { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' })).status, 200, 'background delete');
    eq((await k('GET', url('job-del-bg'))).status, 404, 'background: gone at once');
    await admin('POST', 'jobs/stuck', { namespace: 'fid-a', name: 'job-del-stuck', stuck: true });
    await k('DELETE', url('job-del-stuck'), { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' });
    await sleep(600);
    eq(Boolean((await k('GET', url('job-del-stuck'))).body.metadata.deletionTimestamp), true, 'stuck: still terminating after jobDeleteMs');
    await admin('POST', 'jobs/stuck', { namespace: 'fid-a', name: 'job-del-stuck', stuck: false });
    await until(async () => (await k('GET', url('job-del-stuck'))).status === 404, 5000);
  } finally {
    await admin('PUT', 'config', { jobDeleteMs: 300 });
  }
});

check('every stored InferenceService and Workflow validates against the real CRD schemas', async () => {
  const objs = (await admin('GET', 'objects?resource=inferenceservices')).body.items.concat((await admin('GET', 'objects?resource=workflows')).body.items);
  expect(objs.length >= 5, 'objects to validate', objs.length);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'standin-validate-'));
  const files = objs.map((o, i) => { const f = path.join(dir, `${i}-${o.kind}-${o.metadata.name}.json`); fs.writeFileSync(f, JSON.stringify(o)); return f; });
  const r = spawnSync('/usr/bin/python3', [args.validator, ...files], { encoding: 'utf8', timeout: 60000 });
  fs.rmSync(dir, { recursive: true, force: true });
  expect(r.status === 0, `validate-manifest exit ${r.status}`, (r.stdout + r.stderr).split('\n').filter((l) => !/: valid$/.test(l)).join('\n'));
});

check('MLflow: models, versions, aliases; missing alias 400 INVALID_PARAMETER_VALUE, missing version/model 404; DELETE reads the body', async () => {
  const ml = (m, ep, body) => k(m, `/api/2.0/mlflow/${ep}`, body);
  eq((await ml('POST', 'registered-models/create', { name: 'iris' })).status, 200, 'create model');
  const dup = await ml('POST', 'registered-models/create', { name: 'iris' });
  eq([dup.status, dup.body.error_code], [400, 'RESOURCE_ALREADY_EXISTS'], 'duplicate');
  const v = await ml('POST', 'model-versions/create', { name: 'iris', source: 's3://models/iris/1' });
  eq(v.body.model_version.version, '1', 'version is a string');
  await ml('POST', 'model-versions/create', { name: 'iris', source: 's3://models/iris/2' });
  eq((await ml('POST', 'registered-models/alias', { name: 'iris', alias: 'champion', version: '2' })).status, 200, 'set alias');
  const g = await ml('GET', 'registered-models/alias?name=iris&alias=champion');
  eq([g.status, g.body.model_version.version, g.body.model_version.aliases], [200, '2', ['champion']], 'get by alias');
  const miss = await ml('GET', 'registered-models/alias?name=iris&alias=candidate');
  eq([miss.status, miss.body.error_code], [400, 'INVALID_PARAMETER_VALUE'], 'missing alias');
  const mv = await ml('GET', 'model-versions/get?name=iris&version=9');
  eq([mv.status, mv.body.error_code], [404, 'RESOURCE_DOES_NOT_EXIST'], 'missing version');
  const sa = await ml('POST', 'registered-models/alias', { name: 'iris', alias: 'candidate', version: '9' });
  eq([sa.status, sa.body.error_code], [404, 'RESOURCE_DOES_NOT_EXIST'], 'alias to missing version');
  const mm = await ml('GET', 'registered-models/get?name=nope');
  eq([mm.status, mm.body.error_code], [404, 'RESOURCE_DOES_NOT_EXIST'], 'missing model');
  // Real MLflow reads a DELETE's parameters from the JSON body only (mlflow 3.17.2 answers a
  // query-only DELETE with 400 "Missing value for required parameter 'name'").
  const dq = await ml('DELETE', 'registered-models/alias?name=iris&alias=champion');
  eq([dq.status, dq.body.error_code], [400, 'INVALID_PARAMETER_VALUE'], 'delete alias by query');
  eq((await ml('DELETE', 'registered-models/alias', { name: 'iris', alias: 'champion' })).status, 200, 'delete alias by body');
  eq((await ml('GET', 'registered-models/alias?name=iris&alias=champion')).status, 400, 'deleted alias is missing');
  const rm = await ml('GET', 'registered-models/get?name=iris');
  eq(rm.body.registered_model.latest_versions[0].version, '2', 'latest version');
});

check('S3 (s3rver): seeded artifact has ETag = MD5, Content-Length, sha256 user metadata; GET returns the bytes', async () => {
  const content = 'weights-' + 'x'.repeat(1000);
  const s = (await admin('POST', 's3/object', { bucket: 'models', key: 'iris/1/model.bin', content, metadata: { 'model-name': 'iris' } })).body;
  const sha = crypto.createHash('sha256').update(content).digest('hex');
  const md5 = crypto.createHash('md5').update(content).digest('hex');
  eq([s.sha256, s.etag, s.size], [sha, `"${md5}"`, content.length], 'seed result');
  const h = await request('HEAD', `${S3}/models/iris/1/model.bin`, undefined, { token: null });
  eq([h.status, h.headers.etag, h.headers['content-length'], h.headers['x-amz-meta-sha256'], h.headers['x-amz-meta-model-name']], [200, `"${md5}"`, String(content.length), sha, 'iris'], 'HEAD');
  const g = await request('GET', `${S3}/models/iris/1/model.bin`, undefined, { token: null });
  eq(crypto.createHash('sha256').update(g.text).digest('hex'), sha, 'GET body');
  eq((await request('HEAD', `${S3}/models/iris/1/missing.bin`, undefined, { token: null })).status, 404, 'missing key');
});

check('S3 front: request log, s3 fault rules, x-amz-checksum-sha256 when asked, SigV4 checked', async () => {
  const content = 'front-' + 'y'.repeat(100);
  const sha = crypto.createHash('sha256').update(content);
  const b64 = sha.copy().digest('base64');
  await admin('POST', 's3/object', { bucket: 'models', key: 'front/1.bin', content, sha256Meta: false, checksum: true });
  const plain = await request('HEAD', `${S3}/models/front/1.bin`, undefined, { token: null });
  eq([plain.status, plain.headers['x-amz-checksum-sha256'], plain.headers['x-amz-meta-sha256'], plain.headers['x-amz-meta-standin-checksum-sha256']],
    [200, undefined, undefined, undefined], 'no checksum unless asked, no sha256 metadata');
  const asked = await request('HEAD', `${S3}/models/front/1.bin`, undefined, { token: null, headers: { 'x-amz-checksum-mode': 'ENABLED' } });
  eq(asked.headers['x-amz-checksum-sha256'], b64, 'checksum with x-amz-checksum-mode: ENABLED');
  const since = (await admin('GET', 'requests?area=s3')).body.seq;
  await admin('POST', 'faults', { s3: true, method: 'GET', path: '^/models/front/', status: 503, times: 1 });
  const f = await request('GET', `${S3}/models/front/1.bin`, undefined, { token: null });
  eq([f.status, /<Code>SlowDown<\/Code>/.test(f.text)], [503, true], 'an s3 fault rule answers 503 SlowDown');
  eq((await request('GET', `${S3}/models/front/1.bin`, undefined, { token: null })).text, content, 'then the object');
  eq((await k('GET', '/api/v1/namespaces')).status, 200, 's3 rules do not touch Kubernetes routes');
  await admin('DELETE', 'faults');
  const log = (await admin('GET', `requests?area=s3&since=${since}`)).body.items;
  eq(log.map((e) => `${e.method} ${e.status}`), ['GET 503', 'GET 200'], 'S3 requests are logged with area s3');
  // a V4 signature with the wrong secret is refused as S3 refuses it
  const date = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
  const bad = `AWS4-HMAC-SHA256 Credential=S3RVER/${date.slice(0, 8)}/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=${'0'.repeat(64)}`;
  const r = await request('GET', `${S3}/models/front/1.bin`, undefined, { token: null, headers: { Authorization: bad, 'x-amz-date': date, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } });
  eq([r.status, /SignatureDoesNotMatch/.test(r.text)], [403, true], 'a wrong SigV4 signature is refused');
});

check('OTLP/HTTP JSON: POST /v1/traces records spans, admin returns them by trace id', async () => {
  const traceId = crypto.randomBytes(16).toString('hex');
  const body = { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'mlplat-reconciler' } }] },
    scopeSpans: [{ scope: { name: 'mlplat' }, spans: [{ traceId, spanId: 'aaaaaaaaaaaaaaaa', name: 'reconcile deployment', kind: 1, startTimeUnixNano: '1', endTimeUnixNano: '2', attributes: [{ key: 'mlplat.deployment', value: { stringValue: 'iris' } }] }] }] }] };
  const r = await request('POST', `${BASE}/v1/traces`, body, { token: null });
  eq(r.status, 200, 'export');
  const s = (await admin('GET', `spans?traceId=${traceId}`)).body.spans;
  eq([s.length, s[0].service, s[0].name, s[0].attributes['mlplat.deployment']], [1, 'mlplat-reconciler', 'reconcile deployment', 'iris'], 'span');
});

check('Prometheus /metrics: scripted revisions — healthy, regressing (more 5xx, slower), silent (no new samples)', async () => {
  await admin('POST', 'metrics/revision', { revision: 'm-predictor-00001', namespace: 'fid-a', behaviour: 'healthy', rps: 2000 });
  await admin('POST', 'metrics/revision', { revision: 'm-predictor-00002', namespace: 'fid-a', behaviour: 'regressing', rps: 2000 });
  await sleep(300);
  await admin('POST', 'metrics/revision', { revision: 'm-predictor-00002', namespace: 'fid-a', behaviour: 'silent' });
  const scrape = async () => {
    const t = (await request('GET', `${BASE}/metrics`, undefined, { token: null })).text;
    const v = (rev, metric, lbl) => Number((t.split('\n').find((l) => l.startsWith(`${metric}{`) && l.includes(`revision_name="${rev}"`) && l.includes(lbl)) || ' NaN').split(' ').pop());
    return { t, v };
  };
  const a = await scrape();
  expect(/# TYPE revision_request_count counter/.test(a.t) && /# TYPE revision_request_latencies histogram/.test(a.t), 'exposition headers');
  const ratio = (s, rev) => s.v(rev, 'revision_request_count', 'response_code="500"') / (s.v(rev, 'revision_request_count', 'response_code="200"') + s.v(rev, 'revision_request_count', 'response_code="500"'));
  expect(ratio(a, 'm-predictor-00002') > 0.1 && ratio(a, 'm-predictor-00001') < 0.02, 'error ratios', [ratio(a, 'm-predictor-00001'), ratio(a, 'm-predictor-00002')]);
  const p100 = (s, rev) => s.v(rev, 'revision_request_latencies_bucket', 'le="100"') / s.v(rev, 'revision_request_latencies_count', 'revision_name');
  expect(p100(a, 'm-predictor-00001') > 0.9 && p100(a, 'm-predictor-00002') < 0.5, 'latency shapes', [p100(a, 'm-predictor-00001'), p100(a, 'm-predictor-00002')]);
  await sleep(100);
  const b = await scrape();
  eq(b.v('m-predictor-00002', 'revision_request_latencies_count', 'revision_name'), a.v('m-predictor-00002', 'revision_request_latencies_count', 'revision_name'), 'silent revision does not grow');
  expect(b.v('m-predictor-00001', 'revision_request_latencies_count', 'revision_name') > a.v('m-predictor-00001', 'revision_request_latencies_count', 'revision_name'), 'healthy revision grows');
});

check('Prometheus /metrics: a revision scripted with `service` serves its share of the canary split', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/tf`;
  const settled = (gen) => until(async () => { const o = (await k('GET', p)).body; return o.status && o.status.observedGeneration === gen && ready(o).status === 'True' && o; });
  let o = await apply(p, isvcObj('tf', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/tf/1' }));
  await settled(o.body.metadata.generation);
  o = await apply(p, isvcObj('tf', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/tf/2' }, { canaryTrafficPercent: 25 }));
  await settled(o.body.metadata.generation);
  for (const rev of ['tf-predictor-00001', 'tf-predictor-00002']) await admin('POST', 'metrics/revision', { revision: rev, namespace: 'fid-a', behaviour: 'healthy', rps: 4000, service: 'tf' });
  const count = async (rev) => {
    const t = (await request('GET', `${BASE}/metrics`, undefined, { token: null })).text;
    return Number(t.split('\n').find((l) => l.startsWith('revision_request_latencies_count{') && l.includes(`revision_name="${rev}"`)).split(' ').pop());
  };
  await sleep(600);
  const [a, b] = [await count('tf-predictor-00002'), await count('tf-predictor-00001')];
  expect(a > 0 && Math.abs(a / (a + b) - 0.25) < 0.05, 'the canary gets about 25% of the requests', [a, b]);
  o = await apply(p, isvcObj('tf', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/tf/2' }, { canaryTrafficPercent: 0 }));
  await settled(o.body.metadata.generation);
  const a0 = await count('tf-predictor-00002');
  await sleep(300);
  eq(await count('tf-predictor-00002'), a0, 'at 0% the canary serves nothing');
});

check('faults: a seeded 30% 500 rate lands near 30%; a forced 500 is an InternalError Status', async () => {
  const run = async () => {
    await admin('DELETE', 'faults');
    await admin('POST', 'faults', { method: 'GET', path: '^/api/v1/namespaces/fid-a$', status: 500, rate: 0.3 });
    const out = [];
    for (let i = 0; i < 200; i++) out.push((await k('GET', '/api/v1/namespaces/fid-a')).status);
    await admin('DELETE', 'faults');
    return out;
  };
  const a = await run();
  const fails = a.filter((s) => s === 500).length;
  expect(fails > 30 && fails < 95, 'about 30% failures', fails);
  const e = await (async () => { await admin('POST', 'faults', { method: 'GET', path: '^/api/v1/namespaces/fid-a$', status: 500, rate: 1, times: 1 }); const r = await k('GET', '/api/v1/namespaces/fid-a'); await admin('DELETE', 'faults'); return r; })();
  eq([e.status, e.body.reason, e.body.code], [500, 'InternalError', 500], 'InternalError Status');
});

check('faults: 429 with Retry-After, 503, added latency, 403 for one resource kind only', async () => {
  await admin('POST', 'faults', { method: 'GET', path: '/leases$', status: 429, retryAfter: 3, times: 1 });
  const t = await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases');
  eq([t.status, t.headers['retry-after'], t.body.reason, t.body.details.retryAfterSeconds], [429, '3', 'TooManyRequests', 3], '429');
  eq((await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases')).status, 200, 'times=1 honoured');
  await admin('POST', 'faults', { path: '/leases/l1$', status: 503, times: 1 });
  const u = await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases/l1');
  eq([u.status, u.body.reason], [503, 'ServiceUnavailable'], '503');
  // 422 and 400: refused for good, each with the Status the real API server sends
  await admin('POST', 'faults', { method: 'POST', path: '/leases$', status: 422, times: 1 });
  const v = await k('POST', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l422' } });
  eq([v.status, v.body.kind, v.body.reason, v.body.code, v.body.details.causes[0].reason], [422, 'Status', 'Invalid', 422, 'FieldValueInvalid'], '422 Invalid');
  await admin('POST', 'faults', { method: 'POST', path: '/leases$', status: 400, times: 1 });
  const w = await k('POST', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l400' } });
  eq([w.status, w.body.reason, w.body.code], [400, 'BadRequest', 400], '400 BadRequest');
  eq((await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases/l422')).status, 404, 'a refused create made nothing');
  await admin('POST', 'faults', { path: '/leases/l2$', latencyMs: 150, times: 1 });
  const t0 = Date.now();
  eq((await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases/l2')).status, 200, 'slow request succeeds');
  expect(Date.now() - t0 >= 140, 'latency added', Date.now() - t0);
  // latencyRate: a spike on a fraction of requests; rate 0 never delays, the rule stays unfired
  const spike = (await admin('POST', 'faults', { path: '/leases/l3$', latencyMs: 400, latencyRate: 0 })).body.rules[0];
  const t1 = Date.now();
  const st = (await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases/l3')).status;
  expect(st === 200 || st === 404, 'unspiked request answered', st);
  expect(Date.now() - t1 < 300, 'latencyRate 0 adds nothing', Date.now() - t1);
  eq((await admin('GET', 'faults')).body.rules.find((r) => r.id === spike.id).fired, 0, 'an undrawn spike does not fire');
  await admin('DELETE', `faults/${spike.id}`);
  await admin('POST', 'faults', { resource: 'inferenceservices', forbidden: true });
  const f = await apply(`${ISVC}/namespaces/fid-a/inferenceservices/ssa`, isvcObj('ssa', {}));
  eq([f.status, f.body.reason], [403, 'Forbidden'], '403 for isvc');
  expect(/cannot patch resource "inferenceservices" in API group "serving.kserve.io" in the namespace "fid-a"/.test(f.body.message), 'RBAC message', f.body.message);
  eq((await k('GET', '/apis/coordination.k8s.io/v1/namespaces/fid-sel/leases/l1')).status, 200, 'other kinds unaffected');
  await admin('DELETE', 'faults');
});

check('faults: apply-then-drop stores the object but the client sees the connection die; the write log counts one create', async () => {
  await admin('POST', 'faults', { method: 'PATCH', path: '/leases/dropped$', drop: 1, times: 1 });
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases/dropped';
  const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'dropped' }, spec: { holderIdentity: 'mlplat-0', leaseDurationSeconds: 15 } };
  let err = null;
  try { await apply(p, lease); } catch (e) { err = e; }
  expect(err && /socket hang up|ECONNRESET/.test(err.message), 'client saw a failure', err && err.message);
  const g = await k('GET', p);
  eq([g.status, g.body.spec.holderIdentity], [200, 'mlplat-0'], 'object stored');
  const again = await apply(p, lease);
  eq(again.status, 200, 'retried apply finds it');
  const w = (await admin('GET', 'writes')).body['Lease/fid-a/dropped'];
  eq([w.create, w.apply], [1, 0], 'one create, the retry was a no-op');
  const log = (await admin('GET', 'requests?kind=Lease&name=dropped&method=PATCH')).body.items;
  eq(log.map((e) => [e.status, !!e.dropped]), [[201, true], [200, false]], 'request log');
});

check('faults: hold parks a write before it is applied (then applies it, or drops it unapplied) or after (answer held)', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases';
  const lease = (name) => ({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: { holderIdentity: 'h' } });
  const held = async (n) => { for (let i = 0; i < 100; i++) { if ((await admin('GET', 'holds')).body.items.length === n) return true; await new Promise((r) => setTimeout(r, 20)); } return false; };
  // before: not there while parked; there once released
  await admin('POST', 'faults', { method: 'POST', path: '/leases$', hold: 'before', times: 1 });
  const pending = k('POST', p, lease('held1'));
  expect(await held(1), 'parked', null);
  eq((await k('GET', `${p}/held1`)).status, 404, 'not applied while held before');
  eq((await admin('POST', 'holds/release', {})).body.released, 1, 'released one');
  eq((await pending).status, 201, 'then applied and answered');
  // before + drop: never applied, the connection closed
  await admin('POST', 'faults', { method: 'POST', path: '/leases$', hold: 'before', times: 1 });
  let err = null;
  const dropped = k('POST', p, lease('held2')).catch((e) => { err = e; });
  expect(await held(1), 'parked again', null);
  await admin('POST', 'holds/release', { drop: true });
  await dropped;
  expect(err && /socket hang up|ECONNRESET/.test(err.message), 'client saw the connection die', err && err.message);
  eq((await k('GET', `${p}/held2`)).status, 404, 'a dropped held-before write is never applied');
  // after: applied at once, the answer waits for the release
  await admin('POST', 'faults', { method: 'POST', path: '/leases$', hold: 'after', times: 1 });
  const late = k('POST', p, lease('held3'));
  expect(await held(1), 'answer parked', null);
  eq((await k('GET', `${p}/held3`)).status, 200, 'applied while its answer is held');
  await admin('POST', 'holds/release', {});
  eq((await late).status, 201, 'the held answer arrives on release');
  await admin('DELETE', 'faults');
});

check('watch streams ADDED/MODIFIED/DELETED events from a resourceVersion', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases';
  const rv = (await k('GET', p)).body.metadata.resourceVersion;
  await k('POST', p, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'w1' } });
  await k('PATCH', `${p}/w1`, { spec: { holderIdentity: 'x' } }, { ct: 'application/merge-patch+json' });
  await k('DELETE', `${p}/w1`);
  const r = await k('GET', `${p}?watch=true&resourceVersion=${rv}&timeoutSeconds=1`);
  const ev = r.text.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.object.metadata.name === 'w1').map((e) => e.type);
  eq(ev, ['ADDED', 'MODIFIED', 'DELETED'], 'events');
});

check('allowWatchBookmarks: BOOKMARK events carry the latest resourceVersion, also before the watch ends', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases';
  await admin('PUT', 'config', { bookmarkMs: 200 });
  const rv = (await k('GET', p)).body.metadata.resourceVersion;
  // a selector that matches nothing: only bookmarks can move the client's version on
  await k('POST', p, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'bm1' } });
  const r = await k('GET', `${p}?watch=true&labelSelector=nothing%3Dhere&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=1`);
  await admin('PUT', 'config', { bookmarkMs: 1000 });
  const ev = r.text.trim().split('\n').map((l) => JSON.parse(l));
  expect(ev.length >= 2 && ev.every((e) => e.type === 'BOOKMARK'), 'only bookmarks (periodic and final)', ev.map((e) => e.type));
  const last = ev[ev.length - 1].object;
  eq([last.kind, last.apiVersion], ['Lease', 'coordination.k8s.io/v1'], 'a bookmark names the kind');
  expect(Number(last.metadata.resourceVersion) > Number(rv), 'the bookmark is past the version watched from', [rv, last.metadata.resourceVersion]);
  const none = await k('GET', `${p}?watch=true&labelSelector=nothing%3Dhere&resourceVersion=${rv}&timeoutSeconds=1`);
  eq(none.text.trim(), '', 'no bookmarks unless asked for');
});

check('a watch from a version older than a compaction ends with 410 Expired; from after it, events flow', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases';
  const rv = (await k('GET', p)).body.metadata.resourceVersion;
  await k('POST', p, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'cp1' } });
  const at = (await admin('POST', 'watch/compact')).body.compactedRv;
  const old = await k('GET', `${p}?watch=true&resourceVersion=${rv}&timeoutSeconds=1`);
  const e = JSON.parse(old.text.trim().split('\n')[0]);
  eq([e.type, e.object.code, e.object.reason], ['ERROR', 410, 'Expired'], 'the watch from before the compaction');
  await k('POST', p, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'cp2' } });
  const ok = await k('GET', `${p}?watch=true&resourceVersion=${at}&timeoutSeconds=1`);
  eq(ok.text.trim().split('\n').map((l) => JSON.parse(l)).map((x) => `${x.type} ${x.object.metadata.name}`), ['ADDED cp2'], 'the watch from the compaction on');
});

check('watch/compact {expire: true} ends every open watch with ERROR 410 Expired', async () => {
  const p = '/apis/coordination.k8s.io/v1/namespaces/fid-a/leases';
  const rv = (await k('GET', p)).body.metadata.resourceVersion;
  const open = k('GET', `${p}?watch=true&resourceVersion=${rv}&timeoutSeconds=5`);
  await new Promise((r) => setTimeout(r, 200));
  const out = (await admin('POST', 'watch/compact', { expire: true })).body;
  expect(out.expired >= 1, 'the open watch is counted', out);
  const lines = (await open).text.trim().split('\n').map((l) => JSON.parse(l));
  const last = lines[lines.length - 1];
  eq([last.type, last.object.code, last.object.reason], ['ERROR', 410, 'Expired'], 'its last event');
});

check('out-of-band edit keeps ownership; a forced re-apply by mlplat repairs the drift', async () => {
  const p = `${ISVC}/namespaces/fid-a/inferenceservices/drift`;
  const obj = isvcObj('drift', { modelFormat: { name: 'sklearn' }, storageUri: 's3://models/d', readinessProbe: { initialDelaySeconds: 5 }, env: [{ name: 'A', value: '1' }] });
  const a = await apply(p, obj);
  const e = (await admin('POST', 'edit', { resource: 'inferenceservices', namespace: 'fid-a', name: 'drift', patch: { spec: { predictor: { model: { readinessProbe: { initialDelaySeconds: 30 }, env: null } } } } })).body;
  expect(e.changed && e.object.spec.predictor.model.readinessProbe.initialDelaySeconds === 30 && !e.object.spec.predictor.model.env, 'edited', e.object.spec);
  eq(e.object.metadata.generation, a.body.metadata.generation + 1, 'generation bumped by the edit');
  eq(e.object.metadata.managedFields.map((m) => m.manager).filter((m) => m === 'mlplat').length, 1, 'mlplat still the manager');
  const r = await apply(p, obj);
  eq([r.body.spec.predictor.model.readinessProbe.initialDelaySeconds, r.body.spec.predictor.model.env], [5, [{ name: 'A', value: '1' }]], 'repaired');
});

check('reset clears objects, logs and faults', async () => {
  await admin('POST', 'faults', { path: '^/nothing$', status: 500 });
  eq((await admin('POST', 'reset')).status, 200, 'reset');
  eq((await k('GET', '/api/v1/namespaces')).body.items.length, 0, 'no namespaces');
  eq((await admin('GET', 'faults')).body.rules.length, 0, 'no faults');
  eq(Object.keys((await admin('GET', 'writes')).body).length, 0, 'no writes');
});

check('seeded fault sequence is identical after a reset (same seed, same requests)', async () => {
  await ns('fid-a');
  const run = async () => {
    await admin('POST', 'faults', { method: 'GET', path: '^/api/v1/namespaces/fid-a$', status: 500, rate: 0.3 });
    const out = [];
    for (let i = 0; i < 50; i++) out.push((await k('GET', '/api/v1/namespaces/fid-a')).status);
    return out;
  };
  const a = await run();
  await admin('POST', 'reset');
  await ns('fid-a');
  const b = await run();
  eq(b, a, 'same sequence');
  expect(a.includes(500) && a.includes(200), 'mixed outcomes', a);
  await admin('POST', 'reset');
});

// ---------------------------------------------------------------- run
(async () => {
  let failed = 0;
  for (const c of checks) {
    try {
      await c.fn();
      console.log(`ok - ${c.name}`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${c.name}`);
      for (const l of String(e instanceof Fail ? e.message : e.stack).split('\n')) console.log(`#   ${l}`);
    }
  }
  agent.destroy();
  process.exit(failed ? 1 : 0);
})();
