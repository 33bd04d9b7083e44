#!/usr/bin/env bash
# Issue 22, projects: the projects leader is terminated between the apply of a
# project's Namespace and its write-back, then the project is deleted.
#   A  the apply is in flight (held at the stand-in before it is applied): the new
#      leader must not call the project DELETED while the namespace may still appear;
#      once it lands it is adopted (ledger ADOPT) and deleted;
#   B  the apply's answer is in flight: the namespace is adopted and deleted, and
#      the ledger records its creation as well as its deletion;
#   C  the apply is in flight and the new leader's own apply of it is refused (429):
#      that refusal must not settle the earlier apply's note, so when the held apply
#      lands the namespace is adopted (the soak's seed 32 found no ledger row).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-proj-lwb
DB=mlplat
e2e_standin $DB
on_exit 'release_holds drop; workers_resume $DB; q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '15s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null

ns_state() {   # the namespace at the stand-in: its phase, or "absent"
	kube GET "/api/v1/namespaces/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else o.get("status", {}).get("phase"))'
}
ledger() { q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY l.id), '') FROM mlplat.reconcile_ledger l
                  WHERE l.kind = 'projects' AND l.entity_id = (SELECT id FROM mlplat.projects WHERE name = '$1')
                    AND l.detail->>'note' LIKE 'Namespace %'"; }

interrupt() {   # NAME PHASE
	local name=$1 phase=$2 epoch
	hold_rule '{"method":"PATCH","path":"/api/v1/namespaces/mlp-'"$name"'$","hold":"'"$phase"'","times":1}' >/dev/null
	q $DB "SELECT mlplat.create_project('$name', 0)" >/dev/null
	wait_held 1 30
	tap_ok $? "$name: the leader's namespace apply is held at the stand-in ($phase it is applied)"
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'projects'")
	workers_pause $DB
	leader_kill $DB projects
	q $DB "SELECT mlplat.delete_project('$name')" >/dev/null
	tap_ok $? "$name: delete_project commits while no leader has written the apply back"
	workers_resume $DB
	wait_new_leader $DB projects "$epoch"
	tap_ok $? "$name: a new projects leader took over"
}

# --- A: the namespace apply is in flight
interrupt pla before
passes_after $DB projects 3
tap_ok $? "A: three passes of the projects leader"
tap_is "$(q $DB "SELECT status FROM mlplat.projects WHERE name = 'pla'")/$(ns_state mlp-pla)" "DELETING/absent" \
	"A: not DELETED while an unanswered apply may still make the namespace"
release_holds
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'pla'" DELETED 60
tap_ok $? "A: once the namespace lands, it is deleted and the project DELETED"
tap_is "$(ns_state mlp-pla)" absent "A: no namespace left at the stand-in"
tap_is "$(ledger pla)" "ADOPT:OK DELETE:OK" "A: the ledger records what the unanswered apply made, then its delete"

# --- B: the namespace apply's answer is in flight
interrupt plb after
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'plb'" DELETED 60
tap_ok $? "B: the project is DELETED"
tap_is "$(ns_state mlp-plb)" absent "B: no namespace left at the stand-in"
tap_is "$(ledger plb)" "ADOPT:OK DELETE:OK" "B: the ledger records the namespace's creation (ADOPT) as well as its DELETE"
release_holds

# --- C: the new leader's own apply is refused while the held one is still to land
hold_rule '{"method":"PATCH","path":"/api/v1/namespaces/mlp-plc$","hold":"before","times":1}' >/dev/null
q $DB "SELECT mlplat.create_project('plc', 0)" >/dev/null
wait_held 1 30
tap_ok $? "C: the leader's namespace apply is held at the stand-in (before it is applied)"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'projects'")
workers_pause $DB
leader_kill $DB projects
admin POST faults '{"method":"PATCH","path":"/api/v1/namespaces/mlp-plc$","status":429,"retryAfter":5,"times":1}' >/dev/null
workers_resume $DB
wait_new_leader $DB projects "$epoch"
tap_ok $? "C: a new projects leader took over"
ledger_sql="SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger
             WHERE kind = 'projects' AND detail->>'note' LIKE 'Namespace mlp-plc%'"
wait_for $DB "$ledger_sql" "APPLY:RETRY" 30
tap_ok $? "C: the new leader's apply of the namespace was refused (429) and recorded as such"
release_holds
wait_for $DB "$ledger_sql" "APPLY:RETRY ADOPT:OK" 30
tap_ok $? "C: once the held apply lands, the ledger records what it made (ADOPT)"
tap_is "$(ns_state mlp-plc)" Active "C: the namespace is there"
wait_for $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'projects'" 0 30
tap_ok $? "no note left behind"
tap_done
