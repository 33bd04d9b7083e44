#!/usr/bin/env bash
# The real API server as the suite runs it: RBAC and token authentication on,
# the CRDs built from the real schemas validate and prune, built-in kinds are
# validated and quantities canonicalised, the namespace controller and the
# KServe imitation hold deletes behind their finalizers, and mlplat's
# ServiceAccount may do what deploy/kubernetes/ grants and nothing more.
# Last, the fault proxy (test/real/faultproxy.py) the soak puts in front of
# it: requests pass through with their credentials, and each of the stand-in's
# faults (429 + Retry-After, 5xx, a write applied then its answer dropped, a
# write held before it is applied, latency) does what it says.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble smoke
real_kube_start "$RD"
tap_ok $? "etcd, kube-apiserver and kube-controller-manager started on loopback; CRDs established"
real_identity "$RD" >/dev/null
tap_ok $? "deploy/kubernetes/ applied; a token minted for ServiceAccount mlplat-system/mlplat"
real_controller_start "$RD"
tap_ok $? "the KServe/Argo imitation watches the API server"

# code OUT — the status code (last line of rk/mk output); reason OUT — the Status reason
code() { tail -1 <<<"$1"; }
reason() { sed '$d' <<<"$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("reason",""))' 2>/dev/null; }
body() { sed '$d' <<<"$1"; }

out=$(curl -sS --cacert "$REAL_CA" -w '\n%{http_code}' "$REAL_KUBE_URL/api/v1/namespaces")
tap_is "$(code "$out")" 401 "no token: 401"
out=$(curl -sS --cacert "$REAL_CA" -H 'Authorization: Bearer not-a-token' -w '\n%{http_code}' "$REAL_KUBE_URL/api/v1/namespaces")
tap_is "$(code "$out")" 401 "an unknown token: 401"

rk POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"smoke"}}' >/dev/null

