-- The rollouts reconciler's SQL half, driven with synthetic observations (no
-- workers, no cluster): contract, window, evidence, plan_rollout, the transition
-- ledger (append-only, keyed by evidence), compare-and-swap, route-proven closing;
-- and how Prometheus answers are read.
\set SHOW_CONTEXT never
-- 8 GPUs: the deployment's 3 plus the canary's 3, reserved while the rollout is active
SELECT (mlplat.create_project('rrec', 8, NULL, NULL, NULL, NULL)).status;
SELECT (mlplat.add_artifact_location('rrec', 's3://m/')).status;
SELECT (mlplat.register_model_version('rrec', 'rm', v, 's3://m/' || v, repeat(v, 64), 'kserve-sklearnserver', 'sklearn')).status
  FROM unnest(ARRAY['1', '2']) v;
SELECT (mlplat.set_model_stage('rrec', 'rm', '1', 'CHAMPION')).status, (mlplat.set_model_stage('rrec', 'rm', '2', 'CANDIDATE')).status;
-- one GPU per replica: 3 GPUs committed, and the canary's 3 reserved by start_rollout
SELECT (mlplat.deploy('rrec', 'rsvc', 'rm', '1', 'kserve-sklearnserver', 1, 2, 3)).status;
UPDATE mlplat.deployments SET status = 'READY' WHERE name = 'rsvc';
SELECT (mlplat.start_rollout('rrec', 'rsvc', 'rm', '2', '{"steps": [0.1, 0.5], "ceiling": 0.5, "window_seconds": 60, "min_samples": 100, "max_error_rate": 0.02, "max_p95_ms": 300}')).status;
-- other tests leave rollouts behind: look at this one only
CREATE VIEW pg_temp.ro AS SELECT r.* FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'rsvc';
CREATE VIEW pg_temp.tr AS SELECT t.* FROM mlplat.rollout_transitions t WHERE t.rollout_id = (SELECT id FROM pg_temp.ro);
-- this session leads the rollouts kind (the workers do not run in the regression database)
SELECT mlplat._take_leadership('rollouts', pg_backend_pid(), 0) AS epoch \gset

-- claim: the contract is frozen with its content id; the manifest carries the wanted canary
SELECT name, status, want_percent, target_revision, target_kn, window_start_ms, decide_at_ms, due,
       spec::jsonb->'spec'->'predictor'->'canaryTrafficPercent' AS canary,
       spec::jsonb->'metadata'->'labels'->>'mlplat.io/revision' AS label
  FROM mlplat._rollouts_claim() c WHERE c.name = 'rsvc';
