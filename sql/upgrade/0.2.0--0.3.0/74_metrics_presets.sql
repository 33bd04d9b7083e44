-- 0.2.0 -> 0.3.0, part 74: metrics presets for rollout evidence (issue 17 item 4).

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
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
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

-- The rollouts claim also returns the deployment's preset ('' when it has none): a new
-- result column, so the function is made again (returning the seam type of part 20).
DROP FUNCTION mlplat._rollouts_claim();
CREATE FUNCTION mlplat._rollouts_claim()
RETURNS SETOF mlplat.rollout_claim
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE mlplat.rollouts ro SET contract = mlplat._rollout_contract(ro.id)
   WHERE ro.contract IS NULL AND mlplat.rollout_is_active(ro.status);
  RETURN QUERY
  SELECT c.id, c.project, c.namespace, c.name, c.status, c.row_version,
         (CASE WHEN c.want < 0 THEN c.spec
               ELSE pg_catalog.jsonb_set(c.spec, '{spec,predictor,canaryTrafficPercent}', pg_catalog.to_jsonb(c.want)) END)::text,
         c.want, c.target_revision, c.target_kn, c.previous_kn, c.window_start_ms, c.window_seconds, c.decide_at_ms,
         c.attempts, c.due, c.traceparent, c.metrics_preset, c.requested_action, c.fraction, c.window_started,
         c.contract::text, c.target_replicas, c.previous_replicas
    FROM (
  SELECT f.*, mlplat._rollout_want_percent(f.status, f.requested_action, f.fraction) AS want
    FROM (
  SELECT ro.id, p.name AS project, mlplat._project_namespace(p.name) AS namespace, d.name, ro.status, ro.row_version,
         tr.spec, ro.requested_action, mlplat._rollout_fraction(ro.id) AS fraction,
         ro.target_revision, ro.observed->>'target_kn' AS target_kn, ro.observed->>'previous_kn' AS previous_kn,
         pg_catalog.round(EXTRACT(epoch FROM ro.window_start) * 1000)::bigint AS window_start_ms,
         ro.window_start IS NOT NULL AS window_started,
         (ro.policy->>'window_seconds')::int AS window_seconds,
         pg_catalog.round(ro.decide_at * 1000)::bigint AS decide_at_ms, ro.attempts,
         ro.next_attempt_at <= pg_catalog.now() AS due, ro.traceparent,
         coalesce(d.metrics_preset, '') AS metrics_preset, ro.contract,
         mlplat._rollout_replicas(tr.intent) AS target_replicas, mlplat._rollout_replicas(br.intent) AS previous_replicas
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
    JOIN mlplat.deployment_revisions tr ON tr.deployment_id = d.id AND tr.revision = ro.target_revision
    JOIN mlplat.deployment_revisions br ON br.deployment_id = d.id AND br.revision = ro.baseline_revision
   WHERE mlplat.rollout_is_active(ro.status)) f) c
   ORDER BY c.id;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_claim() FROM PUBLIC;
