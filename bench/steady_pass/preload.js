// bench/steady_pass/preload.js — put N InferenceServices into the stand-in as
// mlplat's workers would have left them: the manifests mlplat renders (one JSON
// object a line, run.sh dumps them from the revisions), server-side applied as
// they are (our labels, our field manager), C at a time over keep-alive.  A
// fleet of 100,000 converges through the API path in tens of minutes on this
// machine; preloaded, the workers find every object already there and adopt it.
//   node preload.js URL TOKEN C MANIFESTS
'use strict';
const http = require('http');
const fs = require('fs');
const [url, token, cStr, file] = process.argv.slice(2);
const C = +cStr;
const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l);
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const base = new URL(url);

function apply(m) {
  const body = JSON.stringify(m);
  return new Promise((resolve, reject) => {
    const r = http.request({ host: base.hostname, port: base.port, method: 'PATCH', agent,
      path: `/apis/serving.kserve.io/v1beta1/namespaces/${m.metadata.namespace}/inferenceservices/${m.metadata.name}?fieldManager=mlplat&force=true`,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/apply-patch+yaml' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode < 300 ? resolve() : reject(new Error(`apply ${m.metadata.name}: ${res.statusCode}`))));
    });
    r.on('error', reject);
    r.end(body);
  });
}

(async () => {
  const t0 = Date.now();
  let next = 0;
  async function worker() {
    while (next < lines.length) await apply(JSON.parse(lines[next++]));
  }
  await Promise.all(Array.from({ length: C }, worker));
  console.log(Date.now() - t0);
})().catch((e) => { console.error(e.message); process.exit(1); });
