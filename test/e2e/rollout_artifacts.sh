#!/usr/bin/env bash
# A rollout's target artifact is verified before the rollout first applies it (the
# deployments reconciler's check, scenario 7, made by the rollouts reconciler too).
# Real workers against the stand-in and its S3; no Prometheus: the failing rollout
# ends before any step, and the good one's first step (0%) needs readiness only.
#   1. the target's object was overwritten after registration -> rollout FAILED with
#      the URI and both digests; nothing written to the InferenceService; the previous
#      revision keeps 100%; the deployment stays READY
#   2. a good target: verified once, its first step applied, later steps not re-checked
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-rollout-artifacts
DB=mlplat
P=roart
NS=mlp-$P
e2e_standin $DB

# names are this script's own: the e2e scripts share one database
dep() { q $DB "SELECT $1 FROM mlplat.deployments d WHERE d.project_id = (SELECT id FROM mlplat.projects WHERE name = '$P') AND d.name = 'ranker'"; }
ro() { q $DB "SELECT $1 FROM mlplat.rollouts r WHERE r.deployment_id = $(dep id) ORDER BY r.id DESC LIMIT 1"; }
ro_sql() { echo "SELECT $1 FROM mlplat.rollouts r WHERE r.deployment_id = $(dep id) ORDER BY r.id DESC LIMIT 1"; }
isvc() { kube GET /apis/serving.kserve.io/v1beta1/namespaces/$NS/inferenceservices/ranker; }
traffic() {
	isvc | python3 -c 'import json,sys; o=json.load(sys.stdin)
print(",".join("%s=%s" % (t["revisionName"], t["percent"]) for t in o["status"]["components"]["predictor"]["traffic"]))'
}
isvc_field() { isvc | python3 -c 'import json,sys; o=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
isvc_writes() { writes_count "kind=InferenceService&name=ranker"; }
ledger() {  # SQL-EXPR WHERE — the reconcile ledger rows of the latest rollout
	q $DB "SELECT $1 FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND entity = 'rollout' AND entity_id = $(ro id) AND $2"
}
dump() {
	q $DB "SELECT id, status, status_reason, last_error, artifact_verified_at FROM mlplat.rollouts ORDER BY id" | sed 's/^/# rollout: /'
	q $DB "SELECT entity_id, action, outcome, detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' ORDER BY id" | sed 's/^/# ledger: /'
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'rollouts'" | sed 's/^/# health: /'
}

q $DB "SELECT mlplat.create_project('$P', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('$P', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 20
tap_ok $? "project $P is READY"
for v in 1 2 3; do
	sha=$(standin_artifact "s3://models/ranker/$v" "ranker-v$v")
	q $DB "SELECT mlplat.register_model_version('$P', 'ranker', '$v', 's3://models/ranker/$v', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('$P', 'ranker', '$v', 'CANDIDATE')" >/dev/null
done
q $DB "SELECT status FROM mlplat.deploy('$P', 'ranker', 'ranker', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'ranker' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P')" READY 20
tap_ok $? "deployment ranker (model version 1) is READY"

# ---------------------------------------------------------------- 1. overwritten target
WANT3=$(printf 'ranker-v3' | sha256sum | cut -d' ' -f1)
GOT3=$(standin_artifact "s3://models/ranker/3" "ranker-v3, replaced behind the registry's back")
before=$(isvc_writes)
traffic_before=$(traffic)
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'ranker', 'ranker', '3', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 5}')" >/dev/null
tap_ok $? "start_rollout of version 3 accepted"
wait_for $DB "$(ro_sql status)" FAILED 20
rc=$?; tap_ok $rc "a target whose artifact differs from its registered digest: the rollout is FAILED"; [ $rc = 0 ] || dump
tap_is "$(ro status_reason)/$(ro last_error)" \
	"artifact s3://models/ranker/3 could not be verified against its registered sha256 (missing, unreadable, too large to hash or different); an administrator finds the reason in mlplat.admin_ledger/artifact s3://models/ranker/3 could not be verified against its registered sha256 (missing, unreadable, too large to hash or different); an administrator finds the reason in mlplat.admin_ledger" \
	"status_reason and last_error (read by the tenant) say not verified, never the digest the store holds"
