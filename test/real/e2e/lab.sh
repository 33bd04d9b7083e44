#!/usr/bin/env bash
# Model Lab runs on the real API server (issue 16, item 2): the lab node is a Node object a
# kubelet imitation registers (Ready, 8 GPUs), mlplat runs as its ServiceAccount, and the
# Job imitation in test/real/controller.js runs each Job as the Job controller, the
# scheduler and a kubelet do — a real Pod (ServiceAccount admission and the project's
# quota and limits apply to it), bound to the pinned Node, its worker writing output.json
# to the real S3 server (SigV4) with the credentials mlplat is given:
#  - a probe, then a run -> Secret and Job -> Pod on gpu-1 -> SUCCEEDED with its output and digest;
#  - a Job pinned to a Node that is not Ready stays Pending (active 1, ready 0, no node)
#    and runs once the Node is Ready;
#  - a Job past activeDeadlineSeconds: Failed DeadlineExceeded -> EXECUTION_DEADLINE_EXCEEDED;
#  - cancel a RUNNING run: the Job is deleted in the foreground and lingers while its Pod
#    is not gone (the kubelet held); the run stays CANCEL_REQUESTED, then CANCELLED.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
. "$SRC/test/lib/lab.sh"
real_preamble lab mlplat
P=rlb
NS=mlp-$P
real_reset_at_exit mlplat.lab_payload_bucket
real_stack_up s3 controller
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.lab_payload_bucket = 'artifacts'" -c "SELECT pg_reload_conf()" >/dev/null

ctl() { curl -s -X POST "$REAL_CONTROLLER/$1" ${2:+-H 'Content-Type: application/json' -d "$2"}; }
JOBS=/apis/batch/v1/namespaces/$NS/jobs

real_s3_put s3://artifacts/llm/1 'weights' >/dev/null
tap_ok $? "bucket artifacts on S3"
q $DB "CREATE ROLE rlab_owner LOGIN" >/dev/null 2>&1
q $DB "SELECT mlplat.create_project('$P', 8, '16', '64Gi', NULL, 'rlab_owner')" >/dev/null
q $DB "SELECT mlplat.add_artifact_location('$P', 's3://artifacts/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 60
tap_ok $? "project $P is READY"
ctl "node?name=gpu-1&gpus=8&ready=1&labels=mlplat.io/lab=true,mlplat.io/accelerator=nvidia-a100" >/dev/null
q $DB "SELECT mlplat.register_lab_node('gpu-1', 'nvidia-a100', 8)" >/dev/null
wait_for $DB "SELECT observed_ready AND observed_gpus = 8 AND observed_accelerator = 'nvidia-a100' FROM mlplat.lab_nodes WHERE name = 'gpu-1'" t 60
tap_ok $? "mlplat's ServiceAccount lists the lab Node: Ready, 8 GPUs, accelerator label"

lab_model rlab_owner
NODE=$(lab_node_id gpu-1)
plan_out() {   # JOB OUTPUT: how the Job's Pod runs and what its worker writes
	ctl job-plan "{\"namespace\":\"$NS\",\"name\":\"$1\",\"ticks\":3,\"output\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")}" >/dev/null
}

# --- a probe: its Job runs on gpu-1 and the probe is PASSED (a run needs one)
ID=$(next_id)
plan_out "lab-$ID-1" '{"probe":"ok"}'
asowner "SELECT mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $NODE, 'probe-1')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $ID" PASSED 60
rc=$?
tap_ok $rc "a probe's Job runs on the lab Node and the probe is PASSED (run: $(status "$ID"))"
[ $rc = 0 ] || { q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID" | sed 's/^/# reason: /'; tail -5 "$RD/controller.log" | sed 's/^/# controller: /'; }
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $NODE, '{text_generation}', '{}', 100, '1 day')" >/dev/null
APPR=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID")
start() {   # key [limits] -> the run's id
	local limits=${2:-'{}'}
	asowner "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APPR,
		'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '$limits', '$1')"
}

