#!/usr/bin/env bash
# Canary rollouts end to end: the stand-in plays KServe and serves per-revision
# metrics, a real Prometheus scrapes them every second, the real workers decide.
#   1. healthy canary: 0 -> 10% -> 25% -> 50% = ceiling (AT_CEILING), promote -> 100%, PROMOTED
#   2. regressing canary: ROLLBACK, and ROLLED_BACK only once 100% is observed on the previous revision
#   3. silent metrics: HOLD (reasons in the ledger), then abort -> ABORTED
#   4. the rollouts leader is terminated mid-rollout: the next leader resumes from the
#      ledger; every step is in the ledger once
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/prometheus.sh"
SD=$WORK/standin-rollouts
PD=$WORK/prometheus-rollouts
DB=mlplat
P=canary
NS=mlp-$P
e2e_standin $DB
on_exit 'prometheus_disconnect $DB; prometheus_stop $PD'
prometheus_start "$PD" "127.0.0.1:$STANDIN_PORT"
tap_ok $? "prometheus started at $PROM_URL"
prometheus_connect $DB

# script_rev KNATIVE_REVISION BEHAVIOUR — what the stand-in's /metrics says that revision
# serves: its share (KServe's observed split) of 200 requests/s to the InferenceService
script_rev() {
	admin POST metrics/revision "{\"revision\":\"$1\",\"namespace\":\"$NS\",\"behaviour\":\"$2\",\"rps\":200,\"service\":\"scorer\"}" >/dev/null
}
# ro SQL-EXPR — one value about the latest rollout of deployment scorer
ro() { q $DB "SELECT $1 FROM (SELECT r.* FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'scorer' ORDER BY r.id DESC LIMIT 1) r"; }
# ledger SQL-EXPR [WHERE] — over the latest rollout's transitions
ledger() {
	q $DB "SELECT $1 FROM mlplat.rollout_transitions t WHERE t.rollout_id = (SELECT max(id) FROM mlplat.rollouts) ${2:+AND $2}"
}
isvc() { kube GET /apis/serving.kserve.io/v1beta1/namespaces/$NS/inferenceservices/scorer; }
# traffic — "revision=percent,..." as KServe's status reports it
traffic() {
	isvc | python3 -c 'import json,sys; o=json.load(sys.stdin)
print(",".join("%s=%s" % (t["revisionName"], t["percent"]) for t in o["status"]["components"]["predictor"]["traffic"]))'
}
canary() { isvc | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"].get("canaryTrafficPercent", "none"))'; }
# wait until the latest rollout knows its target's KServe revision, then script it
script_target() {
	wait_for $DB "SELECT observed->>'target_kn' IS NOT NULL FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" t 20 || return 1
	script_rev "$(ro "observed->>'target_kn'")" "$1"
}
dump() {
	q $DB "SELECT r.status, r.status_reason, r.last_error, r.observed FROM mlplat.rollouts r ORDER BY id DESC LIMIT 1" | sed 's/^/# rollout: /'
	ledger "seq, decision, reasons, from_fraction, to_fraction, to_status" "true ORDER BY seq" | sed 's/^/# ledger: /'
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'rollouts'" | sed 's/^/# health: /'
}

for _ in $(seq 1 50); do prometheus_scraping && break; sleep 0.2; done
prometheus_scraping
tap_ok $? "prometheus scrapes the stand-in"

q $DB "SELECT mlplat.create_project('$P', 8, '16', '32Gi'); SELECT mlplat.add_artifact_location('$P', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 20
tap_ok $? "project $P is READY"
for v in 1 2 3 4 5; do
	sha=$(standin_artifact "s3://models/scorer/$v" "scorer-v$v")
	q $DB "SELECT mlplat.register_model_version('$P', 'scorer', '$v', 's3://models/scorer/$v', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('$P', 'scorer', '$v', 'CANDIDATE')" >/dev/null
done
q $DB "SELECT mlplat.set_model_stage('$P', 'scorer', '1', 'CHAMPION')" >/dev/null
q $DB "SELECT status FROM mlplat.deploy('$P', 'scorer', 'scorer', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'scorer'" READY 20
tap_ok $? "deployment scorer (model version 1) is READY"
script_rev scorer-predictor-00001 healthy

POLICY='{"steps": [0.1, 0.25, 0.5], "ceiling": 0.5, "window_seconds": 5, "min_samples": 50, "max_error_rate": 0.05, "max_p95_ms": 500, "max_p95_ratio": 2}'

# ---------------------------------------------------------------- 1. healthy
t0=$(date +%s)
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '2', '$POLICY')" >/dev/null
tap_ok $? "start_rollout of version 2 accepted"
script_target healthy
tap_ok $? "the target's KServe revision is known: $(ro "observed->>'target_kn'")"
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" AT_CEILING 60
rc=$?
tap_ok $rc "a healthy canary advances to the ceiling: AT_CEILING after $(($(date +%s) - t0)) s"
[ $rc = 0 ] || dump
tap_is "$(ledger "string_agg(from_fraction || '->' || to_fraction, ' ' ORDER BY seq)" "decision = 'ADVANCE'")" \
	"0->0.1 0.1->0.25 0.25->0.5" "the ledger shows each step once, in order"
