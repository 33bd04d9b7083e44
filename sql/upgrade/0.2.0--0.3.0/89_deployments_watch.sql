-- 0.2.0 -> 0.3.0, part 89: the deployments watch cache (issue 20).  _next_resync_at, which
-- reads the row resync period the leader sets while its watch is healthy, is in part 20;
-- _deployments_due in part 99_due9.

-- Of the objects p_namespaces[i]/p_names[i] (ours by label, seen in the cluster), the positions
-- i that no live deployment owns: the orphans, as the database says, not as the rows one pass
-- claimed say.  A pass acts on a chunk of the rows (mlplat.pass_row_limit), so "not among my
-- rows" is not "no row": an object is judged an orphan only by this.  A pass asks it about
-- every cached object outside its chunk, thousands while a fleet converges: the keys are read
-- by one unnest of each array, not by subscript (quadratic, as _deployments_due's were).
-- Each key's project is found first (a namespace is one project's: prefix and name), then
-- its row by (project_id, name): with the projects and deployments joined inside the NOT
-- EXISTS, a projects table autovacuum never analyzed (a few rows) was priced as hundreds, and
-- the plan hashed every live deployment for each call (28 ms for 3 keys at 11,000 rows).
CREATE FUNCTION mlplat._deployments_unowned(p_namespaces text[], p_names text[])
RETURNS SETOF int
LANGUAGE sql STABLE
AS $$
  SELECT o.i::int
    FROM ROWS FROM (pg_catalog.unnest(p_namespaces), pg_catalog.unnest(p_names)) WITH ORDINALITY AS o(ns, name, i)
    LEFT JOIN mlplat.projects p ON mlplat._project_namespace(p.name) = o.ns
   WHERE NOT EXISTS (SELECT 1 FROM mlplat.deployments x
                      WHERE x.project_id = p.id AND x.name = o.name AND x.status <> 'DELETED')
   ORDER BY o.i
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_unowned(text[], text[]) FROM PUBLIC;
