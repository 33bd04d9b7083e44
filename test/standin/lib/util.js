'use strict';
// Small helpers shared by the stand-in: seeded randomness, JSON paths, patches, hashing.

// mulberry32: a tiny deterministic PRNG so fault injection is reproducible from --seed.
function makeRng(seed) {
  let a = (Number(seed) >>> 0) || 1;
  const next = () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return next;
}

// Kubernetes timestamps are RFC 3339 with second precision.
function nowIso(ms) {
  return new Date(ms === undefined ? Date.now() : ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const clone = (v) => (v === undefined ? undefined : structuredClone(v));

function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) if (!Object.prototype.hasOwnProperty.call(b, k) || !deepEqual(a[k], b[k])) return false;
  return true;
}

// A path is an array of map keys. Leaves are scalars, lists (treated atomically) and empty maps.
function leafPaths(v, prefix = [], out = []) {
  if (isObj(v) && Object.keys(v).length > 0) {
    for (const k of Object.keys(v)) leafPaths(v[k], prefix.concat(k), out);
  } else if (prefix.length) {
    out.push(prefix);
  }
  return out;
}

function getPath(obj, p) {
  let cur = obj;
  for (const k of p) {
    if (!isObj(cur) || !Object.prototype.hasOwnProperty.call(cur, k)) return undefined;
    cur = cur[k];
  }
  return cur;
}

function setPath(obj, p, v) {
  let cur = obj;
  for (let i = 0; i < p.length - 1; i++) {
    if (!isObj(cur[p[i]])) cur[p[i]] = {};
    cur = cur[p[i]];
  }
  cur[p[p.length - 1]] = v;
}

// Delete a path and prune maps it leaves empty (never the top-level object itself).
function deletePath(obj, p) {
  const stack = [];
  let cur = obj;
  for (let i = 0; i < p.length - 1; i++) {
    if (!isObj(cur[p[i]])) return;
    stack.push([cur, p[i]]);
    cur = cur[p[i]];
  }
  delete cur[p[p.length - 1]];
  while (stack.length) {
    const [parent, k] = stack.pop();
    if (isObj(parent[k]) && Object.keys(parent[k]).length === 0) delete parent[k];
    else break;
  }
}

const SEP = '\u0000';
const pathKey = (p) => p.join(SEP);
const keyPath = (k) => k.split(SEP);
const dotted = (k) => '.' + keyPath(k).join('.');
function overlaps(a, b) {
  return a === b || a.startsWith(b + SEP) || b.startsWith(a + SEP);
}

// RFC 7386 JSON merge patch.
function mergePatch(target, patch) {
  if (!isObj(patch)) return clone(patch);
  const out = isObj(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

// RFC 6902 JSON patch. Throws {patchError} on failure.
function jsonPatch(doc, ops) {
  if (!Array.isArray(ops)) throw { patchError: 'json patch must be an array of operations' };
  let root = clone(doc);
  const parse = (ptr) => {
    if (ptr === '') return [];
    if (typeof ptr !== 'string' || ptr[0] !== '/') throw { patchError: `invalid JSON pointer ${JSON.stringify(ptr)}` };
    return ptr.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  };
  const parentOf = (p) => {
    let cur = root;
    for (let i = 0; i < p.length - 1; i++) {
      const k = Array.isArray(cur) ? Number(p[i]) : p[i];
      if (cur === null || typeof cur !== 'object' || !(k in cur)) throw { patchError: `doc is missing path: ${'/' + p.join('/')}` };
      cur = cur[k];
    }
    return cur;
  };
  const get = (p) => {
    let cur = root;
    for (const s of p) {
      const k = Array.isArray(cur) ? Number(s) : s;
      if (cur === null || typeof cur !== 'object' || !(k in cur)) throw { patchError: `doc is missing path: ${'/' + p.join('/')}` };
      cur = cur[k];
    }
    return cur;
  };
  const add = (p, v) => {
    if (!p.length) { root = v; return; }
    const par = parentOf(p), last = p[p.length - 1];
    if (Array.isArray(par)) {
      const i = last === '-' ? par.length : Number(last);
      if (!(i >= 0 && i <= par.length)) throw { patchError: `index out of range: ${last}` };
      par.splice(i, 0, v);
    } else if (isObj(par)) par[last] = v;
    else throw { patchError: 'cannot add to a scalar' };
  };
  const remove = (p) => {
    const par = parentOf(p), last = p[p.length - 1];
    if (Array.isArray(par)) {
      const i = Number(last);
      if (!(i >= 0 && i < par.length)) throw { patchError: `index out of range: ${last}` };
      par.splice(i, 1);
    } else {
      if (!isObj(par) || !(last in par)) throw { patchError: `unable to remove nonexistent key: ${last}` };
      delete par[last];
    }
  };
  for (const op of ops) {
    const p = parse(op.path);
    switch (op.op) {
      case 'add': add(p, clone(op.value)); break;
      case 'remove': remove(p); break;
      case 'replace': get(p); remove(p); add(p, clone(op.value)); break;
      case 'move': { const f = parse(op.from); const v = get(f); remove(f); add(p, v); break; }
      case 'copy': add(p, clone(get(parse(op.from)))); break;
      case 'test': if (!deepEqual(get(p), op.value)) throw { patchError: `testing value ${op.path} failed` }; break;
      default: throw { patchError: `Unexpected kind: ${op.op}` };
    }
  }
  return root;
}

// FNV-1a 32-bit, as Argo uses to derive node ids from node names.
function fnv32a(s) {
  let h = 0x811c9dc5;
  const b = Buffer.from(s, 'utf8');
  for (const c of b) { h ^= c; h = Math.imul(h, 0x01000193) >>> 0; }
  return h >>> 0;
}

// Controllers run from timers: a surprise in one object must not take the process down.
function guarded(what, fn) {
  return (...a) => {
    try { return fn(...a); } catch (e) { console.error(`standin: ${what} failed:`, e && e.stack ? e.stack : e); return undefined; }
  };
}

module.exports = { guarded, makeRng, nowIso, clone, isObj, deepEqual, leafPaths, getPath, setPath, deletePath,
  SEP, pathKey, keyPath, dotted, overlaps, mergePatch, jsonPatch, fnv32a };
