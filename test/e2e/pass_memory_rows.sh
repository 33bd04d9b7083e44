#!/usr/bin/env bash
# Issue 20, target 3 (chunk9): what a deployments pass holds per row of its chunk bounds how
# large mlplat.pass_row_limit may be.  A pass of 1,000 first applies held 25-36 kB a row (its
# requests' paths in 1 kB buffers, 1 kB span attribute buffers, every answer until the batch
# ended, and a 15 kB parse of each object the previous chunk changed), and the leader's RssAnon
# grew by about 43 kB a row of a chunk.  Here 2,000 new deployments in one chunk
# (pass_row_limit = 2000), the watch on:
#   - all converge READY with one apply each (stand-in PATCHes);
#   - the leader's RssAnon, sampled while they converge, grows by less than 30 kB a row over
#     what it was before the deploy(), the watch cache's 2,000 objects included (24 kB a row
#     with the change, 37 kB before it, one run each).  Not judged under --sanitize: ASan's
#     quarantine holds freed memory.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
N=2000
e2e_standin_cluster pass_memory_rows "mlplat.resync_interval = '2s'" "mlplat.pass_row_limit = $N" \
	"mlplat.deployments_watch = on"
tap_ok $? "cluster started (mlplat.pass_row_limit = $N, the watch on)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'pm')
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('pm', 0)" \
	-c "SELECT mlplat.add_artifact_location('pm', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('pm', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('pm', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'pm'" READY 30
tap_ok $? "project pm is READY"
# a few steady passes first: the leader's caches and its watch are warm before the base
sleep 3
pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
rss() { awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
base=$(rss)
tap_ok $([ -n "$base" ]; echo $?) "the leader's RssAnon before the deploy: ${base:-none} kB (pid ${pid:-none})"

# its peak, sampled every 20 ms until every deployment is READY
(
	peak=0
	while :; do
		v=$(rss)
		[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v && echo "$peak" >"$WORK/peak"
		sleep 0.02
	done
) &
sampler=$!
q mlplat "SELECT count(mlplat.deploy('pm', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 240
tap_ok $? "$N deployments converge ($(q mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'") READY)"
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
tap_same "$(admin GET 'requests?kind=InferenceService&method=PATCH' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" \
	"$N" "the stand-in saw $N applies: 1.0 per deployment"
tap_same "$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")" "$pid" \
	"the same leader throughout (its RssAnon is the converge's)"

peak=$(cat "$WORK/peak" 2>/dev/null || echo 0)
per_row=$(((peak - base) / N))
echo "# leader RssAnon: $base kB before, $peak kB at the peak: $per_row kB a row of the chunk"
if [ "${SANITIZE:-0}" = 1 ]; then
	tap_ok 0 "the leader's RssAnon per row of a chunk # SKIP RSS under ASan (its quarantine holds freed memory)"
else
	tap_ok $([ "$peak" -gt 0 ] && [ "$per_row" -lt 30 ]; echo $?) \
		"the leader's RssAnon grew by less than 30 kB a row of its chunk ($per_row kB: $base -> $peak kB)"
fi
tap_done
