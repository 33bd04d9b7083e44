#!/usr/bin/env bash
# Issue 20, target 2: the deployments leader's watch cache (mlplat.deployments_watch).  It LISTs
# InferenceServices once, keeps a watch with bookmarks open across passes, and observes claimed
# rows from the cache.  Proven here against the stand-in's request log:
#   - an out-of-band change is repaired from its event, with no LIST and no GET in between;
#   - ERROR 410 on the stream (a compaction) makes exactly one LIST, and the cache works after it;
#   - a stream cut mid-way resumes from the last version seen, without a LIST;
#   - while the watch is healthy, rows are resynced mlplat.watch_resync_interval apart;
#   - a new leader starts from one LIST; a reloaded mlplat.kube_url empties the cache and LISTs;
#   - an object of ours landing after its deployment was deleted is torn down at once;
#   - with the watch turned off, passes GET and LIST as before.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_standin_cluster deployments_watch "mlplat.resync_interval = '3s'" \
	"mlplat.full_resync_interval = '1h'" "mlplat.deployments_watch = on"
tap_ok $? "cluster started (the deployments watch on; row resync 3 s without it)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'dw')
N=4
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('dw', 0)" \
	-c "SELECT mlplat.add_artifact_location('dw', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('dw', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('dw', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'dw'" READY 30
tap_ok $? "project dw is READY"
q mlplat "SELECT count(mlplat.deploy('dw', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 60
tap_ok $? "$N deployments converge"

leader_status() { q mlplat "SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
# count VERB [NAME] — InferenceService requests of that verb in the stand-in's log (apply: the PATCHes)
count() {
	local by="verb=$1"
	[ "$1" = apply ] && by="method=PATCH"
	admin GET "requests?kind=InferenceService&$by${2:+&name=$2}" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'
}
# watches — the resourceVersion each logged InferenceService watch started from, one a line
watches() {
	admin GET 'requests?kind=InferenceService&verb=watch' | python3 -c '
import json, sys, urllib.parse
for e in json.load(sys.stdin)["items"]:
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(e["path"]).query)
    print(q.get("resourceVersion", [""])[0], q.get("allowWatchBookmarks", [""])[0], q.get("labelSelector", [""])[0])'
}
# repair NAME REPLICAS — edit NAME out of band and wait for its REPAIR in the ledger
repair() {
	local before
	before=$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'")
	admin POST edit "{\"resource\":\"inferenceservices\",\"namespace\":\"mlp-dw\",\"name\":\"$1\",\"patch\":{\"spec\":{\"predictor\":{\"minReplicas\":$2}}}}" >/dev/null
	wait_for mlplat "SELECT count(*) > $before FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'" t 20
}

wait_for mlplat "SELECT status ~ 'watch: $N cached' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 20
tap_ok $? "the leader's status reports the cache: $N objects and its size ($(leader_status))"
w=$(watches | tail -1)
tap_ok $(echo "$w" | grep -Eq '^[1-9][0-9]* true app.kubernetes.io/managed-by=mlplat,'; echo $?) \
	"the watch runs from a version, with bookmarks and the managed-by selector ($w)"
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE next_resync_at > now() + interval '1 hour'" $N 20
tap_ok $? "while the watch is healthy, each row's next resync is hours away (mlplat.watch_resync_interval)"

# --- an out-of-band change: found by its event, repaired, no GET and no LIST
admin DELETE requests >/dev/null
repair d2 3
tap_ok $? "an out-of-band edit is repaired from the watch's event (the row's resync is hours away)"
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd2'" READY 20
tap_ok $? "... and d2 is READY again"
tap_is "$(count list) $(count get)" "0 0" "no LIST and no GET of InferenceServices in between (LISTs, GETs)"
tap_is "$(count apply d2)" 1 "one apply: the repair of d2"
tap_is "$(count apply)" 1 "... and none to any other deployment"

# --- ERROR 410 on the stream: exactly one relist, then the cache works again
admin DELETE requests >/dev/null
out=$(admin POST watch/compact '{"expire": true}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["expired"])')
tap_ok $([ "$out" -ge 1 ]; echo $?) "a compaction ends the open watch with ERROR 410 ($out streams)"
for _ in $(seq 1 100); do [ "$(count list)" -ge 1 ] && break; sleep 0.2; done
sleep 1 # room for a second LIST, were there one
tap_is "$(count list)" 1 "exactly one LIST after the 410"
tap_is "$(count apply)" 0 "... and no apply: the relist found the $N converged deployments as they were"
tap_ok $([ "$(watches | wc -l)" -ge 1 ]; echo $?) "... and a new watch from the list's version"
admin DELETE requests >/dev/null
repair d3 4
tap_ok $? "after the relist an out-of-band edit is again repaired from its event"
tap_is "$(count list) $(count get)" "0 0" "... with no LIST and no GET"

# --- a stream cut mid-way resumes from the last version, without a relist
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd3'" READY 20
tap_ok $? "d3 is READY again"
sleep 1.5 # a bookmark (every second) moves the version on
admin DELETE requests >/dev/null
out=$(admin POST watch/drop | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])')
tap_ok $([ "$out" -ge 1 ]; echo $?) "the open watch is cut ($out streams)"
for _ in $(seq 1 100); do [ "$(watches | wc -l)" -ge 1 ] && break; sleep 0.2; done
rv=$(watches | head -1 | cut -d' ' -f1)
tap_ok $([ -n "$rv" ] && [ "$rv" != 0 ]; echo $?) "the watch starts again from the last version seen ($rv)"
tap_is "$(count list)" 0 "... without a LIST"
repair d4 5
tap_ok $? "an out-of-band edit after the cut is repaired from its event"
tap_is "$(count list) $(count get)" "0 0" "... still with no LIST and no GET"

# --- an out-of-band delete: the event makes the row due, the pass re-creates it
admin DELETE requests >/dev/null
kube DELETE "/apis/serving.kserve.io/v1beta1/namespaces/mlp-dw/inferenceservices/d1" >/dev/null
wait_for mlplat "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'APPLY' AND entity_id = (SELECT id FROM mlplat.deployments WHERE name = 'd1') AND at > now() - interval '20 s'" t 20
tap_ok $? "an InferenceService deleted out of band is applied again"
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd1'" READY 30
tap_ok $? "... and d1 is READY again"
tap_is "$(count list)" 0 "... with no LIST"

# --- a new leader starts from one LIST
admin DELETE requests >/dev/null
old_pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
q mlplat "SELECT pg_terminate_backend($old_pid)" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader' AND pid <> $old_pid AND status ~ 'watch: $N cached'" 1 30
tap_ok $? "a new leader fills its cache ($(leader_status))"
sleep 2
tap_is "$(count list)" 1 "... from one LIST (its full pass reads the cache)"
repair d2 6
tap_ok $? "the new leader repairs an out-of-band edit from its event"

# --- another API server (mlplat.kube_url reloaded): the cache is emptied and refilled by a LIST.
# A version from the old server may be ahead of every event the new one sends: watched from,
# nothing would arrive and nothing would say so (the real suite's scripts each start their
# own kube-apiserver).  Here the same stand-in under another name stands for another server.
kube_url() {
	q mlplat "ALTER SYSTEM SET mlplat.kube_url = '$1'" >/dev/null
	q mlplat "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 1 100); do [ "$(count list)" -ge 1 ] && break; sleep 0.2; done
	count list
}
admin DELETE requests >/dev/null
n=$(kube_url "http://localhost:$STANDIN_PORT")
tap_ok $([ "$n" -ge 1 ]; echo $?) "a reloaded mlplat.kube_url empties the cache: a LIST refills it ($n)"
admin DELETE requests >/dev/null
n=$(kube_url "$STANDIN_URL")
tap_ok $([ "$n" -ge 1 ]; echo $?) "... and again when it is set back ($n)"
repair d4 7
tap_ok $? "the refilled cache's watch repairs an out-of-band edit from its event"

# --- an apply answered too late lands after its deployment was deleted: the event of an object
# of ours that no live row owns makes the next pass full, and the orphan goes at once instead
# of at the next full pass (an hour here)
phantom=$(q mlplat "SELECT mlplat.render_inference_service('dw', 'd1', 1)")
q mlplat "SELECT mlplat.undeploy('dw', 'd1')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd1'" DELETED 30
tap_ok $? "d1 undeployed"
kube POST /apis/serving.kserve.io/v1beta1/namespaces/mlp-dw/inferenceservices "$phantom" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK'" 1 20
tap_ok $? "d1's render landing again is torn down as an orphan within seconds ($(leader_status))"
wait_kube_gone /apis/serving.kserve.io/v1beta1/namespaces/mlp-dw/inferenceservices/d1 20
tap_ok $? "... and is gone from the stand-in (GET is 404)"

# --- a watch lagging behind our own writes (a loaded API server): a pass that reads the cache
# before an apply's event arrived must see what it applied, not nothing (that applied again:
# 1,145 applies for 1,000 deployments with the events 1.5 s late, bench/converge)
admin PUT config '{"watchDelayMs": 1500}' >/dev/null
admin DELETE requests >/dev/null
M=5
q mlplat "SELECT count(mlplat.deploy('dw', 'e' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $M) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE name LIKE 'e%' AND status = 'READY'" $M 60
tap_ok $? "$M deployments converge with the watch's events 1.5 s late"
tap_same "$(count apply)" "$M" "... with one apply each"
admin PUT config '{"watchDelayMs": 0}' >/dev/null

# --- the watch turned off: passes observe as before (GET a due row), the row resync is short again
q mlplat "ALTER SYSTEM SET mlplat.deployments_watch = off" >/dev/null
q mlplat "SELECT pg_reload_conf()" >/dev/null
wait_for mlplat "SELECT status !~ 'watch' AND status ~ 'deployments' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 20
tap_ok $? "with mlplat.deployments_watch off the status no longer reports a cache ($(leader_status))"
admin DELETE requests >/dev/null
q mlplat "UPDATE mlplat.deployments SET next_resync_at = now() WHERE name = 'd3'" >/dev/null
for _ in $(seq 1 100); do [ "$(count get d3)" -ge 1 ] && break; sleep 0.2; done
tap_ok $([ "$(count get d3)" -ge 1 ]; echo $?) "a due row is observed with a GET again"
wait_for mlplat "SELECT next_resync_at < now() + interval '10 s' FROM mlplat.deployments WHERE name = 'd3'" t 20
tap_ok $? "... and its next resync is mlplat.resync_interval away again"
tap_done
