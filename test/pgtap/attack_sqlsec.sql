-- pgTAP: hostile cases of issue 18 on the SQL side (findings 3, 4, 6, 7, 9): what a tenant,
-- an application role or any login can try through SQL alone.  Every case is listed in
-- docs/reliability.md, "Attack suite".  Project "sqb" carries the marker "sqb-private" so a
-- leak of its rows or of the platform's setup can be searched for.
BEGIN;
SELECT plan(44);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['sq_a', 'sq_b', 'sq_app', 'sq_scoped', 'sq_boss', 'sq_noright', 'sq_dep'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('sq_boss') ON CONFLICT DO NOTHING;
INSERT INTO mlplat.impersonators (app_role) VALUES ('sq_app') ON CONFLICT DO NOTHING;
INSERT INTO mlplat.impersonators (app_role, projects) VALUES ('sq_scoped', ARRAY['sqa']) ON CONFLICT DO NOTHING;

DO $$ BEGIN
  PERFORM mlplat.create_project('sqa', 8, NULL, NULL, NULL, 'sq_a');
  PERFORM mlplat.create_project('sqb', 8, NULL, NULL, NULL, 'sq_b');
  PERFORM mlplat.create_project('sqc', 8, NULL, NULL, NULL, 'sq_a');
  PERFORM mlplat.grant_role('sqa', 'alice', 'deployer');
  PERFORM mlplat.grant_role('sqb', 'alice', 'deployer');
  PERFORM mlplat.grant_role('sqa', 'sq_dep', 'deployer');
  PERFORM mlplat.add_artifact_location('sqa', 's3://sqa-models/');
  PERFORM mlplat.add_artifact_location('sqb', 's3://sqb-private/models/');
  PERFORM mlplat.register_model_version('sqb', 'm', '1', 's3://sqb-private/models/m/1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
END $$;

-- Run sql as role r (optionally with mlplat.on_behalf_of = obo); "<SQLSTATE or ok> rows<+delta>:
-- <message>", delta being the change in the number of rows over every mlplat table.
CREATE FUNCTION public.sq_rows() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE t regclass; n bigint; total bigint := 0;
BEGIN
  FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'p') LOOP
    EXECUTE format('SELECT count(*) FROM %s', t) INTO n;
    total := total + n;
  END LOOP;
  RETURN total;
END $$;
CREATE FUNCTION public.sq_do(r text, sql text, obo text DEFAULT '') RETURNS text LANGUAGE plpgsql AS $$
DECLARE before bigint := public.sq_rows();
BEGIN
  BEGIN
    PERFORM set_config('mlplat.on_behalf_of', obo, true);
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE sql;
    RESET ROLE;
    PERFORM set_config('mlplat.on_behalf_of', '', true);
  EXCEPTION WHEN OTHERS THEN
    RESET ROLE;
    PERFORM set_config('mlplat.on_behalf_of', '', true);
    RETURN SQLSTATE || ' rows' || to_char(public.sq_rows() - before, 'SGFM0') || ': ' || SQLERRM;
  END;
  RETURN format('ok rows%s', to_char(public.sq_rows() - before, 'SGFM0'));
END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;

-- ---------------------------------------------------------------- finding 4: impersonation

SELECT matches(public.sq_do('sq_app', $$SELECT mlplat.create_project('sqz', 1)$$, 'sq_boss'),
               '^42501 rows\+0: role "sq_app" may not act on behalf of an administrator',
               'an impersonator acting for an administrator cannot create a project; nothing written');
SELECT matches(public.sq_do('sq_app', $$SELECT mlplat.set_project_quota('sqb', 9)$$, 'sq_boss'),
               '^42501 rows\+0: ', '... nor act as the administrator in a project it has no business in');
SELECT matches(public.sq_do('sq_app', $$SELECT count(*) FROM mlplat.projects$$, 'sq_boss'),
               '^42501 ', '... nor read every project as the administrator');
SELECT matches(public.sq_do('sq_scoped', $$SELECT mlplat.create_project('sqz', 1)$$, 'sq_boss'),
               '^42501 rows\+0: ', 'a scoped impersonator cannot act for an administrator either');
SELECT is(public.sq_do('sq_app', $$SELECT mlplat.start_run('sqb', 'r-app', '{"image": "x:1"}')$$, 'alice'),
          'ok rows+3', 'an impersonator without a project list acts for alice in any of her projects');
SELECT is(public.sq_do('sq_scoped', $$SELECT mlplat.start_run('sqa', 'r-scoped', '{"image": "x:1"}')$$, 'alice'),
          'ok rows+3', 'an impersonator limited to sqa acts for alice in sqa ...');
SELECT matches(public.sq_do('sq_scoped', $$SELECT mlplat.start_run('sqb', 'r-scoped', '{"image": "x:1"}')$$, 'alice'),
               '^42501 rows\+0: permission denied: start_run on project "sqb"',
               '... and is refused in sqb although alice may act there; nothing written');
SET LOCAL mlplat.on_behalf_of = 'alice';
SET LOCAL ROLE sq_scoped;
SELECT is((SELECT array_agg(name ORDER BY name) FROM mlplat.projects), ARRAY['sqa'],
          'reading as alice through the scoped impersonator shows only sqa');
SELECT is((SELECT count(*) FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id WHERE p.name = 'sqb'), 0::bigint,
          'none of sqb''s runs');
RESET ROLE;
RESET mlplat.on_behalf_of;

-- ---------------------------------------------------------------- finding 3: artifact locations

SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', '1', 's3://sqb-private/models/m/1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: must be an object under one of the artifact locations of project "sqa" \(s3://sqa-models/\)',
               'A''s owner cannot register B''s artifact (the check would read it with the platform''s credentials); nothing written');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', '1', 's3://sqa-models/../sqb-private/models/m/1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: ', '... nor reach it with ".." segments from its own location');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', '1', 's3://sqa-models2/x', repeat('b', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: ', '... nor from a bucket whose name merely starts like its location');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqc', 'm', '1', 's3://sqa-models/m/1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: project "sqc" has no artifact location',
               'a project without locations refuses every registration');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.add_artifact_location('sqa', 's3://sqb-private/')$$),
               '^42501 rows\+0: permission denied: add_artifact_location on project "sqa"',
               'A''s owner cannot add a location over B''s (the bucket) ...');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.add_artifact_location('sqa', 's3://sqb-private/models/m/')$$),
               '^42501 rows\+0: ', '... nor inside it');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.add_artifact_location('sqb', 's3://sqa-models/')$$),
               '^42501 rows\+0: permission denied: set_artifact_locations on project "sqb"', '... nor add one to B');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.remove_artifact_location('sqb', 's3://sqb-private/models/')$$),
               '^42501 rows\+0: ', '... nor remove B''s');
