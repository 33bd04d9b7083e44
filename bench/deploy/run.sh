#!/bin/bash
# bench/deploy/run.sh — throughput and p99 latency of mlplat.deploy() against a baseline that
# writes the same rows (new revision, deployment update, audit event, idempotency record)
# with plain INSERT/UPDATE and no checks, in the same run on the same throwaway cluster.
#
#   [BUILD=dir] bench/deploy/run.sh [--duration S] [--reps N] [--clients "1 4 8"] [--together]
#
# --together runs the three modes at the same time (each with the given number of clients,
# each on 64 deployments of its own) instead of one after the other: on a shared machine
# whose load moves between two 10 s windows, they then see the same load, and the ratio is
# the ratio of their costs per call.
#
# Builds and stages the extension and starts a private cluster (test/lib/stack.sh), runs pgbench for each client count and mode
# (fixed duration, median of N repetitions), prints a table, and stops the cluster.
set -euo pipefail
DURATION=10 REPS=3 CLIENTS="1 4 8" TOGETHER=0
while [ $# -gt 0 ]; do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --together) TOGETHER=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# BUILD=dir measures the extension built from another source tree (e.g. an export of main),
# with this script's baselines: before/after tables come from the same baseline
. "$SRC/test/lib/stack.sh"
stack_init deploy
W=$WORK
# fsync stays on, as in every figure of this bench before (cluster_start turns it off)
stack_start "shared_preload_libraries = 'mlplat'" "mlplat.database = 'postgres'" "mlplat.workers_enabled = off" \
	"max_connections = 50" "fsync = on"
PSQL=("$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d postgres)

"${PSQL[@]}" -o /dev/null <<'SQL'
CREATE EXTENSION mlplat;
CREATE ROLE bench_deployer LOGIN;
SELECT mlplat.create_project('bench', 100000, NULL, NULL, NULL, 'bench_deployer');
SELECT mlplat.add_artifact_location('bench', 's3://bench/');
SELECT mlplat.register_model_version('bench', 'm', '1', 's3://bench/m1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT mlplat.set_model_stage('bench', 'm', '1', 'CHAMPION');
SET ROLE bench_deployer;
SELECT mlplat.deploy('bench', 'd' || i, 'm', '1', 'kserve-sklearnserver', 1, 1, 1, jsonb_build_object('N', '0'))
FROM generate_series(1, 64) i;
RESET ROLE;
-- the baselines' own deployments (same tables, same indexes) and a spec of the same size
SELECT mlplat.deploy('bench', p || i, 'm', '1', 'kserve-sklearnserver', 1, 1, 1, jsonb_build_object('N', '0'))
FROM generate_series(1, 64) i, (VALUES ('b'), ('x')) v(p);   -- base1's rows, basetx's rows
CREATE TABLE public.bench_tpl AS
SELECT r.spec, r.intent, r.model_version_id, r.project_id FROM mlplat.deployment_revisions r LIMIT 1;
SQL

cat > "$W/deploy.sql" <<'SQL'
\set d random(1, 64)
\set n random(1, 1000000000)
SELECT revision FROM mlplat.deploy('bench', 'd' || :d, 'm', '1', 'kserve-sklearnserver', 1, 1, 1, jsonb_build_object('N', :n::text), gen_random_uuid()::text);
SQL
cat > "$W/baseline.sql" <<'SQL'
\set d random(1, 64)
\set n random(1, 1000000000)
WITH t AS (SELECT * FROM public.bench_tpl),
d AS (UPDATE mlplat.deployments x
      SET previous_revision = x.desired_revision, desired_revision = x.latest_revision + 1,
          latest_revision = x.latest_revision + 1, generation = x.generation + 1, row_version = x.row_version + 1,
          status = 'DEPLOYING', updated_at = now(), traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
      WHERE x.project_id = (SELECT project_id FROM t) AND x.name = 'b' || :d
      RETURNING x.id, x.latest_revision, x.project_id),
r AS (INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent, spec,
                                               spec_digest, created_by, traceparent)
      SELECT d.id, d.latest_revision, d.project_id, t.model_version_id, t.intent || jsonb_build_object('N', :n::text),
             t.spec, 'digest', 'bench', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' FROM d, t
      RETURNING deployment_id),
s AS (INSERT INTO mlplat.spans (trace_id, span_id, name, kind, start_time, end_time, attributes, project_id, entity, entity_id)
      SELECT replace(gen_random_uuid()::text, '-', ''), substr(replace(gen_random_uuid()::text, '-', ''), 1, 16),
             'mlplat.deploy', 'SERVER', statement_timestamp(), clock_timestamp(),
             jsonb_build_object('mlplat.request_id', gen_random_uuid()), d.project_id, 'deployment', d.id FROM d),
a AS (INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id, request_id,
                                       trace_id, traceparent, detail)
      SELECT 'bench', 'bench', 'deploy', 'bench', d.project_id, 'deployment', d.id, gen_random_uuid(),
             '4bf92f3577b34da6a3ce929d0e0e4736', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '{}' FROM d)
INSERT INTO mlplat.idempotency_keys (principal, action, key, request_hash) VALUES ('bench', 'deploy', gen_random_uuid()::text, 'h');
SQL
# The same writes as an application would issue them: separate statements in one transaction.
cat > "$W/baseline_tx.sql" <<'SQL'
\set d random(1, 64)
\set n random(1, 1000000000)
BEGIN;
UPDATE mlplat.deployments x
SET previous_revision = x.desired_revision, desired_revision = x.latest_revision + 1,
    latest_revision = x.latest_revision + 1, generation = x.generation + 1, row_version = x.row_version + 1,
    status = 'DEPLOYING', updated_at = now(), traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
WHERE x.project_id = (SELECT project_id FROM public.bench_tpl) AND x.name = 'x' || :d
RETURNING x.id AS dep_id, x.latest_revision AS rev, x.project_id AS pid \gset
INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent, spec,
                                         spec_digest, created_by, traceparent)
