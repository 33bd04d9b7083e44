-- 0.2.0 -> 0.3.0: the remaining positional seams become typed (seam.h): the artifact
-- check's claim returns mlplat.artifact_check_claim rows; the rollouts write-back and the
-- rollout artifact verdicts take arrays of mlplat.rollout_writeback and
-- mlplat.rollout_artifact_verdict and answer with mlplat.rollout_writeback_result rows.
-- (_rollout_artifacts_pending's new row type is in 12_rules.sql, where it is redefined.)
DROP FUNCTION mlplat._artifact_claim(bigint[], int[]);
CREATE TYPE mlplat.artifact_check_claim AS (
  ord bigint, artifact_uri text, artifact_sha256 text, etags text[], sha256s text[]);

CREATE FUNCTION mlplat._artifact_claim(p_deployment_ids bigint[], p_revisions int[])
RETURNS SETOF mlplat.artifact_check_claim
LANGUAGE sql STABLE
AS $$
  SELECT w.ord, v.artifact_uri, v.artifact_sha256,
         (SELECT pg_catalog.array_agg(a.etag ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri),
         (SELECT pg_catalog.array_agg(a.sha256 ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri)
    FROM unnest(p_deployment_ids, p_revisions) WITH ORDINALITY AS w(id, rev, ord)
    JOIN mlplat.deployment_revisions r ON r.deployment_id = w.id AND r.revision = w.rev
    JOIN mlplat.model_versions v ON v.id = r.model_version_id
$$;
REVOKE ALL ON FUNCTION mlplat._artifact_claim(bigint[], int[]) FROM PUBLIC;

CREATE TYPE mlplat.rollout_writeback AS (
  id bigint, row_version bigint, controller text, observation jsonb,
  applied boolean, applied_percent int, error text, retry_ms int /* NULL<0 */,
  step text, target_kn text, previous_kn text, target_percent int, previous_percent int,
  close_kn text, close_status text /* STATUS rollout */, status_reason text, clear_window boolean,
  window_start_ms bigint /* NULL<0 */, decide_at_ms bigint /* NULL<0 */,
  evidence jsonb, plan jsonb, decision text, reasons text[], next_fraction numeric,
  plan_status text /* STATUS rollout */,
  plan_reason text, keep_window boolean, recheck_at_ms bigint /* NULL<0 */, refused text);
CREATE TYPE mlplat.rollout_writeback_result AS (id bigint, result text);

CREATE FUNCTION mlplat._rollouts_writeback_set(p_epoch bigint, p_rows mlplat.rollout_writeback[])
RETURNS SETOF mlplat.rollout_writeback_result
LANGUAGE plpgsql
AS $$
DECLARE
  w mlplat.rollout_writeback;
BEGIN
  FOREACH w IN ARRAY coalesce(p_rows, '{}') LOOP
    RETURN NEXT ROW(w.id, mlplat._rollouts_observe(p_epoch, w))::mlplat.rollout_writeback_result;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_writeback_set(bigint, mlplat.rollout_writeback[]) FROM PUBLIC;

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
