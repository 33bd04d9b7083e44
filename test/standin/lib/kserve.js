'use strict';
// KServe InferenceService behaviour: the defaulting the webhook and Go serialisation do, and a
// controller that moves status Ready Unknown -> True (or False for a bad storage URI) for the
// current generation, with revisions and canary traffic as KServe's serverless mode reports them,
// or, for serving.kserve.io/deploymentMode RawDeployment (the default is cfg.deploymentMode,
// KServe's defaultDeploymentMode), a Deployment's readiness with no revisions or traffic.
// status.observedGeneration is KServe's copy of its child's (the Knative Service's, or the
// Deployment's) generation, as real KServe reports it (kserve#6081): the child moves on with
// every change KServe propagates into it — the predictor, canary traffic, and the
// InferenceService's labels and annotations — so it is not the InferenceService's generation.
// The predictor's pods run as spec.predictor.serviceAccountName ("default" when unset): while it
// does not exist no pod is made and Ready stays Unknown; for an s3:// model the storage
// initializer needs credentials from that account (a Secret it lists, an IAM role annotation, or
// serving.kserve.io/s3-useanoncredential "true"), else the revision fails as boto3 does.
// Deletion: KServe's finalizer (inferenceservice.finalizers) is modelled for InferenceServices a
// test holds (POST /_standin/isvc/hold): a DELETE of one leaves it terminating (deletionTimestamp,
// the finalizer) until the hold is released; others go at once.

const crypto = require('crypto');
const U = require('./util');

const PROBES = ['readinessProbe', 'livenessProbe', 'startupProbe'];
const PROBE_INTS = ['initialDelaySeconds', 'periodSeconds', 'timeoutSeconds', 'successThreshold', 'failureThreshold', 'terminationGracePeriodSeconds'];
const OMIT_EMPTY_LISTS = ['env', 'envFrom', 'args', 'command', 'ports', 'volumeMounts'];

// Go's `omitempty`: int32 zero, empty slices and empty strings disappear when the object is serialised back.
function scrubContainer(c) {
  if (!U.isObj(c)) return;
  for (const p of PROBES) {
    if (!U.isObj(c[p])) continue;
    for (const k of PROBE_INTS) if (c[p][k] === 0) delete c[p][k];
  }
  for (const k of OMIT_EMPTY_LISTS) if (Array.isArray(c[k]) && c[k].length === 0) delete c[k];
  // core/v1 EnvVar.value is a string with omitempty: "" is not written back
  if (Array.isArray(c.env)) for (const e of c.env) if (U.isObj(e) && e.value === '') delete e.value;
}

function admit(old, obj, cfg) {
  const meta = obj.metadata;
  meta.annotations = meta.annotations || {};
  if (!meta.annotations['serving.kserve.io/deploymentMode']) meta.annotations['serving.kserve.io/deploymentMode'] = (cfg && cfg.deploymentMode) || 'Serverless';
  const pred = U.getPath(obj, ['spec', 'predictor']);
  if (!U.isObj(pred)) return;
  scrubContainer(pred.model);
  if (Array.isArray(pred.containers)) pred.containers.forEach(scrubContainer);
  if (Array.isArray(pred.containers) && pred.containers.length === 0) delete pred.containers;
  const model = pred.model;
  if (U.isObj(model) && !model.protocolVersion) {
    const fmt = String(U.getPath(model, ['modelFormat', 'name']) || '').toLowerCase();
    const rt = String(model.runtime || '').toLowerCase();
    if (['triton', 'tensorrt'].includes(fmt) || /triton|vllm/.test(rt)) model.protocolVersion = 'v2';
  }
}