-- (the config digest hashes the manifest, which carries this installation's random instance id)
SELECT (contract->'scope') - 'config_digest' AS scope, contract->'scope'->>'config_digest' ~ '^sha256:[0-9a-f]{64}$' AS config_digest_ok,
       contract->'policy' AS policy,
       mlplat.content_id(contract, 'content_id') = contract->>'content_id' AS id_ok
  FROM pg_temp.ro;
-- deployments reconciler: an active rollout owns the object, so the deployment is never due
SELECT name, due FROM mlplat._deployments_claim(true) WHERE name IN ('rsvc');

CREATE FUNCTION pg_temp.obs(at numeric, traffic jsonb, extra jsonb DEFAULT '{}') RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('observed_at', at, 'settled', true, 'ready', true,
    'latest_ready_kn', 'rsvc-predictor-00002', 'latest_created_kn', 'rsvc-predictor-00002',
    'rolledout_kn', 'rsvc-predictor-00001', 'load', 'UpToDate', 'traffic', traffic) || extra $$;
-- one pass: the claim, what the observation means for the claimed row (the pass's pure
-- decision, rollout_decide.c, through its SQL face), and the write-back that applies it
CREATE FUNCTION pg_temp.step(o jsonb, applied int DEFAULT NULL, err text DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
  SELECT mlplat._rollouts_observe((SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'rollouts'),
                                  ROW(c.id, c.row_version, 'regress/controller', o, applied IS NOT NULL, applied, err,
                                      CASE WHEN err IS NOT NULL THEN 500 END, d.step, d.target_kn, d.previous_kn,
                                      d.target_percent, d.previous_percent, d.close_kn, d.close_status, d.status_reason,
                                      d.clear_window, d.window_start_ms, d.decide_at_ms, x.evidence, x.plan, x.decision,
                                      x.reasons, x.next_fraction, x.plan_status, x.plan_reason, x.keep_window, x.recheck_at_ms,
                                      x.refused)::mlplat.rollout_writeback)
    FROM pg_temp.ro r
    JOIN mlplat._rollouts_claim() c ON c.id = r.id
    CROSS JOIN LATERAL mlplat._rollout_decide(c.status, c.requested_action, c.fraction::numeric, c.target_kn, c.previous_kn,
      c.window_started, c.decide_at_ms, c.window_seconds, round((o->>'observed_at')::numeric * 1000)::bigint,
      coalesce((o->>'settled')::boolean, false), o->>'latest_created_kn', o->>'rolledout_kn',
      ARRAY(SELECT e->>'revision' FROM jsonb_array_elements(coalesce(o->'traffic', '[]')) WITH ORDINALITY x(e, i) ORDER BY i),
      ARRAY(SELECT (e->>'percent')::int FROM jsonb_array_elements(coalesce(o->'traffic', '[]')) WITH ORDINALITY x(e, i) ORDER BY i),
      o->'metrics' IS NOT NULL) d
    -- a due decision: the evidence, plan_rollout's transition and the status after it (pass_plan.c)
    LEFT JOIN LATERAL mlplat._rollout_pass_plan(c.contract::jsonb, c.fraction, c.target_replicas, c.previous_replicas,
      o, d.target_kn, d.previous_kn, c.window_seconds) x ON d.step = 'DECIDE' $$;
CREATE FUNCTION pg_temp.at0() RETURNS bigint LANGUAGE sql AS $$
  SELECT ceil(extract(epoch FROM clock_timestamp()))::bigint $$;
\set split0 '''[{"revision": "rsvc-predictor-00002", "percent": 0, "latest": true}, {"revision": "rsvc-predictor-00001", "percent": 100, "latest": false}]'''
\set split10 '''[{"revision": "rsvc-predictor-00002", "percent": 10, "latest": true}, {"revision": "rsvc-predictor-00001", "percent": 90, "latest": false}]'''

-- an error: recorded, retried later, nothing decided
SELECT pg_temp.step(NULL, NULL, 'cannot read InferenceService: 503');
SELECT attempts, last_error, next_attempt_at > now() AS backs_off FROM pg_temp.ro;
UPDATE mlplat.rollouts SET next_attempt_at = now() WHERE id = (SELECT id FROM pg_temp.ro);
-- the pass applied the manifest at 0%
SELECT pg_temp.step(NULL, 0);
SELECT applied_percent, window_start IS NULL AS no_window, last_error FROM pg_temp.ro;
-- not settled yet: nothing starts
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split0, '{"settled": false}'));
SELECT window_start IS NULL AS no_window, observed->>'target_kn' AS target_kn FROM pg_temp.ro;
-- settled at 0% on the target: at 0% readiness alone qualifies the first step, so the
-- observation that starts the (empty) window is the evidence of the first decision
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split0));
SELECT observed->>'target_kn' AS target_kn, observed->>'previous_kn' AS previous_kn FROM pg_temp.ro;
SELECT evidence->>'window_seconds' AS window_seconds, evidence->>'window_start' = evidence->>'observed_at' AS window_at_observation
  FROM pg_temp.tr;