# --- a run: Secret, Job, a Pod bound to gpu-1, output.json on S3 -> SUCCEEDED
ID=$(next_id)
OUT='{"outputs":[{"text":"hi"}]}'
plan_out "lab-$ID-1" "$OUT"
tap_same "$(start run-1)" "$ID" "run $ID admitted"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 60
rc=$?
tap_ok $rc "run $ID SUCCEEDED (now: $(status "$ID"))"
[ $rc = 0 ] || { q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID" | sed 's/^/# reason: /'; tail -5 "$RD/controller.log" | sed 's/^/# controller: /'; }
res=$(asowner "SELECT output::text || ' ' || output_digest || ' ' || output_bytes FROM mlplat.lab_run_result('$P', $ID)")
want=$(printf '%s' "$OUT" | sha256sum | cut -d' ' -f1)
[[ "$res" == *'"text": "hi"'*" $want ${#OUT}" ]]
tap_ok $? "the worker's output.json, read from S3: content, digest and size ($res)"
check "$(curl -s "$REAL_CONTROLLER/jobs")" "(lambda j: j['node'] == 'gpu-1' and j['phase'] == 'Succeeded' and [c['type'] for c in j['status']['conditions']] == ['SuccessCriteriaMet', 'Complete'] and j['status']['succeeded'] == 1 and bool(j['status'].get('completionTime')))(o['$NS/lab-$ID-1'])"
tap_ok $? "its Pod ran on gpu-1; the Job ended SuccessCriteriaMet, Complete, succeeded 1, completionTime"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 60
tap_ok $? "the node lease is released"
until_check 30 "$JOBS/lab-$ID-1" "o.get('code') == 404"
tap_ok $? "the finished run's Job is deleted (its Pod with it)"

# --- a Job pinned to a Node that is not Ready stays Pending; it runs once the Node is Ready
ctl "node?name=gpu-2&gpus=8&ready=0" >/dev/null
JOB='{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pinned"},"spec":{"backoffLimit":0,"template":{"spec":{"restartPolicy":"Never","nodeSelector":{"kubernetes.io/hostname":"gpu-2"},"containers":[{"name":"c","image":"busybox"}]}}}}'
rk POST "/apis/batch/v1/namespaces/$NS/jobs" "$JOB" >/dev/null
until_check 30 "$JOBS/pinned" "o['status'].get('active') == 1 and o['status'].get('ready') == 0 and bool(o['status'].get('startTime'))"
tap_ok $? "a Job pinned to a NotReady Node: startTime, active 1, ready 0 (its Pod counts while Pending)"
pod=$(rk_body GET "/api/v1/namespaces/$NS/pods?labelSelector=batch.kubernetes.io/job-name%3Dpinned")
check "$pod" "len(o['items']) == 1 and not o['items'][0]['spec'].get('nodeName') and o['items'][0]['status']['phase'] == 'Pending' and any(c['type'] == 'PodScheduled' and c['reason'] == 'Unschedulable' for c in o['items'][0]['status'].get('conditions', []))"
tap_ok $? "... its Pod is Pending, not bound, PodScheduled False/Unschedulable"
ctl "node?name=gpu-2&gpus=8&ready=1" >/dev/null
until_check 30 "$JOBS/pinned" "any(c['type'] == 'Complete' for c in o['status'].get('conditions', []))"
tap_ok $? "... once the Node is Ready the Pod is bound and the Job completes"
rk DELETE "/apis/batch/v1/namespaces/$NS/jobs/pinned" '{"propagationPolicy":"Background"}' >/dev/null

# --- the Job's deadline: Failed DeadlineExceeded -> EXECUTION_DEADLINE_EXCEEDED
ID=$(next_id)
ctl job-plan "{\"namespace\":\"$NS\",\"name\":\"lab-$ID-1\",\"ticks\":1000}" >/dev/null
start run-2 '{"max_execution_seconds": 2}' >/dev/null
wait_for $DB "SELECT status || ' ' || coalesce(reason_code, '') FROM mlplat.lab_runs WHERE id = $ID" "FAILED EXECUTION_DEADLINE_EXCEEDED" 60
rc=$?
tap_ok $rc "activeDeadlineSeconds 2: the Job fails DeadlineExceeded, the run FAILED EXECUTION_DEADLINE_EXCEEDED (now: $(status "$ID"))"
[ $rc = 0 ] || curl -s "$REAL_CONTROLLER/jobs" | head -c 1500 | sed 's/^/# jobs: /'
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE lab_run_id = $ID" 0 60
tap_ok $? "... and its lease is released"

# --- cancel a RUNNING run: foreground delete, held while its Pod is not gone
ID=$(next_id)
ctl job-plan "{\"namespace\":\"$NS\",\"name\":\"lab-$ID-1\",\"ticks\":1000}" >/dev/null
start run-3 >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" RUNNING 60
tap_ok $? "run $ID is RUNNING"
ctl "kubelet-hold?ns=$NS&job=lab-$ID-1&on=1" >/dev/null
tap_is "$(asowner "SELECT status FROM mlplat.cancel_lab_run('$P', $ID)")" CANCEL_REQUESTED "cancel: CANCEL_REQUESTED"
until_check 30 "$JOBS/lab-$ID-1" "bool(o['metadata'].get('deletionTimestamp')) and 'foregroundDeletion' in o['metadata'].get('finalizers', [])"
tap_ok $? "mlplat deleted the Job in the foreground: terminating, finalizer foregroundDeletion"
p0=$(q $DB "SELECT coalesce(sum(passes), 0) FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'")
wait_for $DB "SELECT coalesce(sum(passes), 0) >= $p0 + 3 FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'" t 60
tap_ok $? "three more passes of the lab_runs leader while the kubelet holds the Pod"
tap_is "$(q $DB "SELECT status || ' ' || (cancel_acknowledged_at IS NULL) || ' ' || (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = $ID) FROM mlplat.lab_runs WHERE id = $ID")" \
	"CANCEL_REQUESTED true 1" "while its Pod is not gone: CANCEL_REQUESTED, not acknowledged, the lease held"
ctl "kubelet-hold?ns=$NS&job=lab-$ID-1&on=0" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" CANCELLED 60
tap_ok $? "the kubelet confirms, the garbage collector lets the Job go: CANCELLED (now: $(status "$ID"))"
tap_is "$(rk GET "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-1" | tail -1)/$(rk_body GET "/api/v1/namespaces/$NS/pods?labelSelector=batch.kubernetes.io/job-name%3Dlab-$ID-1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" \
	"404/0" "the Job and its Pod are gone"

q $DB "SELECT mlplat.delete_project('$P')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" DELETED 120
tap_ok $? "project $P deleted"
tap_done
