#!/usr/bin/env bash
# Deployments end to end on the real kube-apiserver (the InferenceService CRD
# from KServe's real schema), the KServe imitation (test/real/controller.js)
# and the S3 server: the artifact is checked on S3 with a real SigV4
# signature and checksum, deploy -> READY, what the server adds is no drift,
# KServe's webhook defaults (served by the imitation, called by the real server) are no drift,
# out-of-band edits are repaired, orphans go, and deletes wait for KServe's
# finalizer, naming it, and raise finalizer_stuck past mlplat.finalizer_alert_after;
# an InferenceService deleted behind mlplat's back is waited for, not written
# into, and made again once gone; a redeploy of a name still terminating waits for it. KServe's observedGeneration (the child's counter, kserve#6081)
# is exercised: an annotation KServe propagates moves the child on, and a
# status from before an apply (KServe down) is not taken for the new
# revision's; in Serverless and RawDeployment mode.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble deployments mlplat
real_reset_at_exit mlplat.finalizer_alert_after
real_stack_up s3 controller

row() { q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = '$1'" | sed 's/^/# row: /'; }
ISVCS=/apis/serving.kserve.io/v1beta1/namespaces/mlp-rshop/inferenceservices
I=$ISVCS/riris
applies() { q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'rshop' AND action IN ('APPLY', 'REPAIR')"; }

q $DB "SELECT mlplat.create_project('rshop', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('rshop', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rshop'" READY 60
tap_ok $? "project rshop is READY"
SHA=$(real_s3_put s3://models/iris/1 'iris-v1')
tap_ok $? "artifact iris/1 on S3 with its SHA-256 checksum"
q $DB "SELECT mlplat.register_model_version('rshop', 'iris', '1', 's3://models/iris/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rshop', 'iris', '1', 'CANDIDATE')" >/dev/null &&
	q $DB "SELECT mlplat.deploy('rshop', 'riris', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\"}')" >/dev/null
tap_ok $? "deploy() accepted"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'" READY 90
rc=$?
tap_ok $rc "the deployment converges to READY (artifact verified on S3, InferenceService accepted by the real schema)"
[ $rc = 0 ] || row riris
tap_is "$(q $DB "SELECT endpoint FROM mlplat.deployments WHERE name = 'riris'")" "http://riris.mlp-rshop.example.com" "READY carries the endpoint URL"
check "$(kget $I)" "o['metadata']['labels']['mlplat.io/revision'] == '1' and 'inferenceservice.finalizers' in o['metadata']['finalizers']"
tap_ok $? "the InferenceService carries revision 1 and KServe's finalizer"

# ---------------------------------------------------------------- steady state
a0=$(applies)
sleep 6
tap_same "$a0" "$(applies)" "steady state: no apply over 6 s of resyncs (pruning, finalizer, status are no drift)"
tap_is "$(q $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'")" READY "still READY"

# ---------------------------------------------------------------- KServe's defaulting webhook
# The real API server calls KServe's defaulting webhook (test/real/webhook.js, served by
# controller.js): the deploymentMode annotation is set, a Triton model gets protocolVersion
# v2, and an env value "" is dropped (Go's omitempty).  None of it is drift: no apply over
# three resyncs of the row.  With mlplat.deployments_watch on, a row's own
# resync is mlplat.watch_resync_interval (hours) away, so each of the three is made due by
# hand; the leader then compares the row with what its watch cache holds of the object.
SHA3=$(real_s3_put s3://models/tri/1 'tri-v1')
q $DB "SELECT mlplat.register_model_version('rshop', 'tri', '1', 's3://models/tri/1', '$SHA3', 'kserve-tritonserver', 'triton')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rshop', 'tri', '1', 'CANDIDATE')" >/dev/null &&
	q $DB "SELECT mlplat.deploy('rshop', 'rtri', 'tri', '1', 'kserve-tritonserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\",\"EMPTY_OK\":\"\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rtri'" READY 90
rc=$?
tap_ok $rc "a Triton model with an empty env value is READY"
[ $rc = 0 ] || row rtri
check "$(kget $ISVCS/rtri)" "o['metadata']['annotations']['serving.kserve.io/deploymentMode'] == 'Serverless' and o['spec']['predictor']['model']['protocolVersion'] == 'v2' and {'name': 'EMPTY_OK'} in o['spec']['predictor']['model']['env']"
tap_ok $? "the webhook defaulted it: deploymentMode annotation, protocolVersion v2, the env value \"\" dropped"
a0=$(applies)
rc=0
for _ in 1 2 3; do
	r=$(q $DB "SELECT now()")
	q $DB "UPDATE mlplat.deployments SET next_resync_at = now() WHERE name = 'rtri'" >/dev/null
	wait_for $DB "SELECT next_resync_at > '$r' FROM mlplat.deployments WHERE name = 'rtri'" t 30 || { rc=1; break; }
done
tap_ok $rc "three resyncs of rtri"
tap_same "$a0" "$(applies)" "webhook defaults are no drift: no apply over the three resyncs"
tap_is "$(q $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'rtri'")" READY/1 "... still READY at revision 1"
q $DB "SELECT mlplat.undeploy('rshop', 'rtri')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rtri'" DELETED 60
tap_ok $? "rtri undeployed"

# ---------------------------------------------------------------- drift
rk PATCH $I '{"spec":{"predictor":{"minReplicas":3}}}' application/merge-patch+json >/dev/null
until_check 30 $I "o['spec']['predictor']['minReplicas'] == 1"
tap_ok $? "an out-of-band minReplicas of 3 is repaired back to 1"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'" READY 60
tap_ok $? "READY again after the repair"
tap_is "$(q $DB "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' ORDER BY id DESC LIMIT 1")" \
	"drift at spec.predictor.minReplicas" "the REPAIR names the drifted path"

# ---------------------------------------------------------------- KServe's observedGeneration
# An operator's annotation is propagated by KServe into the child Knative
# Service: the child's generation moves on, the InferenceService's does not.
rk PATCH $I '{"metadata":{"annotations":{"example.com/owner":"ops"}}}' application/merge-patch+json >/dev/null
until_check 30 $I "o['status']['observedGeneration'] > o['metadata']['generation'] and any(c['type'] == 'Ready' and c['status'] == 'True' for c in o['status']['conditions'])"
tap_ok $? "KServe now reports an observedGeneration above the InferenceService's generation, and Ready"
before=$(kget $I | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["components"]["predictor"]["latestCreatedRevision"])')
SHA2=$(real_s3_put s3://models/iris/2 'iris-v2')
# KServe down while revision 2 is applied: its status still shows revision 1 Ready
curl -s -X POST "$REAL_CONTROLLER/freeze?on=1" >/dev/null
q $DB "SELECT mlplat.register_model_version('rshop', 'iris', '2', 's3://models/iris/2', '$SHA2', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rshop', 'iris', '2', 'CANDIDATE')" >/dev/null &&
	q $DB "SELECT mlplat.deploy('rshop', 'riris', 'iris', '2', 'kserve-sklearnserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\"}')" >/dev/null
until_check 60 $I "o['metadata']['labels']['mlplat.io/revision'] == '2'"
tap_ok $? "revision 2 is applied while KServe is down"
# several passes of the reconciler (it looks again every 300 ms while DEPLOYING) see that status
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 5 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
tap_ok $? "five more passes of the deployments leader"
tap_is "$(q $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'riris'")" DEPLOYING/2 \
	"revision 1's Ready status, from before the apply, does not make revision 2 READY"
curl -s -X POST "$REAL_CONTROLLER/freeze?on=0" >/dev/null
until_check 60 $I "o['metadata']['labels']['mlplat.io/revision'] == '2' and o['status']['components']['predictor'].get('latestReadyRevision') == o['status']['components']['predictor'].get('latestCreatedRevision') != '$before' and any(c['type'] == 'Ready' and c['status'] == 'True' for c in o['status']['conditions'])"
tap_ok $? "revision 2 is applied and KServe reports its new predictor revision ready"
wait_for $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'riris'" READY/2 30
rc=$?
tap_ok $rc "the deployment is READY at revision 2 although observedGeneration is the child's counter"
[ $rc = 0 ] || row riris

# ---------------------------------------------------------------- RawDeployment
# KServe's default mode RawDeployment: a Deployment, no Knative revisions or traffic.
curl -s -X POST "$REAL_CONTROLLER/default-mode?mode=RawDeployment" >/dev/null
q $DB "SELECT mlplat.deploy('rshop', 'rraw', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rraw'" READY 60
rc=$?
tap_ok $rc "RawDeployment: the deployment converges to READY"
[ $rc = 0 ] || row rraw
tap_is "$(q $DB "SELECT endpoint FROM mlplat.deployments WHERE name = 'rraw'")" "http://rraw-mlp-rshop.example.com" "RawDeployment: READY carries KServe's raw URL"
rk PATCH $ISVCS/rraw '{"metadata":{"annotations":{"example.com/owner":"ops"}}}' application/merge-patch+json >/dev/null
until_check 30 $ISVCS/rraw "o['status']['deploymentMode'] == 'RawDeployment' and o['status']['observedGeneration'] > o['metadata']['generation'] and 'latestCreatedRevision' not in o['status'].get('components', {}).get('predictor', {})"
tap_ok $? "RawDeployment: observedGeneration is the Deployment's, above the InferenceService's generation; no revisions"
q $DB "SELECT mlplat.deploy('rshop', 'rraw', 'iris', '2', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'rraw'" READY/2 60
rc=$?
tap_ok $rc "RawDeployment: a redeploy is READY at revision 2"
[ $rc = 0 ] || row rraw

# deleted behind mlplat's back while KServe's finalizer holds it: wait, do not write into it
RRAW=$ISVCS/rraw
uid0=$(kget $RRAW | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=rraw&on=1" >/dev/null
rk DELETE $RRAW >/dev/null
wait_for $DB "SELECT status || ': ' || status_reason FROM mlplat.deployments WHERE name = 'rraw'" \
	"DEPLOYING: waiting for the terminating InferenceService mlp-rshop/rraw to go (finalizer inferenceservice.finalizers) before applying revision 2" 30
tap_ok $? "an InferenceService deleted out of band and held by its finalizer: DEPLOYING, waiting, naming the finalizer"
a0=$(applies)
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 5 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
tap_ok $? "five more passes of the deployments leader"
tap_same "$a0" "$(applies)" "... no apply into the terminating object while it lingers"
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=rraw&on=0" >/dev/null
wait_for $DB "SELECT status || '/' || latest_revision FROM mlplat.deployments WHERE name = 'rraw'" READY/2 60
rc=$?
tap_ok $rc "once it is gone, mlplat makes it again: READY at revision 2"
[ $rc = 0 ] || row rraw
check "$(kget $RRAW)" "o['metadata']['uid'] != '$uid0' and not o['metadata'].get('deletionTimestamp')"
tap_ok $? "... a new InferenceService, not the terminating one"
q $DB "SELECT mlplat.undeploy('rshop', 'rraw')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rraw'" DELETED 60
tap_ok $? "RawDeployment: undeployed"
curl -s -X POST "$REAL_CONTROLLER/default-mode?mode=Serverless" >/dev/null

# ---------------------------------------------------------------- orphans
# rraw's render lands again after its deployment is DELETED (as an apply answered too
# late would): mlplat made it (labels and a content id of a revision of that name), so it
# is torn down.  A look-alike with our labels and no such content id is reported, never
# deleted; an unlabelled object is never touched.
phantom=$(q $DB "SELECT mlplat.render_inference_service('rshop', 'rraw', 2)")
rk POST $ISVCS "$phantom" >/dev/null
body=$(kget $I | python3 -c '
import json,sys; o=json.load(sys.stdin)
o["metadata"]={"name":"ghost","labels":o["metadata"]["labels"]}; o.pop("status",None); print(json.dumps(o))')
rk POST $ISVCS "$body" >/dev/null
rk POST $ISVCS "$(echo "$body" | python3 -c 'import json,sys; o=json.load(sys.stdin); o["metadata"]={"name":"handmade"}; print(json.dumps(o))')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK' AND project = 'rshop'" 1 30
tap_ok $? "an InferenceService mlplat made, with no live deployment, is torn down as an orphan"
until_check 30 $ISVCS/rraw "o.get('code') == 404"
tap_ok $? "... and goes once KServe's finalizer is released"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'CONFLICT' AND detail->>'note' = 'mlp-rshop/ghost'" t 30
tap_ok $? "a look-alike with our labels but no content id of ours is reported as a conflict"
check "$(kget $ISVCS/ghost)" "o['metadata']['name'] == 'ghost' and not o['metadata'].get('deletionTimestamp')"
tap_ok $? "... and never deleted"
check "$(kget $ISVCS/handmade)" "o['metadata']['name'] == 'handmade' and not o['metadata'].get('deletionTimestamp')"
tap_ok $? "an unlabelled InferenceService is never touched"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK' AND project = 'rshop'")" 1 \
	"the orphan, terminating until KServe let go, was torn down once"

# ---------------------------------------------------------------- undeploy with a finalizer
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=riris&on=1" >/dev/null
q $DB "SELECT mlplat.undeploy('rshop', 'riris')" >/dev/null
until_check 30 $I "bool(o['metadata'].get('deletionTimestamp'))"
tap_ok $? "undeploy deletes; KServe's finalizer keeps the InferenceService with a deletionTimestamp"
wait_for $DB "SELECT status || ': ' || split_part(status_reason, ' (terminating since', 1) FROM mlplat.deployments WHERE name = 'riris'" \
	"DELETING: waiting for finalizer inferenceservice.finalizers to release InferenceService mlp-rshop/riris" 30
tap_ok $? "while the finalizer holds, the deployment stays DELETING and names the finalizer"
d0=$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'rshop' AND action = 'DELETE'")
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.finalizer_alert_after = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'finalizer_stuck' AND entity_id = (SELECT id FROM mlplat.deployments WHERE name = 'riris') AND detail LIKE '%held by finalizer(s) inferenceservice.finalizers'" 1 30
tap_ok $? "past mlplat.finalizer_alert_after the finalizer_stuck alert names the InferenceService and its finalizer"
tap_same "$d0" "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'rshop' AND action = 'DELETE'")" \
	"... and no DELETE is sent again while it is terminating"
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=riris&on=0" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'" DELETED 60
tap_ok $? "DELETED once KServe lets go"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.alerts WHERE alert = 'finalizer_stuck'")" 0 "... and the finalizer_stuck alert is gone"
check "$(kget $I)" "o.get('code') == 404"
tap_ok $? "... and the InferenceService is gone"

# ---------------------------------------------------------------- redeploy while terminating
# undeployed, KServe's finalizer holding it: a deploy() of the same name is taken and waits
q $DB "SELECT mlplat.deploy('rshop', 'riris', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'" READY 60
tap_ok $? "riris deployed again: READY"
uid0=$(kget $I | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=riris&on=1" >/dev/null
q $DB "SELECT mlplat.undeploy('rshop', 'riris')" >/dev/null
until_check 30 $I "bool(o['metadata'].get('deletionTimestamp'))"
tap_ok $? "undeployed; KServe's finalizer holds the InferenceService"
rev=$(q $DB "SELECT revision FROM mlplat.deploy('rshop', 'riris', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2, '{\"LOG_LEVEL\":\"info\"}')" 2>&1)
[[ "$rev" =~ ^[0-9]+$ ]]
tap_ok $? "deploy() of the name while its InferenceService terminates is accepted (revision $rev)"
wait_for $DB "SELECT status || ': ' || status_reason FROM mlplat.deployments WHERE name = 'riris'" \
	"DEPLOYING: waiting for the terminating InferenceService mlp-rshop/riris to go (finalizer inferenceservice.finalizers) before applying revision $rev" 30
rc=$?
tap_ok $rc "DEPLOYING, waiting for the terminating InferenceService, naming the finalizer"
[ $rc = 0 ] || row riris
a0=$(applies)
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 3 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
tap_ok $? "... three more passes of the deployments leader while it terminates"
tap_is "$(applies)/$(kget $I | python3 -c 'import json,sys; o=json.load(sys.stdin)["metadata"]; print(o["uid"] == "'"$uid0"'", o["labels"]["mlplat.io/revision"] != "'"$rev"'")')" \
	"$a0/True True" "... no apply into the terminating object: it still carries the old revision"
curl -s -X POST "$REAL_CONTROLLER/hold?ns=mlp-rshop&name=riris&on=0" >/dev/null
wait_for $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE name = 'riris'" "READY/$rev" 60
rc=$?
tap_ok $rc "once it is gone, a new InferenceService: READY at revision $rev"
[ $rc = 0 ] || row riris
check "$(kget $I)" "o['metadata']['uid'] != '$uid0' and o['metadata']['labels']['mlplat.io/revision'] == '$rev' and not o['metadata'].get('deletionTimestamp')"
tap_ok $? "... with a new uid, not the terminating one"
q $DB "SELECT mlplat.undeploy('rshop', 'riris')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'riris'" DELETED 60
tap_ok $? "undeployed again"

rk DELETE $ISVCS/handmade >/dev/null
rk DELETE $ISVCS/ghost >/dev/null
q $DB "SELECT mlplat.delete_project('rshop')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rshop'" DELETED 120
tap_ok $? "project rshop is deleted"
tap_done
