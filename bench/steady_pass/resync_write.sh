#!/usr/bin/env bash
# bench/steady_pass/resync_write.sh — what the deployments pass's two resync writes cost
# through the one statement they share (mlplat._deployments_resync_at, issue 19 "sqldup6b")
# beside the two statements they were before, side by side in one cluster: per size,
# alternating calls (which goes first alternates too), each timed inside the server, median of REPS.
#   resynced  _deployments_resynced(epoch, ids): the rows a pass compared, pushed on
#   due       _deployments_due(epoch, namespaces, names): the rows a watch event names,
#             brought forward (each call's rows are made not due again first, untimed)
# No workers (mlplat.database names no database); the epoch row is made by hand.
#   SIZES="10 100 1000 10000" REPS=21 bench/steady_pass/resync_write.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"10 100 1000 10000"}
REPS=${REPS:-21}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start resync_write deployments
side_deployments
Q <<SQL >/dev/null
-- the two statements as they were
CREATE FUNCTION public.old_resynced(p_epoch bigint, p_ids bigint[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, mlplat, pg_temp AS \$\$
  UPDATE mlplat.deployments d
     SET next_resync_at = mlplat._next_resync_at()
    FROM (SELECT x.id FROM mlplat.deployments x
           WHERE x.id = ANY (p_ids)
             AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'deployments' AND e.epoch = p_epoch)
           ORDER BY x.id
             FOR NO KEY UPDATE SKIP LOCKED) l
   WHERE d.id = l.id \$\$;
CREATE FUNCTION public.old_due(p_epoch bigint, p_namespaces text[], p_names text[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, mlplat, pg_temp AS \$\$
  UPDATE mlplat.deployments d
     SET next_resync_at = pg_catalog.now()
    FROM (SELECT x.id FROM mlplat.deployments x
           WHERE x.id = ANY (ARRAY(
                   SELECT (SELECT y.id FROM mlplat.deployments y WHERE y.project_id = p.id AND y.name = o.name)
                     FROM ROWS FROM (pg_catalog.unnest(p_namespaces), pg_catalog.unnest(p_names)) AS o(ns, name)
                     JOIN mlplat.projects p ON mlplat._project_namespace(p.name) = o.ns))
             AND x.status <> 'DELETED' AND x.next_resync_at > pg_catalog.now()
             AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'deployments' AND e.epoch = p_epoch)
           ORDER BY x.id
             FOR NO KEY UPDATE SKIP LOCKED) l
   WHERE d.id = l.id \$\$;
SQL
# each call in a transaction of its own (as a pass makes them), so the clock is read per call
side_times <<SQL
CREATE PROCEDURE public.run() LANGUAGE plpgsql AS \$\$
DECLARE n int; rep int; ids bigint[]; ns text[]; nm text[]; t0 timestamptz; v text;
BEGIN
  FOREACH n IN ARRAY '{$(echo $SIZES | tr ' ' ,)}'::int[] LOOP
    SELECT * INTO ids, ns, nm FROM public.side_keys(n);
    FOR rep IN 1..$REPS LOOP
      -- which goes first alternates too: each call leaves the next one dead row versions
      FOREACH v IN ARRAY CASE WHEN rep % 2 = 0 THEN ARRAY['old', 'new'] ELSE ARRAY['new', 'old'] END LOOP
        t0 := clock_timestamp();
        IF v = 'old' THEN PERFORM public.old_resynced(7, ids); ELSE PERFORM mlplat._deployments_resynced(7, ids); END IF;
        RAISE NOTICE '% resynced_% %', n, v, extract(epoch FROM clock_timestamp() - t0) * 1000;
        COMMIT;
        UPDATE mlplat.deployments SET next_resync_at = pg_catalog.now() + interval '1 hour' WHERE id = ANY (ids);
        COMMIT;
        t0 := clock_timestamp();
        IF v = 'old' THEN PERFORM public.old_due(7, ns, nm); ELSE PERFORM mlplat._deployments_due(7, ns, nm); END IF;
        RAISE NOTICE '% due_% %', n, v, extract(epoch FROM clock_timestamp() - t0) * 1000;
        COMMIT;
      END LOOP;
    END LOOP;
  END LOOP;
END \$\$;
CALL public.run();
SQL
for w in resynced due; do
	grep " ${w}_" "$WORK/times.txt" | sed "s/ ${w}_/ /" >"$WORK/$w.txt"
	side_table "$WORK/$w.txt" "$REPS" old new \
		"rows a call" "_deployments_$w before, ms" "through _deployments_resync_at, ms"
done
