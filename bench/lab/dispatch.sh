#!/usr/bin/env bash
# bench/lab/dispatch.sh — commit -> Job create of start_lab_run against commit -> apply of
# deploy(), side by side in one run (issue 15: "commit -> Job create takes the same wake path as
# deploy(): median <= 1.5x deploy's commit -> apply in the same run").
#
#   N=30 bench/lab/dispatch.sh
#
# One private cluster with the reconcilers on and the stand-in.  N lab nodes, each with a probe
# run made through the API (PASSED) and an approval, so every measured run finds its node's
# lease free: what is measured is the wake path (commit -> NOTIFY -> the lab_runs leader's pass
# -> claim -> Secret -> Job), not a queue.  Intents alternate, deploy() then start_lab_run(),
# 50 ms apart; each commit time is clock_timestamp() right after the call's transaction, each
# request time the stand-in's log entry of the first POST of that Job (PATCH of that
# InferenceService), on one machine's clock.  Prints median and p90 of both and their ratio.
# Then every run is cancelled: Job gone (the foreground DELETE + the stand-in's jobDeleteMs)
# -> CANCELLED (cancel_acknowledged_at), median and p90.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-30}
. "$SRC/test/lib/stack.sh"
stack_init labdispatch
stack_standin
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "log_timezone = 'UTC'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat
DB=mlplat
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.lab_payload_bucket = 'artifacts'" -c "SELECT pg_reload_conf()" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'b')
$PSQL -d $DB -c "CREATE ROLE bench_owner LOGIN" >/dev/null
$PSQL -d $DB -c "SELECT mlplat.create_project('bench', 100000, NULL, NULL, NULL, 'bench_owner')" \
	-c "SELECT mlplat.add_artifact_location('bench', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'bench'" READY 60 >/dev/null || { echo "project not READY" >&2; exit 1; }
own() { $PSQL -d $DB -U bench_owner -c "$1"; }
own "SELECT mlplat.register_model_version('bench', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
own "SELECT mlplat.set_model_stage('bench', 'm', '1', 'CANDIDATE')" >/dev/null
own "SELECT mlplat.register_lab_profile('bench', 'p', jsonb_build_object('runtime_kind', 'kserve-sklearnserver',
	'image', 'r.example/w@sha256:' || repeat('e', 64), 'gpus', 0, 'accelerator', 'a100',
	'families', '[\"tabular_predict\"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536))" >/dev/null
for i in $(seq 1 "$N"); do
	admin POST nodes '{"name":"gpu-'$i'","gpus":8,"labels":{"mlplat.io/lab":"true","mlplat.io/accelerator":"a100"}}' >/dev/null
done
$PSQL -d $DB -c "SELECT mlplat.register_lab_node('gpu-' || i, 'a100', 8) FROM generate_series(1, $N) i" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.lab_nodes WHERE observed_ready" "$N" 60 >/dev/null || { echo "nodes not observed" >&2; exit 1; }
CAND=$($PSQL -d $DB -c "SELECT id FROM mlplat.model_versions")
PROF=$($PSQL -d $DB -c "SELECT id FROM mlplat.lab_profiles")
# the probes (lab runs 1..N of this fresh database) write their output object when their Job
# completes, as a worker would (a Job without one ends the probe FAILED OUTPUT_MISSING)
INST=$($PSQL -d $DB -c "SELECT mlplat._instance_id()")
for id in $(seq 1 "$N"); do
	admin POST argo/plan "{\"kind\":\"job\",\"namespace\":\"mlp-bench\",\"name\":\"lab-$id-1\",\"steps\":{\"*\":{\"ticks\":1,\"s3\":[{\"bucket\":\"artifacts\",\"key\":\"$INST/lab/$id/1/output.json\",\"content\":\"{}\"}]}}}" >/dev/null
done
own "SELECT mlplat.start_lab_probe('bench', $CAND, '$SHA', $PROF, n.id, 'probe-' || n.id) FROM mlplat.lab_nodes n" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.lab_probes WHERE status = 'PASSED'" "$N" 120 >/dev/null || { echo "probes did not pass" >&2; exit 1; }
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases" 0 120 >/dev/null || { echo "probe leases not released" >&2; exit 1; }
own "SELECT mlplat.approve_lab('bench', $CAND, '$SHA', $PROF, n.id, '{tabular_predict}', '{}', 10, '1 day') FROM mlplat.lab_nodes n" >/dev/null

# the measured runs (N+1..2N) run until cancelled: the last figure is Job gone -> CANCELLED
for id in $(seq $((N + 1)) $((2 * N))); do
	admin POST argo/plan "{\"kind\":\"job\",\"namespace\":\"mlp-bench\",\"name\":\"lab-$id-1\",\"steps\":{\"*\":{\"ticks\":100000}}}" >/dev/null
done

