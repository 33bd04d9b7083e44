#!/usr/bin/env bash
# The lab_runs resync with many project namespaces and no lab run at all (the soak's shape):
# the claim reads every project namespace, and the list of them must outlive the claim's
# SPI connection (it was built in SPI's memory, freed by SPI_finish: the reconciler read
# freed memory and died of signal 11 in the soak).  On a private cluster (a crash restarts
# every backend): many projects, several resync passes that LIST lab Secrets in each of
# their namespaces, no crash, and the worker's passes do not fail.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-many-ns
e2e_standin
e2e_own_cluster lab_many_namespaces
PP=$(free_port)
N=${LAB_MANY_NS:-400}
cluster_start "$WORK/data" "$PP" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" \
	"mlplat.leader_retry_interval = '250ms'" "mlplat.resync_interval = '1s'" "${STANDIN_CONF[@]}" \
	"mlplat.lease_fence = off"
tap_ok $? "private cluster started against the stand-in"
pq() { PGHOST=$WORK PGPORT=$PP $PSQL -d mlplat -c "$1"; }
wait_p() { PGHOST=$WORK PGPORT=$PP wait_for mlplat "$@"; }
PGHOST=$WORK PGPORT=$PP $PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
pq "CREATE EXTENSION mlplat" >/dev/null
pq "CREATE ROLE mn_owner LOGIN" >/dev/null
pq "SELECT count(mlplat.create_project('mn' || i, 1, NULL, NULL, NULL, 'mn_owner')) FROM generate_series(1, $N) i" >/dev/null
tap_same "$(pq "SELECT count(*) FROM mlplat.projects")" "$N" "$N projects made"
# a resync LISTs lab Secrets in every project namespace; wait for three passes that reached the last one
listed() { admin GET requests | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["items"]
          if r.get("method") == "GET" and r.get("path", "").startswith("/api/v1/namespaces/mlp-mn'"$N"'/secrets")))'; }
ok=0
for _ in $(seq 1 400); do
	[ "$(listed 2>/dev/null || echo 0)" -ge 3 ] && { ok=1; break; }
	grep -q 'terminated by signal' "$WORK/data.log" && break
	sleep 0.1
done
tap_is "$ok" 1 "three lab_runs resyncs LISTed lab Secrets in every one of the $N namespaces"
grep -n 'terminated by signal' "$WORK/data.log"
tap_ok $((!$?)) "no server process died of a signal"
tap_is "$(pq "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader' AND passes >= 3")" 1 \
	"the lab_runs leader lives on (status: $(pq "SELECT status FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'"))"
tap_done
