-- mlplat API: who sees what (tables, views, functions, COPY) and who may write.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_mlp_owner', 'regress_mlp_dev', 'regress_mlp_zviewer', 'regress_mlp_deployer',
                           'regress_mlp_outsider', 'regress_mlp_app', 'regress_mlp_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_mlp_other') THEN CREATE ROLE regress_mlp_other; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_mlp_zviewer') THEN CREATE ROLE regress_mlp_zviewer; END IF;
END $$;
SELECT :acc FROM mlplat.create_project('zeta', 2, NULL, NULL, NULL, 'regress_mlp_owner');
SELECT :acc FROM mlplat.create_project('eta', 2, NULL, NULL, NULL, 'regress_mlp_other');
SELECT :acc FROM mlplat.add_artifact_location('zeta', 's3://z/');
SELECT :acc FROM mlplat.add_artifact_location('eta', 's3://e/');
SELECT :acc FROM mlplat.grant_role('zeta', 'regress_mlp_zviewer', 'viewer');
SELECT :acc FROM mlplat.register_model_version('zeta', 'm', '1', 's3://z/m1', repeat('e', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.set_model_stage('zeta', 'm', '1', 'CHAMPION');
SELECT :acc FROM mlplat.deploy('zeta', 'zweb', 'm', '1', 'kserve-sklearnserver');
SELECT :acc FROM mlplat.start_run('zeta', 'zrun', '{"image": "x"}');
SELECT :acc FROM mlplat.register_model_version('eta', 'm', '1', 's3://e/m1', repeat('f', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.set_model_stage('eta', 'm', '1', 'CHAMPION');
SELECT :acc FROM mlplat.deploy('eta', 'eweb', 'm', '1', 'kserve-sklearnserver');
SELECT :acc FROM mlplat.start_run('eta', 'erun', '{"image": "x"}');

-- a viewer of zeta sees zeta only, through tables and views
SET ROLE regress_mlp_zviewer;
SELECT name FROM mlplat.projects WHERE name IN ('zeta', 'eta') ORDER BY 1;
SELECT name FROM mlplat.deployments WHERE name IN ('zweb', 'eweb') ORDER BY 1;
SELECT d.name, r.revision FROM mlplat.deployment_revisions r JOIN mlplat.deployments d ON d.id = r.deployment_id
WHERE d.name IN ('zweb', 'eweb');
SELECT name FROM mlplat.runs WHERE name IN ('zrun', 'erun');
SELECT artifact_uri FROM mlplat.model_versions WHERE artifact_uri IN ('s3://z/m1', 's3://e/m1');
SELECT count(*) FILTER (WHERE project = 'zeta') > 0 AS sees_zeta, count(*) FILTER (WHERE project = 'eta') AS eta_events
FROM mlplat.audit_events;
SELECT project FROM mlplat.project_status WHERE project IN ('zeta', 'eta');
SELECT project, deployment, status FROM mlplat.deployment_status WHERE project IN ('zeta', 'eta');
SELECT project, run FROM mlplat.run_status WHERE project IN ('zeta', 'eta');
SELECT count(*) FILTER (WHERE project = 'zeta') > 0 AS sees_zeta, count(*) FILTER (WHERE project = 'eta') AS eta_events
FROM mlplat.audit_log;
SELECT principal FROM mlplat.members ORDER BY 1;
-- COPY goes through the same policies
COPY (SELECT name FROM mlplat.deployments WHERE name IN ('zweb', 'eweb')) TO STDOUT;
COPY mlplat.runs (name) TO STDOUT;
-- functions: another project's manifest is not readable; nothing is writable
SELECT mlplat.render_inference_service('eta', 'eweb');
SELECT :acc FROM mlplat.undeploy('eta', 'eweb');
SELECT :acc FROM mlplat.undeploy('zeta', 'zweb');
INSERT INTO mlplat.projects (name, gpu_quota) VALUES ('sneaky', 1);
UPDATE mlplat.deployments SET status = 'READY';
DELETE FROM mlplat.runs;
COPY mlplat.projects (name, gpu_quota) FROM STDIN;
sneaky	1
\.
SELECT * FROM mlplat.idempotency_keys;
SELECT * FROM mlplat.impersonators;
SELECT mlplat._authorize('view', 'eta');
SELECT mlplat._audit('deploy', 'eta', NULL, NULL, NULL, NULL, NULL, NULL);
SELECT mlplat._wake_on_commit('deployments');
-- policies are readable data
SELECT role, count(*) FROM mlplat.policies GROUP BY 1 ORDER BY 1;
RESET ROLE;

-- an outsider sees nothing at all
SET ROLE regress_mlp_outsider;
SELECT (SELECT count(*) FROM mlplat.projects) AS projects, (SELECT count(*) FROM mlplat.deployments) AS deployments,
       (SELECT count(*) FROM mlplat.audit_log) AS audit, (SELECT count(*) FROM mlplat.deployment_status) AS status;
RESET ROLE;

-- policies are data: an administrator can let viewers cancel runs
INSERT INTO mlplat.policies (role, action) VALUES ('viewer', 'cancel_run');
SET ROLE regress_mlp_zviewer;
SELECT :acc FROM mlplat.cancel_run('zeta', 'zrun');
RESET ROLE;
DELETE FROM mlplat.policies WHERE role = 'viewer' AND action = 'cancel_run';

-- the audit trail refuses changes, even from its owner
UPDATE mlplat.audit_events SET actor = 'someone else';
DELETE FROM mlplat.audit_events;
TRUNCATE mlplat.audit_events;