admin DELETE requests >/dev/null
{
	echo "CREATE TEMP TABLE commits (kind text, i int, id bigint, t float8);"
	for i in $(seq 1 "$N"); do
		echo "SET ROLE bench_owner;"
		echo "SELECT entity_id AS d FROM mlplat.deploy('bench', 'w$i', 'm', '1', 'kserve-sklearnserver') \\gset"
		echo "RESET ROLE;"
		echo "INSERT INTO commits VALUES ('deploy', $i, NULL, extract(epoch FROM clock_timestamp()));"
		echo "SELECT pg_sleep(0.05);"
		echo "SET ROLE bench_owner;"
		echo "SELECT entity_id AS l FROM mlplat.start_lab_run('bench', $CAND, '$SHA', $PROF, (SELECT id FROM mlplat.lab_nodes WHERE name = 'gpu-$i'),
		        (SELECT a.id FROM mlplat.lab_approvals a JOIN mlplat.lab_nodes n ON n.id = a.node_id WHERE n.name = 'gpu-$i'),
		        'tabular_predict', '[{\"features\": [1, 2, 3]}]', '{}', 'run-$i') \\gset"
		echo "RESET ROLE;"
		echo "INSERT INTO commits VALUES ('lab', $i, :l, extract(epoch FROM clock_timestamp()));"
		echo "SELECT pg_sleep(0.05);"
	done
	echo "\\copy commits TO '$WORK/commits.csv' CSV"
} >"$WORK/intents.sql"
$PSQL -d $DB -f "$WORK/intents.sql" >/dev/null || { echo "intents failed" >&2; exit 1; }
wait_for $DB "SELECT count(*) FROM mlplat.lab_runs WHERE purpose = 'run' AND dispatched_at IS NOT NULL" "$N" 120 >/dev/null
sleep 2
admin GET 'requests?method=POST&kind=Job' >"$WORK/jobs.json"
admin GET 'requests?method=PATCH&kind=InferenceService' >"$WORK/isvcs.json"
# cancel every measured run once it runs; its Job is deleted in the foreground, stays
# terminating for the stand-in's jobDeleteMs, then goes; CANCELLED is written by the pass
# whose LIST no longer shows it
wait_for $DB "SELECT count(*) FROM mlplat.lab_runs WHERE purpose = 'run' AND status = 'RUNNING'" "$N" 120 >/dev/null
own "SELECT count(*) FROM mlplat.lab_runs r, mlplat.cancel_lab_run('bench', r.id) WHERE r.purpose = 'run'" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.lab_runs WHERE purpose = 'run' AND status = 'CANCELLED'" "$N" 120 >/dev/null
admin GET 'requests?method=DELETE&kind=Job' >"$WORK/deletes.json"
$PSQL -d $DB -c "SELECT id, extract(epoch FROM cancel_acknowledged_at) FROM mlplat.lab_runs WHERE purpose = 'run'" >"$WORK/acks.txt"
JOB_DELETE_MS=$(admin GET config | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobDeleteMs"])')
python3 - "$WORK/commits.csv" "$WORK/jobs.json" "$WORK/isvcs.json" "$N" "$WORK/deletes.json" "$WORK/acks.txt" "$JOB_DELETE_MS" <<'PY'
import csv, datetime, json, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
def first(path, names):
    out = {}
    for e in json.load(open(path))["items"]:
        n = e.get("name")
        if n in names and n not in out:
            out[n] = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
    return out
dep = {f"w{r[1]}": float(r[3]) for r in rows if r[0] == "deploy"}
lab = {f"lab-{r[2]}-1": float(r[3]) for r in rows if r[0] == "lab"}
fd, fl = first(sys.argv[3], dep), first(sys.argv[2], lab)
d = sorted((fd[n] - t) * 1000 for n, t in dep.items() if n in fd)
l = sorted((fl[n] - t) * 1000 for n, t in lab.items() if n in fl)
def p(xs, q): return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
print(f"{'measure':<46} {'n':>4} {'median':>9} {'p90':>9}")
print(f"{'deploy() commit -> apply at the stand-in':<46} {len(d):>4} {statistics.median(d):>7.1f}ms {p(d, .9):>7.1f}ms")
print(f"{'start_lab_run() commit -> Job create':<46} {len(l):>4} {statistics.median(l):>7.1f}ms {p(l, .9):>7.1f}ms")
print(f"ratio of medians (lab / deploy): {statistics.median(l) / statistics.median(d):.2f}  (target <= 1.5); {sys.argv[4]} intents each, 50 ms apart")
# Job gone -> CANCELLED: the Job leaves the stand-in jobDeleteMs after the (first) foreground
# DELETE; the acknowledgement is the write-back of the pass that LISTs it absent
acks = {f"lab-{a}-1": float(b) for a, b in (l.split("|") for l in open(sys.argv[6]).read().split() if "|" in l and l.split("|")[1])}
dels = first(sys.argv[5], acks)
g = sorted((acks[n] - dels[n]) * 1000 - float(sys.argv[7]) for n in acks if n in dels)
print(f"{'Job gone -> CANCELLED':<46} {len(g):>4} {statistics.median(g):>7.1f}ms {p(g, .9):>7.1f}ms"
      f"  (gone = DELETE + jobDeleteMs {sys.argv[7]} ms; a follow-up pass comes 300 ms after the last)")
PY
