#!/usr/bin/env bash
# bench/steady_pass/claim.sh — the database side of a steady pass at N deployments, no
# stand-in: what the deployments claim reads and costs when CHANGED rows changed and the rest
# are steady with their resyncs spread over RESYNC_S seconds (issue 20, target 2), beside the
# full claim every pass made before per-row resync.  The fleet is made by deploy() with the
# workers off, then written back READY by the reconciler's own write-back function (so
# next_resync_at is spread as a pass would spread it).  Per N, median of 5:
#   full_ms / full_rows   _deployments_claim(true): every live row (the old steady pass)
#   due_ms / due_rows     _deployments_claim(false): the changed rows and those due now
#   SIZES="1000 10000 100000" CHANGED=20 bench/steady_pass/claim.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1000 10000 100000"}
CHANGED=${CHANGED:-20}
RESYNC_S=${RESYNC_S:-30}
. "$SRC/test/lib/stack.sh"
stack_init spc
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off" \
	"mlplat.resync_interval = '${RESYNC_S}s'" "max_wal_size = '4GB'"
stack_db mlplat mlplat
# the write-back is fenced on the kind's epoch: the (idle) leader's, once it has one
wait_for mlplat "SELECT count(*) FROM mlplat.leader_epochs WHERE kind = 'deployments'" 1 60 || exit 1
EPOCH=$($PSQL -d mlplat -c "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
med() { sort -n | sed -n 3p; }
timed() {   # ms of one statement, measured inside it
	$PSQL -d mlplat -c "SELECT round(extract(epoch FROM clock_timestamp() - now()) * 1000, 2) FROM (SELECT count(*) FROM mlplat._deployments_claim($1)) x"
}
rows=()
made=0
# every DEPLOYING row written back READY by the reconciler's own write-back (next resync spread)
converge() {
	$PSQL -d mlplat -c "SELECT count(*) FROM mlplat._deployments_writeback_set($EPOCH, ARRAY(
	    SELECT ROW(d.id, d.row_version, 'READY', 'ready', d.generation, d.desired_revision, 'http://x', NULL, NULL, NULL)::mlplat.deployment_writeback
	      FROM mlplat.deployments d WHERE d.status = 'DEPLOYING' ORDER BY d.id))" >/dev/null
}
# a steady leader keeps up: the rows that fell due (the earlier sizes', minutes ago) are
# resynced, as its passes would have; a pass then claims the changed rows and what fell due
# since the previous one
resync_due() {
	$PSQL -d mlplat -c "SELECT mlplat._deployments_resynced($EPOCH, ARRAY(SELECT c.id FROM mlplat._deployments_claim(false) c
	                      JOIN mlplat.deployments d ON d.id = c.id WHERE d.status = 'READY'))" >/dev/null
}
for N in $SIZES; do
	p=c$N
	$PSQL -d mlplat -c "SELECT mlplat.create_project('$p', 0)" -c "SELECT mlplat.add_artifact_location('$p', 's3://models/')" \
		-c "SELECT mlplat.register_model_version('$p', 'm', '1', 's3://models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('$p', 'm', '1', 'CANDIDATE')" >/dev/null
	for ((s = 1; s <= N; s += 10000)); do
		$PSQL -d mlplat -c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series($s, $((s + 9999 < N ? s + 9999 : N))) i" >/dev/null
	done
	# converged, as the write-back leaves a fleet: READY, observed, next resync spread over the interval
	converge
	$PSQL -d mlplat -c "VACUUM ANALYZE mlplat.deployments" >/dev/null
	total=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments WHERE status <> 'DELETED'")
	# CHANGED new intents of this size's project (a fixed rate of change)
	$PSQL -d mlplat -c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver', 0, 1, 1, jsonb_build_object('T', i::text))) FROM generate_series(1, $CHANGED) i" >/dev/null
	[ "$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments WHERE status = 'DEPLOYING'")" = "$CHANGED" ] ||
		{ echo "the fleet did not converge in the database" >&2; exit 1; }
	full_ms=$(for _ in 1 2 3 4 5; do timed true; done | med)
	full_rows=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat._deployments_claim(true)")
	due_ms=$(for _ in 1 2 3 4 5; do resync_due; timed false; done | med)
	due_rows=$(for _ in 1 2 3 4 5; do resync_due; $PSQL -d mlplat -c "SELECT count(*) FROM mlplat._deployments_claim(false)"; done | med)
	db_kb=$(($($PSQL -d mlplat -c "SELECT pg_database_size('mlplat')") / 1024))
	rows+=("$(printf '%7s %9s %9s %8s %9s %7s %10s' "$total" "$full_rows" "$full_ms" "$due_rows" "$due_ms" \
		"$(awk -v a="$full_ms" -v b="$due_ms" 'BEGIN{printf "%.1f", a/b}')" "$((db_kb * 1024 / total))")")
	# back to steady for the next size: this size's changes written back
	converge
done
printf '\n%7s %9s %9s %8s %9s %7s %10s\n' N full_rows full_ms due_rows due_ms ratio B/deploy
printf '%s\n' "${rows[@]}"
echo "(N: live deployments, earlier sizes' included; due_rows: $CHANGED new intents + the rows whose resync (spread over ${RESYNC_S} s) fell due since the previous pass (those due just before are resynced first, as a steady leader's passes keep up); median of 5; B/deploy: database size / N; load $(cut -d' ' -f1-3 /proc/loadavg))"
