'use strict';
// Argo Workflows and batch/v1 Jobs, driven by a scripted plan instead of real pods.
// A workflow goes "" -> Pending -> Running -> Succeeded/Failed, one step every argoStepMs;
// DAG tasks start when their dependencies have succeeded; a task's exit code comes from the plan.
// Pods run as spec.serviceAccountName ("default" when unset), as Argo's do: a ServiceAccount
// that does not exist fails the pod's creation, and (Argo 3.4 and later) the executor's
// ServiceAccount — spec.executor.serviceAccountName, else the pod's — must be allowed to
// create and patch workflowtaskresults, or every step errors when its executor reports.

const U = require('./util');

const LEAF = ['container', 'script', 'resource', 'containerSet', 'data', 'http', 'plugin', 'suspend'];

class Plans {
  constructor() { this.list = []; }
  reset() { this.list = []; }
  add(p) { this.list.push(p); }
  // The newest matching plan wins. name: exact, '*' or a generateName prefix ending in '-'.
  find(kind, ns, name) {
    for (let i = this.list.length - 1; i >= 0; i--) {
      const p = this.list[i];
      if ((p.kind || 'workflow') !== kind) continue;
      if (p.namespace && p.namespace !== ns) continue;
      if (!p.name || p.name === '*' || p.name === name || (p.name.endsWith('-') && name.startsWith(p.name))) return p;
    }
    return null;
  }
  step(kind, ns, name, step) {
    const p = this.find(kind, ns, name);
    return (p && p.steps && (p.steps[step] || p.steps['*'])) || {};
  }
}

function parseDepends(expr, names) {
  // `depends: "a && (b.Succeeded || c)"`: every task name mentioned is a dependency here.
  const out = new Set();
  for (const tok of String(expr).split(/[^A-Za-z0-9_.-]+/)) {
    const base = tok.replace(/\.(Succeeded|Failed|Errored|Skipped|Omitted|Daemoned|AnySucceeded|AllFailed)$/, '');
    if (names.has(base)) out.add(base);
  }
  return [...out];
}

class Argo {
  constructor(store, res, cfg, plans, rbac) {
    this.store = store; this.res = res; this.cfg = cfg; this.plans = plans; this.rbac = rbac;
    this.reset();
  }

  // Why the workflow's pods cannot be created, or null.
  identityError(wf, ns) {
    const spec = wf.spec || {};
    const exec = (spec.executor || {}).serviceAccountName;
    if (spec.automountServiceAccountToken === false && !exec) {
      return 'invalid spec: executor.serviceAccountName must not be empty if automountServiceAccountToken is false';
    }
    for (const sa of [spec.serviceAccountName || 'default', exec].filter(Boolean)) {
      if (this.rbac && !this.rbac.serviceAccountExists(ns, sa)) {
        return `pods "${wf.metadata.name}" is forbidden: error looking up service account ${ns}/${sa}: serviceaccount "${sa}" not found`;
      }
    }
    return null;
  }

  // The executor's complaint when it may not write its task result, or null.
  taskResultError(wf, ns) {
    const spec = wf.spec || {};
    const sa = (spec.executor || {}).serviceAccountName || spec.serviceAccountName || 'default';
    if (!this.rbac) return null;
    if (this.rbac.can(ns, sa, 'argoproj.io', 'workflowtaskresults', 'create') &&
        this.rbac.can(ns, sa, 'argoproj.io', 'workflowtaskresults', 'patch')) return null;
    return `Error (exit code 64): workflowtaskresults.argoproj.io is forbidden: User "system:serviceaccount:${ns}:${sa}" ` +
      `cannot create resource "workflowtaskresults" in API group "argoproj.io" in the namespace "${ns}"`;
  }
  reset() {
    if (this.timers) for (const t of this.timers.values()) clearTimeout(t);
    this.timers = new Map();   // ns/name -> timer
    this.engines = new Map();  // ns/name -> engine
  }

