#!/usr/bin/env bash
# The look before first applies, against the real kube-apiserver (issue 18 finding 5,
# issue 20).  Several new names of one namespace in one pass are looked at with LISTs of
# the namespace, not a GET per name; with the watch cache current, only what is not ours
# by label is listed: two LISTs by the selectors app.kubernetes.io/managed-by!=mlplat and
# mlplat.io/instance!=<ours> (k!=v also matches an object without k).  The stand-in
# implements "!=" itself; here the real API server answers those selectors.  Planted
# under three of five new names: an InferenceService managed by another tool, one with
# mlplat's managed-by but another installation's instance, one without labels.  Each is
# found by one of the LISTs and is an adoption conflict, nothing is applied over it, and
# the two other names converge.  mlplat talks to the API server through the fault proxy
# (no faults), whose request log shows what was asked before the first apply.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble look mlplat
real_reset_at_exit mlplat.deployments_watch
real_stack_up s3 controller
# the look by != is the watch cache's (on by default; set here so the scenario is this one whatever the suite's default)
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.deployments_watch = on" -c "SELECT pg_reload_conf()" >/dev/null
real_proxy_start "$RD" 3
tap_ok $? "the fault proxy is up in front of the API server (no fault rules)"
real_connect $DB "$REAL_PROXY_URL"

