#!/usr/bin/env bash
# bench/steady_pass/run.sh — what a steady pass of the deployments reconciler
# costs at N deployments, with the fleet changing at a fixed rate (issue 20,
# target 2), side by side in one run:
#   full     every pass is a full pass (mlplat.full_resync_interval shorter than
#            a pass): every live row claimed, the fleet LISTed — the behaviour
#            before per-row resync;
#   changed  passes read the rows that changed or whose own resync is due
#            (mlplat.full_resync_interval = 1h), and GET them (LIST when > 64);
#   watch    the same with mlplat.deployments_watch on: passes read claimed rows
#            from the watch-fed cache (no GET, no LIST), events make rows due, and
#            rows are resynced mlplat.watch_resync_interval apart (the window starts
#            once every row was resynced under it: the steady state).
#   SIZES="1000 10000" RATE=5 WINDOW=20 RESYNC=30s MODES="changed full watch" bench/steady_pass/run.sh
# (100000: the preload slowed to ~36 objects/s past ~45,000 until the stand-in stopped polling
# for the predictor ServiceAccount, 357dfb3; see docs/benchmarks.md.  With MODES=watch alone the
# adoption runs with the watch on: without it each chunk LISTs the whole namespace)
# Per N: N deploy()s with the workers off, the rendered manifests preloaded into
# the stand-in as mlplat would have applied them (preload.js: converging 100,000
# through the API path takes too long here), then the workers on until every
# deployment is READY (they adopt what they find).  Then, per mode, a window of
# WINDOW s during which RATE deployments a second are redeployed (a new
# revision: one apply each), measuring from the deployments leader's passes:
#   rows   deployments a pass claimed (its status line, sampled every 20 ms by
#          one psql \watch; a pass that ended between two samples is counted in
#          passes but not here: "seen" says how many were read)
#   reqs   InferenceService requests at the stand-in (LIST pages, GETs, applies)
#   cpu    CPU time of the deployments leader (its SPI runs in it: SQL included)
# each per pass and per second.  OUT=file appends tab-separated lines for plots.
# PGSS=1: also the statements run in each window (pg_stat_statements, track all; ms per
# pass, nested ones included under their callers); PERF=1: perf record the leader in each
# window and print its top symbols.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1000 10000"}
RATE=${RATE:-5}
WINDOW=${WINDOW:-20}
RESYNC=${RESYNC:-30s}
MODES=${MODES:-"changed full watch"}
. "$SRC/test/lib/stack.sh"
stack_init sp
STANDIN_READY_MS=50 stack_standin
PGSS_CONF=()
[ -n "${PGSS:-}" ] && PGSS_CONF=("shared_preload_libraries = 'mlplat, pg_cron, pg_stat_statements'" "pg_stat_statements.track = all")
stack_start "${MLPLAT_CONF[@]}" "${PGSS_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off" \
	"mlplat.resync_interval = '$RESYNC'" "mlplat.full_resync_interval = '1h'" "mlplat.pass_memory_limit = '4GB'" \
	"max_wal_size = '4GB'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat ${PGSS:+pg_stat_statements}
