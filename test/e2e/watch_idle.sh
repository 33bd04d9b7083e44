#!/usr/bin/env bash
# Issue 20: an idle deployments leader (mlplat.workers_enabled off) kept its watch open and
# unread, so its version went stale: bench/converge pauses the workers between sizes, and the
# resume after a pause longer than the API server's event history was a 410 Gone, then a relist.
# An idle leader now closes its watch and forgets the cache; its next pass lists.  Here:
#   - while the workers are off, the stand-in holds no open watch stream;
#   - the history is compacted while they are off; on resume one LIST refills the cache, and a
#     watch runs from that LIST's version (no stale version, no 410 to recover from);
#   - an out-of-band edit after the resume is repaired from the watch's event, no LIST, no GET.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster watch_idle
SD=$WORK/standin
e2e_standin
P=$(free_port)
cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.resync_interval = '2s'" \
	"mlplat.full_resync_interval = '1h'" "mlplat.deployments_watch = on" \
	"mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" "${STANDIN_S3_CONF[@]}"
tap_ok $? "cluster started (the deployments watch on)"
export PGHOST=$WORK PGPORT=$P
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
# open — the watch streams open at the stand-in (cut by asking: none open, none cut)
open() { admin POST watch/drop | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])'; }

workers off
wait_for mlplat "SELECT ($STATUS) = 'mlplat.workers_enabled is off'" t 20
tap_ok $? "the workers are off: the leader idles"
sleep 1
tap_is "$(open)" 0 "the idle leader holds no watch open at the API server"
admin POST watch/compact '{}' >/dev/null # the history a stale version would need is gone
admin DELETE requests >/dev/null
workers on
# The idle leader dropped its cache, so "N cached" again means it was refilled; the pass that
# listed says ", listed" only until the next pass, which a slow (sanitized) server can run
# before this poll looks: the LIST itself is counted at the stand-in below.
wait_for mlplat "SELECT ($STATUS) ~ 'watch: $N cached'" t 20
tap_ok $? "resumed: the cache is filled again ($(q mlplat "$STATUS" | grep -o 'watch: .*'))"
for _ in $(seq 1 50); do [ "$(count watch)" -ge 1 ] && break; sleep 0.2; done
tap_is "$(count list)/$(count watch)" "1/1" "... one LIST and one watch from its version (LISTs/watches)"

admin DELETE requests >/dev/null
before=$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'")
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-wi","name":"d2","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
wait_for mlplat "SELECT count(*) > $before FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK'" t 20
tap_ok $? "an out-of-band edit after the resume is repaired"
tap_is "$(count list)/$(count get)" "0/0" "... from the watch's event: no LIST, no GET (LISTs/GETs)"
tap_done
