#!/usr/bin/env bash
# bench/runtime/run.sh — reconciler runtime figures (issue 5), one table:
#   takeover (a): pg_terminate_backend of the deployments leader -> first pass of the new leader
#   takeover (b): kill -9 of a worker -> first pass after the crash restart
#   takeover (c): promotion of a streaming replica -> its first pass
# A takeover ends at the new leader's "first pass as leader" log line (the
# server's own millisecond clock, the same one t0 is read from), so how often
# this script looks does not change the figure.
#   wake latency: deploy() commit -> the apply request arriving at the stand-in
# with, in the same run, the baselines that give them meaning: the retry
# interval for (a), the stand-in's own apply latency for a bare client, and
# the wait a resync-only reconciler would give (half the resync interval).
#   TRIALS=20 INTENTS=500 [RAW=dir] bench/runtime/run.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TRIALS=${TRIALS:-20}
INTENTS=${INTENTS:-500}
. "$SRC/test/lib/stack.sh"
stack_init rt
stack_standin
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "log_timezone = 'UTC'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat
kube POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mlp-bench"}}' >/dev/null
SHA=$(standin_artifact s3://models/m/1 'b')
$PSQL -d mlplat -c "SELECT mlplat.create_project('bench', 0)" \
	-c "SELECT mlplat.add_artifact_location('bench', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('bench', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('bench', 'm', '1', 'CANDIDATE')" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE role = 'leader' AND kind = 'deployments' AND last_pass_start IS NOT NULL" 1 30 >/dev/null

stats() {   # stdin: one number per line -> "median max"
	sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "- -"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.0f %.0f\n", m, a[NR]}'
}
pct() {     # pct P: stdin numbers -> P-th percentile (nearest rank)
	sort -n | awk -v p="$1" '{a[NR]=$1} END {if (NR==0) {print "-"; exit} i=int((p/100)*NR+0.999); if(i<1)i=1; printf "%.0f\n", a[i]}'
}

# first_pass LOG T0: ms from T0 (epoch seconds) to the first deployments leader's
# "first pass as leader" line logged after it; waits up to 20 s for one.
first_pass() {
	python3 - "$1" "$2" <<'PY'
import datetime, re, sys, time
log, t0 = sys.argv[1], float(sys.argv[2])
pat = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC .*mlplat deployments reconciler \d+: first pass as leader')
deadline = time.time() + 20
while time.time() < deadline:
    for line in open(log, errors='replace'):
        m = pat.match(line)
        if m:
            t = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
            if t >= t0:
                print(round((t - t0) * 1000))
                sys.exit(0)
    time.sleep(0.05)
PY
}

LEADER="SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"
# Each trial starts with a standby in place: a terminated worker is restarted by
# the postmaster only after its 1 s restart delay, and a trial that found no
# standby would time that delay, not a takeover.
STANDBY="SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'standby'"
# ---- (a) termination
: >"$WORK/a.txt"
for _ in $(seq 1 "$TRIALS"); do
	wait_for mlplat "$STANDBY" 1 30 >/dev/null
	old=$($PSQL -d mlplat -c "$LEADER")
	t0=$($PSQL -d mlplat -c "SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT pg_terminate_backend($old)) x")
	first_pass "$WORK/data.log" "$t0" >>"$WORK/a.txt"
	sleep 0.3
done
read -r a_med a_max < <(stats <"$WORK/a.txt")

# ---- (b) kill -9: every backend restarts
: >"$WORK/b.txt"
for _ in $(seq 1 "$TRIALS"); do
	wait_for mlplat "$STANDBY" 1 30 >/dev/null
	victim=$($PSQL -d mlplat -c "$LEADER")
	t0=$(date +%s.%N)
	kill -9 "$victim"
	first_pass "$WORK/data.log" "$t0" >>"$WORK/b.txt"
	wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'" 1 30 >/dev/null
	sleep 0.5
done
read -r b_med b_max < <(stats <"$WORK/b.txt")

# ---- (c) promotion of a streaming replica -> its deployments leader's first pass
: >"$WORK/c.txt"
for i in $(seq 1 "$TRIALS"); do
	R=$WORK/replica$i; RP=$(free_port)
	as_pg "$BIN/pg_basebackup" -h "$WORK" -p "$PORT" -U postgres -D "$R" -R -X stream -c fast >/dev/null 2>&1 || continue
	echo "port = $RP" >>"$R/postgresql.conf"
	CLUSTER_DIRS+=("$R")
	as_pg "$BIN/pg_ctl" -D "$R" -l "$R.log" -w start >/dev/null || continue
	t0=$(date +%s.%N)
	as_pg "$BIN/pg_ctl" -D "$R" promote -w >/dev/null
	first_pass "$R.log" "$t0" >>"$WORK/c.txt"
	as_pg "$BIN/pg_ctl" -D "$R" -m immediate stop >/dev/null
	rm -rf "$R"
done
read -r c_med c_max < <(stats <"$WORK/c.txt")

# ---- wake latency: commit -> first apply request at the stand-in
# The promoted replicas of (c) took the Leases (a higher timeline) and are gone: the
# primary is fenced until they expire (mlplat.lease_duration, on its own clock).
wait_for mlplat "SELECT status NOT LIKE 'fenced%' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role IN ('leader', 'idle')" t 60 >/dev/null
admin DELETE requests >/dev/null
{
	echo "CREATE TEMP TABLE commits (i int, t float8);"
	for i in $(seq 1 "$INTENTS"); do
		echo "SELECT mlplat.deploy('bench', 'w$i', 'm', '1', 'kserve-sklearnserver');"
		echo "INSERT INTO commits VALUES ($i, extract(epoch FROM clock_timestamp()));"
		echo "SELECT pg_sleep(0.02);"
	done
	echo "\\copy commits TO '$WORK/commits.csv' CSV"
} >"$WORK/wake.sql"
$PSQL -d mlplat -f "$WORK/wake.sql" >/dev/null
sleep 3
admin GET 'requests?method=PATCH&kind=InferenceService' >"$WORK/requests.json"
python3 - "$WORK/commits.csv" "$WORK/requests.json" >"$WORK/wake.txt" <<'PY'
import csv, json, sys, datetime
commits = {f"w{r[0]}": float(r[1]) for r in csv.reader(open(sys.argv[1]))}
first = {}
for e in json.load(open(sys.argv[2]))["items"]:
    n = e.get("name")
    if n in commits and n not in first:
        first[n] = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
for n, t in commits.items():
    if n in first:
        print(round((first[n] - t) * 1000, 1))
PY
w_n=$(wc -l <"$WORK/wake.txt")
w_p50=$(pct 50 <"$WORK/wake.txt"); w_p99=$(pct 99 <"$WORK/wake.txt")

# ---- baseline: a bare client's server-side apply against the same stand-in
: >"$WORK/bare.txt"
body='{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"bare","namespace":"mlp-bench"},"spec":{"predictor":{"model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://b/m/1"}}}}'
for i in $(seq 1 50); do
	curl -s -o /dev/null -w '%{time_total}\n' -X PATCH -H "Authorization: Bearer $STANDIN_TOKEN" \
		-H 'Content-Type: application/apply-patch+yaml' -d "$body" \
		"$STANDIN_URL/apis/serving.kserve.io/v1beta1/namespaces/mlp-bench/inferenceservices/bare?fieldManager=bench&force=true" |
		awk '{printf "%.1f\n", $1 * 1000}' >>"$WORK/bare.txt"
done
bare_p50=$(pct 50 <"$WORK/bare.txt")
resync=$($PSQL -d mlplat -c "SHOW mlplat.resync_interval")
retry=$($PSQL -d mlplat -c "SHOW mlplat.leader_retry_interval")

printf '\n%-52s %7s %9s %9s  %s\n' "measure" "trials" "median" "max/p99" "baseline / target"
printf '%-52s %7s %9s %9s  %s\n' "(a) leader terminated -> new leader's first pass" "$TRIALS" "${a_med} ms" "${a_max} ms" "retry interval $retry (the old poll); target median <= 50 ms"
printf '%-52s %7s %9s %9s  %s\n' "(b) kill -9 -> first pass after crash restart" "$TRIALS" "${b_med} ms" "${b_max} ms" "seeds' Lease failover 31440 ms; client-go ~15000 ms"
printf '%-52s %7s %9s %9s  %s\n' "(c) replica promoted -> its first pass" "$(wc -l <"$WORK/c.txt")" "${c_med} ms" "${c_max} ms" "includes pg_ctl promote's own wait"
printf '%-52s %7s %9s %9s  %s\n' "wake: deploy() commit -> apply at the stand-in" "$w_n" "${w_p50} ms" "${w_p99} ms" "resync-only would average ${resync}/2; target p50 <= 50 ms"
printf '%-52s %7s %9s %9s  %s\n' "bare client apply round trip (stand-in floor)" 50 "${bare_p50} ms" "-" "same stand-in, same run"
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores)"
# RAW=dir keeps every trial's figure (ms, one a line) for bench/curves (plots)
if [ -n "${RAW:-}" ]; then
	mkdir -p "$RAW"
	cp "$WORK/a.txt" "$RAW/takeover_terminate.txt"
	cp "$WORK/b.txt" "$RAW/takeover_kill9.txt"
	cp "$WORK/c.txt" "$RAW/takeover_promote.txt"
fi
