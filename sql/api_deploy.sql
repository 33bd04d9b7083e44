-- mlplat API: model versions, stages, aliases; deploy, rollback, undeploy; rendering.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_mlp_owner', 'regress_mlp_dev', 'regress_mlp_viewer', 'regress_mlp_deployer',
                           'regress_mlp_outsider', 'regress_mlp_app', 'regress_mlp_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
SELECT :acc FROM mlplat.create_project('delta', 4, NULL, NULL, NULL, 'regress_mlp_owner');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/iris/');
SELECT :acc FROM mlplat.grant_role('delta', 'regress_mlp_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('delta', 'regress_mlp_deployer', 'deployer');

-- register: developers may; versions are immutable
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn', 'r1');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn', 'r1');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '1', 's3://models/iris/1b', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '2', 's3://models/iris/2', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '3', 's3://models/iris/3', repeat('c', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '9', 's3://models/iris/9', repeat('d', 64), 'kserve-tritonserver', 'onnx');
-- validation
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '4', 's3://models/iris/4', repeat('A', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '4', 's3://models/iris/4', 'abc', 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '4', 'https://user:secret@host/m', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '4', 'file:///etc/passwd', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'Iris', '4', 's3://models/iris/4', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', 'v 4', 's3://models/iris/4', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '4', 's3://models/iris/4', repeat('a', 64), 'KServe', 'sklearn');
-- artifact locations: an artifact only from the project's own locations (issue 18, finding 3)
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '20', 's3://other-tenant/iris/20', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '21', 's3://models/iris/../../other-tenant/x', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '22', 's3://models/iris/', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('delta', 'iris', '23', 's3://models/iris-evil/x', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/wine/');
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/wine');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/./wine/');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://user:pw@models/wine/');
SELECT :acc FROM mlplat.add_artifact_location('delta', E's3://models/wi\nne/');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/wine/', 'loc-1');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/wine/', 'loc-1');
SELECT :acc FROM mlplat.add_artifact_location('delta', 's3://models/wine/');
SELECT project, location, added_by FROM mlplat.artifact_location_list WHERE project = 'delta' ORDER BY location;
SELECT :acc FROM mlplat.remove_artifact_location('delta', 's3://models/wine/');
SELECT project, location FROM mlplat.artifact_location_list WHERE project = 'delta' ORDER BY location;
SELECT :acc FROM mlplat.remove_artifact_location('delta', 's3://models/wine/');
-- every add and remove is audited, saying whether it changed the list
SELECT action, detail FROM mlplat.audit_events
 WHERE project = 'delta' AND action IN ('add_artifact_location', 'remove_artifact_location') ORDER BY id;
SET ROLE regress_mlp_dev;
-- developers may not stage
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'CHAMPION');
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'CHAMPION');
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'CHAMPION');
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '2', 'CANDIDATE');
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'GOLD');
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '7', 'CANDIDATE');
-- a new CHAMPION archives the old one
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '3', 'CHAMPION');
RESET ROLE;
SELECT version, stage FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id
WHERE m.name = 'iris' ORDER BY version;
-- aliases follow the stages
SELECT a.alias, v.version, a.generation, a.status FROM mlplat.model_aliases a
JOIN mlplat.model_versions v ON v.id = a.version_id ORDER BY a.alias;
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'CANDIDATE');
SELECT :acc FROM mlplat.set_model_stage('delta', 'iris', '1', 'NONE');
RESET ROLE;
SELECT a.alias, v.version, a.generation FROM mlplat.model_aliases a
LEFT JOIN mlplat.model_versions v ON v.id = a.version_id ORDER BY a.alias;

-- deploy
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '3', 'kserve-sklearnserver', 1, 1, 2);
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '3', 'kserve-sklearnserver', 1, 1, 2, '{"LOG_LEVEL": "info"}', 'd1');
-- same key same request: stored result; same key other request: error
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '3', 'kserve-sklearnserver', 1, 1, 2, '{"LOG_LEVEL": "info"}', 'd1');
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '2', 'kserve-sklearnserver', 1, 1, 2, '{"LOG_LEVEL": "info"}', 'd1');
-- deploying what is already desired returns the existing revision
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '3', 'kserve-sklearnserver', 1, 1, 2, '{"LOG_LEVEL": "info"}');
-- a change makes a new revision
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '2', 'kserve-sklearnserver', 1, 1, 2, '{"LOG_LEVEL": "info"}');
-- checks: stage, runtime, quota, names, numbers, env
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '1', 'kserve-sklearnserver', 1, 1, 2);
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '2', 'kserve-tritonserver', 1, 1, 2);
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '2', 'kserve-sklearnserver', 1, 1, 5);
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 1, 1, 3);
SELECT :acc FROM mlplat.deploy('delta', '1web', 'iris', '2', 'kserve-sklearnserver', 0, 1, 1);
SELECT :acc FROM mlplat.deploy('delta', repeat('w', 46), 'iris', '2', 'kserve-sklearnserver', 0, 1, 1);
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', -1, 1, 1);
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 0, 3, 2);
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 0, 1, 1, '["A"]');
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 0, 1, 1, '{"A": 1}');
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 0, 1, 1, '{"1A": "x"}');
SELECT :acc FROM mlplat.deploy('delta', 'other', 'nosuch', '2', 'kserve-sklearnserver', 0, 1, 1);
-- the failed calls wrote nothing
SELECT count(*) AS deployments FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'delta';
-- lowering the allocation needs no quota; then another deployment fits
SELECT :acc FROM mlplat.deploy('delta', 'iris-web', 'iris', '2', 'kserve-sklearnserver', 1, 1, 1, '{"LOG_LEVEL": "info"}');
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 1, 1, 3);
RESET ROLE;
SELECT project, gpus_in_use, gpu_quota FROM mlplat.project_status WHERE project = 'delta';
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.set_project_quota('delta', 3);
RESET ROLE;