SELECT matches(public.sq_do('sq_dep', $$SELECT mlplat.add_artifact_location('sqa', 's3://sqa-models/more/')$$),
               '^42501 rows\+0: permission denied: set_artifact_locations on project "sqa"', 'a deployer cannot add a location');
SELECT is(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', '1', 's3://sqa-models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn')$$),
          'ok rows+4', 'inside its own location A registers (model, version, audit, span)');
SELECT is(public.sq_do('postgres', $$SELECT mlplat.add_artifact_location('sqc', 's3://sqb-private/models/shared/')$$), 'ok rows+3',
          'an administrator may let a project share another''s prefix (location, audit, span)');
SELECT is(public.sq_do('sq_a', $$SELECT count(*) FROM mlplat.artifact_locations$$), 'ok rows+0', 'A reads the locations table ...');
SET LOCAL ROLE sq_a;
SELECT is((SELECT array_agg(location ORDER BY location) FROM mlplat.artifact_locations),
          ARRAY['s3://sqa-models/', 's3://sqb-private/models/shared/'], '... and sees only its own projects'' locations');
SELECT is((SELECT count(*) FROM mlplat.artifact_location_list WHERE project = 'sqb'), 0::bigint, 'none of B''s through the view');
RESET ROLE;

-- ---------------------------------------------------------------- finding 7: setup details

INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, desired_digest, observed_digest,
                                     http_status, error, epoch, controller)
VALUES ('deployments', 'deployment', 1, 'sqb', 'VERIFY', 'FAILED', repeat('b', 64), repeat('c', 64), 404,
        'artifact s3://sqb-private/models/m/1 not found in the object store (HTTP 404)', 1, 'test');
SELECT is(public.sq_do('sq_b', $$SELECT count(*) FROM mlplat.admin_ledger$$), 'ok rows+0', 'a tenant may query the administrators'' ledger view ...');
SET LOCAL ROLE sq_b;
SELECT is((SELECT count(*) FROM mlplat.admin_ledger), 0::bigint, '... and reads nothing from it, not even its own project''s rows');
SELECT throws_ok($$SELECT count(*) FROM mlplat.reconcile_ledger$$, '42501', NULL, 'the ledger table itself is refused to a tenant');
RESET ROLE;
SET LOCAL ROLE sq_boss;
SELECT is((SELECT observed_digest FROM mlplat.admin_ledger WHERE project = 'sqb' AND action = 'VERIFY'), repeat('c', 64),
          'a principal in mlplat.admins reads the detail (the digest found) there');
