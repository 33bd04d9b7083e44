#!/usr/bin/env bash
# bench/steady_pass/writeback_cas.sh — what the deployments write-back costs with its
# compare-and-swap spelled once (mlplat._writeback_holds, issue 19 "sqldup7") beside the same
# statement spelling its two conditions, side by side in one cluster: per size, alternating
# calls (which goes first alternates too), each timed inside the server, median of REPS.
# Also prints both statements' plans (EXPLAIN, costs off): the function is inlined, so they
# should be the same.  No workers (mlplat.database names no database); the epoch row is made
# by hand.
#   SIZES="1 10 100 1000" REPS=21 bench/steady_pass/writeback_cas.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1 10 100 1000"}
REPS=${REPS:-21}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start writeback_cas deployments
side_deployments
Q <<SQL >/dev/null
-- the same statement with its two conditions spelled: _deployments_writeback_set's own body
-- with the call replaced (so the copy cannot drift from it)
DO \$\$
DECLARE
  body text := (SELECT prosrc FROM pg_proc WHERE oid = 'mlplat._deployments_writeback_set'::regproc);
  spelled text := replace(body, 'mlplat._writeback_holds(d.row_version, w.row_version, ''deployments'', p_epoch)',
                          'd.row_version = w.row_version AND mlplat._epoch_current(''deployments'', p_epoch)');
BEGIN
  IF spelled = body THEN RAISE EXCEPTION 'the write-back no longer calls _writeback_holds as this bench expects'; END IF;
  EXECUTE format('CREATE FUNCTION public.spelled_wb(p_epoch bigint, p_rows mlplat.deployment_writeback[]) '
                 'RETURNS SETOF bigint LANGUAGE sql AS %L', spelled);
END \$\$;
CREATE FUNCTION public.rows_of(n int) RETURNS mlplat.deployment_writeback[] LANGUAGE sql AS \$\$
  SELECT array_agg(ROW(d.id, d.row_version, 'FAILED', 'bench', NULL, NULL, NULL, NULL, NULL, 1000)::mlplat.deployment_writeback
                   ORDER BY d.id)
    FROM (SELECT * FROM mlplat.deployments ORDER BY id LIMIT n) d \$\$;
SQL
side_times <<SQL
DO \$\$
DECLARE n int; rep int; r mlplat.deployment_writeback[]; t0 timestamptz; k bigint; f text;
BEGIN
  FOREACH n IN ARRAY '{$(echo $SIZES | tr ' ' ,)}'::int[] LOOP
    FOR rep IN 1..$REPS LOOP
      FOREACH f IN ARRAY CASE WHEN rep % 2 = 0 THEN '{spelled,once}'::text[] ELSE '{once,spelled}' END LOOP
        r := public.rows_of(n);
        t0 := clock_timestamp();
        IF f = 'spelled' THEN
          SELECT count(*) INTO k FROM public.spelled_wb(7, r);
        ELSE
          SELECT count(*) INTO k FROM mlplat._deployments_writeback_set(7, r);
        END IF;
        IF k <> n THEN RAISE EXCEPTION '% wrote % rows of %', f, k, n; END IF;
        RAISE NOTICE '% % %', n, f, extract(epoch FROM clock_timestamp() - t0) * 1000;
      END LOOP;
    END LOOP;
  END LOOP;
END \$\$;
SQL
# the two plans, for 10 rows (generic parameters as inside the function)
for f in "public.spelled_wb" "mlplat._deployments_writeback_set"; do
	body=$(Q -Atc "SELECT regexp_replace(prosrc, 'RETURNING.*', '') FROM pg_proc WHERE oid = '$f'::regproc")
	Q -q <<SQL | sed "s|^|$f: |"
SET search_path = pg_catalog, mlplat, pg_temp;
PREPARE wb(bigint, mlplat.deployment_writeback[]) AS $(echo "$body" | sed 's/p_epoch/$1/g; s/p_rows/$2/g');
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE wb(7, public.rows_of(10));
SQL
done
side_table "$WORK/times.txt" "$REPS" spelled once \
	"rows a call" "conditions spelled, ms" "_writeback_holds, ms"
