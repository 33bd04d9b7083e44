#!/usr/bin/env node
'use strict';
// Capacity of the stand-in cluster on loopback with keep-alive: starts a stand-in, drives a
// bounded number of requests at a fixed concurrency, five runs per workload, and prints a table
// (median req/s over the runs, p50/p99 latency over all requests). Never a pass/fail on timing.
//   node capacity.js [--requests N] [--concurrency C] [--runs R]

const http = require('http');
const path = require('path');
const { startStandin: spawnStandin } = require('./spawn');

const argv = process.argv.slice(2);
const opt = (name, def) => { const i = argv.indexOf(`--${name}`); return i >= 0 ? Number(argv[i + 1]) : def; };
const N = opt('requests', 5000);
const C = opt('concurrency', 16);
const RUNS = opt('runs', 5);
const TOKEN = 'bench';
const SERVER = path.join(__dirname, '..', '..', 'test', 'standin', 'server.js');

const startStandin = () => spawnStandin([SERVER, '--port', '0', '--s3-port', '0', '--token', TOKEN, '--seed', '1']);

function req(agent, port, method, p, body, ct) {
  return new Promise((resolve, reject) => {
    const data = body ? Buffer.from(JSON.stringify(body)) : null;
    const headers = { Authorization: `Bearer ${TOKEN}` };
    if (data) { headers['Content-Type'] = ct || 'application/json'; headers['Content-Length'] = data.length; }
    const t0 = process.hrtime.bigint();
    const r = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent }, (resp) => {
      resp.resume();
      resp.on('end', () => resolve({ status: resp.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    r.on('error', reject);
    r.setTimeout(10000, () => r.destroy(new Error('timeout')));
    r.end(data);
  });
}

async function drive(port, make) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: C });
  const lat = [];
  let next = 0, bad = 0;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < N) {
      next++;
      const [m, p, b, ct] = make();
      const r = await req(agent, port, m, p, b, ct);
      if (r.status >= 300) bad++;
      lat.push(r.ms);
    }
  };
  await Promise.all(Array.from({ length: C }, worker));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  return { rps: N / secs, lat, bad };
}

const pct = (a, q) => a[Math.min(a.length - 1, Math.floor(q * a.length))];
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

(async () => {
  const { child, port } = await startStandin();
  try {
    await req(undefined, port, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } });
    for (let i = 0; i < 50; i++) {
      await req(undefined, port, 'POST', '/apis/coordination.k8s.io/v1/namespaces/bench/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: `l${i}`, labels: { 'app.kubernetes.io/managed-by': 'mlplat' } }, spec: { holderIdentity: 'x' } });
    }
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l0', labels: { 'app.kubernetes.io/managed-by': 'mlplat' } }, spec: { holderIdentity: 'x' } };
    await req(undefined, port, 'PATCH', '/apis/coordination.k8s.io/v1/namespaces/bench/leases/l0?fieldManager=mlplat&force=true', lease, 'application/apply-patch+yaml');
    const workloads = [
      ['GET one object', () => ['GET', '/apis/coordination.k8s.io/v1/namespaces/bench/leases/l7']],
      ['LIST 50, label selector', () => ['GET', '/apis/coordination.k8s.io/v1/namespaces/bench/leases?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmlplat']],
      ['SSA apply, no-op', () => ['PATCH', '/apis/coordination.k8s.io/v1/namespaces/bench/leases/l0?fieldManager=mlplat&force=true', lease, 'application/apply-patch+yaml']],
    ];
    const rows = [];
    for (const [name, make] of workloads) {
      await drive(port, make); // warm-up run, not counted
      const rates = [], lat = [];
      let bad = 0;
      for (let r = 0; r < RUNS; r++) { const x = await drive(port, make); rates.push(x.rps); lat.push(...x.lat); bad += x.bad; }
      lat.sort((a, b) => a - b);
      rows.push([name, String(N), String(C), median(rates).toFixed(0), pct(lat, 0.5).toFixed(2), pct(lat, 0.99).toFixed(2), String(bad)]);
    }
    const head = ['workload', 'requests', 'concurrency', `median req/s (${RUNS} runs)`, 'p50 ms', 'p99 ms', 'non-2xx'];
    const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (r) => '| ' + r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join(' | ') + ' |';
    console.log(`stand-in capacity on loopback, keep-alive, node ${process.version}, one client process`);
    console.log(line(head));
    console.log('|' + w.map((x, i) => (i === 0 ? '-'.repeat(x + 2) : '-'.repeat(x + 1) + ':')).join('|') + '|');
    for (const r of rows) console.log(line(r));
  } finally {
    child.kill('SIGTERM');
  }
})().catch((e) => { console.error(e); process.exit(1); });
