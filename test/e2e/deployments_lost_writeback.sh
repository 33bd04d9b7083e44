#!/usr/bin/env bash
# Issue 22, deployments: the deployments leader is terminated between an
# InferenceService apply and its write-back, then the next intent comes.
#   A  undeploy while the apply is in flight (held at the stand-in before it is applied):
#      the new leader must not call the deployment DELETED while the apply may still
#      land; once it lands it is adopted (ledger ADOPT) and deleted;
#   B  undeploy while the apply's answer is in flight: the delete finds the object,
#      and the ledger records its creation (ADOPT) as well as the DELETE;
#   C  redeploy while the first revision's apply is in flight: it lands after the
#      second revision was applied, and the deployment still ends on revision 2;
#   D  no next intent: the held create lands after the new leader LISTed but before it
#      looked again and applied, and KServe serves it at once: the new leader's apply
#      changes nothing, yet the deployment becomes READY (the 2-minute soak once saw it
#      wait in DEPLOYING for a status change that could never come).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-dep-lwb
DB=mlplat
e2e_standin $DB
on_exit 'release_holds drop; workers_resume $DB; q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '15s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null

q $DB "SELECT mlplat.create_project('dlwb', 0); SELECT mlplat.add_artifact_location('dlwb', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'dlwb'" READY 30
tap_ok $? "project dlwb is READY"
for v in 1 2; do
	SHA=$(standin_artifact s3://models/dl/$v "dl-v$v")
	q $DB "SELECT mlplat.register_model_version('dlwb', 'm', '$v', 's3://models/dl/$v', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('dlwb', 'm', '$v', 'CANDIDATE')" >/dev/null
done
ISVC=/apis/serving.kserve.io/v1beta1/namespaces/mlp-dlwb/inferenceservices
isvc_rev() {   # the revision label of the InferenceService at the stand-in, or "absent"
	kube GET "$ISVC/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else o["metadata"]["labels"].get("mlplat.io/revision"))'
}
ledger() { q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY l.id), '') FROM mlplat.reconcile_ledger l
                  WHERE l.kind = 'deployments' AND l.action <> 'VERIFY' AND l.entity_id = (SELECT id FROM mlplat.deployments WHERE name = '$1')"; }
state() { q $DB "SELECT status || '/' || coalesce(observed_revision::text, '-') FROM mlplat.deployments WHERE name = '$1'"; }

interrupt() {   # NAME PHASE NEXT-INTENT-SQL
	local name=$1 phase=$2 epoch
	hold_rule '{"method":"PATCH","path":"/inferenceservices/'"$name"'$","hold":"'"$phase"'","times":1}' >/dev/null
	q $DB "SELECT mlplat.deploy('dlwb', '$name', 'm', '1', 'kserve-sklearnserver')" >/dev/null
	wait_held 1 30
	tap_ok $? "$name: the leader's apply is held at the stand-in ($phase it is applied)"
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
	workers_pause $DB
	leader_kill $DB deployments
	q $DB "$3" >/dev/null
	tap_ok $? "$name: the next intent commits while no leader has written the apply back"
	workers_resume $DB
	wait_new_leader $DB deployments "$epoch"
	tap_ok $? "$name: a new deployments leader took over"
}

# --- A: undeploy while the apply is in flight
interrupt da before "SELECT mlplat.undeploy('dlwb', 'da')"
passes_after $DB deployments 3
tap_ok $? "A: three passes of the deployments leader"
tap_is "$(state da | cut -d/ -f1)/$(isvc_rev da)" "DELETING/absent" \
	"A: not DELETED while an unanswered apply may still make the InferenceService"
release_holds
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'da'" DELETED 60
tap_ok $? "A: once the apply lands, the deployment is deleted"
tap_is "$(isvc_rev da)" absent "A: no InferenceService left at the stand-in"
l=$(ledger da); [[ "$l" =~ ^(DELETE:OK )*ADOPT:OK( DELETE:OK)+$ ]]   # one adoption, then its delete; a delete answered 404 may come first, a second delete after (follow-up passes)
tap_ok $? "A: the ledger records what the unanswered apply made, then its delete ($l)"

