-- 0.3.0: the "does not exist" error of a lookup by name, defined once (mlplat._no_such);
-- _find_deployment (unchanged since 0.2.0 otherwise) raises it.  _find_run (part 89),
-- _find_campaign and revoke_evidence_signer (part 60) call it in their own parts.
CREATE FUNCTION mlplat._no_such(p_entity text, p_name text, p_hint text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704',
    MESSAGE = pg_catalog.format('%s "%s" does not exist', p_entity, pg_catalog.left(p_name, 64)),
    HINT = p_hint;
END $$;
REVOKE ALL ON FUNCTION mlplat._no_such(text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_deployment(p_project_id bigint, p_deployment text)
RETURNS mlplat.deployments LANGUAGE plpgsql STABLE AS $$
DECLARE
  d mlplat.deployments;
BEGIN
  SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = p_project_id AND x.name = p_deployment;
  IF d.id IS NULL THEN
    PERFORM mlplat._no_such('deployment', p_deployment, 'Create it with mlplat.deploy().');
  END IF;
  RETURN d;
END $$;
