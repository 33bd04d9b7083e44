#!/usr/bin/env bash
# Projects end to end on a real kube-apiserver (RBAC on), mlplat running with
# its own ServiceAccount's token: namespace, quota, limits, network policy and
# member bindings converge to READY; the server's own additions (the
# namespace's kubernetes.io/metadata.name label and finalizer, quota status,
# canonical quantities) are no drift; out-of-band changes are repaired; a
# verb taken from mlplat's ClusterRole shows as a clear reason and heals when
# given back; orphans go; a deleted project stays DELETING while its
# namespace is Terminating under the real namespace controller.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble projects mlplat
real_stack_up

rv() { kget "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])'; }

INSTANCE=$(q $DB "SELECT mlplat._instance_id()")
NS=/api/v1/namespaces/mlp-rvision
Q=$NS/resourcequotas/mlplat-quota
L=$NS/limitranges/mlplat-limits
N=/apis/networking.k8s.io/v1/namespaces/mlp-rvision/networkpolicies/mlplat-isolation
RB=/apis/rbac.authorization.k8s.io/v1/namespaces/mlp-rvision/rolebindings

# ---------------------------------------------------------------- converge
# 1024Mi: the server stores quantities canonically, so it comes back as "1Gi"
q $DB "SELECT mlplat.create_project('rvision', 4, '8', '1024Mi', owner => 'alice')" >/dev/null &&
	q $DB "SELECT mlplat.grant_role('rvision', 'bob', 'viewer')" >/dev/null
tap_ok $? "project rvision: owner alice, viewer bob, 4 GPUs, 8 CPUs, 1024Mi"
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rvision'" READY 60
rc=$?
tap_ok $rc "the project converges to READY on the real API server"
if [ $rc != 0 ]; then
	q $DB "SELECT status, status_reason, last_error FROM mlplat.projects WHERE name = 'rvision'" | sed 's/^/# row: /'
	q $DB "SELECT action, outcome, http_status, detail->>'note' FROM mlplat.reconcile_ledger WHERE project = 'rvision' ORDER BY id DESC LIMIT 8" | sed 's/^/# ledger: /'
fi
check "$(kget $NS)" "o['status']['phase'] == 'Active' and o['metadata']['labels']['mlplat.io/instance'] == '$INSTANCE'
 and o['metadata']['labels']['kubernetes.io/metadata.name'] == 'mlp-rvision' and o['spec']['finalizers'] == ['kubernetes']"
tap_ok $? "namespace mlp-rvision: Active, our labels, plus the server's own name label and finalizer"
check "$(kget $Q)" "o['spec']['hard'] == {'requests.nvidia.com/gpu': '4', 'requests.cpu': '8', 'requests.memory': '1Gi'}"
tap_ok $? "ResourceQuota stored canonicalised: 1024Mi came back as 1Gi"
until_check 30 $Q "o.get('status', {}).get('hard', {}).get('requests.cpu') == '8' and 'used' in o['status']"
tap_ok $? "the real resource quota controller fills in status.hard and status.used"
check "$(kget $L)" "o['spec']['limits'][0]['default'] == {'cpu': '2', 'memory': '4Gi'} and o['spec']['limits'][0]['defaultRequest'] == {'cpu': '250m', 'memory': '512Mi'}"
tap_ok $? "LimitRange accepted by the server's validation (request <= limit)"
check "$(kget $N)" "o['spec']['policyTypes'] == ['Ingress'] and len(o['spec']['ingress'][0]['from']) == 3"
tap_ok $? "NetworkPolicy accepted by the server's validation"
check "$(kget "$RB")" "sorted((i['metadata']['name'], i['roleRef']['name']) for i in o['items'] if i['roleRef']['kind'] == 'ClusterRole' and i['metadata']['name'] != 'mlplat-lab-inputs') == [('mlplat-owner-alice', 'mlplat-owner'), ('mlplat-viewer-bob', 'mlplat-viewer')]"
tap_ok $? "the member bindings exist: mlplat may bind the project ClusterRoles"
check "$(kget "$RB")" "[(i['roleRef']['name'], [(x['kind'], x['name'], x.get('namespace')) for x in i['subjects']]) for i in o['items'] if i['metadata']['name'] == 'mlplat-lab-inputs'] == [('mlplat-lab-inputs', [('ServiceAccount', 'mlplat', 'mlplat-system')])]"
tap_ok $? "the lab's input Secrets: mlplat binds ClusterRole mlplat-lab-inputs to itself here, and the server allows it"
check "$(kget "$RB")" "[(i['roleRef']['kind'], i['roleRef']['name']) for i in o['items'] if i['roleRef']['kind'] == 'Role'] == [('Role', 'mlplat-runner')]"
tap_ok $? "the runner's Role is bound too: real RBAC let mlplat grant what it holds"
# what the runner may do, as the real RBAC authorizer decides it (a SubjectAccessReview for the
# runner's token identity): what Argo's executor needs, and nothing else
sar() {   # VERB GROUP RESOURCE -> True | False
	rk_body POST /apis/authorization.k8s.io/v1/subjectaccessreviews "{\"apiVersion\": \"authorization.k8s.io/v1\", \"kind\": \"SubjectAccessReview\",
		\"spec\": {\"user\": \"system:serviceaccount:mlp-rvision:mlplat-runner\", \"groups\": [\"system:serviceaccounts\", \"system:serviceaccounts:mlp-rvision\", \"system:authenticated\"],
		\"resourceAttributes\": {\"namespace\": \"mlp-rvision\", \"verb\": \"$1\", \"group\": \"$2\", \"resource\": \"$3\"}}}" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("status", {}).get("allowed", False))'
}
tap_is "$(sar create argoproj.io workflowtaskresults) $(sar patch argoproj.io workflowtaskresults)" "True True" \
	"real RBAC: the runner ServiceAccount may create and patch workflowtaskresults (Argo's executor)"