function validate(old, obj) {
  const causes = [];
  if (!U.isObj(U.getPath(obj, ['spec', 'predictor']))) causes.push({ reason: 'FieldValueRequired', field: 'spec.predictor', message: 'Required value' });
  const ctp = U.getPath(obj, ['spec', 'predictor', 'canaryTrafficPercent']);
  if (ctp !== undefined && !(Number.isInteger(ctp) && ctp >= 0 && ctp <= 100)) causes.push({ reason: 'FieldValueInvalid', field: 'spec.predictor.canaryTrafficPercent', message: `Invalid value: ${JSON.stringify(ctp)}: must be an integer between 0 and 100` });
  return causes;
}

class KServe {
  constructor(store, res, cfg, rbac) {
    this.store = store; this.res = res; this.cfg = cfg; this.rbac = rbac;
    this.reset();
  }

  // The storage initializer's failure for want of credentials, or null.
  credentialsProblem(ns, spec, uri) {
    if (!this.rbac || !/^s3:\/\//.test(String(uri || ''))) return null;
    const sa = this.rbac.serviceAccount(ns, spec.serviceAccountName || 'default');
    const ann = (sa.metadata && sa.metadata.annotations) || {};
    if ((Array.isArray(sa.secrets) && sa.secrets.length) || ann['eks.amazonaws.com/role-arn'] ||
        ann['serving.kserve.io/s3-useanoncredential'] === 'true') return null;
    return { reason: 'ModelLoadFailed', message: `failed to download model from ${uri}: NoCredentialsError: Unable to locate credentials` };
  }

  reset() {
    this.held = new Set();      // ns/name whose deletion KServe's finalizer holds
    this.badUris = new Map();   // storageUri -> {reason, message}
    this.state = new Map();     // ns/name -> {revisions:[{name, hash}], timer}
    // predictors whose pods wait for their ServiceAccount: "ns/sa" -> Map(ns/name -> retry).
    // Woken when it is made (serviceAccountAdded), not polled: a poll per waiting object every
    // readyDelayMs made a preloaded fleet of 45,000 cost the stand-in all its CPU.
    this.awaitingSa = new Map();
    if (this.timers) for (const t of this.timers) clearTimeout(t);
    this.timers = new Set();
  }

  later(ms, fn) { const t = setTimeout(U.guarded('kserve controller', () => { this.timers.delete(t); fn(); }), ms); this.timers.add(t); }

  setStorage(uri, bad, reason, message) {
    if (bad) this.badUris.set(uri, { reason: reason || 'ModelLoadFailed', message: message || `failed to download model from ${uri}: storage error` });
    else this.badUris.delete(uri);
    // Re-evaluate every service using this URI: a repaired URI lets a failed revision become ready.
    for (const rec of this.store.list(this.res, null)) {
      if (U.getPath(rec.obj, ['spec', 'predictor', 'model', 'storageUri']) === uri) this.schedule(rec.obj.metadata.namespace, rec.obj.metadata.name, true);
    }
  }

  // DELETE of a held InferenceService (or of one already terminating): it stays, terminating,
  // with KServe's finalizer; null when it is to go at once
  terminate(rec) {
    const md = rec.obj.metadata;
    if (md.deletionTimestamp) return { rec, write: null };
    if (!this.held.has(`${md.namespace}/${md.name}`)) return null;
    const next = U.clone(rec.obj);
    next.metadata.deletionTimestamp = U.nowIso();
    next.metadata.deletionGracePeriodSeconds = 0;
    next.metadata.finalizers = [...new Set([...(md.finalizers || []), 'inferenceservice.finalizers'])];
    return { rec: this.store.commit(this.res, rec, next, null, { verb: 'delete', internal: true }).rec, write: 'delete' };
  }

  // POST /_standin/isvc/hold {namespace, name, hold}: hold (or release) its deletion; a release
  // removes one already terminating, as KServe dropping its finalizer does
  hold(ns, name, held) {
    if (held) this.held.add(`${ns}/${name}`);
    else {
      this.held.delete(`${ns}/${name}`);
      const rec = this.store.get(this.res, ns, name);
      if (rec && rec.obj.metadata.deletionTimestamp) this.store.remove(this.res, rec);
    }
    return { held: [...this.held] };
  }

  changed(rec, type) {
    const k = `${rec.obj.metadata.namespace}/${rec.obj.metadata.name}`;
    if (type === 'DELETED') { this.state.delete(k); return; }
    const s = this.state.get(k);
    if (!s || s.childHash !== this.childHash(rec.obj)) this.schedule(rec.obj.metadata.namespace, rec.obj.metadata.name, false);
  }

  // What KServe propagates into the child: a change of it is a new child generation.
  childHash(obj) {
    const ann = { ...(obj.metadata.annotations || {}) };
    delete ann['kubectl.kubernetes.io/last-applied-configuration'];
    return crypto.createHash('sha256').update(JSON.stringify([U.getPath(obj, ['spec', 'predictor']) || {}, obj.metadata.labels || {}, ann])).digest('hex');
  }

  static raw(obj) { return U.getPath(obj, ['metadata', 'annotations', 'serving.kserve.io/deploymentMode']) === 'RawDeployment'; }

  schedule(ns, name, force) {
    // First pass right away (controller observes the new generation), readiness after the delay.
    setImmediate(U.guarded('kserve observe', () => this.observe(ns, name, force)));
  }

  writeStatus(ns, name, fn) {
    const rec = this.store.get(this.res, ns, name);
    if (!rec) return null;
    const next = U.clone(rec.obj);
    next.status = next.status || {};
    if (fn(next.status, next) === false) return null;
    return this.store.commit(this.res, rec, next, { manager: 'kserve-controller', operation: 'Update', subresource: 'status' }, { verb: 'status' }).rec;
  }

  predictorHash(obj) {
    const p = U.clone(U.getPath(obj, ['spec', 'predictor']) || {});
    delete p.canaryTrafficPercent;
    return crypto.createHash('sha256').update(JSON.stringify(p)).digest('hex');
  }

  // cfg.kserveFrozen: the controller is down (a test holds KServe's status where it is);
  // thaw() is its restart, which looks at every InferenceService again.
  thaw() {
    for (const rec of this.store.list(this.res, null)) this.schedule(rec.obj.metadata.namespace, rec.obj.metadata.name, false);
  }

  observe(ns, name, force) {
    if (this.cfg.kserveFrozen) return;
    const rec = this.store.get(this.res, ns, name);
    if (!rec) return;
    const k = `${ns}/${name}`;
    let s = this.state.get(k);
    if (!s) { s = { revisions: [], childGen: Number(U.getPath(rec.obj, ['status', 'observedGeneration']) || 0), childHash: null }; this.state.set(k, s); }
    const ch = this.childHash(rec.obj);
    if (ch === s.childHash && !force) return;   // nothing new for the child: KServe writes nothing
    if (ch !== s.childHash) { s.childGen += 1; s.childHash = ch; }
    const gen = s.childGen;
    const now = U.nowIso();
    if (KServe.raw(rec.obj)) {
      this.writeStatus(ns, name, (st) => {
        st.observedGeneration = gen;
        st.deploymentMode = 'RawDeployment';
        const comp = ((st.components = st.components || {}).predictor = st.components.predictor || {});
        // the Deployment rolls out a new ReplicaSet: Progressing True, ReplicaSetUpdated
        setConditions(st, 'Unknown', 'ReplicaSetUpdated', `ReplicaSet "${name}-predictor-${gen}" is progressing.`, now, RAW_COND_TYPES);
        st.modelStatus = { states: { activeModelState: comp.url ? 'Loaded' : 'Pending', targetModelState: 'Loading' }, transitionStatus: 'InProgress' };
      });
      const token = (s.token = (s.token || 0) + 1);
      this.later(this.cfg.readyDelayMs, () => { if (s.token === token) this.settleRaw(ns, name, s, gen); });
      return;
    }
    const hash = this.predictorHash(rec.obj);
    const last = s.revisions[s.revisions.length - 1];
    if (!last || last.hash !== hash) s.revisions.push({ name: `${name}-predictor-${String(s.revisions.length + 1).padStart(5, '0')}`, hash });
    const latest = s.revisions[s.revisions.length - 1].name;
    this.writeStatus(ns, name, (st) => {
      st.observedGeneration = gen;
      st.deploymentMode = 'Serverless';
      const comp = ((st.components = st.components || {}).predictor = st.components.predictor || {});
      comp.latestCreatedRevision = latest;
      // Every new generation (new revision or new traffic split) is Unknown until it settles.
      setConditions(st, 'Unknown', 'RevisionMissing', `Configuration "${name}-predictor" is waiting for a Revision to become ready.`, now);
      st.modelStatus = { states: { activeModelState: comp.latestReadyRevision ? 'Loaded' : 'Pending', targetModelState: 'Loading' }, transitionStatus: 'InProgress' };
    });
    const token = (s.token = (s.token || 0) + 1);
    this.later(this.cfg.readyDelayMs, () => { if (s.token === token) this.settle(ns, name, s, gen, latest); });
  }

  // The predictor's pods for the child generation gen: null while they cannot be made yet, else
  // {spec, uri, bad} (bad: why the model does not load, or null).
  pods(ns, name, s, gen, again) {
    const rec = this.store.get(this.res, ns, name);
    if (!rec || s.childGen !== gen || this.state.get(`${ns}/${name}`) !== s) return null;
    const spec = rec.obj.spec.predictor;
    const uri = U.getPath(spec, ['model', 'storageUri']);
    const sa = spec.serviceAccountName || 'default';
    if (this.rbac && !this.rbac.serviceAccountExists(ns, sa)) {
      // the ReplicaSet cannot make pods yet ("serviceaccount not found"): it tries again once
      // the account exists; only the latest generation's retry is kept per object
      const k = `${ns}/${sa}`;
      if (!this.awaitingSa.has(k)) this.awaitingSa.set(k, new Map());
      this.awaitingSa.get(k).set(`${ns}/${name}`, again);
      return null;
    }
    return { spec, uri, bad: this.badUris.get(uri) || this.credentialsProblem(ns, spec, uri) };
  }

  // A ServiceAccount was made: the predictors waiting for it make their pods, ready after the
  // usual delay.
  serviceAccountAdded(ns, sa) {
    const waiting = this.awaitingSa.get(`${ns}/${sa}`);
    if (!waiting) return;
    this.awaitingSa.delete(`${ns}/${sa}`);
    for (const again of waiting.values()) this.later(this.cfg.readyDelayMs, again);
  }

  // RawDeployment: KServe's PropagateRawStatus from the Deployment's Available/Progressing.
  settleRaw(ns, name, s, gen) {
    if (this.cfg.kserveFrozen) return;
    const p = this.pods(ns, name, s, gen, () => this.settleRaw(ns, name, s, gen));
    if (!p) return;
    const now = U.nowIso();
    const host = this.cfg.domain;
    this.writeStatus(ns, name, (st) => {
      const comp = st.components.predictor;
      if (p.bad) {
        setConditions(st, 'False', 'ProgressDeadlineExceeded', `ReplicaSet "${name}-predictor-${gen}" has timed out progressing.`, now, RAW_COND_TYPES);
        st.modelStatus = { states: { activeModelState: comp.url ? 'Loaded' : 'FailedToLoad', targetModelState: 'FailedToLoad' }, transitionStatus: 'BlockedByFailedLoad',
          lastFailureInfo: { reason: p.bad.reason, message: p.bad.message, location: p.uri, time: now } };
        return;
      }
      st.url = `http://${name}-${ns}.${host}`;
      st.address = { url: `http://${name}-predictor.${ns}.svc.cluster.local` };
      comp.url = `http://${name}-predictor-${ns}.${host}`;
      setConditions(st, 'True', null, null, now, RAW_COND_TYPES);
      st.modelStatus = { states: { activeModelState: 'Loaded', targetModelState: 'Loaded' }, transitionStatus: 'UpToDate', copies: { failedCopies: 0, totalCopies: 1 } };
    });
  }

  settle(ns, name, s, gen, latest) {
    if (this.cfg.kserveFrozen) return;
    const p = this.pods(ns, name, s, gen, () => this.settle(ns, name, s, gen, latest));
    if (!p) return;
    const { spec, uri } = p;
    const bad = p.bad;
    const now = U.nowIso();
    const host = `${ns}.${this.cfg.domain}`;
    this.writeStatus(ns, name, (st) => {
      const comp = st.components.predictor;
      st.url = `http://${name}.${host}`;
      st.address = { url: `http://${name}.${ns}.svc.cluster.local` };
      comp.url = `http://${name}-predictor.${host}`;
      comp.address = { url: `http://${name}-predictor.${ns}.svc.cluster.local` };
      if (bad) {
        const msg = `Revision "${latest}" failed with message: ${bad.message}.`;
        setConditions(st, 'False', 'RevisionFailed', msg, now);
        st.modelStatus = { states: { activeModelState: comp.latestReadyRevision ? 'Loaded' : 'FailedToLoad', targetModelState: 'FailedToLoad' }, transitionStatus: 'BlockedByFailedLoad',
          lastFailureInfo: { reason: bad.reason, message: bad.message, location: uri, modelRevisionName: latest, time: now } };
        if (!comp.traffic) comp.traffic = [];
        return;
      }
      comp.latestReadyRevision = latest;
      const canary = spec.canaryTrafficPercent;
      const rolled = comp.latestRolledoutRevision;
      if (canary !== undefined && canary !== 100 && rolled && rolled !== latest) {
        comp.traffic = [
          { latestRevision: true, percent: canary, revisionName: latest, tag: 'latest', url: `http://latest-${name}-predictor.${host}` },
          { latestRevision: false, percent: 100 - canary, revisionName: rolled, tag: 'prev', url: `http://prev-${name}-predictor.${host}` },
        ];
      } else {
        comp.traffic = [{ latestRevision: true, percent: 100, revisionName: latest }];
        if (rolled !== latest) {
          if (rolled) comp.previousRolledoutRevision = rolled;
          comp.latestRolledoutRevision = latest;
        }
      }
      setConditions(st, 'True', null, null, now);
      st.modelStatus = { states: { activeModelState: 'Loaded', targetModelState: 'Loaded' }, transitionStatus: 'UpToDate', copies: { failedCopies: 0, totalCopies: 1 } };
    });
  }
}

const COND_TYPES = ['IngressReady', 'LatestDeploymentReady', 'PredictorConfigurationReady', 'PredictorReady', 'PredictorRouteReady', 'Ready', 'RoutesReady'];
const RAW_COND_TYPES = ['IngressReady', 'PredictorReady', 'Ready'];

function setConditions(st, status, reason, message, now, types) {
  const prev = new Map((st.conditions || []).map((c) => [c.type, c]));
  st.conditions = (types || COND_TYPES).map((type) => {
    // Route and ingress stay ready on the previous revision while a new one is not.
    let s = status, r = reason, m = message;
    if ((type === 'IngressReady' || type === 'PredictorRouteReady' || type === 'RoutesReady') && prev.get(type) && prev.get(type).status === 'True') { s = 'True'; r = null; m = null; }
    const c = { lastTransitionTime: prev.has(type) && prev.get(type).status === s ? prev.get(type).lastTransitionTime : now, status: s, type };
    if (r) c.reason = r;
    if (m) c.message = m;
    if (type !== 'Ready' && type !== 'PredictorReady' && type !== 'IngressReady') c.severity = 'Info';
    return c;
  });
}

module.exports = { KServe, admit, validate };