-- revisions: numbered per deployment, immutable, each with its rendered spec and digest
SELECT d.name, r.revision, r.intent->>'version' AS version, r.spec_digest = encode(sha256(convert_to(r.spec::text, 'UTF8')), 'hex') AS digest_ok
FROM mlplat.deployment_revisions r JOIN mlplat.deployments d ON d.id = r.deployment_id ORDER BY 1, 2;
UPDATE mlplat.deployment_revisions SET intent = '{}';
DELETE FROM mlplat.deployment_revisions;
TRUNCATE mlplat.deployment_revisions;
SELECT name, status, desired_revision, previous_revision, latest_revision, desired_gpus, generation
FROM mlplat.deployments ORDER BY name;

-- the rendered manifest: deterministic, labelled, valid against the KServe CRD
SELECT jsonb_pretty(mlplat.render_inference_service('delta', 'iris-web', 1)
                    #- '{metadata,labels,mlplat.io/instance}' #- '{metadata,annotations,mlplat.io/content-id}');
SELECT mlplat.render_inference_service('delta', 'iris-web', 1)->'metadata'->'labels'->>'mlplat.io/instance'
       = (SELECT instance_id FROM mlplat.installation) AS instance_label_ok;
-- ... carrying its own content id: that of the render without it (issue 18, finding 5)
SELECT s->'metadata'->'annotations'->>'mlplat.io/content-id'
       = mlplat.content_id(s #- '{metadata,annotations,mlplat.io/content-id}') AS content_id_ok
FROM (SELECT mlplat.render_inference_service('delta', 'iris-web', 1) AS s) x;
SELECT mlplat.render_inference_service('delta', 'iris-web') = mlplat.render_inference_service('delta', 'iris-web', 3) AS desired_is_default;
SELECT mlplat.render_inference_service('delta', 'iris-web', 99);
\pset format unaligned
\pset tuples_only on
SELECT jsonb_agg(mlplat.render_inference_service('delta', d.name, r.revision))::text
FROM mlplat.deployment_revisions r JOIN mlplat.deployments d ON d.id = r.deployment_id
\g | sh -c 'v="${SRC:-$(git rev-parse --show-toplevel)}/test/tools/validate-manifest"; [ -x "$v" ] || { echo "$v not found"; exit; }; python3 -c "import json,sys,subprocess; docs=json.load(sys.stdin); p=subprocess.run([sys.argv[1], \"-\"], input=\"\\n---\\n\".join(json.dumps(x) for x in docs), text=True, capture_output=True); print(p.returncode, p.stdout.count(\": valid\"), len(docs))" "$v"'
\pset format aligned
\pset tuples_only off
-- outsiders see no manifest
SET ROLE regress_mlp_outsider;
SELECT mlplat.render_inference_service('delta', 'iris-web');
RESET ROLE;

-- undeploy -> DELETING; repeat is a no-op
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.undeploy('delta', 'other');
SELECT :acc FROM mlplat.undeploy('delta', 'other');
-- a DELETING deployment takes a new deploy (the same intent too): a new revision, nothing to roll
-- back to; the reconciler applies it once the terminating InferenceService is gone (test/e2e)
BEGIN;
SELECT :acc FROM mlplat.deploy('delta', 'other', 'iris', '2', 'kserve-sklearnserver', 1, 1, 1);
RESET ROLE;
SELECT status, status_reason, desired_revision, previous_revision, desired_gpus FROM mlplat.deployments WHERE name = 'other';
ROLLBACK;
SET ROLE regress_mlp_deployer;
-- a DELETING deployment still holds its GPUs
SELECT :acc FROM mlplat.rollback_deployment('delta', 'iris-web');
RESET ROLE;
-- (standing in for the reconciler: the InferenceService is gone)
UPDATE mlplat.deployments SET status = 'DELETED' WHERE name = 'other';
-- rollback: the previous revision is desired again, no revision is minted; twice toggles back
SET ROLE regress_mlp_deployer;
SELECT :acc FROM mlplat.rollback_deployment('delta', 'iris-web');
SELECT :acc FROM mlplat.rollback_deployment('delta', 'iris-web');
SELECT :acc FROM mlplat.rollback_deployment('delta', 'nosuch');
SELECT :acc FROM mlplat.rollback_deployment('delta', 'other');
RESET ROLE;
SELECT count(*) AS revisions FROM mlplat.deployment_revisions;
SELECT project, deployment, status, in_flight, desired_revision, model, version, gpus
FROM mlplat.deployment_status WHERE project = 'delta' ORDER BY 2;
-- the audit trail names the person, the action and the revision
SELECT actor, action, entity, detail->>'revision' AS revision, detail ? 'unchanged' AS unchanged
FROM mlplat.audit_events WHERE project = 'delta' AND action IN ('deploy', 'rollback_deployment', 'undeploy') ORDER BY id;
