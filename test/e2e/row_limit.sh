#!/usr/bin/env bash
# Issue 20, target 3: a deployments pass acts on at most mlplat.pass_row_limit rows.  Before,
# its claim had no row limit: at 30,000 new deployments every pass held them all (about 60 kB
# each) and failed on mlplat.pass_memory_limit.  Here 500 new deployments under a limit of 50
# rows and the smallest memory limit (8 MB):
#   - no pass reports more than 50 deployments, and a full claim is followed at once;
#   - all 500 converge with one apply each (stand-in PATCHes and ledger APPLY rows);
#   - full resyncs (every 2 s) walk the fleet in chunks, and their orphan judgement asks the
#     database, not the chunk: no live deployment's object is torn down, nothing deleted;
#   - a real orphan (a deleted deployment's object landing again) is still torn down.
#   - a sweep started by a refilled watch cache goes on to its end: the leader is then steady.
# mlplat.deployments_watch is left at its default (MLPLAT_EXTRA_CONF may turn it on) until
# that last case turns it off and on.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
N=500
e2e_standin_cluster row_limit "mlplat.resync_interval = '2s'" \
	"mlplat.full_resync_interval = '2s'" "mlplat.pass_row_limit = 50" "mlplat.pass_memory_limit = '8MB'"
tap_ok $? "cluster started (mlplat.pass_row_limit = 50, mlplat.pass_memory_limit = 8MB)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'rl')
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('rl', 0)" \
	-c "SELECT mlplat.add_artifact_location('rl', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('rl', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('rl', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'rl'" READY 30
tap_ok $? "project rl is READY"
STATUS="SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"

# the leader's status line, sampled while it converges: "<n> deployments ..." per pass
(while :; do q mlplat "$STATUS"; sleep 0.05; done) >"$WORK/statuses" 2>/dev/null &
sampler=$!
q mlplat "SELECT count(mlplat.deploy('rl', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 240
tap_ok $? "$N deployments converge ($(q mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'") READY)"
sleep 5 # a few full resyncs (2 s apart, 10 chunks each) with every object in the cluster
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null

most=$(sed -n 's/^\([0-9][0-9]*\) deployments.*/\1/p' "$WORK/statuses" | sort -n | tail -1)
seen=$(grep -c 'deployments' "$WORK/statuses")
tap_ok $([ -n "$most" ] && [ "$most" -le 50 ] && [ "$most" -ge 40 ]; echo $?) \
	"no pass acted on more than 50 deployments (most: ${most:-none}, $seen status samples)"
tap_ok $(! grep -q 'pass_memory_limit\|pass failed' "$WORK/statuses"; echo $?) \
	"no pass failed, none on mlplat.pass_memory_limit ($(grep -m1 'pass failed' "$WORK/statuses" | cut -c1-100))"
tap_is "$(q mlplat "SELECT count(*) FILTER (WHERE n <> 1) || '/' || count(*) FROM (
          SELECT d.id, count(l.*) n FROM mlplat.deployments d
            LEFT JOIN mlplat.reconcile_ledger l ON l.kind = 'deployments' AND l.entity_id = d.id AND l.action = 'APPLY'
           GROUP BY d.id) x")" "0/$N" "every deployment has exactly one APPLY in the ledger"
tap_is "$(admin GET 'requests?kind=InferenceService&method=PATCH' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" \
	"500" "the stand-in saw 500 applies: 1.0 per deployment"
tap_is "$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN'")/$(writes_count 'method=DELETE&kind=InferenceService')" \
	"0/0" "full resyncs in chunks tore down no live deployment's object (ledger / stand-in DELETEs)"
tap_is "$(q mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'")" "500" "... and all 500 are still READY"

# a real orphan: d7 undeployed, then its render lands again (as a late apply would)
phantom=$(q mlplat "SELECT mlplat.render_inference_service('rl', 'd7', 1)")
q mlplat "SELECT mlplat.undeploy('rl', 'd7')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd7'" DELETED 30
tap_ok $? "d7 undeployed"
kube POST /apis/serving.kserve.io/v1beta1/namespaces/mlp-rl/inferenceservices "$phantom" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK' AND detail->>'note' = 'mlp-rl/d7'" 1 30
tap_ok $? "the orphan d7 is torn down (the database owns no live row of it)"
tap_is "$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ORPHAN_TEARDOWN'")" 1 \
	"... and it is the only orphan teardown"
# a sweep started by a refilled watch cache goes on to its last chunk: it was left with its
# next chunk asked for at once but never taken, and the leader ran an empty pass every
# millisecond until the next full resync (an hour here)
leader_q() { q mlplat "SELECT $1 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
q mlplat "ALTER SYSTEM SET mlplat.full_resync_interval = '1h'" >/dev/null
q mlplat "ALTER SYSTEM SET mlplat.deployments_watch = off" >/dev/null
q mlplat "SELECT pg_reload_conf()" >/dev/null
wait_for mlplat "SELECT status !~ 'watch' AND status ~ 'deployments' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 20
tap_ok $? "the watch off: no cache ($(leader_q status))"
q mlplat "ALTER SYSTEM SET mlplat.deployments_watch = on" >/dev/null
q mlplat "SELECT pg_reload_conf()" >/dev/null
wait_for mlplat "SELECT status ~ 'watch: [0-9]+ cached' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 20
tap_ok $? "the watch on again: the cache is refilled ($(leader_q status))"
# The refill's sweep (10 chunks of 50, one every other pass) takes a few seconds, more on a
# loaded machine: look at windows of 3 s for up to 30 s.  Steady is a pass per resync (2 s)
# and per event; the bug ran a pass every millisecond, in every window until the hour's resync.
for _ in $(seq 1 10); do
	p0=$(leader_q passes)
	sleep 3
	p1=$(leader_q passes)
	[ $((p1 - p0)) -le 20 ] && break
done
tap_ok $([ $((p1 - p0)) -le 20 ]; echo $?) "after the refill's sweep the leader is steady: $((p1 - p0)) passes in 3 s (at most 20)"
tap_done
