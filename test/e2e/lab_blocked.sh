#!/usr/bin/env bash
# Model Lab runs between dispatch and start, and the lab's Secrets (issue 15; spec §8-10), with
# the real lab_runs worker against the stand-in:
#  - a Job that vanishes while its run is still DISPATCHED, after its create was answered (the
#    write-back recorded it: job_created_at), ends the attempt as under a RUNNING run:
#    JOB_DISAPPEARED, FAILED with no attempt left (lease released), RETRY_WAIT and the next
#    attempt's Job with one left; the vanished attempt's Job is never made again (a create
#    never answered is still looked for and adopted: lab_faults.sh, lab_crash.sh);
#  - orphan input Secrets are looked for in every project namespace, also one with no lab
#    run: this installation's without a run is reported (ledger ORPHAN_TEARDOWN CONFLICT)
#    and left alone (nothing proves it ours), as is another's;
#  - Secrets forbidden (403) in the run's namespace, first the LIST, then the create: the run
#    waits DISPATCHED and says why (status_reason "blocked: ..."), so does the worker's status
#    in reconciler_health; no Secret and no Job is made (nothing half-made); once allowed, the
#    run goes on to SUCCEEDED and the reason is cleared.
# Every wait is for an observable outcome, bounded (the script runs under ASan).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-blocked
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
DB=mlplat
P=lq
NS=mlp-$P
P2=lq2
NS2=mlp-$P2

q $DB "CREATE ROLE lq_dev LOGIN" >/dev/null 2>&1
lab_fixture lq_owner gpu-q1
q $DB "SELECT mlplat.grant_role('$P', 'lq_dev', 'developer')" >/dev/null
q $DB "SELECT mlplat.create_project('$P2', 8, NULL, NULL, NULL, 'lq_owner')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P2'" READY 60
tap_ok $? "project $P2 is READY"
N1=$(lab_node_id gpu-q1)
job() { echo "/apis/batch/v1/namespaces/$NS/jobs/$1"; }
secret() { echo "/api/v1/namespaces/$1/secrets/$2"; }

lab_probe $N1 lq-probe
tap_ok $? "a probe made through the API PASSED"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $N1" 0 30
tap_ok $? "the probe's lease is released"
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $N1, '{text_generation}', '{\"max_attempts\": 2}', 100, '1 day')" >/dev/null
A1=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $N1")
start() {   # key [limits] -> the run's id
	$PSQL -d $DB -U lq_dev -c "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $N1, $A1,
		'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '${2:-{\}}', '$1')"
}

# --- a DISPATCHED run's Job vanishes after its create was answered: JOB_DISAPPEARED
ID=$(next_id)
plan "lab-$ID-1" '{"pending":true}'   # never starts: the run stays DISPATCHED
start lq-gone-1 >/dev/null
wait_for $DB "SELECT status || ' ' || (job_created_at IS NOT NULL) FROM mlplat.lab_runs WHERE id = $ID" "DISPATCHED true" 60
tap_ok $? "run $ID is DISPATCHED and its Job create's answer is recorded (job_created_at)"
tap_is "$(kube_code "$(job "lab-$ID-1")")" 200 "its Job exists, pending"
kube DELETE "$(job "lab-$ID-1")" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(reason_code, '') FROM mlplat.lab_runs WHERE id = $ID" "FAILED JOB_DISAPPEARED" 60
tap_ok $? "the Job removed behind mlplat's back: FAILED JOB_DISAPPEARED, no attempt left (now: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 30
tap_ok $? "the lease is released"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(kube_code "$(job "lab-$ID-1")")/$(kube_code "$(job "lab-$ID-2")")" "1/404/404" \
	"the vanished Job was created once and not made again; no second attempt"
tap_is "$(q $DB "SELECT string_agg(coalesce(from_status, '-') || '>' || to_status || ':' || coalesce(reason_code, '-') || ':' || coalesce(observation->>'seen', '-'), ' ' ORDER BY seq)
                 FROM mlplat.lab_run_transitions WHERE lab_run_id = $ID")" \
	"->QUEUED:-:- QUEUED>DISPATCHED:-:- DISPATCHED>FAILED:JOB_DISAPPEARED:disappeared" "transitions: DISPATCHED -> FAILED JOB_DISAPPEARED"

ID=$(next_id)
plan "lab-$ID-1" '{"pending":true}'
plan "lab-$ID-2" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 2 '{"second":"ok"}')]}"
start lq-gone-2 '{"max_attempts": 2}' >/dev/null
wait_for $DB "SELECT status || ' ' || (job_created_at IS NOT NULL) FROM mlplat.lab_runs WHERE id = $ID" "DISPATCHED true" 60
tap_ok $? "run $ID (two attempts) is DISPATCHED with its create recorded"
kube DELETE "$(job "lab-$ID-1")" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
wait_for $DB "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 2" 60
tap_ok $? "attempt 1's Job vanished before it started; lab-$ID-2 ran and SUCCEEDED (now: $(status "$ID"))"
t=$(q $DB "SELECT string_agg(to_status || ':' || coalesce(reason_code, '-'), ' ' ORDER BY seq) FROM mlplat.lab_run_transitions WHERE lab_run_id = $ID")
[[ "$t" =~ ^"QUEUED:- DISPATCHED:- RETRY_WAIT:JOB_DISAPPEARED DISPATCHED:- "("RUNNING:- ")?"SUCCEEDED:-"$ ]]
tap_ok $? "transitions: DISPATCHED -> RETRY_WAIT JOB_DISAPPEARED -> DISPATCHED (attempt 2) ($t)"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Job/$NS/lab-$ID-2")" "1/1" "one Job per attempt"

