#!/usr/bin/env bash
# Metrics as serving stacks emit them (issue 17, item 4): the rollout evidence
# queries of each preset — Knative <= 1.18 (OpenCensus, ms), Knative >= 1.19
# (OpenTelemetry names, seconds), RawDeployment with vLLM's and Triton's own
# metrics — asked of a real Prometheus scraping series shaped like that stack's
# (test/lib/metrics_shapes.py) give the requests, 5xx answers and latency (ms) the
# series encode; a revision with no error series yet has 0 errors, not missing
# evidence; mlplat.metrics_preset chooses the preset.  The project NetworkPolicy
# admits the namespaces mlplat.network_allowed_namespaces names (projects.sh).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/prometheus.sh"
DB=mlplat
M=$WORK/metrics-shapes
PD=$WORK/prometheus-presets
mkdir -p "$M"
timeout 900 python3 "$SRC/test/lib/metrics_shapes.py" "$M/port" mlp-shop >"$M/log" 2>&1 &
echo $! >"$M/pid"
cleanup() {
	kill "$(cat "$M/pid")" 2>/dev/null
	prometheus_stop "$PD"
	$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.metrics_preset" -c "SELECT pg_reload_conf()" >/dev/null
}
on_exit cleanup
for _ in $(seq 1 100); do [ -s "$M/port" ] && break; sleep 0.1; done
prometheus_start "$PD" "127.0.0.1:$(cat "$M/port")"
tap_ok $? "prometheus started at $PROM_URL, scraping the four stacks' series"
for _ in $(seq 1 100); do prometheus_scraping && break; sleep 0.2; done
sleep 9 # a 6 s window needs samples across it

# promval QUERY — the single value of an instant query, or "empty"
promval() {
	curl -s --get "$PROM_URL/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d.get("data", {}).get("result", [])
if d.get("status") != "success": print("error:", d.get("error")); sys.exit()
if isinstance(r, list):
    print("empty" if not r else ("many" if len(r) > 1 else r[0]["value"][1]))
else:
    print(r[1])'
}
# evidence PRESET REVISION — "requests errors latency" as Prometheus answers mlplat's queries
evidence() {
	local out="" v
	while IFS='|' read -r metric query; do
		v=$(promval "$query")
		out="$out $metric=$v"
	done < <(q $DB "SELECT metric, query FROM mlplat.evidence_queries('mlp-shop', '$2', 6000, '$1')")
	echo "${out# }"
}
# within VALUE LO HI
within() { python3 -c "import sys; v=float('$1'); sys.exit(0 if $2 <= v <= $3 else 1)" 2>/dev/null; }

for preset in knative-opencensus knative-otel vllm triton; do
	e=$(evidence $preset web-predictor-00002)
	req=$(echo "$e" | sed -n 's/.*requests=\([^ ]*\).*/\1/p')
	err=$(echo "$e" | sed -n 's/.*errors=\([^ ]*\).*/\1/p')
	lat=$(echo "$e" | sed -n 's/.*p95_ms=\([^ ]*\).*/\1/p')
	# 10 requests a second over 6 s (increase() extrapolates to the window), one in ten a 5xx
	within "$req" 45 75 && within "$err" 4 9 && python3 -c "import sys; sys.exit(0 if 0.07 <= $err / $req <= 0.14 else 1)"
	tap_ok $? "$preset: requests and 5xx answers of the revision as its series encode them ($e)"
	if [ $preset = triton ]; then
		within "$lat" 79 81
		tap_ok $? "$preset: latency in ms is Triton's mean request duration (80 ms; no histogram by default)"
	else
		# every request took 80 ms: in the (50 ms, 100 ms] bucket, whose interpolated 95th percentile is 97.5 ms
		within "$lat" 95 100
		tap_ok $? "$preset: p95 in ms from the stack's histogram (97.5 ms expected, whatever the stack's unit)"
	fi
	e1=$(evidence $preset web-predictor-00001)
	err1=$(echo "$e1" | sed -n 's/.*errors=\([^ ]*\).*/\1/p')
	tap_is "$err1" 0 "$preset: a revision that never answered 5xx (no error series yet) has 0 errors, not missing evidence"
	tap_is "$(evidence $preset web-predictor-00009)" "requests=empty errors=empty p95_ms=$([ $preset = triton ] && echo empty || echo empty)" \
		"$preset: a revision without series is missing evidence, never zero"
done
# each preset reads only its own stack's names: the OpenTelemetry queries find nothing in OpenCensus-only data
tap_is "$(promval "$(q $DB "SELECT query FROM mlplat.evidence_queries('mlp-shop', 'web-predictor-00002', 6000, 'knative-otel') WHERE metric = 'requests'" | sed 's/kn_serving_invocation_duration_seconds_count/kn_serving_absent_count/')")" empty \
	"a query of names the stack does not emit is empty (so a wrong preset holds a rollout instead of passing it)"

# the setting chooses the preset
tap_is "$(q $DB "SELECT DISTINCT preset_used FROM mlplat.evidence_queries('mlp-shop', 'web-predictor-00002', 6000)")" knative-opencensus \
	"by default the queries are Knative <= 1.18's"
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.metrics_preset = 'vllm'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
tap_is "$(q $DB "SELECT DISTINCT preset_used FROM mlplat.evidence_queries('mlp-shop', 'web-predictor-00002', 6000)")" vllm \
	"mlplat.metrics_preset = vllm: the queries are vLLM's"
out=$(q $DB "SELECT * FROM mlplat.evidence_queries('mlp-shop', 'web\"}or{x=\"', 6000, 'vllm')" 2>&1)
echo "$out" | grep -q "no query for this namespace and revision"
tap_ok $? "a revision name that is no DNS label gets no query"
tap_done
