#!/usr/bin/env bash
# What the real peers refuse, and what mlplat makes of it (issue 16, audit gaps 5
# and 6):
#   - the S3 server (moto, SigV4 checked) refuses a wrong secret with 403
#     SignatureDoesNotMatch: the deployment is FAILED, the ledger names the code,
#     nothing is applied; the right secret makes it READY;
#   - an object whose SHA-256 differs from the registered one is FAILED with a
#     digest mismatch, read from the store's own x-amz-checksum-sha256 on a HEAD
#     (nothing downloaded: moto's request log has no GET of the object);
#   - create and patch on inferenceservices taken from mlplat's ClusterRole: the
#     deployment names the forbidden InferenceService, reconciler_health counts
#     the error, nothing is half-made (GET 404); the verbs given back, READY;
#   - watch on inferenceservices taken: the deployments leader's watch cache is
#     unhealthy and backs off, deployments converge without it; given back, healthy.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble refusals mlplat
on_exit 'real_role_give_back >/dev/null'
real_reset_at_exit mlplat.deployments_watch
real_stack_up s3 controller

ISVCS=/apis/serving.kserve.io/v1beta1/namespaces/mlp-rref/inferenceservices
gone() { [ "$(rk GET "$ISVCS/$1" | tail -1)" = 404 ]; }
row() { q $DB "SELECT status, status_reason, last_error FROM mlplat.deployments WHERE name = '$1'" | sed 's/^/# row: /'; }
# ledger NAME ACTION — the newest ledger row's error and note for the deployment NAME
ledger() {
	q $DB "SELECT coalesce(error, '') || ' | ' || coalesce(detail->>'note', '') FROM mlplat.reconcile_ledger
	        WHERE kind = 'deployments' AND action = '$2' AND entity_id = (SELECT id FROM mlplat.deployments WHERE name = '$1')
	        ORDER BY id DESC LIMIT 1"
}
# moto's request log: "HEAD /models/ok/1 HTTP/1.1" 200
s3_log() { sed 's/\x1b\[[0-9;]*m//g' "$RD/moto.log" | grep -c "\"$1 $2 HTTP" ; }