tap_is "$(sar get '' secrets) $(sar list '' secrets) $(sar delete argoproj.io workflowtaskresults) $(sar create argoproj.io workflows)" \
	"False False False False" "... and may not read Secrets, delete task results or create Workflows"

# ---------------------------------------------------------------- steady state
a0=$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'rvision' AND action = 'APPLY'")
v0="$(rv $NS) $(rv $Q) $(rv $L) $(rv $N)"
rv0=$(q $DB "SELECT row_version FROM mlplat.projects WHERE name = 'rvision'")
sleep 6 # resync every 2 s
a1=$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'rvision' AND action = 'APPLY'")
v1="$(rv $NS) $(rv $Q) $(rv $L) $(rv $N)"
tap_is "$a1" "$a0" "steady state: no apply over 6 s of resyncs (the server's label, finalizer, quota status and 1Gi are no drift)"
tap_same "$rv0" "$(q $DB "SELECT row_version FROM mlplat.projects WHERE name = 'rvision'")" "steady state: the project row is not rewritten"
[ "$(echo "$v0" | cut -d' ' -f1,3,4)" = "$(echo "$v1" | cut -d' ' -f1,3,4)" ]
tap_ok $? "steady state: namespace, limits and policy keep their resourceVersion"

# ---------------------------------------------------------------- drift repair
rk PATCH $Q '{"spec":{"hard":{"requests.nvidia.com/gpu":"100"}}}' application/merge-patch+json >/dev/null
until_check 30 $Q "o['spec']['hard']['requests.nvidia.com/gpu'] == '4'"
tap_ok $? "an out-of-band GPU quota of 100 is repaired back to 4"
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rvision'" READY 30
tap_ok $? "READY after the repair"

# ---------------------------------------------------------------- role change
q $DB "SELECT mlplat.grant_role('rvision', 'bob', 'developer')" >/dev/null &&
	q $DB "SELECT mlplat.revoke_role('rvision', 'bob', 'viewer')" >/dev/null
until_check 30 "$RB" "sorted(i['metadata']['name'] for i in o['items'] if i['roleRef']['kind'] == 'ClusterRole' and i['metadata']['name'] != 'mlplat-lab-inputs') == ['mlplat-developer-bob', 'mlplat-owner-alice']"
tap_ok $? "bob's viewer binding is replaced by a developer binding"