SELECT seq, decision, reasons, from_status, to_status, from_fraction, to_fraction, epoch = :epoch AS epoch_ok, controller,
       plan = mlplat.plan_rollout(contract, evidence) AS replayable,
       evidence->'target'->>'ready_replicas' AS target_ready, evidence->>'desired_capacity' AS capacity
  FROM pg_temp.tr;
SELECT status, current_fraction, window_start IS NULL AS no_window, status_reason FROM pg_temp.ro;
-- the claim now wants 10%: the fraction comes from the ledger
SELECT want_percent, spec::jsonb->'spec'->'predictor'->'canaryTrafficPercent' AS canary FROM mlplat._rollouts_claim() c WHERE c.name = 'rsvc';
SELECT pg_temp.step(NULL, 10);
-- KServe still shows 0%: waiting, no window
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split0));
SELECT window_start IS NULL AS no_window, status_reason FROM pg_temp.ro;
-- the split is observed a quarter second past a whole second: the window starts then
-- (evidence times have millisecond precision), not at the next full second
SELECT pg_temp.at0() + 0.25 AS at10 \gset
SELECT pg_temp.step(pg_temp.obs(:at10, :split10));
SELECT decide_at - extract(epoch FROM window_start) AS window, decide_at = :at10 + 60 AS window_from_observation,
       c.window_start_ms = round(:at10 * 1000) AS claim_ms, c.decide_at_ms = round((:at10 + 60) * 1000) AS claim_due_ms
  FROM pg_temp.ro r JOIN mlplat._rollouts_claim() c ON c.id = r.id;
-- evidence before the window ends is not used
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0() + 5, :split10, '{"metrics": {"window_start": 0, "window_seconds": 5, "target": {}, "previous": {}, "gaps": []}}'));
-- Prometheus had nothing (gaps): missing evidence holds
UPDATE mlplat.rollouts SET decide_at = pg_temp.at0() - 60, window_start = to_timestamp(pg_temp.at0() - 60) WHERE id = (SELECT id FROM pg_temp.ro);
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split10, jsonb_build_object('metrics', jsonb_build_object(
  'window_start', pg_temp.at0() - 60, 'window_seconds', 60, 'target', '{}'::jsonb, 'previous', '{}'::jsonb,
  'gaps', '["target requests: no sample"]'::jsonb))));
SELECT seq, decision, reasons, to_status, to_fraction, observation->'metric_gaps' AS gaps
  FROM pg_temp.tr ORDER BY seq DESC LIMIT 1;
SELECT status, decide_at > pg_temp.at0() AS rechecks_later FROM pg_temp.ro;
-- evidence plan_rollout refuses (more errors than requests, which the pass never writes): not
-- a transition; nothing in the ledger, the error kept, retried slowly
UPDATE mlplat.rollouts SET decide_at = pg_temp.at0() - 60 WHERE id = (SELECT id FROM pg_temp.ro);
SELECT count(*) AS transitions_before FROM pg_temp.tr;
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split10, jsonb_build_object('metrics', jsonb_build_object(
  'window_start', pg_temp.at0() - 60, 'window_seconds', 60,
  'target', '{"requests": 10, "errors": 20, "p95_ms": 50}'::jsonb,
  'previous', '{"requests": 5400, "errors": 20, "p95_ms": 80}'::jsonb, 'gaps', '[]'::jsonb))));
SELECT count(*) AS transitions_after FROM pg_temp.tr;
SELECT status, attempts, last_error, next_attempt_at > now() + interval '25 seconds' AS retries_slowly FROM pg_temp.ro;
-- a demonstrated regression rolls back
UPDATE mlplat.rollouts SET decide_at = pg_temp.at0() - 60 WHERE id = (SELECT id FROM pg_temp.ro);
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split10, jsonb_build_object('metrics', jsonb_build_object(
  'window_start', pg_temp.at0() - 60, 'window_seconds', 60,
  'target', '{"requests": 600, "errors": 120, "p95_ms": 1250}'::jsonb,
  'previous', '{"requests": 5400, "errors": 20, "p95_ms": 80}'::jsonb, 'gaps', '[]'::jsonb))));