INSTANCE=$(q $DB "SELECT instance_id FROM mlplat.installation")
ISVCS=/apis/serving.kserve.io/v1beta1/namespaces/mlp-rlook/inferenceservices
q $DB "SELECT mlplat.create_project('rlook', 8, '16', '32Gi'); SELECT mlplat.add_artifact_location('rlook', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rlook'" READY 60
tap_ok $? "project rlook is READY"
SHA=$(real_s3_put s3://models/look/1 'look-v1')
q $DB "SELECT mlplat.register_model_version('rlook', 'iris', '1', 's3://models/look/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('rlook', 'iris', '1', 'CANDIDATE')" >/dev/null
tap_ok $? "model version iris/1 registered, its artifact on S3"

# one deployment first: the leader's watch cache is current once it is READY
q $DB "SELECT mlplat.deploy('rlook', 'first', 'iris', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'first'" READY 90
tap_ok $? "a first deployment is READY"
tap_is "$(q $DB "SHOW mlplat.deployments_watch")" on "the deployments watch is on"
wait_for $DB "SELECT status LIKE '%watch: % cached%' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 30
tap_ok $? "the leader's status line shows its watch cache"

# the look-alikes, made by the API server's admin (not through the proxy)
plant() {   # NAME LABELS-JSON
	rk POST $ISVCS '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"'"$1"'","labels":'"$2"',"annotations":{"mlplat.io/content-id":"0000"}},"spec":{"predictor":{"model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://evil/weights"}}}}' | tail -1
}
tap_is "$(plant look-c '{"team":"other"}') $(plant look-d '{"app.kubernetes.io/managed-by":"helm","mlplat.io/instance":"'"$INSTANCE"'"}') $(plant look-e '{"app.kubernetes.io/managed-by":"mlplat","mlplat.io/instance":"another-installation"}')" \
	"201 201 201" "three look-alikes planted: unlabelled, managed by helm, another installation's"
# what each selector answers on the real API server
selected() { rk_body GET "$ISVCS?labelSelector=$1" | python3 -c 'import json,sys; print(" ".join(sorted(i["metadata"]["name"] for i in json.load(sys.stdin)["items"])))'; }
tap_is "$(selected 'app.kubernetes.io/managed-by!=mlplat')" "look-c look-d" "the API server's managed-by!=mlplat: the unlabelled one and helm's"
tap_is "$(selected "mlplat.io/instance!=$INSTANCE")" "look-c look-e" "the API server's instance!=ours: the unlabelled one and the other installation's"

n0=$(proxy_admin GET requests | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
q $DB "SELECT count(mlplat.deploy('rlook', n, 'iris', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')) FROM unnest(ARRAY['look-a', 'look-b', 'look-c', 'look-d', 'look-e']) n" >/dev/null
wait_for $DB "SELECT string_agg(status, ',' ORDER BY name) FROM mlplat.deployments WHERE name LIKE 'look-%'" READY,READY,DEPLOYING,DEPLOYING,DEPLOYING 90
rc=$?
tap_ok $rc "five new names deployed at once: look-a and look-b READY, the three over look-alikes not"
[ $rc = 0 ] || q $DB "SELECT name, status, status_reason, last_error FROM mlplat.deployments WHERE name LIKE 'look-%' ORDER BY name" | sed 's/^/# row: /'
for n in look-c look-d look-e; do
	wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger l JOIN mlplat.deployments d ON d.id = l.entity_id WHERE l.kind = 'deployments' AND l.action = 'ADOPT' AND l.outcome = 'CONFLICT' AND d.name = '$n'" t 30
	tap_ok $? "$n: an adoption conflict in the ledger"
	tap_is "$(q $DB "SELECT d.status || ':' || (coalesce(d.last_error, d.status_reason) LIKE '%not adopted, not touched%') FROM mlplat.deployments d WHERE d.name = '$n'")/$(rk_body GET $ISVCS/$n | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["model"]["storageUri"])')" \
		"DEPLOYING:true/s3://evil/weights" "$n: the deployment says it was not adopted; nothing applied over it"
done
# through the proxy, before the first apply of the five: GETs by name, LISTs of the
# namespace by != and without a selector, and their answers
tap_is "$(proxy_admin GET requests | python3 -c '
import json, sys, urllib.parse
items = json.load(sys.stdin)["items"][int(sys.argv[1]):]
names = ("look-a", "look-b", "look-c", "look-d", "look-e")
base = "/apis/serving.kserve.io/v1beta1/namespaces/mlp-rlook/inferenceservices"
def name(e):
    p = urllib.parse.urlsplit(e["path"]).path
    return p[len(base) + 1:] if p.startswith(base + "/") else None
def listed(e):
    return urllib.parse.urlsplit(e["path"]).path == base and e.get("verb") != "watch"
first = min([i for i, e in enumerate(items) if name(e) in names and e["method"] == "PATCH"] or [len(items)])
pre = [e for e in items[:first] if e["method"] == "GET"]
sel = [(urllib.parse.parse_qs(urllib.parse.urlsplit(e["path"]).query).get("labelSelector", [""])[0], e.get("status")) for e in pre if listed(e)]
print("%d GETs, %d LISTs by != (%s), %d without" % (sum(1 for e in pre if name(e) in names),
      sum(1 for s, _ in sel if "!=" in s), ",".join(str(c) for s, c in sel if "!=" in s), sum(1 for s, _ in sel if not s)))' "$n0")" \
	"0 GETs, 2 LISTs by != (200,200), 0 without" "looked at with the two LISTs by != (answered 200), no GET per name, before the applies"

for n in first look-a look-b look-c look-d look-e; do q $DB "SELECT mlplat.undeploy('rlook', '$n')" >/dev/null; done
wait_for $DB "SELECT count(*) FROM mlplat.deployments WHERE name IN ('first', 'look-a', 'look-b', 'look-c', 'look-d', 'look-e') AND status <> 'DELETED'" 0 90
tap_ok $? "all six undeployed"
tap_is "$(for n in look-c look-d look-e; do rk_body GET $ISVCS/$n | python3 -c 'import json,sys; o=json.load(sys.stdin); print(o["metadata"]["name"] if not o["metadata"].get("deletionTimestamp") else "deleted")'; done | tr '\n' ' ')" \
	"look-c look-d look-e " "the look-alikes were not deleted by the undeploys"
for n in look-c look-d look-e; do rk DELETE $ISVCS/$n >/dev/null; done
q $DB "SELECT mlplat.delete_project('rlook')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'rlook'" DELETED 120
tap_ok $? "project rlook is deleted"
tap_done
