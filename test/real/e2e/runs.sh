#!/usr/bin/env bash
# Runs and pipelines on the real API server: the Workflow mlplat renders is
# accepted by Argo's real CRD schema under mlplat's ServiceAccount, the Argo
# imitation (test/real/controller.js) drives it Pending -> Running ->
# Succeeded with a Pod node per step, and mlplat follows it to SUCCEEDED with
# each step's phase and exit code.  Argo's artifact-gc finalizer: mlplat's Workflows
# carry none (no artifactGC); a project Workflow that has one holds delete_project.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble runs mlplat
real_stack_up controller

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
tap_is "$(rk_body GET /apis/argoproj.io/v1alpha1/namespaces/mlp-rlab/workflows/retl-1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get("finalizers"))')" \
	None "mlplat renders no artifactGC: Argo adds no finalizer to its Workflows"

until_grep() {   # SECONDS PATH STRING: until the object at PATH (as admin) contains STRING
	local deadline=$((SECONDS + $1))
	until rk_body GET "$2" | grep -q "$3"; do
		((SECONDS >= deadline)) && return 1
		sleep 0.2
	done
}

# A Workflow of the project's own with an artifactGC strategy carries Argo's finalizer
# workflows.argoproj.io/artifact-gc until its artifact GC has run; deleting the project
# waits for it (the namespace stays Terminating, its finalizer named).
WF='{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","metadata":{"name":"own-gc"},
  "spec":{"entrypoint":"main","artifactGC":{"strategy":"OnWorkflowDeletion"},"templates":[{"name":"main","container":{"image":"busybox"}}]}}'
rk POST /apis/argoproj.io/v1alpha1/namespaces/mlp-rlab/workflows "$WF" >/dev/null
curl -s -X POST "$REAL_CONTROLLER/wf-hold?ns=mlp-rlab&name=own-gc&on=1" >/dev/null
until_grep 30 /apis/argoproj.io/v1alpha1/namespaces/mlp-rlab/workflows/own-gc '"workflows.argoproj.io/artifact-gc"'
tap_ok $? "a Workflow with artifactGC gets Argo's finalizer workflows.argoproj.io/artifact-gc"
q $DB "SELECT mlplat.delete_project('rlab')" >/dev/null
wait_for $DB "SELECT (status_reason LIKE '%namespace mlp-rlab%terminat%')::text FROM mlplat.projects WHERE name = 'rlab'" true 60
tap_ok $? "delete_project: the namespace is terminating ($(q $DB "SELECT status || ': ' || status_reason FROM mlplat.projects WHERE name = 'rlab'"))"
until_grep 60 /apis/argoproj.io/v1alpha1/namespaces/mlp-rlab/workflows/own-gc deletionTimestamp
tap_ok $? "... the namespace controller deletes the Workflow; it lingers, held by its finalizer"
until_grep 60 /api/v1/namespaces/mlp-rlab 'workflows.argoproj.io/artifact-gc in 1 resource instances'
tap_ok $? "... the namespace names the Workflow's finalizer (NamespaceFinalizersRemaining)"
wait_for $DB "SELECT (status_reason LIKE '%workflows.argoproj.io/artifact-gc in 1 resource instances%')::text FROM mlplat.projects WHERE name = 'rlab'" true 30
tap_ok $? "... and so does the project's DELETING reason ($(q $DB "SELECT status_reason FROM mlplat.projects WHERE name = 'rlab'"))"
[ "$(q $DB "SELECT status FROM mlplat.projects WHERE name = 'rlab'")" != DELETED ]
tap_ok $? "the project is not DELETED while the finalizer holds"
curl -s -X POST "$REAL_CONTROLLER/wf-hold?ns=mlp-rlab&name=own-gc&on=0" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rlab'" DELETED 120
tap_ok $? "project rlab deleted once Argo's artifact GC let the Workflow go"
tap_done
