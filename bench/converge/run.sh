#!/usr/bin/env bash
# bench/converge/run.sh — converge N deployments against the stand-in (issue 6).
#   SIZES="1000 10000" bench/converge/run.sh
# For each N: intents are written with the workers paused, then the workers
# are enabled and we time until every deployment is READY (checked every 100 ms
# in one session, bench/converge/poll.sh: until poll8 each check was a new psql
# and backend counting the READY rows, ~11 ms of CPU at 10,000 taken from the
# converge it timed; ratios measured before poll8 are not comparable).  Reported beside
# the same work done by a bare concurrent client (bare_apply.js: the same N
# manifests mlplat applies, at mlplat.http_max_concurrency, then wait for
# Ready) against the same stand-in, run once just before and once just after
# mlplat (the baseline is their mean: the machine's load drifts):
#   converge time, ratio to the bare client (target <= 1.5), applies per
#   deployment (target 1.0 + retries), LIST requests per steady pass (target
#   ceil(deployments/500), the earlier sizes' included), writes in a steady
#   pass (target 0), the duration of a steady pass beside a bare client's
#   (LIST everything and compare), the deployments leader's private memory
#   (RssAnon, its peak sampled while converging, and VmHWM: shared buffers
#   it touched included) and the database's growth per deployment
#   (pg_database_size after the steady window minus before deploy(), / N).
#   OUT=file appends one tab-separated line per N (N conv_ms bare_ms pass_ms
#   bare_pass_ms deployments rss_peak_kB hwm_kB db_bytes_per_deployment applies) for plots.
#   WATCH=on converges with mlplat.deployments_watch on (default off here, as in the
#   tables of docs/benchmarks.md; the server's default is on); WATCH_DELAY_MS=N has
#   the stand-in write every watch line N ms late (a loaded API server's lagging watch).
#   The stand-in holds 3 N InferenceServices per size (mlplat's and two bare
#   namespaces'): STANDIN_HEAP_MB raises node's heap limit (default 8192).
#   DEBUG=1 also prints the leader's status lines, the passes' spans and ledger rows,
#   one line per chunk of mlplat.pass_row_limit rows (its artifact checks, its applies'
#   first start and last end, its READY decisions: ms since the workers were enabled),
#   and keeps the stand-in's request log (DEBUG_OUT=dir).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1000 10000"}
WATCH=${WATCH:-off}
export NODE_OPTIONS="${NODE_OPTIONS:-} --max-old-space-size=${STANDIN_HEAP_MB:-8192}"
. "$SRC/test/lib/stack.sh"
. "$SRC/bench/converge/poll.sh"
stack_init cv
STANDIN_READY_MS=200 stack_standin
[ -n "${WATCH_DELAY_MS:-}" ] && admin PUT config "{\"watchDelayMs\": $WATCH_DELAY_MS}" >/dev/null
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.workers_enabled = off" \
	"mlplat.resync_interval = '2s'" "mlplat.deployments_watch = '$WATCH'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat
CONC=$($PSQL -d mlplat -c "SHOW mlplat.http_max_concurrency")
SHA=$(standin_artifact s3://models/m/1 'b')
workers() { $PSQL -d mlplat -c "ALTER SYSTEM SET mlplat.workers_enabled = $1" -c "SELECT pg_reload_conf()" >/dev/null; }
lists() { admin GET 'requests?method=GET&kind=InferenceService' | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if "inferenceservices?" in e["path"] or e["path"].endswith("inferenceservices")))'; }
patches() { admin GET 'requests?method=PATCH&kind=InferenceService' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'; }
passes() { $PSQL -d mlplat -c "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
pass_end() { local p; p=$(passes); while [ "$(passes)" = "$p" ]; do sleep 0.02; done; }
leader_pid() { $PSQL -d mlplat -c "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
# kB of a /proc/PID/status field (RssAnon, VmHWM), 0 when the process is gone
proc_kb() { awk -v f="$2:" '$1 == f {print $2; found = 1} END {if (!found) print 0}' "/proc/$1/status" 2>/dev/null || echo 0; }
db_bytes() { $PSQL -d mlplat -c "SELECT pg_database_size('mlplat')"; }
# during the converge (converge_wait's hook, in its session): the leader's RssAnon, its peak
rss_sample() {
	local k v _
	if [ -z "$lpid" ]; then
		poll_q "SELECT coalesce((SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader')::text, '')" || return
		lpid=$REPLY
	fi
	[ -n "$lpid" ] && while read -r k v _; do
		[ "$k" = RssAnon: ] && [ "$v" -gt "$rss_peak" ] && rss_peak=$v
	done 2>/dev/null <"/proc/$lpid/status"
}

# The project's namespace as mlplat makes it, before any clock starts, and the bare
# namespaces given the same ServiceAccounts: the stand-in's KServe makes no predictor pods
# while the InferenceService's serviceAccountName is missing (Ready stays Unknown), and
# fails the model's load when that account lists no credentials.  Without them the bare
# client waited for Ready forever.  Copied without mlplat's labels, so that mlplat does not
# take them for its own; the workers are off again before the deployments are written.
project_ready() {
	workers on
	wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = '$1'" READY 60 ||
		{ echo "project $1 not READY in 60 s" >&2; exit 1; }
	workers off
	local ab sa
	for ab in a b; do
		kube GET "/api/v1/namespaces/mlp-$1/serviceaccounts" | python3 -c '
import json, sys
for o in json.load(sys.stdin)["items"]:
    m = o["metadata"]
    o["metadata"] = {"name": m["name"], "namespace": sys.argv[1], "annotations": m.get("annotations", {})}
    print(json.dumps(o))' "bare-$1-$ab" | while read -r sa; do
			kube POST "/api/v1/namespaces/bare-$1-$ab/serviceaccounts" "$sa" >/dev/null
		done
	done
}

rows=()
for N in $SIZES; do
	p=c$N
	workers off
	kube POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"mlp-$p\"}}" >/dev/null
	for ab in a b; do
		kube POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"bare-$p-$ab\"}}" >/dev/null
	done
	$PSQL -d mlplat -c "SELECT mlplat.create_project('$p', 0)" \
		-c "SELECT mlplat.add_artifact_location('$p', 's3://models/')" \
		-c "SELECT mlplat.register_model_version('$p', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('$p', 'm', '1', 'CANDIDATE')" >/dev/null
	project_ready "$p"
	db0=$(db_bytes)
	t0=$(date +%s%N)
	for ((s = 1; s <= N; s += 10000)); do # 10,000 a transaction: one of 100,000 holds too much
		$PSQL -d mlplat -c "SELECT count(mlplat.deploy('$p', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series($s, $((s + 9999 < N ? s + 9999 : N))) i" >/dev/null
	done
	api_ms=$((($(date +%s%N) - t0) / 1000000))
	# the manifests the workers will apply, for the bare client to apply too
	$PSQL -d mlplat -c "SELECT r.spec::text FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
	                      JOIN mlplat.deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.desired_revision
	                     WHERE p.name = '$p' ORDER BY d.id" >"$WORK/manifests-$N.jsonl"
	bare_a=$(node "$SRC/bench/converge/bare_apply.js" "$STANDIN_URL" "$STANDIN_TOKEN" "bare-$p-a" "$N" "$CONC" "$WORK/manifests-$N.jsonl")
	admin DELETE requests >/dev/null

	t0=$(date +%s%N)
	workers on
	if [ -n "${DEBUG:-}" ]; then
		for _ in $(seq 1 25); do
			$PSQL -d mlplat -c "SELECT round(extract(epoch FROM clock_timestamp()) * 1000 - $t0 / 1000000) || ' ms: ' || status || ' last pass start +' || round(extract(epoch FROM last_pass_start) * 1000 - $t0 / 1000000) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role <> 'standby'"
			sleep 0.1
		done | awk '{k=$0; sub(/^[0-9]+ ms: /, "", k)} k != p {print; p = k}'
	fi
	rss_peak=0 lpid=
	converge_wait "$p" "$N" 0.1 rss_sample || exit 1
	conv_ms=$((($(date +%s%N) - t0) / 1000000))
	# the phases of the passes, from the deployments' own spans and ledger rows (ms since workers on)
	[ -n "${DEBUG:-}" ] && $PSQL -d mlplat -c "SELECT s.name || ' ' || round(extract(epoch FROM min(s.start_time)) * 1000 - $t0 / 1000000) || '..' || round(extract(epoch FROM max(s.end_time)) * 1000 - $t0 / 1000000) || ' (' || count(*) || ')' FROM mlplat.spans s JOIN mlplat.deployments d ON d.id = s.entity_id AND s.entity = 'deployment' JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = '$p' AND s.name LIKE 'deployments.%' GROUP BY s.name ORDER BY min(s.start_time)" \
		-c "SELECT 'ledger ' || action || ' written ' || round((extract(epoch FROM min(at)) * 1000 - $t0 / 1000000)) || '..' || round((extract(epoch FROM max(at)) * 1000 - $t0 / 1000000)) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = '$p' GROUP BY action" -c "SELECT round((extract(epoch FROM max(updated_at)) * 1000 - $t0 / 1000000)) || ' last READY write' FROM mlplat.deployments" -c "SELECT passes, last_pass_end - last_pass_start FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"
	# DEBUG: per chunk of mlplat.pass_row_limit rows in id order (the sweep's chunks): its artifact
	# checks, its applies' first start and last end, its READY decisions (readiness_wait ends),
	# in ms since workers on
	[ -n "${DEBUG:-}" ] && $PSQL -d mlplat -c "WITH r AS (SELECT d.id, (rank() OVER (ORDER BY d.id) - 1) / current_setting('mlplat.pass_row_limit')::int AS chunk FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = '$p'),
	     t AS (SELECT r.chunk, s.name, extract(epoch FROM s.start_time) * 1000 - $t0 / 1000000 AS st, extract(epoch FROM s.end_time) * 1000 - $t0 / 1000000 AS en FROM r JOIN mlplat.spans s ON s.entity = 'deployment' AND s.entity_id = r.id)
	   SELECT 'chunk ' || chunk || ': check ' || round(min(st) FILTER (WHERE name = 'deployments.artifact_check')) || ', apply ' || round(min(st) FILTER (WHERE name = 'deployments.apply')) || '..' || round(max(en) FILTER (WHERE name = 'deployments.apply')) || ', READY ' || round(min(en) FILTER (WHERE name = 'deployments.readiness_wait')) || '..' || round(max(en) FILTER (WHERE name = 'deployments.readiness_wait')) || ' (median ' || round((percentile_cont(0.5) WITHIN GROUP (ORDER BY en) FILTER (WHERE name = 'deployments.readiness_wait'))::numeric) || ')' FROM t GROUP BY chunk ORDER BY chunk"
	# DEBUG: each deployment's READY decision after its apply's end (the stand-in makes it Ready
	# 200 ms after): the wait a user sees between a serving deployment and its READY
	[ -n "${DEBUG:-}" ] && $PSQL -d mlplat -c "WITH l AS (SELECT extract(epoch FROM max(s.end_time) FILTER (WHERE s.name = 'deployments.readiness_wait') - max(s.end_time) FILTER (WHERE s.name = 'deployments.apply')) * 1000 AS ms FROM mlplat.spans s JOIN mlplat.deployments d ON d.id = s.entity_id AND s.entity = 'deployment' JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = '$p' GROUP BY d.id)
	   SELECT 'READY after apply: p50 ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric) || ', p90 ' || round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric) || ', max ' || round(max(ms)::numeric) || ' ms (' || count(ms) || ')' FROM l"
	applies=$(patches)
	# DEBUG: the stand-in's request log of the converge (method, path, status, ms, time), for the breakdown
	[ -n "${DEBUG:-}" ] && admin GET requests >"${DEBUG_OUT:-$WORK}/requests-$N.json"

	# steady state: a few full resync passes with nothing to do, counted from the
	# end of one pass to the end of another (a pass cut by the window's edge
	# would count its LISTs without the pass, or the pass without its LISTs)
	sleep 2
	pass_end
	admin DELETE requests >/dev/null
	p0=$(passes); sleep 6; pass_end; p1=$(passes)
	steady_lists=$(lists); steady_writes=$(writes_count)
	steady_passes=$((p1 - p0))
	# per-pass cost: the duration of 5 steady passes (median), as the worker records it
	: >"$WORK/pass_ms"
	# (a sample taken after the next pass began has its start after its end: taken again)
	for _ in 1 2 3 4 5; do
		ms=
		while [ -z "$ms" ]; do
			pass_end
			ms=$($PSQL -d mlplat -c "SELECT round(extract(epoch FROM last_pass_end - last_pass_start) * 1000, 1) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader' AND last_pass_end >= last_pass_start")
		done
		echo "$ms" >>"$WORK/pass_ms"
	done
	pass_ms=$(sort -n "$WORK/pass_ms" | sed -n 3p)
	# a pass lists every deployment of the installation, the earlier sizes' too
	total=$($PSQL -d mlplat -c "SELECT count(*) FROM mlplat.deployments WHERE status <> 'DELETED'")
	lpid=$(leader_pid)
	r=$(proc_kb "$lpid" RssAnon); [ "$r" -gt "$rss_peak" ] && rss_peak=$r
	hwm=$(proc_kb "$lpid" VmHWM)
	db_per=$((($(db_bytes) - db0) / N))
	workers off

	bare_b=$(BARE_PASS_FILE=$WORK/bare_pass node "$SRC/bench/converge/bare_apply.js" "$STANDIN_URL" "$STANDIN_TOKEN" "bare-$p-b" "$N" "$CONC" "$WORK/manifests-$N.jsonl")
	bare_ms=$(((bare_a + bare_b) / 2))
	bare_pass_ms=$(cat "$WORK/bare_pass")
	# machine-readable, for bench/curves (plots)
	[ -n "${OUT:-}" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$N" "$conv_ms" "$bare_ms" "$pass_ms" "$bare_pass_ms" "$total" "$rss_peak" "$hwm" "$db_per" "$applies" >>"$OUT"
	rows+=("$(printf '%6s %9s %10s %20s %6s %9s %12s %8s %8s %8s %8s %9s %9s %8s' "$N" "$api_ms" "$conv_ms" "$bare_ms ($bare_a/$bare_b)" \
		"$(awk -v a="$conv_ms" -v b="$bare_ms" 'BEGIN{printf "%.2f", a/b}')" \
		"$(awk -v a="$applies" -v n="$N" 'BEGIN{printf "%.3f", a/n}')" \
		"$(awk -v l="$steady_lists" -v p="$steady_passes" 'BEGIN{if(p>0) printf "%.1f", l/p; else print "-"}')/$(( (total + 499) / 500 ))" \
		"$steady_writes" "$steady_passes" "$pass_ms" "$bare_pass_ms" "$((rss_peak / 1024))" "$((hwm / 1024))" "$db_per")")
done
printf '\n%6s %9s %10s %20s %6s %9s %12s %8s %8s %8s %8s %9s %9s %8s\n' N api_ms conv_ms bare_ms ratio applies/N "LIST/pass" writes passes pass_ms bpass_ms rss_MB hwm_MB db_B/dep
printf '%s\n' "${rows[@]}"
echo "(bare_ms: mean of the bare client just before/just after mlplat, same manifests; LIST/pass: measured / target ceil(deployments/500), all sizes' deployments; writes: in the steady window; pass_ms: median duration of 5 steady passes; bpass_ms: a bare client's steady pass, LIST all + compare, median of 5; rss_MB: the deployments leader's peak RssAnon; hwm_MB: its VmHWM; db_B/dep: database growth per deployment; watch $WATCH; http_max_concurrency $CONC; load $(cut -d' ' -f1-3 /proc/loadavg))"