tap_is "$(ledger "decision || ':' || array_to_string(reasons, ',') || ':' || to_status" "seq = (SELECT max(seq) FROM mlplat.rollout_transitions x WHERE x.rollout_id = t.rollout_id)")" \
	"HOLD:AT_CEILING:AT_CEILING" "at the ceiling the decision is HOLD with AT_CEILING, not completion"
tap_is "$(ledger "count(*)" "decision = 'ADVANCE' AND plan->>'evidence_content_id' = evidence_content_id AND evidence->>'contract_content_id' = contract_content_id AND plan = mlplat.plan_rollout(contract, evidence)")" 3 \
	"each ledger row's plan is what plan_rollout gives on its recorded contract and evidence (replayable)"
tap_is "$(ledger "count(*)" "decision = 'ADVANCE' AND from_fraction > 0 AND (evidence->'target'->>'requests')::int >= 50 AND (evidence->>'window_seconds')::int >= 5")" 2 \
	"advances past 0% rest on a complete window with enough samples from Prometheus"
# the stand-in sends each revision its share of the traffic: the target's request count follows the split
tap_is "$(ledger "count(*) FILTER (WHERE abs((evidence->'target'->>'requests')::numeric / nullif((evidence->'target'->>'requests')::numeric + (evidence->'previous'->>'requests')::numeric, 0) - from_fraction) <= 0.06) || '/' || count(*)" "from_fraction > 0")" \
	"3/3" "the requests Prometheus counted per revision follow the observed split (10%, 25%, 50%, within 6 points)"
tap_is "$(ledger "count(DISTINCT epoch || controller)" "controller <> ''")" 1 "ledger rows carry the leader's epoch and controller"
tap_is "$(canary)" 50 "the InferenceService carries canaryTrafficPercent 50"
tap_is "$(traffic)" "scorer-predictor-00002=50,scorer-predictor-00001=50" "KServe reports the 50/50 split"
# while KServe settles a split the controller watches the object from the version it
# read or applied, instead of reading it every 20 ms (four applies: 0%, 10%, 25%, 50%)
watches=$(admin GET "requests?kind=InferenceService&verb=watch&namespace=$NS" | python3 -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["items"] if "fieldSelector=metadata.name%3Dscorer&resourceVersion=" in e["path"]))')
[ "${watches:-0}" -ge 4 ]
tap_ok $? "the controller watched the InferenceService while KServe settled each split ($watches watches)"
sleep 2
tap_is "$(ro status)" AT_CEILING "AT_CEILING waits: no promotion without a request"
# spans SQL-EXPR WHERE — over the latest rollout's reconciler spans
spans() {
	q $DB "SELECT $1 FROM mlplat.trace_spans s LEFT JOIN mlplat.trace_spans a ON a.trace_id = s.trace_id AND a.span_id = s.parent_span_id
	        WHERE s.entity = 'rollout' AND s.entity_id = (SELECT max(id) FROM mlplat.rollouts) AND s.name LIKE 'rollouts.%' AND $2"
}
tap_is "$(spans "string_agg(s.attributes->>'mlplat.canary_traffic_percent', ',' ORDER BY s.start_time)" "s.name = 'rollouts.apply' AND s.status = 'UNSET'")" \
	"0,10,25,50" "spans: one rollouts.apply per traffic step"
