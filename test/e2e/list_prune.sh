#!/usr/bin/env bash
# Issue 20, target 3: a fleet-wide LIST of InferenceServices held every parsed page until its
# last (about 18 kB an object), so at 30,000 deployments the watch cache's relist after 410 Gone
# stopped on mlplat.pass_memory_limit at page 31, and every later pass failed on its own LIST.
# Each page is now pruned to what a pass compares and freed before the next is fetched.  Here
# 1,500 deployments (three pages) under a 16 MB limit, which a LIST holding every parsed page
# passes at its second page:
#   - they converge with one apply each, and no pass stops on mlplat.pass_memory_limit;
#   - a 410 Gone on the watch relists the whole fleet (mlplat.deployments_watch on), or
#     (off) the full passes LIST it every 2 s: no pass fails;
#   - two new names in that namespace are looked under with a LIST of the namespace and no GET,
#     which fell back to a GET each before: with the watch off one with no label selector (every
#     object in it), with it on the two of what is not ours by label (managed-by!=, instance!=);
#   - an out-of-band edit is still repaired (the pruned objects keep what the diff reads).
# mlplat.deployments_watch is left at its default (MLPLAT_EXTRA_CONF may turn it off).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
N=1500
e2e_standin_cluster list_prune "mlplat.resync_interval = '2s'" \
	"mlplat.full_resync_interval = '2s'" "mlplat.pass_memory_limit = '16MB'"
tap_ok $? "cluster started (mlplat.pass_memory_limit = 16MB)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'lp')
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('lp', 0)" \
	-c "SELECT mlplat.add_artifact_location('lp', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('lp', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('lp', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'lp'" READY 30
tap_ok $? "project lp is READY"
STATUS="SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"
WATCH=$(q mlplat "SHOW mlplat.deployments_watch")

# the leader's status line, sampled throughout
(while :; do q mlplat "$STATUS"; sleep 0.05; done) >"$WORK/statuses" 2>/dev/null &
sampler=$!
on_exit "kill $sampler 2>/dev/null"
# failed [LINE] — the first failure among the samples (from line LINE on)
failed() { tail -n +"${1:-1}" "$WORK/statuses" | grep -a -m1 'pass_memory_limit\|pass failed\|watch unhealthy' | cut -c1-160; }
q mlplat "SELECT count(mlplat.deploy('lp', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 300
tap_ok $? "$N deployments converge ($(q mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'") READY)"
tap_is "$(admin GET 'requests?kind=InferenceService&method=PATCH' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" \
	"1500" "the stand-in saw 1500 applies: 1.0 per deployment"
tap_is "$(failed)" "" "no pass stopped on mlplat.pass_memory_limit or failed while converging"

# the whole fleet listed again: the watch's 410 (watch on), the full passes' LISTs (off)
admin DELETE requests >/dev/null
mark=$(wc -l <"$WORK/statuses")
# fleet_pages — LIST requests of the whole fleet by the selector the stand-in has seen
fleet_pages() {
	admin GET 'requests?verb=list&kind=InferenceService' | python3 -c '
import json, sys
print(sum(1 for e in json.load(sys.stdin)["items"] if e["path"].startswith("/apis/serving.kserve.io/v1beta1/inferenceservices?")))'
}
[ "$WATCH" = on ] && admin POST watch/compact '{"expire": true}' >/dev/null
# bounded by time, not by a count of polls: under load one poll (python, the request log) takes
# seconds, and a loaded leader's relist of 1,500 objects took longer than 150 of them
deadline=$((SECONDS + 90))
until [ "$(fleet_pages)" -ge 3 ] || ((SECONDS >= deadline)); do sleep 0.2; done
tap_ok $([ "$(fleet_pages)" -ge 3 ]; echo $?) \
	"the whole fleet is listed again, three pages (watch $WATCH: $([ "$WATCH" = on ] && echo "a 410's relist" || echo "the full passes"))"
sleep 3
wait_for mlplat "SELECT ($STATUS) ~ '^[0-9]+ deployments|watch: $N cached'" t 20
tap_ok $? "... and the passes after it work ($(q mlplat "$STATUS" | cut -c1-120))"
tap_is "$(failed "$mark")" "" "... and no pass stopped on mlplat.pass_memory_limit or failed"

# two new names: the namespace's LIST (all of it, or with the watch what is not ours by label), no GET
admin DELETE requests >/dev/null
q mlplat "SELECT mlplat.deploy('lp', n, 'm', '1', 'kserve-sklearnserver') FROM unnest(ARRAY['e1', 'e2']) n" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE name IN ('e1', 'e2') AND status = 'READY'" 2 60
tap_ok $? "two new deployments converge"
tap_is "$(admin GET 'requests?kind=InferenceService&namespace=mlp-lp' | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
ns_lists = sum(1 for e in items if e.get("verb") == "list" and ("labelSelector" not in e["path"] or "%21%3D" in e["path"]))
gets = sum(1 for e in items if e.get("verb") == "get" and e["path"].split("?")[0].rsplit("/", 1)[-1] in ("e1", "e2"))
print(ns_lists > 0, gets)')" "True 0" "they were looked under by a LIST of the namespace, with no GET (LIST seen, GETs)"

# an out-of-band edit is repaired from the pruned objects
before=$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'")
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-lp","name":"d7","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
wait_for mlplat "SELECT count(*) > $before FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'" t 30
tap_ok $? "an out-of-band edit of d7 is repaired"
tap_is "$(failed)" "" "no pass stopped on mlplat.pass_memory_limit or failed at all"
tap_done