RESET ROLE;

CREATE TEMP TABLE sq_setup_settings AS
  SELECT name FROM pg_settings WHERE name ~ '^mlplat\.' AND name ~ '(_endpoint|_url|_file)$';
GRANT SELECT ON sq_setup_settings TO PUBLIC;
SELECT ok((SELECT count(*) FROM sq_setup_settings WHERE name IN ('mlplat.otlp_endpoint', 'mlplat.s3_endpoint')) = 2,
          'the endpoint settings exist (so the checks below can fail)');
SET LOCAL ROLE sq_noright;
SELECT is((SELECT array_agg(name ORDER BY name) FROM pg_settings WHERE name IN (SELECT name FROM sq_setup_settings)), NULL,
          'no endpoint, URL or file setting (the OTLP collector included) is visible in pg_settings to an ordinary role');
RESET ROLE;
SELECT matches(public.tap_api_try('sq_noright', $$SHOW mlplat.otlp_endpoint$$, true), '^42501: ',
               'SHOW mlplat.otlp_endpoint is refused to an ordinary role');
SELECT matches(public.tap_api_try('sq_a', $$SELECT current_setting('mlplat.otlp_endpoint')$$, true), '^42501: ',
               'current_setting of the OTLP endpoint is refused to a project owner');

-- ---------------------------------------------------------------- finding 9: inputs that travel outward

SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.grant_role('sqa', 'system:anonymous', 'viewer')$$),
               '^22023 rows\+0: invalid principal: must not start with "system:"',
               'grant_role to system:anonymous (every unauthenticated request) is refused; nothing written');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.grant_role('sqa', 'system:serviceaccount:kube-system:default', 'owner')$$),
               '^22023 rows\+0: invalid principal', 'a service account of another namespace is refused');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.grant_role('sqa', ' System:Masters', 'owner')$$),
               '^22023 rows\+0: invalid principal', 'whatever the case and leading blanks');
SELECT throws_ok($$SELECT mlplat.create_project('sqsys', 1, NULL, NULL, NULL, 'system:kube-controller-manager')$$, '22023',
                 'invalid owner: must not start with "system:", the prefix Kubernetes reserves for its own users, groups and service accounts',
                 'create_project with a system: owner is refused');
SELECT is(public.sq_do('sq_a', $$SELECT mlplat.grant_role('sqa', 'oidc:carol', 'viewer')$$), 'ok rows+3',
          'a principal with another prefix (an OIDC username prefix) is granted');

SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.start_run('sqa', 'tpl1', '{"image": "x:1", "command": ["echo", "{{workflow.name}}"]}')$$),
               '^22023 rows\+0: invalid spec.command: must not contain "\{\{"', 'Argo template syntax in command is refused, naming the field');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.start_run('sqa', 'tpl2', '{"image": "x:1", "args": ["{{=sprig.env(\"HOME\")}}"]}')$$),
               '^22023 rows\+0: invalid spec.args: ', 'an Argo expression template in args is refused');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.start_run('sqa', 'tpl3', '{"image": "x:1", "env": {"TOKEN": "{{workflow.serviceAccountName}}"}}')$$),
               '^22023 rows\+0: invalid spec.env: ', 'a template in an env value is refused');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.start_run('sqa', 'tpl4', '{"image": "x:{{workflow.uid}}"}')$$),
               '^22023 rows\+0: invalid spec.image: ', 'a template in the image is refused');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.start_pipeline_run('sqa', 'tpl5', '[{"name": "a", "image": "x:1", "args": ["{{inputs.parameters.p}}"]}]')$$),
               '^22023 rows\+0: invalid steps\[1\].args: ', 'a template in a pipeline step is refused, naming the step');
SELECT is(public.sq_do('sq_a', $$SELECT mlplat.start_run('sqa', 'tpl6', '{"image": "x:1", "command": ["python", "-c", "print({1: 2})"], "env": {"J": "{\"a\": {}}"}}')$$),
          'ok rows+3', 'single braces and JSON in values are accepted');

SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', 'c1', E's3://sqa-models/m/\x01x', repeat('c', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: must not contain control characters', 'a control character in artifact_uri is refused');
SELECT matches(public.sq_do('sq_a', $$SELECT mlplat.register_model_version('sqa', 'm', 'c2', E's3://sqa-models/m/\x7fx', repeat('c', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: must not contain control characters', 'DEL too');

SELECT * FROM finish();
ROLLBACK;