# ---------------------------------------------------------------- a verb taken away
real_role_take networkpolicies patch
tap_is "$REAL_ROLE_CODE" 200 "patch on networkpolicies is taken from mlplat-controller"
q $DB "SELECT mlplat.create_project('rsecure', 2, owner => 'dana')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rsecure'" FAILED 60
tap_ok $? "project rsecure shows FAILED while its NetworkPolicy is forbidden"
reason=$(q $DB "SELECT status_reason FROM mlplat.projects WHERE name = 'rsecure'")
err=$(q $DB "SELECT last_error FROM mlplat.projects WHERE name = 'rsecure'")
[[ "$reason" == *"NetworkPolicy mlplat-isolation"*"forbidden"* ]]
tap_ok $? "status_reason names the object and the refusal ($reason)"
[[ "$err" == *'system:serviceaccount:mlplat-system:mlplat'*'cannot patch resource "networkpolicies"'* ]]
tap_ok $? "last_error carries the real server's message, naming mlplat's ServiceAccount"
check "$(kget /api/v1/namespaces/mlp-rsecure/resourcequotas/mlplat-quota)" "o['spec']['hard'] == {'requests.nvidia.com/gpu': '2'}" &&
	check "$(kget /apis/rbac.authorization.k8s.io/v1/namespaces/mlp-rsecure/rolebindings/mlplat-owner-dana)" "o['roleRef']['name'] == 'mlplat-owner'"
tap_ok $? "the permitted objects are applied meanwhile"
real_role_give_back
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rsecure'" READY 60
tap_ok $? "with the verb given back the project heals to READY"

# ---------------------------------------------------------------- delete
q $DB "SELECT mlplat.delete_project('rsecure')" >/dev/null
phase=""
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
	phase=$(kget /api/v1/namespaces/mlp-rsecure | python3 -c 'import json,sys; print(json.load(sys.stdin).get("status",{}).get("phase",""))')
	st=$(q $DB "SELECT status FROM mlplat.projects WHERE name = 'rsecure'")
	[ "$phase" = Terminating ] && break
	[ -z "$phase" ] && break
	sleep 0.05
done
tap_ok $([ "$st" = DELETING ] || [ "$st" = DELETED ]; echo $?) "delete_project: DELETING while the namespace is ${phase:-gone} ($st)"
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rsecure'" DELETED 120
tap_ok $? "the project ends DELETED"
check "$(kget /api/v1/namespaces/mlp-rsecure)" "o['kind'] == 'Status' and o['code'] == 404"
tap_ok $? "... and by then the real namespace controller has removed the namespace"
q $DB "SELECT mlplat.delete_project('rvision')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rvision'" DELETED 120
tap_ok $? "project rvision deleted too"

# ---------------------------------------------------------------- orphans
# What a late apply of a deleted project's namespace leaves behind (our labels and the deleted
# project's id) is torn down; a look-alike with our labels alone is reported and kept.
RSID=$(q $DB "SELECT id FROM mlplat.projects WHERE name = 'rsecure'")
ns_made() {   # NAME PROJECT-LABEL|'' PROJECT-ID|''
	local labels='' ann=''
	[ -n "$2" ] && labels=",\"labels\":{\"app.kubernetes.io/managed-by\":\"mlplat\",\"mlplat.io/project\":\"$2\",\"mlplat.io/instance\":\"$INSTANCE\"}"
	[ -n "$3" ] && ann=",\"annotations\":{\"mlplat.io/project-id\":\"$3\"}"
	rk POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"$labels$ann}}" >/dev/null
}
ns_made mlp-rsecure rsecure "$RSID"
ns_made mlp-rlookalike rlookalike ""
ns_made mlp-rhandmade "" ""
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'projects' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK' AND project = 'rsecure'" 1 60
tap_ok $? "a namespace with our labels naming the deleted project is torn down as an orphan"
until_check 120 /api/v1/namespaces/mlp-rsecure "o.get('kind') == 'Status' and o.get('code') == 404"
tap_ok $? "... and the namespace controller removes it"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'projects' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'CONFLICT' AND project = 'rlookalike'" t 60
tap_ok $? "a look-alike with our labels and no project id is reported as a conflict"
check "$(kget /api/v1/namespaces/mlp-rlookalike)" "o['status']['phase'] == 'Active'"
tap_ok $? "... and left alone"
check "$(kget /api/v1/namespaces/mlp-rhandmade)" "o['status']['phase'] == 'Active'"
tap_ok $? "a namespace without our labels is never touched"
tap_done
