#!/usr/bin/env bash
# Model Lab runs when things go wrong, and retention (issue 15, acceptance 2, 12, 13 and 14;
# spec §8-10) with the real lab_runs worker against the stand-in:
#  - a lost create answer (13): the leader dies with its Job create applied and unanswered;
#    the next leader adopts the Job (write-ahead note, ledger ADOPT), nothing is created twice,
#    attempt 1 goes on; a leader terminated mid-run leaves the same Job running to the end;
#  - preflight writes nothing at the stand-in either (acceptance 2: no Secret, Job or any other
#    write while the worker keeps passing);
#  - a Job removed under a RUNNING run (not by mlplat) is JOB_DISAPPEARED: FAILED with that
#    reason and the lease released when no attempt is left, RETRY_WAIT and the next attempt's
#    Job when one is (never re-creating the vanished attempt);
#  - the run deadline: a Job still there past run_deadline_at is deleted in the foreground; while
#    it is terminating the run keeps its status, says why, and holds the lease; once it is gone,
#    FAILED RUN_DEADLINE_EXCEEDED and the lease released;
#  - cancel after the Job already completed: the output wins (SUCCEEDED with its output, the
#    cancel never acknowledged), as the spec's CANCEL_REQUESTED -> SUCCEEDED says;
#  - orphans: lab-worker Jobs and Secrets of this installation that no run claims are deleted on
#    a resync only when the database knows their content id (a run's own: test/e2e/lab_adoption.sh);
#    with our labels but no lab run recorded they are reported (ledger ORPHAN_TEARDOWN CONFLICT)
#    and left alone, as are another installation's and an object without the lab-worker component;
#  - RBAC: Secrets are LISTed per project namespace, never across the cluster;
#  - retention end to end (14): after retention_seconds the output payload is purged
#    (lab_run_result purged, output NULL), digests and provenance stay; the output object left
#    the store right after ingest (ledger DELETE) and the Job and Secret are gone.
# Two lab nodes: the run-deadline case and the retention clock run beside the others.  Every
# wait is for an observable outcome, bounded and generous (the script runs under ASan).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-faults
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
DB=mlplat
P=lf
NS=mlp-$P

lab_fixture --dev lf_dev lf_owner gpu-f1 gpu-f2
N1=$(lab_node_id gpu-f1)
N2=$(lab_node_id gpu-f2)

lease_of() { q $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $1"; }
job() { echo "/apis/batch/v1/namespaces/$NS/jobs/$1"; }
secret() { echo "/api/v1/namespaces/$NS/secrets/$1"; }
terminating() { kube GET "$(job "$1")" | grep -q deletionTimestamp; }

# probes through the API, one per node (no preflight passes without one)
for nid in $N1 $N2; do
	ID=$(next_id)
	plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"probe":"ok"}')]}"
	$PSQL -d $DB -U lf_owner -c "SELECT mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $nid, 'lf-probe-$nid')" >/dev/null
	wait_for $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $ID" PASSED 90
	tap_ok $? "probe on node $nid PASSED (run: $(status "$ID"))"
done
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id IN ($N1, $N2)" 0 60
tap_ok $? "the probes' leases are released"
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, n, '{text_generation}', '{\"max_attempts\": 3}', 100, '1 day')
         FROM unnest(ARRAY[$N1, $N2]) n" >/dev/null
A1=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $N1")
A2=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $N2")
start() {   # node approval key [limits] -> the run's id
	$PSQL -d $DB -U lf_dev -c "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $1, $2,
		'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '${4:-{\}}', '$3')"
}