tap_is "$(ledger "outcome || ' ' || desired_digest || ' ' || observed_digest || ' ' || (detail->>'note') || ' | ' || error" "action = 'VERIFY'")" \
	"FAILED $WANT3 $GOT3 s3://models/ranker/3 | artifact s3://models/ranker/3 digest mismatch: registered sha256 $WANT3, object store has $GOT3 (download)" \
	"one VERIFY ledger row (administrators) with both digests, the URI and the detail"
tap_is "$(ledger "count(*)" "action = 'APPLY'")" 0 "the rollout applied nothing"
sleep 1.5
# (the counts compared are the stand-in's: the deploy's own writes show the filter matches)
[ "$before" -gt 0 ] 2>/dev/null
tap_ok $? "the stand-in's log shows the deploy's writes to the InferenceService ($before)"
tap_same "$(isvc_writes)" "$before" "the stand-in logged no write to the InferenceService after start_rollout"
tap_same "$(traffic)" "$traffic_before" "the previous revision keeps its traffic ($traffic_before)"
tap_is "$(isvc_field 'o["spec"]["predictor"].get("canaryTrafficPercent", "none")')" none "no canary setting"
tap_is "$(dep "status || '/' || desired_revision")" READY/1 \
	"the deployment is still READY on revision 1"
tap_is "$(q $DB "SELECT in_flight FROM mlplat.rollout_status WHERE rollout_id = $(ro id)")" f "FAILED is not in flight"
tap_is "$(q $DB "SELECT count(*) FROM mlplat._entities WHERE kind = 'rollouts' AND entity_id = $(ro id)")" 0 "a FAILED rollout is not pending for the reconciler"

# ---------------------------------------------------------------- 2. a good target
q $DB "SELECT status FROM mlplat.start_rollout('$P', 'ranker', 'ranker', '2', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 5}')" >/dev/null
tap_ok $? "start_rollout of version 2 accepted"
target=$(ro target_revision)
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND action = 'APPLY' AND entity_id = $(ro id)" t 20
rc=$?; tap_ok $rc "a verified target: the rollout applies its first step"; [ $rc = 0 ] || dump
tap_is "$(ledger "outcome || ' ' || desired_digest || ' ' || observed_digest || ' ' || (detail->>'note')" "action = 'VERIFY'")" \
	"OK $(printf 'ranker-v2' | sha256sum | cut -d' ' -f1) $(printf 'ranker-v2' | sha256sum | cut -d' ' -f1) s3://models/ranker/2" \
	"the VERIFY ledger row says OK with the digest"
tap_is "$(ledger "min(id) > (SELECT min(id) FROM mlplat.reconcile_ledger l WHERE l.kind = 'rollouts' AND l.action = 'VERIFY' AND l.entity_id = $(ro id))" "action = 'APPLY'")" t \
	"the check came before the first apply"
tap_is "$(ledger "detail->>'note'" "action = 'APPLY' ORDER BY id LIMIT 1")" "canaryTrafficPercent 0" \
	"the first apply put the target at 0%"
tap_same "$target" "$(isvc_field 'o["metadata"]["labels"]["mlplat.io/revision"]')" "the InferenceService carries the target revision"
wait_for $DB "SELECT count(*) FROM mlplat.rollout_transitions WHERE rollout_id = $(ro id) AND decision = 'ADVANCE'" 1 20
rc=$?; tap_ok $rc "the rollout advances (0 -> 10%)"; [ $rc = 0 ] || dump
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND action = 'APPLY' AND entity_id = $(ro id) AND outcome = 'OK'" 2 20
tap_ok $? "the second step is applied"
tap_is "$(ledger "count(*)" "action = 'VERIFY'")" 1 "a verified target is not checked again"
tap_is "$(ro "artifact_verified_at IS NOT NULL")" t "the rollout row records the verification"
q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'ranker')" >/dev/null
wait_for $DB "$(ro_sql status)" ABORTED 30
tap_ok $? "aborted (the verified target's rollback goes as usual)"

tap_done
