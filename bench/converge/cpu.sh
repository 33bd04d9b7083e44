#!/usr/bin/env bash
# bench/converge/cpu.sh — where the CPU goes while N new deployments converge.
#   N=1000 REPS=3 bench/converge/cpu.sh          (BUILD=dir: another tree, as the other benches)
#   PERF=1 ...: also `perf record` the deployments leader and print its top symbols
#   PGSS=1 ...: also the statements the workers ran in the window (pg_stat_statements, track all)
# Writes N intents with the workers off, turns them on and, until every deployment is READY,
# samples the CPU time (utime + stime from /proc) of each server process by its backend type
# and of the stand-in (the wait's own session, bench/converge/poll.sh, started after the
# first sample, is not counted; before poll8 each 50 ms check was a new psql and backend, not
# counted either, but its CPU was taken from the window).  Prints one table per repetition
# and the medians: CPU is what the converge ratio's wall time is made of on a 2-core machine,
# and unlike wall time it does not move with the load of other jobs.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-1000}
REPS=${REPS:-3}
. "$SRC/test/lib/stack.sh"
. "$SRC/bench/converge/poll.sh"
stack_init cpu
STANDIN_READY_MS=200 stack_standin
PGSS_CONF=()
[ -n "${PGSS:-}" ] && PGSS_CONF=("shared_preload_libraries = 'mlplat, pg_cron, pg_stat_statements'" "pg_stat_statements.track = all")
stack_start "${MLPLAT_CONF[@]}" "${PGSS_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off" \
	"mlplat.resync_interval = '2s'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat ${PGSS:+pg_stat_statements}
SHA=$(standin_artifact s3://models/m/1 'b')
HZ=$(getconf CLK_TCK)
workers() { $PSQL -d mlplat -c "ALTER SYSTEM SET mlplat.workers_enabled = $1" -c "SELECT pg_reload_conf()" >/dev/null; }
standin_pid=$(cat "$WORK/standin/standin.pid")

# "type<TAB>ticks" for every process of the cluster and the stand-in
snapshot() {
	$PSQL -d mlplat -c "SELECT pid, replace(coalesce(nullif(application_name, ''), nullif(backend_type, ''), 'other'), ' ', '_') FROM pg_stat_activity" |
		while IFS='|' read -r pid type; do
			[ -r "/proc/$pid/stat" ] || continue
			printf '%s\t%s\t%s\n' "$type" "$pid" "$(awk '{print $14 + $15}' "/proc/$pid/stat")"
		done
	[ -n "$standin_pid" ] && printf 'stand-in\t%s\t%s\n' "$standin_pid" "$(awk '{print $14 + $15}' "/proc/$standin_pid/stat")"
}

results=()
for rep in $(seq 1 "$REPS"); do
	p=u$rep
	workers on
	$PSQL -d mlplat -c "SELECT mlplat.create_project('$p', 0)" -c "SELECT mlplat.add_artifact_location('$p', 's3://models/')" \
		-c "SELECT mlplat.register_model_version('$p', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('$p', 'm', '1', 'CANDIDATE')" >/dev/null
	wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = '$p'" READY 60 || { echo "project $p not READY" >&2; exit 1; }
	workers off
	sleep 1
	$PSQL -d mlplat -c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
	[ -n "${PGSS:-}" ] && $PSQL -d mlplat -c "SELECT pg_stat_statements_reset()" >/dev/null
	# The window opens before the workers are turned on, as run.sh's clock does: the idle
	# workers are already running (the snapshot has them), and a leader elected in a few
	# hundred ms applies at once.  Until isvc9 the snapshot, the request log's mark and the
	# clock came after the leader's election: at N=1000 about half of the applies (and their
	# CPU) fell before the window, and isvc_writes said ~510 for 1,000 applies.
	snapshot >"$WORK/before"
	seq0=$(admin GET 'requests?kind=InferenceService&method=PUT' | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
	t0=$(date +%s%N)
	workers on
	if [ -n "${PERF:-}" ]; then
		# perf attaches to the leader once it is elected: the samples miss the converge's first moments
		wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" 1 10 >/dev/null
		lead=$($PSQL -d mlplat -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'mlplat deployments%' AND pid = (SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader')")
		perf record -q -F 1999 -g -p "$lead" -o "$WORK/perf-$rep.data" >/dev/null 2>&1 &
		perf_pid=$!
	fi
	converge_wait "$p" "$N" 0.05 || exit 1
	conv_ms=$((($(date +%s%N) - t0) / 1000000))
	snapshot >"$WORK/after"
	# InferenceService requests in the window: LIST pages, GETs, writes (creates and applies
	# that changed an object: 1,000 new deployments are 1,000 creates)
	reqs=$(admin GET "requests?kind=InferenceService&since=$seq0" | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
lists = [e for e in items if e["method"] == "GET" and (e["path"].split("?")[0].endswith("inferenceservices"))]
gets = [e for e in items if e["method"] == "GET" and e not in lists]
print("isvc_lists=%d isvc_gets=%d isvc_writes=%d" % (len(lists), len(gets), sum(1 for e in items if e.get("write"))))')
	[ -n "${PERF:-}" ] && { kill -INT "$perf_pid"; wait "$perf_pid"; }
	[ -n "${PGSS:-}" ] && $PSQL -d mlplat -F ' | ' -c "SELECT 'pgss $rep', round(total_exec_time)::int AS ms, calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
	   FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 15"
	# CPU ms per backend type over the converge window (processes present at both ends)
	awk -F'\t' -v hz="$HZ" -v conv="$conv_ms" -v rep="$rep" '
		NR == FNR { b[$2] = $3; next }
		($2 in b) { ms[$1] += ($3 - b[$2]) * 1000 / hz }
		END { printf "rep %s conv_ms %d %s", rep, conv, reqs; for (t in ms) if (ms[t] > 0) printf " %s=%d", t, ms[t]; printf "\n" }' reqs="$reqs" \
		"$WORK/before" "$WORK/after" | tee -a "$WORK/results"
	if [ -n "${PERF:-}" ]; then
		{ perf report -q -i "$WORK/perf-$rep.data" --no-children -g none --sort dso --stdio 2>/dev/null | grep -v "^$" | head -8; perf report -q -i "$WORK/perf-$rep.data" --no-children -g none --sort dso,symbol --percent-limit 0.7 --stdio 2>/dev/null | grep -v "^$" | head -40; } | sed "s/^/perf $rep /"
	fi
	workers off
	sleep 1
done
echo
echo "medians over $REPS repetitions (CPU ms during the converge window, N=$N; load $(cut -d' ' -f1-3 /proc/loadavg)):"
tr ' ' '\n' <"$WORK/results" | grep '=' | awk -F= '{v[$1] = v[$1] " " $2} END {for (k in v) print k, v[k]}' |
	while read -r k vals; do
		printf '%-40s %s\n' "$k" "$(echo "$vals" | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
	done | sort
printf '%-40s %s\n' conv_ms "$(awk '{print $4}' "$WORK/results" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
