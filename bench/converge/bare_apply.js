// bench/converge/bare_apply.js — the baseline: a bare concurrent client that
// server-side-applies N InferenceServices (concurrency C, keep-alive) and
// waits until the stand-in reports every one Ready.  Prints elapsed ms.
//   node bare_apply.js URL TOKEN NAMESPACE N C [MANIFESTS]
// With BARE_PASS_FILE set, also times a steady resync pass (see the end).
// MANIFESTS: a file of the manifests mlplat applies, one JSON object a line
// (run.sh dumps them from the deployment revisions), so the baseline does the
// same applies: the same bytes but for the namespace and two label values,
// which keep mlplat from taking these objects for its own (orphans), plus a
// bench=bare label to list them by.  Without it, a minimal manifest.
'use strict';
const http = require('http');
const fs = require('fs');
const [url, token, ns, nStr, cStr, manifestFile] = process.argv.slice(2);
const N = +nStr, C = +cStr;
const given = manifestFile ? fs.readFileSync(manifestFile, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l)) : null;
if (given && given.length < N) throw new Error(`${manifestFile}: ${given.length} manifests, ${N} wanted`);
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const base = new URL(url);

function req(method, path, body, ctype) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: base.hostname, port: base.port, method, path, agent,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': ctype } : {}) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    r.on('error', reject);
    if (body) r.write(body);
    r.end();
  });
}

function manifest(i) {
  if (given) {
    const m = given[i];
    m.metadata.namespace = ns;
    // mlplat's labels kept (same size), but not the two its selector matches on
    m.metadata.labels = { ...m.metadata.labels, 'app.kubernetes.io/managed-by': 'bare-client', 'mlplat.io/instance': 'bare', bench: 'bare' };
    return JSON.stringify(m);
  }
  return JSON.stringify({ apiVersion: 'serving.kserve.io/v1beta1', kind: 'InferenceService',
    metadata: { name: `bare-${i}`, namespace: ns, labels: { 'bench': 'bare' } },
    spec: { predictor: { minReplicas: 1, maxReplicas: 1, model: { modelFormat: { name: 'sklearn' },
      runtime: 'kserve-sklearnserver', storageUri: 's3://b/m/1' } } } });
}

(async () => {
  const t0 = Date.now();
  let next = 0;
  async function worker() {
    while (next < N) {
      const i = next++;
      const name = given ? given[i].metadata.name : `bare-${i}`;
      const r = await req('PATCH', `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices/${name}?fieldManager=bare&force=true`,
        manifest(i), 'application/apply-patch+yaml');
      if (r.status >= 300) throw new Error(`apply ${i}: ${r.status} ${r.body.slice(0, 200)}`);
    }
  }
  await Promise.all(Array.from({ length: C }, worker));
  for (;;) {
    let ready = 0, cont = '';
    do {
      const r = await req('GET', `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices?labelSelector=bench%3Dbare&limit=500${cont ? '&continue=' + encodeURIComponent(cont) : ''}`);
      const list = JSON.parse(r.body);
      for (const o of list.items) {
        const c = ((o.status || {}).conditions || []).find((x) => x.type === 'Ready');
        if (c && c.status === 'True' && o.status.observedGeneration === o.metadata.generation) ready++;
      }
      cont = list.metadata.continue || '';
    } while (cont);
    if (ready >= N) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const elapsed = Date.now() - t0;
  // BARE_PASS_FILE: the cost of a bare controller's steady resync pass (LIST every
  // object in pages of 500 and compare), the median of 5, written there in ms
  if (process.env.BARE_PASS_FILE) {
    const times = [];
    for (let k = 0; k < 5; k++) {
      const p0 = process.hrtime.bigint();
      let cont = '', seen = 0;
      do {
        const r = await req('GET', `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices?labelSelector=bench%3Dbare&limit=500${cont ? '&continue=' + encodeURIComponent(cont) : ''}`);
        const list = JSON.parse(r.body);
        for (const o of list.items) if (((o.status || {}).conditions || []).length) seen++;
        cont = list.metadata.continue || '';
      } while (cont);
      if (seen < N) throw new Error(`steady pass saw ${seen} of ${N}`);
      times.push(Number(process.hrtime.bigint() - p0) / 1e6);
    }
    times.sort((a, b) => a - b);
    fs.writeFileSync(process.env.BARE_PASS_FILE, times[2].toFixed(1) + '\n');
  }
  console.log(elapsed);
  agent.destroy();
})().catch((e) => { console.error(e.message); process.exit(1); });
