#!/usr/bin/env bash
# Model aliases on the real MLflow tracking server (PyPI, pinned in
# test/real/versions.env), its backend store a database of this test's
# PostgreSQL cluster: stages become registry aliases on versions mlplat
# creates, an alias moved behind mlplat's back is repaired, stage NONE deletes
# the alias (real MLflow reads a DELETE's parameters from the JSON body only)
# and a missing alias reads back as MLflow's 400 INVALID_PARAMETER_VALUE.
# With the basic-auth app on, a bearer token is refused; mlplat authenticates
# with HTTP Basic from mlplat.registry_basic_auth_file, re-read when the
# password is rotated.
# Its own cluster (and stand-in): in the suite's shared one the registry would also
# be asked about every alias the scripts before it left (41 on 35 models), and after
# the password rotation each of those retries against the basic-auth app's one worker,
# which checks a password hash per request: this script's own requests then timed out.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
. "$SRC/test/lib/registry.sh"
e2e_standin_cluster real_aliases
tap_ok $? "a cluster of this script's own, with its stand-in"
real_preamble aliases
DB=mlplat
q postgres "CREATE DATABASE $DB" >/dev/null && q $DB "CREATE EXTENSION mlplat" >/dev/null
MINE="model_id IN (SELECT m.id FROM mlplat.models m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'realalias')"
RM=realalias.iris   # the registered model
ALIAS_TAGS=1        # alias_of says "<registry version>/<mlplat.version tag>"
on_exit registry_disconnect
real_mlflow_start "$RD"
tap_ok $? "real mlflow server started, backend store in this test's PostgreSQL"
printf 'unused-by-mlflow-oss-%s' "$RANDOM" >"$RD/token"
chmod 644 "$RD/token"

# mlflow (test/lib/registry.sh) reads the real server; MLFLOW_USER: user:password for the basic-auth app
MLFLOW_URL=$REAL_MLFLOW
regv() { q $DB "SELECT registry_version FROM mlplat.model_registry_versions rv JOIN mlplat.model_versions mv ON mv.id = rv.version_id WHERE mv.version = '$1' AND mv.$MINE"; }
rows() { q $DB "SELECT alias, status, status_reason, last_error FROM mlplat.model_aliases WHERE $MINE" | sed 's/^/# row: /'; }

q $DB "SELECT mlplat.create_project('realalias', 1); SELECT mlplat.add_artifact_location('realalias', 's3://models/')" >/dev/null
for v in 1 2; do
	SHA=$(printf "iris-v$v" | sha256sum | cut -d' ' -f1)
	q $DB "SELECT mlplat.register_model_version('realalias', 'iris', '$v', 's3://models/iris/$v', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
done
registry_connect "$REAL_MLFLOW" "$RD/token"
q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 60
rc=$?
tap_ok $rc "the candidate alias is SYNCED on real MLflow"
[ $rc = 0 ] || rows
V1=$(regv 1)
tap_is "$(alias_of candidate)" "$V1/1" "MLflow's candidate alias points at the version mlplat created for version 1"
tap_is "$(mlflow GET "model-versions/get?name=realalias.iris&version=$V1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model_version"]["source"])')" \
	"s3://models/iris/1" "the registry version's source is the artifact URI"

q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '1', 'CHAMPION')" >/dev/null
wait_alias champion "$V1/1" 60
tap_ok $? "stage CHAMPION sets the champion alias on version 1"
wait_alias candidate INVALID_PARAMETER_VALUE 60
tap_ok $? "the candidate alias, no longer staged, is deleted (DELETE with a JSON body)"
tap_is "$(mlflow GET 'registered-models/alias?name=realalias.iris&alias=candidate' | python3 -c 'import json,sys; print(json.load(sys.stdin)["error_code"])')/$(curl -s -o /dev/null -w '%{http_code}' "$REAL_MLFLOW/api/2.0/mlflow/registered-models/alias?name=realalias.iris&alias=candidate")" \
	"INVALID_PARAMETER_VALUE/400" "a missing alias is MLflow's 400 INVALID_PARAMETER_VALUE, not 404"
q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '2', 'CHAMPION')" >/dev/null
V2=""
for _ in $(seq 150); do V2=$(regv 2); [ -n "$V2" ] && break; sleep 0.2; done
wait_alias champion "$V2/2" 60
tap_ok $? "a new CHAMPION moves the champion alias to version 2 ($V2)"
wait_for $DB "SELECT string_agg(alias || '=' || status, ',' ORDER BY alias) FROM mlplat.model_aliases WHERE $MINE" "candidate=SYNCED,champion=SYNCED" 30
tap_ok $? "both aliases SYNCED after verification"

