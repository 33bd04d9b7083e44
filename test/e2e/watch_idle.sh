#!/usr/bin/env bash
# Issue 20: an idle deployments leader (mlplat.workers_enabled off) kept its watch open and
# unread, so its version went stale: bench/converge pauses the workers between sizes, and the
# resume after a pause longer than the API server's event history was a 410 Gone, then a relist.
# An idle leader now closes its watch and forgets the cache; its next pass lists.  Here:
#   - while the workers are off, the stand-in holds no open watch stream;
#   - the history is compacted while they are off; on resume one LIST refills the cache, and the
#     watch runs from that LIST's version (no stale version, no 410 to recover from);
#   - then, in a quiet window of several passes, no LIST, and a watch only as a restart of the
#     one before (from a version no older than it, never a stale one);
#   - an out-of-band edit after the resume is repaired from the watch's event, no LIST, no GET.
# The counts are of properties, not of exact request numbers: a watch the server ends (its
# timeout) and the client restarts from its last version is no failure, and a LIST answering a
# 410 would be allowed (none can happen here: the stand-in answers 410 only to a version below
# its compaction, which is the stale-version bug this script is about).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_standin_cluster watch_idle "mlplat.resync_interval = '2s'" \
	"mlplat.full_resync_interval = '1h'" "mlplat.deployments_watch = on"
tap_ok $? "cluster started (the deployments watch on)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'wi')
N=3
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('wi', 0)" \
	-c "SELECT mlplat.add_artifact_location('wi', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('wi', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('wi', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'wi'" READY 30
tap_ok $? "project wi is READY"
q mlplat "SELECT count(mlplat.deploy('wi', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 60
tap_ok $? "$N deployments converge"
STATUS="SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role IN ('leader', 'idle')"
wait_for mlplat "SELECT ($STATUS) ~ 'watch: $N cached'" t 20
tap_ok $? "the leader observes through its watch cache ($(q mlplat "$STATUS" | grep -o 'watch: .*'))"
# count VERB [NAME] — InferenceService requests of that verb in the stand-in's log
count() { admin GET "requests?kind=InferenceService&verb=$1${2:+&name=$2}" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'; }
workers() { q mlplat "ALTER SYSTEM SET mlplat.workers_enabled = $1" >/dev/null && q mlplat "SELECT pg_reload_conf()" >/dev/null; }
# watches_since_clear — the InferenceService LISTs and watches logged since the log was cleared,
# judged against the compaction at version $CRV: "LISTS WATCHES STALE BACKWARDS FIRST" — STALE
# the watches from a version below it (answered 410 Expired; each may cost one LIST), BACKWARDS
# the watches from a version older than the watch before them, FIRST the first one's verb
watches_since_clear() {
	admin GET "requests?kind=InferenceService" | python3 -c '
import json, sys, urllib.parse
crv = int(sys.argv[1])
items = [e for e in json.load(sys.stdin)["items"] if e.get("verb") in ("list", "watch")]
rvs = [int(urllib.parse.parse_qs(urllib.parse.urlsplit(e["path"]).query).get("resourceVersion", ["0"])[0] or 0)
       for e in items if e["verb"] == "watch"]
print(sum(e["verb"] == "list" for e in items), len(rvs), sum(v < crv for v in rvs),
      sum(b < a for a, b in zip(rvs, rvs[1:])), items[0]["verb"] if items else "none")' "$CRV"
}
# open — the watch streams open at the stand-in (cut by asking: none open, none cut)
open() { admin POST watch/drop | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])'; }

workers off
wait_for mlplat "SELECT ($STATUS) = 'mlplat.workers_enabled is off'" t 20
tap_ok $? "the workers are off: the leader idles"
sleep 1
tap_is "$(open)" 0 "the idle leader holds no watch open at the API server"
# the history a stale version would need is gone
CRV=$(admin POST watch/compact '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["compactedRv"])')
admin DELETE requests >/dev/null
workers on
# The idle leader dropped its cache, so "N cached" again means it was refilled; the pass that
# listed says ", listed" only until the next pass, which a slow (sanitized) server can run
# before this poll looks: the LIST itself is counted at the stand-in below.
wait_for mlplat "SELECT ($STATUS) ~ 'watch: $N cached'" t 20
tap_ok $? "resumed: the cache is filled again ($(q mlplat "$STATUS" | grep -o 'watch: .*'))"
for _ in $(seq 1 50); do [ "$(count watch)" -ge 1 ] && break; sleep 0.2; done
read -r lists watches stale back first <<<"$(watches_since_clear)"
tap_is "$first/$lists/$stale/$back" "list/1/0/0" \
	"... one LIST first, then $watches watch(es) from its version on (first/LISTs/stale watches/watches going back)"
# a quiet window of two resyncs and more (2 s here): an idle pass that LISTed would show here
admin DELETE requests >/dev/null
sleep 5
read -r lists watches stale back first <<<"$(watches_since_clear)"
tap_is "$((lists - stale))/$stale/$back" "0/0/0" \
	"quiet: no LIST but for a 410, and $watches watch(es), each a restart (LISTs beyond 410s/stale watches/watches going back)"

admin DELETE requests >/dev/null
before=$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'")
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-wi","name":"d2","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
wait_for mlplat "SELECT count(*) > $before FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'" t 20
tap_ok $? "an out-of-band edit after the resume is repaired"
read -r lists watches stale back first <<<"$(watches_since_clear)"
tap_is "$((lists - stale))/$(count get)" "0/0" "... from the watch's event: no LIST, no GET (LISTs beyond 410s/GETs)"
tap_done
