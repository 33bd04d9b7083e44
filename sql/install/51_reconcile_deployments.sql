-- 51_reconcile_deployments: the deployments reconciler's two short transactions.
--
-- Claim reads desired state and commits before any HTTP; write-back runs after
-- the HTTP in a new transaction and applies only if the row is still at the
-- version the claim read (an intent committed meanwhile wins; the entity is
-- simply read again next pass) and the caller still holds the kind's epoch.

-- The seam between this SQL and the C pass (src/reconcile/seam.c): the claim returns rows of
-- mlplat.deployment_claim and the write-back takes an array of mlplat.deployment_writeback.
-- C reads and builds them by attribute name and checks them against its own table when a
-- worker starts (a mismatch stops the pass with a message naming the attribute).  The C
-- struct members and that table are generated from these types (scripts/seam_types.awk;
-- /* NULL<0 */: a number below 0 in C is NULL here), so a field is one attribute here.
--
-- deadline_ms is the deploy deadline that applies (deadline_own: the deployment's own),
-- deadline_passed says the revision asked for at ready_wait_since has had longer than that to
-- become READY.  seen_*: what KServe showed at the revision's first apply (seen_known: it was
-- recorded; observed.kserve_at_apply, see isvc_status_current in deployments.c).
CREATE TYPE mlplat.deployment_claim AS (
  id bigint, project text, namespace text, name text, status text /* STATUS deployment */,
  generation bigint, observed_generation bigint, row_version bigint,
  desired_revision int, spec text, spec_digest text, traceparent text,
  attempts int, due boolean, drift_policy text, status_reason text,
  deadline_passed boolean, deadline_ms bigint, deadline_own boolean,
  seen_known boolean, seen_rev int, seen_og bigint /* NULL<0 */, seen_lcr text);

-- One deployment's write-back.  retry_ms: NULL = no retry scheduled (success: attempts reset);
-- otherwise attempts + 1 and next_attempt_at = now() + retry_ms.  NULL in observed_generation /
-- observed_revision / endpoint keeps the stored value; top-level keys of observed replace those
-- of the stored observed.
CREATE TYPE mlplat.deployment_writeback AS (
  id bigint, row_version bigint, status text /* STATUS deployment */, reason text,
  observed_generation bigint /* NULL<0 */, observed_revision int /* NULL<0 */, endpoint text,
  observed jsonb, error text, retry_ms int /* NULL<0 */);

-- Per-row resync (issue 20): a steady pass reads only the rows whose desired or observed state
-- changed or whose resync is due, not every live row.  next_resync_at is when the row is
-- compared with the cluster again although nothing changed: set by the write-back and by
-- _deployments_resynced to now() + mlplat.resync_interval x [0.5, 1.5) (_next_resync_at), so
-- resyncs are spread over the interval instead of all falling in one pass.  "Changed" is what
-- a pass must act on anyway: an intent not yet applied (generation ahead of
-- observed_generation) or a state that waits on the cluster.  Both sets have a partial index,
-- so finding them costs what they hold, not what the table holds.
-- When a row just compared with the cluster is compared again although nothing changed:
-- mlplat.resync_interval (the caller's setting: the worker's) x a uniform [0.5, 1.5) from now,
-- so a fleet written or resynced in one pass does not fall due in one pass again.  While the
-- leader's watch cache is healthy it sets mlplat.row_resync_interval (mlplat.watch_resync_interval:
-- out-of-band changes then arrive as events), which takes the place of mlplat.resync_interval.
CREATE FUNCTION mlplat._next_resync_at() RETURNS timestamptz
LANGUAGE sql VOLATILE
AS $$
  SELECT pg_catalog.now()
         + coalesce(nullif(pg_catalog.current_setting('mlplat.row_resync_interval', true), '0'),
                    pg_catalog.current_setting('mlplat.resync_interval', true), '30s')::interval
           * (0.5 + pg_catalog.random())
$$;
REVOKE ALL ON FUNCTION mlplat._next_resync_at() FROM PUBLIC;

ALTER TABLE mlplat.deployments ADD COLUMN next_resync_at timestamptz NOT NULL DEFAULT pg_catalog.now();
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

