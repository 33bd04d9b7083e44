#!/usr/bin/env bash
# Model Lab runs end to end (issue 15, acceptance 9-12 and 15) with the real lab_runs worker
# against the stand-in's Nodes, Secrets and Jobs (pinned to nodes) and its S3:
#  - a probe made through the API runs a Job and records PASSED;
#  - a run: one Secret, one Job on the node -> SUCCEEDED, its output and digest; the output
#    object, the Secret and the node lease are gone afterwards (9);
#  - two runs, one node: the second stays QUEUED until the first's lease is released (10);
#  - attempt 1 exits 1 with max_attempts 2 -> lab-<id>-2 succeeds; one attempt -> WORKER_FAILED;
#    the Job's deadline -> EXECUTION_DEADLINE_EXCEEDED, no retry; node NotReady ->
#    QUEUE_DEADLINE_EXCEEDED and no Job (11); a Job whose Pod waits Pending for a node gone
#    NotReady after the dispatch keeps its run DISPATCHED (active 1, ready 0), RUNNING and
#    SUCCEEDED once the node is Ready;
#  - cancel a RUNNING run whose Job is stuck terminating: CANCEL_REQUESTED, not acknowledged,
#    lease and GPUs held, alert lab_cancel_stuck; released -> CANCELLED; cancel a QUEUED run ->
#    CANCELLED with no cluster write (12).
# Every wait is for an observable outcome, bounded and generous (the script runs under ASan).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$SRC/test/lib/lab.sh"
. "$SRC/test/lib/writeback.sh"
SD=$WORK/standin-lab
e2e_standin mlplat
DB=mlplat
P=lb
NS=mlp-$P

lab_fixture --dev lab_dev lab_owner gpu-1
NODE=$(lab_node_id gpu-1)

obj_files() { find "$SD/s3/artifacts" -path "*lab/$1/*" -type f 2>/dev/null | wc -l; }

# --- a probe through the API (acceptance 15): its Job runs and the probe is PASSED
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":2,\"s3\":[$(out_obj "$ID" 1 '{"probe":"ok"}')]}"
out=$($PSQL -d $DB -U lab_owner -c "SELECT entity_id FROM mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $NODE, 'probe-1')")
tap_is "$out" "$ID" "probe queued as lab run $ID"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 90
tap_ok $? "the probe's Job ran and the probe run SUCCEEDED (now: $(status "$ID"))"
tap_is "$(q $DB "SELECT status || ' ' || (completed_at IS NOT NULL) FROM mlplat.lab_probes WHERE lab_run_id = $ID")" "PASSED true" \
	"the probe is PASSED with completed_at"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases" 0 60
tap_ok $? "the probe's lease was released"

asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $NODE, '{text_generation}', '{\"max_attempts\": 2}', 100, '1 day')" >/dev/null
APPR=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID")
start() {   # key [limits] -> the run's id
	local limits=${2:-'{}'}
	$PSQL -d $DB -U lab_dev -c "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APPR,
		'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '$limits', '$1')"
}

# --- acceptance 9: one Secret, one Job on the node -> SUCCEEDED with output and digest
ID=$(next_id)
OUT='{"outputs":[{"text":"hi"}]}'
plan "lab-$ID-1" "{\"ticks\":3,\"s3\":[$(out_obj "$ID" 1 "$OUT")]}"
tap_same "$ID" "$(start run-9)" "run $ID admitted"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 90
tap_ok $? "run $ID SUCCEEDED (now: $(status "$ID"))"
res=$(asdev "SELECT output::text || ' ' || output_digest || ' ' || output_bytes FROM mlplat.lab_run_result('$P', $ID)")
want_digest=$(printf '%s' "$OUT" | sha256sum | cut -d' ' -f1)
[[ "$res" == *'"text": "hi"'*" $want_digest ${#OUT}" ]]
tap_ok $? "lab_run_result: the output, its digest and size ($res)"
tap_is "$(creates "Secret/$NS/lab-$ID-input")/$(creates "Job/$NS/lab-$ID-1")" "1/1" "one Secret and one Job were created"
kube GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1" >/dev/null
wait_kube_gone "/api/v1/namespaces/$NS/secrets/lab-$ID-input" 60
tap_ok $? "the run's Secret is deleted"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 60
tap_ok $? "the node lease is released"
tap_is "$(obj_files "$ID")" 0 "the output object was deleted from the store after ingest"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID AND action = 'CREATE' AND outcome = 'OK'")" 2 \
	"ledger: CREATE OK for the Secret and the Job"

