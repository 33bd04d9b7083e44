#!/usr/bin/env bash
# Runs and pipeline runs end to end against the stand-in's Argo, with the real workers:
# render validates; a failing step is observed step by step and named; a create whose
# response is dropped is adopted, not repeated; a leader restart mid-run keeps the same
# workflow; cancel is acknowledged only when the workflow stopped; a vanished workflow
# fails the run; retry is a new attempt; bad specs are refused at the API.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-runs
e2e_standin mlplat
admin PUT config '{"argoStepMs": 250}' >/dev/null

DB=mlplat
q $DB "SELECT mlplat.create_project('lab', 4, '32', '64Gi')" >/dev/null
# the projects reconciler makes the namespace
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'lab'" READY 30
tap_ok $? "project lab is READY"

VALIDATE=$(cd "$(dirname "$0")/../tools" && pwd)/validate-manifest   # the repository's own, against test/schemas/

status() { q $DB "SELECT status FROM mlplat.runs WHERE name = '$1'"; }
wf_writes() {   # stored creates of one workflow at the stand-in
	admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); w=w.get("writes",w); print(w.get("Workflow/mlp-lab/'"$1"'",{}).get("create",0))'
}
ledger() { q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'runs' AND action = '$2' AND outcome = '$3' AND detail->>'note' = 'mlp-lab/$1'"; }

# --- bad specs are refused at the API with clear errors
err=$(q $DB "SELECT mlplat.start_pipeline_run('lab', 'bad', '[{\"name\":\"a\",\"image\":\"x\",\"depends_on\":[\"c\"]},{\"name\":\"b\",\"image\":\"x\",\"depends_on\":[\"a\"]},{\"name\":\"c\",\"image\":\"x\",\"depends_on\":[\"b\"]}]')" 2>&1)
[[ "$err" == *"dependencies form a cycle: a -> c -> b -> a"* ]]
tap_ok $? "a cycle in the DAG is refused, naming the cycle"
err=$(q $DB "SELECT mlplat.start_run('lab', 'bad', '{\"image\":\"x\",\"retries\":3}')" 2>&1)
[[ "$err" == *'unknown key "retries"'* ]]
tap_ok $? "an unknown key is refused, naming it"
err=$(q $DB "SELECT mlplat.start_run('lab', 'bad', jsonb_build_object('image', 'x', 'args', jsonb_build_array(repeat('y', 5000))))" 2>&1)
[[ "$err" == *"spec.args"*"4096"* ]]
tap_ok $? "an oversized argument is refused"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.runs WHERE name = 'bad'")" 0 "nothing was recorded for the bad specs"

# --- a three-step pipeline whose middle step exits 2 (after 12 ticks: a 3 s window in which
# the run must be seen RUNNING with prep done, wide enough for a loaded machine)
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lab","name":"etl-1","steps":{"prep":{"ticks":2},"train":{"exitCode":2,"ticks":12}}}' >/dev/null
STEPS='[{"name":"prep","image":"python:3.12","command":["python","prep.py"]},
        {"name":"train","image":"ghcr.io/acme/train:1.4","args":["--epochs","3"],"env":{"SEED":"1"},"gpus":1,"cpu":"2","memory":"8Gi","depends_on":["prep"]},
        {"name":"eval","image":"python:3.12","depends_on":["prep","train"]}]'
q $DB "SELECT status FROM mlplat.start_pipeline_run('lab', 'etl', '$STEPS')" >/dev/null
tap_ok $? "start_pipeline_run accepted"
# the 3 s window opens when the workflow is created: wait for it first, before the render checks
# (a schema validation and two Python runs, which take seconds on a loaded machine)
wait_for $DB "SELECT status || ' ' || (SELECT phase || '/' || exit_code FROM mlplat.run_step_status WHERE run = 'etl' AND step = 'prep')
              FROM mlplat.runs WHERE name = 'etl'" "RUNNING Succeeded/0" 20
tap_ok $? "while the run is RUNNING, step prep is seen Succeeded with exit code 0"