# --- retention (14): a run with retention_seconds 60 (the least a run may ask), first, so that
# its clock runs beside every other case; checked at the end of the script
RID=$(next_id)
ROUT='{"outputs":[{"text":"kept for a minute"}]}'
plan "lab-$RID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$RID" 1 "$ROUT")]}"
tap_same "$RID" "$(start $N1 $A1 lf-ret '{"retention_seconds": 60}')" "retention run $RID admitted"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $RID" SUCCEEDED 90
tap_ok $? "retention run SUCCEEDED (now: $(status "$RID"))"
tap_is "$(asdev "SELECT output IS NOT NULL AND NOT purged FROM mlplat.lab_run_result('$P', $RID)")" t "its output is there before the retention"
wait_for $DB "SELECT string_agg(DISTINCT s.name, ',' ORDER BY s.name) FROM mlplat.spans s JOIN mlplat.lab_runs r ON r.id = s.entity_id
              WHERE s.entity = 'lab_run' AND r.id = $RID AND s.trace_id = split_part(r.traceparent, '-', 2) AND s.name LIKE 'lab\_runs.%'" \
	"lab_runs.create,lab_runs.delete,lab_runs.output_delete,lab_runs.output_read" 30
tap_ok $? "spans in the run's trace for its creates, deletes, output read and output delete"

# --- run deadline, on node 2, started early (its deadline passes while the cases below run):
# the Job never starts (pending), so only the run deadline ends it
# run_deadline_at = created + max_queue (5) + 1 x (max_execution (1) + 30) s
DID=$(next_id)
plan "lab-$DID-1" '{"pending":true}'
tap_same "$DID" "$(start $N2 $A2 lf-deadline '{"max_queue_seconds": 5, "max_execution_seconds": 1}')" "deadline run $DID admitted"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $DID" DISPATCHED 60
tap_ok $? "the deadline run is DISPATCHED"
deadline=$((SECONDS + 60))
until [ "$(kube_code "$(job "lab-$DID-1")")" = 200 ] || ((SECONDS >= deadline)); do sleep 0.1; done
tap_is "$(kube_code "$(job "lab-$DID-1")")" 200 "its Job exists (pending: never started)"
admin POST jobs/stuck "{\"namespace\":\"$NS\",\"name\":\"lab-$DID-1\"}" >/dev/null   # its deletion will hang

# --- acceptance 13: the leader dies with its Job create applied and the answer never read;
# the new leader finds the Job (write-ahead note, LIST), adopts it (ledger ADOPT), creates
# nothing twice and the run goes on under attempt 1; then the leader dies mid-run: same Job
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":5,\"s3\":[$(out_obj "$ID" 1 '{"adopted":"yes"}')]}"
hold_rule '{"method":"POST","path":"/namespaces/'"$NS"'/jobs$","hold":"after","times":1}' >/dev/null
start $N1 $A1 lf-adopt >/dev/null
wait_held 1 60
tap_ok $? "the leader's Job create is applied at the stand-in, its answer held"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'lab_runs'")
workers_pause $DB
leader_kill $DB lab_runs
release_holds drop
workers_resume $DB
wait_new_leader $DB lab_runs "$epoch" 60
tap_ok $? "a new lab_runs leader took over"
wait_for $DB "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 1" 90
tap_ok $? "the adopted Job ran to the end: SUCCEEDED, attempt 1 (now: $(status "$ID"))"
l=$(ledger_of $DB lab_runs "$NS/lab-$ID-1")
[[ "$l" =~ ^ADOPT:OK( DELETE:OK)*$ ]]   # adopted once, then the finished run's Job deleted
tap_ok $? "ledger: the Job adopted once, never created by an answered CREATE ($l)"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Secret/$NS/lab-$ID-input")/$(kube_code "$(job "lab-$ID-2")")" "1/1/404" \
	"exactly one Job and one Secret were created; no second attempt"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'lab_runs' AND entity_id = $ID")" 0 "no write-ahead note left"
# the leader terminated mid-run: the next one follows the same Job
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":100,\"s3\":[$(out_obj "$ID" 1 '{"survived":"yes"}')]}"
start $N1 $A1 lf-midrun >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" RUNNING 90
tap_ok $? "run $ID is RUNNING"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'lab_runs'")
leader_kill $DB lab_runs
wait_new_leader $DB lab_runs "$epoch" 60
tap_ok $? "its leader was terminated (pg_terminate_backend) and another took over"
wait_for $DB "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 1" 90
tap_ok $? "the same Job completed: SUCCEEDED, attempt 1 (now: $(status "$ID"))"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(kube_code "$(job "lab-$ID-2")")" "1/404" "one Job, no second attempt"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $N1" 0 60
tap_ok $? "the lease is released"

