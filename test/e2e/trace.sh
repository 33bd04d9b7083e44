#!/usr/bin/env bash
# One trace, end to end (scenario 10): the API's span and the deployments
# reconciler's spans (claim, apply, readiness wait) share the trace id stored
# with the entity, are recorded in mlplat.spans, and reach the stand-in's OTLP
# endpoint in batches; a 5xx from the collector is retried without sending a
# span twice; with mlplat.otlp_endpoint unset nothing is sent.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-trace
DB=mlplat
set_export() {
	$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_endpoint = '$1'" -c "ALTER SYSTEM SET mlplat.otlp_export_interval = '200ms'" \
		-c "ALTER SYSTEM SET mlplat.otlp_batch_size = 7" -c "SELECT pg_reload_conf()" >/dev/null
}
cleanup() {
	$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.otlp_endpoint" -c "ALTER SYSTEM RESET mlplat.otlp_export_interval" \
		-c "ALTER SYSTEM RESET mlplat.otlp_batch_size" -c "SELECT pg_reload_conf()" >/dev/null
}
e2e_standin mlplat
on_exit cleanup
set_export ''
otlp_posts() {
	admin GET requests | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e["path"] == "/v1/traces"))'
}

q $DB "SELECT mlplat.create_project('tracing', 2, NULL, NULL); SELECT mlplat.add_artifact_location('tracing', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'tracing'" READY 20
tap_ok $? "project tracing is READY"
SHA=$(standin_artifact s3://models/tm/1 'tr-v1')
q $DB "SELECT mlplat.register_model_version('tracing', 'tm', '1', 's3://models/tm/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('tracing', 'tm', '1', 'CANDIDATE')" >/dev/null

# --- a caller's trace: the deploy is its child, the reconciler's steps are the deploy's children
TRACE=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
CALLER_SPAN=$(python3 -c 'import secrets; print(secrets.token_hex(8))')
out=$($PSQL -d $DB -c "SET mlplat.traceparent = '00-$TRACE-$CALLER_SPAN-01'" \
	-c "SELECT status FROM mlplat.deploy('tracing', 'traced', 'tm', '1', 'kserve-sklearnserver')")
tap_is "$out" DEPLOYING "deploy() accepted with the caller's traceparent"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'traced'" READY 20
tap_ok $? "the deployment converges to READY"
tap_same "$TRACE" "$(q $DB "SELECT split_part(traceparent, '-', 2) FROM mlplat.deployments WHERE name = 'traced'")" \
	"the deployment stores the caller's trace id"
wait_for $DB "SELECT string_agg(name, ',' ORDER BY name) FROM mlplat.spans WHERE trace_id = '$TRACE'" \
	"deployments.apply,deployments.artifact_check,deployments.claim,deployments.readiness_wait,mlplat.deploy" 10
tap_ok $? "mlplat.spans holds the API span and the claim, artifact check, apply and readiness-wait spans of the trace"

# --- the runs reconciler's submit joins the run's trace the same way
q $DB "SELECT status FROM mlplat.start_run('tracing', 'traced-run', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "SELECT s.parent_span_id = a.span_id FROM mlplat.spans s JOIN mlplat.runs r ON r.id = s.entity_id AND s.entity = 'run'
	JOIN mlplat.spans a ON a.trace_id = s.trace_id AND a.name = 'mlplat.start_run'
	WHERE r.name = 'traced-run' AND s.name = 'runs.submit' AND s.trace_id = split_part(r.traceparent, '-', 2)" t 20
tap_ok $? "the run's submit span is a child of the start_run API span, in the run's trace"

# --- endpoint unset: nothing is sent
sleep 1
tap_is "$(otlp_posts)" 0 "with mlplat.otlp_endpoint unset no export request reaches the collector"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.spans WHERE trace_id = '$TRACE' AND exported_at IS NOT NULL")" 0 \
	"and no span is marked exported"

tap_is "$(q $DB "SELECT enabled::text || ' ' || (spans_waiting > 0)::text FROM mlplat.span_export_status")" "false true" \
	"span_export_status: export off, spans waiting"
sent0=$(q $DB "SELECT coalesce(spans_sent, 0) || ' ' || coalesce(batches_failed, 0) FROM mlplat.span_export_status")

# --- endpoint set, the collector fails twice with 503: retried with backoff, then every span once
admin POST faults '{"path":"^/v1/traces$","status":503,"times":2}' >/dev/null
# spans exported before (another script's collector) are not this collector's
t0=$(q $DB "SELECT now()")
# In the whole suite the backlog is every earlier script's spans (6,400 at batches of 7), drained
# at what the machine leaves the exporter: 5,200 in 30 s at load 21.  So the wait grows with the
# backlog (at least 40 spans a second), and every span must still be exported, each once.
backlog=$(q $DB "SELECT count(*) FROM mlplat.spans WHERE exported_at IS NULL")
set_export "$STANDIN_URL"
wait_for $DB "SELECT count(*) FROM mlplat.spans WHERE exported_at IS NULL" 0 $((30 + backlog / 40))
tap_ok $? "every recorded span is exported once the collector answers ($backlog waiting)"
admin GET requests | python3 -c '
import json, sys
posts = [e for e in json.load(sys.stdin)["items"] if e["path"] == "/v1/traces"]
codes = [e["status"] for e in posts]
print("first:", codes[:3], "then all 200:", all(c == 200 for c in codes[2:]), "batch<=7:", all(e.get("spans", 0) <= 7 for e in posts))
' >"$WORK/trace-posts.txt"
tap_is "$(cat "$WORK/trace-posts.txt")" "first: [503, 503, 200] then all 200: True batch<=7: True" \
	"two 503 answers, then the same batch again and the rest, in batches of at most mlplat.otlp_batch_size"
total=$(q $DB "SELECT count(*) FROM mlplat.spans WHERE exported_at > '$t0'")
admin GET spans | python3 -c '
import json, sys
spans = json.load(sys.stdin)["spans"]
ids = [s["spanId"] for s in spans]
print(len(ids), len(set(ids)))
' >"$WORK/trace-ids.txt"
tap_is "$(cat "$WORK/trace-ids.txt")" "$total $total" "the collector received each of the $total spans exactly once"
tap_is "$(q $DB "SELECT (spans_sent - ${sent0% *}) || ' ' || (batches_failed - ${sent0#* }) || ' ' || consecutive_failures || ' ' || last_error || ' ' || (last_success > last_failure)::text || ' ' || spans_waiting FROM mlplat.span_export_status")" \
	"$total 2 0 HTTP 503 true 0" "span_export_status counts the spans sent and the two failed POSTs, and shows the last error"

admin GET "spans?traceId=$TRACE" | python3 -c '
import json, sys
caller = sys.argv[1]
spans = {s["name"]: s for s in json.load(sys.stdin)["spans"]}
problems = []
api = spans.get("mlplat.deploy")
if api is None:
    print("no API span"); sys.exit()
if api["parentSpanId"] != caller: problems.append("API parent %s" % api["parentSpanId"])
if api["kind"] != 2: problems.append("API kind %s" % api["kind"])
if api["service"] != "mlplat": problems.append("service %s" % api["service"])
steps = ["deployments.claim", "deployments.artifact_check", "deployments.apply", "deployments.readiness_wait"]
for n in steps:
    s = spans.get(n)
    if s is None: problems.append("missing " + n); continue
    if s["parentSpanId"] != api["spanId"]: problems.append(n + " is not a child of the API span")
    if s["attributes"].get("mlplat.entity") != "deployment": problems.append(n + " has no entity")
    if s["status"].get("code", 0) != 0: problems.append(n + " status %s (success leaves it UNSET)" % s["status"])
if not problems:
    t = lambda n, k: int(spans[n][k + "TimeUnixNano"])
    chain = [t("mlplat.deploy", "start"), t("mlplat.deploy", "end"), t("deployments.claim", "end"),
             t("deployments.artifact_check", "start"), t("deployments.artifact_check", "end"),
             t("deployments.apply", "start"), t("deployments.apply", "end"),
             t("deployments.readiness_wait", "start"), t("deployments.readiness_wait", "end")]
    if chain != sorted(chain): problems.append("times out of order: %s" % chain)
    if t("deployments.readiness_wait", "start") != t("deployments.apply", "end"): problems.append("readiness wait does not start at the apply")
    if not str(spans["deployments.apply"]["attributes"].get("http.response.status_code")).startswith("2"): problems.append("apply status attribute")
print("ok" if not problems else "; ".join(problems))
' "$CALLER_SPAN" >"$WORK/trace-check.txt"
tap_is "$(cat "$WORK/trace-check.txt")" ok \
	"one trace at the collector: API span under the caller's, claim/artifact check/apply/readiness under the API span, times in order"

# --- the exporter is a kind of its own (span_export): its leader exports, the projects
# leader does only projects and is not run at the exporter's pace (every 200 ms)
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'span_export' AND role = 'leader'
              AND status ~ '^[0-9]+ spans exported'" 1 30
tap_ok $? "the span_export leader runs the exporter ($(q $DB "SELECT status FROM mlplat.reconciler_health WHERE kind = 'span_export' AND role = 'leader'"))"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.leader_epochs WHERE kind = 'span_export'")" 1 "... with an epoch of its own, which fences its marks"
p0=$(q $DB "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'projects' AND role = 'leader'")
sleep 3
p1=$(q $DB "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'projects' AND role = 'leader'")
[ -n "$p0" ] && [ -n "$p1" ] && [ $((p1 - p0)) -lt 8 ]
tap_ok $? "the span exporter does not make the projects pass run at its pace ($((p1 - p0)) projects passes in 3 s, resync 2 s)"

# --- a collector that keeps failing: a span waiting longer than a minute is an alert
# (503: retryable; a 500 would drop the batch, as the OTLP specification says)
admin POST faults '{"path":"^/v1/traces$","status":503,"times":1000}' >/dev/null
# The stalled span and, after it, a fresh one: in the whole suite other scripts' passes
# (same database) record spans during the stall too, so the alert counts every span
# waiting, not just this script's; the count must be the table's, and both kept.
q $DB "INSERT INTO mlplat.spans (trace_id, span_id, name, kind, start_time, end_time)
       VALUES (repeat('ab', 16), repeat('cd', 8), 'test.stalled', 'INTERNAL', now() - interval '2 minutes', now() - interval '2 minutes'),
              (repeat('ab', 16), repeat('ce', 8), 'test.waiting', 'INTERNAL', now(), now())" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'span_export_stalled'
                 AND detail LIKE pg_catalog.format('%s spans wait for export, the oldest for 00:02:%%; %% consecutive failed POSTs; last error: HTTP 503',
                                                   (SELECT count(*) FROM mlplat.spans WHERE exported_at IS NULL))
                 AND (SELECT count(*) FROM mlplat.spans WHERE name IN ('test.stalled', 'test.waiting') AND exported_at IS NULL) = 2" 1 10
rc=$?; tap_ok $rc "a span kept from the collector for 2 minutes: span_export_stalled alert with the last error"
[ $rc = 0 ] || q $DB "SELECT x, (SELECT string_agg(id || ':' || name || ':' || start_time, ', ') FROM mlplat.spans WHERE exported_at IS NULL) FROM mlplat.span_export_status x" | sed 's/^/# /'
admin DELETE faults >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'span_export_stalled'" 0 20
tap_ok $? "the collector answers again: the span is sent and the alert clears"

# --- endpoint unset again: new spans stay in the table, nothing more is sent
set_export ''
sleep 0.5
before=$(otlp_posts)
q $DB "SELECT mlplat.undeploy('tracing', 'traced')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'traced'" DELETED 20
tap_ok $? "undeploy converges to DELETED"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-tracing/inferenceservices/traced)" 404 \
	"... and the stand-in no longer has the InferenceService"
sleep 1
[ "$before" -gt 0 ] 2>/dev/null
tap_ok $? "the stand-in logged the export requests made so far ($before)"
tap_same "$(otlp_posts)" "$before" "after mlplat.otlp_endpoint is reset no further export request is sent"
tap_is "$(q $DB "SELECT count(*) > 0 FROM mlplat.spans WHERE name IN ('mlplat.undeploy', 'deployments.delete') AND exported_at IS NULL")" t \
	"the undeploy's spans are recorded and wait unexported"

tap_done