# --- B: undeploy while the apply's answer is in flight
interrupt db after "SELECT mlplat.undeploy('dlwb', 'db')"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'db'" DELETED 60
tap_ok $? "B: the deployment is deleted"
tap_is "$(isvc_rev db)" absent "B: no InferenceService left at the stand-in"
l=$(ledger db); [[ "$l" =~ ^(DELETE:OK )*ADOPT:OK( DELETE:OK)+$ ]]   # one adoption, then its delete; a delete answered 404 may come first, a second delete after (follow-up passes)
tap_ok $? "B: the ledger records the creation (ADOPT) as well as the DELETE ($l)"
release_holds

# --- C: redeploy while the first revision's apply is in flight
interrupt dc before "SELECT mlplat.deploy('dlwb', 'dc', 'm', '2', 'kserve-sklearnserver')"
wait_for $DB "SELECT status || '/' || observed_revision FROM mlplat.deployments WHERE name = 'dc'" READY/2 40
tap_ok $? "C: the redeploy's revision 2 is applied and READY"
release_holds
sleep 3   # the late revision-1 apply lands; the row's next resync sees it
wait_for $DB "SELECT status || '/' || observed_revision FROM mlplat.deployments WHERE name = 'dc'" READY/2 40
tap_ok $? "C: after the late revision-1 apply landed, the deployment is READY on revision 2 again"
# the row's own resync (within 1.5 resync intervals of its last) finds revision 1 and applies 2
for _ in $(seq 1 200); do [ "$(isvc_rev dc)" = 2 ] && break; sleep 0.2; done
tap_is "$(isvc_rev dc)" 2 "C: ... and so is the InferenceService at the stand-in"
wait_for $DB "SELECT status || '/' || observed_revision FROM mlplat.deployments WHERE name = 'dc'" READY/2 40
tap_ok $? "C: ... and the deployment READY on revision 2 once more"
# revision 1's note stays, overtaken by revision 2's answered apply, until the grace: the
# object seen may be revision 2's, so a sight does not prove revision 1's apply landed
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'deployments' AND NOT overtaken")" 0 \
	"no note left behind but an overtaken one"

# --- D: the unanswered create lands between the new leader's LIST and its apply
hold_rule '{"method":"PATCH","path":"/inferenceservices/dd$","hold":"before","times":1}' >/dev/null
q $DB "SELECT mlplat.deploy('dlwb', 'dd', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_held 1 30
tap_ok $? "D: the leader's create is held at the stand-in (before it is applied)"
list_rule=$(hold_rule '{"method":"GET","path":"/v1beta1/inferenceservices$","hold":"after","times":1}')
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
workers_pause $DB
leader_kill $DB deployments
workers_resume $DB
wait_new_leader $DB deployments "$epoch"
tap_ok $? "D: a new deployments leader took over"
wait_held 2 30
tap_ok $? "D: its first LIST is answered (no dd in it) and parked"
admin POST holds/release '{"rule": '"$(admin GET holds | python3 -c 'import json,sys
print([h["rule"] for h in json.load(sys.stdin)["items"] if h["method"] == "PATCH"][0])')"'}' >/dev/null
isvc_ready() { kube GET "$ISVC/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print(any(c.get("type") == "Ready" and c.get("status") == "True" for c in o.get("status", {}).get("conditions", [])))'; }
deadline=$((SECONDS + 30))
until [ "$(isvc_ready dd)" = True ] || ((SECONDS >= deadline)); do sleep 0.1; done
tap_is "$(isvc_ready dd)" True "D: the late create landed and KServe serves it before the new leader looked again"
admin POST holds/release '{"rule": '"$list_rule"'}' >/dev/null
wait_for $DB "SELECT status || '/' || observed_revision FROM mlplat.deployments WHERE name = 'dd'" READY/1 40
tap_ok $? "D: the deployment is READY although the new leader's apply changed nothing ($(state dd))"

q $DB "SELECT mlplat.undeploy('dlwb', 'dc'); SELECT mlplat.undeploy('dlwb', 'dd')" >/dev/null
# (this project's only: scripts before this one may leave deployments of their own)
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
              WHERE p.name = 'dlwb' AND d.status <> 'DELETED'" 0 40
tap_ok $? "dc and dd are undeployed (DELETED)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'deployments'
                 AND entity_id IN (SELECT id FROM mlplat.deployments WHERE name IN ('dc', 'dd'))")" 0 "no note left behind"
q $DB "SELECT mlplat.delete_project('dlwb')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'dlwb'" DELETED 40
tap_ok $? "project dlwb is deleted"
tap_done
