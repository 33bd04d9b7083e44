#!/usr/bin/env bash
# DROP DATABASE waits until every backend has absorbed a ProcSignalBarrier.  A standby
# reconciler waits for the leader lock in slices that end in a lock timeout; a barrier that
# came with one of those timeouts used to stay pending forever (the timeout's ERROR is raised
# before ProcessInterrupts looks at barriers, and the next interrupt is again a timeout), so
# DROP DATABASE of any database hung.  With the shortest retry interval the standbys time out
# a hundred times a second, which made the old code hang within a few drops.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster dropdb-barrier
P=$(free_port)
cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.leader_retry_interval = '10ms'"
tap_ok $? "cluster with 2 replicas per kind started (leader_retry_interval 10 ms)"
export PGHOST=$WORK PGPORT=$P
q postgres "CREATE DATABASE mlplat" >/dev/null
q mlplat "CREATE EXTENSION mlplat" >/dev/null
NK=$(mlplat_kinds_count)
wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE role = 'standby'" "$NK" 20
tap_ok $? "one standby per kind waits for the leader lock"

N=30
slow=0
worst=0
for i in $(seq 1 $N); do
	t0=$(date +%s%N)
	PGOPTIONS='-c statement_timeout=10s' q postgres "CREATE DATABASE barrier_$i" >/dev/null &&
		PGOPTIONS='-c statement_timeout=10s' q postgres "DROP DATABASE barrier_$i" >/dev/null
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms > worst)) && worst=$ms
	if [ $rc != 0 ]; then
		slow=$((slow + 1))
		grep 'to accept ProcSignalBarrier' "$WORK/data.log" | tail -1 | sed 's/^/# /'
		break   # a hung barrier stays hung: every later drop would wait its 10 s too
	fi
done
tap_same "0 of $N" "$slow of $N" "CREATE + DROP DATABASE never hang with standbys in the lock queue (worst ${worst} ms, limit 10 s)"
tap_same "$NK" "$(q mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE role = 'standby'")" "the standbys still stand by"
tap_done