# ---------------------------------------------------------------- CRD validation and pruning
isvc() { # isvc NAME PREDICTOR-JSON
	printf '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"%s","namespace":"smoke"},"spec":{"predictor":%s}}' "$1" "$2"
}
out=$(rk POST /apis/serving.kserve.io/v1beta1/namespaces/smoke/inferenceservices \
	"$(isvc bad '{"canaryTrafficPercent":"half","model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://m/1"}}')")
tap_is "$(code "$out") $(reason "$out")" "422 Invalid" "an InferenceService with a string canaryTrafficPercent: 422 Invalid (the real schema)"
out=$(rk POST /apis/serving.kserve.io/v1beta1/namespaces/smoke/inferenceservices \
	"$(isvc pruned '{"model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://m/1","noSuchField":1}}')")
tap_is "$(code "$out")" 201 "an InferenceService with an unknown field is created"
body "$out" | python3 -c 'import json,sys; m=json.load(sys.stdin)["spec"]["predictor"]["model"]; sys.exit(0 if "noSuchField" not in m and m["storageUri"]=="s3://m/1" else 1)'
tap_ok $? "... and the unknown field is pruned, the known ones kept"
out=$(rk POST /apis/argoproj.io/v1alpha1/namespaces/smoke/workflows \
	'{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","metadata":{"name":"wf"},"spec":{"entrypoint":"main","templates":[{"name":"main","container":{"image":"busybox"}}],"parallelism":"many"}}')
tap_is "$(code "$out") $(reason "$out")" "422 Invalid" "a Workflow with a string parallelism: 422 Invalid (the real schema)"

# ---------------------------------------------------------------- built-in kinds
out=$(rk POST /api/v1/namespaces/smoke/resourcequotas '{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"requests.cpu":"1000m","requests.memory":"1024Mi"}}}')
tap_is "$(code "$out")" 201 "a ResourceQuota is created"
tap_is "$(body "$out" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["spec"]["hard"], sort_keys=True))')" \
	'{"requests.cpu": "1", "requests.memory": "1Gi"}' "quantities are canonicalised: 1000m -> 1, 1024Mi -> 1Gi"
out=$(rk POST /api/v1/namespaces/smoke/resourcequotas '{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q2"},"spec":{"hard":{"requests.cpu":"-1"}}}')
tap_is "$(code "$out") $(reason "$out")" "422 Invalid" "a negative quota: 422 Invalid"
out=$(rk POST /api/v1/namespaces/smoke/limitranges '{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"l"},"spec":{"limits":[{"type":"Container","default":{"cpu":"1"},"defaultRequest":{"cpu":"2"}}]}}')
tap_is "$(code "$out") $(reason "$out")" "422 Invalid" "a LimitRange whose default request exceeds its default limit: 422 Invalid"
out=$(rk POST /apis/networking.k8s.io/v1/namespaces/smoke/networkpolicies '{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"n"},"spec":{"podSelector":{},"policyTypes":["Inbound"]}}')
tap_is "$(code "$out") $(reason "$out")" "422 Invalid" "a NetworkPolicy with policyTypes [Inbound]: 422 Invalid"

# ---------------------------------------------------------------- mlplat's identity (RBAC)
rb() { printf '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"%s","namespace":"smoke"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"%s"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"bob"}]}' "$1" "$2"; }
out=$(mk PATCH "/apis/rbac.authorization.k8s.io/v1/namespaces/smoke/rolebindings/ok?fieldManager=mlplat&force=true" "$(rb ok mlplat-viewer)" application/apply-patch+yaml)
tap_is "$(code "$out")" 201 "mlplat's ServiceAccount binds a member to mlplat-viewer"
out=$(mk PATCH "/apis/rbac.authorization.k8s.io/v1/namespaces/smoke/rolebindings/admin?fieldManager=mlplat&force=true" "$(rb admin cluster-admin)" application/apply-patch+yaml)
tap_is "$(code "$out") $(reason "$out")" "403 Forbidden" "... but not to cluster-admin: no bind, no escalation"
body "$out" | grep -q 'attempting to grant RBAC permissions not currently held'
tap_ok $? "... and the refusal says why (permissions not held)"
# the lab's input Secrets: no Secret permission cluster-wide; ClusterRole mlplat-lab-inputs,
# bound by mlplat itself in a project namespace (as the projects reconciler does), grants
# read, create and delete there only, never a change in place
tap_is "$(code "$(mk GET /api/v1/secrets)")" 403 "mlplat's ServiceAccount may not list Secrets across the cluster"
tap_is "$(code "$(mk GET /api/v1/namespaces/smoke/secrets)")" 403 "... nor in a namespace where it has not bound mlplat-lab-inputs"
labrb='{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"mlplat-lab-inputs","namespace":"smoke"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"mlplat-lab-inputs"},"subjects":[{"kind":"ServiceAccount","name":"mlplat","namespace":"mlplat-system"}]}'
out=$(mk PATCH "/apis/rbac.authorization.k8s.io/v1/namespaces/smoke/rolebindings/mlplat-lab-inputs?fieldManager=mlplat&force=true" "$labrb" application/apply-patch+yaml)
tap_is "$(code "$out")" 201 "mlplat binds ClusterRole mlplat-lab-inputs to itself in a namespace (bind by name)"
wait_code() { # wait_code SECONDS WANT METHOD PATH [JSON] — RBAC caches: a new binding takes effect shortly
	local deadline=$((SECONDS + $1)) got
	while :; do
		got=$(code "$(mk "${@:3}")")
		[ "$got" = "$2" ] && { echo "$got"; return 0; }
		((SECONDS >= deadline)) && { echo "$got"; return 1; }
		sleep 0.2
	done
}
tap_is "$(wait_code 30 200 GET /api/v1/namespaces/smoke/secrets)" 200 "... then it lists the Secrets of that namespace"
tap_is "$(code "$(mk POST /api/v1/namespaces/smoke/secrets '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"lab-1-input"},"immutable":true,"data":{}}')")" 201 \
	"... creates a lab input Secret there"
tap_is "$(code "$(mk GET /api/v1/secrets)")" 403 "... and still lists none across the cluster"
out=$(mk PATCH "/api/v1/namespaces/smoke/secrets/anything?fieldManager=mlplat&force=true" '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"anything"}}' application/apply-patch+yaml)
tap_is "$(code "$out")" 403 "mlplat's ServiceAccount may not patch or update a Secret (only the lab's create, read and delete)"
tap_is "$(code "$(mk DELETE /api/v1/namespaces/smoke/secrets/lab-1-input)")" 200 "... and deletes it"
out=$(mk GET /apis/coordination.k8s.io/v1/namespaces/smoke/leases)
tap_is "$(code "$out")" 403 "... nor Leases outside mlplat-system"
out=$(mk POST /apis/coordination.k8s.io/v1/namespaces/mlplat-system/leases '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"smoke"},"spec":{"holderIdentity":"x","leaseDurationSeconds":10}}')
tap_is "$(code "$out")" 201 "... but creates its Leases in mlplat-system"

# ---------------------------------------------------------------- finalizers
wait_json() { # wait_json SECONDS PATH PYTHON-EXPR-ON-o-or-None
	local deadline=$((SECONDS + $1)) out
	while :; do
		out=$(rk GET "$2")
		python3 -c '
import json, sys
code = int(sys.argv[1].rsplit("\n", 1)[1])
o = json.loads(sys.argv[1].rsplit("\n", 1)[0]) if code == 200 else None
sys.exit(0 if eval(sys.argv[2]) else 1)' "$out" "$3" 2>/dev/null && return 0
		((SECONDS >= deadline)) && return 1
		sleep 0.2
	done
}
P=/apis/serving.kserve.io/v1beta1/namespaces/smoke/inferenceservices/pruned
wait_json 30 $P "o and 'inferenceservice.finalizers' in o['metadata'].get('finalizers', []) and o.get('status', {}).get('observedGeneration') == 1 and any(c['type'] == 'Ready' and c['status'] == 'True' for c in o['status'].get('conditions', []))"
tap_ok $? "the imitation adds KServe's finalizer and reports Ready for the child's generation 1"
curl -s -X POST "$REAL_CONTROLLER/hold?ns=smoke&name=pruned&on=1" >/dev/null
out=$(rk DELETE $P)
tap_is "$(code "$out")" 200 "DELETE of the InferenceService is accepted (200, not gone)"
sleep 1
wait_json 5 $P "o and o['metadata'].get('deletionTimestamp')"
tap_ok $? "while KServe's cleanup holds, the object lingers with a deletionTimestamp"
curl -s -X POST "$REAL_CONTROLLER/hold?ns=smoke&name=pruned&on=0" >/dev/null
wait_json 30 $P "o is None"
tap_ok $? "... and goes once the finalizer is removed"
out=$(rk DELETE /api/v1/namespaces/smoke)
wait_json 5 /api/v1/namespaces/smoke "o and o['status']['phase'] == 'Terminating'"
tap_ok $? "a deleted namespace is Terminating first"
wait_json 120 /api/v1/namespaces/smoke "o is None"
tap_ok $? "... and the namespace controller removes it with its content"

# ---------------------------------------------------------------- the fault proxy
real_proxy_start "$RD" 1
tap_ok $? "the fault proxy is up in front of the API server"
# pk METHOD PATH [JSON] — through the proxy, as admin; body, then the status code
pk() {
	curl -sS --max-time 30 --cacert "$REAL_CA" -H "Authorization: Bearer $REAL_ADMIN_TOKEN" -D "$RD/pk.headers" \
		-X "$1" "$REAL_PROXY_URL$2" ${3:+-H "Content-Type: application/json" --data-binary "$3"} -w '\n%{http_code}'
}
out=$(curl -sS --cacert "$REAL_CA" -w '\n%{http_code}' "$REAL_PROXY_URL/api/v1/namespaces")
tap_is "$(code "$out")" 401 "through the proxy, no token: the API server's 401 (credentials are the client's)"
tap_is "$(code "$(pk GET /api/v1/namespaces/default)")" 200 "through the proxy, the admin token: 200"
proxy_admin POST faults '{"method":"GET","path":"^/api/v1/namespaces/default$","status":429,"retryAfter":3,"times":1}' >/dev/null
out=$(pk GET /api/v1/namespaces/default)
tap_is "$(code "$out"),$(reason "$out"),$(tr -d '\r' <"$RD/pk.headers" | sed -n 's/^[Rr]etry-[Aa]fter: //p')" "429,TooManyRequests,3" \
	"a 429 rule: TooManyRequests with Retry-After: 3"
tap_is "$(code "$(pk GET /api/v1/namespaces/default)")" 200 "... once (times 1); the next request passes"
proxy_admin POST faults '{"method":"GET","path":"^/api/v1/namespaces/default$","status":503,"times":1}' >/dev/null
out=$(pk GET /api/v1/namespaces/default)
tap_is "$(code "$out"),$(reason "$out")" "503,ServiceUnavailable" "a 503 rule: a ServiceUnavailable Status"
CM=/api/v1/namespaces/default/configmaps
cm() { echo "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$1\"},\"data\":{\"k\":\"v\"}}"; }
proxy_admin POST faults '{"method":"POST","path":"/configmaps$","drop":1,"times":1}' >/dev/null
out=$(pk POST $CM "$(cm dropped)" 2>&1)
tap_is "$(code "$out")" 000 "a drop rule: the client sees the connection close without an answer"
tap_is "$(code "$(rk GET $CM/dropped)")" 200 "... and the write was applied at the API server"
tap_is "$(proxy_admin GET writes | python3 -c 'import json,sys; print(json.load(sys.stdin).get("configmaps/default/dropped"))')" \
	"{'create': 1}" "the proxy counts the create it forwarded"
proxy_admin POST faults '{"method":"POST","path":"/configmaps$","hold":"before","times":1}' >/dev/null
pk POST $CM "$(cm held)" >"$RD/held.out" 2>&1 &
held_pid=$!
_real_wait 30 bash -c "curl -s $REAL_PROXY_ADMIN/holds | grep -q '\"phase\": \"before\"'"
tap_ok $? "a hold-before rule parks the create"
tap_is "$(code "$(rk GET $CM/held)")" 404 "... which is not applied while it is held"
tap_is "$(proxy_admin POST holds/release '{}')" '{"released": 1}' "released"
wait $held_pid
tap_is "$(code "$(cat "$RD/held.out")")" 201 "... then it is applied and answered 201"
proxy_admin POST faults '{"method":"GET","path":"^/api/v1/namespaces/default$","latencyMs":1500,"times":1}' >/dev/null
t0=$(date +%s%N)
pk GET /api/v1/namespaces/default >/dev/null
tap_ok $(( ($(date +%s%N) - t0) / 1000000 >= 1450 ? 0 : 1 )) "a latency rule delays the answer by 1.5 s"
tap_is "$(proxy_admin GET requests | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("fault")))')" 2 \
	"the request log names the two injected error answers"
tap_done
