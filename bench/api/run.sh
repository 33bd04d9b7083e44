#!/usr/bin/env bash
# bench/api/run.sh — the cost of the API call's preamble and epilogue: pgbench of
# set_project_quota() and grant_role() (an unchanged grant: authorize, traceparent, project
# lock, audit, wake) by an administrator, one transaction of both per call.  Prints
# "tps p50_ms" per run.
#
#   [BUILD=dir] [DURATION=10] [REPS=3] [CLIENTS=1] bench/api/run.sh
#
# BUILD=dir measures another source tree (e.g. an export of main); run two at the same time
# so both see the machine's load, and compare the medians.
set -uo pipefail
DURATION=${DURATION:-10} REPS=${REPS:-3} CLIENTS=${CLIENTS:-1}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
stack_init api
# the library loaded, no workers; fsync off (cluster_start) so the figure is the CPU a call costs
stack_start "shared_preload_libraries = 'mlplat'" "mlplat.database = 'postgres'" "mlplat.workers_enabled = off"
W=$WORK
$PSQL -d postgres -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('bench', 10)" \
	-c "SELECT mlplat.grant_role('bench', 'u1', 'viewer')" >/dev/null
cat >"$W/api.sql" <<'SQL'
BEGIN;
SELECT mlplat.set_project_quota('bench', 10);
SELECT mlplat.grant_role('bench', 'u1', 'viewer');
COMMIT;
SQL
chown -R "$RUNAS" "$W" 2>/dev/null || true
for i in $(seq "$REPS"); do
	logdir=$(mktemp -d "$W/log.XXXX"); chown "$RUNAS" "$logdir" 2>/dev/null || true
	out=$(cd "$logdir" && as_pg "$BIN/pgbench" -n -h "$W" -p "$PORT" -U postgres -c "$CLIENTS" -j "$CLIENTS" \
	        -T "$DURATION" -f "$W/api.sql" -l --log-prefix="$logdir/tx" postgres 2>&1) || { echo "$out" >&2; exit 1; }
	tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1)
	p50=$(cat "$logdir"/tx.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]/1000}')
	echo "$tps $p50"
done
