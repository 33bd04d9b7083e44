-- 0.2.0 -> 0.3.0, part 99: route generations record what changed (issue 20).  A generation
-- held the project's whole route set, recomputed and written by every publish: a cost that
-- grew with what the project serves.  Each deployment's route is now an entry valid over a
-- range of generations; 0.2.0's sets become those ranges (a deployment's route runs from the
-- generation that first showed it to the next one of its project that did not, or showed it
-- changed), so route_table(as_of) answers for the old generations as it did.  After part 50
-- (_purgeable and _run_retention already know route_entries).

-- One deployment's route over a range of its project's generations: from_gen (inclusive) to
-- to_gen (exclusive; NULL: still current).  An entry is never changed except to be closed
-- (_route_entry_closed); retention deletes one no kept generation shows.
CREATE TABLE mlplat.route_entries (
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  deployment  text NOT NULL,
  model       text NOT NULL,
  endpoint    text NOT NULL,
  revision    int NOT NULL,
  version     text,
  from_gen    bigint NOT NULL,
  to_gen      bigint CHECK (to_gen > from_gen)
);
CREATE UNIQUE INDEX route_entries_open ON mlplat.route_entries (project_id, deployment) WHERE to_gen IS NULL;
CREATE INDEX route_entries_range ON mlplat.route_entries (project_id, from_gen);

-- The one change an entry may see: closed once, by the generation that replaced it.
CREATE FUNCTION mlplat._route_entry_closed() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  IF OLD.to_gen IS NULL AND NEW.to_gen IS NOT NULL
     AND (NEW.project_id, NEW.deployment, NEW.model, NEW.endpoint, NEW.revision, NEW.version, NEW.from_gen)
         IS NOT DISTINCT FROM (OLD.project_id, OLD.deployment, OLD.model, OLD.endpoint, OLD.revision, OLD.version, OLD.from_gen) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = 'UPDATE on route_entries is not allowed: rows are immutable',
    DETAIL = 'A route entry is only closed (to_gen set once) by the generation that replaces it.',
    HINT = 'Routes change through the deployments they describe.';
END $$;
REVOKE ALL ON FUNCTION mlplat._route_entry_closed() FROM PUBLIC;
CREATE TRIGGER route_entries_closed_only BEFORE UPDATE ON mlplat.route_entries
  FOR EACH ROW EXECUTE FUNCTION mlplat._route_entry_closed();
CREATE TRIGGER route_entries_immutable BEFORE DELETE ON mlplat.route_entries
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER route_entries_no_truncate BEFORE TRUNCATE ON mlplat.route_entries
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

INSERT INTO mlplat.route_entries (project_id, deployment, model, endpoint, revision, version, from_gen, to_gen)
WITH shown AS (   -- every (generation, deployment) a 0.2.0 set showed
  SELECT g.project_id, g.generation, m.key AS model, r->>'deployment' AS deployment, r->>'endpoint' AS endpoint,
         (r->>'revision')::int AS revision, r->>'version' AS version
    FROM mlplat.route_generations g
    CROSS JOIN LATERAL pg_catalog.jsonb_each(g.routes) m
    CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(m.value) r),
gens AS (
  SELECT g.project_id, g.generation,
         pg_catalog.lag(g.generation) OVER w AS prev_gen, pg_catalog.lead(g.generation) OVER w AS next_gen
    FROM mlplat.route_generations g WINDOW w AS (PARTITION BY g.project_id ORDER BY g.generation)),
marked AS (   -- starts: the project's previous generation did not show this route
  SELECT s.*, x.next_gen,
         NOT EXISTS (SELECT 1 FROM shown o
                      WHERE o.project_id = s.project_id AND o.generation = x.prev_gen AND o.deployment = s.deployment
                        AND (o.model, o.endpoint, o.revision, o.version)
                            IS NOT DISTINCT FROM (s.model, s.endpoint, s.revision, s.version)) AS starts
    FROM shown s JOIN gens x ON x.project_id = s.project_id AND x.generation = s.generation),
runs AS (
  SELECT m.*, pg_catalog.sum(m.starts::int) OVER (PARTITION BY m.project_id, m.deployment ORDER BY m.generation) AS run
    FROM marked m)
SELECT r.project_id, r.deployment, r.model, r.endpoint, r.revision, r.version, pg_catalog.min(r.generation),
       (pg_catalog.array_agg(r.next_gen ORDER BY r.generation DESC))[1]
  FROM runs r
 WHERE r.endpoint IS NOT NULL AND r.model IS NOT NULL AND r.revision IS NOT NULL
 GROUP BY r.project_id, r.deployment, r.run, r.model, r.endpoint, r.revision, r.version;

DROP VIEW mlplat.routes;
DROP FUNCTION mlplat._routes_of(bigint);
ALTER TABLE mlplat.route_generations DROP COLUMN routes;

-- The route table as of a generation (default: the latest): per project, the newest
-- generation at or before it, and the entries valid at that generation.  Not SECURITY
-- DEFINER: row-level security shows a caller the projects they may view (a gateway's role is
-- a platform administrator or a viewer).
CREATE OR REPLACE FUNCTION mlplat.route_table(as_of bigint DEFAULT NULL)
RETURNS TABLE (generation bigint, project text, model text, deployment text, endpoint text,
               revision int, version text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  -- the latest: the open entries (their index), not every entry the history kept
  SELECT g.generation, p.name, e.model, e.deployment, e.endpoint, e.revision, e.version
  FROM (SELECT DISTINCT ON (x.project_id) x.project_id, x.generation
        FROM mlplat.route_generations x ORDER BY x.project_id, x.generation DESC) g
  JOIN mlplat.projects p ON p.id = g.project_id
  JOIN mlplat.route_entries e ON e.project_id = g.project_id AND e.to_gen IS NULL
  WHERE route_table.as_of IS NULL
  UNION ALL
  SELECT g.generation, p.name, e.model, e.deployment, e.endpoint, e.revision, e.version
  FROM (SELECT DISTINCT ON (x.project_id) x.project_id, x.generation
        FROM mlplat.route_generations x WHERE x.generation <= route_table.as_of
        ORDER BY x.project_id, x.generation DESC) g
  JOIN mlplat.projects p ON p.id = g.project_id
  JOIN mlplat.route_entries e ON e.project_id = g.project_id AND e.from_gen <= g.generation
                              AND (e.to_gen IS NULL OR e.to_gen > g.generation)
  WHERE route_table.as_of IS NOT NULL
  ORDER BY 2, 3, 4
$$;

-- For people: the current routes, one row per serving deployment (the open entries).
CREATE VIEW mlplat.routes WITH (security_invoker = true) AS
SELECT p.name AS project, g.generation, e.model, e.deployment, e.endpoint, e.revision, e.version,
       g.created_at AS published_at
FROM (SELECT DISTINCT ON (x.project_id) x.project_id, x.generation, x.created_at
      FROM mlplat.route_generations x ORDER BY x.project_id, x.generation DESC) g
JOIN mlplat.projects p ON p.id = g.project_id
JOIN mlplat.route_entries e ON e.project_id = g.project_id AND e.to_gen IS NULL;

SELECT mlplat._member_reads('route_entries');
GRANT SELECT ON mlplat.route_generations, mlplat.route_entries, mlplat.routes TO PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('mlplat.route_entries', '');
