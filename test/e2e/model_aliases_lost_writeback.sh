#!/usr/bin/env bash
# Issue 22, model aliases: the model_aliases leader is terminated between a registry write
# and its write-back (the stand-in's MLflow applies the write and holds the answer).
#   A  the registered model's create: the next leader finds the model and records it
#      (ledger ADOPT, no answered CREATE), then goes on to the alias;
#   B  the candidate alias's SET, then set_model_stage makes the version CHAMPION (the
#      candidate alias must go) while the answer is held: the next leader records the SET
#      it finds made (ADOPT) before the DELETE that replaces it.
# Every registry write is noted in mlplat.unanswered_writes before it is sent; no note is
# left at the end.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
. "$(dirname "$0")/../lib/registry.sh"
SD=$WORK/standin-aliases-lwb
DB=mlplat
P=alwb
RM=$P.iris   # the registered model
MINE="model_id IN (SELECT m.id FROM mlplat.models m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = '$P')"
e2e_standin
on_exit 'release_holds drop; workers_resume $DB; registry_disconnect'

alias_id() { q $DB "SELECT id FROM mlplat.model_aliases WHERE $MINE AND alias = '$1'"; }
status_of() { q $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = '$1'"; }
notes() {
	q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'model_aliases'
	         AND (object = 'registered model $RM' OR object LIKE '$RM@%')"
}
model_ledger() {
	q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger
	        WHERE kind = 'model_aliases' AND detail->>'note' LIKE 'registered model $RM%'"
}
alias_ledger() {
	q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger
	        WHERE kind = 'model_aliases' AND entity_id = $1 AND action IN ('APPLY', 'DELETE', 'REPAIR', 'ADOPT')"
}
# kill_while_held: terminate the leader while its write's answer is held; run "$@" (the next
# intent) while no leader acts; then a new leader takes over
kill_while_held() {
	local epoch
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'model_aliases'")
	workers_pause $DB
	leader_kill $DB model_aliases
	"$@"
	workers_resume $DB
	wait_new_leader $DB model_aliases "$epoch"
}

q $DB "SELECT mlplat.create_project('$P', 4); SELECT mlplat.add_artifact_location('$P', 's3://models/')" >/dev/null
SHA=$(printf "alwb-v1" | sha256sum | cut -d' ' -f1)
q $DB "SELECT mlplat.register_model_version('$P', 'iris', '1', 's3://models/iris/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
# Other scripts leave staged versions behind, whose aliases the reconciler writes to this
# registry once it is configured: let those settle (no registry write for another project
# over three passes) before the one-shot holds below, which match any project's write.
registry_connect
others_writes() { q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'model_aliases' AND project IS DISTINCT FROM '$P'"; }
settled=1
for _ in $(seq 10); do
	before=$(others_writes)
	passes_after $DB model_aliases 3 || break
	[ "$(others_writes)" = "$before" ] && { settled=0; break; }
done
tap_ok $settled "other projects' alias writes have settled at this registry"

# --- A: the registered model's create is applied, its answer held; the leader is terminated
hold_rule '{"method":"POST","path":"registered-models/create$","hold":"after","times":1}' >/dev/null
q $DB "SELECT mlplat.set_model_stage('$P', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_held 1 30
tap_ok $? "A: the leader's create of registered model $RM is applied, its answer held"
tap_is "$(notes)" 1 "A: ... noted before it was sent"
kill_while_held true
tap_ok $? "A: a new model_aliases leader took over"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 30
tap_ok $? "A: the candidate alias is SYNCED"
V1=$(alias_of candidate)
tap_same "$V1" "$(q $DB "SELECT registry_version FROM mlplat.model_registry_versions rv JOIN mlplat.model_versions mv ON mv.id = rv.version_id WHERE mv.$MINE")" \
	"A: MLflow's candidate alias points at the version made for mlplat version 1 ($V1)"
# (CREATE:RETRY: the old leader's request timed out on the held answer before it was terminated)
l=$(model_ledger)
[[ "$l" =~ ^(CREATE:RETRY\ )?ADOPT:OK$ ]]
tap_ok $? "A: the ledger records the registered model found made (ADOPT), no answered CREATE ($l)"
release_holds
tap_is "$(notes)" 0 "A: no note left"

# --- B: the candidate alias's SET is applied, its answer held; the version is made CHAMPION
# meanwhile, so the candidate alias must go
hold_rule '{"method":"POST","path":"registered-models/alias$","hold":"after","times":1}' >/dev/null
q $DB "SELECT mlplat.set_model_stage('$P', 'iris', '1', 'NONE')" >/dev/null
wait_alias candidate INVALID_PARAMETER_VALUE 30
tap_ok $? "B: (stage NONE: the candidate alias deleted)"
q $DB "SELECT mlplat.set_model_stage('$P', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_held 1 30
tap_ok $? "B: the leader's SET of the candidate alias is applied, its answer held"
tap_same "$V1" "$(alias_of candidate)" "B: (the registry shows the SET)"
CAND=$(alias_id candidate)
before=$(alias_ledger "$CAND")
champion() { q $DB "SELECT mlplat.set_model_stage('$P', 'iris', '1', 'CHAMPION')" >/dev/null; }
kill_while_held champion
tap_ok $? "B: set_model_stage CHAMPION committed with no leader; a new leader took over"
wait_for $DB "SELECT string_agg(alias || '=' || status, ',' ORDER BY alias) FROM mlplat.model_aliases WHERE $MINE" \
	"candidate=SYNCED,champion=SYNCED" 30
tap_ok $? "B: both aliases SYNCED"
tap_is "$(alias_of candidate)/$(alias_of champion)" "INVALID_PARAMETER_VALUE/$V1" \
	"B: at the registry the candidate alias is gone and the champion alias points at version 1"
l=$(alias_ledger "$CAND")
[[ "${l#"$before" }" =~ ^(APPLY:RETRY\ )?ADOPT:OK\ DELETE:OK$ ]]
tap_ok $? "B: the ledger records the lost SET (ADOPT), then the DELETE that replaced it (${l#"$before" })"
release_holds
tap_is "$(notes)" 0 "B: no note left"
tap_same "$l" "$(alias_ledger "$CAND")" "B: the late answer adds nothing to the ledger"
tap_done
