#!/usr/bin/env bash
# Issue 22, rollouts: the rollouts leader applies a rollout's first traffic setting
# (the stand-in applies it and holds the answer) and is terminated before its
# write-back.  The next leader finds the setting already on the InferenceService and
# applies nothing: the ledger must still show that write (ADOPT), and the rollout go on.
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

hold_rule '{"method":"PATCH","path":"/namespaces/mlp-rlwb/inferenceservices/scorer$","hold":"after","times":1}' >/dev/null
q $DB "SELECT mlplat.start_rollout('$P', 'scorer', 'scorer', '2', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 5, \"min_samples\": 50, \"max_error_rate\": 0.05, \"max_p95_ms\": 500, \"max_p95_ratio\": 2}')" >/dev/null
wait_held 1 30
tap_ok $? "the rollouts leader's first apply is applied and its answer held at the stand-in"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'rollouts'")
workers_pause $DB
leader_kill $DB rollouts
workers_resume $DB
wait_new_leader $DB rollouts "$epoch"
tap_ok $? "a new rollouts leader took over"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'rollouts' AND entity_id = $RO AND action = 'ADOPT'" t 30
tap_ok $? "the new leader records the apply it found made (ADOPT)"
l=$(ledger); [[ "$l" =~ ^ADOPT:OK ]]
tap_ok $? "the ledger starts with that adoption, not with nothing ($l)"
release_holds
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'rollouts'")" 0 "no note left behind"
q $DB "SELECT mlplat.abort_rollout('$P', 'scorer')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts WHERE id = $RO" ABORTED 40
tap_ok $? "the rollout can still be aborted"
tap_done
