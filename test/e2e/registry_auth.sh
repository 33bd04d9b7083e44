#!/usr/bin/env bash
# MLflow as deployed (issue 17 item 6), against the stand-in's MLflow in the mode of MLflow's
# basic-auth app (HTTP Basic only; a bearer token is refused with 401, as the real app does):
# mlplat.registry_basic_auth_file holds user:password, is re-read when it changes (a rotated
# password is used without a restart), is refused like the other credential files when others
# could write it, and may not be set beside a token file.  Then the registry over TLS: refused
# without the CA that signed its certificate, synced with mlplat.registry_ca_file.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/registry.sh"
SD=$WORK/standin-registry-auth
DB=mlplat
MINE="model_id IN (SELECT m.id FROM mlplat.models m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'regauth')"
BASIC=$SD/registry-basic

set_conf() { $PSQL -d $DB -c "ALTER SYSTEM SET $1" -c "SELECT pg_reload_conf()" >/dev/null; }
registry_disconnect
on_exit registry_disconnect
# the stand-in over https too: STANDIN_TLS_URL, its self-signed certificate STANDIN_TLS_CERT
STANDIN_TLS=1 e2e_standin

row() { q $DB "SELECT alias, status, status_reason, last_error FROM mlplat.model_aliases WHERE $MINE AND alias = '$1'" | sed 's/^/# row: /'; }
health() { q $DB "SELECT status FROM mlplat.reconciler_health WHERE kind = 'model_aliases' AND role IN ('leader', 'idle')"; }
wait_health() {
	wait_for $DB "SELECT bool_or(strpos(status, '$1') > 0) FROM mlplat.reconciler_health WHERE kind = 'model_aliases'" t "$2" ||
		{ echo "# health: $(health)"; return 1; }
}
# stage V STAGE, then wait for ALIAS to read STATUS
staged() {
	q $DB "SELECT mlplat.set_model_stage('regauth', 'iris', '$1', '$2')" >/dev/null
	wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = '$3'" "$4" "${5:-30}"
}
mlflow_sent() { admin GET requests | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("area") == "mlflow"))'; }
auth_seen() { admin GET requests | python3 -c 'import json,sys; print(",".join(sorted({str(e.get("status")) for e in json.load(sys.stdin)["items"] if e.get("area") == "mlflow"})))'; }

q $DB "SELECT mlplat.create_project('regauth', 1); SELECT mlplat.add_artifact_location('regauth', 's3://models/')" >/dev/null
for v in 1 2 3; do
	SHA=$(printf "iris-v$v" | sha256sum | cut -d' ' -f1)
	q $DB "SELECT mlplat.register_model_version('regauth', 'iris', '$v', 's3://models/iris/$v', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
done

# --- the basic-auth app: a bearer token is refused
admin PUT config '{"mlflowBasicAuth":"mlplat:first-pw"}' >/dev/null
# a refused alias (FAILED) is retried after min(30 s, mlplat.backoff_max): soon, here
set_conf "mlplat.backoff_max = '2s'"
set_conf "mlplat.registry_url = '$STANDIN_URL'"
set_conf "mlplat.registry_token_file = '$STANDIN_TOKEN_FILE'"
q $DB "SELECT mlplat.set_model_stage('regauth', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "SELECT last_error IS NOT NULL AND status <> 'SYNCED' FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" t 30
tap_ok $? "with only a bearer token the basic-auth app refuses mlplat: the alias is not SYNCED and says why"
row candidate
tap_is "$(auth_seen)" 401 "... every registry request was answered 401"

# --- both files set: refused, one must go
printf 'mlplat:first-pw\n' >"$BASIC"
chmod 644 "$BASIC"
set_conf "mlplat.registry_basic_auth_file = '$BASIC'"
wait_health "both mlplat.registry_token_file and mlplat.registry_basic_auth_file are set" 30
tap_ok $? "a token file and a basic auth file together: the health status says set one"

# --- basic credentials from the file
set_conf "mlplat.registry_token_file = ''"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 30
rc=$?
tap_ok $rc "with user:password from mlplat.registry_basic_auth_file the alias is SYNCED"
[ $rc = 0 ] || row candidate

# --- the password is rotated in the registry, then in the file: used without a restart
admin PUT config '{"mlflowBasicAuth":"mlplat:second-pw"}' >/dev/null
admin DELETE requests >/dev/null
q $DB "SELECT mlplat.set_model_stage('regauth', 'iris', '2', 'CHAMPION')" >/dev/null
wait_for $DB "SELECT last_error IS NOT NULL FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" t 30
tap_ok $? "the registry's password rotated: the old one in the file is refused"
printf 'mlplat:second-pw\n' >"$BASIC.new" && chmod 644 "$BASIC.new" && mv "$BASIC.new" "$BASIC"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" SYNCED 60
rc=$?
tap_ok $rc "the file rewritten with the new password: the champion alias is SYNCED, no restart"
[ $rc = 0 ] || row champion

# --- file-mode rules as for the other credential files
chmod 666 "$BASIC"
wait_health "registry basic auth file refused: writable by everyone (mode 0666" 30
tap_ok $? "a world-writable basic auth file is refused, and the health status says why"
n0=$(mlflow_sent)
q $DB "SELECT mlplat.set_model_stage('regauth', 'iris', '3', 'CANDIDATE')" >/dev/null
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'model_aliases' AND role IN ('leader', 'idle')")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 3 FROM mlplat.reconciler_health WHERE kind = 'model_aliases' AND role IN ('leader', 'idle')" t 60
tap_ok $? "three more passes of the model_aliases reconciler"
tap_same "$n0" "$(mlflow_sent)" "... and nothing is sent to the registry meanwhile"
printf 'no-colon-here\n' >"$BASIC" && chmod 644 "$BASIC"
wait_health "registry basic auth file is not user:password on one line" 30
tap_ok $? "content that is not user:password is refused without showing it"
grep -qF "no-colon-here" "$WORK/server.log"
tap_ok $((!$?)) "... and the content is in no server log"
printf 'mlplat:second-pw\n' >"$BASIC" && chmod 644 "$BASIC"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 60
tap_ok $? "fixed: the candidate alias moves to version 3 and is SYNCED"

# --- TLS: the registry's certificate is signed by a CA the system does not trust
set_conf "mlplat.registry_url = '$STANDIN_TLS_URL'"
q $DB "SELECT mlplat.set_model_stage('regauth', 'iris', '1', 'CHAMPION')" >/dev/null
wait_for $DB "SELECT last_error ~* 'certificate|SSL|TLS' FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" t 30
rc=$?
tap_ok $rc "over https without mlplat.registry_ca_file the registry's certificate is not trusted"
[ $rc = 0 ] || row champion
set_conf "mlplat.registry_ca_file = '$STANDIN_TLS_CERT'"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" SYNCED 60
rc=$?
tap_ok $rc "with mlplat.registry_ca_file naming its CA the alias is SYNCED over TLS"
[ $rc = 0 ] || row champion
tap_done
