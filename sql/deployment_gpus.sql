-- The deployments' GPUs the quota reads (mlplat.deployment_gpus, kept by trigger on
-- deployments) against the sum over the deployments themselves, after each kind of change:
-- a reservation (slot row), a lower allocation and the reconciler's DELETED (journal rows,
-- folded by the next write), a redeploy of the same allocation (nothing written).
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
SELECT :acc FROM mlplat.create_project('gc', 10);
SELECT :acc FROM mlplat.add_artifact_location('gc', 's3://models/gc/');
SELECT :acc FROM mlplat.register_model_version('gc', 'm', '1', 's3://models/gc/1', repeat('1', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.set_model_stage('gc', 'm', '1', 'CANDIDATE');
CREATE FUNCTION pg_temp.gc() RETURNS TABLE (counted bigint, summed bigint, in_use bigint, journal_rows bigint, slot_rows bigint)
LANGUAGE sql AS $$
  SELECT (SELECT coalesce(sum(c.gpus), 0) FROM mlplat.deployment_gpus c WHERE c.project_id = p.id),
         (SELECT coalesce(sum(d.desired_gpus), 0) FROM mlplat.deployments d WHERE d.project_id = p.id AND d.status <> 'DELETED'),
         mlplat._gpus_in_use(p.id),
         (SELECT count(*) FROM mlplat.deployment_gpus c WHERE c.project_id = p.id AND c.slot IS NULL),
         (SELECT count(*) FROM mlplat.deployment_gpus c WHERE c.project_id = p.id AND c.slot IS NOT NULL)
    FROM mlplat.projects p WHERE p.name = 'gc'
$$;
SELECT * FROM pg_temp.gc();
-- new deployments: exact reservations (every quota slot), counted in slot row 0
SELECT :acc FROM mlplat.deploy('gc', 'gpa', 'm', '1', 'kserve-sklearnserver', 2, 1, 2);
SELECT :acc FROM mlplat.deploy('gc', 'gpb', 'm', '1', 'kserve-sklearnserver', 1, 1, 1);
SELECT * FROM pg_temp.gc();
-- a redeploy of the same allocation writes no counter row
CREATE TEMP TABLE gc_rows AS SELECT ctid::text AS t, xmin::text AS x FROM mlplat.deployment_gpus;
SELECT :acc FROM mlplat.deploy('gc', 'gpa', 'm', '1', 'kserve-sklearnserver', 2, 1, 2, '{"K": "v"}');
SELECT (SELECT array_agg(t || x ORDER BY t) FROM gc_rows)
     = (SELECT array_agg(ctid::text || xmin::text ORDER BY ctid::text) FROM mlplat.deployment_gpus) AS counter_untouched;
-- a lower allocation takes no reservation: a journal row
SELECT :acc FROM mlplat.deploy('gc', 'gpa', 'm', '1', 'kserve-sklearnserver', 1, 1, 1);
SELECT * FROM pg_temp.gc();
-- the rollback raises it again (a reservation), folding the journal into slot row 0
SELECT :acc FROM mlplat.rollback_deployment('gc', 'gpa');
SELECT * FROM pg_temp.gc();
-- undeploy: DELETING still counts; the reconciler's DELETED releases (a journal row)
SELECT :acc FROM mlplat.undeploy('gc', 'gpb');
SELECT * FROM pg_temp.gc();
UPDATE mlplat.deployments SET status = 'DELETED' WHERE name = 'gpb';
SELECT * FROM pg_temp.gc();
-- another release folds the journal row before it into its own: still one
SELECT :acc FROM mlplat.deploy('gc', 'gpc', 'm', '1', 'kserve-sklearnserver', 3, 1, 1);
SELECT :acc FROM mlplat.undeploy('gc', 'gpc');
UPDATE mlplat.deployments SET status = 'DELETED' WHERE name = 'gpc';
SELECT * FROM pg_temp.gc();
-- deployed again after DELETED: a reservation
SELECT :acc FROM mlplat.deploy('gc', 'gpb', 'm', '1', 'kserve-sklearnserver', 1, 1, 1);
SELECT * FROM pg_temp.gc();
-- rows written and deleted outside the API count too
INSERT INTO mlplat.deployments (project_id, name, desired_gpus, status)
SELECT id, 'gpraw', 2, 'PENDING' FROM mlplat.projects WHERE name = 'gc';
SELECT * FROM pg_temp.gc();
DELETE FROM mlplat.deployments WHERE name = 'gpraw';
SELECT * FROM pg_temp.gc();
-- the quota reads the counter: 5 of 10 in use, 5 more fit, then nothing; a deployment's own
-- allocation is not counted twice when it grows
SELECT :acc FROM mlplat.deploy('gc', 'gpd', 'm', '1', 'kserve-sklearnserver', 5, 1, 1);
SELECT :acc FROM mlplat.deploy('gc', 'gpe', 'm', '1', 'kserve-sklearnserver', 1, 1, 1);
SELECT :acc FROM mlplat.deploy('gc', 'gpd', 'm', '1', 'kserve-sklearnserver', 6, 1, 1);
SELECT :acc FROM mlplat.deploy('gc', 'gpb', 'm', '1', 'kserve-sklearnserver', 0, 1, 1);
SELECT :acc FROM mlplat.deploy('gc', 'gpd', 'm', '1', 'kserve-sklearnserver', 6, 1, 1);
SELECT * FROM pg_temp.gc();
SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'gc';
-- internal: no privileges, row-level security on
SELECT relrowsecurity, relacl FROM pg_class WHERE oid = 'mlplat.deployment_gpus'::regclass;