# --- acceptance 10: two runs, one node; the second waits for the first's lease
A=$(next_id); B=$((A + 1))
plan "lab-$A-1" "{\"ticks\":30,\"s3\":[$(out_obj "$A" 1 '{"n":1}')]}"
plan "lab-$B-1" "{\"ticks\":2,\"s3\":[$(out_obj "$B" 1 '{"n":2}')]}"
start run-10a >/dev/null; start run-10b >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $A" RUNNING 90
tap_ok $? "the first run is RUNNING"
# the Job runs as the project's runner ServiceAccount, with no token (the stand-in starts no
# pod whose ServiceAccount is missing)
tap_is "$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$A-1" | python3 -c 'import json,sys; s=json.load(sys.stdin)["spec"]["template"]["spec"]; print(s.get("serviceAccountName"), s.get("automountServiceAccountToken"))')" \
	"mlplat-runner False" "the lab Job names the runner ServiceAccount, no token mounted"
tap_is "$(status "$B")/$(kube_code "/apis/batch/v1/namespaces/$NS/jobs/lab-$B-1")" "QUEUED/404" \
	"the second stays QUEUED, no Job, while the first holds the node's lease"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $B" SUCCEEDED 120
tap_ok $? "once the first finished and released the lease, the second ran (first: $(status "$A"), second: $(status "$B"))"
tap_is "$(q $DB "SELECT (SELECT dispatched_at FROM mlplat.lab_runs WHERE id = $B) >= (SELECT finished_at FROM mlplat.lab_runs WHERE id = $A)")" t \
	"the second was dispatched after the first finished"

# --- acceptance 11: retry, WORKER_FAILED, execution deadline, node NotReady
ID=$(next_id)
plan "lab-$ID-1" '{"ticks":1,"exitCode":1}'
plan "lab-$ID-2" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 2 '{"retry":"ok"}')]}"
start run-11a '{"max_attempts": 2}' >/dev/null
wait_for $DB "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 2" 120
tap_ok $? "attempt 1 exits 1, max_attempts 2: lab-$ID-2 succeeds (now: $(status "$ID"))"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Job/$NS/lab-$ID-2")/$(creates "Secret/$NS/lab-$ID-input")" "1/1/1" \
	"one Job per attempt, one Secret"
ID=$(next_id)
plan "lab-$ID-1" '{"ticks":1,"exitCode":1}'
start run-11b >/dev/null
wait_for $DB "SELECT status || ' ' || reason_code || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "FAILED WORKER_FAILED 1" 90
tap_ok $? "one attempt that exits 1: FAILED WORKER_FAILED (now: $(status "$ID"))"
ID=$(next_id)
plan "lab-$ID-1" '{"ticks":1,"failReason":"DeadlineExceeded"}'
start run-11c '{"max_attempts": 2}' >/dev/null
wait_for $DB "SELECT status || ' ' || reason_code || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "FAILED EXECUTION_DEADLINE_EXCEEDED 1" 90
tap_ok $? "the Job's deadline: FAILED EXECUTION_DEADLINE_EXCEEDED, not retried (now: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases" 0 60
tap_ok $? "the lease is released"
# node NotReady: admitted on fresh evidence, then the worker sees the node NotReady; the run
# waits and fails at its queue deadline, and no Job is made
ID=$(next_id)
admin POST nodes '{"name":"gpu-1","gpus":8,"ready":false}' >/dev/null
$PSQL -d $DB -c "UPDATE mlplat.lab_nodes SET observed_ready = true, observed_at = now() WHERE name = 'gpu-1';
	SET ROLE lab_dev;
	SELECT mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APPR, 'text_generation',
		'[{\"prompt\": \"x\", \"max_tokens\": 1}]', '{\"max_queue_seconds\": 3}', 'run-11d')" >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(reason_code, '') FROM mlplat.lab_runs WHERE id = $ID" "FAILED QUEUE_DEADLINE_EXCEEDED" 90
tap_ok $? "node NotReady: FAILED QUEUE_DEADLINE_EXCEEDED (now: $(status "$ID"))"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Secret/$NS/lab-$ID-input")" "0/0" "no Secret and no Job were made"
admin POST nodes '{"name":"gpu-1","gpus":8,"ready":true}' >/dev/null
wait_for $DB "SELECT observed_ready FROM mlplat.lab_nodes WHERE name = 'gpu-1'" t 60
tap_ok $? "node gpu-1 is observed Ready again"

