#!/bin/bash
# bench/lab/preflight.sh — mlplat.lab_preflight() against deploy() and against a plain SELECT
# of the same evidence rows, and start_lab_run() against deploy(), side by side in one run on
# one throwaway cluster with 1,000 lab nodes, 5,000 probes and 1,000 approvals (plus 1,000 of each
# for a CPU-only profile, to show start_lab_run without the GPU quota's check).
#
#   [BUILD=dir] bench/lab/preflight.sh [--duration S] [--reps N] [--clients C] [--starts-only] [--together]
#
# --starts-only measures the deploy() baselines and the two start_lab_run modes only.
# --together (with --starts-only) runs the redeploy, the GPU start and the CPU start at the same
# time, each with C clients on rows of its own (its deployments, its approvals), instead of one
# after the other: on a shared machine whose load moves between two windows they then see the
# same load, and the ratio is the ratio of their costs per call.  It prints each round (with
# the load average) and the medians; the new-deployment baseline is not run in this mode.
# BUILD=dir measures the extension built from another source tree with this script's fixture.
#
# Builds and stages the extension and starts a private cluster (test/lib/stack.sh) with the
# reconcilers off, runs pgbench (fixed duration, median of N
# repetitions, modes interleaved) and prints one table with the ratios the issue targets:
#   preflight 1 kB / deploy >= 2, preflight 1 kB / plain SELECT >= 0.5,
#   preflight 64 kB / preflight 1 kB cost <= 3 (i.e. tps ratio >= 1/3), start_lab_run / deploy >= 0.7
# against two deploy() baselines (a redeploy of an existing deployment, which takes the
# project's lock shared, and a new 1-GPU deployment, which reserves GPUs under it taken
# exclusively: like for like with a GPU start), and the tuples the preflight wrote
# (pg_stat_xact_user_tables inside its transaction: 0).
set -euo pipefail
DURATION=10 REPS=3 CLIENTS=8 STARTS_ONLY= TOGETHER=
while [ $# -gt 0 ]; do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --starts-only) STARTS_ONLY=1; shift ;;
    --together) TOGETHER=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