SELECT :dep_id, :rev, :pid, t.model_version_id, t.intent || jsonb_build_object('N', :n::text), t.spec, 'digest',
       'bench', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' FROM public.bench_tpl t;
INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id, request_id,
                                 trace_id, traceparent, detail)
VALUES ('bench', 'bench', 'deploy', 'bench', :pid, 'deployment', :dep_id, gen_random_uuid(),
        '4bf92f3577b34da6a3ce929d0e0e4736', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '{}');
INSERT INTO mlplat.spans (trace_id, span_id, name, kind, start_time, end_time, attributes, project_id, entity, entity_id)
VALUES (replace(gen_random_uuid()::text, '-', ''), substr(replace(gen_random_uuid()::text, '-', ''), 1, 16),
        'mlplat.deploy', 'SERVER', statement_timestamp(), clock_timestamp(),
        jsonb_build_object('mlplat.request_id', gen_random_uuid()), :pid, 'deployment', :dep_id);
INSERT INTO mlplat.idempotency_keys (principal, action, key, request_hash) VALUES ('bench', 'deploy', gen_random_uuid()::text, 'h');
COMMIT;
SQL
chown -R "$RUNAS" "$W" 2>/dev/null || true

# one point: prints "tps p99_ms"
run_point() {  # mode clients
  local mode=$1 c=$2 user=postgres logdir
  [ "$mode" = deploy ] && user=bench_deployer
  logdir=$(mktemp -d "$W/log.XXXX"); chown "$RUNAS" "$logdir" 2>/dev/null || true
  local out
  out=$(cd "$logdir" && as_pg pgbench -n -h "$W" -p "$PORT" -U "$user" -c "$c" -j "$c" -T "$DURATION" \
          -f "$W/$mode.sql" -l --log-prefix="$logdir/tx" postgres 2>&1) || { echo "$out" >&2; exit 1; }
  local tps p99
  tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1)
  p99=$(cat "$logdir"/tx.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2f", a[i]/1000}')
  echo "$tps $p99"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-8s %10s %8s | %10s %8s %6s | %10s %8s %6s\n' clients deploy_tps p99_ms base1_tps p99_ms ratio basetx_tps p99_ms ratio
for c in $CLIENTS; do
  dt=(); dp=(); bt=(); bp=(); xt=(); xp=()
  for i in $(seq "$REPS"); do
    if ((TOGETHER)); then
      run_point baseline "$c" >"$W/point.baseline" & run_point baseline_tx "$c" >"$W/point.baseline_tx" &
      run_point deploy "$c" >"$W/point.deploy" & wait
    else
      run_point baseline "$c" >"$W/point.baseline"; run_point baseline_tx "$c" >"$W/point.baseline_tx"
      run_point deploy "$c" >"$W/point.deploy"
    fi
    read -r t p <"$W/point.baseline"; bt+=("$t"); bp+=("$p")
    read -r t p <"$W/point.baseline_tx"; xt+=("$t"); xp+=("$p")
    read -r t p <"$W/point.deploy"; dt+=("$t"); dp+=("$p")
  done
  DT=$(printf '%s\n' "${dt[@]}" | median); DP=$(printf '%s\n' "${dp[@]}" | median)
  BT=$(printf '%s\n' "${bt[@]}" | median); BP=$(printf '%s\n' "${bp[@]}" | median)
  XT=$(printf '%s\n' "${xt[@]}" | median); XP=$(printf '%s\n' "${xp[@]}" | median)
  printf '%-8s %10.1f %8s | %10.1f %8s %6.2f | %10.1f %8s %6.2f\n' "$c" "$DT" "$DP" "$BT" "$BP" \
    "$(echo "$DT / $BT" | bc -l)" "$XT" "$XP" "$(echo "$DT / $XT" | bc -l)"
done
echo "median of $REPS runs of ${DURATION}s each$( ((TOGETHER)) && echo ', the three modes at the same time'); ratio = deploy tps / baseline tps; target >= 0.90 at 8 clients"
echo "base1: the same rows (revision, deployment, audit event, API span, idempotency key) written by one plain SQL statement (CTE); basetx: the same rows as separate"
echo "INSERT/UPDATE statements in one transaction, as an application would send them"
# sanity: every deploy made a revision, every revision is distinct
"${PSQL[@]}" -At -c "SELECT 'revisions=' || count(*) || ' audit=' || (SELECT count(*) FROM mlplat.audit_events) || ' spans=' || (SELECT count(*) FROM mlplat.spans) FROM mlplat.deployment_revisions"
