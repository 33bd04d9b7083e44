#!/usr/bin/env bash
# Model aliases end to end against the stand-in's MLflow, with the real workers:
# no registry -> the health view says so; stages -> registry aliases (created
# model and versions, verified); an alias moved behind our back -> repaired on
# resync; stage NONE -> alias deleted; every move in the alias history.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
. "$(dirname "$0")/../lib/registry.sh"
SD=$WORK/standin-aliases
DB=mlplat
# The e2e scripts share one database: everything here is scoped to project aliaslab.
MINE="model_id IN (SELECT m.id FROM mlplat.models m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'aliaslab')"
RM=aliaslab.iris   # the registered model
ALIAS_TAGS=1      # alias_of says "<registry version>/<mlplat.version tag>"

registry_disconnect
e2e_standin
on_exit 'registry_disconnect'

regv() { q $DB "SELECT registry_version FROM mlplat.model_registry_versions rv JOIN mlplat.model_versions mv ON mv.id = rv.version_id WHERE mv.version = '$1' AND mv.$MINE"; }
status_of() { q $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = '$1'"; }
mlflow_writes() { admin GET 'requests?write=mlflow' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'; }
as_alice() { $PSQL -d $DB -c "SET mlplat.on_behalf_of = 'alice'" -c "$1"; }

q $DB "DO \$\$ BEGIN CREATE ROLE alice NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" >/dev/null
q $DB "DO \$\$ BEGIN CREATE ROLE mallory NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" >/dev/null
q $DB "SELECT mlplat.create_project('aliaslab', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('aliaslab', 's3://models/')" >/dev/null
q $DB "SELECT mlplat.grant_role('aliaslab', 'alice', 'deployer')" >/dev/null
for v in 1 2; do
	SHA=$(printf "iris-v$v" | sha256sum | cut -d' ' -f1)
	q $DB "SELECT mlplat.register_model_version('aliaslab', 'iris', '$v', 's3://models/iris/$v', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
done

# --- no registry configured: the reconciler idles and says so; nothing is sent
as_alice "SELECT mlplat.set_model_stage('aliaslab', 'iris', '1', 'CANDIDATE')" >/dev/null
tap_ok $? "alice stages version 1 as CANDIDATE"
wait_for $DB "SELECT bool_or(status LIKE '%no model registry configured%') FROM mlplat.reconciler_health WHERE kind = 'model_aliases'" t 15
tap_ok $? "without mlplat.registry_url the health view says no model registry is configured"
sleep 1
tap_is "$(status_of candidate)/$(mlflow_writes)" "PENDING/0" "the alias stays PENDING and the registry is not written"

# --- registry configured: the candidate alias is created, with the model and version
registry_connect
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 15
rc=$?
tap_ok $rc "the candidate alias is SYNCED once a registry is configured"
if [ $rc != 0 ]; then
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'model_aliases'" | sed 's/^/# health: /'
	q $DB "SELECT alias, status, status_reason, last_error FROM mlplat.model_aliases WHERE $MINE" | sed 's/^/# row: /'
fi
# Other scripts' projects leave staged versions behind; the reconciler may write their
# aliases to this stand-in's MLflow once a registry is configured.  Let that settle first
# (no registry write for another project over three passes), so that the one-shot faults
# below are spent on this project's writes, not on theirs.
others_writes() {
	q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'model_aliases' AND project IS DISTINCT FROM 'aliaslab'"
}
settled=1
for _ in $(seq 10); do
	before=$(others_writes)
	passes_after $DB model_aliases 3 || break
	[ -n "$before" ] && [ "$(others_writes)" = "$before" ] && { settled=0; break; }
done
tap_ok $settled "other projects' alias writes have settled at this registry ($(others_writes) ledger rows)"
V1=$(regv 1)
tap_ok $([ -n "$V1" ]; echo $?) "the registry version of mlplat version 1 is recorded ($V1)"
tap_is "$(alias_of candidate)" "$V1/1" "MLflow's candidate alias points at the version created for mlplat version 1"
tap_is "$(mlflow GET 'model-versions/get?name=aliaslab.iris&version='"$V1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model_version"]["source"])')" \
	"s3://models/iris/1" "the registry version's source is the artifact URI"
tap_is "$(q $DB "SELECT action || ':' || requested_by || ':' || registry_version || ':' || coalesce(observed_version, '-') FROM mlplat.model_alias_history WHERE $MINE AND alias = 'candidate'")" \
	"SET:alice:$V1:-" "history: alice's SET of candidate, from no alias"
# alias_spans ALIAS — its reconciler spans: "<name> <status> <action> <http> <parent API span>"
alias_spans() {
	q $DB "SELECT s.name || ' ' || s.status || ' ' || (s.attributes->>'mlplat.alias.action') || ' ' ||
	              coalesce(s.attributes->>'http.response.status_code', '-') || ' ' || coalesce(a.name, 'NO-PARENT')
	         FROM mlplat.trace_spans s
	         LEFT JOIN mlplat.trace_spans a ON a.trace_id = s.trace_id AND a.span_id = s.parent_span_id AND a.kind = 'SERVER'
	        WHERE s.entity = 'model_alias' AND s.name LIKE 'model_aliases.%'
	          AND s.entity_id = (SELECT id FROM mlplat.model_aliases WHERE $MINE AND alias = '$1')
	        ORDER BY s.start_time, s.name DESC"
}
tap_is "$(alias_spans candidate | tr '\n' ',')" \
	"model_aliases.write UNSET SET 200 mlplat.set_model_stage,model_aliases.verify UNSET SET 200 mlplat.set_model_stage," \
	"spans: the registry write and its read-back, under alice's set_model_stage call"

# --- CHAMPION: champion set, candidate (no longer staged) deleted
as_alice "SELECT mlplat.set_model_stage('aliaslab', 'iris', '1', 'CHAMPION')" >/dev/null
wait_alias champion "$V1/1" 15
tap_ok $? "stage CHAMPION sets MLflow's champion alias to version 1"
wait_alias candidate INVALID_PARAMETER_VALUE 15
tap_ok $? "the candidate alias, no longer staged, is deleted from MLflow"
wait_for $DB "SELECT string_agg(alias || '=' || status, ',' ORDER BY alias) FROM mlplat.model_aliases WHERE $MINE" "candidate=SYNCED,champion=SYNCED" 10
tap_ok $? "both aliases SYNCED after verification"

# --- a new champion moves the alias; the old champion is archived.  The version
# create is applied but its answer lost, and the first two alias writes fail
# with 503: the reconciler adopts the version it made (no duplicate), shows the
# errors and retries with backoff.
admin POST faults '{"method":"POST","path":"model-versions/create$","drop":1,"times":1}' >/dev/null
admin POST faults '{"method":"POST","path":"registered-models/alias$","status":503,"times":2}' >/dev/null
as_alice "SELECT mlplat.set_model_stage('aliaslab', 'iris', '2', 'CHAMPION')" >/dev/null
V2=""
for _ in $(seq 100); do V2=$(regv 2); [ -n "$V2" ] && break; sleep 0.1; done
wait_alias champion "$V2/2" 15
tap_ok $? "a new CHAMPION moves MLflow's champion alias to version 2 ($V2)"
tap_ok $([ -n "$V2" ] && [ "$V2" != "$V1" ]; echo $?) "version 2 got its own registry version"
tap_is "$(q $DB "SELECT observed_version || '->' || registry_version FROM mlplat.model_alias_history WHERE $MINE AND alias = 'champion' ORDER BY id DESC LIMIT 1")" \
	"$V1->$V2" "history: the champion move records what it replaced"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" SYNCED 10
tap_ok $? "champion SYNCED on version 2"
tap_is "$(q $DB "SELECT count(*) FILTER (WHERE action = 'CREATE' AND outcome = 'RETRY' AND error LIKE '%registry request failed%') || '/' || count(*) FILTER (WHERE action = 'ADOPT' AND outcome = 'OK') FROM mlplat.reconcile_ledger WHERE project = 'aliaslab' AND entity = 'model_alias'")" \
	"1/1" "the lost create answer is shown, then the version made by it adopted"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'aliaslab' AND entity = 'model_alias' AND action = 'APPLY' AND outcome = 'RETRY' AND http_status = 503 AND error LIKE '%HTTP 503%'")" \
	2 "both 503 answers are shown in the ledger, each retried"
tap_is "$(q $DB "SELECT attempts || ':' || coalesce(last_error, '-') FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'")" "0:-" \
	"after success the retry state is cleared"

# --- steady state: resyncs read, but write nothing
w0=$(mlflow_writes)
sleep 5   # the test cluster resyncs every 2 s
w1=$(mlflow_writes)
tap_ok $([ -n "$w0" ] && [ "$w0" -gt 0 ] && [ "$w1" = "$w0" ]; echo $?) "steady state: no registry writes over 5 s of resyncs ($w0 before, $w1 after)"

# --- moved behind our back: someone points champion at version 1 directly in MLflow
# (Reading the alias back would race the repair, which may land first on a busy
# machine; the REPAIR history row below names the version the move had set.)
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $STANDIN_TOKEN" \
	-H 'Content-Type: application/json' "$STANDIN_URL/api/2.0/mlflow/registered-models/alias" \
	-d "{\"name\":\"aliaslab.iris\",\"alias\":\"champion\",\"version\":\"$V1\"}")" 200 \
	"MLflow accepted the outside move of champion to version 1"
wait_alias champion "$V2/2" 15
tap_ok $? "the outside move is repaired on resync: champion is back on version 2"
wait_for $DB "SELECT count(*) FROM mlplat.model_alias_history WHERE $MINE AND action = 'REPAIR' AND alias = 'champion' AND observed_version = '$V1' AND registry_version = '$V2'" 1 10
tap_ok $? "history: one REPAIR row naming the outside version it replaced"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'aliaslab' AND kind = 'model_aliases' AND entity = 'model_alias' AND action = 'REPAIR' AND outcome = 'OK' AND epoch = (SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'model_aliases')")" \
	1 "the ledger shows the REPAIR, stamped with the leader's epoch"
tap_is "$(alias_spans champion | grep -c '^model_aliases.write UNSET REPAIR 200 mlplat.set_model_stage$')" 1 \
	"the repair is a span too, in the trace of the stage change it restores"

# --- stage NONE: the champion alias is deleted
as_alice "SELECT mlplat.set_model_stage('aliaslab', 'iris', '2', 'NONE')" >/dev/null
wait_alias champion INVALID_PARAMETER_VALUE 15
tap_ok $? "stage NONE deletes MLflow's champion alias"
wait_for $DB "SELECT status || ':' || (version_id IS NULL) FROM mlplat.model_aliases WHERE $MINE AND alias = 'champion'" "SYNCED:true" 10
tap_ok $? "the absent champion is SYNCED (verified)"

# --- the history, the ledger, and who may read them
tap_is "$(q $DB "SELECT string_agg(alias || ':' || actions, ' ' ORDER BY alias) FROM (SELECT alias, string_agg(action, ',' ORDER BY id) AS actions FROM mlplat.model_alias_history WHERE $MINE GROUP BY alias) h")" \
	"candidate:SET,DELETE champion:SET,SET,REPAIR,DELETE" "history has one row per move, in order per alias"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.model_alias_history WHERE $MINE AND (requested_by IS DISTINCT FROM 'alice' OR epoch IS NULL OR controller = '')")" \
	0 "every history row names alice, the epoch and the controller"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'aliaslab' AND entity = 'model_alias' AND action = 'CREATE' AND outcome = 'OK'")" \
	2 "the ledger shows the registered model and version 1 created (version 2 was adopted)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = 'aliaslab' AND entity = 'model_alias' AND action IN ('APPLY', 'DELETE', 'REPAIR') AND outcome = 'OK'")" \
	6 "the ledger shows one OK row per alias move"
tap_is "$(mlflow GET 'registered-models/get?name=aliaslab.iris' | python3 -c 'import json,sys; print(json.load(sys.stdin)["registered_model"]["latest_versions"][0]["version"])')/$(mlflow GET "model-versions/get?name=aliaslab.iris&version=3" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("error_code"))')" \
	"$V2/RESOURCE_DOES_NOT_EXIST" "no duplicate registry version was created: version 2 is the latest, there is no 3"
tap_is "$($PSQL -d $DB -c "SET ROLE mallory" -c "SELECT count(*) FROM mlplat.model_alias_history")" 0 "a non-member sees no history rows (RLS)"
tap_is "$($PSQL -d $DB -c "SET ROLE alice" -c "SELECT count(*) FROM mlplat.model_alias_history WHERE registered_model = 'aliaslab.iris'")" 6 "a project member reads the history"

# --- the token file is re-read when it changes: a wrong token is shown as the
# registry's refusal (FAILED, retried slowly); the right one heals it
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.backoff_max = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
printf 'wrong-token' >"$STANDIN_TOKEN_FILE"
as_alice "SELECT mlplat.set_model_stage('aliaslab', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "SELECT status || ':' || (last_error LIKE '%HTTP 401 UNAUTHENTICATED%') FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" "FAILED:true" 15
tap_ok $? "a rotated-away token is picked up: the registry's 401 is shown and the alias FAILED"
tap_is "$(alias_of candidate)" INVALID_PARAMETER_VALUE "nothing was set with the wrong token"
printf '%s' "$STANDIN_TOKEN" >"$STANDIN_TOKEN_FILE"
wait_alias candidate "$V1/1" 15
tap_ok $? "the right token in the file heals it: candidate set on version 1"
wait_for $DB "SELECT status || ':' || coalesce(last_error, '-') FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" "SYNCED:-" 10
tap_ok $? "candidate SYNCED, error cleared"
tap_ok $(grep -q "$STANDIN_TOKEN" "$MLPLAT_TEST_WORK"/server.log 2>/dev/null; [ $? = 1 ]; echo $?) "the token never appears in the server log"
tap_done
