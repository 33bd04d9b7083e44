#!/usr/bin/env bash
# bench/steady_pass/status_writeback.sh — what the generic compare-and-swap write-back
# (mlplat._status_writeback_set: its UPDATE built per call by dynamic SQL) costs beside the
# static UPDATE projects and model aliases ran before (issue 19), side by side in one
# cluster: per size, alternating calls, each timed inside the server, median of REPS.
# No workers (mlplat.database names no database); the epoch row is made by hand.
#   SIZES="1 10 100 1000" REPS=21 bench/steady_pass/status_writeback.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1 10 100 1000"}
REPS=${REPS:-21}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start status_writeback projects
Q <<SQL >/dev/null
INSERT INTO mlplat.projects (name, gpu_quota, status)
SELECT 'p' || g, 1, 'PROVISIONING' FROM generate_series(1, $max) g;
-- the statement projects ran before, as it was
CREATE FUNCTION public.static_wb(p_epoch bigint, p_rows mlplat.project_writeback[]) RETURNS SETOF bigint
LANGUAGE sql SET search_path = pg_catalog, mlplat, pg_temp AS \$\$
  UPDATE mlplat.projects p
     SET status = w.status, status_reason = w.reason,
         observed_generation = coalesce(w.observed_generation, p.observed_generation),
         observed = coalesce(w.observed, p.observed), observed_at = pg_catalog.now(),
         last_error = w.error, attempts = mlplat._retry_attempts(p.attempts, w.retry_ms),
         next_attempt_at = mlplat._retry_at(w.retry_ms), epoch = p_epoch,
         row_version = p.row_version + 1, updated_at = pg_catalog.now()
    FROM pg_catalog.unnest(p_rows) AS w
   WHERE p.id = w.id AND p.row_version = w.row_version AND mlplat._epoch_current('projects', p_epoch)
  RETURNING p.id \$\$;
CREATE FUNCTION public.rows_of(n int) RETURNS mlplat.project_writeback[] LANGUAGE sql AS \$\$
  SELECT array_agg(ROW(p.id, p.row_version, 'FAILED', 'bench', NULL, NULL, NULL, 1000)::mlplat.project_writeback
                   ORDER BY p.id)
    FROM (SELECT * FROM mlplat.projects ORDER BY id LIMIT n) p \$\$;
SQL
side_times <<SQL
DO \$\$
DECLARE n int; rep int; r mlplat.project_writeback[]; t0 timestamptz; k bigint;
BEGIN
  FOREACH n IN ARRAY '{$(echo $SIZES | tr ' ' ,)}'::int[] LOOP
    FOR rep IN 1..$REPS LOOP
      r := public.rows_of(n);
      t0 := clock_timestamp();
      SELECT count(*) INTO k FROM public.static_wb(7, r);
      RAISE NOTICE '% static %', n, extract(epoch FROM clock_timestamp() - t0) * 1000;
      r := public.rows_of(n);
      t0 := clock_timestamp();
      SELECT count(*) INTO k FROM mlplat._status_writeback_set('projects', 7, r);
      RAISE NOTICE '% generic %', n, extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
  END LOOP;
END \$\$;
SQL
side_table "$WORK/times.txt" "$REPS" static generic \
	"rows a call" "static UPDATE, ms" "_status_writeback_set, ms"
