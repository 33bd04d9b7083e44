-- 0.2.0 -> 0.3.0, part 99 (claim9): the deployments claim reads a chunk of the changed and of
-- the due rows off indexes in its own order, (next_resync_at, id), and stops at the chunk's
-- end, instead of reading and sorting every changed and every due row for each chunk; and
-- it is one plpgsql function that reads the rows with the ids (_deployments_claim_of, which
-- part 20_seam made for that, is gone).  The indexes deployments_resync_due and
-- deployments_changed (part 20_seam before, on next_resync_at and on id) and the final
-- definition of _deployments_claim (part 20_seam) are here; the column next_resync_at is
-- part 20_seam's.

-- Both in the claim's order (next_resync_at, id), so a chunk of them is read off the index and
-- the scan stops at the chunk's end: ordered by id or by next_resync_at alone, a claim during a
-- converge of 10,000 read and sorted all 10,000 changed rows (and as many due ones) for each
-- chunk of 1,000 (claim9).  Adding the columns costs no write of its own: every update that
-- moves next_resync_at is already a non-HOT one (deployments_resync_due indexes it).
CREATE INDEX deployments_resync_due ON mlplat.deployments (next_resync_at, id) WHERE status <> 'DELETED';
CREATE INDEX deployments_changed ON mlplat.deployments (next_resync_at, id)
  WHERE mlplat.deployment_is_changing(status) OR generation <> observed_generation;

-- p_resync: a full pass (a new leader's first, and every mlplat.full_resync_interval):
-- every live row, each due.  Otherwise only the changed rows and those whose resync is due.
-- p_only_new: a pass woken by a commit takes just the intents not yet applied.
-- p_deadline_ms: mlplat.deploy_deadline of the calling worker (0: none); a deployment's own
-- deploy_deadline overrides it.
-- p_limit (mlplat.pass_row_limit; NULL: no limit) bounds the rows one pass acts on, so a
-- leader's memory follows the chunk, not the fleet (issue 20: 30,000 new deployments held
-- 60 kB each in one pass).  A full pass walks the live rows in id order after p_after (the
-- last id of the previous chunk of the same sweep); any other pass takes the most overdue
-- first (next_resync_at, which every pass that compares a row moves on), so a row left out
-- of a full chunk is first in the next one and none starves behind rows that stay changed.
CREATE FUNCTION mlplat._deployments_claim(p_resync boolean, p_only_new boolean DEFAULT false,
                                          p_deadline_ms int DEFAULT 0, p_after bigint DEFAULT 0,
                                          p_limit int DEFAULT NULL)