  changed(rec, type) {
    const ns = rec.obj.metadata.namespace, name = rec.obj.metadata.name, k = `${ns}/${name}`;
    if (type === 'DELETED') { clearTimeout(this.timers.get(k)); this.timers.delete(k); this.engines.delete(k); return; }
    const phase = U.getPath(rec.obj, ['status', 'phase']) || '';
    if (['Succeeded', 'Failed', 'Error'].includes(phase)) return;
    const shutdown = U.getPath(rec.obj, ['spec', 'shutdown']);
    if (shutdown === 'Terminate' || shutdown === 'Stop') { setImmediate(U.guarded('argo terminate', () => this.terminate(ns, name, shutdown))); return; }
    if (!this.timers.has(k) && !this.engines.has(k)) this.arm(ns, name);
  }

  arm(ns, name) {
    const k = `${ns}/${name}`;
    this.timers.set(k, setTimeout(U.guarded('argo tick', () => { this.timers.delete(k); this.tick(ns, name); }), this.cfg.argoStepMs));
  }

  write(ns, name, fn) {
    const rec = this.store.get(this.res, ns, name);
    if (!rec) return null;
    const next = U.clone(rec.obj);
    next.status = next.status || {};
    fn(next.status, next);
    const phase = next.status.phase || '';
    next.metadata.labels = { ...(next.metadata.labels || {}), 'workflows.argoproj.io/phase': phase || 'Pending' };
    if (['Succeeded', 'Failed', 'Error'].includes(phase)) next.metadata.labels['workflows.argoproj.io/completed'] = 'true';
    else next.metadata.labels['workflows.argoproj.io/completed'] = 'false';
    return this.store.commit(this.res, rec, next, { manager: 'workflow-controller', operation: 'Update' }, { verb: 'status' }).rec;
  }

  build(wf) {
    const name = wf.metadata.name;
    const spec = wf.spec || {};
    if (!Array.isArray(spec.templates)) return { error: 'invalid spec: spec.templates must be a list' };
    const templates = new Map(spec.templates.filter(U.isObj).map((t) => [t.name, t]));
    const entry = templates.get(spec.entrypoint);
    if (!entry) return { error: `invalid spec: template name '${spec.entrypoint}' undefined` };
    const nodeId = (nodeName) => `${name}-${U.fnv32a(nodeName)}`;
    const tasks = [];
    if (entry.dag) {
      const list = (Array.isArray(entry.dag.tasks) ? entry.dag.tasks : []).filter((t) => U.isObj(t) && t.name);
      const names = new Set(list.map((t) => t.name));
      for (const t of list) {
        const deps = t.depends ? parseDepends(t.depends, names) : (t.dependencies || []).filter((d) => names.has(d));
        const nodeName = `${name}.${t.name}`;
        tasks.push({ task: t.name, template: t.template || t.name, deps, nodeName, id: nodeId(nodeName) });
      }
      // Argo rejects dependency cycles at validation time.
      const state = new Map();
      const visit = (t) => {
        if (state.get(t.task) === 2) return false;
        if (state.get(t.task) === 1) return true;
        state.set(t.task, 1);
        const cyc = t.deps.some((d) => visit(tasks.find((x) => x.task === d)));
        state.set(t.task, 2);
        return cyc;
      };
      if (tasks.some(visit)) return { error: `invalid spec: templates.${entry.name} dependency cycle detected` };
      return { rootType: 'DAG', tasks };
    }
    if (entry.steps) {
      let prev = [];
      (Array.isArray(entry.steps) ? entry.steps : []).forEach((group, i) => {
        if (!Array.isArray(group)) group = [];
        const cur = [];
        for (const s of group.filter(U.isObj)) {
          const nodeName = `${name}[${i}].${s.name}`;
          tasks.push({ task: s.name, template: s.template || s.name, deps: prev.slice(), nodeName, id: nodeId(nodeName) });
          cur.push(s.name);
        }
        prev = cur;
      });
      return { rootType: 'Steps', tasks };
    }
    if (!LEAF.some((k) => entry[k])) return { error: `invalid spec: template '${entry.name}' has no executable section` };
    return { rootType: 'Pod', tasks: [] };
  }

