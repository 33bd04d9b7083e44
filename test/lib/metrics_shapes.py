#!/usr/bin/env python3
"""Series shaped like four serving stacks' own metrics, for Prometheus to scrape
(stdlib only, loopback).  Test data for the rollout evidence presets.

Two revisions of InferenceService "web" in namespace NS, each serving 10 requests a
second from the server's start, every request taking 80 ms:
  web-predictor-00002  9 answered 200 and 1 answered 500 every second
  web-predictor-00001  10 answered 200 every second, and no error series at all
                       (counters appear at their first increment)
exposed at once as
  knative-opencensus  Knative <= 1.18 queue-proxy: revision_request_count,
                      revision_request_latencies (ms buckets)
  knative-otel        Knative >= 1.19 queue-proxy: kn_serving_invocation_duration_seconds
                      (s buckets; k8s_namespace_name, kn_revision_name, http_response_status_code)
  vllm                vLLM: vllm:e2e_request_latency_seconds (completed requests) and its
                      HTTP server's http_requests_total{status="2xx"|"5xx"}, per pod
  triton              Triton: nv_inference_request_success/_failure,
                      nv_inference_request_duration_us, per pod
Pods are <revision>-deployment-<hash>-<suffix>, labelled namespace/pod as
Prometheus's Kubernetes discovery would.

Usage: metrics_shapes.py PORTFILE NS
"""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

T0 = time.monotonic()
NS = sys.argv[2]
REVS = {"web-predictor-00002": 1, "web-predictor-00001": 0}  # 5xx per second
RATE = 10
LAT_S = 0.08
BUCKETS_S = ["0.05", "0.1", "0.25"]


def lines():
    el = int((time.monotonic() - T0) * 4) / 4.0   # quarter-second steps
    out = []
    for rev, err_rate in REVS.items():
        total = int(el * RATE)
        errs = int(el * err_rate)
        ok = total - errs
        pod = rev + "-deployment-5f7b9c-x2k4q"
        # Knative <= 1.18 (OpenCensus)
        base = 'configuration_name="web-predictor",container_name="queue-proxy",namespace_name="%s",pod_name="%s",revision_name="%s",service_name="web-predictor"' % (NS, pod, rev)
        out.append('revision_request_count{%s,response_code="200",response_code_class="2xx"} %d' % (base, ok))
        if err_rate:
            out.append('revision_request_count{%s,response_code="500",response_code_class="5xx"} %d' % (base, errs))
        for le in BUCKETS_S:
            ms = str(int(float(le) * 1000))
            out.append('revision_request_latencies_bucket{%s,le="%s"} %d' % (base, ms, total if float(le) >= LAT_S else 0))
        out.append('revision_request_latencies_bucket{%s,le="+Inf"} %d' % (base, total))
        out.append('revision_request_latencies_count{%s} %d' % (base, total))
        # Knative >= 1.19 (OpenTelemetry)
        otel = 'k8s_namespace_name="%s",k8s_pod_name="%s",kn_configuration_name="web-predictor",kn_revision_name="%s",kn_service_name="web-predictor"' % (NS, pod, rev)
        for code, n in (("200", ok), ("500", errs)):
            if code == "500" and not err_rate:
                continue
            lab = '%s,http_response_status_code="%s"' % (otel, code)
            for le in BUCKETS_S:
                out.append('kn_serving_invocation_duration_seconds_bucket{%s,le="%s"} %d' % (lab, le, n if float(le) >= LAT_S else 0))
            out.append('kn_serving_invocation_duration_seconds_bucket{%s,le="+Inf"} %d' % (lab, n))
            out.append('kn_serving_invocation_duration_seconds_count{%s} %d' % (lab, n))
            out.append('kn_serving_invocation_duration_seconds_sum{%s} %.3f' % (lab, n * LAT_S))
        # vLLM (RawDeployment)
        pl = 'namespace="%s",pod="%s"' % (NS, pod)
        v = '%s,model_name="web"' % pl
        for le in BUCKETS_S:
            out.append('vllm:e2e_request_latency_seconds_bucket{%s,le="%s"} %d' % (v, le, ok if float(le) >= LAT_S else 0))
        out.append('vllm:e2e_request_latency_seconds_bucket{%s,le="+Inf"} %d' % (v, ok))
        out.append('vllm:e2e_request_latency_seconds_count{%s} %d' % (v, ok))
        out.append('http_requests_total{%s,handler="/v1/completions",method="POST",status="2xx"} %d' % (pl, ok))
        if err_rate:
            out.append('http_requests_total{%s,handler="/v1/completions",method="POST",status="5xx"} %d' % (pl, errs))
        # Triton (RawDeployment)
        t = '%s,model="web",version="1"' % pl
        out.append('nv_inference_request_success{%s} %d' % (t, ok))
        if err_rate:
            out.append('nv_inference_request_failure{%s} %d' % (t, errs))
        out.append('nv_inference_request_duration_us{%s} %d' % (t, ok * int(LAT_S * 1e6)))  # successful requests' time
    return "\n".join(out) + "\n"


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        body = lines().encode() if self.path == "/metrics" else b"not found\n"
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