# the preflight modes are read-only and compared with deploy() one after the other only
[ -z "$TOGETHER" ] || [ -n "$STARTS_ONLY" ] || { echo "--together needs --starts-only" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
stack_init lab
W=$WORK
stack_start "shared_preload_libraries = 'mlplat'" "mlplat.database = 'postgres'" "mlplat.workers_enabled = off" \
	"max_connections = 50" "fsync = on"
PSQL=("$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d postgres)

# One project, one candidate and profile; 1,000 nodes (observed ahead of time, so they stay
# fresh for the whole run), 5 probes per node, one approval per node.  Node i has approval i.
# The probes are made with start_lab_probe() and ended the way the lab_runs reconciler ends
# them (claim, Job write-back, Job gone), never inserted by hand: round k starts one probe per
# node (the claim dispatches one run per free node), rounds 1-4 fail, round 5 passes (the
# latest evidence), round 6 passes the CPU-only profile's.
SETUP_T0=$SECONDS
"${PSQL[@]}" -o /dev/null <<'SQL'
CREATE EXTENSION mlplat;
CREATE ROLE bench_dev LOGIN;
SELECT mlplat.create_project('bench', 100000, NULL, NULL, NULL, 'bench_dev');
SELECT mlplat.add_artifact_location('bench', 's3://bench/');
SET ROLE bench_dev;
SELECT mlplat.register_model_version('bench', 'm', '1', 's3://bench/m1', repeat('a', 64), 'vllm', 'custom');
SELECT mlplat.set_model_stage('bench', 'm', '1', 'CANDIDATE');
SELECT mlplat.register_lab_profile('bench', 'p', jsonb_build_object('runtime_kind', 'vllm',
  'image', 'r.example/w@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'a100',
  'families', '["text_generation"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536));
-- the same worker without GPUs: start_lab_run then takes the project's lock shared, as deploy()
-- does when its allocation does not grow (a GPU start reserves it: quota checks serialize)
SELECT mlplat.register_lab_profile('bench', 'p0', jsonb_build_object('runtime_kind', 'vllm',
  'image', 'r.example/w@sha256:' || repeat('e', 64), 'gpus', 0, 'accelerator', 'a100',
  'families', '["text_generation"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536));
RESET ROLE;
SELECT mlplat.register_lab_node('node-' || i, 'a100', 8) FROM generate_series(1, 1000) i;
UPDATE mlplat.lab_nodes SET observed_ready = true, observed_unschedulable = false, observed_gpus = 8,
       observed_accelerator = 'a100', observed_at = now() + interval '1 day';
CREATE FUNCTION pg_temp.probe_round(k int, prof text, ev text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('role', 'bench_dev', true);
  PERFORM mlplat.start_lab_probe('bench', (SELECT id FROM mlplat.model_versions), repeat('a', 64),
            (SELECT id FROM mlplat.lab_profiles WHERE name = prof), n.id, 'probe-' || k || '-' || n.id)
  FROM mlplat.lab_nodes n ORDER BY n.id;
  PERFORM set_config('role', 'none', true);
  PERFORM 1 FROM mlplat._lab_runs_claim(1, 'bench', 'bench-bucket');
  PERFORM mlplat._lab_runs_observed(r.id, r.row_version, 1, 'bench', ev, '{}', convert_to('{"ok": true}', 'UTF8'))
  FROM mlplat.lab_runs r WHERE r.purpose = 'probe' AND r.status = 'DISPATCHED';
  PERFORM mlplat._lab_runs_job_gone(r.id, r.row_version, 1, 'bench', '{"job": "absent"}')
  FROM mlplat.lab_runs r JOIN mlplat.lab_leases l ON l.lab_run_id = r.id;
END $$;
-- one transaction per round: each round's probes complete later than the round before
SELECT pg_temp.probe_round(1, 'p', 'FAILED');
SELECT pg_temp.probe_round(2, 'p', 'FAILED');
SELECT pg_temp.probe_round(3, 'p', 'FAILED');
SELECT pg_temp.probe_round(4, 'p', 'FAILED');
SELECT pg_temp.probe_round(5, 'p', 'COMPLETED');
SELECT pg_temp.probe_round(6, 'p0', 'COMPLETED');
SET ROLE bench_dev;
SELECT mlplat.approve_lab('bench', (SELECT id FROM mlplat.model_versions), repeat('a', 64),
  (SELECT id FROM mlplat.lab_profiles WHERE name = 'p'), n.id, '{text_generation}', '{}', 1000, '30 days')
FROM mlplat.lab_nodes n ORDER BY n.id;
SELECT mlplat.approve_lab('bench', (SELECT id FROM mlplat.model_versions), repeat('a', 64),
  (SELECT id FROM mlplat.lab_profiles WHERE name = 'p0'), n.id, '{text_generation}', '{}', 1000, '30 days')
FROM mlplat.lab_nodes n ORDER BY n.id;
SELECT mlplat.deploy('bench', 'd' || i, 'm', '1', 'vllm', 1, 1, 1, jsonb_build_object('N', '0'))
FROM generate_series(1, 64) i;
RESET ROLE;
SELECT count(*) FROM mlplat.lab_approvals;
SQL
echo "set-up (1,000 nodes, 6,000 probes, 2,000 approvals, 64 deployments): $((SECONDS - SETUP_T0)) s" >&2
CAND=$("${PSQL[@]}" -At -c "SELECT id FROM mlplat.model_versions")
PROF=$("${PSQL[@]}" -At -c "SELECT id FROM mlplat.lab_profiles WHERE name = 'p'")
PROF0=$("${PSQL[@]}" -At -c "SELECT id FROM mlplat.lab_profiles WHERE name = 'p0'")
# a 1 kB and a (nearly) 64 kB text_generation request
IN1K=$(python3 -c 'import json; print(json.dumps([{"prompt": "x" * 980, "max_tokens": 16}]))')
IN64K=$(python3 -c 'import json; print(json.dumps([{"prompt": "x" * 16300, "max_tokens": 16} for _ in range(4)]))')
echo "$IN1K" >"$W/in1k.json"; echo "$IN64K" >"$W/in64k.json"
BYTES1=$("${PSQL[@]}" -At -c "SELECT octet_length(mlplat.canonical_json(pg_read_file('$W/in1k.json')::jsonb))")
BYTES64=$("${PSQL[@]}" -At -c "SELECT octet_length(mlplat.canonical_json(pg_read_file('$W/in64k.json')::jsonb))")

# every script sends its inputs as a bind parameter (-M extended), as a client would
cat >"$W/preflight.sql" <<SQL
\set n random(1, 1000)
SELECT passed FROM mlplat.lab_preflight('bench', $CAND, repeat('a', 64), $PROF, :n, :n, 'text_generation', :inputs::jsonb);
SQL
cat >"$W/select.sql" <<SQL
\set n random(1, 1000)
SELECT p.status, v.stage, v.artifact_sha256, v.runtime_kind, f.enabled, f.families, f.max_execution_seconds,
       nd.observed_at, nd.observed_ready, nd.observed_gpus,
       (SELECT pr.status FROM mlplat.lab_probes pr WHERE pr.runtime_profile_id = f.id AND pr.node_id = nd.id
          AND pr.artifact_sha256 = v.artifact_sha256 AND pr.completed_at IS NOT NULL
        ORDER BY pr.completed_at DESC LIMIT 1),
       a.expires_at, a.revoked_at, a.runs_used, a.families, a.limits
FROM mlplat.projects p, mlplat.model_versions v, mlplat.lab_profiles f, mlplat.lab_nodes nd, mlplat.lab_approvals a
WHERE p.name = 'bench' AND v.id = $CAND AND f.id = $PROF AND nd.id = :n AND a.id = :n;
SQL
cat >"$W/deploy.sql" <<'SQL'
\set d random(1, 64)
\set k random(1, 1000000000)
SELECT revision FROM mlplat.deploy('bench', 'd' || :d, 'm', '1', 'vllm', 1, 1, 1, jsonb_build_object('N', :k::text), gen_random_uuid()::text);
SQL
# like for like with a GPU start: deploy() of a NEW 1-GPU deployment each time, which reserves
# GPUs under the project's lock taken exclusively (deploy.sql re-deploys the same allocation
# and takes it shared)
cat >"$W/deploynew.sql" <<'SQL'
\set k random(1, 1000000000)
SELECT revision FROM mlplat.deploy('bench', 'n' || :k || '-' || (random() * 1e9)::bigint, 'm', '1', 'vllm', 1, 1, 1, '{}', gen_random_uuid()::text);
SQL
cat >"$W/start.sql" <<SQL
\set n random(1, 1000)
SELECT status FROM mlplat.start_lab_run('bench', $CAND, repeat('a', 64), $PROF, :n, :n, 'text_generation', :inputs::jsonb, '{}', gen_random_uuid()::text);
SQL
cat >"$W/start0.sql" <<SQL
\set n random(1, 1000)
SELECT status FROM mlplat.start_lab_run('bench', $CAND, repeat('a', 64), $PROF0, :n, :n + 1000, 'text_generation', :inputs::jsonb, '{}', gen_random_uuid()::text);
SQL
chown -R "$RUNAS" "$W" 2>/dev/null || true

run_point() {  # script inputs-file -> tps
  local out
  out=$(as_pg pgbench -n -M extended -h "$W" -p "$PORT" -U bench_dev -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" \
          -D inputs="$(cat "$2")" -f "$W/$1.sql" postgres 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
r() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }
# the runs end (what the lab_runs reconciler would record), so the next rounds start from the
# same quota and the same set of active runs
end_runs() {
  "${PSQL[@]}" -c "UPDATE mlplat.lab_runs SET status = 'FAILED', reason_code = 'QUEUE_DEADLINE_EXCEEDED', finished_at = now() WHERE status = 'QUEUED'"
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }

if [ -n "$TOGETHER" ]; then
  # redeploys touch d1..d64 only, the GPU starts approvals 1..1000, the CPU starts 1001..2000;
  # the two starts read the same nodes under SHARE-mode guards, which do not conflict
  printf '%-6s %-13s %10s %10s %10s %8s %8s\n' round load redeploy gpu_start cpu_start gpu/dep cpu/dep
  dep=(); st=(); st0=(); rg=(); rc=()
  for i in $(seq "$REPS"); do
    l0=$(loadavg)
    run_point deploy "$W/in1k.json" >"$W/point.deploy" & p1=$!
    run_point start "$W/in1k.json" >"$W/point.start" & p2=$!
    run_point start0 "$W/in1k.json" >"$W/point.start0" & p3=$!
    wait "$p1"; wait "$p2"; wait "$p3"
    l1=$(loadavg)
    dep+=("$(cat "$W/point.deploy")"); st+=("$(cat "$W/point.start")"); st0+=("$(cat "$W/point.start0")")
    rg+=("$(r "${st[-1]}" "${dep[-1]}")"); rc+=("$(r "${st0[-1]}" "${dep[-1]}")")
    printf '%-6s %-13s %10.1f %10.1f %10.1f %8s %8s\n' "$i" "$l0 -> $l1" "${dep[-1]}" "${st[-1]}" "${st0[-1]}" \
      "${rg[-1]}" "${rc[-1]}"
    end_runs
  done
  printf '%-6s %-13s %10.1f %10.1f %10.1f %8s %8s\n' median "" "$(printf '%s\n' "${dep[@]}" | median)" \
    "$(printf '%s\n' "${st[@]}" | median)" "$(printf '%s\n' "${st0[@]}" | median)" \
    "$(printf '%s\n' "${rg[@]}" | median)" "$(printf '%s\n' "${rc[@]}" | median)"
  printf '%-6s %-13s %10s %10s %10s %8s %8s\n' range "" "" "" "" \
    "$(printf '%s\n' "${rg[@]}" | sort -n | sed -n '1p;$p' | paste -sd-)" \
    "$(printf '%s\n' "${rc[@]}" | sort -n | sed -n '1p;$p' | paste -sd-)"
  echo "$CLIENTS clients per mode ($((3 * CLIENTS)) in all), $REPS rounds of ${DURATION}s, the three modes at the same time;"
  echo "ratio = start_lab_run tps / redeploy tps per round, target >= 0.7; load = 1-minute load average before -> after"
  "${PSQL[@]}" -At -c "SELECT 'lab_runs=' || count(*) FROM mlplat.lab_runs WHERE purpose = 'run'"
  exit 0
fi

pf=(); pf64=(); sel=(); dep=(); depn=(); st=(); st0=()
for i in $(seq "$REPS"); do
  if [ -z "$STARTS_ONLY" ]; then
    pf+=("$(run_point preflight "$W/in1k.json")")
    sel+=("$(run_point select "$W/in1k.json")")
    pf64+=("$(run_point preflight "$W/in64k.json")")
  else
    pf+=(0); sel+=(1); pf64+=(1)
  fi
  dep+=("$(run_point deploy "$W/in1k.json")")
  depn+=("$(run_point deploynew "$W/in1k.json")")
  st+=("$(run_point start "$W/in1k.json")")
  st0+=("$(run_point start0 "$W/in1k.json")")
  end_runs
done
PF=$(printf '%s\n' "${pf[@]}" | median); PF64=$(printf '%s\n' "${pf64[@]}" | median)
SEL=$(printf '%s\n' "${sel[@]}" | median); DEP=$(printf '%s\n' "${dep[@]}" | median); ST=$(printf '%s\n' "${st[@]}" | median)
ST0=$(printf '%s\n' "${st0[@]}" | median); DEPN=$(printf '%s\n' "${depn[@]}" | median)

# tuples written by one preflight, inside its own READ ONLY transaction
WRITES=$("${PSQL[@]}" -At <<SQL | tail -1
SELECT pg_read_file('$W/in1k.json') AS inp \\gset
BEGIN READ ONLY;
SET LOCAL ROLE bench_dev;
SELECT passed AS sampled_passed FROM mlplat.lab_preflight('bench', $CAND, repeat('a', 64), $PROF, 1, 1, 'text_generation', :'inp'::jsonb) \\gset
RESET ROLE;
SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) || ' ' || :'sampled_passed' FROM pg_stat_xact_user_tables;
COMMIT;
SQL
)
PASSED=${WRITES#* }; WRITES=${WRITES%% *}

printf '%-44s %10s\n' mode tps
[ -n "$STARTS_ONLY" ] || printf '%-44s %10.1f\n' "lab_preflight, 1 kB ($BYTES1 B)" "$PF" \
  "lab_preflight, 64 kB ($BYTES64 B)" "$PF64" "plain SELECT of the evidence rows" "$SEL"
printf '%-44s %10.1f\n' "deploy(), redeploy (project lock shared)" "$DEP" \
  "deploy(), new 1-GPU deployment (exclusive)" "$DEPN" "start_lab_run, 1 kB, 1-GPU profile" "$ST" \
  "start_lab_run, 1 kB, CPU profile" "$ST0"
echo
printf '%-44s %8s %s\n' ratio value target
if [ -z "$STARTS_ONLY" ]; then
  printf '%-44s %8s %s\n' "preflight 1 kB / deploy()" "$(r "$PF" "$DEP")" ">= 2"
  printf '%-44s %8s %s\n' "preflight 1 kB / plain SELECT" "$(r "$PF" "$SEL")" ">= 0.5"
  printf '%-44s %8s %s\n' "cost 64 kB / cost 1 kB (= tps 1 kB / 64 kB)" "$(r "$PF" "$PF64")" "<= 3"
fi
printf '%-44s %8s %s\n' "start_lab_run (1 GPU) / deploy()" "$(r "$ST" "$DEP")" ">= 0.7"
printf '%-44s %8s %s\n' "start_lab_run (CPU) / deploy()" "$(r "$ST0" "$DEP")" ">= 0.7"
printf '%-44s %8s %s\n' "start_lab_run (1 GPU) / deploy() new 1-GPU" "$(r "$ST" "$DEPN")" ">= 0.7 (like for like)"
printf '%-44s %8s %s\n' "start_lab_run (CPU) / deploy() new 1-GPU" "$(r "$ST0" "$DEPN")" ">= 0.7"
printf '%-44s %8s %s\n' "tuples written by one preflight" "$WRITES" "0"
echo "the sampled preflight passed: $PASSED; $CLIENTS clients, median of $REPS runs of ${DURATION}s, modes interleaved; inputs as bind parameters"
"${PSQL[@]}" -At -c "SELECT 'lab_runs=' || count(*) || ' audit(lab_preflight)=' || (SELECT count(*) FROM mlplat.audit_events WHERE action = 'lab_preflight') FROM mlplat.lab_runs WHERE purpose = 'run'"