# both sides in one statement (one snapshot): the controller keeps deciding at the ceiling,
# and a decision committed between two separate reads would look like a mismatch
decided=$(spans "string_agg(s.attributes->>'mlplat.rollout.decision', ',' ORDER BY s.start_time) || ' = ' ||
	(SELECT string_agg(decision, ',' ORDER BY seq) FROM mlplat.rollout_transitions t
	  WHERE t.rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision IN ('ADVANCE', 'HOLD', 'ROLLBACK'))" "s.name = 'rollouts.decide'")
[[ "$decided" =~ ^([A-Z,]+)\ =\ ([A-Z,]+)$ && "${BASH_REMATCH[1]}" == "${BASH_REMATCH[2]}" ]]
tap_ok $? "spans: one rollouts.decide per decision in the transition ledger ($decided)"
tap_is "$(spans "(count(*) FILTER (WHERE s.name = 'rollouts.metrics') >= 2) || '/' || (count(*) = count(*) FILTER (WHERE a.name = 'mlplat.start_rollout' AND a.kind = 'SERVER'))" "true")" \
	"true/true" "spans: the Prometheus queries of each window, all under the start_rollout call"

q $DB "SELECT status FROM mlplat.promote_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" PROMOTED 30
rc=$?
tap_ok $rc "promote_rollout: PROMOTED"
[ $rc = 0 ] || dump
tap_is "$(canary)" none "promotion removed canaryTrafficPercent"
tap_is "$(spans "count(*) FILTER (WHERE NOT s.attributes ? 'mlplat.canary_traffic_percent')" "s.name = 'rollouts.apply' AND s.status = 'UNSET'")" 1 \
	"spans: the promotion's apply carries no canary percent"
tap_is "$(traffic)" "scorer-predictor-00002=100" "KServe reports 100% on the target"
tap_is "$(ledger "decision || ':' || (evidence->>'revision')" "to_status = 'PROMOTED'")" "PROMOTED:scorer-predictor-00002" \
	"the ledger records the promotion on the observed route"
wait_for $DB "SELECT status || '/' || desired_revision || '/' || previous_revision FROM mlplat.deployments WHERE name = 'scorer'" READY/2/1 20
tap_ok $? "the deployment now serves revision 2, with revision 1 to roll back to"
tap_is "$(q $DB "SELECT string_agg(version || '=' || stage, ',' ORDER BY version) FROM mlplat.model_versions WHERE version IN ('1', '2') AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P')")" \
	"1=ARCHIVED,2=CHAMPION" "version 2 is the CHAMPION (the champion alias follows), version 1 archived"
tap_is "$(q $DB "SELECT v.version FROM mlplat.model_aliases a JOIN mlplat.model_versions v ON v.id = a.version_id WHERE a.alias = 'champion' AND a.model_id = v.model_id AND v.project_id = (SELECT id FROM mlplat.projects WHERE name = '$P')")" \
	2 "the champion alias points at version 2"

# ---------------------------------------------------------------- 2. regressing
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '3', '$POLICY')" >/dev/null
tap_ok $? "start_rollout of version 3 accepted"
script_target regressing
tap_ok $? "the target's KServe revision is known and its metrics are scripted (regressing)"
prev=$(ro "observed->>'previous_kn'")
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ROLLED_BACK 60
rc=$?
tap_ok $rc "a regressing canary is rolled back: ROLLED_BACK"
[ $rc = 0 ] || dump
tap_is "$(ledger "decision || ':' || array_to_string(reasons, ',')" "decision = 'ROLLBACK'")" \
	"ROLLBACK:ERROR_RATE_ABOVE_MAX,ERROR_RATE_INCREASE_ABOVE_MAX,P95_ABOVE_MAX,P95_INCREASE_ABOVE_MAX" \
	"the ledger shows one ROLLBACK on the demonstrated regression"
tap_is "$(ledger "decision || ':' || (evidence->>'revision')" "to_status = 'ROLLED_BACK'")" "ROUTE_RESTORED:$prev" \
	"ROLLED_BACK is recorded on the observed route to the previous revision"
tap_is "$(ledger "(SELECT string_agg((e->>'percent'), ',') FROM jsonb_array_elements(evidence->'traffic') e WHERE e->>'revision' = '$prev')" "to_status = 'ROLLED_BACK'")" \
	100 "the recorded route shows 100% on the previous revision"
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'scorer'" READY/2 20
tap_ok $? "the deployment is READY on revision 2 again"
tap_is "$(canary)" none "the deployments reconciler dropped the canary setting"
tap_is "$(q $DB "SELECT stage FROM mlplat.model_versions WHERE version = '3' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P')")" \
	CANDIDATE "a rolled-back version keeps its stage"

