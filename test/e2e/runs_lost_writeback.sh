#!/usr/bin/env bash
# Issue 22, runs: the runs leader is terminated between a Workflow create and its
# write-back, then the run is cancelled.  The new leader must not conclude "never
# submitted" from the database alone: it finds the workflow (or waits for the unanswered
# create to land), adopts it with a ledger ADOPT, and cancels it the normal way.
#   A  the create is in flight (held at the stand-in before it is applied) when the
#      leader dies; it lands only after the cancel and the new leader's first passes
#      (the soak's "CANCELLED vs workflow Succeeded");
#   B  the create is applied and its answer is in flight (the soak's "no CREATE/ADOPT");
#   C  the create never lands: after mlplat.unanswered_write_grace the run is CANCELLED;
#   D  the create is applied, its answer in flight, and the workflow succeeds before the
#      new leader's first pass: SUCCEEDED ("finished first"), adopted, not patched.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-runs-lwb
DB=mlplat
e2e_standin $DB
on_exit 'release_holds drop; workers_resume $DB; q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
admin PUT config '{"argoStepMs": 250}' >/dev/null
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '40s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null

q $DB "SELECT mlplat.create_project('lwb', 2)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'lwb'" READY 30 >/dev/null
tap_ok $? "project lwb is READY"
WF=/apis/argoproj.io/v1alpha1/namespaces/mlp-lwb/workflows
wf_state() {   # "<shutdown> <phase>" of a workflow at the stand-in, or "absent"
	kube GET "$WF/$1" | python3 -c 'import json,sys; w=json.load(sys.stdin)
print("absent" if w.get("kind") == "Status" else "%s %s" % (w["spec"].get("shutdown"), w.get("status", {}).get("phase")))'
}
creates() { admin GET writes | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Workflow/mlp-lwb/'"$1"'", {}).get("create", 0))'; }
notes() { q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'runs' AND object = 'mlp-lwb/$1'"; }

# one case: start a run whose create is held (before|after), kill the leader, cancel
interrupt() {   # NAME PHASE [TICKS] [BEFORE_RESUME]: run BEFORE_RESUME while no leader acts
	local name=$1 phase=$2 epoch
	admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lwb","name":"'"$name"'-1","steps":{"*":{"ticks":'"${3:-40}"'}}}' >/dev/null
	hold_rule '{"method":"POST","path":"/namespaces/mlp-lwb/workflows$","hold":"'"$phase"'","times":1}' >/dev/null
	q $DB "SELECT mlplat.start_run('lwb', '$name', '{\"image\": \"python:3.12\", \"gpus\": 1}')" >/dev/null
	wait_held 1
	tap_ok $? "$name: the leader's create is held at the stand-in ($phase it is applied)"
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'runs'")
	workers_pause $DB
	leader_kill $DB runs
	tap_is "$(q $DB "SELECT status FROM mlplat.cancel_run('lwb', '$name')")" CANCEL_REQUESTED \
		"$name: cancel_run commits while no leader has written the create back"
	tap_is "$(q $DB "SELECT submitted_at IS NULL FROM mlplat.runs WHERE name = '$name'")" t \
		"$name: the database says the run was never submitted"
	${4:-:}
	workers_resume $DB
	wait_new_leader $DB runs "$epoch"
	tap_ok $? "$name: a new runs leader took over"
}

# --- A: the create is in flight; it lands after the new leader's first passes
interrupt inflight before
passes_after $DB runs 3
tap_ok $? "A: three passes of the runs leader"
tap_is "$(q $DB "SELECT status FROM mlplat.runs WHERE name = 'inflight'")" CANCEL_REQUESTED \
	"A: the new leader does not call a run with an unanswered create CANCELLED while the workflow may still appear"
tap_is "$(wf_state inflight-1)" absent "A: (the workflow is not there yet)"
tap_is "$(q $DB "SELECT mlplat._gpus_in_use(id) FROM mlplat.projects WHERE name = 'lwb'")" 1 \
	"A: the run's GPU stays reserved in the project's quota while the workflow may still appear"
release_holds
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'inflight'" CANCELLED 30
tap_ok $? "A: once the workflow lands, the run is adopted and cancelled"
tap_is "$(wf_state inflight-1)" "Terminate Failed" "A: the workflow was stopped (spec.shutdown Terminate), not left to run"
tap_is "$(ledger_of $DB runs mlp-lwb/inflight-1)" "ADOPT:OK PATCH:OK" "A: the ledger records the adoption, then the shutdown"
tap_is "$(creates inflight-1)/$(notes inflight-1)" "1/0" "A: one create at the stand-in; no note left"

# --- B: the create is applied; its answer is in flight
interrupt answered after
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'answered'" CANCELLED 30
tap_ok $? "B: the run is adopted and cancelled"
tap_is "$(wf_state answered-1)" "Terminate Failed" "B: the workflow was stopped"
tap_is "$(ledger_of $DB runs mlp-lwb/answered-1)" "ADOPT:OK PATCH:OK" \
	"B: the ledger has the creation (ADOPT) as well as the shutdown"
release_holds
tap_is "$(creates answered-1)/$(notes answered-1)" "1/0" "B: one create at the stand-in; no note left"

# --- C: the create never lands: cancelled once it had the grace time to
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '3s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
interrupt lost before
release_holds drop
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'lost'" CANCELLED 30
tap_ok $? "C: a create that never lands: CANCELLED after the grace"
[[ "$(q $DB "SELECT status_reason FROM mlplat.runs WHERE name = 'lost'")" == *"never made it"* ]]
tap_ok $? "C: ... saying so"
tap_is "$(wf_state lost-1)/$(creates lost-1)/$(notes lost-1)" "absent/0/0" "C: no workflow, no create, no note left"

# --- D: the create is applied, its answer in flight, and the workflow succeeds before the
# new leader looks: the cancel came too late, the work is done and is reported as such
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '40s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
finished() {   # the workflow ran to the end at the stand-in, while no leader acts
	local deadline=$((SECONDS + 20))
	until [ "$(wf_state first-1)" = "None Succeeded" ]; do
		((SECONDS < deadline)) || { echo "# first-1 at the stand-in: $(wf_state first-1)"; return 1; }
		sleep 0.2
	done
}
interrupt first after 1 finished
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'first'" SUCCEEDED 30
tap_ok $? "D: a workflow that finished before the cancel took effect: the run is SUCCEEDED"
[[ "$(q $DB "SELECT status_reason FROM mlplat.runs WHERE name = 'first'")" == *"succeeded before the cancel"* ]]
tap_ok $? "D: ... saying the cancel came too late"
tap_is "$(wf_state first-1)" "None Succeeded" "D: the finished workflow was not patched"
tap_is "$(ledger_of $DB runs mlp-lwb/first-1)" "ADOPT:OK" "D: the ledger has the creation (ADOPT) and no PATCH"
release_holds
tap_is "$(creates first-1)/$(notes first-1)" "1/0" "D: one create at the stand-in; no note left"

q $DB "SELECT mlplat.delete_project('lwb')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'lwb'" DELETED 30 && wait_kube_gone /api/v1/namespaces/mlp-lwb 30
tap_ok $? "project lwb is DELETED and its namespace gone from the stand-in (GET is 404)"
tap_done
