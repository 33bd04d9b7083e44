#!/usr/bin/env bash
# The typed seam (src/reconcile/seam.c): the deployments reconciler reads its claim and
# builds its write-back by attribute name, and refuses to run — saying which attribute —
# when the SQL types and the library's tables disagree, instead of misreading a row.
# An attribute renamed, retyped or added makes it refuse (no request reaches the cluster);
# put back, it converges.  A dropped attribute of the write-back type is no mismatch.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-seam
DB=mlplat
restore() {
	q $DB "ALTER TYPE mlplat.deployment_claim RENAME ATTRIBUTE due_now TO due" 2>/dev/null
	q $DB "ALTER TYPE mlplat.deployment_claim ALTER ATTRIBUTE attempts TYPE int" 2>/dev/null
	q $DB "ALTER TYPE mlplat.deployment_writeback DROP ATTRIBUTE IF EXISTS extra" 2>/dev/null
	for t in rollout_writeback rollout_writeback_result rollout_artifact_claim rollout_artifact_verdict artifact_check_claim unanswered_note span_export_batch; do
		q $DB "ALTER TYPE mlplat.$t DROP ATTRIBUTE IF EXISTS extra" 2>/dev/null
	done
}
on_exit restore
e2e_standin $DB

health() { q $DB "SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role <> 'stopped' ORDER BY role = 'leader' DESC LIMIT 1"; }
isvc_code() { kube_code "/apis/serving.kserve.io/v1beta1/namespaces/mlp-seam/inferenceservices/$1"; }
# wait until a deployments replica's status (cut to the view's width) starts with $1, and
# the log's DETAIL since the last mark says $2 in full
wait_refusal() {
	wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND starts_with(status, '$1')" t 30 || return 1
	tail -n +"$lines_before" "$WORK/data.log" | grep -qF "DETAIL:  $2"
}
mark() { lines_before=$(wc -l <"$WORK/data.log"); }

