-- 0.2.0 -> 0.3.0, part 99 (due9): _deployments_due sends the write only the rows it would
-- change (issue 20).  The final definition (part 89 had the one that sent every key's id).

-- Rows whose InferenceService the leader's watch saw change (an event for namespace/name):
-- due now, so the next pass claims and compares them (issue 20); a row locked by an intent
-- in flight is skipped (that intent makes it changed anyway).  The keys are
-- read with one unnest of each array, not by subscript: p_names[i] of a text array walks the
-- array from its start, so a pass after a converge of 10,000 (as many keys) spent 1.5 s here.
-- The ids first, each key's by (project_id, name) in a subquery of its own, which only the
-- unique index fits: joined to the keys, a deployments table autovacuum had not analyzed yet
-- (a converge's rows are minutes old) was scanned by project_id alone with the name as a join
-- filter, every row of the project for each key (1,939 keys after 1,000 applies: 410-580 ms,
-- the keys times the project's rows).  Only the rows the write would change are sent to it: a
-- row already due (an event the pass has not claimed yet), DELETED or unknown is left out as
-- its key is looked up (the row is read there anyway), and _deployments_resync_at checks the
-- rest again as it locks them (10,000 keys whose rows were all due already: 0.72 of the time,
-- the write's own lookup of 10,000 ids gone; rows due later: the same; docs/benchmarks.md "due9").
CREATE FUNCTION mlplat._deployments_due(p_epoch bigint, p_namespaces text[], p_names text[])
RETURNS void
LANGUAGE sql
AS $$
  SELECT mlplat._deployments_resync_at(p_epoch,
           pg_catalog.array_remove(ARRAY(
             SELECT (SELECT CASE WHEN y.status <> 'DELETED' AND y.next_resync_at > pg_catalog.now() THEN y.id END
                       FROM mlplat.deployments y WHERE y.project_id = p.id AND y.name = o.name)
               FROM ROWS FROM (pg_catalog.unnest(p_namespaces), pg_catalog.unnest(p_names)) AS o(ns, name)
               JOIN mlplat.projects p ON mlplat._project_namespace(p.name) = o.ns), NULL),
           pg_catalog.now(), true)
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_due(bigint, text[], text[]) FROM PUBLIC;
