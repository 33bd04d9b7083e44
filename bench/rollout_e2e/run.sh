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
# HOLD AT_CEILING).  "e2e" runs from the start_rollout call (made from a warm session) to
# the recorded AT_CEILING decision; "seen" until this script's polling noticed it.  Prints
# per-repetition figures, the median, and where the overhead goes: a table of phases,
# from the transition ledger (decision, observation and window times), the stand-in's
# request log (when each apply and GET of the InferenceService arrived) and an
# independent watch of the InferenceService.  Per traffic change (the first = the target
# revision at 0%, then one per step):
#   apply     from start_rollout / the decision that moved the split to its apply
#             arriving at KServe (wake, claim, artifact check, GET; for a step: the
#             plan_rollout and ledger commit, then the apply round)
#   kserve    the apply to the split being ready (Ready=True for its generation), as an
#             independent watch of the InferenceService sees it: the stand-in's
#             --ready-delay-ms plus its own handling of the apply
#   see       the split ready to the arrival of the GET that sees it (how soon the
#             controller looks again)
#   read      that GET's arrival to the observation time the evidence records
#   window    the observation window the policy demands (4 x window, not overhead)
#   decide    the window's end (for the 0% step: the observation) to the recorded
#             decision (timer, claim, GET, Prometheus queries, plan_rollout, ledger)
# The phases add up to "e2e".  No pass/fail.
set -u
REPS=3 WINDOW=5 READY_MS=300
while [ $# -gt 0 ]; do
	case $1 in
		--reps) REPS=$2; shift 2 ;;
		--window) WINDOW=$2; shift 2 ;;
		--ready-ms) READY_MS=$2; shift 2 ;;
		-h|--help) sed -n '2,27p' "$0"; exit 0 ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
. "$SRC/test/lib/prometheus.sh"
stack_init rollout
PD=$WORK/prometheus
stack_start "${MLPLAT_CONF[@]}"
q() { $PSQL -d mlplat -c "$1"; }
stack_db mlplat pg_cron mlplat
STANDIN_READY_MS=$READY_MS stack_standin
standin_connect mlplat
on_exit 'prometheus_stop "$PD"'
prometheus_start "$PD" "127.0.0.1:$STANDIN_PORT" || exit 1
prometheus_connect mlplat
wait_q() {  # SQL EXPECTED SECONDS
	local end=$((SECONDS + $3))
	while [ "$(q "$1" 2>/dev/null)" != "$2" ]; do
		((SECONDS < end)) || { echo "timed out waiting for $2: $1" >&2; return 1; }
		sleep 0.05
	done
}

q "SELECT mlplat.create_project('bench', 8, NULL, NULL); SELECT mlplat.add_artifact_location('bench', 's3://models/')" >/dev/null
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

