#!/usr/bin/env bash
# bench/routes/run.sh — what publishing route generations costs the transactions that change
# the set of READY deployments, against the same transactions with the publishing trigger
# disabled (the baseline), in the same run on the same throwaway cluster (workers off).
#   SIZES="100 1000" REPS=5 DURATION=5 bench/routes/run.sh
# For each N (deployments in one project):
#   bulk: one write-back transaction makes all N READY (UPDATE + COMMIT, psql \timing),
#         median of REPS, with and without the trigger;
#   one:  pgbench, one client, each transaction flips one deployment READY <-> FAILED while
#         the others stay READY (each publish reads ~N routes): tps and median latency;
#   size: stored bytes of the project's N current routes (its open route_entries rows; a
#         generation itself records only what changed).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"100 1000"}
REPS=${REPS:-5}
DURATION=${DURATION:-5}
. "$SRC/test/lib/stack.sh"
stack_init routes
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off"
stack_db mlplat mlplat
SHA=$(printf 'b' | sha256sum | cut -d' ' -f1)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
trigger() { $PSQL -d mlplat -c "ALTER TABLE mlplat.deployments $1 TRIGGER deployments_publish_routes" >/dev/null; }

# bulk P -> ms of "UPDATE all to READY; COMMIT" (the reset before it is not timed)
bulk() {
	$PSQL -d mlplat -c "UPDATE mlplat.deployments SET status = 'DEPLOYING', endpoint = NULL WHERE project_id = $1" >/dev/null
	$BIN/psql -qX -v ON_ERROR_STOP=1 -d mlplat <<SQL | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk '{s += $1} END {printf "%.1f", s}'
BEGIN;
\timing on
UPDATE mlplat.deployments SET status = 'READY', endpoint = 'http://' || name || '.example.com',
       observed_revision = desired_revision, ready_revision = desired_revision WHERE project_id = $1;
COMMIT;
SQL
}

# one P N -> "tps p50_ms"
one() {
	local dir
	dir=$(mktemp -d "$WORK/pgb.XXXX")
	cat >"$dir/flip.sql" <<SQL
\set d random(1, $2)
UPDATE mlplat.deployments SET status = CASE WHEN status = 'READY' THEN 'FAILED' ELSE 'READY' END
WHERE project_id = $1 AND name = 'd' || :d;
SQL
	chown -R "$RUNAS" "$dir" 2>/dev/null
	(cd "$dir" && as_pg "$BIN/pgbench" -n -h "$WORK" -p "$PORT" -U postgres -c 1 -T "$DURATION" -f "$dir/flip.sql" \
		-l --log-prefix="$dir/tx" mlplat 2>&1) >"$dir/out" || { cat "$dir/out" >&2; return 1; }
	printf '%s %s\n' "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$dir/out" | head -1)" \
		"$(cat "$dir"/tx.* | awk '{print $3 / 1000}' | median)"
}

printf '%6s | %12s %12s %6s | %9s %9s %6s | %10s %10s | %10s\n' N bulk_ms bulk_off_ms ratio one_tps off_tps ratio one_p50_ms off_p50_ms set_bytes
for N in $SIZES; do
	p=r$N
	$PSQL -d mlplat -c "SELECT mlplat.create_project('$p', 0)" \
		-c "SELECT mlplat.add_artifact_location('$p', 's3://b/')" \
		-c "SELECT mlplat.register_model_version('$p', 'm', '1', 's3://b/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('$p', 'm', '1', 'CANDIDATE')" \
		-c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
	P=$($PSQL -d mlplat -c "SELECT id FROM mlplat.projects WHERE name = '$p'")
	on=(); off=()
	for _ in $(seq "$REPS"); do
		trigger ENABLE; on+=("$(bulk "$P")")
		trigger DISABLE; off+=("$(bulk "$P")")
	done
	trigger ENABLE
	g0=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $P")
	bytes=$($PSQL -d mlplat -c "SELECT sum(pg_column_size(e.*)) FROM mlplat.route_entries e WHERE e.project_id = $P AND e.to_gen IS NULL")
	read -r ot op < <(one "$P" "$N")
	g1=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $P")
	trigger DISABLE
	read -r ft fp < <(one "$P" "$N")
	trigger ENABLE
	B=$(printf '%s\n' "${on[@]}" | median); BO=$(printf '%s\n' "${off[@]}" | median)
	printf '%6s | %12s %12s %6.2f | %9.1f %9.1f %6.2f | %10.3f %10.3f | %10s\n' "$N" "$B" "$BO" "$(echo "$B / $BO" | bc -l)" \
		"$ot" "$ft" "$(echo "$ot / $ft" | bc -l)" "$op" "$fp" "$bytes"
	echo "#   N=$N: $((g1 - g0)) generations published by the one-change run (one per transaction expected)"
done
echo "# bulk: median of $REPS; one: pgbench 1 client ${DURATION}s; ratio = with trigger / without; load: $(cut -d' ' -f1-3 /proc/loadavg)"