render=$(q $DB "SELECT mlplat.render_workflow('lab', 'etl')")
echo "$render" >"$WORK/etl.json"
out=$("$VALIDATE" "$WORK/etl.json" 2>&1)
tap_ok $? "the render validates against the Argo Workflow CRD schema ($out)"
echo "$render" | python3 -c '
import json,sys; w=json.load(sys.stdin); m=w["metadata"]; l=m["labels"]
assert m["name"] == "etl-1" and "generateName" not in m and m["namespace"] == "mlp-lab", m
assert l["app.kubernetes.io/managed-by"] == "mlplat" and l["mlplat.io/project"] == "lab" and l["mlplat.io/run"] == "etl" and l["mlplat.io/instance"], l
t={x["name"]: x for x in w["spec"]["templates"]}
tasks={x["name"]: x.get("dependencies", []) for x in t["pipeline"]["dag"]["tasks"]}
assert tasks == {"prep": [], "train": ["prep"], "eval": ["prep", "train"]}, tasks
c=t["step-train"]["container"]
assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and c["env"] == [{"name": "SEED", "value": "1"}] and c["args"] == ["--epochs", "3"], c
'
tap_ok $? "render: deterministic name, our labels, DAG mirrors the steps, GPUs/env/args carried"
echo "$render" | python3 -c '
import json,sys; s=json.load(sys.stdin)["spec"]
assert s["serviceAccountName"] == "mlplat-runner" and s["automountServiceAccountToken"] is False, s
assert s["executor"] == {"serviceAccountName": "mlplat-runner"}, s
'
tap_ok $? "render: pods run as the project's runner ServiceAccount; only Argo's executor gets its token"
tap_is "$(q $DB "SELECT mlplat.render_workflow('lab', 'etl') = '$render'::jsonb")" t "render is deterministic"
q $DB "DROP ROLE IF EXISTS outsider" 2>/dev/null; q $DB "CREATE ROLE outsider" >/dev/null
err=$(q $DB "SET ROLE outsider; SELECT mlplat.render_workflow('lab', 'etl')" 2>&1)
[[ "$err" == *"permission denied"* ]]
tap_ok $? "a caller without a role in the project does not see the render"

wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'etl'" FAILED 20
tap_ok $? "the pipeline ends FAILED"
reason=$(q $DB "SELECT status_reason FROM mlplat.run_status WHERE run = 'etl'")
[[ "$reason" == 'step "train" failed'* ]]
tap_ok $? "the reason names the failed step ($reason)"
tap_is "$(q $DB "SELECT string_agg(step || '=' || phase || '/' || coalesce(exit_code::text, '-'), ' ' ORDER BY ordinal) FROM mlplat.run_step_status WHERE run = 'etl'")" \
	"prep=Succeeded/0 train=Failed/2 eval=Waiting/-" "per-step view: phases and exit codes parsed from strings"
tap_is "$(q $DB "SELECT exit_code FROM mlplat.run_steps s JOIN mlplat.runs r ON r.id = s.run_id WHERE r.name = 'etl' AND s.name = 'train'")" 2 \
	"run_steps carries the exit code too"
tap_is "$(q $DB "SELECT (started_at IS NOT NULL AND finished_at IS NOT NULL)::text FROM mlplat.run_nodes n JOIN mlplat.runs r ON r.id = n.run_id WHERE r.name = 'etl' AND n.name = 'train'")" \
	true "the failed step carries started/finished times"
tap_is "$(ledger etl-1 CREATE OK)" 1 "the ledger shows one CREATE for the pipeline"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'runs' AND action = 'CREATE' AND epoch IS NOT NULL AND controller <> '' AND http_status = 201")" 1 \
	"the CREATE ledger row carries HTTP 201, epoch and controller"
rows=$(q $DB "SELECT step_rows_written || ' ' || observed_changes FROM mlplat.runs WHERE name = 'etl'")
read -r srw chg <<<"$rows"
[ "$chg" -ge 3 ] && [ "$srw" -le $((2 * chg)) ]
tap_ok $? "step rows are written only when they change ($srw rows over $chg observed workflow changes)"

# the write-back itself writes only rows that differ: replaying what is stored writes 0 rows, one changed node 1
NODES="(SELECT jsonb_agg(jsonb_build_object('name', n.name, 'node_id', n.node_id, 'type', n.type, 'phase', n.phase,
          'exit_code', n.exit_code::text, 'started_at', n.started_at::text, 'finished_at', n.finished_at::text,
          'message', n.message)) FROM mlplat.run_nodes n WHERE n.run_id = r.id)"