SHA=$(standin_artifact s3://models/m/1 'b')
TICK=$(getconf CLK_TCK)
set_conf() { $PSQL -d mlplat -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null; }
leader() { $PSQL -d mlplat -c "SELECT $1 FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# the leader's status line after every pass: "<n> deployments ..., ..."; rows = sum of n over the passes seen
sample_start() {
	printf "SELECT passes || ' ' || status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader' \\watch 0.02\n" |
		$PSQL -d mlplat >"$WORK/samples" 2>/dev/null &
	SAMPLER=$!
}
sample_rows() {   # passes seen, rows claimed by them (passes after $1, up to $2)
	kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null
	awk -v a="$1" -v b="$2" '$1 > a && $1 <= b && $3 ~ /^deployments/ && !seen[$1]++ { n++; r += $2 } END { print n + 0, r + 0 }' "$WORK/samples"
}
isvc_requests() { admin GET 'requests?kind=InferenceService' | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(len(items), sum(1 for e in items if e.get("verb") == "list"), sum(1 for e in items if e.get("verb") == "get"), sum(1 for e in items if e.get("write")))'; }
pass_end() { local p; p=$(leader passes); while [ "$(leader passes)" = "$p" ]; do sleep 0.05; done; }

# one window: RATE redeploys a second in the background, the leader's counters around it
window() {
	local p=$1 n=$2 pid p0 c0 p1 c1 t0 t1 ms seen rread reqs lists gets writes tick=0 stamp changer i args
	pid=$(leader pid)
	pass_end
	admin DELETE requests >/dev/null
	[ -n "${PGSS:-}" ] && $PSQL -d mlplat -c "SELECT pg_stat_statements_reset()" >/dev/null
	[ -n "${PERF:-}" ] && { perf record -q -F 999 -g -p "$pid" -o "$WORK/perf-$n-$3.data" >/dev/null 2>&1 & perf_pid=$!; }
	sample_start
	p0=$(leader passes); c0=$(cpu_ticks "$pid"); t0=$(date +%s%N)
	(
		while :; do
			tick=$((tick + 1)) stamp=$(date +%s%N) # a new env each time: a new revision, never a no-op
			# one transaction per deploy(), as clients make them (several rows locked in one
			# transaction in no particular order could deadlock with the worker's id order)
			args=()
			for ((i = tick * RATE; i < tick * RATE + RATE; i++)); do
				args+=(-c "SELECT mlplat.deploy('$p', 'd$((1 + (i * 7919) % n))', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, '{\"T\":\"$stamp-$i\"}')")
			done
			$PSQL -d mlplat "${args[@]}" >/dev/null
			sleep 1
		done
	) &
	changer=$!
	sleep "$WINDOW"
	kill "$changer" 2>/dev/null; wait "$changer" 2>/dev/null
	pass_end
	p1=$(leader passes); c1=$(cpu_ticks "$pid"); t1=$(date +%s%N)
	[ -n "${PERF:-}" ] && { kill -INT "$perf_pid"; wait "$perf_pid"; }
	# the statements, per pass of the leader (other backends' too: the redeploys; track all,
	# so a function's statements are also counted inside its caller's time)
	[ -n "${PGSS:-}" ] && $PSQL -d mlplat -F ' | ' -c "SELECT 'pgss $n $3', round((total_exec_time / $((p1 - p0 > 0 ? p1 - p0 : 1)))::numeric, 2) AS ms_per_pass,
	       calls, rows, toplevel, left(regexp_replace(query, '\s+', ' ', 'g'), 120)
	  FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 40" >&2
	[ -n "${PERF:-}" ] && perf report -q -i "$WORK/perf-$n-$3.data" --no-children -g none --sort dso,symbol --percent-limit 0.7 --stdio 2>/dev/null |
		grep -v "^$" | head -40 | sed "s/^/perf $n $3 /" >&2
	sleep 0.1
	read -r seen rread < <(sample_rows "$p0" "$p1")
	# the watch cache's size as the leader's last status line in the window says it
	grep -o 'watch: [0-9]* cached, [0-9]* kB' "$WORK/samples" | tail -1 | sed "s/^/# N=$n $3: /" >&2
	ms=$(((t1 - t0) / 1000000))
	read -r reqs lists gets writes < <(isvc_requests)
	echo "$((p1 - p0)) $seen $rread $reqs $lists $gets $writes $(((c1 - c0) * 1000 / TICK)) $ms"
}

rows=()
claims=()
for N in $SIZES; do
	p=s$N
	set_conf mlplat.workers_enabled off
	# MODES=watch alone: the adoption too is watched.  Without the watch every adoption chunk
	# of mlplat.pass_row_limit rows LISTs the whole namespace (222 pages a chunk at 111,000;
	# ~1.5 min a chunk of 1,000 at load 20: hours for 100,000)
	if [ "$MODES" = watch ]; then set_conf mlplat.deployments_watch on; else set_conf mlplat.deployments_watch off; fi
	$PSQL -d mlplat -c "SELECT mlplat.create_project('$p', 0)" \
		-c "SELECT mlplat.add_artifact_location('$p', 's3://models/')" \
		-c "SELECT mlplat.register_model_version('$p', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('$p', 'm', '1', 'CANDIDATE')" >/dev/null
	kube POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"mlp-$p\"}}" >/dev/null
	t0=$(date +%s%N)
	for ((s = 1; s <= N; s += 10000)); do
		$PSQL -d mlplat -c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series($s, $((s + 9999 < N ? s + 9999 : N))) i" >/dev/null
	done
	api_ms=$((($(date +%s%N) - t0) / 1000000))
	$PSQL -d mlplat -c "SELECT r.spec::text FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
	                      JOIN mlplat.deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.desired_revision
	                     WHERE p.name = '$p' ORDER BY d.id" >"$WORK/manifests.jsonl"
	pre_ms=$(node "$SRC/bench/steady_pass/preload.js" "$STANDIN_URL" "$STANDIN_TOKEN" 16 "$WORK/manifests.jsonl") || exit 1
	t0=$(date +%s%N)
	set_conf mlplat.workers_enabled on
	while [ "$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = '$p' AND d.status = 'READY'")" -lt "$N" ]; do
		sleep 0.5
	done
	adopt_ms=$((($(date +%s%N) - t0) / 1000000))
	adopted_at=$($PSQL -d mlplat -c "SELECT clock_timestamp()")
	total=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments WHERE status <> 'DELETED'")
	db_kb=$(($($PSQL -d mlplat -c "SELECT pg_database_size('mlplat')") / 1024))
	for mode in $MODES; do
		if [ $mode = full ]; then set_conf mlplat.full_resync_interval 100ms; else set_conf mlplat.full_resync_interval 1h; fi
		if [ $mode = watch ]; then
			set_conf mlplat.deployments_watch on
			# steady state: every row resynced once under the watch (hours ahead), within 1.5 x RESYNC
			for _ in $(seq 1 600); do
				[ "$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments WHERE status <> 'DELETED' AND next_resync_at < now() + interval '1 hour'")" = 0 ] && break
				sleep 0.5
			done
			# ... and no sweep under way: a refilled cache sweeps every row, a chunk every other
			# pass, passes back to back, while the rows may all be hours ahead already (adopted
			# under the watch): wait until the leader is idle (at most 3 passes in 5 s)
			for _ in $(seq 1 120); do
				a=$(leader passes)
				sleep 5
				[ $(($(leader passes) - a)) -le 3 ] && break
			done
		else
			set_conf mlplat.deployments_watch off
			# rows an earlier watch window left hours ahead: spread over RESYNC again, as without the watch
			$PSQL -d mlplat -c "UPDATE mlplat.deployments SET next_resync_at = mlplat._next_resync_at() WHERE next_resync_at > now() + interval '1 hour'" >/dev/null
		fi
		# ... and vacuumed since the adoption: writing every row READY leaves as many dead row
		# versions, and until autovacuum removes them the claim walks them (at 101,000: 48 ms
		# a claim, 2.5-3x the CPU a pass of the 1,000 fleet; 2 ms after).  A fleet steady for
		# a minute has been vacuumed, or has fewer dead rows than autovacuum's threshold.
		for _ in $(seq 1 600); do
			[ "$($PSQL -d mlplat -c "SELECT coalesce(last_autovacuum > '$adopted_at', false) OR n_dead_tup < 50 + 0.2 * n_live_tup FROM pg_stat_user_tables WHERE relid = 'mlplat.deployments'::regclass")" = t ] && break
			sleep 0.5
		done
		pass_end; pass_end
		read -r passes seen rread reqs lists gets writes cpu_ms ms < <(window "$p" "$N" "$mode")
		[ -n "${OUT:-}" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$N" "$mode" "$passes" "$seen" "$rread" "$reqs" "$lists" "$gets" "$cpu_ms" "$ms" >>"$OUT"
		rows+=("$(printf '%7s %8s %7s %6s %10s %9s %8s %9s %9s %8s %11s' "$total" "$mode" "$passes/$seen" "$ms" \
			"$(awk -v a="$rread" -v p="$seen" 'BEGIN{printf "%.0f", p ? a/p : 0}')" \
			"$(awk -v a="$reqs" -v p="$passes" 'BEGIN{printf "%.1f", p ? a/p : 0}')" \
			"$(awk -v a="$cpu_ms" -v p="$passes" 'BEGIN{printf "%.1f", p ? a/p : 0}')" \
			"$(awk -v a="$rread" -v p="$seen" -v q="$passes" -v t="$ms" 'BEGIN{printf "%.0f", p ? a/p*q*1000/t : 0}')" \
			"$(awk -v a="$reqs" -v t="$ms" 'BEGIN{printf "%.1f", a*1000/t}')" \
			"$(awk -v a="$cpu_ms" -v t="$ms" 'BEGIN{printf "%.0f", a*1000/t}')" "$lists/$gets/$writes")")
	done
	# the claim alone, with the workers off (median of 5, ms): every live row, against what changed or is due
	set_conf mlplat.workers_enabled off
	claim_ms() {
		for _ in 1 2 3 4 5; do
			$PSQL -d mlplat -c "SELECT round(extract(epoch FROM clock_timestamp() - now()) * 1000, 1) FROM (SELECT count(*) FROM mlplat._deployments_claim($1)) x"
		done | sort -n | sed -n 3p
	}
	claims+=("$(printf '%7s %12s %12s %10s' "$total" "$(claim_ms true)" "$(claim_ms false)" "$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat._deployments_claim(false)")")")
	echo "# N=$N: deploy() $api_ms ms, preload $pre_ms ms, adopted READY in $adopt_ms ms, database $db_kb kB ($((db_kb * 1024 / total)) B per deployment)" >&2
done
printf '\n%7s %8s %7s %6s %10s %9s %8s %9s %9s %8s %11s\n' N mode passes/seen ms rows/pass reqs/pass cpu/pass rows/s reqs/s cpu_ms/s LIST/GET/wr
printf '%s\n' "${rows[@]}"
printf '\n%7s %12s %12s %10s\n' N claim_full_ms claim_due_ms rows_due
printf '%s\n' "${claims[@]}"
echo "(claim_*_ms: _deployments_claim(true) / (false) alone, workers off, median of 5; rows_due: what the latter returned)"
echo "(RATE $RATE redeploys/s for WINDOW $WINDOW s; mlplat.resync_interval $RESYNC; N: live deployments of the installation, the earlier sizes' included; cpu: ms of the deployments leader; load $(cut -d' ' -f1-3 /proc/loadavg))"
