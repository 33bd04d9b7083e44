-- 70_rollout: the rollout decision function (pure, see docs/rollouts.md) and a
-- helper that stamps a record with its own content id.

CREATE FUNCTION mlplat.plan_rollout(contract jsonb, evidence jsonb)
RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_plan_rollout';
COMMENT ON FUNCTION mlplat.plan_rollout(jsonb, jsonb) IS
  'Validate a rollout contract and an evidence record, then decide exactly one transition: ADVANCE, HOLD or ROLLBACK (see docs/rollouts.md).';

CREATE FUNCTION mlplat.with_content_id(record jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
	IF pg_catalog.jsonb_typeof(record) <> 'object' THEN
		RAISE EXCEPTION 'with_content_id: record must be a JSON object, not %',
			pg_catalog.jsonb_typeof(record)
			USING ERRCODE = '22023',
			      DETAIL = 'Only an object can carry a content_id member.',
			      HINT = 'Pass the contract or evidence object itself.';
	END IF;
	RETURN record || pg_catalog.jsonb_build_object('content_id',
		mlplat.content_id(record, 'content_id'));
END
$$;
COMMENT ON FUNCTION mlplat.with_content_id(jsonb) IS
  'record with content_id set to the content id of record without its content_id member.';
-- What the rollouts reconciler asks Prometheus for one revision (src/rollout/queries_sql.c):
-- the requests, 5xx answers and p95 latency (ms) queries of a metrics preset (NULL: the
-- mlplat.metrics_preset setting), for an operator to check against their own Prometheus.
CREATE FUNCTION mlplat.evidence_queries(namespace text, revision text, window_ms bigint, preset text DEFAULT NULL,
                                        OUT preset_used text, OUT metric text, OUT query text)
RETURNS SETOF record
LANGUAGE C STABLE
AS 'MODULE_PATHNAME', 'mlplat_evidence_queries';
COMMENT ON FUNCTION mlplat.evidence_queries(text, text, bigint, text) IS
  'The PromQL of rollout evidence for one revision under a metrics preset (knative-opencensus, knative-otel, vllm, triton).';
REVOKE ALL ON FUNCTION mlplat.evidence_queries(text, text, bigint, text) FROM PUBLIC;

-- A deployment's own metrics preset: one platform often serves some models on Knative and
-- others as RawDeployments under vLLM or Triton.  NULL: the setting mlplat.metrics_preset.
ALTER TABLE mlplat.deployments ADD COLUMN metrics_preset text
  CHECK (metrics_preset IN ('knative-opencensus', 'knative-otel', 'vllm', 'triton'));
COMMENT ON COLUMN mlplat.deployments.metrics_preset IS
  'Which serving stack''s metrics this deployment''s rollouts read; NULL: the setting mlplat.metrics_preset.';
INSERT INTO mlplat.policies (role, action)
VALUES ('deployer', 'set_metrics_preset'), ('owner', 'set_metrics_preset');

-- Set (or, with NULL, clear) a deployment's metrics preset.  Not an intent for the cluster:
-- no revision, no generation; the next rollout decision reads it.
CREATE FUNCTION mlplat.set_metrics_preset(project text, deployment text, preset text,
                                          idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('set_metrics_preset', set_metrics_preset.project,
                                           set_metrics_preset.idempotency_key);
  r mlplat.accepted;
  d mlplat.deployments;
BEGIN
  PERFORM mlplat._check_key(set_metrics_preset.idempotency_key);
  IF set_metrics_preset.preset IS NOT NULL
     AND set_metrics_preset.preset NOT IN ('knative-opencensus', 'knative-otel', 'vllm', 'triton') THEN
    PERFORM mlplat._bad_input('preset', 'must be knative-opencensus, knative-otel, vllm, triton or NULL',
      'knative-opencensus: Knative <= 1.18; knative-otel: Knative >= 1.19; vllm, triton: RawDeployment; NULL: the setting mlplat.metrics_preset.');
  END IF;
  r := mlplat._api_claim(api, pg_catalog.jsonb_build_array(set_metrics_preset.project, set_metrics_preset.deployment,
                                                            set_metrics_preset.preset));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._find_deployment(api.pid, set_metrics_preset.deployment);
  PERFORM mlplat._lock_project(api.pid, false, 'set_metrics_preset');
  SELECT * INTO d FROM mlplat.deployments x
   WHERE x.project_id = api.pid AND x.name = set_metrics_preset.deployment FOR NO KEY UPDATE;
  IF mlplat.deployment_is_deleting(d.status) THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, 'set_metrics_preset', 'Deploy it again first.');
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, d.desired_revision, d.status, false)::mlplat.accepted;
  IF d.metrics_preset IS DISTINCT FROM set_metrics_preset.preset THEN
    UPDATE mlplat.deployments x SET metrics_preset = set_metrics_preset.preset, updated_at = pg_catalog.now()
     WHERE x.id = d.id;
  END IF;
  -- no wake: the reconcilers have nothing to apply (the next rollout decision reads it)
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('from', d.metrics_preset, 'to', set_metrics_preset.preset));
END $$;
COMMENT ON FUNCTION mlplat.set_metrics_preset(text, text, text, text) IS
  'Which serving stack''s metrics the rollouts of this deployment read (NULL: the setting mlplat.metrics_preset).';
