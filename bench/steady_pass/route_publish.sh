#!/usr/bin/env bash
# bench/steady_pass/route_publish.sh — what a write-back that makes N deployments READY costs,
# its COMMIT (where the routes are published) included (issue 20, route9): the set-based
# publish (mlplat._routes_publish taking the rows src/routes_queue.c queued) beside the per-row
# one it replaced (a copy below, on a trigger of its own), side by side in one cluster: per
# size, the two alternate (which goes first alternates too), each the write-back statement
# and its COMMIT timed inside the server (and the COMMIT alone), median of REPS.  Before each timed write-back the
# rows are made FAILED (untimed; that commit removes their routes), so every timed one
# publishes N new routes.  No workers; the epoch row is made by hand.
#   SIZES="1 100 1000" REPS=11 bench/steady_pass/route_publish.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"1 100 1000"}
REPS=${REPS:-11}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start route_publish deployments
Q <<SQL >/dev/null
SELECT mlplat.create_project('rp', 0);
SELECT mlplat.add_artifact_location('rp', 's3://models/');
SELECT mlplat.register_model_version('rp', 'm', '1', 's3://models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT mlplat.set_model_stage('rp', 'm', '1', 'CHAMPION');
SELECT count(mlplat.deploy('rp', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $max) i;
ANALYZE mlplat.deployments, mlplat.deployment_revisions;
-- the per-row publish as it was before route9
CREATE FUNCTION public.routes_publish_per_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS \$\$
DECLARE
  cur record;
  was record;
  n bigint;
  mine boolean;
BEGIN
  PERFORM 1 FROM mlplat.route_head h FOR UPDATE;
  SELECT d.name AS deployment, dr.intent->>'model' AS model, d.endpoint, d.ready_revision AS revision,
         dr.intent->>'version' AS version
    INTO cur FROM mlplat.deployments d
    JOIN mlplat.deployment_revisions dr ON dr.deployment_id = d.id AND dr.revision = d.ready_revision
   WHERE d.id = NEW.id AND mlplat.deployment_is_serving(d.status) AND d.endpoint IS NOT NULL;
  SELECT e.model, e.endpoint, e.revision, e.version INTO was FROM mlplat.route_entries e
   WHERE e.project_id = NEW.project_id AND e.deployment = NEW.name AND e.to_gen IS NULL;
  IF (cur.model, cur.endpoint, cur.revision, cur.version)
     IS NOT DISTINCT FROM (was.model, was.endpoint, was.revision, was.version) THEN
    RETURN NULL;
  END IF;
  SELECT g.generation,
         g.created_xid = pg_catalog.pg_current_xact_id() AND g.created_statement_at = pg_catalog.statement_timestamp()
    INTO n, mine FROM mlplat.route_generations g
   WHERE g.project_id = NEW.project_id ORDER BY g.generation DESC LIMIT 1;
  IF NOT coalesce(mine, false) THEN
    n := coalesce((SELECT pg_catalog.max(g.generation) FROM mlplat.route_generations g), 0) + 1;
    INSERT INTO mlplat.route_generations (generation, project_id) VALUES (n, NEW.project_id);
    UPDATE mlplat.route_head SET generation = n;
    PERFORM pg_catalog.pg_notify('mlplat_routes', n::text);
  END IF;
  UPDATE mlplat.route_entries e SET to_gen = n
   WHERE e.project_id = NEW.project_id AND e.deployment = NEW.name AND e.to_gen IS NULL;
  IF cur.model IS NOT NULL THEN
    INSERT INTO mlplat.route_entries (project_id, deployment, model, endpoint, revision, version, from_gen)
    VALUES (NEW.project_id, cur.deployment, cur.model, cur.endpoint, cur.revision, cur.version, n);
  END IF;
  RETURN NULL;
END \$\$;
-- on the publish trigger's WHEN, read from the catalog (so the copy cannot drift from it)
DO \$\$ BEGIN
  EXECUTE replace(replace(pg_get_triggerdef((SELECT oid FROM pg_trigger WHERE tgname = 'deployments_publish_routes')),
                          'deployments_publish_routes', 'deployments_publish_routes_per_row'),
                  'mlplat._routes_publish()', 'public.routes_publish_per_row()');
END \$\$;
ALTER TABLE mlplat.deployments DISABLE TRIGGER deployments_publish_routes_per_row;
CREATE FUNCTION public.rows_of(n int, p_status text) RETURNS mlplat.deployment_writeback[] LANGUAGE sql AS \$\$
  SELECT array_agg(ROW(d.id, d.row_version, p_status, 'bench', d.generation, d.desired_revision,
                       'http://' || d.name || '.rp', NULL, NULL, NULL)::mlplat.deployment_writeback ORDER BY d.id)
    FROM (SELECT * FROM mlplat.deployments ORDER BY id LIMIT n) d \$\$;
-- which publish runs: the per-row trigger, or the queue and the set-based one
CREATE PROCEDURE public.use(per_row boolean) LANGUAGE plpgsql AS \$\$ BEGIN
  IF per_row THEN
    ALTER TABLE mlplat.deployments DISABLE TRIGGER deployments_publish_queue, DISABLE TRIGGER deployments_publish_routes,
                                   ENABLE TRIGGER deployments_publish_routes_per_row;
  ELSE
    ALTER TABLE mlplat.deployments ENABLE TRIGGER deployments_publish_queue, ENABLE TRIGGER deployments_publish_routes,
                                   DISABLE TRIGGER deployments_publish_routes_per_row;
  END IF;
END \$\$;
SQL
side_times <<SQL
DO \$\$
DECLARE n int; rep int; per_row boolean; r mlplat.deployment_writeback[]; t0 timestamptz; t1 timestamptz; k bigint; g0 bigint; g1 bigint;
BEGIN
  FOREACH n IN ARRAY '{$(echo $SIZES | tr ' ' ,)}'::int[] LOOP
    FOR rep IN 1..$REPS LOOP
      FOREACH per_row IN ARRAY CASE WHEN rep % 2 = 1 THEN '{t,f}'::boolean[] ELSE '{f,t}'::boolean[] END LOOP
        CALL public.use(per_row);
        PERFORM count(*) FROM mlplat._deployments_writeback_set(7, public.rows_of(n, 'FAILED'));
        COMMIT;
        g0 := (SELECT count(*) FROM mlplat.route_entries WHERE to_gen IS NULL);
        r := public.rows_of(n, 'READY');
        t0 := clock_timestamp();
        SELECT count(*) INTO k FROM mlplat._deployments_writeback_set(7, r);
        t1 := clock_timestamp();
        COMMIT;
        RAISE NOTICE '% % %', n, CASE WHEN per_row THEN 'per_row' ELSE 'set' END, extract(epoch FROM clock_timestamp() - t0) * 1000;
        RAISE NOTICE '% % %', n, CASE WHEN per_row THEN 'per_row_commit' ELSE 'set_commit' END, extract(epoch FROM clock_timestamp() - t1) * 1000;
        g1 := (SELECT count(*) FROM mlplat.route_entries WHERE to_gen IS NULL);
        IF k <> n OR g1 - g0 <> n THEN
          RAISE EXCEPTION 'the write-back of % rows published % routes', k, g1 - g0;
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;
END \$\$;
SQL
echo "The write-back statement and its COMMIT:"
side_table "$WORK/times.txt" "$REPS" per_row set \
	"rows made READY" "per-row publish, ms" "set-based publish, ms"
echo "The COMMIT alone (where the publish runs):"
python3 "$SRC/bench/steady_pass/side_by_side.py" "$WORK/times.txt" "$REPS" per_row_commit set_commit \
	"rows made READY" "per-row publish, ms" "set-based publish, ms"