  tick(ns, name) {
    const rec = this.store.get(this.res, ns, name);
    if (!rec) return;
    const wf = rec.obj;
    const k = `${ns}/${name}`;
    const phase = U.getPath(wf, ['status', 'phase']) || '';
    const now = U.nowIso();
    if (phase === '') {
      const g = this.build(wf);
      if (!g.error) g.error = this.identityError(wf, ns);
      if (g.error) {
        this.write(ns, name, (st) => { st.phase = 'Error'; st.message = g.error; st.startedAt = now; st.finishedAt = now; st.progress = '0/0'; });
        return;
      }
      this.engines.set(k, { graph: g, running: new Map(), done: new Map() });
      this.write(ns, name, (st) => { st.phase = 'Pending'; st.startedAt = now; st.finishedAt = null; st.progress = `0/${Math.max(1, g.tasks.length)}`; });
      this.arm(ns, name);
      return;
    }
    const eng = this.engines.get(k);
    if (!eng) return; // not ours to drive (e.g. state reset while running)
    const g = eng.graph;
    this.write(ns, name, (st) => {
      st.nodes = st.nodes || {};
      const entryName = wf.spec.entrypoint;
      if (phase === 'Pending') {
        st.phase = 'Running';
        st.nodes[name] = { id: name, name, displayName: name, type: g.rootType, templateName: entryName, templateScope: 'local/', phase: 'Running', startedAt: now, finishedAt: null, progress: `0/${Math.max(1, g.tasks.length)}` };
        if (g.rootType === 'Pod') eng.running.set(name, { ticks: this.plans.step('workflow', ns, name, entryName).ticks || 1 });
      }
      // Finish running work whose time is up.
      for (const [id, r] of phase === 'Pending' ? [] : [...eng.running]) {
        r.ticks -= 1;
        if (r.ticks > 0) continue;
        eng.running.delete(id);
        const node = st.nodes[id];
        const stepName = g.rootType === 'Pod' ? entryName : node.displayName;
        const p = this.plans.step('workflow', ns, name, stepName);
        const code = Number(p.exitCode || 0);
        const denied = this.taskResultError(wf, ns);
        node.phase = denied ? 'Error' : code === 0 ? 'Succeeded' : 'Failed';
        node.finishedAt = now;
        node.outputs = { ...(node.outputs || {}), exitCode: String(code) };
        node.progress = code === 0 ? '1/1' : '0/1';
        node.resourcesDuration = { cpu: 1, memory: 1 };
        if (denied) node.message = denied;
        else if (code !== 0) node.message = p.message || `Error (exit code ${code})`;
        else if (p.message) node.message = p.message;
        eng.done.set(id, node.phase);
      }
      // Start tasks whose dependencies have all succeeded (none start once one has failed: failFast).
      const failed = [...eng.done.values()].some((v) => v === 'Failed' || v === 'Error');
      if (!failed) {
        for (const t of g.tasks) {
          if (st.nodes[t.id]) continue;
          const depNodes = t.deps.map((d) => g.tasks.find((x) => x.task === d));
          if (!depNodes.every((d) => eng.done.get(d.id) === 'Succeeded')) continue;
          st.nodes[t.id] = { id: t.id, name: t.nodeName, displayName: t.task, type: 'Pod', templateName: t.template, templateScope: 'local/', phase: 'Running', boundaryID: name, startedAt: now, finishedAt: null, progress: '0/1', hostNodeName: 'standin-node' };
          for (const d of depNodes) { const dn = st.nodes[d.id]; dn.children = [...new Set([...(dn.children || []), t.id])]; }
          if (!t.deps.length) st.nodes[name].children = [...new Set([...(st.nodes[name].children || []), t.id])];
          eng.running.set(t.id, { ticks: this.plans.step('workflow', ns, name, t.task).ticks || 1 });
        }
      }
      const total = Math.max(1, g.tasks.length);
      const succeeded = [...eng.done.values()].filter((v) => v === 'Succeeded').length;
      st.progress = `${succeeded}/${total}`;
      st.nodes[name].progress = st.progress;
      if (eng.running.size === 0 && phase !== 'Pending') {
        const root = st.nodes[name];
        const firstFailed = [...eng.done].find(([, v]) => v === 'Failed' || v === 'Error');
        const ok = !firstFailed;
        const errored = !ok && firstFailed[1] === 'Error';
        if (g.rootType !== 'Pod') {
          root.phase = ok ? 'Succeeded' : errored ? 'Error' : 'Failed';
          root.finishedAt = now;
          if (!ok) root.message = `child '${firstFailed[0]}' ${errored ? 'errored' : 'failed'}`;
          const leaves = g.tasks.filter((t) => !g.tasks.some((x) => x.deps.includes(t.task)) && st.nodes[t.id]).map((t) => t.id);
          if (leaves.length) root.outboundNodes = leaves;
        }
        st.phase = ok ? 'Succeeded' : errored ? 'Error' : 'Failed';
        st.finishedAt = now;
        if (!ok) st.message = root.message;
        st.conditions = [{ type: 'PodRunning', status: 'False' }, { type: 'Completed', status: 'True' }];
        this.engines.delete(k);
      } else {
        st.conditions = [{ type: 'PodRunning', status: 'True' }];
      }
    });
    if (this.engines.has(k)) this.arm(ns, name);
  }

