'use strict';
// Structural-schema pruning for CRD kinds, as the API server does: fields a CRD's
// openAPIV3Schema does not declare are dropped (fieldValidation Ignore/Warn, Warn being the
// default, which also returns a `Warning` header) or rejected (fieldValidation=Strict → 400
// "strict decoding error: unknown field ..."). Schemas are the real CRDs' (test/schemas/, sources in SOURCES.md).

const fs = require('fs');
const path = require('path');
const U = require('./util');

const FILES = { InferenceService: 'kserve-inferenceservice-v1beta1.json', Workflow: 'argo-workflow-v1alpha1.json' };

function load(dir) {
  const out = {};
  if (!dir) return out;
  for (const [kind, f] of Object.entries(FILES)) {
    const p = path.join(dir, f);
    if (fs.existsSync(p)) out[kind] = JSON.parse(fs.readFileSync(p, 'utf8'));
  }
  return out;
}

// Returns the list of unknown field paths and removes them from `v` in place.
function pruneNode(v, schema, where, unknown) {
  if (!schema || !U.isObj(schema)) return;
  if (Array.isArray(v)) {
    if (schema.items) v.forEach((x, i) => pruneNode(x, schema.items, `${where}[${i}]`, unknown));
    return;
  }
  if (!U.isObj(v) || schema['x-kubernetes-preserve-unknown-fields']) {
    if (U.isObj(v) && schema.properties) for (const [k, s] of Object.entries(schema.properties)) if (k in v) pruneNode(v[k], s, `${where}.${k}`, unknown);
    return;
  }
  if (schema.properties) {
    for (const k of Object.keys(v)) {
      if (schema.properties[k]) pruneNode(v[k], schema.properties[k], `${where}.${k}`, unknown);
      else if (U.isObj(schema.additionalProperties)) pruneNode(v[k], schema.additionalProperties, `${where}.${k}`, unknown);
      else if (schema.additionalProperties !== true) { unknown.push(`${where}.${k}`.replace(/^\./, '')); delete v[k]; }
    }
  } else if (U.isObj(schema.additionalProperties)) {
    for (const k of Object.keys(v)) pruneNode(v[k], schema.additionalProperties, `${where}.${k}`, unknown);
  }
}

class Pruner {
  constructor(dir) { this.schemas = load(dir); }
  kinds() { return Object.keys(this.schemas); }
  // Prune everything but apiVersion/kind/metadata (metadata is handled by the server itself).
  prune(kind, obj) {
    const schema = this.schemas[kind];
    const unknown = [];
    if (!schema || !U.isObj(obj)) return unknown;
    for (const k of Object.keys(obj)) {
      if (k === 'apiVersion' || k === 'kind' || k === 'metadata') continue;
      const s = schema.properties && schema.properties[k];
      if (!s) { unknown.push(k); delete obj[k]; continue; }
      pruneNode(obj[k], s, k, unknown);
    }
    return unknown;
  }
}

module.exports = { Pruner };
