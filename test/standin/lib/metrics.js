'use strict';
// Simulated per-revision serving metrics in Prometheus text exposition format 0.0.4.
// Each scripted revision produces requests at `rps`; its behaviour sets the error share and
// latency: healthy (0.5% 5xx, fast), regressing (20% 5xx, slow), silent (no new samples).
// A revision scripted with `service` serves its share of that InferenceService's canary split.

const BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];
// Share of requests at or below each bucket boundary (cumulative), per behaviour.
const SHAPES = {
  healthy: { err: 0.005, cum: [0.05, 0.25, 0.70, 0.92, 0.98, 0.995, 0.999, 1, 1, 1], meanMs: 22 },
  regressing: { err: 0.20, cum: [0, 0.01, 0.03, 0.08, 0.20, 0.45, 0.75, 0.93, 0.99, 1], meanMs: 480 },
  silent: { err: 0, cum: BUCKETS_MS.map(() => 1), meanMs: 0 },
};

class Metrics {
  // shareOf(namespace, service, revision) -> fraction of the service's traffic on that revision
  // (the stand-in's KServe status); used by revisions scripted with a `service`.
  constructor(shareOf) { this.shareOf = shareOf || (() => 0); this.reset(); }

  reset() { this.revs = new Map(); }

  // Accumulate what has happened so far, then switch behaviour from now on.
  // With `service`, rps is the whole InferenceService's rate and the revision serves its share
  // of it as KServe's status.components.predictor.traffic reports the split at each scrape.
  set(rev, { namespace = 'default', behaviour = 'healthy', rps = 50, configuration, service } = {}) {
    if (!SHAPES[behaviour]) throw new Error(`behaviour must be one of ${Object.keys(SHAPES).join(', ')}`);
    const now = Date.now();
    const cur = this.revs.get(rev);
    if (cur) this.advance(cur, now);
    const acc = cur ? this.sample(cur, now) : { n200: 0, n500: 0, buckets: BUCKETS_MS.map(() => 0), count: 0, sumMs: 0 };
    this.revs.set(rev, { rev, namespace, configuration: configuration || rev.replace(/-\d{5}$/, ''), behaviour, rps: Number(rps),
      service: service || null, since: now, last: now, served: 0, acc });
  }

  // Requests a traffic-following revision served since the last look, at its current share.
  advance(r, now) {
    if (!r.service) return;
    r.served += (r.rps * this.shareOf(r.namespace, r.service, r.rev) * (now - r.last)) / 1000;
    r.last = now;
  }

  sample(r, now) {
    const shape = SHAPES[r.behaviour];
    const total = r.service ? Math.floor(r.served) : Math.floor((r.rps * (now - r.since)) / 1000);
    const n = r.behaviour === 'silent' ? 0 : total;
    const n500 = Math.floor(n * shape.err);
    return {
      n200: r.acc.n200 + (n - n500), n500: r.acc.n500 + n500,
      buckets: r.acc.buckets.map((b, i) => b + Math.floor(n * shape.cum[i])), count: r.acc.count + n, sumMs: r.acc.sumMs + n * shape.meanMs,
    };
  }

  expose() {
    const now = Date.now();
    const lines = [
      '# HELP revision_request_count The number of requests that are routed to queue-proxy',
      '# TYPE revision_request_count counter',
    ];
    const hist = [
      '# HELP revision_request_latencies The response latencies of the requests in milliseconds',
      '# TYPE revision_request_latencies histogram',
    ];
    for (const r of this.revs.values()) {
      this.advance(r, now);
      const s = this.sample(r, now);
      const base = `namespace_name="${r.namespace}",configuration_name="${r.configuration}",revision_name="${r.rev}"`;
      lines.push(`revision_request_count{${base},response_code="200",response_code_class="2xx"} ${s.n200}`);
      lines.push(`revision_request_count{${base},response_code="500",response_code_class="5xx"} ${s.n500}`);
      BUCKETS_MS.forEach((le, i) => hist.push(`revision_request_latencies_bucket{${base},le="${le}"} ${s.buckets[i]}`));
      hist.push(`revision_request_latencies_bucket{${base},le="+Inf"} ${s.count}`);
      hist.push(`revision_request_latencies_sum{${base}} ${s.sumMs}`);
      hist.push(`revision_request_latencies_count{${base}} ${s.count}`);
    }
    return lines.concat(hist).join('\n') + '\n';
  }
}

module.exports = { Metrics, SHAPES };
