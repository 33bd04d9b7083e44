-- start_rollout reserves the canary's GPUs (target gpus x max_replicas) from desired
-- allocations for the rollout's life: the quota counts them until the rollout ends.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
SELECT :acc FROM mlplat.create_project('surge', 6);
SELECT :acc FROM mlplat.add_artifact_location('surge', 's3://models/lm/');
SELECT :acc FROM mlplat.register_model_version('surge', 'lm', '1', 's3://models/lm/1', repeat('1', 64), 'kserve-huggingfaceserver', 'huggingface');
SELECT :acc FROM mlplat.register_model_version('surge', 'lm', '2', 's3://models/lm/2', repeat('2', 64), 'kserve-huggingfaceserver', 'huggingface');
SELECT :acc FROM mlplat.set_model_stage('surge', 'lm', '1', 'CHAMPION');
SELECT :acc FROM mlplat.set_model_stage('surge', 'lm', '2', 'CANDIDATE');
SELECT :acc FROM mlplat.deploy('surge', 'chat', 'lm', '1', 'kserve-huggingfaceserver', 1, 1, 2);
SELECT :acc FROM mlplat.deploy('surge', 'chat2', 'lm', '1', 'kserve-huggingfaceserver', 1, 1, 2);
UPDATE mlplat.deployments SET status = 'READY' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge');
SELECT project, gpu_quota, gpus_in_use FROM mlplat.project_status WHERE project = 'surge';
-- the canary of chat needs 2 more GPUs: 6 of 6, it fits and is reserved
SELECT :acc FROM mlplat.start_rollout('surge', 'chat', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT d.name, r.status, r.surge_gpus FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id
WHERE r.project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge') ORDER BY r.id;
SELECT project, gpu_quota, gpus_in_use FROM mlplat.project_status WHERE project = 'surge';
-- a second canary does not fit: refused with the figures, nothing written
SELECT :acc FROM mlplat.start_rollout('surge', 'chat2', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT count(*) AS rollouts, (SELECT latest_revision FROM mlplat.deployments WHERE name = 'chat2') AS chat2_latest_revision
FROM mlplat.rollouts WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge');
-- nor does a new deployment: the reservation is a desired allocation like any other
SELECT :acc FROM mlplat.deploy('surge', 'chat3', 'lm', '1', 'kserve-huggingfaceserver', 1, 1, 1);
-- the rollout ending (here: rolled back) releases it
UPDATE mlplat.rollouts SET status = 'ROLLING_BACK' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge');
UPDATE mlplat.rollouts SET status = 'ROLLED_BACK' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge');
-- a finished rollout stays finished: one trigger checks every status change against
-- mlplat._rollout_transitions() (docs/reconcilers.md draws it)
DO $$ BEGIN
  UPDATE mlplat.rollouts SET status = 'PROGRESSING' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge');
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, 'rollouts [0-9]+', 'rollouts N');
END $$;
SELECT project, gpu_quota, gpus_in_use FROM mlplat.project_status WHERE project = 'surge';
SELECT :acc FROM mlplat.start_rollout('surge', 'chat2', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT project, gpu_quota, gpus_in_use FROM mlplat.project_status WHERE project = 'surge';
-- a rollout of a deployment without GPUs reserves nothing
SELECT :acc FROM mlplat.deploy('surge', 'cpu', 'lm', '1', 'kserve-huggingfaceserver', 0, 1, 3);
UPDATE mlplat.deployments SET status = 'READY' WHERE name = 'cpu';
SELECT :acc FROM mlplat.start_rollout('surge', 'cpu', 'lm', '2', '{"steps": [0.1, 0.5]}');
SELECT d.name, r.status, r.surge_gpus FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id
WHERE r.project_id = (SELECT id FROM mlplat.projects WHERE name = 'surge') ORDER BY r.id;
