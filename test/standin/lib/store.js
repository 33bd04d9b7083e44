'use strict';
// In-memory object store with the API server's write semantics: a global resourceVersion,
// generation on spec changes, uid/creationTimestamp, and managedFields tracked per manager
// (Server-Side Apply ownership at leaf-field granularity; lists are atomic).

const crypto = require('crypto');
const U = require('./util');
const { E } = require('./errors');

// Fields that belong to the server, never to a field manager.
const SERVER_META = ['name', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp',
  'managedFields', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink', 'generateName'];

function ownablePaths(obj, res, subresource) {
  const out = [];
  for (const p of U.leafPaths(obj)) {
    if (p[0] === 'apiVersion' || p[0] === 'kind') continue;
    if (p[0] === 'metadata' && (p.length === 1 || SERVER_META.includes(p[1]))) continue;
    if (res.status) {
      if (subresource === 'status' && p[0] !== 'status') continue;
      if (subresource !== 'status' && p[0] === 'status') continue;
    }
    out.push(U.pathKey(p));
  }
  return out;
}

function toFieldsV1(keys) {
  const root = {};
  for (const k of [...keys].sort()) {
    let cur = root;
    for (const seg of U.keyPath(k)) { cur = cur[`f:${seg}`] = cur[`f:${seg}`] || {}; }
  }
  return root;
}

// What counts as "spec" for generation: everything but metadata, and status when status is a subresource.
function specPart(obj, res) {
  const o = {};
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'metadata' || k === 'apiVersion' || k === 'kind') continue;
    if (k === 'status' && res.status) continue;
    o[k] = v;
  }
  return o;
}

const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

class Store {
  constructor(opts) {
    this.opts = opts;          // { rng, hooks: {admit(res, old, obj), validate(res, old, obj), changed(res, rec, type)} }
    this.reset();
  }

  reset() {
    this.objects = new Map();  // key -> rec {res, obj, managers: [{manager, operation, apiVersion, time, subresource, paths:Set}], json}
    // LIST's index: "plural.group" -> {recs: Map(sortKey -> rec), sorted, byNs: Map(ns -> {recs, sorted})};
    // sorted: the sortKeys in order, dropped when one is added or removed. A LIST used to scan
    // every object of every kind and sort its kind's: O(all) per LIST, seconds at 300,000.
    this.index = new Map();
    this.rv = 1000;
    this.events = [];          // ring of {rv, type, res, ns, name, object}
    this.compactedRv = 0;      // a watch from a version below this is answered 410 Expired
    this.watchers = new Set();
    this.streams = new Set();  // open watch responses: {kill(), expire(message)} (admin watch/drop, watch/compact)
  }

  key(res, ns, name) { return `${res.plural}.${res.group}/${ns || ''}/${name}`; }
  get(res, ns, name) { return this.objects.get(this.key(res, ns, name)); }

