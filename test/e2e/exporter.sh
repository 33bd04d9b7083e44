#!/usr/bin/env bash
# Operators can watch mlplat (issue 17, item 8): Debian's prometheus-postgres-exporter,
# given deploy/prometheus/queries.yaml and a login that is only a member of
# pg_monitor, publishes reconciler health, pass durations, queue depths by status,
# alert counts and span export lag; a real Prometheus scrapes it and every metric
# the file declares is there with the value the database holds.  The alert rules in
# deploy/prometheus/alerts.yml pass `promtool check rules` and their unit tests.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/prometheus.sh"
DB=mlplat
PD=$WORK/prometheus-exporter
ED=$WORK/pg-exporter
EXPORTER=${EXPORTER:-prometheus-postgres-exporter}

# --- the rules: syntax, then behaviour on series shaped like the exporter's
out=$(promtool check rules "$SRC/deploy/prometheus/alerts.yml" 2>&1)
tap_ok $? "promtool check rules accepts deploy/prometheus/alerts.yml"
echo "$out" | sed 's/^/#   /'
out=$(cd "$SRC/test/ops" && promtool test rules alerts_test.yml 2>&1)
tap_ok $? "promtool test rules: the rules fire (and wait) as written"
echo "$out" | grep -v '^ *$' | sed 's/^/#   /'
# one rule per condition the alerts view can produce
conds=$(grep -oE "^SELECT '[a-z_]+' AS alert|^SELECT '[a-z_]+', '(warning|critical)'" "$SRC"/sql/install/90_alerts.sql "$SRC"/sql/install/50_runtime.sql \
	| grep -oE "'[a-z_]+'" | head -n 100 | tr -d "'" | grep -vE '^(warning|critical)$' | sort -u)
missing=""
for c in $conds; do grep -q "alert=\"$c\"" "$SRC/deploy/prometheus/alerts.yml" || missing="$missing $c"; done
tap_is "${missing:-none}" none "every condition of mlplat.alerts has its own rule"

command -v "$EXPORTER" >/dev/null || { echo "# no $EXPORTER (apt-get install prometheus-postgres-exporter)"; tap_ok 1 "exporter installed"; tap_done; exit; }
cleanup() {
	$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.otlp_endpoint" -c "ALTER SYSTEM RESET mlplat.otlp_export_interval" \
		-c "SELECT pg_reload_conf()" >/dev/null
	$PSQL -d $DB -c "DELETE FROM mlplat.projects WHERE name = 'watched'" >/dev/null 2>&1
	[ -f "$ED/pid" ] && kill "$(cat "$ED/pid")" 2>/dev/null
	prometheus_stop "$PD"
}
on_exit cleanup

# --- state worth measuring: a project nobody converges (no cluster configured),
# one with five failed attempts (repeated_failures), and spans that cannot leave
# (an OTLP endpoint on a closed loopback port)
q $DB "SELECT mlplat.create_project('watched', 1, NULL, NULL)" >/dev/null
q $DB "UPDATE mlplat.projects SET attempts = 5, last_error = 'planted' WHERE name = 'watched'" >/dev/null
DEAD=$(free_port)
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_endpoint = 'http://127.0.0.1:$DEAD'" \
	-c "ALTER SYSTEM SET mlplat.otlp_export_interval = '200ms'" -c "SELECT pg_reload_conf()" >/dev/null

# --- a monitoring login with nothing but pg_monitor
q $DB "DROP ROLE IF EXISTS mlplat_monitor; CREATE ROLE mlplat_monitor LOGIN IN ROLE pg_monitor" >/dev/null
tap_is "$($PSQL -d $DB -U mlplat_monitor -c "SELECT count(*) > 0 FROM mlplat.metrics_reconcilers()" 2>&1)" t \
	"a pg_monitor member reads mlplat.metrics_reconcilers()"
$PSQL -d $DB -U mlplat_monitor -c "SELECT 1 FROM mlplat.alerts" >/dev/null 2>&1
tap_ok $((! $?)) "but not mlplat.alerts and its detail texts"

mkdir -p "$ED"
EPORT=$(free_port)
DATA_SOURCE_NAME="postgresql://mlplat_monitor@/$DB?host=$PGHOST&port=$PGPORT&sslmode=disable" \
	timeout 900 "$EXPORTER" --extend.query-path="$SRC/deploy/prometheus/queries.yaml" \
	--disable-default-metrics --disable-settings-metrics --web.listen-address="127.0.0.1:$EPORT" \
	--log.level=warn >"$ED/log" 2>&1 &
