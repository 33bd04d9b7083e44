#!/usr/bin/env bash
# bench/rollout_e2e/run.sh — end-to-end time of a 4-step healthy canary rollout with a
# 5 s observation window, against the sum of its windows (the time the policy itself
# demands), on a throwaway cluster with the real workers, the stand-in as KServe and
# a real Prometheus scraping the stand-in every second.
#
#   bench/rollout_e2e/run.sh [--reps N] [--window S] [--ready-ms MS]
#
# Per repetition: start_rollout -> AT_CEILING (steps 0.1, 0.25, 0.5, 0.75; ceiling 0.75:
# the first step needs readiness only, then one window per step, the last window ends in
# HOLD AT_CEILING).  "e2e" runs from the start_rollout call to the recorded AT_CEILING
# decision; "seen" until this script's polling noticed it.  Prints per-repetition figures,
# the median, and where the overhead goes, from the ledgers: "first" = start_rollout to
# the first decision (the target revision made ready at 0%), "settle" = from a decision
# to the start of the next window (apply, KServe's readiness — the stand-in's
# --ready-delay-ms — and seeing it), "apply" = from a decision to the recorded apply of
# its split, "decide" = from the end of a window to its recorded decision (Prometheus
# queries + plan_rollout + write-back).  No pass/fail.
set -u
REPS=3 WINDOW=5 READY_MS=300
while [ $# -gt 0 ]; do
	case $1 in
		--reps) REPS=$2; shift 2 ;;
		--window) WINDOW=$2; shift 2 ;;
		--ready-ms) READY_MS=$2; shift 2 ;;
		-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/cluster.sh"
. "$SRC/test/lib/standin.sh"
. "$SRC/test/lib/prometheus.sh"
cluster_init "$(mktemp -d /tmp/mlplat-bench-rollout.XXXXXX)"
SD=$WORK/standin PD=$WORK/prometheus
cleanup() { prometheus_stop "$PD"; standin_stop "$SD"; cluster_stop_all; rm -rf "$WORK"; }
trap cleanup EXIT
cluster_build || { cat "$WORK/build.log"; exit 1; }
PORT=$(free_port)
cluster_start "$WORK/data" "$PORT" "${MLPLAT_CONF[@]}" || { cat "$WORK/data.log"; exit 1; }
export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres
PSQL="$BIN/psql -qXAt -v ON_ERROR_STOP=1"
q() { $PSQL -d mlplat -c "$1"; }
$PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
q "CREATE EXTENSION pg_cron; CREATE EXTENSION mlplat" >/dev/null
STANDIN_READY_MS=$READY_MS standin_start "$SD" || { echo "stand-in did not start"; exit 1; }
standin_connect mlplat
prometheus_start "$PD" "127.0.0.1:$STANDIN_PORT" || exit 1
prometheus_connect mlplat
wait_q() {  # SQL EXPECTED SECONDS
	local end=$((SECONDS + $3))
	while [ "$(q "$1" 2>/dev/null)" != "$2" ]; do
		((SECONDS < end)) || { echo "timed out waiting for $2: $1" >&2; return 1; }
		sleep 0.05
	done
}

q "SELECT mlplat.create_project('bench', 8, NULL, NULL)" >/dev/null
wait_q "SELECT status FROM mlplat.projects WHERE name = 'bench'" READY 30 || exit 1
for v in $(seq 1 $((REPS + 1))); do
	q "SELECT mlplat.register_model_version('bench', 'm', '$v', 's3://models/m/$v', '$(standin_artifact "s3://models/m/$v" "m-v$v")', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q "SELECT mlplat.set_model_stage('bench', 'm', '$v', 'CANDIDATE')" >/dev/null
