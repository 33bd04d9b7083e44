-- 0.2.0 -> 0.3.0, part 99 (route9): the route publish costs per commit, not per row (issue
-- 20).  The final definition of _routes_publish (part 99_route_entries had the per-row one),
-- the queue it takes its rows from, and the two triggers (the publish trigger as part
-- 99_sqlonce_routes made it, which said "serving" through the one rule, deployment_is_serving;
-- the queue's made from it).  Sorted before 99_route_entries, which makes the table the
-- function writes: plpgsql checks no table at CREATE.

-- Which deployments a transaction's publish still has to compare (src/routes_queue.c): the
-- immediate trigger deployments_publish_queue queues each row the deferred publish trigger
-- will fire for; the publish trigger's first firing takes them all and has
-- _routes_publish_set publish them, the later ones find their row taken and return.  Backend
-- memory that no caller can read or write.
CREATE FUNCTION mlplat._route_queue_add() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'mlplat_route_queue_add';
REVOKE ALL ON FUNCTION mlplat._route_queue_add() FROM PUBLIC;
CREATE OR REPLACE FUNCTION mlplat._routes_publish() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'mlplat_routes_publish';
REVOKE ALL ON FUNCTION mlplat._routes_publish() FROM PUBLIC;

-- Publishes the deployments p_ids at commit (called by _routes_publish, deferred: once the
-- transaction's changes are all made): compares them all with their open entries in one
-- statement and writes what changed in one statement each, so what a commit costs is a few
-- statements, whatever the number of deployments it changed.  SECURITY DEFINER because
-- deferred triggers run as the session's user, outside the API function that made the change.
CREATE FUNCTION mlplat._routes_publish_set(p_ids bigint[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  -- the changed routes, a column each (model NULL: the route is removed; tid: the open entry
  -- it closes, if any)
  c_project bigint[];
  c_name text[];
  c_model text[];
  c_endpoint text[];
  c_revision int[];
  c_version text[];
  c_tid tid[];
  p bigint;
  n bigint;
  mine boolean;
BEGIN
  -- The lock first: held until commit, so no other publisher's generation comes between
  -- this compare and this generation's number (READ COMMITTED: every statement below
  -- sees what the publishers before committed).
  PERFORM 1 FROM mlplat.route_head h FOR UPDATE;
  -- each deployment now (not as its trigger saw it: a later statement may have changed it)
  -- against its open entry.  The entry by its unique index, a lookup per deployment (OFFSET 0
  -- keeps the subquery per row): joined, a route_entries table autovacuum had not analyzed
  -- yet was hashed whole or scanned by project_id alone, every entry of the project a row.
  SELECT pg_catalog.array_agg(d.project_id ORDER BY d.id), pg_catalog.array_agg(d.name ORDER BY d.id),
         pg_catalog.array_agg(c.model ORDER BY d.id), pg_catalog.array_agg(c.endpoint ORDER BY d.id),
         pg_catalog.array_agg(c.revision ORDER BY d.id), pg_catalog.array_agg(c.version ORDER BY d.id),
         pg_catalog.array_agg(e.tid ORDER BY d.id)
    INTO c_project, c_name, c_model, c_endpoint, c_revision, c_version, c_tid
    FROM mlplat.deployments d
    LEFT JOIN LATERAL (SELECT dr.intent->>'model' AS model, d.endpoint, d.ready_revision AS revision, dr.intent->>'version' AS version
                         FROM mlplat.deployment_revisions dr
                        WHERE dr.deployment_id = d.id AND dr.revision = d.ready_revision
                          AND mlplat.deployment_is_serving(d.status) AND d.endpoint IS NOT NULL) c ON true
    LEFT JOIN LATERAL (SELECT x.model, x.endpoint, x.revision, x.version, x.ctid AS tid FROM mlplat.route_entries x
                        WHERE x.project_id = d.project_id AND x.deployment = d.name AND x.to_gen IS NULL OFFSET 0) e ON true
   WHERE d.id = ANY (p_ids)
     AND (c.model, c.endpoint, c.revision, c.version) IS DISTINCT FROM (e.model, e.endpoint, e.revision, e.version);
  -- One generation per project and commit: deferred, every firing runs in the COMMIT, so
  -- the first change makes it and any later one joins it.  Under SET CONSTRAINTS IMMEDIATE
  -- the firings follow each statement, so a later statement publishes again.
  -- (Ours, if any, is the project's newest: we hold the lock.)
  FOR p IN SELECT DISTINCT x FROM pg_catalog.unnest(c_project) x ORDER BY 1 LOOP
    SELECT g.generation,
           g.created_xid = pg_catalog.pg_current_xact_id() AND g.created_statement_at = pg_catalog.statement_timestamp()
      INTO n, mine FROM mlplat.route_generations g
     WHERE g.project_id = p ORDER BY g.generation DESC LIMIT 1;
    IF NOT coalesce(mine, false) THEN
      n := coalesce((SELECT pg_catalog.max(g.generation) FROM mlplat.route_generations g), 0) + 1;
      INSERT INTO mlplat.route_generations (generation, project_id) VALUES (n, p);
      UPDATE mlplat.route_head SET generation = n;
      PERFORM pg_catalog.pg_notify('mlplat_routes', n::text);
    END IF;
    -- closed before the new ones are opened (one open entry a deployment), by the tids just
    -- read (no one else writes open entries while we hold the lock; _route_entry_closed
    -- refuses to close one twice): a TID lookup each (or one hash join, for many tids in a
    -- small table).  By the keys, the planner walked the project's open entries for each.
    UPDATE mlplat.route_entries e SET to_gen = n
      FROM ROWS FROM (pg_catalog.unnest(c_project), pg_catalog.unnest(c_tid)) AS x(project_id, tid)
     WHERE e.ctid = x.tid AND x.project_id = p;
    INSERT INTO mlplat.route_entries (project_id, deployment, model, endpoint, revision, version, from_gen)
    SELECT p, x.deployment, x.model, x.endpoint, x.revision, x.version, n
      FROM ROWS FROM (pg_catalog.unnest(c_project), pg_catalog.unnest(c_name), pg_catalog.unnest(c_model),
                      pg_catalog.unnest(c_endpoint), pg_catalog.unnest(c_revision), pg_catalog.unnest(c_version))
           AS x(project_id, deployment, model, endpoint, revision, version)
     WHERE x.project_id = p AND x.model IS NOT NULL;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._routes_publish_set(bigint[]) FROM PUBLIC;

DROP TRIGGER deployments_publish_routes ON mlplat.deployments;
-- Fires only for changes that can change a route: becoming or ceasing to be routable (the
-- predicate of _routes_publish), or a routable deployment's endpoint or serving revision
-- changing.  A deploy() of a READY deployment (READY -> DEPLOYING, same ready_revision)
-- fires nothing.
CREATE CONSTRAINT TRIGGER deployments_publish_routes AFTER UPDATE ON mlplat.deployments
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (coalesce(mlplat.deployment_is_serving(OLD.status) AND OLD.endpoint IS NOT NULL
                 AND OLD.ready_revision IS NOT NULL, false)
          IS DISTINCT FROM
        coalesce(mlplat.deployment_is_serving(NEW.status) AND NEW.endpoint IS NOT NULL
                 AND NEW.ready_revision IS NOT NULL, false)
        OR (mlplat.deployment_is_serving(NEW.status)
            AND (OLD.endpoint, OLD.ready_revision) IS DISTINCT FROM (NEW.endpoint, NEW.ready_revision)))
  EXECUTE FUNCTION mlplat._routes_publish();

-- The queue's trigger: the publish trigger made immediate, on the queue's function.  Made from
-- the publish trigger's definition, so the two WHENs cannot differ: a row whose change the
-- queue missed would be skipped by a firing that took it earlier.  Its name sorts first: the
-- AFTER triggers of a row fire in name order, so under SET CONSTRAINTS IMMEDIATE a row is
-- queued before its publish trigger fires.
DO $$
DECLARE
  def text := pg_catalog.pg_get_triggerdef((SELECT t.oid FROM pg_catalog.pg_trigger t
                                             WHERE t.tgrelid = 'mlplat.deployments'::pg_catalog.regclass
                                               AND t.tgname = 'deployments_publish_routes'));
  queue text := pg_catalog.regexp_replace(pg_catalog.regexp_replace(pg_catalog.replace(def,
                  'CREATE CONSTRAINT TRIGGER deployments_publish_routes ', 'CREATE TRIGGER deployments_publish_queue '),
                  ' DEFERRABLE INITIALLY DEFERRED ', ' '), '(mlplat\.)?_routes_publish\(\)$', 'mlplat._route_queue_add()');
BEGIN
  IF queue !~ '^CREATE TRIGGER deployments_publish_queue AFTER UPDATE .* FOR EACH ROW WHEN .* EXECUTE FUNCTION mlplat\._route_queue_add\(\)$' THEN
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'cannot make the route queue''s trigger from: ' || def;
  END IF;
  EXECUTE queue;
END $$;
