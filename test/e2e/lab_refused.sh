#!/usr/bin/env bash
# Model Lab: a create refused for good ends the run (issue 15; spec §8 WORKER_REFUSED,
# "permanent 4xx on create"), with the real lab_runs worker against the stand-in:
#  - the input Secret's create answered 422 Invalid: FAILED WORKER_REFUSED at once, the
#    refusal in status_reason, no retry although a second attempt was allowed, no Secret and no
#    Job made, the node lease and the GPUs released;
#  - the Job's create answered 400 BadRequest: the same, and the Secret made in that pass is
#    deleted (no Job left, nothing of the run left);
#  - the node is free again: the next run on it SUCCEEDED.
# A 403 (an access an operator can grant) still blocks and waits: lab_blocked.sh.
# Every wait is for an observable outcome, bounded (the script runs under ASan).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-refused
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
DB=mlplat
P=lr
NS=mlp-$P

q $DB "CREATE ROLE lr_dev LOGIN" >/dev/null 2>&1
lab_fixture lr_owner gpu-r1
q $DB "SELECT mlplat.grant_role('$P', 'lr_dev', 'developer')" >/dev/null
N1=$(lab_node_id gpu-r1)
job() { echo "/apis/batch/v1/namespaces/$NS/jobs/$1"; }
secret() { echo "/api/v1/namespaces/$NS/secrets/$1"; }

lab_probe $N1 lr-probe
tap_ok $? "a probe made through the API PASSED"
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $N1, '{text_generation}', '{\"max_attempts\": 2}', 100, '1 day')" >/dev/null
A1=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $N1")
start() {   # key -> the run's id (two attempts allowed: a refusal must not use the second)
	$PSQL -d $DB -U lr_dev -c "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $N1, $A1,
		'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '{\"max_attempts\": 2}', '$1')"
}
refused() {   # run -> until it is FAILED WORKER_REFUSED with its node lease released
	wait_for $DB "SELECT r.status || ' ' || coalesce(r.reason_code, '') || ' '
	                     || (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id)
	              FROM mlplat.lab_runs r WHERE r.id = $1" "FAILED WORKER_REFUSED 0" 60
}
ended() {   # run -> "reason / attempt / leases / GPUs in use / refused ledger rows"
	q $DB "SELECT coalesce(r.status_reason, '-') || ' / ' || r.attempt || ' / '
	         || (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id) || ' / '
	         || mlplat._gpus_in_use($PID) || ' / '
	         || (SELECT count(*) FROM mlplat.reconcile_ledger g WHERE g.kind = 'lab_runs' AND g.entity_id = r.id
	              AND g.action = 'CREATE' AND g.outcome = 'FAILED')
	       FROM mlplat.lab_runs r WHERE r.id = $1"
}

# refused_case STATUS WHAT PATH KEY OBJECT MADE: the create at PATH answered STATUS; the run (key
# KEY) ends for good, the refusal of OBJECT (lab-<id>-OBJECT) in its reason; MADE: the
# creates the stand-in stored (Secret/Job attempt 1/Job attempt 2) and the Job's GET code
refused_case() {
	local f e
	ID=$(next_id)
	plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"never":"run"}')]}"
	f=$(hold_rule '{"method":"POST","path":"'"$3"'","status":'"$1"'}')
	start "$4" >/dev/null
	refused "$ID"
	tap_ok $? "$2 create refused $1: run $ID FAILED WORKER_REFUSED, its node lease released (now: $(status "$ID"))"
	wait_kube_gone "$(secret "lab-$ID-input")" 30
	tap_ok $? "no Secret of the run is left"
	e=$(ended "$ID")
	[[ "$e" == "the create of $NS/lab-$ID-$5 was refused (HTTP $1): "*" / 1 / 0 / 0 / 1" ]]
	tap_ok $? "the refusal in status_reason, attempt 1 (no retry), no lease, no GPU in use, ledger CREATE FAILED ($e)"
	tap_same "$(creates "Secret/$NS/lab-$ID-input")/$(creates "Job/$NS/lab-$ID-1")/$(creates "Job/$NS/lab-$ID-2")/$(kube_code "$(job "lab-$ID-1")")" \
		"$6" "stored creates (Secret/Job/second attempt's Job) and the Job: $6"
	tap_same "$(q $DB "SELECT string_agg(coalesce(from_status, '-') || '>' || to_status || ':' || coalesce(reason_code, '-'), ' ' ORDER BY seq)
	                   FROM mlplat.lab_run_transitions WHERE lab_run_id = $ID")" \
		"->QUEUED:- QUEUED>DISPATCHED:- DISPATCHED>FAILED:WORKER_REFUSED" "transitions: DISPATCHED -> FAILED WORKER_REFUSED"
	admin DELETE "faults/$f" >/dev/null
}
# the input Secret refused 422 Invalid: nothing made; the Job refused 400 BadRequest: its
# Secret, made in the same pass, deleted since
refused_case 422 Secret "^/api/v1/namespaces/$NS/secrets\$" lr-invalid-secret input 0/0/0/404
refused_case 400 Job "^/apis/batch/v1/namespaces/$NS/jobs\$" lr-bad-job 1 1/0/0/404

# --- the node is free: the next run on it runs
ID=$(next_id)
OUT='{"outputs":[{"text":"after the refusals"}]}'
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 "$OUT")]}"
start lr-after >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 60
tap_ok $? "the next run on the node SUCCEEDED (now: $(status "$ID"))"
tap_same "$(q $DB "SELECT output_digest FROM mlplat.lab_runs WHERE id = $ID")" "$(printf '%s' "$OUT" | sha256sum | cut -d' ' -f1)" \
	"its output is ingested"

tap_done