done
q "SELECT mlplat.deploy('bench', 'svc', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)" >/dev/null
wait_q "SELECT status FROM mlplat.deployments WHERE name = 'svc'" READY 30 || exit 1
POLICY="{\"steps\": [0.1, 0.25, 0.5, 0.75], \"ceiling\": 0.75, \"window_seconds\": $WINDOW, \"min_samples\": 20, \"max_error_rate\": 0.05, \"max_p95_ms\": 500}"
# every revision KServe may create for svc serves healthy traffic: its share of 200 requests/s
for i in $(seq 1 $((3 * REPS + 3))); do
	admin POST metrics/revision "{\"revision\":\"svc-predictor-$(printf %05d "$i")\",\"namespace\":\"mlp-bench\",\"behaviour\":\"healthy\",\"rps\":200,\"service\":\"svc\"}" >/dev/null
done
sleep 3   # a few scrapes of every series

echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW}s; stand-in ready delay ${READY_MS} ms"
printf '%-4s %10s %10s %12s %10s %10s %10s %12s %12s %12s\n' rep e2e_s seen_s windows_s over_s over_% first_ms settle_ms/st apply_ms/st decide_ms/st
results=()
for rep in $(seq 1 "$REPS"); do
	v=$((rep + 1))
	t0=$(date +%s.%N)
	q "SELECT mlplat.start_rollout('bench', 'svc', 'm', '$v', '$POLICY')" >/dev/null
	wait_q "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" AT_CEILING 120 || exit 1
	t1=$(date +%s.%N)
	id=$(q "SELECT max(id) FROM mlplat.rollouts")
	# per decision after the first: settle = window start - previous decision; decide = decision - window end
	first=$(q "SELECT round(extract(epoch FROM min(t.at) - r.created_at) * 1000) FROM mlplat.rollout_transitions t
	             JOIN mlplat.rollouts r ON r.id = t.rollout_id WHERE r.id = $id GROUP BY r.created_at")
	# apply = from a decision to the recorded apply of the split it chose (settle - apply:
	# KServe's readiness and the controller seeing it); t_end = when AT_CEILING was decided
	read -r settle apply decide t_end < <(q "
	  SELECT round(avg(extract(epoch FROM to_timestamp((evidence->>'window_start')::float8) - prev_at)) * 1000),
	         round(avg(extract(epoch FROM (SELECT min(l.at) FROM mlplat.reconcile_ledger l
	                                        WHERE l.entity = 'rollout' AND l.entity_id = $id AND l.action = 'APPLY'
	                                          AND l.outcome = 'OK' AND l.at > prev_at) - prev_at)) * 1000),
	         round(avg(extract(epoch FROM at - to_timestamp((evidence->>'window_start')::float8 + $WINDOW))) * 1000),
	         extract(epoch FROM max(at))
	    FROM (SELECT t.*, lag(t.at) OVER (ORDER BY seq) AS prev_at FROM mlplat.rollout_transitions t
	           WHERE t.rollout_id = $id AND t.decision IN ('ADVANCE', 'HOLD')) x
	   WHERE seq > 1" | tr '|' ' ')
	# end to end: from the call to the recorded AT_CEILING decision (same host clock);
	# seen: until this script's polling saw it (adds up to a psql round trip + 50 ms)
	e2e=$(echo "$t_end - $t0" | bc -l)
	seen=$(echo "$t1 - $t0" | bc -l)
	win=$((4 * WINDOW))
	printf '%-4s %10.2f %10.2f %12d %10.2f %10.1f %10s %12s %12s %12s\n' "$rep" "$e2e" "$seen" "$win" "$(echo "$e2e - $win" | bc -l)" \
		"$(echo "100 * ($e2e - $win) / $win" | bc -l)" "$first" "$settle" "$apply" "$decide"
	results+=("$e2e")
	q "SELECT mlplat.abort_rollout('bench', 'svc')" >/dev/null
	wait_q "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 60 || exit 1
	wait_q "SELECT status FROM mlplat.deployments WHERE name = 'svc'" READY 60 || exit 1
done
med=$(printf '%s\n' "${results[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
win=$((4 * WINDOW))
printf '\nmedian of %d: %.2f s end to end vs %d s of windows: overhead %.2f s (%.1f%%); stand-in ready delay %d ms per traffic change\n' \
	"$REPS" "$med" "$win" "$(echo "$med - $win" | bc -l)" "$(echo "100 * ($med - $win) / $win" | bc -l)" "$READY_MS"