RETURNS SETOF mlplat.deployment_claim
LANGUAGE plpgsql STABLE
-- A plain index scan of the due rows, never a bitmap one: every resync leaves the row's old
-- entry below now() in deployments_resync_due until a vacuum, and a bitmap scan visits the
-- heap for each such entry on every pass (after a full resync: the fleet's worth, 700 heap
-- pages for 6 live rows at 11,000); an index scan marks them dead once and skips them after.
-- Never a sequential scan either: the planner prices generation <> observed_generation (two
-- columns) at its default 0.995 of the rows, so it read the whole table for the changed rows
-- (at 10,000 live rows 23-31 ms a claim for none, 0.05-0.8 ms through deployments_changed).
-- The changed rows are selected inside an OFFSET 0 fence with only that index's predicate,
-- so no other index (by the ORDER BY) fits them: the pass costs what changed, not the fleet.
-- Each set is read in (next_resync_at, id) order off its index and stops at p_limit rows, so
-- a chunk costs its own rows however many are changed or due (claim9: 10,000 of each, read,
-- merged and sorted for every chunk of 1,000 before).
-- plpgsql for RETURN QUERY: the rows go into the result set at once, where an SQL function
-- (two, the ids and the rows, before claim9) hands them up one at a time through a run of
-- its executor per row (a chunk's claim at 10,000 took 0.70-0.91x the time; docs/benchmarks.md,
-- claim9).
-- The rows are read by the primary key for the ids given, in one statement with them: the
-- ids are an array (InitPlan), priced as a few rows, so the join is planned for a chunk
-- (nested loops on the keys), never for every row (hash joins over whole tables).
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
BEGIN
  -- the ids first, each set by its own index (an ARRAY subquery is run only when its CASE
  -- branch is taken): a pass between full passes reads what changed or is due, not the table.
  -- The due rows (next_resync_at <= now()) and the changed ones not due (> now()) are
  -- disjoint, so each is a LIMIT of its own in claim order and the chunk the first p_limit of
  -- the two: what a UNION of every changed and every due row, sorted, gave.
  RETURN QUERY
    SELECT d.id, p.name, mlplat._project_namespace(p.name), d.name, d.status,
           d.generation, d.observed_generation, d.row_version,
           d.desired_revision, r.spec::text, r.spec_digest, d.traceparent, d.attempts,
           d.next_attempt_at <= pg_catalog.now()
             AND (p_resync OR d.next_resync_at <= pg_catalog.now() OR d.generation <> d.observed_generation
                  OR mlplat.deployment_is_changing(d.status))
             -- an active rollout owns the InferenceService (see src/reconcile/rollouts.c)
             AND NOT EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id
                              AND mlplat.rollout_is_active(ro.status)),
           d.drift_policy, d.status_reason,
           dl.ms > 0 AND d.ready_wait_since IS NOT NULL
             AND d.ready_wait_since + pg_catalog.make_interval(secs => dl.ms / 1000.0) < pg_catalog.now(),
           dl.ms, d.deploy_deadline IS NOT NULL,
           coalesce(d.observed ? 'kserve_at_apply', false),
           (d.observed->'kserve_at_apply'->>'revision')::int,
           (d.observed->'kserve_at_apply'->>'observedGeneration')::bigint,
           d.observed->'kserve_at_apply'->>'latestCreatedRevision'
      FROM mlplat.deployments d
      CROSS JOIN LATERAL (SELECT coalesce((pg_catalog.date_part('epoch', d.deploy_deadline) * 1000)::bigint,
                                          p_deadline_ms) AS ms) dl
      JOIN mlplat.projects p ON p.id = d.project_id
      LEFT JOIN mlplat.deployment_revisions r
             ON r.deployment_id = d.id AND r.revision = d.desired_revision
     WHERE d.id = ANY (
        CASE WHEN p_resync
             THEN ARRAY(SELECT x.id FROM mlplat.deployments x WHERE x.status <> 'DELETED' AND x.id > p_after
                         ORDER BY x.id LIMIT p_limit)
             WHEN p_only_new
             THEN ARRAY(SELECT x.id FROM (SELECT y.id, y.status, y.next_attempt_at, y.next_resync_at
                                            FROM mlplat.deployments y
                                           WHERE y.generation <> y.observed_generation
                                           ORDER BY y.next_resync_at, y.id OFFSET 0) x
                         WHERE x.status <> 'DELETED' AND x.next_attempt_at <= pg_catalog.now()
                         ORDER BY x.next_resync_at, x.id LIMIT p_limit)
             ELSE ARRAY(SELECT u.id FROM (
                    (SELECT x.id, x.next_resync_at FROM mlplat.deployments x
                      WHERE x.status <> 'DELETED' AND x.next_resync_at <= pg_catalog.now()
                      ORDER BY x.next_resync_at, x.id LIMIT p_limit)
                    UNION ALL
                    (SELECT x.id, x.next_resync_at FROM (SELECT y.id, y.status, y.next_resync_at
                                                           FROM mlplat.deployments y
                                                          WHERE (mlplat.deployment_is_changing(y.status)
                                                                 OR y.generation <> y.observed_generation)
                                                            AND y.next_resync_at > pg_catalog.now()
                                                          ORDER BY y.next_resync_at, y.id OFFSET 0) x
                      WHERE x.status <> 'DELETED' ORDER BY x.next_resync_at, x.id LIMIT p_limit)) u
                   ORDER BY u.next_resync_at, u.id LIMIT p_limit) END)
       AND d.status <> 'DELETED'
       AND (NOT p_only_new OR (d.generation <> d.observed_generation AND d.next_attempt_at <= pg_catalog.now()))
     ORDER BY d.id;
END
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_claim(boolean, boolean, int, bigint, int) FROM PUBLIC;