# RUNNING means the worker runs: the node goes NotReady after the dispatch (the Job's create
# held until then), so the Job counts its Pod active while the Pod waits Pending; the run stays
# DISPATCHED over the worker's passes and is RUNNING only once the Pod can run
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":2,\"s3\":[$(out_obj "$ID" 1 '{"late":"ok"}')]}"
hold_rule "{\"method\":\"POST\",\"path\":\"/namespaces/$NS/jobs\$\",\"hold\":\"before\",\"times\":1}" >/dev/null
start run-pending >/dev/null
wait_held 1 60
tap_ok $? "the run's Job create is held at the stand-in"
admin POST nodes '{"name":"gpu-1","gpus":8,"ready":false}' >/dev/null
release_holds
pod_pending() { kube GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1" | python3 -c 'import json,sys; s=json.load(sys.stdin).get("status",{}); sys.exit(0 if s.get("active") == 1 and s.get("ready") == 0 else 1)'; }
deadline=$((SECONDS + 60))
until pod_pending; do ((SECONDS >= deadline)) && break; sleep 0.2; done
pod_pending
tap_ok $? "the Job's Pod waits for the NotReady node: active 1, ready 0"
passes_after $DB lab_runs 3
tap_ok $? "the worker ran three more passes"
tap_is "$(status "$ID")" DISPATCHED "a Pod that is only Pending is not a running worker: still DISPATCHED"
admin POST nodes '{"name":"gpu-1","gpus":8,"ready":true}' >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 90
tap_ok $? "once the node is Ready the Pod runs and the run SUCCEEDED (now: $(status "$ID"))"
wait_for $DB "SELECT observed_ready FROM mlplat.lab_nodes WHERE name = 'gpu-1'" t 60
tap_ok $? "node gpu-1 is observed Ready again"

# --- acceptance 12: cancel a RUNNING run whose Job is stuck terminating
ID=$(next_id); QD=$((ID + 1))
plan "lab-$ID-1" '{"ticks":400}'
start run-12a >/dev/null
start run-12b >/dev/null   # queued behind it on the same node
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" RUNNING 90
tap_ok $? "run $ID is RUNNING"
admin POST jobs/stuck "{\"namespace\":\"$NS\",\"name\":\"lab-$ID-1\"}" >/dev/null
tap_is "$(asdev "SELECT status FROM mlplat.cancel_lab_run('$P', $ID)")" CANCEL_REQUESTED "cancel: CANCEL_REQUESTED"
tap_is "$(asdev "SELECT status FROM mlplat.cancel_lab_run('$P', $QD)")" CANCEL_REQUESTED "cancel of the queued run: CANCEL_REQUESTED"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $QD" CANCELLED 60
tap_ok $? "the queued run is CANCELLED"
tap_is "$(creates "Job/$NS/lab-$QD-1")/$(creates "Secret/$NS/lab-$QD-input")" "0/0" "no cluster write for the queued run"
deadline=$((SECONDS + 60))
until kube GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1" | grep -q deletionTimestamp; do
	((SECONDS >= deadline)) && break
	sleep 0.2
done
kube GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1" | grep -q deletionTimestamp
tap_ok $? "the worker deleted the Job (foreground): it is terminating"
tap_is "$(q $DB "SELECT status || ' ' || (cancel_acknowledged_at IS NULL) || ' ' || (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = $ID) FROM mlplat.lab_runs WHERE id = $ID")" \
	"CANCEL_REQUESTED true 1" "while the Job is stuck: still CANCEL_REQUESTED, not acknowledged, the lease held"
tap_is "$(q $DB "SELECT gpus_in_use FROM mlplat.project_status WHERE project = '$P'")" 1 "the GPU is still counted"
sleep 1.5
tap_is "$($PSQL -d $DB -c "SET mlplat.lab_cancel_alert_after = '1s'" -c "SELECT count(*) FROM mlplat.alerts WHERE alert = 'lab_cancel_stuck' AND entity_id = $ID")" 1 \
	"alert lab_cancel_stuck (mlplat.lab_cancel_alert_after 1s)"
admin POST jobs/stuck "{\"namespace\":\"$NS\",\"name\":\"lab-$ID-1\",\"stuck\":false}" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" CANCELLED 90
tap_ok $? "released: CANCELLED (now: $(status "$ID"))"
tap_is "$(q $DB "SELECT (cancel_acknowledged_at IS NOT NULL) || ' ' || (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = $ID) FROM mlplat.lab_runs WHERE id = $ID")/$(kube_code "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1")" \
	"true 0/404" "acknowledged, lease released, the Job gone"

tap_done
