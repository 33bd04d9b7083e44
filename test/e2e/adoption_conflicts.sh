#!/usr/bin/env bash
# Issue 18 finding 5: adoption only of what this installation made.  A reconciler
# that finds an object it could have made (a lost answer, a 409, a terminated leader)
# adopts it only when it is provably its own; a planted look-alike is a conflict,
# reported in the status and the ledger, and nothing is moved or touched.
#   registry: a model version carrying our mlplat.version_id tag (and even our
#     installation tag) but another source; one with our source but another
#     installation's tag;
#   (more kinds below)
set -u
. "$(dirname "$0")/../lib/tap.sh"
tap_require_cluster
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/standin.sh"
WORK=$MLPLAT_TEST_WORK
SD=$WORK/standin-adopt
DB=mlplat
trap '$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.registry_url" -c "ALTER SYSTEM RESET mlplat.registry_token_file" -c "SELECT pg_reload_conf()" >/dev/null; standin_disconnect $DB; standin_stop $SD' EXIT
standin_start "$SD"
tap_ok $? "stand-in started on port $STANDIN_PORT"
standin_connect $DB
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.registry_url = '$STANDIN_URL'" \
	-c "ALTER SYSTEM SET mlplat.registry_token_file = '$STANDIN_TOKEN_FILE'" -c "SELECT pg_reload_conf()" >/dev/null
mlflow() {
	curl -s -X "$1" -H "Authorization: Bearer $STANDIN_TOKEN" "$STANDIN_URL/api/2.0/mlflow/$2" \
		${3:+-H 'Content-Type: application/json' -d "$3"}
}
INSTANCE=$(q $DB "SELECT instance_id FROM mlplat.installation")

q $DB "SELECT mlplat.create_project('hostile', 2)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'hostile'" READY 30
tap_ok $? "project hostile is READY"

# ---------------------------------------------------------------- the registry
for v in 1 2; do
	q $DB "SELECT mlplat.register_model_version('hostile', 'iris', '$v', 's3://models/hostile/$v', '$(printf "h$v" | sha256sum | cut -d' ' -f1)', 'kserve-sklearnserver', 'sklearn')" >/dev/null
done
vid() { q $DB "SELECT v.id FROM mlplat.model_versions v JOIN mlplat.projects p ON p.id = v.project_id WHERE p.name = 'hostile' AND v.version = '$1'"; }
plant() {   # VERSION-ID SOURCE INSTALLATION — a version made by someone else, tagged as ours
	mlflow POST model-versions/create "{\"name\":\"hostile.iris\",\"source\":\"$2\",\"tags\":[{\"key\":\"mlplat.version_id\",\"value\":\"$1\"},{\"key\":\"mlplat.version\",\"value\":\"x\"},{\"key\":\"mlplat.installation\",\"value\":\"$3\"}]}" >/dev/null
}
alias_of() {
	mlflow GET "registered-models/alias?name=hostile.iris&alias=$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print(o["model_version"]["version"] if "model_version" in o else o.get("error_code", "?"))'
}
alias_row() { q $DB "SELECT a.status || ':' || (a.last_error LIKE '%not adopted%') FROM mlplat.model_aliases a JOIN mlplat.models m ON m.id = a.model_id JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'hostile' AND a.alias = '$1'"; }
conflicts() { echo "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'model_aliases' AND project = 'hostile' AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = 'model version $1 of hostile.iris'"; }
mlflow POST registered-models/create '{"name":"hostile.iris"}' >/dev/null

# our version tag and our installation tag, another source
plant "$(vid 1)" s3://evil/weights "$INSTANCE"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "$(conflicts 1)" t 20
tap_ok $? "registry: a planted version with our tags but another source is a conflict in the ledger"
tap_is "$(alias_row candidate)" "FAILED:true" "registry: the alias is FAILED, saying the version was not adopted"
tap_is "$(alias_of candidate)" INVALID_PARAMETER_VALUE "registry: no alias was moved to the planted version"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.model_registry_versions WHERE version_id = $(vid 1)")" 0 "registry: the planted version is not mapped"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '1', 'NONE')" >/dev/null

# our source, another installation's tag (the model's latest is now this one)
plant "$(vid 2)" s3://models/hostile/2 another-installation
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '2', 'CHAMPION')" >/dev/null
wait_for $DB "$(conflicts 2)" t 20
tap_ok $? "registry: a planted version with our source but another installation's tag is a conflict"
tap_is "$(alias_row champion)" "FAILED:true" "registry: that alias is FAILED too"
tap_is "$(alias_of champion)" INVALID_PARAMETER_VALUE "registry: and not moved"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '2', 'NONE')" >/dev/null

tap_done
