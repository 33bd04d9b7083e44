#!/usr/bin/env bash
# bench/steady_pass/claim_converge.sh — the deployments claim (mlplat._deployments_claim) in
# the state a converge of N new deployments meets it (issue 20, claim9): N intents made by
# deploy() with the workers off (every row changed and due), then HALF of them written back
# by the reconciler's own write-back as an apply leaves them (DEPLOYING, waiting for READY,
# next resync spread).  Per state and pass kind, the claim of one chunk (LIMIT, as the C adds
# it), timed inside the statement, median of REPS calls:
#   full      _deployments_claim(true, false, 0, AFTER, LIMIT)  a full pass's chunk
#   only_new  _deployments_claim(false, true, 0, 0, LIMIT)      a pass woken by a commit
#   due       _deployments_claim(false, false, 0, 0, LIMIT)     a pass between full passes
#   N=10000 REPS=11 bench/steady_pass/claim_converge.sh      (BUILD=dir: another tree)
#   EXPLAIN=1 ...: print EXPLAIN (ANALYZE, BUFFERS) of each claim body instead of timing
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-10000}
REPS=${REPS:-11}
LIMIT=${LIMIT:-1000}
. "$SRC/test/lib/stack.sh"
stack_init clc
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off" \
	"mlplat.resync_interval = '2s'" "auto_explain.log_nested_statements = on"
stack_db mlplat mlplat
wait_for mlplat "SELECT count(*) FROM mlplat.leader_epochs WHERE kind = 'deployments'" 1 60 >/dev/null || exit 1
EPOCH=$($PSQL -d mlplat -c "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'deployments'")
$PSQL -d mlplat -c "SELECT mlplat.create_project('p', 0)" -c "SELECT mlplat.add_artifact_location('p', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('p', 'm', '1', 's3://models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('p', 'm', '1', 'CANDIDATE')" >/dev/null
$PSQL -d mlplat -c "SELECT count(mlplat.deploy('p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
# the SQL of one claim, as the C runs it
claim_sql() {
	case $1 in
	full) echo "SELECT c FROM mlplat._deployments_claim(true, false, 0, $((N / 2)), $LIMIT) c LIMIT $LIMIT" ;;
	only_new) echo "SELECT c FROM mlplat._deployments_claim(false, true, 0, 0, $LIMIT) c LIMIT $LIMIT" ;;
	due) echo "SELECT c FROM mlplat._deployments_claim(false, false, 0, 0, $LIMIT) c LIMIT $LIMIT" ;;
	esac
}
timed() {
	$PSQL -d mlplat -c "SELECT round(extract(epoch FROM clock_timestamp() - now()) * 1000, 2) FROM (SELECT count(*) FROM ($(claim_sql "$1")) c) x"
}
med() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
rows=()
measure() {   # state
	local k
	for k in full only_new due; do
		if [ -n "${EXPLAIN:-}" ]; then
			echo "== $1 $k"
			$PSQL -d mlplat -c "LOAD 'auto_explain'" -c "SET auto_explain.log_min_duration = 0" \
				-c "SET auto_explain.log_analyze = on" -c "SET auto_explain.log_buffers = on" \
				-c "SET auto_explain.log_nested_statements = on" -c "SET client_min_messages = log" \
				-c "SET auto_explain.log_level = notice" -c "$(claim_sql "$k")" 2>&1 >/dev/null
			continue
		fi
		rows+=("$(printf '%-8s %-9s %6s %9s' "$1" "$k" "$($PSQL -d mlplat -c "SELECT count(*) FROM ($(claim_sql "$k")) c")" \
			"$(for _ in $(seq 1 "$REPS"); do timed "$k"; done | med)")")
	done
}
measure start
# half the fleet applied: written back DEPLOYING (waiting for READY) by the reconciler's write-back
$PSQL -d mlplat -c "SELECT count(*) FROM mlplat._deployments_writeback_set($EPOCH, ARRAY(
    SELECT ROW(d.id, d.row_version, 'DEPLOYING', 'applied', d.generation, d.desired_revision, NULL, NULL, NULL, NULL)::mlplat.deployment_writeback
      FROM mlplat.deployments d WHERE d.id % 2 = 0 ORDER BY d.id))" >/dev/null
measure half
[ -n "${EXPLAIN:-}" ] && exit 0
printf '\n%-8s %-9s %6s %9s\n' state pass rows ms
printf '%s\n' "${rows[@]}"
echo "(N=$N, LIMIT=$LIMIT; ms: one claim, timed inside the statement, median of $REPS; load $(cut -d' ' -f1-3 /proc/loadavg))"
