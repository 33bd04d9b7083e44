'use strict';
// Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io), with the columns the real
// server (or the CRD's additionalPrinterColumns) would show.

const U = require('./util');

function age(ts) {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ''}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

const cond = (o, type) => ((o.status && o.status.conditions) || []).find((c) => c.type === type);
const traffic = (o) => U.getPath(o, ['status', 'components', 'predictor', 'traffic']) || [];
const col = (name, type = 'string', priority = 0) => ({ name, type, format: name === 'Name' ? 'name' : '', description: '', priority });

const COLUMNS = {
  Namespace: [[col('Status'), (o) => (o.status && o.status.phase) || '']],
  InferenceService: [
    [col('URL'), (o) => (o.status && o.status.url) || ''],
    [col('Ready'), (o) => (cond(o, 'Ready') || {}).status || ''],
    [col('Prev', 'integer'), (o) => { const t = traffic(o).find((x) => x.tag === 'prev'); return t ? t.percent : null; }],
    [col('Latest', 'integer'), (o) => { const t = traffic(o).find((x) => x.latestRevision); return t ? t.percent : null; }],
    [col('PrevRolledoutRevision', 'string', 1), (o) => U.getPath(o, ['status', 'components', 'predictor', 'previousRolledoutRevision']) || ''],
    [col('LatestReadyRevision', 'string', 1), (o) => U.getPath(o, ['status', 'components', 'predictor', 'latestReadyRevision']) || ''],
  ],
  Workflow: [[col('Status'), (o) => (o.status && o.status.phase) || ''], [col('Message', 'string', 1), (o) => (o.status && o.status.message) || '']],
  Job: [
    [col('Status'), (o) => (cond(o, 'Complete') && cond(o, 'Complete').status === 'True' ? 'Complete' : cond(o, 'Failed') && cond(o, 'Failed').status === 'True' ? 'Failed' : 'Running')],
    [col('Completions'), (o) => `${(o.status && o.status.succeeded) || 0}/${(o.spec && o.spec.completions) || 1}`],
  ],
  Lease: [[col('Holder'), (o) => (o.spec && o.spec.holderIdentity) || '']],
  RoleBinding: [[col('Role'), (o) => (o.roleRef ? `${o.roleRef.kind}/${o.roleRef.name}` : '')]],
};

function wantsTable(req) {
  return /as=Table/.test(req.headers.accept || '');
}

function table(res, recs, meta) {
  const extra = COLUMNS[res.kind] || [];
  const columnDefinitions = [col('Name')].concat(extra.map(([c]) => c));
  const ageCol = col('Age');
  // The real server puts Age after the status-like columns and before wide (priority 1) ones.
  const normal = columnDefinitions.filter((c) => c.priority === 0);
  const wide = columnDefinitions.filter((c) => c.priority !== 0);
  const defs = normal.concat([ageCol], wide);
  const rows = recs.map((rec) => {
    const o = rec.obj;
    const vals = new Map([['Name', o.metadata.name], ['Age', age(o.metadata.creationTimestamp)]]);
    for (const [c, fn] of extra) vals.set(c.name, fn(o));
    return { cells: defs.map((c) => vals.get(c.name)), object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata } };
  });
  return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: meta || {}, columnDefinitions: defs, rows };
}

module.exports = { wantsTable, table };
