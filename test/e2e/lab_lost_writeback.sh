#!/usr/bin/env bash
# Issue 22, lab runs: the lab_runs leader is terminated while its Job create is in flight
# (held at the stand-in before it is applied), then the run is cancelled.  The new leader
# must not conclude "no Job" from the database or from a first LIST alone:
#   A  the create lands after the cancel and the new leader's first passes: the run stays
#      CANCEL_REQUESTED (no Job yet) until it does; then the Job is adopted and deleted
#      (ledger ADOPT, DELETE) and the run CANCELLED; one create, no note left;
#   B  the create never lands: CANCELLED after mlplat.unanswered_write_grace, no Job.
# The input Secret, created earlier in the same pass, lost its write-back too: it is adopted
# (ledger ADOPT) and its note settled.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-lwb
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
DB=mlplat
P=llwb
NS=mlp-$P
on_exit 'release_holds drop; workers_resume $DB; $PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.lab_payload_bucket" -c "ALTER SYSTEM RESET mlplat.unanswered_write_grace" -c "SELECT pg_reload_conf()" >/dev/null'
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.lab_payload_bucket = 'artifacts'" \
	-c "ALTER SYSTEM SET mlplat.unanswered_write_grace = '40s'" -c "SELECT pg_reload_conf()" >/dev/null

lab_fixture llwb_owner gpu-lwb
NODE=$(q $DB "SELECT id FROM mlplat.lab_nodes WHERE name = 'gpu-lwb'")
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"probe":"ok"}')]}"
asowner "SELECT mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $NODE, 'llwb-probe')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $ID" PASSED 90
tap_ok $? "the probe PASSED (run: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $NODE" 0 60
tap_ok $? "the probe's lease is released"
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $NODE, '{text_generation}', '{}', 10, '1 day')" >/dev/null
APPR=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $NODE")

job_code() { kube_code "/apis/batch/v1/namespaces/$NS/jobs/lab-$1-1"; }
notes() { q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'lab_runs' AND entity_id = $1"; }
explain() {   # RUN: its ledger rows and notes, as TAP comments
	q $DB "SELECT '# ledger ' || action || ':' || outcome || ' ' || coalesce(detail->>'note', '') FROM mlplat.reconcile_ledger
	        WHERE kind = 'lab_runs' AND entity_id = $1 ORDER BY id"
	q $DB "SELECT '# note ' || object || ' ' || coalesce(action, '') FROM mlplat.unanswered_writes WHERE kind = 'lab_runs' AND entity_id = $1"
}

# one case: start a run whose Job create is held before it is applied, kill the leader,
# cancel; sets ID to the run's id
interrupt() {   # KEY
	local id epoch
	id=$(next_id)
	ID=$id
	plan "lab-$id-1" '{"ticks":200}'
	hold_rule '{"method":"POST","path":"/namespaces/'"$NS"'/jobs$","hold":"before","times":1}' >/dev/null
	asowner "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APPR,
		'text_generation', '[{\"prompt\": \"hi\", \"max_tokens\": 4}]', '{}', '$1')" >/dev/null
	wait_held 1 60
	tap_ok $? "$1: the leader's Job create is held at the stand-in before it is applied"
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'lab_runs'")
	workers_pause $DB
	leader_kill $DB lab_runs
	tap_is "$(asowner "SELECT status FROM mlplat.cancel_lab_run('$P', $id)")" CANCEL_REQUESTED \
		"$1: cancel_lab_run commits while no leader has written the create back"
	workers_resume $DB
	wait_new_leader $DB lab_runs "$epoch" 60
	tap_ok $? "$1: a new lab_runs leader took over"
}

# --- A: the create is in flight; it lands after the new leader's first passes
interrupt llwb-inflight
passes_after $DB lab_runs 3
tap_ok $? "A: three passes of the lab_runs worker"
tap_is "$(status "$ID")/$(job_code "$ID")" CANCEL_REQUESTED/404 \
	"A: the run stays CANCEL_REQUESTED while its unanswered Job create may still land (no Job yet)"
release_holds
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" CANCELLED 60
tap_ok $? "A: once the Job lands, it is adopted and the run CANCELLED (now: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 30
tap_ok $? "A: ... its lease released"
l=$(ledger_of $DB lab_runs "$NS/lab-$ID-1")
[[ "$l" =~ ^ADOPT:OK\ DELETE:OK ]]
tap_ok $? "A: the ledger records the Job's adoption, then its delete ($l)"
l=$(ledger_of $DB lab_runs "$NS/lab-$ID-input")
[[ "$l" =~ ^ADOPT:OK ]]
tap_ok $? "A: the input Secret, created in the same lost pass, is in the ledger too (ADOPT) ($l)"
v=$(job_code "$ID")/$(creates "Job/$NS/lab-$ID-1")/$(notes "$ID")
tap_is "$v" 404/1/0 "A: the Job is gone; it was created once; no note left"
[ "$v" = 404/1/0 ] || explain "$ID"

# --- B: the create never lands: cancelled once it had the grace time to
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.unanswered_write_grace = '3s'" -c "SELECT pg_reload_conf()" >/dev/null
interrupt llwb-lost
release_holds drop
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" CANCELLED 60
tap_ok $? "B: a Job create that never lands: CANCELLED after the grace (now: $(status "$ID"))"
l=$(ledger_of $DB lab_runs "$NS/lab-$ID-input")
[[ "$l" =~ ^ADOPT:OK ]]
tap_ok $? "B: the input Secret its lost pass created is in the ledger (ADOPT) ($l)"
v=$(job_code "$ID")/$(creates "Job/$NS/lab-$ID-1")/$(notes "$ID")
tap_is "$v" 404/0/0 "B: no Job, no create, no note left"
[ "$v" = 404/0/0 ] || explain "$ID"
tap_done
