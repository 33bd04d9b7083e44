#!/usr/bin/env bash
# Issue 18 finding 5: adoption only of what this installation made.  A reconciler
# that finds an object it could have made (a lost answer, a 409, a terminated leader)
# adopts it only when it is provably its own; a planted look-alike is a conflict,
# reported in the status and the ledger, and nothing is moved or touched.
#   registry: a model version carrying our mlplat.version_id tag (and even our
#     installation tag) but another source; one with our source but another
#     installation's tag;
#   workflows: a Workflow under a run's deterministic name with mlplat's labels but not the
#     render's content id (found by LIST); one without our labels (answered 409, then read);
#   InferenceServices: one under a deployment's name with mlplat's labels (even the
#     revision's) but another content id (found by LIST); one without our labels (read
#     before the first apply; with other new names of its namespace, by one LIST of the
#     namespace, no GET per name); an undeploy over a look-alike; a rollout over an object
#     whose content id was replaced.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/registry.sh"
SD=$WORK/standin-adopt
DB=mlplat
RM=hostile.iris   # the registered model (alias_of)
e2e_standin $DB
on_exit registry_disconnect
registry_connect
INSTANCE=$(q $DB "SELECT instance_id FROM mlplat.installation")

q $DB "SELECT mlplat.create_project('hostile', 2); SELECT mlplat.add_artifact_location('hostile', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'hostile'" READY 30
tap_ok $? "project hostile is READY"

# ---------------------------------------------------------------- the registry
for v in 1 2; do
	q $DB "SELECT mlplat.register_model_version('hostile', 'iris', '$v', 's3://models/hostile/$v', '$(printf "h$v" | sha256sum | cut -d' ' -f1)', 'kserve-sklearnserver', 'sklearn')" >/dev/null
done
vid() { q $DB "SELECT v.id FROM mlplat.model_versions v JOIN mlplat.projects p ON p.id = v.project_id WHERE p.name = 'hostile' AND v.version = '$1'"; }
plant() {   # VERSION-ID SOURCE INSTALLATION — a version made by someone else, tagged as ours
	mlflow POST model-versions/create "{\"name\":\"hostile.iris\",\"source\":\"$2\",\"tags\":[{\"key\":\"mlplat.version_id\",\"value\":\"$1\"},{\"key\":\"mlplat.version\",\"value\":\"x\"},{\"key\":\"mlplat.installation\",\"value\":\"$3\"}]}" >/dev/null
}
alias_row() { q $DB "SELECT a.status || ':' || (a.last_error LIKE '%not adopted%') FROM mlplat.model_aliases a JOIN mlplat.models m ON m.id = a.model_id JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'hostile' AND a.alias = '$1'"; }
conflicts() { echo "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'model_aliases' AND project = 'hostile' AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = 'model version $1 of hostile.iris'"; }
mlflow POST registered-models/create '{"name":"hostile.iris"}' >/dev/null

# our version tag and our installation tag, another source
plant "$(vid 1)" s3://evil/weights "$INSTANCE"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '1', 'CANDIDATE')" >/dev/null
wait_for $DB "$(conflicts 1)" t 20
tap_ok $? "registry: a planted version with our tags but another source is a conflict in the ledger"
tap_is "$(alias_row candidate)" "FAILED:true" "registry: the alias is FAILED, saying the version was not adopted"
tap_is "$(alias_of candidate)" INVALID_PARAMETER_VALUE "registry: no alias was moved to the planted version"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.model_registry_versions WHERE version_id = $(vid 1)")" 0 "registry: the planted version is not mapped"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '1', 'NONE')" >/dev/null

# our source, another installation's tag (the model's latest is now this one)
plant "$(vid 2)" s3://models/hostile/2 another-installation
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '2', 'CHAMPION')" >/dev/null
wait_for $DB "$(conflicts 2)" t 20
tap_ok $? "registry: a planted version with our source but another installation's tag is a conflict"
tap_is "$(alias_row champion)" "FAILED:true" "registry: that alias is FAILED too"
tap_is "$(alias_of champion)" INVALID_PARAMETER_VALUE "registry: and not moved"
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '2', 'NONE')" >/dev/null