# --- JOB_DISAPPEARED with no attempt left
ID=$(next_id)
plan "lab-$ID-1" '{"ticks":100000}'
start $N1 $A1 lf-gone-1 >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" RUNNING 90
tap_ok $? "run $ID is RUNNING"
kube DELETE "$(job "lab-$ID-1")" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(reason_code, '') FROM mlplat.lab_runs WHERE id = $ID" "FAILED JOB_DISAPPEARED" 60
tap_ok $? "its Job removed behind mlplat's back: FAILED JOB_DISAPPEARED (now: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 60
tap_ok $? "the lease is released"
tap_is "$(kube_code "$(secret "lab-$ID-input")")/$(creates "Job/$NS/lab-$ID-1")/$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID AND action = 'DELETE' AND outcome = 'OK' AND detail->>'note' = '$NS/lab-$ID-input'")" \
	"404/1/1" "its Secret was deleted by the run's own clean-up (ledger DELETE), the Job not re-created"
tap_is "$(q $DB "SELECT observation->>'seen' FROM mlplat.lab_run_transitions WHERE lab_run_id = $ID AND to_status = 'FAILED'")" \
	disappeared "the transition records what was seen"

# --- JOB_DISAPPEARED with an attempt left: the next attempt's Job runs
ID=$(next_id)
plan "lab-$ID-1" '{"ticks":100000}'
plan "lab-$ID-2" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 2 '{"second":"ok"}')]}"
start $N1 $A1 lf-gone-2 '{"max_attempts": 2}' >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" RUNNING 90
tap_ok $? "run $ID is RUNNING"
kube DELETE "$(job "lab-$ID-1")" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
wait_for $DB "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 2" 90
tap_ok $? "attempt 1's Job vanished; lab-$ID-2 ran and SUCCEEDED (now: $(status "$ID"))"
t=$(q $DB "SELECT string_agg(to_status || ':' || coalesce(reason_code, '-'), ' ' ORDER BY seq) FROM mlplat.lab_run_transitions WHERE lab_run_id = $ID")
# (a one-tick Job may complete before a pass sees it active: RUNNING of attempt 2 is optional)
[[ "$t" =~ ^"QUEUED:- DISPATCHED:- RUNNING:- RETRY_WAIT:JOB_DISAPPEARED DISPATCHED:- "("RUNNING:- ")?"SUCCEEDED:-"$ ]]
tap_ok $? "transitions: RETRY_WAIT with JOB_DISAPPEARED between the attempts ($t)"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Job/$NS/lab-$ID-2")/$(creates "Secret/$NS/lab-$ID-input")" "1/1/1" \
	"one Job per attempt, one Secret"

# --- cancel after the Job completed: the output wins
ID=$(next_id)
OUT='{"outputs":[{"text":"done before the cancel"}]}'
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 "$OUT")]}"
FID=$(hold_rule '{"s3":true,"method":"GET","path":"/lab/'"$ID"'/1/output.json","status":503}')
start $N1 $A1 lf-late-cancel >/dev/null
deadline=$((SECONDS + 90))
until admin GET faults | python3 -c 'import json,sys; sys.exit(0 if any(r["id"] == '"$FID"' and r["fired"] > 0 for r in json.load(sys.stdin)["rules"]) else 1)'; do
	((SECONDS >= deadline)) && break
	sleep 0.1
done
tap_ok $? "the Job completed and the worker's read of its output is refused (503) for now"
tap_is "$(asdev "SELECT status FROM mlplat.cancel_lab_run('$P', $ID)")" CANCEL_REQUESTED "cancel after completion: CANCEL_REQUESTED"
admin DELETE "faults/$FID" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 60
tap_ok $? "the output wins: SUCCEEDED (now: $(status "$ID"))"
want=$(printf '%s' "$OUT" | sha256sum | cut -d' ' -f1)
tap_is "$(asdev "SELECT output_digest FROM mlplat.lab_run_result('$P', $ID)")/$(q $DB "SELECT cancel_acknowledged_at IS NULL FROM mlplat.lab_runs WHERE id = $ID")" \
	"$want/t" "its output is ingested; the cancel was never acknowledged (nothing was cancelled)"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 60
