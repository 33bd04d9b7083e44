#!/usr/bin/env bash
# An answer settles only the note of the write it answers (the real-peer soak's lost
# intent, deployment s1x3/a).  Leader A's InferenceService apply is held at the stand-in
# before it is applied and A is terminated; leader B finds nothing under the name, applies
# it itself and is answered; the deployment is undeployed.  B's answer must not settle A's
# note: the deployment stays DELETING while A's apply may still land (the grace), and when
# it lands the object it makes is found, recorded (ADOPT) and deleted, not left as an orphan.
# On the old code B's note replaced A's (one note per kind/entity/object/action) and B's
# write-back removed it: DELETED at once, and the late apply left an orphan.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-unanswered-overtaken
DB=mlplat
e2e_standin $DB
on_exit 'release_holds drop; workers_resume $DB; q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '20s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null

q $DB "SELECT mlplat.create_project('uovt', 0); SELECT mlplat.add_artifact_location('uovt', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'uovt'" READY 30
tap_ok $? "project uovt is READY"
SHA=$(standin_artifact s3://models/uo/1 "uo-v1")
q $DB "SELECT mlplat.register_model_version('uovt', 'm', '1', 's3://models/uo/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('uovt', 'm', '1', 'CANDIDATE')" >/dev/null
ISVC=/apis/serving.kserve.io/v1beta1/namespaces/mlp-uovt/inferenceservices
isvc_state() {   # present/absent at the stand-in
	kube GET "$ISVC/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else "present")'
}
ledger_after() { q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY l.id), '') FROM mlplat.reconcile_ledger l
                        WHERE l.kind = 'deployments' AND l.action <> 'VERIFY' AND l.id > $2
                          AND l.entity_id = (SELECT id FROM mlplat.deployments WHERE name = '$1')"; }
state() { q $DB "SELECT status FROM mlplat.deployments WHERE name = '$1'"; }

# leader A: its apply held before the stand-in applies it, then A terminated
hold_rule '{"method":"PATCH","path":"/inferenceservices/ua$","hold":"before","times":1}' >/dev/null
q $DB "SELECT mlplat.deploy('uovt', 'ua', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_held 1 30
tap_ok $? "leader A's apply is held at the stand-in (before it is applied)"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
workers_pause $DB
leader_kill $DB deployments
workers_resume $DB
wait_new_leader $DB deployments "$epoch"
tap_ok $? "leader B took over"

# leader B: nothing under the name yet, so it applies, and its apply is answered
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'ua'" READY 40
tap_ok $? "B's own apply is answered: the deployment is READY"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'deployments' AND object = 'mlp-uovt/ua'")" 1 \
	"B's answer removed its own note only: A's is left"

q $DB "SELECT mlplat.undeploy('uovt', 'ua')" >/dev/null
deadline=$((SECONDS + 30))
until [ "$(isvc_state ua)" = absent ] || ((SECONDS >= deadline)); do sleep 0.2; done
tap_is "$(isvc_state ua)" absent "the undeploy deleted B's InferenceService"
passes_after $DB deployments 3
tap_ok $? "three more passes of the deployments leader"
tap_is "$(state ua)" DELETING "not DELETED while A's unanswered apply may still land (the grace)"

# (the object A's apply makes lives only until the next pass, 300 ms on: the ledger, not a
# look at the stand-in, says that it landed and was found)
before=$(q $DB "SELECT coalesce(max(id), 0) FROM mlplat.reconcile_ledger")
release_holds
wait_held 0 10
tap_ok $? "A's held apply is let go, after the delete"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'ua'" DELETED 60
tap_ok $? "the deployment ends DELETED"
tap_is "$(isvc_state ua)" absent "no orphan: what A's apply made is deleted"
l=$(ledger_after ua "$before"); [[ "$l" =~ ^ADOPT:OK( DELETE:OK)+$ ]]
tap_ok $? "after the release the ledger records what A's apply made (ADOPT), then its delete ($l)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'deployments' AND object = 'mlp-uovt/ua'")" 0 \
	"no note left behind"

q $DB "SELECT mlplat.delete_project('uovt')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'uovt'" DELETED 40
tap_ok $? "project uovt is deleted"
tap_done
