-- 74_rollout_artifacts: a rollout's target artifact is verified before the rollout
-- first applies the target revision (the same check the deployments reconciler makes
-- before a first apply: src/reconcile/artifact.c, 56_artifacts).  Kept apart from
-- 72_reconcile_rollouts: the rollouts pass calls it as a hook
-- (src/reconcile/rollout_artifacts.c) around its own claim and write-back.

-- Set once the target's artifact was found with its registered SHA-256; the check is
-- not repeated for the rollout's later steps (nor after a restart).
ALTER TABLE mlplat.rollouts ADD COLUMN artifact_verified_at timestamptz;

-- Of the given (claimed, due) rollouts, those whose target artifact is not verified yet.
CREATE TYPE mlplat.rollout_artifact_claim AS (id bigint, deployment_id bigint, target_revision int);

CREATE FUNCTION mlplat._rollout_artifacts_pending(p_ids bigint[])
RETURNS SETOF mlplat.rollout_artifact_claim
LANGUAGE sql STABLE
AS $$
  SELECT ro.id, ro.deployment_id, ro.target_revision
    FROM mlplat.rollouts ro
   WHERE ro.id = ANY (p_ids) AND ro.artifact_verified_at IS NULL
     AND mlplat.rollout_is_active(ro.status)
   ORDER BY ro.id
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifacts_pending(bigint[]) FROM PUBLIC;

-- The verdict of one check (p_verdict OK, FAILED, RETRY or WAIT), under the leader
-- epoch and, for everything but OK, the compare-and-swap on row_version the pass
-- claimed with.  OK only marks the artifact verified (row_version unchanged: the
-- pass goes on to apply and writes back as usual).  FAILED ends the rollout FAILED:
-- nothing of the target was applied, the previous revision keeps all traffic, and the
-- deployment reconciler owns its InferenceService again.  RETRY/WAIT say why and
-- back off.  Returns the verdict, or LOST.
CREATE FUNCTION mlplat._rollout_artifact_verdict(p_id bigint, p_row_version bigint, p_epoch bigint,
                                                 p_verdict text, p_reason text, p_retry_ms int)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
  IF p_verdict NOT IN ('OK', 'FAILED', 'RETRY', 'WAIT') THEN
    RAISE EXCEPTION 'mlplat: unknown artifact verdict %', p_verdict USING ERRCODE = '22023';
  END IF;
  IF p_verdict = 'OK' THEN
    UPDATE mlplat.rollouts x SET artifact_verified_at = pg_catalog.now()
     WHERE x.id = p_id AND x.artifact_verified_at IS NULL
       AND mlplat._epoch_current('rollouts', p_epoch);
    RETURN CASE WHEN FOUND THEN 'OK' ELSE 'LOST' END;
  END IF;
  UPDATE mlplat.rollouts x
     SET epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now(),
         status_reason = p_reason, last_error = p_reason,
         status = CASE WHEN p_verdict = 'FAILED' THEN 'FAILED' ELSE x.status END,
         observed_generation = CASE WHEN p_verdict = 'FAILED' THEN x.generation ELSE x.observed_generation END,
         attempts = CASE WHEN p_verdict = 'FAILED' THEN x.attempts ELSE x.attempts + 1 END,
         next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => coalesce(p_retry_ms, 1000) / 1000.0)
   WHERE x.id = p_id AND mlplat._writeback_holds(x.row_version, p_row_version, 'rollouts', p_epoch)
     AND mlplat.rollout_is_active(x.status);
  IF NOT FOUND THEN
    RETURN 'LOST';
  END IF;
  IF p_verdict = 'FAILED' THEN
    -- the deployment serves its own revision as before; let its reconciler look at once
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  RETURN p_verdict;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifact_verdict(bigint, bigint, bigint, text, text, int) FROM PUBLIC;

-- The verdicts of a pass through the seam (seam.h): one mlplat.rollout_artifact_verdict
-- per check, each answered, in order, by what _rollout_artifact_verdict returned.
CREATE TYPE mlplat.rollout_artifact_verdict AS (
  id bigint, row_version bigint, verdict text, reason text, retry_ms int);

CREATE FUNCTION mlplat._rollout_artifact_verdicts(p_epoch bigint, p_rows mlplat.rollout_artifact_verdict[])
RETURNS SETOF mlplat.rollout_writeback_result
LANGUAGE plpgsql
AS $$
DECLARE
  w mlplat.rollout_artifact_verdict;
BEGIN
  FOREACH w IN ARRAY coalesce(p_rows, '{}') LOOP
    RETURN NEXT ROW(w.id, mlplat._rollout_artifact_verdict(w.id, w.row_version, p_epoch, w.verdict, w.reason,
                                                          w.retry_ms))::mlplat.rollout_writeback_result;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifact_verdicts(bigint, mlplat.rollout_artifact_verdict[]) FROM PUBLIC;
