#!/usr/bin/env node
'use strict';
// How the stand-in holds a fleet of InferenceServices: starts a stand-in, applies N
// manifests shaped as mlplat renders them (server-side apply, C at a time over keep-alive),
// and after every STEP objects prints the apply rate of that step and the stand-in's RSS;
// then, at the full size, the time of a full LIST (pages of 500) and of a watch that replays
// from resourceVersion 0. The predictor's ServiceAccount is made only after the preload (as
// bench/steady_pass does: the projects worker makes it once the workers are on), then
// every object is waited for Ready. Never a pass/fail on timing.
// BUILD=<tree> runs that tree's stand-in (side by side with this one's, alternately or at once).
//   node fleet.js [--objects N] [--step S] [--concurrency C] [--ready-delay-ms MS] [--node-args "--cpu-prof ..."]

const http = require('http');
const fs = require('fs');
const path = require('path');
const { startStandin: spawnStandin } = require('./spawn');

const argv = process.argv.slice(2);
const opt = (name, def) => { const i = argv.indexOf(`--${name}`); return i >= 0 ? argv[i + 1] : def; };
const N = Number(opt('objects', 20000));
const STEP = Number(opt('step', 5000));
const C = Number(opt('concurrency', 16));
const READY_MS = Number(opt('ready-delay-ms', 50));
const NODE_ARGS = (opt('node-args', '') || '').split(' ').filter(Boolean); // e.g. --cpu-prof, --heapsnapshot-signal=SIGUSR2
const TOKEN = 'bench';
const NS = 'mlp-fleet';
const SERVER = path.join(process.env.BUILD || path.join(__dirname, '..', '..'), 'test', 'standin', 'server.js');

const startStandin = () => spawnStandin([...NODE_ARGS, SERVER, '--port', '0', '--s3-port', '0', '--token', TOKEN,
  '--seed', '1', '--ready-delay-ms', String(READY_MS), '--no-log-file']);

const agent = new http.Agent({ keepAlive: true, maxSockets: C });
function req(port, method, p, body, ct, onData) {
  return new Promise((resolve, reject) => {
    const data = body ? Buffer.from(JSON.stringify(body)) : null;
    const headers = { Authorization: `Bearer ${TOKEN}` };
    if (data) { headers['Content-Type'] = ct || 'application/json'; headers['Content-Length'] = data.length; }
    const r = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent }, (resp) => {
      const chunks = [];
      resp.on('data', (c) => { if (onData) onData(c, r); else chunks.push(c); });
      resp.on('end', () => resolve({ status: resp.statusCode, text: Buffer.concat(chunks).toString() }));
      resp.on('error', reject);
    });
    r.on('error', (e) => (onData && e.code === 'ECONNRESET' ? resolve({ status: 0 }) : reject(e)));
    r.end(data);
  });
}

// mlplat's rendering (src/render/isvc.c): labels, the artifact annotation, a predictor with
// replicas, its ServiceAccount, the model and a TCP readiness probe
function manifest(i) {
  const name = `d${i}`;
  return { apiVersion: 'serving.kserve.io/v1beta1', kind: 'InferenceService',
    metadata: { name, namespace: NS,
      labels: { 'app.kubernetes.io/managed-by': 'mlplat', 'mlplat.io/project': 'fleet', 'mlplat.io/deployment': name, 'mlplat.io/revision': '1', 'app.kubernetes.io/instance': `fleet-${name}` },
      annotations: { 'mlplat.io/artifact-sha256': 'b'.repeat(64), 'mlplat.io/content-id': `c${i}-1` } },
    spec: { predictor: { minReplicas: 1, maxReplicas: 1, serviceAccountName: 'mlplat-predictor',
      model: { modelFormat: { name: 'sklearn' }, runtime: 'kserve-sklearnserver', storageUri: 's3://models/m/1',
        readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 10, failureThreshold: 3 } } } } };
}

const rssMb = (pid) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};
const cpuS = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, clock ticks of 1/100 s
};