SELECT seq, decision, reasons, to_status, to_fraction FROM pg_temp.tr ORDER BY seq DESC LIMIT 1;
SELECT r.status, c.want_percent FROM pg_temp.ro r, mlplat._rollouts_claim() c WHERE c.id = r.id;
-- ROLLED_BACK only when the observed route has 100% on the previous revision
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split10));
SELECT status, status_reason FROM pg_temp.ro;
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), '[{"revision": "rsvc-predictor-00002", "percent": 100, "latest": true}]'));
SELECT status, status_reason FROM pg_temp.ro;
-- alerts while rolling back without a route; a stale observation; a reserved canary over the
-- quota (an operator lowered it behind set_project_quota's back)
UPDATE mlplat.rollouts SET observed_at = now() - interval '10 minutes' WHERE id = (SELECT id FROM pg_temp.ro);
UPDATE mlplat.projects SET gpu_quota = 4 WHERE name = 'rrec';
SELECT alert, severity, entity, detail FROM mlplat.alerts WHERE kind = 'rollouts' AND entity = 'rsvc' ORDER BY alert;
SELECT pg_temp.step(pg_temp.obs(pg_temp.at0(), :split0));
SELECT seq, decision, reasons, from_status, to_status, to_fraction, evidence->>'revision' AS revision,
       mlplat.content_id(evidence, 'content_id') = evidence_content_id AS keyed
  FROM pg_temp.tr ORDER BY seq DESC LIMIT 1;
SELECT r.status, d.status AS deployment, d.desired_revision, d.generation > d.observed_generation AS deployment_due
  FROM pg_temp.ro r JOIN mlplat.deployments d ON d.id = r.deployment_id;
SELECT count(*) AS active_claims FROM mlplat._rollouts_claim() c WHERE c.name = 'rsvc';

-- compare-and-swap: a stale row_version or a deposed epoch writes nothing
SELECT mlplat._rollouts_observe(:epoch, ROW(r.id, r.row_version - 1, 'x', pg_temp.obs(1, :split0), false, NULL, NULL, NULL, 'WAIT', NULL, NULL, 0, 0, NULL, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::mlplat.rollout_writeback) FROM pg_temp.ro r;
SELECT mlplat._rollouts_observe(:epoch - 1, ROW(r.id, r.row_version, 'x', pg_temp.obs(1, :split0), false, NULL, NULL, NULL, 'WAIT', NULL, NULL, 0, 0, NULL, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::mlplat.rollout_writeback) FROM pg_temp.ro r;
-- the same evidence is never recorded twice
SELECT mlplat._rollout_record(r, 'HOLD', '{}', 'HOLDING', 0, 0, t.evidence, NULL, '{}', :epoch, 'x') AS recorded
  FROM mlplat.rollouts r JOIN pg_temp.tr t ON t.rollout_id = r.id WHERE t.seq = 1;
-- the ledger is append-only
UPDATE mlplat.rollout_transitions SET decision = 'ADVANCE' WHERE rollout_id = (SELECT id FROM pg_temp.ro) AND seq = 3;
DELETE FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT id FROM pg_temp.ro);
TRUNCATE mlplat.rollout_transitions;
SELECT count(*) AS transitions, count(DISTINCT evidence_content_id) AS keys FROM pg_temp.tr;
-- alerts: the regression is reported
SELECT alert, severity, kind, entity, detail FROM mlplat.alerts WHERE kind = 'rollouts' AND entity = 'rsvc';

-- The evidence record is built in C by the pass (src/rollout/pass_plan.c): for the same inputs
-- it is the jsonb the SQL builder made before (mlplat._rollout_evidence up to 0.3.0, kept here
-- as it was), number texts included, and so has the same content id
CREATE FUNCTION pg_temp.sql_evidence(p_contract jsonb, p_fraction numeric, p_target_replicas int,
                                     p_previous_replicas int, p_obs jsonb, p_target_kn text, p_previous_kn text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  at numeric := pg_catalog.trim_scale((p_obs->>'observed_at')::numeric);
  m jsonb := coalesce(p_obs->'metrics', '{}');
  t_ready boolean := coalesce((p_obs->>'ready')::boolean, false) AND p_obs->>'latest_ready_kn' = p_target_kn;
  p_ready boolean := EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(coalesce(p_obs->'traffic', '[]')) e
                              WHERE e->>'revision' = p_previous_kn);
  load text := p_obs->>'load';
BEGIN
  RETURN pg_catalog.jsonb_build_object(
    'contract_content_id', p_contract->'content_id',
    'scope', p_contract->'scope',
    'observed_at', at,
    'current_fraction', p_fraction,
    'window_start', coalesce(pg_catalog.trim_scale((m->>'window_start')::numeric), at),
    'window_seconds', coalesce(pg_catalog.trim_scale((m->>'window_seconds')::numeric), 0),
    'target', pg_catalog.jsonb_build_object(
      'desired_replicas', p_target_replicas,
      'ready_replicas', CASE WHEN t_ready THEN p_target_replicas ELSE 0 END,
      'load_attempts', CASE WHEN load IN ('UpToDate', 'BlockedByFailedLoad') THEN 1 ELSE 0 END,
      'load_successes', CASE WHEN load = 'UpToDate' THEN 1 ELSE 0 END,
      'health_observed_at', CASE WHEN t_ready THEN at END,
      'requests', coalesce((m->'target'->>'requests')::bigint, 0),
      'errors', coalesce((m->'target'->>'errors')::bigint, 0),
      'p95_ms', m->'target'->'p95_ms'),
    'previous', pg_catalog.jsonb_build_object(
      'desired_replicas', p_previous_replicas,
      'ready_replicas', CASE WHEN p_ready THEN p_previous_replicas ELSE 0 END,
      'load_attempts', CASE WHEN p_ready THEN 1 ELSE 0 END,
      'load_successes', CASE WHEN p_ready THEN 1 ELSE 0 END,
      'health_observed_at', CASE WHEN p_ready THEN at END,
      'requests', coalesce((m->'previous'->>'requests')::bigint, 0),
      'errors', coalesce((m->'previous'->>'errors')::bigint, 0),
      'p95_ms', m->'previous'->'p95_ms'),
    'desired_capacity', p_target_replicas + p_previous_replicas);
END $$;
CREATE TEMP TABLE evidence_cases AS
SELECT n, f::numeric AS f, tr, pr, o::jsonb AS o, tkn, pkn FROM (VALUES
  -- as the pass writes them: times to the millisecond, p95 with three decimals
  (1, '0.1', 1, 1, '{"observed_at": 1764842401.25, "ready": true, "latest_ready_kn": "a-2", "load": "UpToDate",
    "traffic": [{"revision": "a-2", "percent": 10}, {"revision": "a-1", "percent": 90}],
    "metrics": {"window_start": 1764842341.25, "window_seconds": 60, "target": {"requests": 600, "errors": 3, "p95_ms": 123.400},
                "previous": {"requests": 5400, "errors": 20, "p95_ms": 80.125}, "gaps": []}}', 'a-2', 'a-1'),
  (2, '0', 2, 3, '{"observed_at": 1764842400.123, "ready": true, "latest_ready_kn": "a-2", "load": "UpToDate",
    "traffic": [{"revision": "a-2", "percent": 0}, {"revision": "a-1", "percent": 100}]}', 'a-2', 'a-1'),
  -- not ready, the target loading failed, the previous not in the traffic, gaps
  (3, '0.50', 1, 2, '{"observed_at": 1764842400, "ready": false, "latest_ready_kn": "a-1", "load": "BlockedByFailedLoad",
    "traffic": [{"revision": "a-2", "percent": 100}],
    "metrics": {"window_start": 1764842340.5, "window_seconds": 59.5, "target": {}, "previous": {"p95_ms": 0.000},
                "gaps": ["target requests: no sample"]}}', 'a-2', 'a-1'),
  -- trailing zeros in the times (trimmed), no load, names not fixed yet
  (4, '0.25', 1, 1, '{"observed_at": 1764842400.500, "ready": true, "latest_ready_kn": null, "load": null, "traffic": [],
    "metrics": {"window_start": 1764842340.000, "window_seconds": 60.000, "target": {"requests": 0, "errors": 0},
                "previous": {"requests": 7, "errors": 7, "p95_ms": 12345.678}, "gaps": []}}', NULL, NULL)
) v(n, f, tr, pr, o, tkn, pkn);
SELECT e.n, c.evidence::text = s.sql::text AS same_text, c.evidence = s.sql AS same_jsonb,
       c.evidence->>'content_id' = s.sql->>'content_id' AS same_id,
       c.evidence->>'content_id' = mlplat.content_id(c.evidence, 'content_id') AS id_ok,
       c.refused IS NULL AS planned, c.plan = mlplat.plan_rollout(r.contract, s.sql) AS same_plan
  FROM evidence_cases e CROSS JOIN pg_temp.ro r
  CROSS JOIN LATERAL mlplat._rollout_pass_plan(r.contract, e.f, e.tr, e.pr, e.o, e.tkn, e.pkn, 60) c
  CROSS JOIN LATERAL (SELECT mlplat.with_content_id(pg_temp.sql_evidence(r.contract, e.f::numeric, e.tr, e.pr, e.o,
                                                                        e.tkn, e.pkn)) AS sql) s
 ORDER BY e.n;
-- every number of a case, as the stored jsonb prints it
SELECT c.evidence - 'scope' - 'contract_content_id' - 'content_id' AS evidence
  FROM evidence_cases e CROSS JOIN pg_temp.ro r
  CROSS JOIN LATERAL mlplat._rollout_pass_plan(r.contract, e.f, e.tr, e.pr, e.o, e.tkn, e.pkn, 60) c
 WHERE e.n = 1;
-- the write-back row's typed reasons and fraction (built in C, no re-parsing in SQL) are what
-- _rollouts_observe made of the plan before 0.3.0: the plan's reasons sorted, its fraction's text
SELECT e.n, c.decision, c.reasons, c.next_fraction::text AS next_fraction,
       c.reasons IS NOT DISTINCT FROM (SELECT array_agg(r ORDER BY r) FROM jsonb_array_elements_text(c.plan->'reasons') r)
         AS reasons_as_before,
       c.next_fraction::text = (c.plan->>'next_fraction')::numeric::text AS fraction_as_before
  FROM evidence_cases e CROSS JOIN pg_temp.ro r
  CROSS JOIN LATERAL mlplat._rollout_pass_plan(r.contract, e.f, e.tr, e.pr, e.o, e.tkn, e.pkn, 60) c
 ORDER BY e.n;

-- Prometheus answers: only a finite number is evidence
SELECT b AS body, mlplat._prometheus_classify(s, b) AS read
  FROM (VALUES
    (200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764410400.123,"1200.5"]}]}}'),
    (200, '{"status":"success","data":{"resultType":"vector","result":[]}}'),
    (200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764410400,"NaN"]}]}}'),
    (200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764410400,"+Inf"]}]}}'),
    (200, '{"status":"success","data":{"resultType":"scalar","result":[1764410400,"3"]}}'),
    (200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}}'),
    (200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"12abc"]}]}}'),
    (200, '{"status":"success","data":{"resultType":"matrix","result":[]}}'),
    (400, '{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"}'),
    (503, '{"status":"error","errorType":"unavailable","error":"too many requests"}'),
    (502, '<html>Bad Gateway</html>'),
    (0, NULL)) AS x(s, b);
