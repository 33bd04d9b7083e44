#!/usr/bin/env bash
# Canary rollouts on the real peers: the real kube-apiserver holds the
# InferenceService (KServe's real schema), the KServe imitation
# (test/real/controller.js) writes the traffic split into its status and
# serves per-revision metrics in the knative-opencensus preset's shape on its
# loopback port, where the real Prometheus scrapes them every second; the
# real workers decide from what Prometheus answers.
#   1. a healthy canary: 0 -> 10% -> 25% -> 50% = ceiling, promote -> PROMOTED,
#      100% on the target as KServe reports it on the real server
#   2. a silent canary: HOLD on too few samples, then abort -> ABORTED once the
#      route back to the previous revision is observed
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
. "$SRC/test/lib/prometheus.sh"
real_preamble rollouts mlplat
PD=$WORK/prometheus-real-rollouts
P=rcanary
NS=mlp-$P
on_exit 'prometheus_disconnect "$DB"; prometheus_stop "$PD"'
real_stack_up s3 controller
prometheus_start "$PD" "${REAL_CONTROLLER#http://}"
tap_ok $? "prometheus scrapes the KServe imitation's metrics at $REAL_CONTROLLER/metrics"
prometheus_connect $DB
for _ in $(seq 1 100); do prometheus_scraping && break; sleep 0.2; done
prometheus_scraping
tap_ok $? "prometheus reports the exporter up"

# script_rev KNATIVE_REVISION BEHAVIOUR — that revision serves its share (KServe's
# split as the imitation last wrote it) of 200 requests/s to the InferenceService
script_rev() {
	curl -sf -X POST "$REAL_CONTROLLER/metrics/revision" -H 'Content-Type: application/json' \
		-d "{\"revision\":\"$1\",\"namespace\":\"$NS\",\"behaviour\":\"$2\",\"rps\":200,\"service\":\"scorer\"}" >/dev/null
}
ro() { q $DB "SELECT $1 FROM (SELECT r.* FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'scorer' AND d.project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1) ORDER BY r.id DESC LIMIT 1) r"; }
ledger() {
	q $DB "SELECT $1 FROM mlplat.rollout_transitions t WHERE t.rollout_id = (SELECT max(id) FROM mlplat.rollouts) ${2:+AND $2}"
}
I=/apis/serving.kserve.io/v1beta1/namespaces/$NS/inferenceservices/scorer
traffic() {
	rk_body GET $I | python3 -c 'import json,sys; o=json.load(sys.stdin)
print(",".join("%s=%s" % (t["revisionName"], t["percent"]) for t in o["status"]["components"]["predictor"]["traffic"]))'
}
canary() { rk_body GET $I | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"].get("canaryTrafficPercent", "none"))'; }
script_target() {
	wait_for $DB "SELECT observed->>'target_kn' IS NOT NULL FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" t 60 || return 1
	script_rev "$(ro "observed->>'target_kn'")" "$1"
}
dump() {
	q $DB "SELECT r.status, r.status_reason, r.last_error, r.observed FROM mlplat.rollouts r ORDER BY id DESC LIMIT 1" | sed 's/^/# rollout: /'
	ledger "seq, decision, reasons, from_fraction, to_fraction, to_status" "true ORDER BY seq" | sed 's/^/# ledger: /'
	q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1)" | sed 's/^/# deployment: /'
	rk_body GET $I | python3 -c 'import json,sys; o=json.load(sys.stdin); print("# isvc: generation", o["metadata"].get("generation"), "status", json.dumps(o.get("status", {}))[:600])'
}

q $DB "SELECT mlplat.create_project('$P', 8, '16', '32Gi'); SELECT mlplat.add_artifact_location('$P', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 60
tap_ok $? "project $P is READY"
for v in 1 2 3; do
	sha=$(real_s3_put "s3://models/scorer/$v" "scorer-v$v") &&
		q $DB "SELECT mlplat.register_model_version('$P', 'scorer', '$v', 's3://models/scorer/$v', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
		q $DB "SELECT mlplat.set_model_stage('$P', 'scorer', '$v', 'CANDIDATE')" >/dev/null || echo "# version $v not registered"
done
q $DB "SELECT mlplat.set_model_stage('$P', 'scorer', '1', 'CHAMPION')" >/dev/null
q $DB "SELECT status FROM mlplat.deploy('$P', 'scorer', 'scorer', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1)" READY 90
rc=$?
tap_ok $rc "deployment scorer (model version 1, artifact verified on S3) is READY on the real API server"
[ $rc = 0 ] || dump
script_rev scorer-predictor-00001 healthy