q $DB "SELECT mlplat.create_project('seam', 0); SELECT mlplat.add_artifact_location('seam', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'seam'" READY 20
tap_ok $? "project seam is READY"
SHA=$(standin_artifact s3://models/seam/1 'seam-v1')
q $DB "SELECT mlplat.register_model_version('seam', 'm', '1', 's3://models/seam/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('seam', 'm', '1', 'CANDIDATE')" >/dev/null
q $DB "SELECT mlplat.deploy('seam', 'one', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'one'" READY 30
tap_ok $? "through the seam: a deployment converges to READY"
tap_is "$(q $DB "SELECT observed_revision || '/' || (observed_generation = generation) || '/' || (endpoint IS NOT NULL) || '/' || (observed ? 'drift_paths') FROM mlplat.deployments WHERE name = 'one'")" \
	"1/true/true/true" "... and its write-back set observed revision, generation, endpoint and observed"

# --- a claim attribute renamed: refuse, name it, send nothing
mark
first_mark=$lines_before
q $DB "ALTER TYPE mlplat.deployment_claim RENAME ATTRIBUTE due TO due_now"
wait_refusal 'refuses to run: type mlplat.deployment_claim does not match this library: the library expects an attribute "due"' \
	'type mlplat.deployment_claim does not match this library: the library expects an attribute "due" (boolean) that the type does not have.'
tap_ok $? "a renamed claim attribute: the reconciler refuses to run and names the attribute ($(health))"
q $DB "SELECT mlplat.deploy('seam', 'two', 'm', '1', 'kserve-sklearnserver')" >/dev/null
# passes of the other kinds go on; wait a few loops of this one (it looks every second)
sleep 3
tap_is "$(isvc_code two)" 404 "... and sends nothing: the new deployment's InferenceService is not made"
tap_is "$(q $DB "SELECT status <> 'READY' AND observed_generation <> generation FROM mlplat.deployments WHERE name = 'two'")" t \
	"... and observes nothing of it"
grep -q 'WARNING:  mlplat deployments reconciler [0-9]* refuses to run: its SQL and C disagree' <(tail -n +"$lines_before" "$WORK/data.log")
tap_ok $? "... and says so in the server log"

# --- a claim attribute of another type
q $DB "ALTER TYPE mlplat.deployment_claim RENAME ATTRIBUTE due_now TO due"
mark
q $DB "ALTER TYPE mlplat.deployment_claim ALTER ATTRIBUTE attempts TYPE bigint"
wait_refusal 'refuses to run: type mlplat.deployment_claim does not match this library: attribute "attempts"' \
	'type mlplat.deployment_claim does not match this library: attribute "attempts" is of type bigint in SQL, the library reads it as integer.'
tap_ok $? "a retyped claim attribute: refused, with both types named"
q $DB "ALTER TYPE mlplat.deployment_claim ALTER ATTRIBUTE attempts TYPE int"

# --- a write-back attribute the library does not know
mark
q $DB "ALTER TYPE mlplat.deployment_writeback ADD ATTRIBUTE extra text"
wait_refusal 'refuses to run: type mlplat.deployment_writeback does not match this library: the type has an' \
	'type mlplat.deployment_writeback does not match this library: the type has an attribute "extra" (text) that the library does not know.'
tap_ok $? "an added write-back attribute: refused"
tap_is "$(isvc_code two)" 404 "... still nothing sent"

# --- dropped again: a dropped attribute is skipped; the pending deployment converges
q $DB "ALTER TYPE mlplat.deployment_writeback DROP ATTRIBUTE extra"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'two'" READY 30
tap_ok $? "types and library agree again (a dropped attribute in between): the deployment converges"
tap_is "$(isvc_code two)" 200 "... and its InferenceService is made"
grep -q 'mlplat deployments reconciler [0-9]*: the seam types agree with the library again' <(tail -n +"$first_mark" "$WORK/data.log")
tap_ok $? "... and the log says the refusal is over"

# --- the rollouts write-back (and its answers), the rollout artifact gate's claim and
# verdicts, and the artifact check's claim are seams too: each checked by the kinds that
# use it (issue 19: they were read and written by position)
refuses() {   # KIND TYPE: every replica of KIND that is not stopped refuses, naming TYPE
	wait_for $DB "SELECT bool_and(starts_with(status, 'refuses to run: type mlplat.$2 does not match this library'))
	              FROM mlplat.reconciler_health WHERE kind = '$1' AND role <> 'stopped'" t 30
}
for t in rollout_writeback rollout_writeback_result rollout_artifact_claim rollout_artifact_verdict; do
	q $DB "ALTER TYPE mlplat.$t ADD ATTRIBUTE extra text" >/dev/null
	refuses rollouts $t
	tap_ok $? "mlplat.$t with an attribute the library does not know: the rollouts workers refuse to run"
	q $DB "ALTER TYPE mlplat.$t DROP ATTRIBUTE extra" >/dev/null
done
q $DB "ALTER TYPE mlplat.artifact_check_claim ADD ATTRIBUTE extra text" >/dev/null
refuses deployments artifact_check_claim && refuses rollouts artifact_check_claim
tap_ok $? "mlplat.artifact_check_claim likewise: the deployments and the rollouts workers refuse to run"
q $DB "ALTER TYPE mlplat.artifact_check_claim DROP ATTRIBUTE extra" >/dev/null
# the write-ahead notes every kind reads (mlplat.unanswered_note)
q $DB "ALTER TYPE mlplat.unanswered_note ADD ATTRIBUTE extra text" >/dev/null
refuses deployments unanswered_note && refuses runs unanswered_note
tap_ok $? "mlplat.unanswered_note likewise: the workers of every kind that reads notes refuse to run"
q $DB "ALTER TYPE mlplat.unanswered_note DROP ATTRIBUTE extra" >/dev/null
# the span exporter's batch (mlplat.span_export_batch)
q $DB "ALTER TYPE mlplat.span_export_batch ADD ATTRIBUTE extra text" >/dev/null
refuses span_export span_export_batch
tap_ok $? "mlplat.span_export_batch likewise: the span_export workers refuse to run"
q $DB "ALTER TYPE mlplat.span_export_batch DROP ATTRIBUTE extra" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE status LIKE 'refuses%'" 0 30
tap_ok $? "... and run again once the types agree"

q $DB "SELECT mlplat.undeploy('seam', d) FROM unnest(ARRAY['one', 'two']) d" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
              WHERE p.name = 'seam' AND d.status <> 'DELETED'" 0 30
tap_ok $? "both deployments are undeployed (DELETED) through the seam"
tap_is "$(isvc_code one)/$(isvc_code two)" 404/404 "... and both InferenceServices are gone from the stand-in (GET is 404)"
q $DB "SELECT mlplat.delete_project('seam')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'seam'" DELETED 30
tap_ok $? "project seam deleted"
wait_kube_gone /api/v1/namespaces/mlp-seam 30
tap_ok $? "its namespace is gone from the stand-in (GET is 404)"
tap_done
