'use strict';
// KServe's defaulting (mutating admission) webhook for the real-peers suite:
// served over HTTPS on loopback by test/real/controller.js and registered with
// the real kube-apiserver by a MutatingWebhookConfiguration (test/lib/real.sh,
// real_webhook_register), so an InferenceService is defaulted on the server
// before it is stored, as on a cluster with KServe.
//
// The defaulting is the stand-in's (test/standin/lib/kserve.js admit(): the
// serving.kserve.io/deploymentMode annotation, what Go's omitempty drops when
// KServe serialises the object back — a probe's int32 zero, empty lists, an
// env value "" — and protocolVersion v2 for Triton), answered as the JSONPatch
// between the object sent and the defaulted one, as controller-runtime's
// admission.PatchResponseFromRaw does.  On UPDATE an InferenceService without
// the annotation keeps the mode the stored object has (KServe refuses a change
// of deploymentMode), so a later change of the default does not move it.

const https = require('https');
const path = require('path');
const { admit } = require(path.join(__dirname, '..', 'standin', 'lib', 'kserve.js'));

const MODE = 'serving.kserve.io/deploymentMode';
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const ptr = (k) => String(k).replace(/~/g, '~0').replace(/\//g, '~1');

// RFC 6902 operations that turn a into b (lists of another length are replaced whole)
function jsonPatch(a, b, at = '', ops = []) {
  if (isObj(a) && isObj(b)) {
    for (const k of Object.keys(a)) if (!(k in b)) ops.push({ op: 'remove', path: `${at}/${ptr(k)}` });
    for (const k of Object.keys(b)) {
      if (!(k in a)) ops.push({ op: 'add', path: `${at}/${ptr(k)}`, value: b[k] });
      else jsonPatch(a[k], b[k], `${at}/${ptr(k)}`, ops);
    }
  } else if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((v, i) => jsonPatch(v, b[i], `${at}/${i}`, ops));
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    ops.push({ op: 'replace', path: at, value: b });
  }
  return ops;
}

// The AdmissionReview answer to one request
function review(body, defaultMode) {
  const req = body.request || {};
  const obj = req.object;
  const response = { uid: req.uid, allowed: true };
  if (isObj(obj) && isObj(obj.metadata)) {
    const out = JSON.parse(JSON.stringify(obj));
    const kept = req.operation === 'UPDATE' && isObj(req.oldObject) && ((req.oldObject.metadata || {}).annotations || {})[MODE];
    admit(req.oldObject || null, out, { deploymentMode: kept || defaultMode() });
    const ops = jsonPatch(obj, out);
    if (ops.length) {
      response.patchType = 'JSONPatch';
      response.patch = Buffer.from(JSON.stringify(ops)).toString('base64');
    }
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

// serveWebhook({cert, key, defaultMode: () => mode, log}, onListening(port))
function serveWebhook(opts, onListening) {
  let served = 0;
  const server = https.createServer({ cert: opts.cert, key: opts.key }, (req, res) => {
    if (req.method !== 'POST' || !req.url.startsWith('/mutate')) { res.writeHead(404); res.end(); return; }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let code = 200, out;
      try {
        out = review(JSON.parse(Buffer.concat(chunks).toString()), opts.defaultMode);
        served += 1;
      } catch (e) {
        code = 400; out = { error: e.message };
        opts.log('webhook', e.message);
      }
      const text = JSON.stringify(out);
      res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.served = () => served;
  server.listen(0, '127.0.0.1', () => onListening(server.address().port));
  return server;
}

module.exports = { serveWebhook, jsonPatch, review };
