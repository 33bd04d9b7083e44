-- mlplat API: runs, pipeline runs, cancellation; rollout intents.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_mlp_owner', 'regress_mlp_dev', 'regress_mlp_viewer', 'regress_mlp_deployer',
                           'regress_mlp_outsider', 'regress_mlp_app', 'regress_mlp_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
SELECT :acc FROM mlplat.create_project('epsilon', 4, NULL, NULL, NULL, 'regress_mlp_owner');
SELECT :acc FROM mlplat.add_artifact_location('epsilon', 'hf://acme/');
SELECT :acc FROM mlplat.grant_role('epsilon', 'regress_mlp_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('epsilon', 'regress_mlp_viewer', 'viewer');
SELECT :acc FROM mlplat.grant_role('epsilon', 'regress_mlp_deployer', 'deployer');

SET ROLE regress_mlp_viewer;
SELECT :acc FROM mlplat.start_run('epsilon', 'train-1', '{"image": "python:3.12"}');
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.start_run('epsilon', 'train-1', '{"image": "python:3.12", "command": ["python", "train.py"], "args": ["--epochs", "3"], "env": {"SEED": "1"}, "gpus": 2, "cpu": "4", "memory": "16Gi"}', 'run-1');
SELECT :acc FROM mlplat.start_run('epsilon', 'train-1', '{"image": "python:3.12", "command": ["python", "train.py"], "args": ["--epochs", "3"], "env": {"SEED": "1"}, "gpus": 2, "cpu": "4", "memory": "16Gi"}', 'run-1');
-- the same run again without a key: the existing run; a different spec under the same name: refused
SELECT :acc FROM mlplat.start_run('epsilon', 'train-1', '{"image": "python:3.12", "command": ["python", "train.py"], "args": ["--epochs", "3"], "env": {"SEED": "1"}, "gpus": 2, "cpu": "4", "memory": "16Gi"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'train-1', '{"image": "python:3.13"}');
-- spec validation
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '[]');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"command": ["x"]}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "has space"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpu": 1}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpus": true}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpus": "NaN"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpus": "Infinity"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpus": 0.5}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "gpus": 1e9}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "cpu": 2}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "memory": "lots"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "command": "python train.py"}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "args": [1, 2]}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', '{"image": "x", "env": {"A": true}}');
SELECT :acc FROM mlplat.start_run('epsilon', 'bad', jsonb_build_object('image', 'x', 'args', jsonb_build_array(repeat('y', 70000))));
SELECT :acc FROM mlplat.start_run('epsilon', 'Bad_Name', '{"image": "x"}');
-- GPUs of active runs count against the quota
SELECT :acc FROM mlplat.start_run('epsilon', 'train-2', '{"image": "x", "gpus": 3}');
SELECT count(*) AS runs FROM mlplat.runs;

-- pipelines: unique names, known dependencies, no cycles (the cycle is named)
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '{}');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"image": "x"}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "a", "image": "x", "depends_on": ["b"]}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "a", "image": "x", "depends_on": ["a"]}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "prep", "image": "x"}, {"name": "a", "image": "x", "depends_on": ["prep", "c"]}, {"name": "b", "image": "x", "depends_on": ["a"]}, {"name": "c", "image": "x", "depends_on": ["b"]}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "a", "image": "x", "depends_on": "b"}, {"name": "b", "image": "x"}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "a", "image": "x", "retries": 3}]');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "prep", "image": "x"}, {"name": "train", "image": "y", "gpus": 1, "depends_on": ["prep"]}, {"name": "eval", "image": "z", "depends_on": ["prep", "train"]}]', 'p-1');
SELECT :acc FROM mlplat.start_pipeline_run('epsilon', 'pipe', '[{"name": "prep", "image": "x"}, {"name": "train", "image": "y", "gpus": 1, "depends_on": ["prep"]}, {"name": "eval", "image": "z", "depends_on": ["prep", "train"]}]', 'p-1');
RESET ROLE;
SELECT s.name, s.ordinal, s.depends_on, s.spec FROM mlplat.run_steps s JOIN mlplat.runs r ON r.id = s.run_id
WHERE r.name = 'pipe' ORDER BY s.ordinal;
SELECT project, gpus_in_use FROM mlplat.project_status WHERE project = 'epsilon';

