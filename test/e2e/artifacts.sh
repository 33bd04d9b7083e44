#!/usr/bin/env bash
# Artifact checks end to end (scenario 7), real workers against the stand-in and its S3:
# before the first apply of a revision the artifact must exist with the registered
# SHA-256 — from the store's checksum, the digest cache, or a download hashed on the way.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-artifacts
DB=mlplat
e2e_standin $DB
on_exit '$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.artifact_hash_max_bytes" -c "ALTER SYSTEM RESET mlplat.backoff_max" -c "SELECT pg_reload_conf()" >/dev/null 2>&1'

q $DB "SELECT mlplat.create_project('art', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('art', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'art'" READY 60
tap_ok $? "project art is READY"
# scripts share the database: every lookup of a deployment by name is within this project
ART=$(q $DB "SELECT id FROM mlplat.projects WHERE name = 'art' AND status <> 'DELETED'")

status_of() { q $DB "SELECT d.status FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'art' AND d.name = '$1'"; }
reason_of() { q $DB "SELECT d.status_reason FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'art' AND d.name = '$1'"; }
register() {  # version uri sha
	q $DB "SELECT mlplat.register_model_version('art', 'm', '$1', '$2', '$3', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('art', 'm', '$1', 'CANDIDATE')" >/dev/null
}
deploy() {  # name version [env json]
	local env=${3:-'{}'}
	q $DB "SELECT status FROM mlplat.deploy('art', '$1', 'm', '$2', 'kserve-sklearnserver', 0, 1, 1, '$env')" >/dev/null
}
isvc_writes() { writes_count "kind=InferenceService&name=$1"; }
# s3_count METHOD KEY-REGEX — S3 requests logged by the stand-in's S3 front
s3_count() {
	admin GET "requests?area=s3&method=$1" | python3 -c 'import json,re,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if re.search(sys.argv[1], e["path"])))' "$2"
}
dump() {
	q $DB "SELECT name, status, status_reason, last_error FROM mlplat.deployments" | sed 's/^/# row: /'
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'deployments'" | sed 's/^/# health: /'
}