echo $! >"$ED/pid"
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$EPORT/metrics" | grep -q '^mlplat_reconciler_leader' && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$EPORT/metrics" | grep -q '^mlplat_reconciler_leader'
tap_ok $? "the exporter publishes mlplat_reconciler_* from the query file"
# every 3 s, with as long to answer: on a loaded machine the exporter's four queries can
# take longer than a second, and a scrape that times out publishes nothing
prometheus_start "$PD" "127.0.0.1:$EPORT" 3s
tap_ok $? "prometheus started at $PROM_URL"

# promql EXPR — the single value of an instant query ("" when none)
promql() {
	curl -s --get "$PROM_URL/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if len(r) == 1 else "")'
}
# wait_prom EXPR EXPECTED SECONDS
wait_prom() { WAIT_EVERY=0.5 wait_says "$3" "$2" promql "$1"; }

# every metric the query file declares reaches Prometheus
names=$(python3 -c '
import sys, yaml
for ns, q in yaml.safe_load(open(sys.argv[1])).items():
    for m in q["metrics"]:
        (col, spec), = m.items()
        if spec["usage"] != "LABEL":
            print(ns + "_" + col)' "$SRC/deploy/prometheus/queries.yaml")
absent_metrics() {
	local n out=""
	for n in $names; do [ -n "$(promql "count($n)")" ] || out="$out $n"; done
	echo "${out# }"
}
deadline=$((SECONDS + 120))
absent=$(absent_metrics)
while [ -n "$absent" ] && ((SECONDS < deadline)); do sleep 1; absent=$(absent_metrics); done
tap_is "${absent:-none}" none "Prometheus has a series of every metric in queries.yaml ($(echo $names | wc -w))"

# reconciler health: one leading (or idle-leading) replica per kind, passes counted
wait_prom 'sum(mlplat_reconciler_leader) + sum(mlplat_reconciler_idle)' "$(mlplat_kinds_count)" 30
tap_ok $? "one replica of each of the $(mlplat_kinds_count) kinds leads (leader or idle)"
wait_prom 'count(mlplat_reconciler_passes_total)' "$(q $DB "SELECT count(*) FROM mlplat.reconciler_health")" 30
tap_ok $? "one passes_total series per replica of reconciler_health"
p1=$(promql 'sum(mlplat_reconciler_passes_total{kind="projects"})')
deadline=$((SECONDS + 60))
while :; do
	p2=$(promql 'sum(mlplat_reconciler_passes_total{kind="projects"})')
	python3 -c "import sys; sys.exit(0 if float('${p2:-0}') > float('${p1:-0}') > 0 else 1)" && break
	((SECONDS >= deadline)) && break
	sleep 1
done
python3 -c "import sys; sys.exit(0 if float('${p2:-0}') > float('${p1:-0}') > 0 else 1)"
tap_ok $? "passes_total grows between scrapes ($p1 -> $p2)"
wait_prom 'count(mlplat_reconciler_last_pass_duration_seconds >= 0)' \
	"$(q $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE last_pass_duration IS NOT NULL")" 30
tap_ok $? "a pass duration for every replica that finished a pass"
# queue depth by status (the status the unconverged project is in)
ST=$(q $DB "SELECT status FROM mlplat.projects WHERE name = 'watched'")
wait_prom "mlplat_queue_entities{kind=\"projects\",status=\"$ST\"}" \
	"$(q $DB "SELECT count(*) FROM mlplat.projects WHERE status = '$ST'")" 20
tap_ok $? "queue depth: the $ST projects, as the table counts them"
wait_prom "mlplat_queue_unobserved{kind=\"projects\",status=\"$ST\"}" \
	"$(q $DB "SELECT count(*) FROM mlplat.projects WHERE status = '$ST' AND generation <> observed_generation")" 30
tap_ok $? "of which unobserved (intent not yet seen by the reconciler)"
# alerts
wait_prom 'mlplat_alerts_firing{alert="repeated_failures",kind="projects",severity="critical"}' \
	"$(q $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'repeated_failures' AND kind = 'projects'")" 20
tap_ok $? "alert counts: repeated_failures as mlplat.alerts has it"
# span export lag
wait_prom 'mlplat_span_export_enabled' 1 20
tap_ok $? "span export: enabled"
wait_prom 'mlplat_span_export_batches_failed_total > bool 0' 1 20
tap_ok $? "span export: failed batches counted ($(promql 'mlplat_span_export_batches_failed_total'))"
wait_prom 'mlplat_span_export_spans_waiting' "$(q $DB "SELECT spans_waiting FROM mlplat.span_export_status")" 30
tap_ok $? "span export: spans waiting, as span_export_status has them"
wait_prom 'mlplat_span_export_lag_seconds > bool 1' 1 30
tap_ok $? "span export: the lag of the oldest waiting span grows while the collector is away"
tap_done
