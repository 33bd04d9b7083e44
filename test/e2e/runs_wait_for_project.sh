#!/usr/bin/env bash
# A run started in the same transaction as its project waits for the project to be READY
# before its workflow is submitted: Argo runs it as the project's runner ServiceAccount,
# and fails it at once while that identity does not exist.  The runner ServiceAccount's
# apply is held at the stand-in while the runs leader gets passes to submit; then it lands,
# the project turns READY, and the run is submitted and succeeds.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-rwp
e2e_standin mlplat
on_exit 'admin DELETE faults >/dev/null; release_holds drop'
admin PUT config '{"argoStepMs": 250}' >/dev/null
DB=mlplat

wf_state() {   # the run's workflow at the stand-in: its phase, or "absent"
	kube GET "/apis/argoproj.io/v1alpha1/namespaces/mlp-rwp/workflows/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else (o.get("status", {}).get("phase") or "new"))'
}

ns_state() {   # the namespace at the stand-in: its phase, or "absent"
	kube GET "/api/v1/namespaces/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else o.get("status", {}).get("phase"))'
}

# every apply of the runner ServiceAccount is parked until released (a retry too)
hold_rule '{"method":"PATCH","path":"/api/v1/namespaces/mlp-rwp/serviceaccounts/mlplat-runner$","hold":"before"}' >/dev/null
q $DB "BEGIN; SELECT mlplat.create_project('rwp', 2); SELECT mlplat.start_run('rwp', 'first', '{\"image\": \"python:3.12\"}'); COMMIT" >/dev/null
tap_ok $? "a project and a run in it, in one transaction"
wait_held 1 30
tap_ok $? "the projects leader's runner ServiceAccount apply is held at the stand-in"
tap_is "$(ns_state mlp-rwp)" Active "the project's namespace exists already (a workflow could be created in it)"
passes_after $DB runs 3
tap_ok $? "the runs leader ran three passes meanwhile"
tap_is "$(q $DB "SELECT p.status || '/' || r.status FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id WHERE r.name = 'first' AND p.name = 'rwp'")/$(wf_state first-1)" \
	"PROVISIONING/PENDING/absent" "while the project is not READY the run is PENDING and no workflow was created"

admin DELETE faults >/dev/null
release_holds
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rwp'" READY 60
tap_ok $? "the ServiceAccount lands and the project is READY"
wait_for $DB "SELECT r.status FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id WHERE r.name = 'first' AND p.name = 'rwp'" SUCCEEDED 60
tap_ok $? "the run is then submitted and SUCCEEDED (not failed for a missing identity)"
tap_is "$(wf_state first-1)" Succeeded "the workflow at the stand-in Succeeded"
tap_done
