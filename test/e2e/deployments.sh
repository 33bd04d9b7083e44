#!/usr/bin/env bash
# Deployments end to end against the stand-in, with the real workers:
# deploy -> applied -> READY; defaulting is not drift; out-of-band edits are
# drift, repaired without a new revision; undeploy and orphans are torn down.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-deployments
e2e_standin mlplat

DB=mlplat
q $DB "SELECT mlplat.create_project('shop', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('shop', 's3://models/')" >/dev/null
# The projects reconciler makes the namespace (and the rest of the tenant).
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'shop'" READY 20
tap_ok $? "project shop is READY: its namespace exists"
# the artifact is checked in the object store before the first apply
SHA=$(standin_artifact s3://models/iris/1 'iris-v1')
q $DB "SELECT mlplat.register_model_version('shop', 'iris', '1', 's3://models/iris/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('shop', 'iris', '1', 'CANDIDATE')" >/dev/null
t0=$(date +%s%N)
q $DB "SELECT status FROM mlplat.deploy('shop', 'iris', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\"}')" >/dev/null
tap_ok $? "deploy() accepted"

wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'iris'" READY 20
rc=$?
tap_ok $rc "the deployment converges to READY"
if [ $rc != 0 ]; then
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'deployments'" | sed 's/^/# health: /'
	q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = 'iris'" | sed 's/^/# row: /'
fi
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# deploy -> READY in $ms ms (stand-in ready delay ${STANDIN_READY_MS:-300} ms)"
tap_is "$(q $DB "SELECT endpoint FROM mlplat.deployments WHERE name = 'iris'")" "http://iris.mlp-shop.example.com" "READY carries the endpoint URL"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'shop' AND action = 'APPLY' AND outcome = 'OK'")" 1 \
	"the ledger shows exactly one apply"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'shop' AND action = 'APPLY' AND epoch = (SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments') AND controller <> ''")" 1 \
	"the ledger row carries the leader's epoch and controller"
isvc=$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/iris)
echo "$isvc" | python3 -c 'import json,sys; o=json.load(sys.stdin); l=o["metadata"]["labels"]; assert l["app.kubernetes.io/managed-by"]=="mlplat" and l["mlplat.io/revision"]=="1"'
tap_ok $? "the InferenceService carries our labels and revision 1"
echo "$isvc" | python3 -c 'import json,sys; o=json.load(sys.stdin); assert o["spec"]["predictor"]["serviceAccountName"] == "mlplat-predictor", o["spec"]'
tap_ok $? "it runs as the project's predictor ServiceAccount, whose Secret lets KServe's storage initializer fetch the s3:// model (READY above)"

# --- defaulting is not drift: KServe dropped initialDelaySeconds 0 / empty env; no further applies
applies_before=$(writes_count)
sleep 5   # the test cluster resyncs every 2 s: at least two full comparisons
applies_after=$(writes_count)
[ -n "$applies_before" ] && [ "$applies_before" -gt 0 ] && [ "$applies_after" = "$applies_before" ]
tap_ok $? "steady state: no writes to the cluster over 5 s of resyncs ($applies_before writes before, $applies_after after)"
tap_is "$(q $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'iris'")" "READY/1" "still READY, still one revision"

# --- out-of-band edit: a non-zero probe delay is real drift
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-shop","name":"iris","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'iris'" DRIFTED 10
tap_ok $? "an out-of-band change of minReplicas is detected as DRIFTED"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'iris'" READY 15
tap_ok $? "the drift is repaired and the deployment is READY again"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE action = 'REPAIR' AND outcome = 'OK'")" 1 "the ledger shows one REPAIR"
tap_is "$(q $DB "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE action = 'REPAIR'")" "drift at spec.predictor.minReplicas" \
	"the REPAIR names the drifted path"
tap_is "$(q $DB "SELECT latest_revision FROM mlplat.deployments WHERE name = 'iris'")" 1 "repair created no revision"
min=$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/iris | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["minReplicas"])')
tap_is "$min" 1 "the cluster object is back to the desired minReplicas"