# watch_isvc RV — an independent watch of svc from version RV: a first line once it is
# connected, then one JSON line per event with the time it arrived here and whether it
# is Ready for its own generation (start it in the background and wait for the first
# line: events replayed to a late watch would carry late times; one process, ended by
# its pid)
watch_isvc() {
	exec python3 -u -c '
import json, sys, time, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
resp = urllib.request.urlopen(req)
print(json.dumps({"t": time.time(), "ready": False}), flush=True)
for line in resp:
    o = json.loads(line).get("object", {})
    st = o.get("status", {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions", []))
    print(json.dumps({"t": time.time(), "ready": ready and st.get("observedGeneration") == o.get("metadata", {}).get("generation")}), flush=True)
' "$STANDIN_URL/apis/serving.kserve.io/v1beta1/namespaces/mlp-bench/inferenceservices?watch=1&fieldSelector=metadata.name%3Dsvc&timeoutSeconds=300&resourceVersion=$1" "$STANDIN_TOKEN"
}

# phases REP_ID T0 SEQ0 EVENTS — one line "apply kserve see read decide" for the first traffic
# change, the same averaged over the later ones, the number of decisions (see the header)
# and how many times the controller read the InferenceService (GET) during the rollout
phases() {
	local log ev
	log=$(admin GET "requests?since=$3&kind=InferenceService&name=svc" |
		jq -c '[.items[] | {t: .time, m: .method, s: .status}]') || return 1
	ev=$(jq -sc . "$4") || return 1
	$PSQL -d mlplat -v log="$log" -v ev="$ev" -v id="$1" -v t0="$2" -v w="$WINDOW" <<'SQL' | tr '|' ' '
WITH req AS (
  SELECT (e->>'t')::timestamptz AS t, e->>'m' AS m, (e->>'s')::int AS s
    FROM jsonb_array_elements(:'log'::jsonb) e),
ev AS (
  SELECT to_timestamp((e->>'t')::float8) AS t FROM jsonb_array_elements(:'ev'::jsonb) e
   WHERE (e->>'ready')::boolean),
d AS (
  SELECT seq, at, lag(at) OVER (ORDER BY seq) AS prev_at,
         to_timestamp((evidence->>'observed_at')::float8) AS obs,
         to_timestamp((evidence->>'window_start')::float8) AS ws
    FROM mlplat.rollout_transitions WHERE rollout_id = :id AND decision IN ('ADVANCE', 'HOLD')),
k AS (     -- decision k ends traffic change k-1: started, seen ready, decided
  SELECT seq, coalesce(prev_at, to_timestamp(:t0)) AS start_at,
         CASE WHEN seq = 1 THEN obs ELSE ws END AS seen_at, at,
         CASE WHEN seq = 1 THEN 0 ELSE :w END AS win
    FROM d),
x AS (
  SELECT k.*, a.t AS apply_at, r.t AS ready_at, g.t AS get_at
    FROM k,
         LATERAL (SELECT min(t) AS t FROM req WHERE m = 'PATCH' AND s < 300 AND t > k.start_at) a,
         LATERAL (SELECT min(t) AS t FROM ev WHERE t > a.t) r,
         LATERAL (SELECT max(t) AS t FROM req WHERE m = 'GET' AND t <= k.seen_at) g),
ms AS (
  SELECT seq,
         extract(epoch FROM apply_at - start_at) * 1000 AS apply,
         extract(epoch FROM ready_at - apply_at) * 1000 AS kserve,
         extract(epoch FROM get_at - ready_at) * 1000 AS see,
         extract(epoch FROM seen_at - get_at) * 1000 AS read,
         extract(epoch FROM at - seen_at) * 1000 - win * 1000 AS decide
    FROM x)
SELECT round(max(apply) FILTER (WHERE seq = 1)), round(max(kserve) FILTER (WHERE seq = 1)),
       round(max(see) FILTER (WHERE seq = 1)), round(max(read) FILTER (WHERE seq = 1)),
       round(max(decide) FILTER (WHERE seq = 1)),
       round(avg(apply) FILTER (WHERE seq > 1)), round(avg(kserve) FILTER (WHERE seq > 1)),
       round(avg(see) FILTER (WHERE seq > 1)), round(avg(read) FILTER (WHERE seq > 1)),
       round(avg(decide) FILTER (WHERE seq > 1)),
       count(*),
       (SELECT count(*) FROM req WHERE m = 'GET' AND t BETWEEN to_timestamp(:t0) AND (SELECT max(at) FROM d))
  FROM ms
SQL
}

echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW}s; stand-in ready delay ${READY_MS} ms"
echo "# ms for the first traffic change (target at 0%) | mean per later step"
printf '%-4s %8s %8s %8s %8s %7s | %6s %6s %6s %6s %6s | %6s %6s %6s %6s %6s | %5s\n' rep e2e_s seen_s windows over_s over_% \
	apply kserve see read decide apply kserve see read decide gets
results=() rows=()
for rep in $(seq 1 "$REPS"); do
	v=$((rep + 1))
	seq0=$(admin GET 'requests?since=1000000000000' | jq .seq)
	rv=$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-bench/inferenceservices/svc | jq -r .metadata.resourceVersion)
	watch_isvc "$rv" >"$WORK/events.$rep" &
	watcher=$!
	for _ in $(seq 1 500); do [ -s "$WORK/events.$rep" ] && break; sleep 0.01; done
	# The call comes from a warm session, as from a client's pooled connection: the same
	# call once in a rolled-back transaction first (a fresh backend spends ~40 ms
	# compiling and caching on its first call, the client's cost, not the rollout's);
	# t0 is the server's clock just before the call.
	t0=$($PSQL -d mlplat <<SQL
BEGIN;
SELECT mlplat.start_rollout('bench', 'svc', 'm', '$v', '$POLICY') \g /dev/null
ROLLBACK;
SELECT extract(epoch FROM clock_timestamp());
SELECT mlplat.start_rollout('bench', 'svc', 'm', '$v', '$POLICY') \g /dev/null
SQL
) || exit 1
	wait_q "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" AT_CEILING 120 || exit 1
	t1=$(date +%s.%N)
	id=$(q "SELECT max(id) FROM mlplat.rollouts")
	t_end=$(q "SELECT extract(epoch FROM max(at)) FROM mlplat.rollout_transitions WHERE rollout_id = $id")
	kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
	read -r fa fk fs fr fd sa sk ss sr sd n gets < <(phases "$id" "$t0" "$seq0" "$WORK/events.$rep")
	[ "$n" = 5 ] || echo "# rep $rep: $n decisions, not 5: the phases are misattributed" >&2
	# end to end: from the call to the recorded AT_CEILING decision (same host clock);
	# seen: until this script's polling saw it (adds up to a psql round trip + 50 ms)
	e2e=$(echo "$t_end - $t0" | bc -l)
	seen=$(echo "$t1 - $t0" | bc -l)
	win=$((4 * WINDOW))
	printf '%-4s %8.2f %8.2f %8d %8.2f %7.1f | %6s %6s %6s %6s %6s | %6s %6s %6s %6s %6s | %5s\n' "$rep" "$e2e" "$seen" "$win" \
		"$(echo "$e2e - $win" | bc -l)" "$(echo "100 * ($e2e - $win) / $win" | bc -l)" \
		"$fa" "$fk" "$fs" "$fr" "$fd" "$sa" "$sk" "$ss" "$sr" "$sd" "$gets"
	results+=("$e2e")
	rows+=("$fa $fk $fs $fr $fd $sa $sk $ss $sr $sd")
	q "SELECT mlplat.abort_rollout('bench', 'svc')" >/dev/null
	wait_q "SELECT status FROM mlplat.rollouts ORDER BY id DESC LIMIT 1" ABORTED 60 || exit 1
	wait_q "SELECT status FROM mlplat.deployments WHERE name = 'svc'" READY 60 || exit 1
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
med=$(printf '%s\n' "${results[@]}" | median)
win=$((4 * WINDOW))
over_ms=$(echo "1000 * ($med - $win)" | bc -l)
printf '\nmedian of %d: %.2f s end to end vs %d s of windows: overhead %.2f s (%.1f%%); stand-in ready delay %d ms per traffic change\n' \
	"$REPS" "$med" "$win" "$(echo "$med - $win" | bc -l)" "$(echo "100 * ($med - $win) / $win" | bc -l)" "$READY_MS"
# where the overhead goes: median per phase over the repetitions; a rollout = first + 4 steps
col() { printf '%s\n' "${rows[@]}" | awk -v c="$1" '{print $c}' | median; }
printf '\n%-10s %12s %14s %14s %10s\n' phase first_ms per_step_ms per_rollout_ms of_overhead
for p in "apply 1 6" "kserve 2 7" "see 3 8" "read 4 9" "decide 5 10"; do
	set -- $p
	f=$(col "$2") s=$(col "$3")
	tot=$(echo "$f + 4 * $s" | bc -l)
	printf '%-10s %12.0f %14.0f %14.0f %9.0f%%\n' "$1" "$f" "$s" "$tot" "$(echo "100 * $tot / $over_ms" | bc -l)"
done