  list(res, ns) {
    const all = this.index.get(`${res.plural}.${res.group}`);
    const part = all && (ns ? all.byNs.get(ns) : all);
    if (!part) return [];
    if (!part.sorted) part.sorted = [...part.recs.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return part.sorted.map((k) => part.recs.get(k));
  }

  // keep the LIST index in step with this.objects (rec null: removed)
  indexSet(res, ns, sortKey, rec) {
    const rk = `${res.plural}.${res.group}`;
    let all = this.index.get(rk);
    if (!all) this.index.set(rk, (all = { recs: new Map(), sorted: null, byNs: new Map() }));
    let part = all.byNs.get(ns || '');
    if (!part) all.byNs.set(ns || '', (part = { recs: new Map(), sorted: null }));
    for (const x of [all, part]) {
      if (rec) { if (!x.recs.has(sortKey)) x.sorted = null; x.recs.set(sortKey, rec); } else if (x.recs.delete(sortKey)) x.sorted = null;
    }
    if (!rec && !part.recs.size) all.byNs.delete(ns || '');
  }

  nextRv() { this.rv += 1; return String(this.rv); }

  validateMeta(res, obj) {
    const name = obj.metadata.name;
    const causes = [];
    const re = res.kind === 'Namespace' ? LABEL_RE : NAME_RE;
    if (!re.test(name) || name.length > (res.kind === 'Namespace' ? 63 : 253)) {
      causes.push({ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": a lowercase RFC 1123 ${res.kind === 'Namespace' ? 'label must consist of lower case alphanumeric characters or \'-\', and must start and end with an alphanumeric character' : 'subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character'}` });
    }
    for (const [k, v] of Object.entries(obj.metadata.labels || {})) {
      if (typeof v !== 'string' || !/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v) || v.length > 63) {
        causes.push({ reason: 'FieldValueInvalid', field: `metadata.labels`, message: `Invalid value: ${JSON.stringify(v)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character` });
      }
    }
    for (const [k, v] of Object.entries(obj.metadata.annotations || {})) {
      if (typeof v !== 'string') causes.push({ reason: 'FieldValueTypeInvalid', field: `metadata.annotations.${k}`, message: `Invalid value: "${typeof v}": must be a string` });
    }
    if (causes.length) throw E.invalid(res, name, causes);
  }

  // Write a new version of an object. `own` describes the field-manager effect:
  //   {manager, operation:'Apply', paths:Set, force}  -> replaces the manager's Apply set
  //   {manager, operation:'Update', subresource}       -> manager takes the fields that changed
  //   null                                             -> out-of-band: ownership untouched
  // Returns {rec, changed}. A write that changes nothing (content and ownership) is a no-op:
  // no resourceVersion bump, as the real server does.
  commit(res, old, obj, own, opt = {}) {
    const now = U.nowIso();
    const meta = obj.metadata;
    if (old) {
      // Server-owned metadata is never taken from the request.
      for (const k of opt.internal ? ['uid', 'creationTimestamp', 'generation', 'namespace', 'name'] : ['uid', 'creationTimestamp', 'generation', 'deletionTimestamp', 'namespace', 'name']) {
        if (old.obj.metadata[k] !== undefined) meta[k] = old.obj.metadata[k]; else delete meta[k];
      }
    }
    delete meta.managedFields; delete meta.resourceVersion; delete meta.selfLink;
    if (this.opts.hooks.admit) this.opts.hooks.admit(res, old && old.obj, obj, opt);
    this.validateMeta(res, obj);
    if (this.opts.hooks.validate) this.opts.hooks.validate(res, old && old.obj, obj, opt);

    // Ownership.
    let managers = old ? old.managers.map((m) => ({ ...m, paths: new Set(m.paths) })) : [];
    if (own) {
      const oldPaths = new Set(old ? ownablePaths(old.obj, res, own.subresource) : []);
      const newPaths = new Set(ownablePaths(obj, res, own.subresource));
      if (own.operation === 'Apply') {
        if (own.force && own.conflicts) {
          // Forcing takes only the conflicting fields; fields applied with equal values stay shared.
          for (const c of own.conflicts) {
            const m = managers.find((x) => x.manager === c.manager && x.paths.has(c.owned));
            if (m) m.paths.delete(c.owned);
          }
        }
        let entry = managers.find((m) => m.manager === own.manager && m.operation === 'Apply' && (m.subresource || '') === (own.subresource || ''));
        if (!entry) { entry = { manager: own.manager, operation: 'Apply', apiVersion: res.apiVersion, subresource: own.subresource, paths: new Set(), time: now }; managers.push(entry); }
        if (!U.deepEqual([...entry.paths].sort(), [...own.paths].sort())) entry.time = now;
        entry.paths = new Set(own.paths);
      } else {
        const changed = new Set();
        for (const p of newPaths) if (!oldPaths.has(p) || !U.deepEqual(U.getPath(old.obj, U.keyPath(p)), U.getPath(obj, U.keyPath(p)))) changed.add(p);
        const removed = [...oldPaths].filter((p) => !newPaths.has(p));
        for (const m of managers) {
          for (const p of [...m.paths]) {
            if (removed.some((q) => U.overlaps(p, q)) && !newPaths.has(p)) m.paths.delete(p);
            else if (m.manager !== own.manager && [...changed].some((q) => U.overlaps(p, q))) m.paths.delete(p);
          }
        }
        if (changed.size || !old) {
          let entry = managers.find((m) => m.manager === own.manager && m.operation === 'Update' && (m.subresource || '') === (own.subresource || ''));
          if (!entry) { entry = { manager: own.manager, operation: 'Update', apiVersion: res.apiVersion, subresource: own.subresource, paths: new Set(), time: now }; managers.push(entry); }
          for (const p of changed) entry.paths.add(p);
          entry.time = now;
        }
      }
    }
    managers = managers.filter((m) => m.paths.size > 0);

    if (old) {
      const a = { ...old.obj, metadata: { ...old.obj.metadata } }, b = { ...obj, metadata: { ...meta } };
      delete a.metadata.managedFields; delete a.metadata.resourceVersion; delete b.metadata.resourceVersion;
      const sameOwners = old.managers.length === managers.length && old.managers.every((m, i) => m.manager === managers[i].manager && m.operation === managers[i].operation && U.deepEqual([...m.paths].sort(), [...managers[i].paths].sort()));
      if (U.deepEqual(a, b) && sameOwners) return { rec: old, changed: false };
      if (res.generation && !U.deepEqual(specPart(old.obj, res), specPart(obj, res))) meta.generation = (old.obj.metadata.generation || 1) + 1;
    } else {
      meta.uid = crypto.randomUUID();
      meta.creationTimestamp = now;
      if (res.generation) meta.generation = 1;
    }
    if (opt.dryRun) {
      // Server-side dry run: the full admission and defaulting pipeline, nothing stored.
      if (old) meta.resourceVersion = old.obj.metadata.resourceVersion;
      meta.managedFields = old ? U.clone(old.obj.metadata.managedFields) : [];
      const o = { apiVersion: res.apiVersion, kind: res.kind, ...obj, metadata: meta };
      return { rec: { res, obj: o, managers, json: null }, changed: true, dryRun: true };
    }
    meta.resourceVersion = this.nextRv();
    meta.managedFields = managers.map((m) => {
      const e = { manager: m.manager, operation: m.operation, apiVersion: m.apiVersion, time: m.time, fieldsType: 'FieldsV1', fieldsV1: toFieldsV1(m.paths) };
      if (m.subresource) e.subresource = m.subresource;
      return e;
    });
    // Keep a conventional key order: apiVersion, kind, metadata, spec..., status last.
    const ordered = { apiVersion: res.apiVersion, kind: res.kind, metadata: meta };
    for (const [k, v] of Object.entries(obj)) if (!(k in ordered) && k !== 'status') ordered[k] = v;
    if (obj.status !== undefined) ordered.status = obj.status;
    const rec = { res, obj: ordered, managers, json: null, sortKey: `${meta.namespace || ''}/${meta.name}` };
    this.objects.set(this.key(res, meta.namespace, meta.name), rec);
    this.indexSet(res, meta.namespace, rec.sortKey, rec);
    this.emit(old ? 'MODIFIED' : 'ADDED', rec);
    if (this.opts.hooks.changed) this.opts.hooks.changed(res, rec, old ? 'MODIFIED' : 'ADDED', old);
    return { rec, changed: true };
  }

  remove(res, rec) {
    this.objects.delete(this.key(res, rec.obj.metadata.namespace, rec.obj.metadata.name));
    this.indexSet(res, rec.obj.metadata.namespace, rec.sortKey || `${rec.obj.metadata.namespace || ''}/${rec.obj.metadata.name}`, null);
    // The DELETED event carries the object at a new resourceVersion, like the real watch cache.
    rec.obj = U.clone(rec.obj); rec.obj.metadata.resourceVersion = this.nextRv(); rec.json = null;
    this.emit('DELETED', rec);
    if (this.opts.hooks.changed) this.opts.hooks.changed(res, rec, 'DELETED');
  }

  // As etcd's compaction: forget every event so far; watches from an older version get 410.
  compact() {
    this.events = [];
    this.compactedRv = this.rv;
    return this.rv;
  }

  emit(type, rec) {
    const ev = { rv: this.rv, type, res: rec.res, ns: rec.obj.metadata.namespace, name: rec.obj.metadata.name, object: rec.obj };
    this.events.push(ev);
    if (this.events.length > 2000) this.events.splice(0, 1000);
    for (const w of this.watchers) w(ev);
  }

  // SSA conflict check: fields in `paths` whose value would change and that another manager owns.
  applyConflicts(res, old, manager, paths, applied) {
    if (!old) return [];
    const out = [];
    for (const m of old.managers) {
      if (m.manager === manager) continue;
      for (const p of m.paths) {
        for (const q of paths) {
          if (!U.overlaps(p, q)) continue;
          const qp = U.keyPath(q);
          if (U.deepEqual(U.getPath(old.obj, qp), U.getPath(applied, qp))) continue;
          out.push({ manager: m.manager, apiVersion: m.apiVersion, field: U.dotted(q), owned: p });
        }
      }
    }
    return out;
  }
}

module.exports = { Store, ownablePaths, toFieldsV1 };