-- cancel: CANCEL_REQUESTED until the workflow is confirmed gone; finished runs cannot be cancelled
SET ROLE regress_mlp_viewer;
SELECT :acc FROM mlplat.cancel_run('epsilon', 'train-1');
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.cancel_run('epsilon', 'train-1');
SELECT :acc FROM mlplat.cancel_run('epsilon', 'train-1');
SELECT :acc FROM mlplat.cancel_run('epsilon', 'nosuch');
RESET ROLE;
UPDATE mlplat.runs SET status = 'SUCCEEDED' WHERE name = 'pipe';
-- a finished run stays finished (mlplat._run_transitions, docs/reconcilers.md)
DO $$ BEGIN
  UPDATE mlplat.runs SET status = 'RUNNING' WHERE name = 'pipe';
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, 'runs [0-9]+', 'runs N');
END $$;
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.cancel_run('epsilon', 'pipe');
RESET ROLE;
SELECT project, run, kind, status, in_flight, gpus, steps, created_by FROM mlplat.run_status
WHERE project = 'epsilon' ORDER BY run;
-- a cancelled-but-unconfirmed run still holds its GPUs; once CANCELLED it does not
SELECT project, gpus_in_use FROM mlplat.project_status WHERE project = 'epsilon';
UPDATE mlplat.runs SET status = 'CANCELLED' WHERE name = 'train-1';
SELECT project, gpus_in_use FROM mlplat.project_status WHERE project = 'epsilon';

-- rollouts (intent only)
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.register_model_version('epsilon', 'lm', '1', 'hf://acme/lm-1', repeat('1', 64), 'kserve-huggingfaceserver', 'huggingface');
SELECT :acc FROM mlplat.register_model_version('epsilon', 'lm', '2', 'hf://acme/lm-2', repeat('2', 64), 'kserve-huggingfaceserver', 'huggingface');
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.set_model_stage('epsilon', 'lm', '1', 'CHAMPION');
SELECT :acc FROM mlplat.deploy('epsilon', 'chat', 'lm', '1', 'kserve-huggingfaceserver', 0, 1, 2);
-- a rollout needs a CANDIDATE or CHAMPION version: version 2 is still NONE
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT :acc FROM mlplat.set_model_stage('epsilon', 'lm', '2', 'CANDIDATE');
-- and a READY or DRIFTED deployment: chat is still DEPLOYING, then FAILED
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1, 0.5]}');
RESET ROLE;
UPDATE mlplat.deployments SET status = 'FAILED' WHERE name = 'chat';
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT count(*) AS rollouts_started FROM mlplat.rollout_status WHERE deployment = 'chat';
RESET ROLE;
-- DRIFTED (its objects differ from its revision): from here on the policy decides (the
-- valid one below, 'ro-1', is accepted); READY accepts the second rollout further down
UPDATE mlplat.deployments SET status = 'DRIFTED' WHERE name = 'chat';
SET ROLE regress_mlp_deployer;
-- policy validation
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '[]');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": []}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0]}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [1.5]}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.5, 0.2]}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1, "0.5"]}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1, 0.5], "ceiling": 0.25}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "min_samples": true}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "min_samples": 2.5}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "window_seconds": 1}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "max_error_rate": 2}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "max_p95_ms": 0}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "max_p95_ratio": 0.5}');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1], "error_budget": 1}');
SELECT :acc FROM mlplat.promote_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.05, 0.25, 0.5], "ceiling": 0.5, "min_samples": 500, "window_seconds": 120, "max_error_rate": 0.02, "max_p95_ms": 250, "max_error_rate_ratio": 1.5, "max_p95_ratio": 1.2}', 'ro-1');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.05, 0.25, 0.5], "ceiling": 0.5, "min_samples": 500, "window_seconds": 120, "max_error_rate": 0.02, "max_p95_ms": 250, "max_error_rate_ratio": 1.5, "max_p95_ratio": 1.2}', 'ro-1');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1]}');
-- while a rollout runs, the deployment takes no other changes
SELECT :acc FROM mlplat.deploy('epsilon', 'chat', 'lm', '1', 'kserve-huggingfaceserver', 0, 1, 3);
SELECT :acc FROM mlplat.undeploy('epsilon', 'chat');
SELECT :acc FROM mlplat.promote_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.promote_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.abort_rollout('epsilon', 'chat');
RESET ROLE;
SELECT project, deployment, status, requested_action, in_flight, baseline_revision, target_revision, policy
FROM mlplat.rollout_status WHERE project = 'epsilon';
-- the canary revision exists but is not desired; the rollout controller decides
SELECT desired_revision, latest_revision FROM mlplat.deployments WHERE name = 'chat';
-- (standing in for the rollout reconciler) the first rollout finished; a second one can be aborted
UPDATE mlplat.rollouts SET status = 'PROMOTED';
UPDATE mlplat.deployments SET status = 'READY' WHERE name = 'chat';
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.abort_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.start_rollout('epsilon', 'chat', 'lm', '2', '{"steps": [0.1]}');
SELECT :acc FROM mlplat.abort_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.abort_rollout('epsilon', 'chat');
SELECT :acc FROM mlplat.promote_rollout('epsilon', 'chat');
RESET ROLE;
SELECT status, requested_action, target_revision FROM mlplat.rollout_status WHERE project = 'epsilon' ORDER BY rollout_id;
SELECT action, count(*) FROM mlplat.audit_events WHERE project = 'epsilon' GROUP BY 1 ORDER BY 1;