# ---------------------------------------------------------------- workflows
WF=/apis/argoproj.io/v1alpha1/namespaces/mlp-hostile/workflows
plant_wf() {   # NAME LABELS-JSON — someone else's workflow under a run's name
	admin POST argo/plan '{"kind":"workflow","namespace":"mlp-hostile","name":"'"$1"'","steps":{"*":{"ticks":400}}}' >/dev/null
	kube POST "$WF" '{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","metadata":{"name":"'"$1"'","namespace":"mlp-hostile","labels":'"$2"',"annotations":{"mlplat.io/content-id":"0000"}},"spec":{"entrypoint":"main","templates":[{"name":"main","container":{"name":"main","image":"evil:latest"}}]}}' >/dev/null
}
wf_writes() { admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin).get("Workflow/mlp-hostile/'"$1"'", {}); print("%d/%d" % (w.get("create", 0), w.get("patch", 0) + w.get("update", 0) + w.get("delete", 0)))'; }
wf_shutdown() { kube GET "$WF/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"].get("shutdown"))'; }
run_row() { q $DB "SELECT status || ':' || coalesce(submitted_at IS NULL, false) || ':' || (coalesce(last_error, status_reason) LIKE '%not adopted, not touched%') FROM mlplat.runs WHERE name = '$1'"; }
wf_conflicts() { echo "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'runs' AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = 'mlp-hostile/$1'"; }

# with our labels, another content id: found by the LIST
plant_wf look-1 '{"app.kubernetes.io/managed-by":"mlplat","mlplat.io/instance":"'"$INSTANCE"'","mlplat.io/project":"hostile","mlplat.io/run":"look","mlplat.io/attempt":"1"}'
q $DB "SELECT mlplat.start_run('hostile', 'look', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "$(wf_conflicts look-1)" t 20
tap_ok $? "workflows: a look-alike with our labels and another content id is a conflict in the ledger"
tap_is "$(run_row look)" "PENDING:true:true" "workflows: the run is not marked submitted; its status says the workflow was not adopted"
q $DB "SELECT mlplat.cancel_run('hostile', 'look')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'look'" CANCELLED 20
tap_ok $? "workflows: cancelling it ends the run (nothing of it was created)"
tap_is "$(wf_writes look-1)/$(wf_shutdown look-1)" "1/0/None" "workflows: the look-alike was not touched (no patch, no shutdown, no delete)"

# without our labels: the create is answered 409, the workflow read and refused
plant_wf alien-1 '{"team":"other"}'
q $DB "SELECT mlplat.start_run('hostile', 'alien', '{\"image\": \"python:3.12\"}')" >/dev/null
wait_for $DB "$(wf_conflicts alien-1)" t 20
tap_ok $? "workflows: a workflow of another owner under the run's name is a conflict after the 409"
tap_is "$(q $DB "SELECT http_status FROM mlplat.reconcile_ledger WHERE kind = 'runs' AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = 'mlp-hostile/alien-1' LIMIT 1")" 409 \
	"workflows: the conflict row carries the create's 409"
tap_is "$(run_row alien)" "PENDING:true:true" "workflows: the run is not adopted onto it and says so"
tap_is "$(wf_writes alien-1)" "1/0" "workflows: nothing was written to it"
q $DB "SELECT mlplat.cancel_run('hostile', 'alien')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.runs WHERE name = 'alien'" CANCELLED 20
tap_ok $? "workflows: the run can be cancelled"

