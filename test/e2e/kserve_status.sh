#!/usr/bin/env bash
# Readiness as KServe reports it (issue 17 item 2), against the stand-in, whose KServe
# copies status.observedGeneration from its child as real KServe does (kserve#6081): an
# annotation KServe propagates moves the child on, the InferenceService's generation not.
# mlplat must neither wait for observedGeneration == metadata.generation (a redeploy would
# never be READY) nor take a status from before its apply as the new revision's (KServe
# frozen after an apply: the old revision's Ready=True must not make the new one READY).
# Both KServe modes: Serverless (Knative revisions, traffic) and RawDeployment (a
# Deployment's Available/Progressing; no revisions).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-kserve-status
e2e_standin mlplat
DB=mlplat

row() { q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = '$1'" | sed 's/^/# row: /'; }
isvc_path() { echo "/apis/serving.kserve.io/v1beta1/namespaces/mlp-ks/inferenceservices/$1"; }
# isvc_check NAME EXPR — a Python expression over the InferenceService o
isvc_check() {
	kube GET "$(isvc_path "$1")" | python3 -c '
import json, sys
o = json.load(sys.stdin)
ok = eval(sys.argv[1], {"o": o})
if ok is not True:
    print("# isvc: " + json.dumps({"generation": o["metadata"].get("generation"), "status": o.get("status")})[:600])
sys.exit(0 if ok is True else 1)' "$2"
}
wait_isvc() {
	local deadline=$((SECONDS + $3))
	until isvc_check "$1" "$2" >/dev/null; do
		((SECONDS >= deadline)) && { isvc_check "$1" "$2"; return 1; }
		sleep 0.2
	done
}
deploy() {
	q $DB "SELECT mlplat.deploy('ks', '$1', '$1', '$2', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
}
register() {
	local sha
	sha=$(standin_artifact "s3://models/$1/$2" "$1-v$2") &&
		q $DB "SELECT mlplat.register_model_version('ks', '$1', '$2', 's3://models/$1/$2', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
		q $DB "SELECT mlplat.set_model_stage('ks', '$1', '$2', 'CANDIDATE')" >/dev/null
}
state() { q $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = '$1'"; }
ANN='{"metadata":{"annotations":{"example.com/owner":"ops"}}}'

q $DB "SELECT mlplat.create_project('ks', 8, '16', '32Gi'); SELECT mlplat.add_artifact_location('ks', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'ks'" READY 30
tap_ok $? "project ks is READY"

# scenario MODE NAME ENDPOINT — deploy, move KServe's child on, redeploy with KServe frozen, thaw
scenario() {
	local mode=$1 n=$2 endpoint=$3 rc
	admin PUT config "{\"deploymentMode\":\"$mode\"}" >/dev/null
	register "$n" 1 && register "$n" 2 && deploy "$n" 1
	tap_ok $? "$mode: deploy() of $n accepted"
	wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = '$n'" READY 30
	rc=$?
	tap_ok $rc "$mode: $n is READY"
	[ $rc = 0 ] || row "$n"
	tap_same "$endpoint" "$(q $DB "SELECT endpoint FROM mlplat.deployments WHERE name = '$n'")" "$mode: READY carries KServe's URL for this mode"
	isvc_check "$n" "o['status']['deploymentMode'] == '$mode'"
	tap_ok $? "$mode: KServe reports status.deploymentMode $mode"

	# An operator's annotation: KServe propagates it into the child, whose generation moves on.
	admin POST edit "{\"resource\":\"inferenceservices\",\"namespace\":\"mlp-ks\",\"name\":\"$n\",\"patch\":$ANN}" >/dev/null
	wait_isvc "$n" "o['status']['observedGeneration'] > o['metadata']['generation'] and any(c['type'] == 'Ready' and c['status'] == 'True' for c in o['status']['conditions'])" 30
	tap_ok $? "$mode: KServe's observedGeneration (the child's) is now above the InferenceService's generation, and Ready"

	# KServe down: revision 2 is applied, the status still shows revision 1 Ready
	admin PUT config '{"kserveFrozen":true}' >/dev/null
	deploy "$n" 2
	wait_isvc "$n" "o['metadata']['labels']['mlplat.io/revision'] == '2' and o['status']['observedGeneration'] == o['metadata']['generation']" 30
	tap_ok $? "$mode: revision 2 applied while KServe is down; its stale status now has observedGeneration == generation"
	# the reconciler looks again every FOLLOW_UP_MS while DEPLOYING: wait for several of its passes
	wait_for $DB "SELECT count(*) >= 1 FROM mlplat.reconcile_ledger l JOIN mlplat.deployments d ON d.id = l.entity_id
	              WHERE l.kind = 'deployments' AND d.name = '$n' AND l.action = 'APPLY' AND l.outcome = 'OK'
	                AND l.desired_digest = (SELECT spec_digest FROM mlplat.deployment_revisions r WHERE r.deployment_id = d.id AND r.revision = 2)" t 30
	tap_ok $? "$mode: the ledger records the apply of revision 2"
	p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
	wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 5 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
	tap_ok $? "$mode: five more passes of the deployments leader"
	tap_is "$(state "$n")" "DEPLOYING/2" "$mode: a status from before the apply (Ready, even at an equal generation) does not make revision 2 READY"

	admin PUT config '{"kserveFrozen":false}' >/dev/null
	wait_for $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = '$n'" READY/2 30
	rc=$?
	tap_ok $rc "$mode: READY at revision 2 once KServe moved past what it showed at the apply, although observedGeneration is the child's"
	[ $rc = 0 ] || row "$n"
	isvc_check "$n" "o['status']['observedGeneration'] != o['metadata']['generation']"
	tap_ok $? "$mode: ... and KServe's observedGeneration still differs from the InferenceService's generation"
}

scenario Serverless sless "http://sless.mlp-ks.example.com"
isvc_check sless "o['status']['components']['predictor']['latestReadyRevision'] == o['status']['components']['predictor']['latestCreatedRevision'] == 'sless-predictor-00002'"
tap_ok $? "Serverless: KServe reports the new predictor revision created and ready"
scenario RawDeployment raw "http://raw-mlp-ks.example.com"
isvc_check raw "'latestCreatedRevision' not in o['status']['components']['predictor'] and 'traffic' not in o['status']['components']['predictor']"
tap_ok $? "RawDeployment: KServe reports no revisions and no traffic"
tap_is "$(q $DB "SELECT string_agg(name || '=' || coalesce(observed->>'deployment_mode', '-'), ' ' ORDER BY name) FROM mlplat.deployments WHERE name IN ('raw', 'sless')")" \
	"raw=RawDeployment sless=Serverless" "each deployment records the mode KServe reports"

# RawDeployment: no canary (KServe splits traffic only between Knative revisions), so
# start_rollout refuses rather than start a rollout that could never settle or roll back
register raw 3
POLICY='{"steps": [0.1, 0.5], "ceiling": 0.5, "window_seconds": 5, "min_samples": 50, "max_error_rate": 0.05, "max_p95_ms": 500, "max_p95_ratio": 2}'
err=$(q $DB "SELECT mlplat.start_rollout('ks', 'raw', 'raw', '3', '$POLICY')" 2>&1)
[[ "$err" == *"deployment \"raw\" is served in KServe's RawDeployment mode: a canary rollout needs Serverless mode"* ]]
tap_ok $? "RawDeployment: start_rollout is refused, saying why ($(echo "$err" | head -1 | cut -c1-60))"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'raw'")" 0 \
	"... and no rollout is recorded"

# RawDeployment: a model that does not load is FAILED with the Deployment's reason
admin POST kserve/storage '{"uri":"s3://models/raw/3"}' >/dev/null
deploy raw 3
wait_for $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'raw'" FAILED/3 30
rc=$?
tap_ok $rc "RawDeployment: a revision whose model does not load is FAILED"
[ $rc = 0 ] || row raw
case "$(q $DB "SELECT status_reason FROM mlplat.deployments WHERE name = 'raw'")" in
*"has timed out progressing"*) tap_ok 0 "RawDeployment: the reason is the Deployment's (ProgressDeadlineExceeded)" ;;
*) tap_ok 1 "RawDeployment: the reason is the Deployment's (ProgressDeadlineExceeded)"; row raw ;;
esac
tap_done