async function listAll(port) {
  let cont = '', n = 0, pages = 0;
  do {
    const r = await req(port, 'GET', `/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
    const l = JSON.parse(r.text);
    n += l.items.length; pages++;
    cont = l.metadata.continue || '';
  } while (cont);
  return { n, pages };
}

async function readyCount(port) {
  let cont = '', ready = 0;
  do {
    const r = await req(port, 'GET', `/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
    const l = JSON.parse(r.text);
    for (const o of l.items) if (((o.status || {}).conditions || []).some((c) => c.type === 'Ready' && c.status === 'True')) ready++;
    cont = l.metadata.continue || '';
  } while (cont);
  return ready;
}

(async () => {
  const { child, port } = await startStandin();
  const pid = child.pid;
  const out = [];
  try {
    await req(port, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const rss0 = rssMb(pid);
    console.log(`stand-in ${SERVER}: ${N} InferenceServices, steps of ${STEP}, concurrency ${C}, ready delay ${READY_MS} ms, node ${process.version}; RSS empty ${rss0.toFixed(0)} MB`);
    console.log('| objects | step s | applies/s | stand-in CPU s (step) | RSS MB | RSS kB/object |');
    console.log('|---:|---:|---:|---:|---:|---:|');
    let next = 0;
    for (let done = 0; done < N;) {
      const stop = Math.min(N, done + STEP);
      const t0 = Date.now(), c0 = cpuS(pid);
      const worker = async () => {
        while (next < stop) {
          const i = ++next;
          const r = await req(port, 'PATCH', `/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices/d${i}?fieldManager=mlplat&force=true`, manifest(i), 'application/apply-patch+yaml');
          if (r.status >= 300) throw new Error(`apply d${i}: ${r.status} ${r.text}`);
        }
      };
      await Promise.all(Array.from({ length: C }, worker));
      const s = (Date.now() - t0) / 1000;
      const rss = rssMb(pid);
      const row = [stop, s.toFixed(1), ((stop - done) / s).toFixed(0), (cpuS(pid) - c0).toFixed(1), rss.toFixed(0), ((rss - rss0) * 1024 / stop).toFixed(1)];
      out.push(row);
      console.log(`| ${row.join(' | ')} |`);
      done = stop;
    }
    // FLEET_PAUSE=s: time to take a heap snapshot of the preloaded stand-in (kill -USR2 pid)
    if (process.env.FLEET_PAUSE) { console.log(`pid ${pid}: paused ${process.env.FLEET_PAUSE} s`); await new Promise((r) => setTimeout(r, 1000 * Number(process.env.FLEET_PAUSE))); }
    let t0 = Date.now();
    const l = await listAll(port);
    console.log(`full LIST: ${l.n} objects in ${l.pages} pages, ${Date.now() - t0} ms`);
    t0 = Date.now();
    let events = 0;
    await req(port, 'GET', `/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices?watch=true&resourceVersion=0&timeoutSeconds=1`, null, null, (c) => {
      for (let k = 0; k < c.length; k++) if (c[k] === 10) events++;
    });
    console.log(`watch from 0: ${events} events until its 1 s timeout, ${Date.now() - t0} ms`);
    // the ServiceAccount the predictors run as (anonymous S3, as the stand-in's bucket allows):
    // now their pods can start
    t0 = Date.now();
    const c0 = cpuS(pid);
    await req(port, 'POST', `/api/v1/namespaces/${NS}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'mlplat-predictor', annotations: { 'serving.kserve.io/s3-useanoncredential': 'true' } } });
    let ready = 0;
    for (let k = 0; k < 600 && ready < N; k++) { await new Promise((r) => setTimeout(r, 500)); ready = await readyCount(port); }
    console.log(`ServiceAccount made -> ${ready} of ${N} Ready: ${Date.now() - t0} ms (stand-in CPU ${(cpuS(pid) - c0).toFixed(1)} s); RSS ${rssMb(pid).toFixed(0)} MB`);
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
  }
})().catch((e) => { console.error(e); process.exit(1); });