WB="SELECT mlplat._runs_writeback(r.id, r.row_version, (SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'runs'),
      r.status, NULL, NULL, NULL, false, r.observed_rv, %s) FROM mlplat.runs r WHERE r.name = 'etl'"
tap_is "$(q $DB "$(printf "$WB" "$NODES")")" 0 "replaying the stored steps through the write-back writes no row"
tap_is "$(q $DB "$(printf "$WB" "$NODES || '[{\"name\": \"extra\", \"phase\": \"Succeeded\", \"exit_code\": \"0\"}]'")")" 1 \
	"one new step is exactly one row written"
q $DB "DELETE FROM mlplat.run_nodes WHERE name = 'extra'" >/dev/null

# --- the create is applied but its response is dropped: one workflow, adopted
admin POST faults '{"method":"POST","path":"/workflows$","drop":1,"times":1}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'dropped', '{\"image\": \"python:3.12\", \"command\": [\"python\", \"t.py\"]}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'dropped'" SUCCEEDED 20
tap_ok $? "after a dropped create response, the run continues to SUCCEEDED"
tap_is "$(wf_writes dropped-1)" 1 "the stand-in stored exactly one create of the workflow"
# libcurl may itself resend the request on a fresh connection (answered 409 -> adopt), or the
# pass records the lost create and the next LIST finds the workflow (adopt): either way, no second create
tap_is "$(ledger dropped-1 CREATE OK)/$(ledger dropped-1 ADOPT OK)" 0/1 "the ledger shows no successful create and one adoption"
q $DB "SELECT '# ledger: ' || action || ' ' || outcome || ' ' || coalesce(http_status::text, '-') FROM mlplat.reconcile_ledger WHERE detail->>'note' = 'mlp-lab/dropped-1' ORDER BY id"
tap_is "$(q $DB "SELECT string_agg(step || '=' || phase || '/' || exit_code, ' ') FROM mlplat.run_step_status WHERE run = 'dropped'")" \
	"main=Succeeded/0" "a single run reports its container as step main"

# --- the LIST fails (503) for a while: passes fail and retry; the run still gets there
admin POST faults '{"method":"GET","path":"/workflows$","status":503,"times":3}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'flaky', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'flaky'" SUCCEEDED 25
tap_ok $? "three failed LISTs delay a run but do not lose it"
tap_is "$(wf_writes flaky-1)" 1 "... and it was created once"
admin DELETE faults >/dev/null

# --- the leader ends mid-run: the next one observes the same workflow and creates nothing
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lab","name":"long-1","steps":{"*":{"ticks":16}}}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'long', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'long'" RUNNING 20
tap_ok $? "run long is RUNNING"
old_epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'runs'")
q $DB "SELECT pg_terminate_backend(pid) FROM mlplat.reconciler_health WHERE kind = 'runs' AND role = 'leader'" >/dev/null
wait_for $DB "SELECT epoch > $old_epoch FROM mlplat.leader_epochs WHERE kind = 'runs'" t 15
tap_ok $? "another runs leader took over (epoch moved from $old_epoch)"
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'long'" SUCCEEDED 25
tap_ok $? "the new leader follows the same workflow to SUCCEEDED"
tap_is "$(wf_writes long-1)" 1 "one create of long-1 at the stand-in"
tap_is "$(kube GET '/apis/argoproj.io/v1alpha1/namespaces/mlp-lab/workflows?labelSelector=mlplat.io/run%3Dlong' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" 1 \
	"exactly one workflow for run long"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'runs' AND detail->>'note' = 'mlp-lab/long-1' AND action IN ('CREATE','ADOPT')")" 1 \
	"no second create or adoption in the ledger"

# --- GPUs of active runs count against the quota (4)
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lab","name":"gpu-1","steps":{"*":{"ticks":40}}}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'gpu', '{\"image\": \"x\", \"gpus\": 3}')" >/dev/null
err=$(q $DB "SELECT mlplat.start_run('lab', 'gpu2', '{\"image\": \"x\", \"gpus\": 2}')" 2>&1)
[[ "$err" == *"quota"* ]]
tap_ok $? "a second run needing 2 GPUs is refused while 3 of 4 are held by an active run"

# --- cancel while running: CANCEL_REQUESTED, then CANCELLED once Argo stopped it
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'gpu'" RUNNING 20
tap_ok $? "run gpu is RUNNING"
tap_is "$(q $DB "SELECT status FROM mlplat.cancel_run('lab', 'gpu')")" CANCEL_REQUESTED "cancel_run answers CANCEL_REQUESTED"
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'gpu'" CANCELLED 20
tap_ok $? "the run becomes CANCELLED"
tap_is "$(ledger gpu-1 PATCH OK)" 1 "the ledger shows one shutdown PATCH"
wf=$(kube GET /apis/argoproj.io/v1alpha1/namespaces/mlp-lab/workflows/gpu-1)
tap_is "$(echo "$wf" | python3 -c 'import json,sys; w=json.load(sys.stdin); print(w["spec"].get("shutdown"), w["status"]["phase"])')" "Terminate Failed" \
	"the workflow carries spec.shutdown Terminate and has stopped"
reason=$(q $DB "SELECT status_reason FROM mlplat.runs WHERE name = 'gpu'")
[[ "$reason" == *"Stopped with strategy 'Terminate'"* ]]
tap_ok $? "CANCELLED was acknowledged from the stopped workflow ($reason)"
q $DB "SELECT mlplat.start_run('lab', 'gpu2', '{\"image\": \"x\", \"gpus\": 2}')" >/dev/null 2>&1
tap_ok $? "once cancelled, its GPUs are free again"
err=$(q $DB "SELECT mlplat.cancel_run('lab', 'dropped')" 2>&1)
[[ "$err" == *"SUCCEEDED"* ]]
tap_ok $? "cancelling a finished run is a clear error"

# --- a workflow deleted outside mlplat: FAILED with that reason, not resubmitted
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lab","name":"vanish-1","steps":{"*":{"ticks":40}}}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'vanish', '{\"image\": \"x\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'vanish'" RUNNING 20
tap_ok $? "run vanish is RUNNING before its workflow is deleted behind mlplat's back"
kube DELETE /apis/argoproj.io/v1alpha1/namespaces/mlp-lab/workflows/vanish-1 >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'vanish'" FAILED 20
tap_ok $? "a workflow deleted behind mlplat's back fails the run"
[[ "$(q $DB "SELECT status_reason FROM mlplat.runs WHERE name = 'vanish'")" == *"disappeared outside mlplat"* ]]
tap_ok $? "... with that reason"
sleep 2
tap_is "$(wf_writes vanish-1)" 1 "... and it is not resubmitted"

# --- retry: a new attempt with its own workflow name and an audit event
tap_is "$(q $DB "SELECT status FROM mlplat.retry_run('lab', 'etl')")" PENDING "retry_run of the failed pipeline is accepted"
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'etl'" SUCCEEDED 25
tap_ok $? "attempt 2 runs to SUCCEEDED"
tap_is "$(q $DB "SELECT attempt || ' ' || workflow FROM mlplat.run_status WHERE run = 'etl'")" "2 etl-2" "attempt 2 runs as workflow etl-2"
tap_is "$(wf_writes etl-1)/$(wf_writes etl-2)" 1/1 "one create per attempt"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.audit_events WHERE action = 'retry_run' AND detail->>'workflow' = 'etl-2'")" 1 "the retry is audited"
tap_is "$(q $DB "SELECT string_agg(step || '=' || phase, ' ' ORDER BY ordinal) FROM mlplat.run_step_status WHERE run = 'etl'")" \
	"prep=Succeeded train=Succeeded eval=Succeeded" "the steps show the new attempt"
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-lab","name":"busy-1","steps":{"*":{"ticks":40}}}' >/dev/null
q $DB "SELECT status FROM mlplat.start_run('lab', 'busy', '{\"image\": \"x\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'busy'" RUNNING 20
tap_ok $? "run busy is RUNNING"
err=$(q $DB "SELECT mlplat.retry_run('lab', 'busy')" 2>&1)
[[ "$err" == *'run "busy" is RUNNING: retry_run is not possible'* ]]
tap_ok $? "a running run cannot be retried"
q $DB "SELECT mlplat.cancel_run('lab', 'busy')" >/dev/null
err=$(q $DB "SELECT mlplat.render_workflow('lab', 'nosuch')" 2>&1)
[[ "$err" == *'run "nosuch" does not exist'* ]]
tap_ok $? "render of an unknown run is a clear error"
err=$(q $DB "SELECT mlplat.retry_run('lab', 'etl')" 2>&1)
[[ "$err" == *"SUCCEEDED"* ]]
tap_ok $? "a succeeded run cannot be retried"
# --- kill -9 of the leader while its create is in flight (applied, response never read).
# A crash restarts every backend, so this runs on a private cluster of its own, against
# the same stand-in (its instance label keeps the two installations apart).  Two database
# clusters driving one Kubernetes cluster is what the Lease fence (on by default) forbids:
# this one opts out, or the shared cluster's Leases would keep it fenced.
PW=$MLPLAT_TEST_WORK/runs-crash
mkdir -p "$PW" && chown "$RUNAS" "$PW" 2>/dev/null
PP=$(free_port)
cluster_start "$PW/data" "$PP" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.leader_retry_interval = '250ms'" \
	"mlplat.resync_interval = '1s'" "mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" \
	"mlplat.lease_fence = off"
tap_ok $? "private cluster for the crash case started"
on_exit cluster_stop_all
pq() { PGHOST=$WORK PGPORT=$PP $PSQL -d mlplat -c "$1"; }
PGHOST=$WORK PGPORT=$PP $PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
pq "CREATE EXTENSION mlplat" >/dev/null
pq "SELECT mlplat.create_project('lab', 4)" >/dev/null
wait_for_p() { PGHOST=$WORK PGPORT=$PP wait_for mlplat "$@"; }
wait_for_p "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'runs' AND role = 'leader'" 1 20
tap_ok $? "the private cluster has a runs leader"
# the stand-in parks the create before applying it; the leader dies while it is parked.
# Waiting for the park (not a sleep) keeps this deterministic however slow the leader is.
admin POST faults '{"method":"POST","path":"/namespaces/mlp-lab/workflows$","hold":"before","times":1}' >/dev/null
victim=$(pq "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'runs' AND role = 'leader'")
pq "SELECT status FROM mlplat.start_run('lab', 'crash', '{\"image\": \"python:3.12\"}')" >/dev/null
parked=0
for _ in $(seq 1 300); do
	[[ "$(admin GET holds | grep -o 'mlp-lab/workflows"' | wc -l)" -ge 1 ]] && { parked=1; break; }
	sleep 0.1
done
tap_is "$parked" 1 "the leader's create is in flight (parked at the stand-in)"
kill -9 "$victim"
tap_ok $? "kill -9 of the runs leader (pid $victim) with its create in flight"
# until the parked create has been applied, the restarted leader's own creates are refused (503)
admin POST faults '{"method":"POST","path":"/namespaces/mlp-lab/workflows$","status":503}' >/dev/null
sleep 1     # the crash restart is under way: its leader now meets the 503s
admin POST holds/release '{}' >/dev/null   # applied now; nobody reads the answer
for _ in $(seq 1 100); do [[ "$(wf_writes crash-1)" -ge 1 ]] && break; sleep 0.1; done
admin DELETE faults >/dev/null
tap_is "$(wf_writes crash-1)" 1 "the create was applied at the stand-in"
tap_is "$(pq "SELECT count(*) FROM mlplat.reconcile_ledger WHERE action = 'CREATE' AND outcome = 'OK'")" 0 "... and no leader read a successful answer"
wait_for_p "SELECT status FROM mlplat.runs WHERE name = 'crash'" SUCCEEDED 40
tap_ok $? "after the crash restart the run continues to SUCCEEDED"
tap_is "$(wf_writes crash-1)" 1 "still exactly one workflow created"
tap_is "$(pq "SELECT count(*) FROM mlplat.reconcile_ledger WHERE action = 'ADOPT' AND outcome = 'OK'")" 1 "the new leader adopted it"
grep -q 'all server processes terminated; reinitializing' "$PW/data.log"
tap_ok $? "... and the server really did restart every backend"
tap_done