# ---------------------------------------------------------------- 3. silent
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '4', '$POLICY')" >/dev/null
script_target silent
tap_ok $? "the target's KServe revision is known and its metrics are scripted (silent)"
wait_for $DB "SELECT count(*) >= 3 FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision = 'HOLD' AND 'INSUFFICIENT_SAMPLES' = ANY (reasons)" t 40
rc=$?
tap_ok $rc "silent metrics hold: HOLD with INSUFFICIENT_SAMPLES in the ledger"
[ $rc = 0 ] || dump
tap_is "$(ro status)" HOLDING "the rollout is HOLDING"
tap_is "$(ledger "count(*)" "decision IN ('ROLLBACK', 'ADVANCE') AND from_fraction > 0")" 0 "missing evidence never advances or rolls back"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'repeated_holds' AND entity = 'scorer'")" 1 "alerts: repeated_holds"
q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 30
tap_ok $? "abort_rollout: ABORTED once the route to the previous revision is observed"
tap_is "$(ledger "count(*)" "to_status = 'ABORTED' AND decision = 'ROUTE_RESTORED'")" 1 "the abort is in the ledger"
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'scorer'" READY/2 20
tap_ok $? "the deployment is READY on revision 2 after the abort"

# ---------------------------------------------------------------- 4. leader killed mid-rollout
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '5', '$POLICY')" >/dev/null
script_target healthy
tap_ok $? "the target's KServe revision is known and its metrics are scripted (healthy)"
wait_for $DB "SELECT count(*) FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision = 'ADVANCE' AND to_fraction = 0.25" 1 40
tap_ok $? "the rollout advanced to 25%"
old_epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'rollouts'")
leader=$(q $DB "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'rollouts' AND role = 'leader'")
q $DB "SELECT pg_terminate_backend($leader)" >/dev/null
wait_for $DB "SELECT epoch > $old_epoch FROM mlplat.leader_epochs WHERE kind = 'rollouts'" t 20
tap_ok $? "the rollouts leader (pid $leader) was terminated mid-window and another replica leads"
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" AT_CEILING 60
rc=$?
tap_ok $rc "the new leader resumes the rollout to AT_CEILING"
[ $rc = 0 ] || dump
tap_is "$(ledger "string_agg(to_fraction::text, ' ' ORDER BY seq)" "decision = 'ADVANCE'")" "0.1 0.25 0.5" \
	"no step was taken twice across the takeover"
tap_ok "$([ "$(ledger "count(DISTINCT epoch)")" -ge 2 ] && echo 0 || echo 1)" "the ledger shows both leaders' epochs"
tap_is "$(ledger "count(*) - count(DISTINCT evidence_content_id)")" 0 "every ledger row is keyed by distinct evidence"
q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 30
tap_ok $? "aborted from the ceiling"

# ---------------------------------------------------------------- 5. the deployment's own metrics preset
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'scorer'" READY 20
tap_ok $? "scorer is READY"
q $DB "SELECT mlplat.set_metrics_preset('$P', 'scorer', 'knative-otel')" >/dev/null
tap_is "$(q $DB "SELECT metrics_preset FROM mlplat.deployments WHERE name = 'scorer'")" knative-otel \
	"set_metrics_preset: the deployment reads Knative >= 1.19's metric names"
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '5', '$POLICY')" >/dev/null
script_target healthy
wait_for $DB "SELECT count(*) >= 2 FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision = 'HOLD' AND 'INSUFFICIENT_SAMPLES' = ANY (reasons)" t 40
rc=$?
tap_ok $rc "healthy traffic, but the stand-in serves Knative <= 1.18's names: the deployment's preset finds no samples and holds"
[ $rc = 0 ] || dump
tap_is "$(ledger "count(*)" "decision = 'ADVANCE' AND from_fraction > 0")" 0 "... and never advances on missing evidence"
q $DB "SELECT mlplat.set_metrics_preset('$P', 'scorer', NULL)" >/dev/null
wait_for $DB "SELECT count(*) >= 1 FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision = 'ADVANCE' AND from_fraction > 0" t 60
rc=$?
tap_ok $rc "the preset cleared, the setting's (knative-opencensus) reads the series and the rollout advances"
[ $rc = 0 ] || dump
q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 30
tap_ok $? "aborted"
err=$(q $DB "SELECT mlplat.set_metrics_preset('$P', 'scorer', 'prometheus')" 2>&1)
[[ "$err" == *"invalid preset"* || "$err" == *"preset"* ]]
tap_ok $? "an unknown preset is refused"

tap_done
