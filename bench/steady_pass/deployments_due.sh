#!/usr/bin/env bash
# bench/steady_pass/deployments_due.sh — mlplat._deployments_due (the rows a watch event
# names, brought forward: issue 20) beside a copy of its definition before issue 20 "due9",
# side by side in one cluster: per size, alternating calls (which goes first alternates too),
# each in a transaction of its own and timed inside the server, median of REPS.  Two cases:
#   later  every key's row is due later (a pass has just pushed it on): each call writes them
#          (made due later again before each call, untimed)
#   due    every key's row is due already (a watch event the pass has not claimed yet):
#          nothing to write
# No workers (mlplat.database names no database); the epoch row is made by hand.
#   SIZES="1000 10000" REPS=11 bench/steady_pass/deployments_due.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1000 10000"}
REPS=${REPS:-11}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start deployments_due deployments
side_deployments
Q <<SQL >/dev/null
-- as it was: every key's id, found or not, due or not, sent to the locking write
CREATE FUNCTION public.old_due(p_epoch bigint, p_namespaces text[], p_names text[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, mlplat, pg_temp AS \$\$
  SELECT mlplat._deployments_resync_at(p_epoch,
           ARRAY(SELECT (SELECT y.id FROM mlplat.deployments y WHERE y.project_id = p.id AND y.name = o.name)
                   FROM ROWS FROM (pg_catalog.unnest(p_namespaces), pg_catalog.unnest(p_names)) AS o(ns, name)
                   JOIN mlplat.projects p ON mlplat._project_namespace(p.name) = o.ns),
           pg_catalog.now(), true) \$\$;
SQL
side_times <<SQL
CREATE PROCEDURE public.run() LANGUAGE plpgsql AS \$\$
DECLARE n int; rep int; ids bigint[]; ns text[]; nm text[]; t0 timestamptz; v text; c text;
BEGIN
  FOREACH n IN ARRAY '{$(echo $SIZES | tr ' ' ,)}'::int[] LOOP
    SELECT * INTO ids, ns, nm FROM public.side_keys(n);
    FOREACH c IN ARRAY ARRAY['later', 'due'] LOOP
      FOR rep IN 1..$REPS LOOP
        -- which goes first alternates too: each write leaves the next call dead row versions
        FOREACH v IN ARRAY CASE WHEN rep % 2 = 0 THEN ARRAY['old', 'new'] ELSE ARRAY['new', 'old'] END LOOP
          UPDATE mlplat.deployments
             SET next_resync_at = CASE c WHEN 'later' THEN pg_catalog.now() + interval '1 hour' ELSE pg_catalog.now() END
           WHERE id = ANY (ids) AND (c = 'later' OR rep = 1);
          COMMIT;
          t0 := clock_timestamp();
          IF v = 'old' THEN PERFORM public.old_due(7, ns, nm); ELSE PERFORM mlplat._deployments_due(7, ns, nm); END IF;
          RAISE NOTICE '% %_% %', n, c, v, extract(epoch FROM clock_timestamp() - t0) * 1000;
          COMMIT;
        END LOOP;
      END LOOP;
    END LOOP;
  END LOOP;
END \$\$;
CALL public.run();
SQL
for c in later due; do
	grep " ${c}_" "$WORK/times.txt" | sed "s/ ${c}_/ /" >"$WORK/$c.txt"
	echo "rows due $c:"
	side_table "$WORK/$c.txt" "$REPS" old new \
		"keys a call" "_deployments_due before, ms" "after, ms"
done
