#!/usr/bin/env bash
# Leadership and lifecycle of the reconciler workers, on a cluster of its own
# (kill -9 restarts every backend, which the shared cluster must not see):
# takeover after termination, epochs, crash restart, DROP DATABASE, shutdown.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster leadership
P=$(free_port)
# pg_cron's launcher would itself block DROP DATABASE mlplat: keep it elsewhere here
cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.leader_retry_interval = '250ms'"
tap_ok $? "cluster with 2 replicas per kind started"
export PGHOST=$WORK PGPORT=$P
q postgres "CREATE DATABASE mlplat" >/dev/null
q mlplat "CREATE EXTENSION mlplat" >/dev/null

LEADER_SQL="SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"
LEADERS="SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')"
# the kinds the library defines (src/kinds.c), so a new kind is counted without editing this
NK=$(mlplat_kinds_count)
wait_for mlplat "$LEADERS" "$NK" 20
tap_ok $? "one leader for each of the $NK kinds"
tap_same "$NK" "$(q mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE role = 'standby'")" "the other replica of each kind stands by"

# --- (a) the leader ends: the standby leads within the retry interval, epoch + 1
old_pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role IN ('leader','idle')")
old_epoch=$(q mlplat "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
t0=$(date +%s%N)
q mlplat "SELECT pg_terminate_backend($old_pid)" >/dev/null
wait_for mlplat "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'" $((old_epoch + 1)) 5
tap_ok $? "after pg_terminate_backend of the leader, the epoch moved from $old_epoch to $((old_epoch + 1))"
new_pid=$(q mlplat "SELECT pid FROM mlplat.leader_epochs WHERE kind = 'deployments'")
ms=$(q mlplat "SELECT round(extract(epoch FROM acquired_at) * 1000 - $t0 / 1000000) FROM mlplat.leader_epochs WHERE kind = 'deployments'")
# Correctness, not speed (bench/runtime measures that): a generous bound that a
# loaded CI machine still meets, far below any resync or lease timescale.
[ "$new_pid" != "$old_pid" ] && [ "$ms" -lt 5000 ]
tap_ok $? "a different replica (pid $new_pid) took over in $ms ms (retry interval 250 ms)"

# --- (b) a deposed epoch cannot write the ledger
tap_is "$(q mlplat "SELECT mlplat._ledger_append('deployments','test',1,NULL,'APPLY','OK',NULL,NULL,200,NULL,$old_epoch,'old-leader',NULL)")" f \
	"a ledger write stamped with the old epoch is refused"
tap_is "$(q mlplat "SELECT mlplat._ledger_append('deployments','test',1,NULL,'APPLY','OK',NULL,NULL,200,NULL,$((old_epoch + 1)),'new-leader',NULL)")" t \
	"a ledger write stamped with the current epoch lands"

# --- (c) kill -9 of a worker: the postmaster restarts every backend; one leader per kind again
victim=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'runs' AND role IN ('leader','idle')")
kill -9 "$victim"
sleep 1
wait_for mlplat "$LEADERS" "$NK" 30
tap_ok $? "after kill -9 of a worker and the crash restart, one leader per kind again"
grep -q 'all server processes terminated; reinitializing' "$WORK/data.log"
tap_ok $? "... and the server really did restart every backend"

# --- (d) DROP DATABASE with workers connected completes promptly, and CREATE brings them back
t0=$SECONDS
lines_before=$(wc -l <"$WORK/data.log")
q postgres "DROP DATABASE mlplat" >/dev/null
rc=$?
tap_ok $rc "DROP DATABASE mlplat with workers connected ($((SECONDS - t0)) s)"
sleep 3
tap_is "$(q postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mlplat reconciler' AND datname IS NOT NULL")" 0 \
	"workers do not reconnect to the dropped database"
fatals=$(tail -n +"$lines_before" "$WORK/data.log" | grep -c 'database "mlplat" does not exist')
tap_ok $((fatals > 0)) "no connection attempts to the dropped database ($fatals log lines)"
q postgres "CREATE DATABASE mlplat" >/dev/null && q mlplat "CREATE EXTENSION mlplat" >/dev/null
wait_for mlplat "$LEADERS" "$NK" 30
tap_ok $? "CREATE DATABASE + CREATE EXTENSION: leaders are back without a restart"

# --- (e) fast shutdown with workers running is prompt
t0=$(date +%s%N)
as_pg "$BIN/pg_ctl" -D "$WORK/data" -m fast -t 30 stop >/dev/null
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
tap_ok $rc "fast shutdown with workers running took $ms ms"
tap_ok $((ms > 10000)) "... under 10 s"
tap_done
