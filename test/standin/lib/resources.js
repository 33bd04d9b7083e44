'use strict';
// The resource types the stand-in serves, and the discovery documents built from them.

const RESOURCES = [
  { group: '', version: 'v1', plural: 'namespaces', singular: 'namespace', kind: 'Namespace', namespaced: false, short: ['ns'], status: true, generation: false },
  { group: '', version: 'v1', plural: 'resourcequotas', singular: 'resourcequota', kind: 'ResourceQuota', namespaced: true, short: ['quota'], status: true, generation: false },
  { group: '', version: 'v1', plural: 'limitranges', singular: 'limitrange', kind: 'LimitRange', namespaced: true, short: ['limits'], generation: false },
  { group: 'networking.k8s.io', version: 'v1', plural: 'networkpolicies', singular: 'networkpolicy', kind: 'NetworkPolicy', namespaced: true, short: ['netpol'], generation: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', singular: 'rolebinding', kind: 'RoleBinding', namespaced: true, short: [], generation: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', singular: 'role', kind: 'Role', namespaced: true, short: [], generation: false },
  // ConfigMaps: the test kind "echoes" (test/kinds/) keeps one per row
  { group: '', version: 'v1', plural: 'configmaps', singular: 'configmap', kind: 'ConfigMap', namespaced: true, short: ['cm'], generation: false },
  { group: '', version: 'v1', plural: 'serviceaccounts', singular: 'serviceaccount', kind: 'ServiceAccount', namespaced: true, short: ['sa'], generation: false },
  // Secrets: data is never written to the request log (it holds no bodies); immutable: true
  // refuses any change of data (422), as the real API server does
  { group: '', version: 'v1', plural: 'secrets', singular: 'secret', kind: 'Secret', namespaced: true, short: [], generation: false },
  // Nodes (cluster-scoped): made by the admin route POST /_standin/nodes; Ready, cordon and
  // allocatable nvidia.com/gpu decide whether a Job pinned to one by kubernetes.io/hostname starts
  { group: '', version: 'v1', plural: 'nodes', singular: 'node', kind: 'Node', namespaced: false, short: ['no'], status: true, generation: false },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', singular: 'lease', kind: 'Lease', namespaced: true, short: [], generation: false },
  { group: 'batch', version: 'v1', plural: 'jobs', singular: 'job', kind: 'Job', namespaced: true, short: [], status: true, generation: true, categories: ['all'] },
  { group: 'serving.kserve.io', version: 'v1beta1', plural: 'inferenceservices', singular: 'inferenceservice', kind: 'InferenceService', namespaced: true, short: ['isvc'], status: true, generation: true, crd: true, categories: ['all'] },
  // Argo's Workflow CRD has no status subresource: status travels with the object.
  { group: 'argoproj.io', version: 'v1alpha1', plural: 'workflows', singular: 'workflow', kind: 'Workflow', namespaced: true, short: ['wf'], status: false, generation: true, crd: true },
];

for (const r of RESOURCES) {
  r.apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
  r.qualified = r.group ? `${r.plural}.${r.group}` : r.plural; // as in error messages
}

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function findResource(group, version, plural) {
  return RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

function groupVersions() {
  const groups = new Map();
  for (const r of RESOURCES) {
    if (!r.group) continue;
    if (!groups.has(r.group)) groups.set(r.group, new Set());
    groups.get(r.group).add(r.version);
  }
  return groups;
}

function apiVersionsDoc() {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
}

function apiGroupListDoc() {
  const groups = [];
  for (const [g, vs] of groupVersions()) {
    const versions = [...vs].map((v) => ({ groupVersion: `${g}/${v}`, version: v }));
    groups.push({ name: g, versions, preferredVersion: versions[0] });
  }
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

function apiGroupDoc(group) {
  const vs = groupVersions().get(group);
  if (!vs) return null;
  const versions = [...vs].map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
  return { kind: 'APIGroup', apiVersion: 'v1', name: group, versions, preferredVersion: versions[0] };
}

function resourceListDoc(group, version) {
  const rs = RESOURCES.filter((r) => r.group === group && r.version === version);
  if (!rs.length) return null;
  const resources = [];
  for (const r of rs) {
    const e = { name: r.plural, singularName: r.singular, namespaced: r.namespaced, kind: r.kind, verbs: VERBS };
    if (r.short.length) e.shortNames = r.short;
    if (r.categories) e.categories = r.categories;
    resources.push(e);
    if (r.status) resources.push({ name: `${r.plural}/status`, singularName: '', namespaced: r.namespaced, kind: r.kind, verbs: ['get', 'patch', 'update'] });
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources };
}

module.exports = { RESOURCES, findResource, apiVersionsDoc, apiGroupListDoc, apiGroupDoc, resourceListDoc };

// Minimal OpenAPI v3 discovery: kubectl reads it to learn that the server validates fields
// itself (the `fieldValidation` query parameter on PATCH), then sends ?fieldValidation=Strict
// instead of validating client-side. Schemas are deliberately not served.
function gvKey(group, version) { return group ? `apis/${group}/${version}` : `api/${version}`; }

function openapiV3Root() {
  const paths = {};
  const seen = new Set();
  for (const r of RESOURCES) {
    const k = gvKey(r.group, r.version);
    if (seen.has(k)) continue;
    seen.add(k);
    paths[k] = { serverRelativeURL: `/openapi/v3/${k}?hash=standin${r.group ? r.group.length : 0}` };
  }
  return { paths };
}

function openapiV3GroupVersion(key) {
  const rs = RESOURCES.filter((r) => gvKey(r.group, r.version) === key);
  if (!rs.length) return null;
  const qp = (name) => ({ name, in: 'query', uniqueItems: true, schema: { type: 'string', uniqueItems: true } });
  const common = ['dryRun', 'fieldManager', 'fieldValidation'].map(qp);
  const paths = {};
  for (const r of rs) {
    const gvk = { group: r.group, version: r.version, kind: r.kind };
    const base = `/${key}${r.namespaced ? '/namespaces/{namespace}' : ''}/${r.plural}`;
    const op = (action, extra = []) => ({ operationId: `${action}${r.kind}`, 'x-kubernetes-action': action, 'x-kubernetes-group-version-kind': gvk,
      parameters: common.concat(extra.map(qp)), responses: { 200: { description: 'OK' } } });
    paths[base] = { get: op('list'), post: op('post') };
    paths[`${base}/{name}`] = { get: op('get'), put: op('put'), patch: op('patch', ['force']), delete: op('delete') };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes (mlplat stand-in)', version: 'v1.31.0' }, paths, components: { schemas: {} } };
}

module.exports.openapiV3Root = openapiV3Root;
module.exports.openapiV3GroupVersion = openapiV3GroupVersion;
