#!/usr/bin/env bash
# bench/plan_rollout/run.sh [rows] — decisions per second of mlplat.plan_rollout
# from SQL, on a throwaway cluster, one core (no parallel workers).
#
# Builds a table of N (default 100000) evidence records and times, median of
# 5 runs after one warm-up, in the same session:
#   jsonb_typeof(evidence)                a trivial jsonb function (floor)
#   mlplat.content_id(evidence)           parse + canonical + SHA-256 alone
#   plan_rollout, one contract            every row decided against one contract
#   plan_rollout, 1000 contracts          each row's contract differs from the
#                                         previous row's (no contract reuse)
# and prints a table of rows/s (wall clock), rows per CPU second of the backend
# (from /proc/self/schedstat: what "one core" means on a shared machine), ratios, and
# the load average.  Reports figures; never pass/fail.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=${1:-100000}
. "$SRC/test/lib/stack.sh"
echo "== build"
stack_init plan
stack_start "max_parallel_workers_per_gather = 0" "shared_buffers = '256MB'" "work_mem = '64MB'"
export PGDATABASE=postgres
psql() { "$BIN/psql" -qX -v ON_ERROR_STOP=1 "$@"; }
psql -c "SET client_min_messages = error; CREATE EXTENSION mlplat"

echo "== data: $ROWS evidence records"
psql -c "SET client_min_messages = error" -f "$SRC/bench/plan_rollout/contracts.sql"
psql -v rows="$ROWS" <<'SQL'
SET client_min_messages = error;
-- evidence for contract k, varied by i so every decision and many reasons occur
CREATE FUNCTION evidence_for(c jsonb, i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT mlplat.with_content_id(jsonb_build_object(
    'contract_content_id', c->>'content_id', 'scope', c->'scope',
    'observed_at', 1764410400, 'current_fraction', (ARRAY[0, 0.05, 0.2, 0.5])[1 + i % 4],
    'window_start', 1764410100, 'window_seconds', CASE WHEN i % 23 = 0 THEN 200 ELSE 300 END,
    'target', jsonb_build_object('desired_replicas', 4, 'ready_replicas', CASE WHEN i % 17 = 0 THEN 3 ELSE 4 END,
        'load_attempts', 4, 'load_successes', 4, 'health_observed_at', 1764410400 - i % 70,
        'requests', 300 + i % 1500, 'errors', i % 9, 'p95_ms', CASE WHEN i % 31 = 0 THEN NULL ELSE 150 + i % 120 END),
    'previous', jsonb_build_object('desired_replicas', 4, 'ready_replicas', 4, 'load_attempts', 4,
        'load_successes', 4, 'health_observed_at', 1764410395, 'requests', 4800, 'errors', 9, 'p95_ms', 170),
    'desired_capacity', 8))
$$;

CREATE TABLE t1 AS   -- one contract
SELECT c.contract, evidence_for(c.contract, i) AS evidence
FROM generate_series(1, :rows) i, contracts c WHERE c.n = 1;
CREATE TABLE t2 AS   -- row i uses contract i % 1000: consecutive rows never share one
SELECT c.contract, evidence_for(c.contract, i) AS evidence
FROM generate_series(1, :rows) i JOIN contracts c ON c.n = 1 + i % 1000 ORDER BY i;
VACUUM ANALYZE t1; VACUUM ANALYZE t2;

SELECT p->>'decision' AS decision, count(*) FROM t1, LATERAL mlplat.plan_rollout(contract, evidence) p
GROUP BY 1 ORDER BY 1;

-- CPU time of this backend so far, in seconds: the first field of /proc/self/schedstat,
-- nanoseconds on a CPU -- a figure the other jobs on a shared machine do not inflate the way
-- they inflate wall-clock time, and finer than /proc/self/stat's 10 ms ticks (the floor's
-- run is ~0.1 s, which ticks measured to +-10 %).
CREATE FUNCTION cpu_seconds() RETURNS float8 LANGUAGE sql AS $$
  SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::float8 / 1e9
$$;

-- median wall-clock and median CPU seconds of n runs of q, after one warm-up run
CREATE FUNCTION median_seconds(q text, n int DEFAULT 5, OUT wall float8, OUT cpu float8)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz; c0 float8; ts float8[] := '{}'; cs float8[] := '{}';
BEGIN
  EXECUTE q;  -- warm-up
  FOR i IN 1 .. n LOOP
    t0 := clock_timestamp(); c0 := cpu_seconds();
    EXECUTE q;
    cs := cs || (cpu_seconds() - c0);
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  wall := (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ts) x);
  cpu := (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(cs) x);
END $$;

CREATE TEMP TABLE results AS
SELECT ord, what, m.wall AS s, m.cpu AS c
FROM (VALUES
  (1, 'jsonb_typeof(evidence)',         'SELECT count(*) FROM t1, LATERAL jsonb_typeof(evidence) x'),
  (2, 'mlplat.content_id(evidence)',    'SELECT count(*) FROM t1, LATERAL mlplat.content_id(evidence) x'),
  (3, 'plan_rollout, one contract',     'SELECT count(*) FROM t1, LATERAL mlplat.plan_rollout(contract, evidence) x'),
  (4, 'plan_rollout, 1000 contracts',   'SELECT count(*) FROM t2, LATERAL mlplat.plan_rollout(contract, evidence) x')
) v(ord, what, q), LATERAL median_seconds(q) m;

\echo
SELECT what AS "query (rows = :rows, median of 5)",
       round((s * 1000)::numeric, 1) AS "ms",
       round(:rows / s) AS "rows/s",
       round(:rows / nullif(c, 0)) AS "rows/cpu-s",
       round((s / (SELECT s FROM results WHERE ord = 1))::numeric, 2) AS "x jsonb_typeof",
       round((s / (SELECT s FROM results WHERE ord = 2))::numeric, 2) AS "x content_id"
FROM results ORDER BY ord;
SELECT 'load average: ' || pg_read_file('/proc/loadavg') AS " ";
SQL
echo "target: >= 100000 decisions/s on one core (a figure, not a test)"