-- The write-back of a whole pass in one statement, one element of p_rows per deployment
-- written.  A row is written only if it is still at its row_version (an intent or another
-- leader that got there first wins) and p_epoch is still the kind's epoch.  Returns the ids
-- written.  The planner takes an unnest of a parameter for a few rows, so it probes the
-- primary key once per element, in array order: a caller passing ids ascending locks rows in
-- id order, as writing them one by one did.
CREATE FUNCTION mlplat._deployments_writeback_set(p_epoch bigint, p_rows mlplat.deployment_writeback[])
RETURNS SETOF bigint
LANGUAGE sql
AS $$
  UPDATE mlplat.deployments d
     SET status = w.status,
         status_reason = w.reason,
         observed_generation = coalesce(w.observed_generation, d.observed_generation),
         observed_revision = coalesce(w.observed_revision, d.observed_revision),
         ready_revision = CASE WHEN w.status = 'READY' THEN coalesce(w.observed_revision, d.observed_revision)
                               WHEN w.status = 'DELETED' THEN NULL ELSE d.ready_revision END,
         endpoint = CASE WHEN w.status IN ('DELETED') THEN NULL ELSE coalesce(w.endpoint, d.endpoint) END,
         ready_wait_since = CASE WHEN w.status = 'READY' THEN NULL ELSE d.ready_wait_since END,
         observed = CASE WHEN w.observed IS NULL THEN d.observed ELSE coalesce(d.observed, '{}'::jsonb) || w.observed END,
         observed_at = pg_catalog.now(),
         last_error = w.error,
         attempts = mlplat._retry_attempts(d.attempts, w.retry_ms),
         next_attempt_at = mlplat._retry_at(w.retry_ms),
         next_resync_at = mlplat._next_resync_at(),
         epoch = p_epoch,
         row_version = d.row_version + 1,
         updated_at = pg_catalog.now()
    FROM pg_catalog.unnest(p_rows) AS w
   WHERE d.id = w.id AND mlplat._writeback_holds(d.row_version, w.row_version, 'deployments', p_epoch)
  RETURNING d.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback_set(bigint, mlplat.deployment_writeback[]) FROM PUBLIC;

-- The one write of a deployments row's next resync, without a change to the row (row_version
-- does not move: an intent committed meanwhile must not lose its compare-and-swap): the rows
-- p_ids get next_resync_at = p_at, only while p_epoch is still the kind's epoch, in id order.
-- A row locked by an intent in flight is skipped, not waited for: the worker never queues
-- behind (or deadlocks with) a client's transaction for a bookkeeping write, and the row is
-- read again next pass (changed by that intent, or still due).  p_sooner: only bring a
-- resync forward, and never a DELETED row's (a watch event); else push it to p_at (a row
-- just compared).  Both sides in the one locking subquery, so a row changed since the
-- statement began is checked again as it is locked.
CREATE FUNCTION mlplat._deployments_resync_at(p_epoch bigint, p_ids bigint[], p_at timestamptz, p_sooner boolean)
RETURNS void
LANGUAGE sql
AS $$
  UPDATE mlplat.deployments d
     SET next_resync_at = p_at
    FROM (SELECT x.id FROM mlplat.deployments x
           WHERE x.id = ANY (p_ids)
             AND (NOT p_sooner OR (x.status <> 'DELETED' AND x.next_resync_at > p_at))
             AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'deployments' AND e.epoch = p_epoch)
           ORDER BY x.id
             FOR NO KEY UPDATE SKIP LOCKED) l
   WHERE d.id = l.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_resync_at(bigint, bigint[], timestamptz, boolean) FROM PUBLIC;

-- The rows a pass compared with the cluster and found nothing to write for: their next
-- resync moves on (_next_resync_at).
CREATE FUNCTION mlplat._deployments_resynced(p_epoch bigint, p_ids bigint[])
RETURNS void
LANGUAGE sql
AS $$
  SELECT mlplat._deployments_resync_at(p_epoch, p_ids, mlplat._next_resync_at(), false)
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_resynced(bigint, bigint[]) FROM PUBLIC;

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

-- One deployment's write-back (tests and operators standing in for the reconciler).
CREATE FUNCTION mlplat._deployments_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint, p_observed_revision int,
    p_endpoint text, p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE sql
AS $$
  SELECT EXISTS (SELECT 1 FROM mlplat._deployments_writeback_set(p_epoch, ARRAY[
           ROW(p_id, p_row_version, p_status, p_reason, p_observed_generation, p_observed_revision,
               p_endpoint, p_observed, p_error, p_retry_ms)::mlplat.deployment_writeback]))
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback(bigint, bigint, bigint, text, text, bigint, int, text, jsonb, text, int) FROM PUBLIC;

CREATE FUNCTION mlplat._instance_id() RETURNS text
LANGUAGE sql STABLE
AS $$ SELECT instance_id FROM mlplat.installation LIMIT 1 $$;
REVOKE ALL ON FUNCTION mlplat._instance_id() FROM PUBLIC;