tap_is "$(mlflow POST registered-models/alias "{\"name\":\"realalias.iris\",\"alias\":\"champion\",\"version\":\"$V1\"}")" "{}" \
	"an outside client moves champion to version 1"
wait_for $DB "SELECT count(*) FROM mlplat.model_alias_history WHERE $MINE AND action = 'REPAIR' AND alias = 'champion' AND observed_version = '$V1' AND registry_version = '$V2'" 1 60
tap_ok $? "the outside move is repaired, with a REPAIR history row"
wait_alias champion "$V2/2" 30
tap_ok $? "champion is back on version 2"

q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '2', 'NONE')" >/dev/null
wait_alias champion INVALID_PARAMETER_VALUE 60
tap_ok $? "stage NONE deletes the champion alias on real MLflow"
wait_for $DB "SELECT status || ':' || (version_id IS NULL) FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" "SYNCED:true" 30
tap_ok $? "the absent champion is SYNCED (verified)"
tap_is "$(mlflow GET "model-versions/get?name=realalias.iris&version=3" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("error_code"))')" \
	RESOURCE_DOES_NOT_EXIST "no duplicate registry version was created"

# ---------------------------------------------------------------- the basic-auth app
real_stop "$RD"
real_mlflow_start "$RD" basic-auth
tap_ok $? "real mlflow server restarted with its basic-auth app"
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -u "admin:$REAL_MLFLOW_ADMIN_PASSWORD" "$REAL_MLFLOW/api/2.0/mlflow/registered-models/search")" 200 \
	"HTTP Basic credentials are accepted"
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$RD/token")" "$REAL_MLFLOW/api/2.0/mlflow/registered-models/search")" 401 \
	"a bearer token is refused with 401"
printf 'admin:%s\n' "$REAL_MLFLOW_ADMIN_PASSWORD" >"$RD/basic"
chmod 644 "$RD/basic"
MLFLOW_USER=admin:$REAL_MLFLOW_ADMIN_PASSWORD
MLFLOW_URL=$REAL_MLFLOW # the restarted server listens on a new port
# no token (the test cluster plants one in its configuration); a refused alias (FAILED)
# is retried after min(30 s, mlplat.backoff_max): soon, here
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.registry_basic_auth_file = '$RD/basic'" -c "ALTER SYSTEM SET mlplat.backoff_max = '2s'" >/dev/null
registry_connect "$REAL_MLFLOW" ""
q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 60
rc=$?
tap_ok $rc "mlplat syncs an alias through the basic-auth app, with HTTP Basic from mlplat.registry_basic_auth_file"
[ $rc = 0 ] || rows
wait_alias candidate "$(regv 1)/1" 30
tap_ok $? "... and MLflow's candidate alias points at the version mlplat created"
# the password is rotated in MLflow (its auth API), then in the file
NEWPW=pw2-$RANDOM$RANDOM-x
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -u "admin:$REAL_MLFLOW_ADMIN_PASSWORD" -X PATCH -H 'Content-Type: application/json' \
	-d "{\"username\":\"admin\",\"password\":\"$NEWPW\",\"current_password\":\"$REAL_MLFLOW_ADMIN_PASSWORD\"}" "$REAL_MLFLOW/api/2.0/mlflow/users/update-password")" 200 \
	"MLflow's admin password is rotated"
q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '2', 'CHAMPION')" >/dev/null
wait_for $DB "SELECT coalesce(last_error, '') LIKE '%401%' FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" t 60
tap_ok $? "the old password in the file is refused (401)"
printf 'admin:%s\n' "$NEWPW" >"$RD/basic.new" && chmod 644 "$RD/basic.new" && mv "$RD/basic.new" "$RD/basic"
MLFLOW_USER=admin:$NEWPW
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" SYNCED 60
rc=$?
tap_ok $rc "the file rewritten with the new password is read again: the champion alias is SYNCED, no restart"
[ $rc = 0 ] || rows
q $DB "SELECT mlplat.set_model_stage('realalias', 'iris', '1', 'NONE'); SELECT mlplat.set_model_stage('realalias', 'iris', '2', 'NONE')" >/dev/null
tap_done