# --- an orphan: an InferenceService mlplat made (our labels and the content id of a revision
#     of that name) with no live deployment -> torn down: phantom is undeployed, then its
#     render lands again (as an apply answered too late would).  A look-alike with our labels
#     and no such content id (ghost) is not provably ours: reported, never deleted (issue 18,
#     finding 5); an unlabelled object is never touched.
q $DB "SELECT status FROM mlplat.deploy('shop', 'phantom', 'iris', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'phantom'" READY 20
tap_ok $? "deployment phantom is READY"
phantom=$(q $DB "SELECT mlplat.render_inference_service('shop', 'phantom', 1)")
q $DB "SELECT mlplat.undeploy('shop', 'phantom')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'phantom'" DELETED 20
tap_ok $? "phantom undeployed"
kube POST /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices "$phantom" >/dev/null
kube POST /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices "$(echo "$isvc" | python3 -c '
import json,sys; o=json.load(sys.stdin)
o["metadata"]={"name":"ghost","namespace":"mlp-shop","labels":o["metadata"]["labels"]}; o.pop("status",None); print(json.dumps(o))')" >/dev/null
kube POST /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices "$(echo "$isvc" | python3 -c '
import json,sys; o=json.load(sys.stdin)
o["metadata"]={"name":"handmade","namespace":"mlp-shop"}; o.pop("status",None); print(json.dumps(o))')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK'" 1 10
tap_ok $? "an InferenceService mlplat made, with no live deployment, is torn down as an orphan"
# ... where it happened: the stand-in answers 404 and logged the DELETE
wait_kube_gone /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/phantom 10
tap_ok $? "the orphan is gone from the stand-in (GET is 404)"
tap_is "$(writes_count "method=DELETE&name=phantom")" 2 "the stand-in logged the undeploy's DELETE and the orphan's"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'CONFLICT' AND detail->>'note' = 'mlp-shop/ghost'" t 10
tap_ok $? "a look-alike with our labels but no content id of ours is reported as a conflict"
tap_is "$(writes_count "method=DELETE&name=ghost")/$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/ghost)" "0/200" \
	"... and never deleted"
code=$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/handmade | python3 -c 'import json,sys; print(json.load(sys.stdin).get("metadata",{}).get("name",""))')
tap_is "$code" handmade "an unlabelled InferenceService is never touched"
kube DELETE /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/ghost >/dev/null

# --- a rolled-back intent wakes nothing and never reaches the cluster
out=$($PSQL -d $DB -c "BEGIN" -c "SELECT status FROM mlplat.deploy('shop', 'never', 'iris', '1', 'kserve-sklearnserver')" \
	-c "SELECT count(*) FROM mlplat.deployments WHERE name = 'never'" -c "ROLLBACK" 2>&1)
rc=$?
# the deploy() itself must have worked (a failing one would leave nothing to roll back)
[ "$rc" = 0 ] && [ "$(echo "$out" | tr '\n' ' ')" = "DEPLOYING 1 " ]
tap_ok $? "deploy() inside the transaction succeeded and saw its own row before ROLLBACK"
[ "$rc" = 0 ] || echo "$out" | sed 's/^/#   /'
sleep 3   # past a resync: the row never existed, so no pass can find it
tap_is "$(writes_count "name=never")" 0 "a rolled-back deploy() never reaches the stand-in"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.deployments WHERE name = 'never'")" 0 "... and left no row behind"

# --- undeploy: deleted, then DELETED once gone
q $DB "SELECT mlplat.undeploy('shop', 'iris')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'iris'" DELETED 15
tap_ok $? "undeploy ends DELETED once the InferenceService is gone"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-shop/inferenceservices/iris)" 404 \
	"the stand-in no longer has the InferenceService (GET is 404)"
tap_is "$(writes_count "method=DELETE&name=iris")" 1 "the stand-in logged one DELETE of it"
tap_is "$(admin GET 'writes' | python3 -c 'import json,sys; w=json.load(sys.stdin); print(sum(v.get("create",0) for k,v in (w.get("writes",w)).items() if "mlp-shop/iris" in k))' 2>/dev/null)" 1 \
	"the stand-in saw exactly one create of the InferenceService"

# leave nothing live for the scripts that run after this one against their own stand-in
q $DB "SELECT mlplat.delete_project('shop')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'shop'" DELETED 15
tap_ok $? "project shop is deleted once its deployment is gone"
wait_kube_gone /api/v1/namespaces/mlp-shop 15
tap_ok $? "its namespace is gone from the stand-in (GET is 404)"
tap_done