POLICY='{"steps": [0.1, 0.25, 0.5], "ceiling": 0.5, "window_seconds": 5, "min_samples": 50, "max_error_rate": 0.05, "max_p95_ms": 500, "max_p95_ratio": 2}'

# ---------------------------------------------------------------- 1. healthy -> promoted
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '2', '$POLICY')" >/dev/null
tap_ok $? "start_rollout of version 2 accepted"
script_target healthy
tap_ok $? "the target's KServe revision is known: $(ro "observed->>'target_kn'")"
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" AT_CEILING 120
rc=$?
tap_ok $rc "a healthy canary advances to the ceiling on Prometheus' evidence: AT_CEILING"
[ $rc = 0 ] || dump
tap_is "$(ledger "string_agg(from_fraction || '->' || to_fraction, ' ' ORDER BY seq)" "decision = 'ADVANCE'")" \
	"0->0.1 0.1->0.25 0.25->0.5" "the ledger shows each step once, in order"
tap_is "$(ledger "count(*)" "decision = 'ADVANCE' AND from_fraction > 0 AND (evidence->'target'->>'requests')::int >= 50")" 2 \
	"advances past 0% rest on enough samples counted by Prometheus"
# the imitation serves each revision its share of the split it wrote into status on the real server
tap_is "$(ledger "count(*) FILTER (WHERE abs((evidence->'target'->>'requests')::numeric / nullif((evidence->'target'->>'requests')::numeric + (evidence->'previous'->>'requests')::numeric, 0) - from_fraction) <= 0.06) || '/' || count(*)" "from_fraction > 0")" \
	"3/3" "the requests Prometheus counted per revision follow the split KServe reported (10%, 25%, 50%, within 6 points)"
tap_is "$(canary)" 50 "the InferenceService on the real server carries canaryTrafficPercent 50"
tap_is "$(traffic)" "scorer-predictor-00002=50,scorer-predictor-00001=50" "KServe's status on the real server shows the 50/50 split"
q $DB "SELECT status FROM mlplat.promote_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" PROMOTED 60
rc=$?
tap_ok $rc "promote_rollout: PROMOTED"
[ $rc = 0 ] || dump
tap_is "$(canary)" none "promotion removed canaryTrafficPercent from the object on the real server"
tap_is "$(traffic)" "scorer-predictor-00002=100" "KServe reports 100% on the target"
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1)" READY/2 60
rc=$?
tap_ok $rc "the deployment is READY on revision 2"
[ $rc = 0 ] || dump

# ---------------------------------------------------------------- 2. silent -> aborted
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'scorer', 'scorer', '3', '$POLICY')" >/dev/null
tap_ok $? "start_rollout of version 3 accepted"
script_target silent
tap_ok $? "the target's KServe revision is known and serves nothing Prometheus can count (silent)"
target=$(ro "observed->>'target_kn'")
prev=$(ro "observed->>'previous_kn'")
wait_for $DB "SELECT count(*) >= 2 FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND decision = 'HOLD' AND 'INSUFFICIENT_SAMPLES' = ANY (reasons)" t 90
rc=$?
tap_ok $rc "silent metrics hold: HOLD with INSUFFICIENT_SAMPLES in the ledger"
[ $rc = 0 ] || dump
tap_is "$(ledger "count(*)" "decision IN ('ROLLBACK', 'ADVANCE') AND from_fraction > 0")" 0 "missing evidence never advances or rolls back"
q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 60
rc=$?
tap_ok $rc "abort_rollout: ABORTED once the route to the previous revision is observed"
[ $rc = 0 ] || dump
tap_is "$(ledger "count(*)" "to_status = 'ABORTED' AND decision = 'ROUTE_RESTORED'")" 1 "the abort is in the ledger"
tap_is "$(ledger "(SELECT string_agg(e->>'percent', ',') FROM jsonb_array_elements(evidence->'traffic') e WHERE e->>'revision' = '$prev')" "to_status = 'ABORTED'")" \
	100 "the route recorded with the abort has 100% on the previous revision ($prev)"
tap_is "$(traffic | tr ',' '\n' | grep "^$target=" | grep -v '=0$')" "" "KServe's status on the real server sends the aborted target ($target) nothing"
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1)" READY/2 60
tap_ok $? "the deployment is READY on revision 2 after the abort"

q $DB "SELECT mlplat.undeploy('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P' ORDER BY id DESC LIMIT 1)" DELETED 90
tap_ok $? "undeployed (KServe's finalizer released)"
q $DB "SELECT mlplat.delete_project('$P')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" DELETED 120
tap_ok $? "project $P is deleted"
tap_done