# ---------------------------------------------------------------- InferenceServices
ISVC=/apis/serving.kserve.io/v1beta1/namespaces/mlp-hostile/inferenceservices
SHA3=$(standin_artifact s3://models/hostile/3 'hostile weights three')
SHA4=$(standin_artifact s3://models/hostile/4 'hostile weights four')
q $DB "SELECT mlplat.register_model_version('hostile', 'iris', '3', 's3://models/hostile/3', '$SHA3', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.register_model_version('hostile', 'iris', '4', 's3://models/hostile/4', '$SHA4', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('hostile', 'iris', '3', 'CANDIDATE'); SELECT mlplat.set_model_stage('hostile', 'iris', '4', 'CHAMPION')" >/dev/null
plant_isvc() {   # NAME LABELS-JSON — someone else's InferenceService under a deployment's name
	kube POST "$ISVC" '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"'"$1"'","namespace":"mlp-hostile","labels":'"$2"',"annotations":{"mlplat.io/content-id":"0000"}},"spec":{"predictor":{"model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://evil/weights"}}}}' >/dev/null
}
isvc_writes() { admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin).get("InferenceService/mlp-hostile/'"$1"'", {}); print("%d/%d" % (w.get("create", 0), w.get("patch", 0) + w.get("update", 0) + w.get("delete", 0)))'; }
isvc_uri() { kube GET "$ISVC/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["model"]["storageUri"])'; }
dep_row() { q $DB "SELECT d.status || ':' || (coalesce(d.last_error, d.status_reason) LIKE '%not adopted, not touched%') FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'hostile' AND d.name = '$1'"; }
isvc_conflicts() {   # DEPLOYMENT KIND — a conflict row of the deployment, or of one of its rollouts
	echo "SELECT count(*) > 0 FROM mlplat.reconcile_ledger l WHERE l.kind = '$2' AND l.action = 'ADOPT' AND l.outcome = 'CONFLICT'
	        AND l.entity_id IN (SELECT CASE WHEN l.kind = 'rollouts' THEN r.id ELSE d.id END FROM mlplat.deployments d
	                             LEFT JOIN mlplat.rollouts r ON r.deployment_id = d.id WHERE d.name = '$1')"
}
deploy_h() { q $DB "SELECT status FROM mlplat.deploy('hostile', '$1', 'iris', '$2', 'kserve-sklearnserver', 0, 1, 1, '{}')" >/dev/null; }

# with our labels, even revision 1's, and another content id: found by the LIST
plant_isvc lookalike '{"app.kubernetes.io/managed-by":"mlplat","mlplat.io/instance":"'"$INSTANCE"'","mlplat.io/project":"hostile","mlplat.io/deployment":"lookalike","mlplat.io/revision":"1"}'
deploy_h lookalike 3
wait_for $DB "$(isvc_conflicts lookalike deployments)" t 30
tap_ok $? "isvc: a look-alike with our labels and another content id is a conflict in the ledger"
tap_is "$(dep_row lookalike)" "DEPLOYING:true" "isvc: the deployment is not READY on it and says it was not adopted"
tap_is "$(isvc_writes lookalike)/$(isvc_uri lookalike)" "1/0/s3://evil/weights" "isvc: nothing was applied over it"
q $DB "SELECT mlplat.undeploy('hostile', 'lookalike')" >/dev/null
wait_for $DB "SELECT d.status FROM mlplat.deployments d WHERE d.name = 'lookalike'" DELETED 30
tap_ok $? "isvc: undeploying it ends the deployment"
tap_is "$(q $DB "SELECT status_reason LIKE '%is not this deployment''s%not deleted' FROM mlplat.deployments WHERE name = 'lookalike'")/$(isvc_writes lookalike)" \
	"t/1/0" "isvc: ... saying the object is not its own; the look-alike was not deleted"

# without our labels: not in the LIST, read before the first apply and refused
plant_isvc alien '{"team":"other"}'
deploy_h alien 3
wait_for $DB "$(isvc_conflicts alien deployments)" t 30
tap_ok $? "isvc: an InferenceService of another owner under the deployment's name is a conflict"
tap_is "$(dep_row alien)/$(isvc_writes alien)/$(isvc_uri alien)" "DEPLOYING:true/1/0/s3://evil/weights" \
	"isvc: the deployment says so and nothing was applied over it"

# several new names in one namespace, in one pass: the namespace's InferenceServices
# listed instead of a GET per name before the first applies (bench/converge: 1,000 GETs).
# Without the watch cache one LIST with no selector; with it (what carries our selector is
# in the cache) the two LISTs of what does not: managed-by!=mlplat, instance!=ours — each
# shows one of the look-alikes under trio-d and trio-e, and both the unlabelled one under trio-c
plant_isvc trio-c '{"team":"other"}'
plant_isvc trio-d '{"app.kubernetes.io/managed-by":"other","mlplat.io/instance":"'"$INSTANCE"'"}'
plant_isvc trio-e '{"app.kubernetes.io/managed-by":"mlplat","mlplat.io/instance":"other"}'
seq0=$(admin GET 'requests?kind=InferenceService&namespace=mlp-hostile' | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
q $DB "SELECT count(mlplat.deploy('hostile', n, 'iris', '3', 'kserve-sklearnserver', 0, 1, 1, '{}')) FROM unnest(ARRAY['trio-a', 'trio-b', 'trio-c', 'trio-d', 'trio-e']) n" >/dev/null
wait_for $DB "SELECT string_agg(status, ',' ORDER BY name) FROM mlplat.deployments WHERE name LIKE 'trio-%'" READY,READY,DEPLOYING,DEPLOYING,DEPLOYING 30
tap_ok $? "isvc: five new names deployed at once: two READY, the three over look-alikes not"
for n in trio-c trio-d trio-e; do
	wait_for $DB "$(isvc_conflicts $n deployments)" t 30
	tap_ok $? "isvc: ... $n a conflict in the ledger, found by the namespace's LIST"
	tap_is "$(dep_row $n)/$(isvc_writes $n)/$(isvc_uri $n)" "DEPLOYING:true/1/0/s3://evil/weights" \
		"isvc: ... and nothing applied over $n"
done
# (without the cache, a pass not woken by the deploy observes its few rows with a GET each
# before deciding: those GETs are not the look's, and are not counted then)
if [ "$(q $DB "SHOW mlplat.deployments_watch")" = on ]; then looks="0 GETs, 2 LISTs by !=, 0 without"; else looks="0 LISTs by !=, 1 without"; fi
# before the first apply of the five: GETs by name, LISTs of the namespace by != and without a selector
tap_same "$(admin GET "requests?kind=InferenceService&namespace=mlp-hostile&since=$seq0" | python3 -c '
import json, sys, urllib.parse
items = json.load(sys.stdin)["items"]
names = ("trio-a", "trio-b", "trio-c", "trio-d", "trio-e")
first = min([e["seq"] for e in items if e.get("name") in names and e["method"] == "PATCH"] or [0])
pre = [e for e in items if e["seq"] < first and e["method"] == "GET"]
sel = [urllib.parse.parse_qs(urllib.parse.urlsplit(e["path"]).query).get("labelSelector", [""])[0] for e in pre if not e.get("name")]
gets = "%d GETs, " % sum(1 for e in pre if e.get("name") in names) if sys.argv[1] == "on" else ""
print("%s%d LISTs by !=, %d without" % (gets, sum(1 for s in sel if "!=" in s), sum(1 for s in sel if not s)))' \
	"$(q $DB "SHOW mlplat.deployments_watch")")" \
	"$looks" "isvc: looked at with the namespace's LISTs, no GET per name, before the applies"

# ours, redeployed (the object carries revision 1's id while revision 2 is applied) and
# rolled out (the rollout stamps the target's id): each accepts the other's
deploy_h own 3
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'own'" READY 30
tap_ok $? "isvc: a deployment of our own is READY"
deploy_h own 4
wait_for $DB "SELECT status || ':' || observed_revision FROM mlplat.deployments WHERE name = 'own'" READY:2 30
tap_ok $? "isvc: redeployed over revision 1's object: READY on revision 2"
q $DB "SELECT status FROM mlplat.start_rollout('hostile', 'own', 'iris', '3', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 60}')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger l JOIN mlplat.rollouts r ON r.id = l.entity_id WHERE l.kind = 'rollouts' AND l.action = 'APPLY' AND l.outcome = 'OK' AND r.deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'own')" 1 30
tap_ok $? "isvc: the rollout applies its first step over the deployment's object"
q $DB "SELECT mlplat.abort_rollout('hostile', 'own')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts WHERE deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'own')" ABORTED 30
tap_ok $? "isvc: aborted, the rollout's object is the deployment's again"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'own'" READY 30
tap_ok $? "isvc: ... and the deployment READY on it"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger l JOIN mlplat.deployments d ON d.id = l.entity_id WHERE l.action = 'ADOPT' AND l.outcome = 'CONFLICT' AND d.name = 'own'")" 0 \
	"isvc: no conflict for the deployment's own object"

# a rollout over an object whose content id someone replaced while it runs
deploy_h forged 3
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'forged'" READY 30
tap_ok $? "isvc: deployment forged is READY"
q $DB "SELECT status FROM mlplat.start_rollout('hostile', 'forged', 'iris', '4', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 60}')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger l JOIN mlplat.rollouts r ON r.id = l.entity_id WHERE l.kind = 'rollouts' AND l.action = 'APPLY' AND l.outcome = 'OK' AND r.deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'forged')" 1 30
tap_ok $? "isvc: its rollout applied its first step"
curl -s -X PATCH -H "Authorization: Bearer $STANDIN_TOKEN" -H 'Content-Type: application/merge-patch+json' \
	"$STANDIN_URL$ISVC/forged" -d '{"metadata":{"annotations":{"mlplat.io/content-id":"0000"}}}' >/dev/null
tap_is "$(kube GET "$ISVC/forged" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["annotations"]["mlplat.io/content-id"])')" 0000 \
	"isvc: then someone replaced the content id on the object"
before=$(isvc_writes forged)
wait_for $DB "$(isvc_conflicts forged rollouts)" t 30
tap_ok $? "isvc: the rollout finds another content id on the object: a conflict in the ledger"
tap_is "$(q $DB "SELECT last_error LIKE '%not adopted, not touched%' FROM mlplat.rollouts WHERE deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'forged')")" t \
	"isvc: the rollout says so"
tap_same "$before" "$(isvc_writes forged)" "isvc: nothing was written to the object after the forger's patch"

# the database is shared with the next scripts: leave nothing waiting on a conflict
target=$(q $DB "SELECT r.spec->'metadata'->'annotations'->>'mlplat.io/content-id' FROM mlplat.deployment_revisions r JOIN mlplat.rollouts o ON o.deployment_id = r.deployment_id AND o.target_revision = r.revision JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'forged'")
curl -s -X PATCH -H "Authorization: Bearer $STANDIN_TOKEN" -H 'Content-Type: application/merge-patch+json' \
	"$STANDIN_URL$ISVC/forged" -d '{"metadata":{"annotations":{"mlplat.io/content-id":"'"$target"'"}}}' >/dev/null
kube DELETE "$ISVC/alien" >/dev/null
for n in trio-c trio-d trio-e; do kube DELETE "$ISVC/$n" >/dev/null; done
kube DELETE "$ISVC/lookalike" >/dev/null
q $DB "SELECT mlplat.abort_rollout('hostile', 'forged')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.rollouts WHERE deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'forged')" ABORTED 30
tap_ok $? "isvc: with the forger's id put back, the rollout is the deployment's again and aborts"
for n in alien own forged trio-a trio-b trio-c trio-d trio-e; do q $DB "SELECT mlplat.undeploy('hostile', '$n')" >/dev/null; done
wait_for $DB "SELECT string_agg(DISTINCT status, ',') FROM mlplat.deployments WHERE name IN ('alien', 'own', 'forged', 'trio-a', 'trio-b', 'trio-c', 'trio-d', 'trio-e')" DELETED 60
tap_ok $? "isvc: the look-alikes removed, every deployment of this script undeploys"
tap_is "$(kube_code "$ISVC/own")/$(kube_code "$ISVC/forged")" 404/404 "isvc: ... and mlplat's own objects are gone from the stand-in (GET is 404)"

tap_done
