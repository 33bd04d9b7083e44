-- 0.2.0 -> 0.3.0, part 88: per-row resync of deployments (issue 20).  The column, its two
-- partial indexes, _next_resync_at and the claim and write-back that use them are in part 20
-- (which redefines those functions; the column must exist before their bodies are checked).
-- Here: marking compared rows resynced, and the option setters that make a row due at once.

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

-- sqldup6a: the entry points' checks moved into the helper, which authorizes itself (no
-- p_pid); the entry points are its one-line callers.
DROP FUNCTION mlplat._set_deployment_option(text, bigint, text, text, text, interval, text);
-- set_drift_policy and set_deploy_deadline, one call that differs by the setting it changes
-- (p_action; the other value NULL): authorized, then the value checked, then not an intent
-- for the cluster (no revision, no generation bump), so only row_version + 1 (a pass that
-- decided under the old setting loses its compare-and-swap) and a wake: the reconciler looks
-- again at once.
CREATE FUNCTION mlplat._set_deployment_option(p_action text, p_project text, p_deployment text,
                                              p_policy text, p_deadline interval, p_key text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(p_action, p_project);
  who text := mlplat._actor();
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  d mlplat.deployments;
  is_policy boolean := p_action = 'set_drift_policy';
  unchanged boolean;
BEGIN
  PERFORM mlplat._check_key(p_key);
  IF is_policy AND (p_policy IS NULL OR p_policy NOT IN ('repair', 'report')) THEN
    PERFORM mlplat._bad_input('policy', 'must be ''repair'' or ''report''',
      '''repair'' re-applies the desired revision over drift; ''report'' only shows the differing paths.');
  ELSIF NOT is_policy AND (p_deadline < interval '0' OR p_deadline > interval '7 days') THEN
    PERFORM mlplat._bad_input('deadline', 'must be from 0 to 7 days',
      'Pass e.g. ''15 minutes''; 0 disables the deadline, NULL uses the setting mlplat.deploy_deadline.');
  END IF;
  r := mlplat._idem_claim(p_action, p_key,
         pg_catalog.jsonb_build_array(p_project, p_deployment,
           CASE WHEN is_policy THEN pg_catalog.to_jsonb(p_policy)
                ELSE pg_catalog.to_jsonb(pg_catalog.date_part('epoch', p_deadline)) END), who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._find_deployment(pid, p_deployment);
  PERFORM mlplat._lock_project(pid, false, p_action);
  SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = p_deployment FOR NO KEY UPDATE;
  IF mlplat.deployment_is_deleting(d.status) THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, p_action, 'Deploy it again first.');
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, d.desired_revision, d.status, false)::mlplat.accepted;
  unchanged := CASE WHEN is_policy THEN d.drift_policy = p_policy
                    ELSE d.deploy_deadline IS NOT DISTINCT FROM p_deadline END;
  IF NOT unchanged THEN
    UPDATE mlplat.deployments x
    SET drift_policy = CASE WHEN is_policy THEN p_policy ELSE x.drift_policy END,
        deploy_deadline = CASE WHEN is_policy THEN x.deploy_deadline ELSE p_deadline END,
        row_version = x.row_version + 1, next_attempt_at = LEAST(x.next_attempt_at, pg_catalog.now()),
        -- the row is compared again at once: no pass reads it otherwise (it changed nothing to apply)
        next_resync_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    WHERE x.id = d.id;
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  PERFORM mlplat._audit(p_action, p_project, pid, 'deployment', d.id, r.request_id, tp,
    CASE WHEN is_policy THEN pg_catalog.jsonb_build_object('from', d.drift_policy, 'to', p_policy)
         ELSE pg_catalog.jsonb_build_object('from_seconds', pg_catalog.date_part('epoch', d.deploy_deadline),
                                            'to_seconds', pg_catalog.date_part('epoch', p_deadline)) END
    || pg_catalog.jsonb_build_object('unchanged', unchanged), who);
  PERFORM mlplat._idem_store(p_action, p_key, r, who);
  RETURN r;
END $$;
REVOKE ALL ON FUNCTION mlplat._set_deployment_option(text, text, text, text, interval, text) FROM PUBLIC;

-- How the deployments reconciler treats drift of this deployment: 'repair' (the default)
-- re-applies the desired revision, 'report' only marks it DRIFTED with the differing paths.
CREATE OR REPLACE FUNCTION mlplat.set_drift_policy(project text, deployment text, policy text,
                                        idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s'
RETURN mlplat._set_deployment_option('set_drift_policy', project, deployment, policy, NULL, idempotency_key);

-- This deployment's deploy deadline (NULL: the setting mlplat.deploy_deadline; 0: none).  It
-- applies to the wait in progress too, counted from the deploy or rollback that started it.
CREATE OR REPLACE FUNCTION mlplat.set_deploy_deadline(project text, deployment text, deadline interval,
                                           idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s'
RETURN mlplat._set_deployment_option('set_deploy_deadline', project, deployment, NULL, deadline, idempotency_key);
