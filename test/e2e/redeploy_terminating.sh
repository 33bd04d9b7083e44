#!/usr/bin/env bash
# Redeploying a name whose InferenceService is still terminating waits (issue 17 item 3),
# against the stand-in, whose KServe finalizer holds the InferenceService's deletion for as
# long as the test says (POST /_standin/isvc/hold). undeploy() makes the deployment DELETING
# and the reconciler DELETEs the InferenceService; a deploy() of the same name while it is
# held is taken (not refused): the deployment is DEPLOYING, its reason names the finalizer,
# nothing is applied into the terminating object, and once KServe lets go a new
# InferenceService (a new uid) is created and becomes READY.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-redeploy-terminating
e2e_standin mlplat
DB=mlplat
NS=mlp-rt
ISVC=/apis/serving.kserve.io/v1beta1/namespaces/$NS/inferenceservices/web

row() { q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = 'web'" | sed 's/^/# row: /'; }
deploy() { q $DB "SELECT status || '/' || revision FROM mlplat.deploy('rt', 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')"; }
field() { kube GET "$ISVC" | python3 -c 'import json,sys; o=json.load(sys.stdin); print(eval(sys.argv[1], {"o": o}))' "$1" 2>/dev/null; }
# writes other than GET to the InferenceService since request-log position $1
writes_since() {
	admin GET "requests?since=$1&kind=InferenceService&name=web" | python3 -c '
import json, sys
print(" ".join(e["method"] for e in json.load(sys.stdin)["items"] if e.get("method") not in ("GET", None)))'
}
ok_or_row() { tap_ok "$@"; [ "$1" = 0 ] || row; }   # tap_ok, and the row when it failed
seq_now() { admin GET requests | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }

q $DB "SELECT mlplat.create_project('rt', 8, '16', '32Gi'); SELECT mlplat.add_artifact_location('rt', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rt'" READY 30
tap_ok $? "project rt is READY"
sha=$(standin_artifact "s3://models/m/1" "m-v1")
q $DB "SELECT mlplat.register_model_version('rt', 'm', '1', 's3://models/m/1', '$sha', 'kserve-sklearnserver', 'sklearn');
       SELECT mlplat.set_model_stage('rt', 'm', '1', 'CANDIDATE')" >/dev/null
tap_is "$(deploy)" "DEPLOYING/1" "deploy() of web"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'web'" READY 30
ok_or_row $? "web is READY"
uid1=$(field "o['metadata']['uid']")

# KServe's finalizer holds the InferenceService once it is deleted
admin POST isvc/hold "{\"namespace\": \"$NS\", \"name\": \"web\"}" >/dev/null
tap_is "$(q $DB "SELECT status FROM mlplat.undeploy('rt', 'web')")" DELETING "undeploy() of web: DELETING"
wait_for $DB "SELECT status_reason LIKE 'waiting for finalizer inferenceservice.finalizers to release InferenceService $NS/web (terminating since %' FROM mlplat.deployments WHERE name = 'web'" t 30
ok_or_row $? "the InferenceService is terminating, held by KServe's finalizer, and the reason says so"

# the redeploy is taken, and waits
s0=$(seq_now)
got=$(deploy 2>&1)
tap_is "$got" "DEPLOYING/2" "deploy() of the same name while its InferenceService terminates is accepted: revision 2"
want="waiting for the terminating InferenceService $NS/web to go (finalizer inferenceservice.finalizers) before applying revision 2"
wait_for $DB "SELECT status || ': ' || status_reason FROM mlplat.deployments WHERE name = 'web'" "DEPLOYING: $want" 30
ok_or_row $? "DEPLOYING, its reason naming the finalizer that holds the old InferenceService"
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 3 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
tap_ok $? "three more passes of the deployments reconciler"
tap_is "$(writes_since "$s0")" "" "no apply into (and no DELETE of) the terminating InferenceService"
tap_is "$(field "(o['metadata']['uid'] == '$uid1', o['metadata']['labels']['mlplat.io/revision'], bool(o['metadata'].get('deletionTimestamp')))")" \
	"(True, '1', True)" "the old InferenceService is still there, terminating, at revision 1"
tap_is "$(q $DB "SELECT status FROM mlplat.deployments WHERE name = 'web'")" DEPLOYING "still DEPLOYING"

# KServe lets go: a new InferenceService, revision 2, READY
admin POST isvc/hold "{\"namespace\": \"$NS\", \"name\": \"web\", \"hold\": false}" >/dev/null
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'web'" READY/2 30
ok_or_row $? "READY at revision 2 once the old InferenceService is gone"
tap_is "$(field "(o['metadata']['uid'] != '$uid1', o['metadata']['labels']['mlplat.io/revision'], bool(o['metadata'].get('deletionTimestamp')))")" \
	"(True, '2', False)" "a new InferenceService (a new uid) at revision 2, not terminating"
tap_is "$(writes_since "$s0")" "PATCH" "one write since the redeploy: the apply that created it"
tap_is "$(q $DB "SELECT previous_revision IS NULL FROM mlplat.deployments WHERE name = 'web'")" t \
	"nothing to roll back to: revision 1 was undeployed"
tap_done