# --- 1. the digest matches -> READY.  The stand-in also writes x-amz-meta-sha256, user
#        metadata anyone who uploads can set: it is no proof, the object is downloaded
SHA1=$(standin_artifact s3://models/m/1/model.bin 'weights one')
register 1 s3://models/m/1/model.bin "$SHA1"
deploy good 1
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'good'" READY 60
rc=$?; tap_ok $rc "a matching digest: the deployment becomes READY"; [ $rc = 0 ] || dump
tap_is "$(q $DB "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'APPLY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'good')")" \
	"artifact s3://models/m/1/model.bin verified: sha256 $SHA1 (download)" "the APPLY's ledger row says how the artifact was verified"
tap_is "$(s3_count GET 'm/1/model.bin')" 1 "x-amz-meta-sha256 is not taken as the digest: the object was hashed on download"
tap_is "$(q $DB "SELECT string_agg(s.name || ' ' || s.status || ' ' || (s.attributes->>'mlplat.artifact.digest_source'), ',')
                 FROM mlplat.spans s JOIN mlplat.deployments d ON d.id = s.entity_id AND s.entity = 'deployment'
                WHERE d.project_id = $ART AND d.name = 'good' AND s.name = 'deployments.artifact_check' AND s.trace_id = substr(d.traceparent, 4, 32)")" \
	"deployments.artifact_check UNSET download" "the check is a span of the deployment's trace"

# --- 1a. hostile: the uploader writes the registered digest into x-amz-meta-sha256 over
#         other bytes (the old check believed the metadata and applied it) -> FAILED
WANT1A=$(printf 'the weights that were reviewed' | sha256sum | cut -d' ' -f1)
standin_artifact s3://models/m/1a/model.bin 'weights swapped after review' "{\"metadata\": {\"sha256\": \"$WANT1A\"}}" >/dev/null
register 1a s3://models/m/1a/model.bin "$WANT1A"
deploy forged 1a
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'forged'" FAILED 60
rc=$?; tap_ok $rc "a forged x-amz-meta-sha256 is not proof: the bytes are hashed, the deployment is FAILED"; [ $rc = 0 ] || dump
tap_is "$(isvc_writes forged)" 0 "no InferenceService was written for it"

# --- 1b. real S3's own checksum (x-amz-checksum-sha256, base64, asked for with x-amz-checksum-mode):
#         the store computed it from the bytes it received at upload
SHA1B=$(standin_artifact s3://models/m/1b/model.bin 'weights one b' '{"sha256Meta": false, "checksum": true}')
register 1b s3://models/m/1b/model.bin "$SHA1B"
deploy sum 1b
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'sum'" READY 60
rc=$?; tap_ok $rc "a matching x-amz-checksum-sha256: READY"; [ $rc = 0 ] || dump
tap_is "$(q $DB "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'APPLY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'sum')")" \
	"artifact s3://models/m/1b/model.bin verified: sha256 $SHA1B (x-amz-checksum-sha256)" "verified from the store's checksum header"
tap_is "$(s3_count GET 'm/1b/model.bin')" 0 "nothing downloaded"

# --- 2. the digest differs -> FAILED, nothing applied
standin_artifact s3://models/m/2/model.bin 'tampered weights' >/dev/null
WANT2=$(printf 'weights two' | sha256sum | cut -d' ' -f1)
GOT2=$(printf 'tampered weights' | sha256sum | cut -d' ' -f1)
register 2 s3://models/m/2/model.bin "$WANT2"
deploy bad 2
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'bad'" FAILED 60
rc=$?; tap_ok $rc "a different digest: the deployment is FAILED"; [ $rc = 0 ] || dump
NOT_VERIFIED="could not be verified against its registered sha256 (missing, unreadable, too large to hash or different); an administrator finds the reason in mlplat.admin_ledger"
tap_is "$(reason_of bad)" "artifact s3://models/m/2/model.bin $NOT_VERIFIED" \
	"the tenant's status_reason says not verified, and never what the store holds"
tap_is "$(q $DB "SELECT outcome || ' ' || desired_digest || ' ' || observed_digest || ' ' || (detail->>'note') || ' | ' || error FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'VERIFY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'bad')")" \
	"FAILED $WANT2 $GOT2 s3://models/m/2/model.bin | artifact s3://models/m/2/model.bin digest mismatch: registered sha256 $WANT2, object store has $GOT2 (download)" \
	"one VERIFY ledger row (administrators) with both digests, the URI and the detail"
sleep 1
tap_is "$(isvc_writes bad)" 0 "no InferenceService was written for it"
tap_is "$(q $DB "SELECT s.status || ' ' || (s.status_message = d.status_reason)
                 FROM mlplat.spans s JOIN mlplat.deployments d ON d.id = s.entity_id AND s.entity = 'deployment'
                WHERE d.project_id = $ART AND d.name = 'bad' AND s.name = 'deployments.artifact_check'")" "ERROR true" "its artifact_check span is an ERROR with the reason"

# --- 3. the object is missing -> FAILED, nothing applied
register 3 s3://models/m/3/missing.bin "$WANT2"
deploy gone 3
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'gone'" FAILED 60
rc=$?; tap_ok $rc "a missing artifact: the deployment is FAILED"; [ $rc = 0 ] || dump
tap_is "$(reason_of gone)" "artifact s3://models/m/3/missing.bin $NOT_VERIFIED" \
	"a missing object reads exactly like a different one: the tenant learns nothing about existence"
tap_is "$(q $DB "SELECT outcome || ' ' || http_status || ' ' || error FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'VERIFY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'gone')")" \
	"FAILED 404 artifact s3://models/m/3/missing.bin not found in the object store (HTTP 404)" "the ledger row keeps the store's 404 and why"
sleep 1
tap_is "$(isvc_writes gone)" 0 "no InferenceService was written for it"

# --- 4. no checksum in the store: download and hash it
SHA4=$(head -c 300000 /dev/zero | tr '\0' 'w' | standin_artifact s3://models/m/4/model.bin - '{"sha256Meta": false}')
register 4 s3://models/m/4/model.bin "$SHA4"
deploy stream 4
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'stream'" READY 60
rc=$?; tap_ok $rc "no store checksum: the object is hashed on download and the deployment becomes READY"; [ $rc = 0 ] || dump
tap_is "$(s3_count GET 'm/4/model.bin')" 1 "the object was downloaded once"
tap_is "$(q $DB "SELECT sha256 || ' ' || size_bytes || ' ' || source FROM mlplat.artifact_digests WHERE uri = 's3://models/m/4/model.bin'")" \
	"$SHA4 300000 download" "the digest found is cached by URI and ETag"

# --- 5. a second revision of the same artifact: the cache answers, no second download
heads=$(s3_count HEAD 'm/4/model.bin')
deploy stream 4 '{"LOG_LEVEL":"debug"}'
wait_for $DB "SELECT desired_revision || ' ' || status FROM mlplat.deployments WHERE project_id = $ART AND name = 'stream'" "2 READY" 60
rc=$?; tap_ok $rc "revision 2 of the same artifact becomes READY"; [ $rc = 0 ] || dump
tap_is "$(s3_count GET 'm/4/model.bin')" 1 "still one download: the cache by URI + ETag answered"
tap_is "$(( $(s3_count HEAD 'm/4/model.bin') - heads ))" 1 "one HEAD to learn the ETag"

# --- 6. beyond mlplat.artifact_hash_max_bytes -> FAILED with the bound and the setting
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.artifact_hash_max_bytes = '64kB'" -c "SELECT pg_reload_conf()" >/dev/null
SHA6=$(head -c 100000 /dev/zero | tr '\0' 'b' | standin_artifact s3://models/m/6/model.bin - '{"sha256Meta": false}')
register 6 s3://models/m/6/model.bin "$SHA6"
sleep 0.5
deploy big 6
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'big'" FAILED 60
rc=$?; tap_ok $rc "an artifact larger than the hashing bound: FAILED"; [ $rc = 0 ] || dump
tap_is "$(reason_of big)" "artifact s3://models/m/6/model.bin $NOT_VERIFIED" "the tenant's reason does not tell the size"
reason=$(q $DB "SELECT error FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'VERIFY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'big')")
case "$reason" in *"100000 bytes"*"mlplat.artifact_hash_max_bytes (64 kB)"*) ok=0 ;; *) ok=1 ;; esac
tap_ok $ok "the ledger's error names the size, the bound and the setting ($reason)"
tap_is "$(s3_count GET 'm/6/model.bin')" 0 "the size from the HEAD was enough: nothing downloaded"
tap_is "$(isvc_writes big)" 0 "no InferenceService was written for it"
$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.artifact_hash_max_bytes" -c "SELECT pg_reload_conf()" >/dev/null

# --- 7. the store fails twice with 503 -> retried with backoff, converges
SHA7=$(standin_artifact s3://models/m/7/model.bin 'weights seven')
register 7 s3://models/m/7/model.bin "$SHA7"
admin POST faults '{"s3": true, "method": "HEAD", "path": "/models/m/7/", "status": 503, "times": 2}' >/dev/null
deploy flaky 7
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'flaky'" READY 60
rc=$?; tap_ok $rc "a store answering 503 twice: retried, the deployment becomes READY"; [ $rc = 0 ] || dump
tap_is "$(q $DB "SELECT string_agg(outcome || ' ' || http_status, ',' ORDER BY id) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'VERIFY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'flaky')")" \
	"RETRY 503,RETRY 503" "two VERIFY RETRY rows, no FAILED"
tap_is "$(s3_count HEAD 'm/7/model.bin')" 3 "three HEADs: two refused, one answered"

# --- 8. the credentials file is re-read when it changes: unusable -> the deployment
#        waits and says why, nothing is sent unsigned; fixed in place -> it converges
SHA8=$(standin_artifact s3://models/m/8/model.bin 'weights eight')
register 8 s3://models/m/8/model.bin "$SHA8"
cp "$STANDIN_S3_CREDENTIALS" "$SD/s3-credentials.good"
# a configuration problem is looked at again after min(30 s, backoff_max): 2 s here
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.backoff_max = '2s'" -c "SELECT pg_reload_conf()" >/dev/null
printf '[default]\nno keys in this profile\n' >"$STANDIN_S3_CREDENTIALS"
deploy keys 8
wait_for $DB "SELECT status_reason FROM mlplat.deployments WHERE project_id = $ART AND name = 'keys'" \
	"waiting to verify artifact s3://models/m/8/model.bin: the platform's object store is not configured or not usable yet" 20
rc=$?; tap_ok $rc "an unusable credentials file: the deployment waits with a generic reason ($(reason_of keys))"; [ $rc = 0 ] || dump
grep -q "artifact checks wait: object store credentials file \"$STANDIN_S3_CREDENTIALS\" is unusable" "$MLPLAT_TEST_WORK/server.log"
tap_ok $? "the server log (administrators) names the unusable file"
# hostile tenant: a developer of the project reads every mlplat relation it may read while
# the deployments are FAILED and waiting: no credentials path, no object-store host, no digest found
q $DB "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'art_dev') THEN CREATE ROLE art_dev; END IF; END \$\$" >/dev/null
q $DB "SELECT mlplat.grant_role('art', 'art_dev', 'developer')" >/dev/null
tenant_finds() {  # marker -> relations where art_dev finds it
	q $DB "DO \$\$ DECLARE t regclass; n bigint; found text := ''; BEGIN
	  FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'v')
	             AND has_table_privilege('art_dev', c.oid, 'SELECT') ORDER BY c.relname LOOP
	    SET LOCAL ROLE art_dev;
	    EXECUTE format('SELECT count(*) FROM %s x WHERE strpos(x::text, \$1) > 0', t) INTO n USING '$1';
	    RESET ROLE;
	    IF n > 0 THEN found := found || t::text || ' '; END IF;
	  END LOOP;
	  RAISE NOTICE 'found:%', found;
	END \$\$" 2>&1 | sed -n 's/.*found://p'
}
seen=$(tenant_finds 's3://models/m/1a/model.bin')
case "$seen" in *mlplat.model_versions*mlplat.deployments*|*mlplat.deployments*mlplat.model_versions*) ok=0 ;; *) ok=1 ;; esac
tap_ok $ok "the tenant does read its own rows, reasons included, so the searches below can find something ($seen)"
tap_is "$(tenant_finds "$STANDIN_S3_CREDENTIALS")" "" "the tenant finds the credentials file's path nowhere"
tap_is "$(tenant_finds "127.0.0.1:$STANDIN_S3")" "" "nor the object store's host"
tap_is "$(tenant_finds "$GOT2")" "" "nor a digest the store holds"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE strpos(error, '$GOT2') > 0")" 1 "the administrator reads the digest found in the ledger"
tap_is "$(status_of keys)/$(s3_count HEAD 'm/8/model.bin')/$(isvc_writes keys)" "DEPLOYING/0/0" \
	"while the keys are unusable: not failed, nothing asked of the store, nothing applied"
cat "$SD/s3-credentials.good" >"$STANDIN_S3_CREDENTIALS"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'keys'" READY 60
rc=$?; tap_ok $rc "the file fixed in place is picked up without a reload: READY"; [ $rc = 0 ] || dump
$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.backoff_max" -c "SELECT pg_reload_conf()" >/dev/null

# --- 9. the store cannot be reached: the tenant reads that it did not answer, never the host
#        (a transport error names it); the ledger keeps the error for administrators
DEAD=$(free_port)
SHA9=$(standin_artifact s3://models/m/9/model.bin 'weights nine')
register 9 s3://models/m/9/model.bin "$SHA9"
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.s3_endpoint = 'http://127.0.0.1:$DEAD'" -c "ALTER SYSTEM SET mlplat.backoff_max = '2s'" \
	-c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
deploy unreachable 9
wait_for $DB "SELECT status_reason FROM mlplat.deployments WHERE project_id = $ART AND name = 'unreachable'" \
	"checking artifact s3://models/m/9/model.bin: the object store did not answer; retrying" 20
rc=$?; tap_ok $rc "an unreachable store: the tenant's reason says only that it did not answer"; [ $rc = 0 ] || dump
tap_is "$(tenant_finds ":$DEAD")" "" "the tenant finds the unreachable store's address nowhere"
tap_ok $([ "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'VERIFY' AND outcome = 'RETRY'
                     AND strpos(error, '$DEAD') > 0 AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $ART AND name = 'unreachable')")" -gt 0 ]; echo $?) \
	"the ledger (administrators) keeps the transport error with the address"
standin_connect $DB
$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.backoff_max" -c "SELECT pg_reload_conf()" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $ART AND name = 'unreachable'" READY 60
rc=$?; tap_ok $rc "the store back: READY"; [ $rc = 0 ] || dump

# --- every request to the store was signed, and the stand-in's check of SigV4 accepted it
tap_is "$(admin GET 'requests?area=s3' | python3 -c 'import json,sys; i=json.load(sys.stdin)["items"]; print(len(i) > 0 and all(e.get("sigv4") == "valid" for e in i))')" True \
	"every S3 request carried a valid SigV4 signature"

# --- leave nothing behind for the next script: undeploy everything, drop the project
for d in good forged sum bad gone stream big flaky keys unreachable; do q $DB "SELECT mlplat.undeploy('art', '$d')" >/dev/null; done
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'art' AND d.status <> 'DELETED'" 0 60
tap_ok $? "every deployment of the test is undeployed"
q $DB "SELECT mlplat.delete_project('art')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'art'" DELETED 60
tap_ok $? "the test's project is deleted"
wait_kube_gone /api/v1/namespaces/mlp-art 30
tap_ok $? "its namespace is gone from the stand-in (GET is 404)"

tap_done
