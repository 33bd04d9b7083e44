-- 0.2.0 -> 0.3.0, part 99 (z_api_shape2): a lookup's "not there" decided once (issue 19).
-- Named to run after the other 99 parts: it replaces what 99_no_such defines.
--
-- mlplat._found (sql/install/14_api_core.sql): the row a finder's one query found, or 42704.
-- The finders that each held their own IF ... RAISE (_find_deployment, _find_run,
-- _find_campaign, _find_candidate, _find_artifact, _lab_run_of; parts 99_no_such, 89, 60 and
-- 65 created them) in their final form, with the same errors as before.

CREATE FUNCTION mlplat._found(p_row anyelement, p_entity text, p_name text, p_hint text, p_message text DEFAULT NULL)
RETURNS anyelement LANGUAGE plpgsql AS $$
BEGIN
  IF p_row IS NULL AND p_message IS NULL THEN
    PERFORM mlplat._no_such(p_entity, p_name, p_hint);
  ELSIF p_row IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = p_message, HINT = p_hint;
  END IF;
  RETURN p_row;
END $$;

-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._found(anyelement, text, text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_deployment(p_project_id bigint, p_deployment text)
RETURNS mlplat.deployments LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.deployments x WHERE x.project_id = p_project_id AND x.name = p_deployment),
                       'deployment', p_deployment, 'Create it with mlplat.deploy().');
END $$;

CREATE OR REPLACE FUNCTION mlplat._find_run(p_project_id bigint, p_run text)
RETURNS mlplat.runs LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.runs x WHERE x.project_id = p_project_id AND x.name = p_run),
                       'run', p_run, 'See mlplat.run_status for the project''s runs.');
END $$;

CREATE OR REPLACE FUNCTION mlplat._find_campaign(p_project_id bigint, p_campaign text) RETURNS mlplat.campaigns
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaigns x WHERE x.project_id = p_project_id AND x.name = p_campaign),
                       'campaign', p_campaign, 'See mlplat.campaign_status for the project''s campaigns.');
END $$;

CREATE OR REPLACE FUNCTION mlplat._find_candidate(p_campaign mlplat.campaigns, p_candidate text) RETURNS mlplat.campaign_candidates
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaign_candidates x WHERE x.campaign_id = p_campaign.id AND x.name = p_candidate),
                       NULL, NULL, 'See mlplat.campaign_candidate_status.',
                       pg_catalog.format('candidate "%s" does not exist in campaign "%s"', pg_catalog.left(p_candidate, 64), p_campaign.name));
END $$;

CREATE OR REPLACE FUNCTION mlplat._find_artifact(p_project_id bigint, p_artifact_id bigint) RETURNS mlplat.optimized_artifacts
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.optimized_artifacts x WHERE x.id = p_artifact_id AND x.project_id = p_project_id),
                       NULL, NULL, 'See mlplat.optimized_artifact_status.', pg_catalog.format('optimized artifact %s does not exist', p_artifact_id));
END $$;

CREATE OR REPLACE FUNCTION mlplat._lab_run_of(p_project_id bigint, p_id bigint) RETURNS mlplat.lab_runs
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.lab_runs x WHERE x.id = p_id AND x.project_id = p_project_id), NULL, NULL,
                       'Lab runs are identified by their id in the project (mlplat.lab_run_status).', 'lab run does not exist');
END $$;