tap_ok $? "the lease is released"

# --- orphans: labelled ours without a run are reported, not deleted; others' are left alone
lbl() {   # instance component -> labels JSON
	echo "{\"app.kubernetes.io/managed-by\":\"mlplat\",\"mlplat.io/instance\":\"$1\",\"app.kubernetes.io/component\":\"$2\",\"mlplat.io/project\":\"$P\",\"mlplat.io/lab-run\":\"999999\"}"
}
# (each create's answer is the evidence it was made: a resync may delete ours right after)
made() { python3 -c 'import json,sys; print(json.load(sys.stdin).get("metadata", {}).get("uid") is not None)'; }
mksecret() { kube POST "/api/v1/namespaces/$NS/secrets" "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"$1\",\"labels\":$2},\"data\":{}}" | made; }
ours=$(mksecret lab-999999-input "$(lbl "$INST" lab-worker)")
mksecret lab-999998-input "$(lbl other-installation lab-worker)" >/dev/null
mksecret lab-999997-input "$(lbl "$INST" builder)" >/dev/null
ours=$ours/$(kube POST "/apis/batch/v1/namespaces/$NS/jobs" '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"lab-999999-1","labels":'"$(lbl "$INST" lab-worker)"'},
	"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"w","image":"w"}]}}}}' | made)
tap_is "$ours" True/True "an orphan Secret and Job of ours were created"
wait_for $DB "SELECT count(DISTINCT detail->>'note') FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs'
              AND action = 'ORPHAN_TEARDOWN' AND detail->>'note' IN ('$NS/lab-999999-1', '$NS/lab-999999-input')" 2 60
tap_ok $? "a resync judged both"
tap_is "$(q $DB "SELECT string_agg(DISTINCT action || ':' || outcome || ':' || entity_id, ' ') FROM mlplat.reconcile_ledger
              WHERE kind = 'lab_runs' AND action = 'ORPHAN_TEARDOWN' AND detail->>'note' IN ('$NS/lab-999999-1', '$NS/lab-999999-input')")" \
	"ORPHAN_TEARDOWN:CONFLICT:999999" "ledger: ORPHAN_TEARDOWN CONFLICT for each (no lab run 999999 recorded), under the run id of its label"
passes_after $DB lab_runs 3
tap_ok $? "three more passes of the lab_runs worker"
tap_is "$(kube_code "$(job lab-999999-1)")/$(kube_code "$(secret lab-999999-input)")/$(kube_code "$(secret lab-999998-input)")/$(kube_code "$(secret lab-999997-input)")" 200/200/200/200 \
	"ours without a run, another installation's Secret and one without the lab-worker component are left alone"
kube DELETE "$(job lab-999999-1)" >/dev/null; kube DELETE "$(secret lab-999999-input)" >/dev/null
kube DELETE "$(secret lab-999998-input)" >/dev/null; kube DELETE "$(secret lab-999997-input)" >/dev/null

# --- the run deadline (node 2): foreground delete, status honest while the Job goes
wait_for $DB "SELECT run_deadline_at <= now() FROM mlplat.lab_runs WHERE id = $DID" t 90
tap_ok $? "the run's deadline has passed"
deadline=$((SECONDS + 60))
until terminating "lab-$DID-1" || ((SECONDS >= deadline)); do sleep 0.2; done
terminating "lab-$DID-1"
tap_ok $? "past the run deadline the worker deleted the Job (foreground): it is terminating"
tap_is "$(q $DB "SELECT status || ' | ' || status_reason FROM mlplat.lab_run_status WHERE lab_run_id = $DID")/$(lease_of "$DID")" \
	"DISPATCHED | run deadline exceeded: its Job is being deleted; FAILED RUN_DEADLINE_EXCEEDED once it is gone/1" \
	"while it is terminating: the run keeps its status, says why, and holds the lease"
[ "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $DID AND action = 'DELETE' AND detail->>'note' = '$NS/lab-$DID-1'")" -ge 1 ]
tap_ok $? "ledger: the DELETE of the Job"
admin POST jobs/stuck "{\"namespace\":\"$NS\",\"name\":\"lab-$DID-1\",\"stuck\":false}" >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(reason_code, '') FROM mlplat.lab_runs WHERE id = $DID" "FAILED RUN_DEADLINE_EXCEEDED" 60
tap_ok $? "the Job gone: FAILED RUN_DEADLINE_EXCEEDED (now: $(status "$DID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $DID" 0 30
tap_ok $? "... and the node lease released"
tap_is "$(kube_code "$(job "lab-$DID-1")")/$(creates "Job/$NS/lab-$DID-1")/$(kube_code "$(secret "lab-$DID-input")")" 404/1/404 \
	"the Job is gone and was created once; its Secret is deleted"

# --- acceptance 2 at the stand-in: a preflight (read only) makes no write anywhere.  Checked
# here, with every run ended and its objects gone, while the retention clock runs out: the
# retention run starts that much sooner and the script waits that much less.
before=$(writes_count "namespace=$NS")
for i in 1 2 3; do
	$PSQL -d $DB -U lf_dev -c "BEGIN READ ONLY" -c "SELECT passed FROM mlplat.lab_preflight('$P', $CAND, '$SHA', $PROF, $N1, $A1,
		'text_generation', '[{\"prompt\": \"x\", \"max_tokens\": 1}]')" -c "COMMIT" >"$WORK/lf-pre.out"