  terminate(ns, name, strategy) {
    const k = `${ns}/${name}`;
    clearTimeout(this.timers.get(k)); this.timers.delete(k);
    this.engines.delete(k);
    const rec = this.store.get(this.res, ns, name);
    if (!rec || ['Succeeded', 'Failed', 'Error'].includes(U.getPath(rec.obj, ['status', 'phase']))) return;
    const now = U.nowIso();
    const msg = `Stopped with strategy '${strategy}'`;
    this.write(ns, name, (st) => {
      for (const n of Object.values(st.nodes || {})) {
        if (n.phase === 'Running' || n.phase === 'Pending') {
          n.phase = 'Failed'; n.finishedAt = now; n.message = msg;
          if (n.type === 'Pod') n.outputs = { ...(n.outputs || {}), exitCode: '143' };
        }
      }
      st.phase = 'Failed'; st.message = msg; st.finishedAt = now;
      if (!st.startedAt) st.startedAt = now;
      st.conditions = [{ type: 'PodRunning', status: 'False' }, { type: 'Completed', status: 'True' }];
    });
  }
}

// batch/v1 Job: started after one step (unless the plan says pending: never started, no
// startTime), active for `ticks` steps (default 1), then Complete or Failed per the plan
// (exitCode, or failReason: BackoffLimitExceeded by default, DeadlineExceeded,
// PodFailurePolicy).  The plan's `s3` objects are written through the S3 front when the Job
// completes (entries with onFailure: true also when it fails: partial output), before its
// status says so, as a builder writes its output and then exits.  spec.activeDeadlineSeconds
// fails an active Job with DeadlineExceeded (seconds scaled by cfg.deadlineScale for tests).
// DELETE with propagationPolicy Foreground keeps the Job terminating (deletionTimestamp,
// finalizer foregroundDeletion, active 0, terminating 1) for cfg.jobDeleteMs, or while it is
// marked stuck; Background and Orphan remove it at once (kube.js).
// The pod runs as spec.template.spec.serviceAccountName ("default" when unset): while that
// ServiceAccount does not exist the pod's creation is refused (FailedCreate: "error looking up
// service account"), so the Job does not start; it starts at the first step after it exists.
const JOB_FAIL = {
  BackoffLimitExceeded: 'Job has reached the specified backoff limit',
  DeadlineExceeded: 'Job was active longer than specified deadline',
  PodFailurePolicy: 'Container builder for failed pod with exit code 1 matching FailJob rule at index 0',
};
class Jobs {
  constructor(store, res, cfg, plans, rbac) { this.store = store; this.res = res; this.cfg = cfg; this.plans = plans; this.rbac = rbac; this.reset(); }
  reset() {
    if (this.timers) for (const t of this.timers) clearTimeout(t);
    this.timers = new Set(); this.stuck = new Set(); this.due = new Set();
  }
  later(ms, fn) { const t = setTimeout(U.guarded('job controller', () => { this.timers.delete(t); fn(); }), ms); this.timers.add(t); }
  rec(ns, name) { return this.store.get(this.res, ns, name); }
  // the Job is still there and not being deleted (a terminating Job makes no progress)
  live(ns, name, uid) { const r = this.rec(ns, name); return r && r.obj.metadata.uid === uid && !r.obj.metadata.deletionTimestamp ? r : null; }
  write(ns, name, fn) {
    const rec = this.rec(ns, name);
    if (!rec) return;
    const next = U.clone(rec.obj); next.status = next.status || {};
    fn(next.status, next);
    this.store.commit(this.res, rec, next, { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status' }, { verb: 'status' });
  }
  changed(rec, type) {
    if (type !== 'ADDED') return;
    const ns = rec.obj.metadata.namespace, name = rec.obj.metadata.name, uid = rec.obj.metadata.uid;
    const p = this.plans.step('job', ns, name, name);
    if (p.pending) return;
    // As the Job controller does (seen on the real peers, docs/fidelity.md): its first sync sets
    // startTime and creates the pod; a pod the ServiceAccount admission refuses is retried
    // (active 0); a pod pinned by kubernetes.io/hostname to a node that is absent, NotReady or
    // cordoned stays Pending, counted in active with ready 0, and runs once the node can take
    // it; activeDeadlineSeconds runs from startTime all along
    const tpl = ((rec.obj.spec || {}).template || {}).spec || {};
    const host = (tpl.nodeSelector || {})['kubernetes.io/hostname'];
    const sa = tpl.serviceAccountName || 'default';
    let began = 0;
    const start = () => {
      const r = this.live(ns, name, uid);
      if (!r) return;
      const podOk = !this.rbac || this.rbac.serviceAccountExists(ns, sa);
      const active = podOk ? 1 : 0;
      if (!began) {
        began = Date.now();
        this.write(ns, name, (st) => { st.startTime = U.nowIso(); st.active = active; st.ready = 0; st.terminating = 0; st.uncountedTerminatedPods = {}; });
      } else if ((r.obj.status || {}).active !== active) this.write(ns, name, (st) => { st.active = active; });
      if (this.pastDeadline(r, began)) return this.finish(ns, name, uid, p, 'DeadlineExceeded');
      if (!podOk || (host && this.cfg.nodeSchedulable && !this.cfg.nodeSchedulable(host))) { this.later(this.cfg.argoStepMs, start); return; }
      this.write(ns, name, (st) => { st.ready = 1; });
      this.tick(ns, name, uid, p, 1, began);
    };
    this.later(this.cfg.argoStepMs, start);
  }
  tick(ns, name, uid, p, n, started) {
    this.later(this.cfg.argoStepMs, () => {
      const r = this.live(ns, name, uid);
      if (!r) return;
      if (this.pastDeadline(r, started)) return this.finish(ns, name, uid, p, 'DeadlineExceeded');
      if (n < Number(p.ticks || 1)) return this.tick(ns, name, uid, p, n + 1, started);
      const failed = Number(p.exitCode || 0) !== 0 || Boolean(p.failReason);
      this.finish(ns, name, uid, p, failed ? (p.failReason || 'BackoffLimitExceeded') : null);
    });
  }
  pastDeadline(r, started) {
    const ads = r.obj.spec && r.obj.spec.activeDeadlineSeconds;
    const scale = this.cfg.deadlineScale === undefined ? 1 : Number(this.cfg.deadlineScale);
    return Boolean(ads) && Date.now() - started >= ads * 1000 * scale;
  }
  async finish(ns, name, uid, p, failReason) {
    for (const o of p.s3 || []) {
      if (failReason && !o.onFailure) continue;
      try { await this.cfg.s3Write(o); } catch (e) { console.error(`standin: job ${ns}/${name}: s3 write ${o.bucket}/${o.key}: ${e.message}`); }
    }
    if (!this.live(ns, name, uid)) return;
    const now = U.nowIso();
    this.write(ns, name, (st) => {
      delete st.active; st.ready = 0;
      if (!failReason) {
        st.succeeded = 1; st.completionTime = now;
        st.conditions = [{ type: 'SuccessCriteriaMet', status: 'True', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods', lastProbeTime: now, lastTransitionTime: now },
          { type: 'Complete', status: 'True', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods', lastProbeTime: now, lastTransitionTime: now }];
      } else {
        st.failed = 1;
        const message = JOB_FAIL[failReason] || JOB_FAIL.BackoffLimitExceeded;
        st.conditions = [{ type: 'FailureTarget', status: 'True', reason: failReason, message, lastProbeTime: now, lastTransitionTime: now },
          { type: 'Failed', status: 'True', reason: failReason, message, lastProbeTime: now, lastTransitionTime: now }];
      }
    });
  }
  // DELETE ... propagationPolicy=Foreground: the Job stays, terminating, until its pods are gone
  foreground(rec) {
    const ns = rec.obj.metadata.namespace, name = rec.obj.metadata.name, uid = rec.obj.metadata.uid;
    if (rec.obj.metadata.deletionTimestamp) return rec;
    const next = U.clone(rec.obj);
    next.metadata.deletionTimestamp = U.nowIso();
    next.metadata.deletionGracePeriodSeconds = 0;
    next.metadata.finalizers = [...new Set([...(next.metadata.finalizers || []), 'foregroundDeletion'])];
    next.status = next.status || {};
    if (next.status.active) { next.status.active = 0; next.status.terminating = 1; }
    const { rec: out } = this.store.commit(this.res, rec, next, null, { verb: 'delete', internal: true });
    this.later(Number(this.cfg.jobDeleteMs === undefined ? 300 : this.cfg.jobDeleteMs), () => { this.due.add(`${ns}/${name}/${uid}`); this.gone(ns, name, uid); });
    return out;
  }
  gone(ns, name, uid) {
    const key = `${ns}/${name}/${uid}`;
    if (this.stuck.has(`${ns}/${name}`) || !this.due.has(key)) return;
    this.due.delete(key);
    const r = this.rec(ns, name);
    if (r && r.obj.metadata.uid === uid) this.store.remove(this.res, r);
  }
  // POST /_standin/jobs/stuck {namespace, name, stuck}: hold a terminating Job (a finalizer
  // that never clears), or release it (removed at once if its deletion time has passed)
  setStuck(ns, name, stuck) {
    if (stuck) this.stuck.add(`${ns}/${name}`);
    else {
      this.stuck.delete(`${ns}/${name}`);
      const r = this.rec(ns, name);
      if (r) this.gone(ns, name, r.obj.metadata.uid);
    }
    return { stuck: [...this.stuck] };
  }
}

function admitJob(old, obj) {
  const s = obj.spec = obj.spec || {};
  if (s.parallelism === undefined) s.parallelism = 1;
  if (s.completions === undefined) s.completions = 1;
  if (s.backoffLimit === undefined) s.backoffLimit = 6;
  if (s.completionMode === undefined) s.completionMode = 'NonIndexed';
  if (s.suspend === undefined) s.suspend = false;
  if (s.podReplacementPolicy === undefined) s.podReplacementPolicy = 'TerminatingOrFailed';
  if (old && !U.deepEqual(old.spec && old.spec.template, s.template)) return [{ reason: 'FieldValueInvalid', field: 'spec.template', message: 'Invalid value: "...": field is immutable' }];
  return [];
}

module.exports = { Argo, Jobs, Plans, admitJob };
