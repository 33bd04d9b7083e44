-- 51_reconcile_deployments: the deployments reconciler's two short transactions.
--
-- Claim reads desired state and commits before any HTTP; write-back runs after
-- the HTTP in a new transaction and applies only if the row is still at the
-- version the claim read (an intent committed meanwhile wins; the entity is
-- simply read again next pass) and the caller still holds the kind's epoch.

-- p_only_new: a pass woken by a commit takes just the intents not yet applied.
CREATE FUNCTION mlplat._deployments_claim(p_resync boolean, p_only_new boolean DEFAULT false)
RETURNS TABLE (id bigint, project text, namespace text, name text, status text,
               generation bigint, observed_generation bigint, row_version bigint,
               desired_revision int, spec text, spec_digest text, traceparent text,
               attempts int, due boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT d.id, p.name, 'mlp-' || p.name, d.name, d.status,
         d.generation, d.observed_generation, d.row_version,
         d.desired_revision, r.spec::text, r.spec_digest, d.traceparent, d.attempts,
         d.next_attempt_at <= pg_catalog.now()
           AND (p_resync OR d.generation <> d.observed_generation
                OR d.status IN ('PENDING', 'DEPLOYING', 'DRIFTED', 'DELETING'))
    FROM mlplat.deployments d
    JOIN mlplat.projects p ON p.id = d.project_id
    LEFT JOIN mlplat.deployment_revisions r
           ON r.deployment_id = d.id AND r.revision = d.desired_revision
   WHERE d.status <> 'DELETED'
     AND (NOT p_only_new OR (d.generation <> d.observed_generation AND d.next_attempt_at <= pg_catalog.now()))
   ORDER BY d.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_claim(boolean, boolean) FROM PUBLIC;

-- p_retry_ms: NULL = no retry scheduled (success: attempts reset);
-- otherwise attempts + 1 and next_attempt_at = now() + p_retry_ms.
CREATE FUNCTION mlplat._deployments_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint, p_observed_revision int,
    p_endpoint text, p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    UPDATE mlplat.deployments d
       SET status = p_status,
           status_reason = p_reason,
           observed_generation = coalesce(p_observed_generation, d.observed_generation),
           observed_revision = coalesce(p_observed_revision, d.observed_revision),
           endpoint = CASE WHEN p_status IN ('DELETED') THEN NULL ELSE coalesce(p_endpoint, d.endpoint) END,
           observed = coalesce(p_observed, d.observed),
           observed_at = pg_catalog.now(),
           last_error = p_error,
           attempts = CASE WHEN p_retry_ms IS NULL THEN 0 ELSE d.attempts + 1 END,
           next_attempt_at = CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                                  ELSE pg_catalog.now() + pg_catalog.make_interval(secs => p_retry_ms / 1000.0) END,
           epoch = p_epoch,
           row_version = d.row_version + 1,
           updated_at = pg_catalog.now()
     WHERE d.id = p_id AND d.row_version = p_row_version
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'deployments' AND e.epoch = p_epoch);
    RETURN FOUND;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback(bigint, bigint, bigint, text, text, bigint, int, text, jsonb, text, int) FROM PUBLIC;

CREATE FUNCTION mlplat._instance_id() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$ SELECT instance_id FROM mlplat.installation LIMIT 1 $$;
REVOKE ALL ON FUNCTION mlplat._instance_id() FROM PUBLIC;
