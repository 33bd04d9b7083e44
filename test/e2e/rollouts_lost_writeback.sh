#!/usr/bin/env bash
# Issue 22, rollouts: the rollouts leader applies a rollout's first traffic setting
# (the stand-in applies it and holds the answer) and is terminated before its
# write-back; the rollout is aborted while that answer is still held.  The next leader
# finds the setting already on the InferenceService: the ledger must still show that
# write (ADOPT), before the abort's own apply restores the route to the previous revision.
# (No Prometheus here: decisions hold on missing samples, which is not what is tested.)
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-ro-lwb
DB=mlplat
P=rlwb
e2e_standin $DB
on_exit 'release_holds drop; workers_resume $DB'

q $DB "SELECT mlplat.create_project('$P', 8); SELECT mlplat.add_artifact_location('$P', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 30
tap_ok $? "project $P is READY"
for v in 1 2; do
	sha=$(standin_artifact "s3://models/rlwb/$v" "rlwb-v$v")
	q $DB "SELECT mlplat.register_model_version('$P', 'scorer', '$v', 's3://models/rlwb/$v', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('$P', 'scorer', '$v', 'CANDIDATE')" >/dev/null
done
q $DB "SELECT mlplat.deploy('$P', 'scorer', 'scorer', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'scorer' AND project_id = (SELECT id FROM mlplat.projects WHERE name = '$P')" READY 30
tap_ok $? "deployment scorer is READY on version 1"
RO="(SELECT r.id FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = '$P' ORDER BY r.id DESC LIMIT 1)"
ledger() { q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND entity = 'rollout' AND entity_id = $RO AND action IN ('APPLY', 'ADOPT')"; }

isvc() { kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-$P/inferenceservices/scorer; }
# "canary=<canaryTrafficPercent> traffic=<revision>=<percent>,..." at the stand-in
route() { isvc | python3 -c 'import json,sys; o=json.load(sys.stdin)
t=o.get("status", {}).get("components", {}).get("predictor", {}).get("traffic", [])
print("canary=%s traffic=%s" % (o["spec"]["predictor"].get("canaryTrafficPercent", "none"),
      ",".join("%s=%s" % (x.get("revisionName"), x["percent"]) for x in t)))'; }
PATCH='{"method":"PATCH","path":"/namespaces/mlp-rlwb/inferenceservices/scorer$","hold":"after","times":1}'

# The first apply (the target beside the baseline at 0%) is answered; the second (10%,
# once the target is ready) is applied and its answer held.
hold_rule "$PATCH" >/dev/null
q $DB "SELECT mlplat.start_rollout('$P', 'scorer', 'scorer', '2', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 5, \"min_samples\": 50, \"max_error_rate\": 0.05, \"max_p95_ms\": 500, \"max_p95_ratio\": 2}')" >/dev/null
wait_held 1 30
tap_ok $? "the rollouts leader's first apply (0%) is applied; its answer held, then let go"
hold_rule "$PATCH" >/dev/null
release_holds
wait_held 1 30
tap_ok $? "the leader's next apply is applied and its answer held at the stand-in"
before=$(route)
[[ "$before" == "canary=10 "* ]]
tap_ok $? "that apply put 10% on the target at the stand-in ($before)"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'rollouts'")
workers_pause $DB
leader_kill $DB rollouts
tap_is "$(q $DB "SELECT status FROM mlplat.abort_rollout('$P', 'scorer')")" ROLLING_BACK \
	"abort_rollout commits while the 10% apply's answer is held and no leader wrote it back"
workers_resume $DB
wait_new_leader $DB rollouts "$epoch"
tap_ok $? "a new rollouts leader took over"
wait_for $DB "SELECT status FROM mlplat.rollouts WHERE id = $RO" ABORTED 40
tap_ok $? "the rollout is ABORTED while the answer is still held"
l=$(ledger)
# (APPLY:RETRY: the old leader's request timed out on the held answer before it was terminated)
[[ "$l" =~ ^APPLY:OK\ (APPLY:RETRY\ )?ADOPT:OK\ APPLY:OK$ ]]
rc=$?
tap_ok $rc "the ledger: the answered 0% apply, the 10% apply found made (ADOPT), then the abort's apply ($l)"
[ $rc = 0 ] ||
	q $DB "SELECT '# ' || action || ':' || outcome || ' ' || coalesce(http_status::text, '') || ' ' || coalesce(detail::text, '')
	        FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND entity_id = $RO ORDER BY id"
tkn=$(q $DB "SELECT observed->>'target_kn' FROM mlplat.rollouts WHERE id = $RO")
pkn=$(q $DB "SELECT observed->>'previous_kn' FROM mlplat.rollouts WHERE id = $RO")
tap_is "$(q $DB "SELECT string_agg(e->>'revision' || '=' || (e->>'percent'), ',')
                   FROM mlplat.rollout_transitions t, jsonb_array_elements(t.evidence->'traffic') e
                  WHERE t.rollout_id = $RO AND t.decision = 'ROUTE_RESTORED'")" "$tkn=0,$pkn=100" \
	"the abort is recorded on the route observed at the stand-in: the canary back to 0, all traffic on the previous revision"
release_holds
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'rollouts'")" 0 "no note left behind"
tap_same "$l" "$(ledger)" "the late answer adds nothing to the ledger"
wait_for $DB "SELECT d.status || '/' || d.desired_revision FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
               WHERE p.name = '$P' AND d.name = 'scorer'" READY/1 30
tap_ok $? "the deployment is handed back READY on revision 1"
final=$(route)
[[ "$final" == "canary=none "* && "$final" == *"=100" && "$final" != *"$tkn="* ]]
tap_ok $? "the InferenceService serves the baseline alone, no canary ($final)"
tap_done