q $DB "SELECT mlplat.create_project('rref', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('rref', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rref'" READY 60
tap_ok $? "project rref is READY"
SHA=$(real_s3_put s3://models/ok/1 'ok-v1') && SHA2=$(real_s3_put s3://models/ok/2 'ok-v2')
tap_ok $? "artifacts ok/1 and ok/2 on S3 with their SHA-256 checksums"
q $DB "SELECT mlplat.register_model_version('rref', 'ok', '1', 's3://models/ok/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rref', 'ok', '1', 'CANDIDATE')" >/dev/null
tap_ok $? "version 1 registered with its true SHA-256"

# ---------------------------------------------------------------- a wrong secret
sed 's/^\(aws_secret_access_key *= *\).*/\1not-the-secret/' "$REAL_S3_CREDENTIALS" >"$RD/s3-wrong-secret"
chmod 644 "$RD/s3-wrong-secret"
grep -q '^aws_secret_access_key = not-the-secret$' "$RD/s3-wrong-secret" && ! cmp -s "$RD/s3-wrong-secret" "$REAL_S3_CREDENTIALS"
tap_ok $? "a credentials file with the right key id and a wrong secret"
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.s3_credentials_file = '$RD/s3-wrong-secret'" -c "SELECT pg_reload_conf()" >/dev/null
q $DB "SELECT mlplat.deploy('rref', 'rkey', 'ok', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rkey'" FAILED 60
rc=$?
tap_ok $rc "wrong secret: the deployment is FAILED"
[ $rc = 0 ] || row rkey
l=$(ledger rkey VERIFY)
[[ $l == *"object store refused artifact s3://models/ok/1 (HTTP 403 SignatureDoesNotMatch)"* ]]
tap_ok $? "... the ledger names the store's answer: HTTP 403 SignatureDoesNotMatch ($l)"
[[ $(q $DB "SELECT status_reason FROM mlplat.deployments WHERE name = 'rkey'") != *403* ]]
tap_ok $? "... the tenant's reason does not say what the store answered"
gone rkey
tap_ok $? "... and nothing was applied to the API server (GET 404)"
tap_ok $([ "$(s3_log GET /models/ok/1)" -ge 1 ] && [ "$(s3_log HEAD /models/ok/1)" -ge 1 ]; echo $?) \
	"... the refused HEAD (no body) was followed by a GET, whose body carries the code"
real_s3_connect $DB
q $DB "SELECT mlplat.deploy('rref', 'rkey', 'ok', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rkey'" READY 90
rc=$?
tap_ok $rc "the right secret: the same deployment is READY (the 403 was the signature)"
[ $rc = 0 ] || row rkey

# ---------------------------------------------------------------- the store's own checksum
gets=$(s3_log GET /models/ok/1)
heads=$(s3_log HEAD /models/ok/1)
l=$(ledger rkey APPLY)
tap_is "$l" " | artifact s3://models/ok/1 verified: sha256 $SHA (x-amz-checksum-sha256)" \
	"the APPLY names the digest's source: the store's x-amz-checksum-sha256"
q $DB "SELECT mlplat.deploy('rref', 'rkey2', 'ok', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rkey2'" READY 90
tap_ok $? "a second deployment of version 1 is READY"
tap_same "$gets" "$(s3_log GET /models/ok/1)" "... verified by a HEAD alone: moto logged no GET of the object"
tap_ok $(($(s3_log HEAD /models/ok/1) > heads ? 0 : 1)) "... and a HEAD of it"

# ---------------------------------------------------------------- a checksum mismatch
WRONG=$(printf 'not-ok-v2' | sha256sum | cut -d' ' -f1)
q $DB "SELECT mlplat.register_model_version('rref', 'ok', '2', 's3://models/ok/2', '$WRONG', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rref', 'ok', '2', 'CANDIDATE')" >/dev/null &&
	q $DB "SELECT mlplat.deploy('rref', 'rsum', 'ok', '2', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
tap_ok $? "version 2 registered with a SHA-256 that is not its object's, and deployed"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rsum'" FAILED 60
rc=$?
tap_ok $rc "checksum mismatch: the deployment is FAILED"
[ $rc = 0 ] || row rsum
tap_is "$(ledger rsum VERIFY)" \
	"artifact s3://models/ok/2 digest mismatch: registered sha256 $WRONG, object store has $SHA2 (x-amz-checksum-sha256) | s3://models/ok/2" \
	"... the ledger: digest mismatch against the store's x-amz-checksum-sha256"
tap_is "$(s3_log GET /models/ok/2)" 0 "... found by a HEAD: the object was not downloaded"
gone rsum
tap_ok $? "... and nothing was applied to the API server (GET 404)"

# ---------------------------------------------------------------- verbs taken away
real_role_take inferenceservices create patch
tap_is "$REAL_ROLE_CODE" 200 "create and patch on inferenceservices are taken from mlplat-controller"
# RBAC is read from an informer: wait until the server itself refuses mlplat's token
deadline=$((SECONDS + 30))
until [ "$(mk PATCH "$ISVCS/probe?fieldManager=mlplat-probe&dryRun=All" '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"probe"}}' application/apply-patch+yaml | tail -1)" = 403 ]; do
	((SECONDS >= deadline)) && break
	sleep 0.2
done
tap_ok $((SECONDS >= deadline)) "... the API server now refuses mlplat's ServiceAccount an apply of an InferenceService"
e0=$(q $DB "SELECT coalesce(sum(errors_last_hour), 0) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
q $DB "SELECT mlplat.deploy('rref', 'rverb', 'ok', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status_reason LIKE 'the apply of InferenceService mlp-rref/rverb was refused (HTTP 403): %forbidden%' FROM mlplat.deployments WHERE name = 'rverb'" t 60
rc=$?
tap_ok $rc "the deployment's status_reason names the refused InferenceService and 'forbidden'"
[ $rc = 0 ] || row rverb
tap_is "$(q $DB "SELECT status FROM mlplat.deployments WHERE name = 'rverb'")" DEPLOYING \
	"... its status stays DEPLOYING (a refusal is retried slowly; a grant heals it)"
err=$(q $DB "SELECT last_error FROM mlplat.deployments WHERE name = 'rverb'")
[[ $err == *'cannot patch resource "inferenceservices"'* ]]
tap_ok $? "... last_error carries the real server's message ($err)"
wait_for $DB "SELECT coalesce(sum(errors_last_hour), 0) > $e0 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 30
tap_ok $? "reconciler_health for deployments counts the refusal in errors_last_hour"
tap_is "$(q $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'APPLY' AND outcome = 'FAILED' AND http_status = 403 AND entity_id = (SELECT id FROM mlplat.deployments WHERE name = 'rverb')")" t \
	"the ledger keeps the refused APPLY with HTTP 403"
gone rverb
tap_ok $? "nothing half-made: no InferenceService rverb (GET 404)"
real_role_give_back
tap_is "$REAL_ROLE_CODE" 200 "the verbs are given back"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rverb'" READY 90
rc=$?
tap_ok $rc "with the verbs back the deployment heals to READY"
[ $rc = 0 ] || row rverb

# ---------------------------------------------------------------- the watch taken away
# With mlplat.deployments_watch on (set here, whatever the default) the deployments leader LISTs
# InferenceServices once and watches them.  Without the watch verb the server answers the watch 403: the
# cache is unhealthy, passes observe with GETs and LISTs as without it, and the next LIST
# and watch wait out a backoff (before: a LIST and a refused watch at every pass, each
# refusal waking the next pass at once).  With the verb back the cache is healthy again.
leader() { q $DB "SELECT $1 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
WATCH_ALL=/apis/serving.kserve.io/v1beta1/inferenceservices?watch=1\&timeoutSeconds=1
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.deployments_watch = on" -c "SELECT pg_reload_conf()" >/dev/null
wait_for $DB "SELECT status ~ 'watch: [0-9]+ cached' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 30
tap_ok $? "the leader's watch cache is healthy on the real API server ($(leader status))"
real_role_take inferenceservices watch
tap_is "$REAL_ROLE_CODE" 200 "watch on inferenceservices is taken from mlplat-controller"
deadline=$((SECONDS + 30))
until [ "$(mk GET "$WATCH_ALL" | tail -1)" = 403 ]; do
	((SECONDS >= deadline)) && break
	sleep 0.2
done
tap_ok $((SECONDS >= deadline)) "... the API server now refuses mlplat's ServiceAccount a watch of InferenceServices"
# the open watch was authorized when it began: a new leader watches again
q $DB "SELECT pg_terminate_backend(pid) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" >/dev/null
wait_for $DB "SELECT status ~ 'watch unhealthy' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 60
tap_ok $? "the new leader's watch is refused: its status says the cache is unhealthy ($(leader status))"
p0=$(leader passes)
sleep 5
p1=$(leader passes)
tap_ok $([ $((p1 - p0)) -lt 40 ]; echo $?) "... and it backs off: $((p1 - p0)) passes in 5 s, not one after another"
q $DB "SELECT mlplat.deploy('rref', 'rnowatch', 'ok', '1', 'kserve-sklearnserver', 0, 1, 2, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'rnowatch'" READY 90
rc=$?
tap_ok $rc "without the watch a deployment still converges to READY (observed with GETs and LISTs)"
[ $rc = 0 ] || row rnowatch
grep -q 'the watch of inferenceservices failed (HTTP 403)' "$MLPLAT_TEST_WORK/data.log"
tap_ok $? "the server log says why: the watch of inferenceservices failed (HTTP 403)"
real_role_give_back
tap_is "$REAL_ROLE_CODE" 200 "watch is given back"
wait_for $DB "SELECT status ~ 'watch: [0-9]+ cached' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 120
tap_ok $? "with the verb back the cache is healthy again, after its backoff ($(leader status))"
$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.deployments_watch" -c "SELECT pg_reload_conf()" >/dev/null

for n in rkey rkey2 rsum rverb rnowatch; do q $DB "SELECT mlplat.undeploy('rref', '$n')" >/dev/null; done
wait_for $DB "SELECT count(*) FROM mlplat.deployments WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'rref') AND status <> 'DELETED'" 0 60
tap_ok $? "undeployed"
q $DB "SELECT mlplat.delete_project('rref')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rref'" DELETED 120
tap_ok $? "project rref is deleted"
tap_done
