-- bench/plan_rollout/contracts.sql — the 1000 contracts both run.sh and outputs.sh decide
-- against (table contracts(n, contract)): the same policy, a scope of their own each.
CREATE TABLE contracts AS
SELECT n, mlplat.with_content_id(jsonb_build_object(
  'scope', jsonb_build_object('project', 'bench', 'deployment', 'd' || n,
           'target_revision', 'd' || n || '-r2', 'previous_revision', 'd' || n || '-r1',
           'model_digest', 'sha256:' || encode(sha256(('m' || n)::bytea), 'hex'),
           'config_digest', 'sha256:' || encode(sha256(('c' || n)::bytea), 'hex')),
  'policy', '{"steps":[0.05,0.2,0.5,1],"ceiling_fraction":1,"min_samples":500,"window_seconds":300,
              "max_error_rate":0.01,"max_p95_ms":250,"max_error_rate_increase":0.005,
              "max_p95_increase_ratio":1.25,"health_max_age_seconds":60,"surge_replicas":1,
              "rollback_headroom_replicas":2,"capacity_quota_replicas":12}'::jsonb)) AS contract
FROM generate_series(1, 1000) n;