# --- orphan input Secrets in a project namespace with no lab run at all
lbl() {   # instance -> labels JSON
	echo "{\"app.kubernetes.io/managed-by\":\"mlplat\",\"mlplat.io/instance\":\"$1\",\"app.kubernetes.io/component\":\"lab-worker\",\"mlplat.io/project\":\"$P2\",\"mlplat.io/lab-run\":\"999990\"}"
}
mksecret() { kube POST "/api/v1/namespaces/$NS2/secrets" "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"$1\",\"labels\":$2},\"data\":{}}" >/dev/null; }
tap_is "$(q $DB "SELECT count(*) FROM mlplat.lab_runs r JOIN mlplat.projects p ON p.id = r.project_id WHERE p.name = '$P2'")" 0 \
	"project $P2 has no lab run"
mksecret lab-999990-input "$(lbl "$INST")"
mksecret lab-999991-input "$(lbl other-installation)"
tap_is "$(kube_code "$(secret "$NS2" lab-999990-input)")/$(kube_code "$(secret "$NS2" lab-999991-input)")" 200/200 \
	"a lab input Secret of this installation and one of another exist in $NS2"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger
              WHERE kind = 'lab_runs' AND action = 'ORPHAN_TEARDOWN' AND detail->>'note' = '$NS2/lab-999990-input'" t 60
tap_ok $? "a resync found this installation's in $NS2"
tap_is "$(q $DB "SELECT string_agg(DISTINCT action || ':' || outcome, ' ') FROM mlplat.reconcile_ledger
              WHERE kind = 'lab_runs' AND action = 'ORPHAN_TEARDOWN' AND detail->>'note' = '$NS2/lab-999990-input'")" \
	"ORPHAN_TEARDOWN:CONFLICT" "ledger: ORPHAN_TEARDOWN CONFLICT (no lab run 999990 recorded: not provably ours, not deleted)"
passes_after $DB lab_runs 3
tap_ok $? "three more passes of the lab_runs worker"
tap_is "$(kube_code "$(secret "$NS2" lab-999990-input)")/$(kube_code "$(secret "$NS2" lab-999991-input)")" 200/200 \
	"both are left alone (this installation's without a run, another installation's)"

# --- Secrets forbidden in the run's namespace: first the LIST, then the create
ID=$(next_id)
OUT='{"outputs":[{"text":"allowed at last"}]}'
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 "$OUT")]}"
FC=$(hold_rule '{"resource":"secrets","forbidden":true,"method":"POST","path":"^/api/v1/namespaces/'"$NS"'/secrets$"}')
FL=$(hold_rule '{"resource":"secrets","forbidden":true,"method":"GET","path":"^/api/v1/namespaces/'"$NS"'/secrets$"}')
start lq-forbidden >/dev/null
wait_for $DB "SELECT status || ' ' || (status_reason LIKE 'blocked: lab Secrets in $NS could not be listed: %forbidden%RoleBinding mlplat-lab-inputs%')
              FROM mlplat.lab_run_status WHERE lab_run_id = $ID" "DISPATCHED true" 60
tap_ok $? "Secrets LIST forbidden: the run waits DISPATCHED and says why ($(q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID"))"
wait_for $DB "SELECT bool_or(status LIKE '%$NS%forbidden%') FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'" t 30
tap_ok $? "reconciler_health shows it for lab_runs"
tap_is "$(creates "Secret/$NS/lab-$ID-input")/$(creates "Job/$NS/lab-$ID-1")/$(kube_code "$(job "lab-$ID-1")")" "0/0/404" \
	"nothing was made: no Secret, no Job"
admin DELETE "faults/$FL" >/dev/null
wait_for $DB "SELECT status || ' ' || (status_reason LIKE 'blocked: the create of $NS/lab-$ID-input was refused (HTTP 403): %forbidden%RoleBinding mlplat-lab-inputs%')
              FROM mlplat.lab_runs WHERE id = $ID" "DISPATCHED true" 60
tap_ok $? "Secret create forbidden: the run waits DISPATCHED and says why ($(q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID"))"
wait_for $DB "SELECT bool_or(status LIKE '%lab run $ID blocked: the create of $NS/lab-$ID-input was refused (HTTP 403)%') FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'" t 30
tap_ok $? "reconciler_health shows it for lab_runs"
tap_is "$(q $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID AND action = 'CREATE' AND outcome = 'FAILED' AND detail->>'note' = '$NS/lab-$ID-input'")/$(creates "Job/$NS/lab-$ID-1")/$(kube_code "$(job "lab-$ID-1")")" \
	"t/0/404" "ledger: the refused Secret CREATE; no Job without its Secret"
admin DELETE "faults/$FC" >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(status_reason, '-') FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED -" 60
tap_ok $? "allowed again: the run SUCCEEDED, the reason cleared (now: $(status "$ID"))"
want=$(printf '%s' "$OUT" | sha256sum | cut -d' ' -f1)
tap_is "$(q $DB "SELECT output_digest FROM mlplat.lab_runs WHERE id = $ID")/$(creates "Secret/$NS/lab-$ID-input")/$(creates "Job/$NS/lab-$ID-1")" \
	"$want/1/1" "its output is ingested; one Secret and one Job were made"

tap_done