done
tap_is "$(grep -cx t "$WORK/lf-pre.out")" 1 "preflight passes in BEGIN READ ONLY"
passes_after $DB lab_runs 3
tap_ok $? "three more passes of the lab_runs worker"
tap_same "$before" "$(writes_count "namespace=$NS")" "no write in the project's namespace at the stand-in after preflights and three more worker passes"

# --- retention (14), end to end
wait_for $DB "SELECT purged_at IS NOT NULL FROM mlplat.lab_runs WHERE id = $RID" t 120
tap_ok $? "retention: the run's payloads were purged after retention_seconds"
want=$(printf '%s' "$ROUT" | sha256sum | cut -d' ' -f1)
tap_is "$(asdev "SELECT purged || ' ' || (output IS NULL) || ' ' || output_digest || ' ' || status FROM mlplat.lab_run_result('$P', $RID)")" \
	"true true $want SUCCEEDED" "lab_run_result: purged, no output, digest and status kept"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.lab_run_payloads WHERE lab_run_id = $RID")/$(q $DB "SELECT input_digest IS NOT NULL AND actor = 'lf_dev' FROM mlplat.lab_runs WHERE id = $RID")" \
	"0/t" "no payload row left; provenance kept"
tap_is "$(find "$SD/s3/artifacts" -path "*lab/$RID/*" -type f 2>/dev/null | wc -l)/$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $RID AND action = 'DELETE' AND outcome = 'OK' AND detail->>'note' LIKE 's3://%'")" \
	"0/1" "the output object left the store (ledger DELETE of it)"
tap_is "$(kube_code "$(job "lab-$RID-1")")/$(kube_code "$(secret "lab-$RID-input")")" 404/404 "its Job and Secret are gone"

# the worker reads Secrets per project namespace only (RBAC: RoleBinding mlplat-lab-inputs in
# each project namespace, no Secret permission cluster-wide)
admin GET "requests?method=GET&kind=Secret" | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for e in items if e["path"].startswith("/api/v1/secrets")),
      sum(1 for e in items if e["path"].startswith("/api/v1/namespaces/'"$NS"'/secrets?")) > 0)' >"$WORK/lf-secret-lists.txt"
tap_is "$(cat "$WORK/lf-secret-lists.txt")" "0 True" "Secrets are LISTed in the project namespace, never across the cluster"
tap_is "$(kube_code "/apis/rbac.authorization.k8s.io/v1/namespaces/$NS/rolebindings/mlplat-lab-inputs")" 200 \
	"the projects reconciler made RoleBinding mlplat-lab-inputs in the project namespace"

tap_done
