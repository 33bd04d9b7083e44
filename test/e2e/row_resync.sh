#!/usr/bin/env bash
# Issue 20, target 2: passes that cost what changed.  Each deployment has its own
# next resync time, spread over mlplat.resync_interval; a pass between full passes
# reads only the rows that changed or whose resync is due and observes just those
# (a GET each, no LIST of the fleet).  Before: every pass claimed every live row
# and LISTed every InferenceService, so one row due meant the whole fleet re-read.
# Also: drift is still found and repaired by a row's own resync, and a new leader's
# first pass is full (every row, one LIST).
#
# Two modes, one script each: this one with mlplat.deployments_watch off (the GET path
# above), row_resync_watch.sh with it on (ROW_RESYNC_WATCH=on: the due row is observed
# from the watch cache with no request at all, its next resync is
# mlplat.watch_resync_interval ahead, and the new leader's one LIST is the cache's fill).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
WATCH=${ROW_RESYNC_WATCH:-off}
# the per-row resync period in force: mlplat.resync_interval without the watch,
# mlplat.watch_resync_interval with it (seconds)
if [ "$WATCH" = on ]; then PERIOD=3600; else PERIOD=3; fi
e2e_standin_cluster "row_resync_$WATCH" "mlplat.resync_interval = '3s'" \
	"mlplat.full_resync_interval = '1h'" "mlplat.deployments_watch = $WATCH" "mlplat.watch_resync_interval = '1h'"
tap_ok $? "cluster started (watch $WATCH; resync every ${PERIOD} s per row, full pass once an hour)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'rr')
N=8
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('rr', 0)" \
	-c "SELECT mlplat.add_artifact_location('rr', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('rr', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('rr', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'rr'" READY 30
tap_ok $? "project rr is READY"
q mlplat "SELECT count(mlplat.deploy('rr', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE status = 'READY'" $N 60
tap_ok $? "$N deployments converge"

# wait_requests QUERY — wait (up to 30 s) until the stand-in logged a request matching QUERY; print how many
wait_requests() {
	local n=0
	for _ in $(seq 1 150); do
		n=$(admin GET "requests?$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
		[ "$n" -ge 1 ] && break
		sleep 0.2
	done
	echo "$n"
}

# --- the spread: each write-back or resync sets now() + interval x [0.5, 1.5)
out=$(q mlplat "SELECT min(t) >= 1.5 AND max(t) < 4.5 AND max(t) - min(t) > 2 AND stddev(t) > 0.5
  FROM (SELECT extract(epoch FROM mlplat._next_resync_at() - now()) AS t FROM generate_series(1, 2000)) x")
tap_is "$out" t "next resync times fall in [0.5, 1.5) x mlplat.resync_interval, spread over it (2000 draws)"
# (a row resynced a moment ago by a pass that ran before the cache was filled may still be
# on mlplat.resync_interval: it is resynced from the cache then, and moves on)
wait_for mlplat "SELECT count(DISTINCT next_resync_at) = $N AND bool_and(next_resync_at BETWEEN now() + $PERIOD * interval '0.5 s' - interval '10 s' AND now() + $PERIOD * interval '1.5 s')
  FROM mlplat.deployments" t 20
tap_ok $? "every row has its own next resync time, within 1.5 intervals ($PERIOD s)"

# --- one row due: one row read, one GET, no LIST, the others untouched
leader_status() { q mlplat "SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
q mlplat "UPDATE mlplat.deployments SET next_resync_at = now() + interval '100 hours' WHERE name <> 'd3'" >/dev/null
# a pass that claimed before the UPDATE may still be GETting: wait for one that read at most
# d3 (the status is "reconciling" while a pass runs)
wait_for mlplat "SELECT status ~ '^[01] deployments due' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" t 20
tap_ok $? "a pass reads at most the one row whose resync may be due ($(leader_status))"
admin DELETE requests >/dev/null
q mlplat "UPDATE mlplat.deployments SET next_resync_at = now() WHERE name = 'd3'" >/dev/null
if [ "$WATCH" = on ]; then
	wait_for mlplat "SELECT next_resync_at > now() + interval '1 s' FROM mlplat.deployments WHERE name = 'd3'" t 20
	tap_ok $? "the due row is compared and marked resynced: its next resync moved on"
	tap_is "$(q mlplat "SELECT next_resync_at BETWEEN now() + interval '29 min' AND now() + interval '91 min' FROM mlplat.deployments WHERE name = 'd3'")" t \
		"... by mlplat.watch_resync_interval (1 h x [0.5, 1.5)), not mlplat.resync_interval"
	sleep 1
	tap_is "$(admin GET 'requests?kind=InferenceService' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" 0 \
		"... from the watch cache: no GET, no LIST, no request at all"
else
	n=$(wait_requests 'verb=get&kind=InferenceService&name=d3')
	tap_ok $([ "$n" -ge 1 ]; echo $?) "the due row is observed with a GET ($n)"
	wait_for mlplat "SELECT next_resync_at > now() + interval '1 s' FROM mlplat.deployments WHERE name = 'd3'" t 20
	tap_ok $? "... and marked resynced: its next resync moved on"
	sleep 1
	others=$(admin GET 'requests?kind=InferenceService' | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for e in items if e.get("verb") == "list"), sum(1 for e in items if e.get("name") not in (None, "d3")))')
	tap_is "$others" "0 0" "no LIST of the fleet, no request about any other deployment (LISTs, others)"
fi
tap_is "$(q mlplat "SELECT count(*) FROM mlplat.deployments WHERE next_resync_at > now() + interval '99 hours'")" $((N - 1)) \
	"the other rows were neither read nor resynced (their next resync is untouched)"
tap_is "$(writes_count "kind=InferenceService")" 0 "a resync that found nothing changed wrote nothing to the cluster"

# --- drift is found by the row's own resync (with the watch: by its event), and repaired
q mlplat "UPDATE mlplat.deployments SET next_resync_at = now()" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE next_resync_at > now() + interval '1 s'" $N 30
tap_ok $? "every row's next resync is scheduled ahead"
r0=$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'")
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-rr","name":"d5","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
wait_for mlplat "SELECT count(*) > $r0 FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'" t 30
tap_ok $? "an out-of-band edit is found (watch $WATCH) and repaired"
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'd5'" READY 30
tap_ok $? "... and the deployment is READY again"

# --- a new leader's first pass is full: every row, one LIST
q mlplat "UPDATE mlplat.deployments SET next_resync_at = now() + interval '100 hours'" >/dev/null
admin DELETE requests >/dev/null
old_pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
q mlplat "SELECT pg_terminate_backend($old_pid)" >/dev/null
n=$(wait_requests 'verb=list&kind=InferenceService')
tap_ok $([ "$n" -ge 1 ]; echo $?) "after a leadership change the new leader LISTs the fleet ($n LIST requests)"
wait_for mlplat "SELECT count(*) FROM mlplat.deployments WHERE next_resync_at < now() + $PERIOD * interval '1.5 s'" $N 30
tap_ok $? "... and its full pass resynced every row (none left 100 hours away)"
tap_done
