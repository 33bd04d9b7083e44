#!/usr/bin/env bash
# Runs and pipelines on the real API server: the Workflow mlplat renders is
# accepted by Argo's real CRD schema under mlplat's ServiceAccount, the Argo
# imitation (test/real/controller.js) drives it Pending -> Running ->
# Succeeded with a Pod node per step, and mlplat follows it to SUCCEEDED with
# each step's phase and exit code.
set -u
. "$(dirname "$0")/../../lib/tap.sh"
tap_require_cluster
. "$(dirname "$0")/../../lib/cluster.sh"
. "$(dirname "$0")/../../lib/real.sh"
WORK=$MLPLAT_TEST_WORK
RD=$WORK/real-runs
DB=mlplat
trap 'real_disconnect $DB; real_stop $RD' EXIT
real_kube_start "$RD" && real_identity "$RD" >/dev/null && real_controller_start "$RD"
tap_ok $? "real API server and Argo imitation up"
real_connect $DB

q $DB "SELECT mlplat.create_project('rlab', 2, '8', '16Gi')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rlab'" READY 60
tap_ok $? "project rlab is READY"
STEPS='[{"name":"prep","image":"python:3.12","command":["python","prep.py"]},
        {"name":"train","image":"ghcr.io/acme/train:1.4","args":["--epochs","3"],"env":{"SEED":"1"},"gpus":1,"cpu":"2","memory":"8Gi","depends_on":["prep"]}]'
q $DB "SELECT status FROM mlplat.start_pipeline_run('rlab', 'retl', '$STEPS')" >/dev/null
tap_ok $? "start_pipeline_run accepted"
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'retl'" SUCCEEDED 90
rc=$?
tap_ok $rc "the pipeline run is submitted, accepted by the real Workflow schema and ends SUCCEEDED"
[ $rc = 0 ] || q $DB "SELECT status, status_reason, last_error FROM mlplat.runs WHERE name = 'retl'" | sed 's/^/# row: /'
tap_is "$(q $DB "SELECT string_agg(step || '=' || phase || '/' || coalesce(exit_code::text, '-'), ' ' ORDER BY ordinal) FROM mlplat.run_step_status WHERE run = 'retl'")" \
	"prep=Succeeded/0 train=Succeeded/0" "per-step view: phases and exit codes from the Pod nodes"
wf=$(rk_body GET /apis/argoproj.io/v1alpha1/namespaces/mlp-rlab/workflows/retl-1)
echo "$wf" | python3 -c '
import json,sys; o=json.load(sys.stdin)
assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "mlplat", o["metadata"]
assert o["metadata"]["labels"]["workflows.argoproj.io/completed"] == "true"
assert any(m["manager"] == "mlplat" for m in o["metadata"]["managedFields"])'
tap_ok $? "the Workflow on the server was made by mlplat and completed"
q $DB "SELECT status FROM mlplat.start_run('rlab', 'rsingle', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'rsingle'" SUCCEEDED 90
tap_ok $? "a single-step run ends SUCCEEDED"
q $DB "SELECT mlplat.delete_project('rlab')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rlab'" DELETED 120
tap_ok $? "project rlab deleted"
tap_done