-- ---------------------------------------------------------------- route generations
--
-- What gateways route to: per project, model -> the deployments whose endpoint serves a
-- revision we saw READY (ready_revision), while READY, DRIFTED (drift is a difference in the
-- spec; the endpoint stays up while it is shown or repaired) or DEPLOYING a newer revision
-- (KServe keeps the last ready revision serving until the new one is ready, so a redeploy
-- must not blank the route; the route moves to the new revision when it is READY).  FAILED,
-- DELETING and PENDING are not routed.  Every change of that set is a new, immutable,
-- numbered generation written by the transaction that changed it (the write-back, or
-- undeploy taking a deployment out), and NOTIFY mlplat_routes
-- carries its number, delivered by PostgreSQL only when that transaction commits.
--
-- A generation records what changed, not the whole set (issue 20): each deployment's route
-- is a row of route_entries valid from the generation that made it (from_gen) until the one
-- that replaced or removed it (to_gen), so publishing costs what changed, not what the
-- project serves; route_table(as_of) puts the set of any generation together.
--
-- Numbers are global (a gateway reads "the table as of N"), strictly increasing in commit
-- order, without gaps: publishers serialize on the one route_head row, which each takes
-- before it compares a deployment's route with the open entry and holds until it commits,
-- so every compare sees the entries of every earlier generation.  The payload is only the
-- number: it names no project, so listening reveals nothing RLS would hide.
CREATE TABLE mlplat.route_generations (
  generation  bigint PRIMARY KEY,
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  -- which transaction, and which of its statements (normally the COMMIT) published it
  created_xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
  created_statement_at timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp()
);
CREATE INDEX route_generations_project ON mlplat.route_generations (project_id, generation);
SELECT mlplat._append_only('route_generations');

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

-- The publishers' lock.  Its value is informational (numbers come from route_generations,
-- which survives pg_dump); every publish updates it so that a REPEATABLE READ publisher
-- whose snapshot predates another publish fails with a serialization error instead of
-- publishing from that old snapshot.
CREATE TABLE mlplat.route_head (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  generation bigint NOT NULL DEFAULT 0
);
INSERT INTO mlplat.route_head DEFAULT VALUES;

-- Which deployments a transaction's publish still has to compare (src/routes_queue.c): the
-- immediate trigger deployments_publish_queue queues each row the deferred publish trigger
-- will fire for; the publish trigger's first firing takes them all and has
-- _routes_publish_set publish them, the later ones find their row taken and return.  Backend
-- memory that no caller can read or write.
CREATE FUNCTION mlplat._route_queue_add() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'mlplat_route_queue_add';
REVOKE ALL ON FUNCTION mlplat._route_queue_add() FROM PUBLIC;
CREATE FUNCTION mlplat._routes_publish() RETURNS trigger
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

-- The route table as of a generation (default: the latest): per project, the newest
-- generation at or before it, and the entries valid at that generation.  Not SECURITY
-- DEFINER: row-level security shows a caller the projects they may view (a gateway's role is
-- a platform administrator or a viewer).
CREATE FUNCTION mlplat.route_table(as_of bigint DEFAULT NULL)
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

SELECT mlplat._member_reads('route_generations', 'route_entries');
GRANT SELECT ON mlplat.route_generations, mlplat.route_entries, mlplat.routes TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.route_generations', '');
SELECT pg_catalog.pg_extension_config_dump('mlplat.route_entries', '');

-- Which InferenceServices found under a deployment's name are mlplat's own (issue 18,
-- finding 5): the ordinals of the (namespace, name, content id) triples whose content id
-- (annotation mlplat.io/content-id, NULL when absent) is that of one of the deployment's
-- revisions.  Both reconcilers that write the object stamp a revision's id: the
-- deployments reconciler applies the render, the rollouts reconciler the render plus
-- canaryTrafficPercent.  A revision rendered before 0.3.0 carries no id: its object is
-- recognised by carrying none.  Called by the workers only for objects whose id is not
-- the one of the render they are about to write.
CREATE FUNCTION mlplat._isvc_stamps_known(p_namespaces text[], p_names text[], p_content_ids text[])
RETURNS SETOF int
LANGUAGE sql STABLE AS $$
  SELECT x.i
    FROM (SELECT g.i, p_namespaces[g.i] AS ns, p_names[g.i] AS name, p_content_ids[g.i] AS content_id
            FROM pg_catalog.generate_subscripts(p_namespaces, 1) AS g(i)) x
   WHERE EXISTS (SELECT FROM mlplat.projects p
                   JOIN mlplat.deployments d ON d.project_id = p.id AND d.name = x.name
                   JOIN mlplat.deployment_revisions r ON r.deployment_id = d.id
                  WHERE mlplat._project_namespace(p.name) = x.ns
                    AND (r.spec->'metadata'->'annotations'->>'mlplat.io/content-id') IS NOT DISTINCT FROM x.content_id)
$$;
REVOKE ALL ON FUNCTION mlplat._isvc_stamps_known(text[], text[], text[]) FROM PUBLIC;
