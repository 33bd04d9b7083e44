-- pgTAP: the attack suite (issue "reliability and security evidence").  Every case is
-- listed in docs/reliability.md, "Attack suite".  What api_authz.sql (role x action matrix)
-- and api_security.sql (definer hygiene, public look-alikes, audit triggers) already cover
-- is not repeated here.  Project "atkb" carries the marker "atkb-private" in its model URI,
-- run image and deployment environment, so any leak of B's rows can be searched for.
BEGIN;
SELECT plan(115);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['atk_a', 'atk_b', 'atk_viewer', 'atk_deployer', 'atk_app', 'atk_noright'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.impersonators (app_role) VALUES ('atk_app') ON CONFLICT DO NOTHING;

DO $$ DECLARE p text; BEGIN
  PERFORM mlplat.create_project('atka', 8, NULL, NULL, NULL, 'atk_a');
  PERFORM mlplat.create_project('atkb', 8, NULL, NULL, NULL, 'atk_b');
  PERFORM mlplat.add_artifact_location('atka', 's3://atka-private/');
  PERFORM mlplat.add_artifact_location('atkb', 's3://atkb-private/');
  PERFORM mlplat.grant_role('atka', 'atk_viewer', 'viewer');
  PERFORM mlplat.grant_role('atka', 'atk_deployer', 'deployer');
  PERFORM mlplat.grant_role('atka', 'alice', 'deployer');
  PERFORM mlplat.grant_role('atka', 'o''brien "q"', 'deployer');
  PERFORM mlplat.register_model_version('atka', 'm', '1', 's3://atka-private/m1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.register_model_version('atkb', 'm', '1', 's3://atkb-private/m1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
  FOREACH p IN ARRAY ARRAY['atka', 'atkb'] LOOP
    PERFORM mlplat.set_model_stage(p, 'm', '1', 'CHAMPION');
    PERFORM mlplat.deploy(p, 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1,
                          jsonb_build_object('MARK', p || '-private-env'));
    PERFORM mlplat.start_run(p, 'r1', jsonb_build_object('image', p || '-private/image:1'));
  END LOOP;
END $$;

-- ---------------------------------------------------------------- helpers

-- Run sql as role r (optionally with mlplat.on_behalf_of = obo) and keep what it wrote when it
-- succeeds.  Returns "<SQLSTATE or ok> rows<+delta>: <message>", where delta is the change in
-- the number of rows over every mlplat table (audit included), so one assertion checks the
-- error code, that nothing was written, and the message.
CREATE FUNCTION public.atk_rows() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE t regclass; n bigint; total bigint := 0;
BEGIN
  FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'p') LOOP
    EXECUTE format('SELECT count(*) FROM %s', t) INTO n;
    total := total + n;
  END LOOP;
  RETURN total;
END $$;
CREATE FUNCTION public.atk_do(r text, sql text, obo text DEFAULT '') RETURNS text LANGUAGE plpgsql AS $$
DECLARE before bigint := public.atk_rows();
BEGIN
  BEGIN
    PERFORM set_config('mlplat.on_behalf_of', obo, true);
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE sql;
    RESET ROLE;
    PERFORM set_config('mlplat.on_behalf_of', '', true);
  EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' rows' || to_char(public.atk_rows() - before, 'SGFM0') || ': ' || SQLERRM;
  END;
  RETURN format('ok rows%s', to_char(public.atk_rows() - before, 'SGFM0'));
END $$;
-- The mlplat tables and views r can read whose rows, as text, contain marker (as seen by r).
CREATE FUNCTION public.atk_leaks(r text, marker text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE t regclass; n bigint; found text[] := '{}';
BEGIN
  FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace
           AND c.relkind IN ('r', 'p', 'v', 'm') AND has_table_privilege(r, c.oid, 'SELECT') ORDER BY c.relname LOOP
    BEGIN
      EXECUTE format('SET LOCAL ROLE %I', r);
      EXECUTE format('SELECT count(*) FROM %s x WHERE strpos(x::text, $1) > 0', t) INTO n USING marker;
      RESET ROLE;
      IF n > 0 THEN found := found || t::text; END IF;
    EXCEPTION WHEN insufficient_privilege THEN
      RESET ROLE;
    END;
  END LOOP;
  RETURN found;
END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;

-- ---------------------------------------------------------------- tenant isolation

SELECT ok(cardinality(public.atk_leaks('postgres', 'atkb-private')) >= 3,
          'the marker of B is really in several relations (the leak checks below can fail)');
SELECT is(public.atk_leaks('atk_a', 'atkb-private'), '{}'::text[],
          'owner of A finds nothing of B in any mlplat table or view it can read');
SELECT is(public.atk_leaks('atk_viewer', 'atkb-private'), '{}'::text[], 'viewer of A finds nothing of B either');
SELECT is(public.atk_leaks('atk_noright', 'atka-private'), '{}'::text[], 'a role without membership finds nothing of A');
SELECT ok(cardinality(public.atk_leaks('atk_a', 'atka-private')) >= 3, 'owner of A does see its own rows');
SELECT matches(public.tap_api_try('atk_a', $$SELECT mlplat.render_inference_service('atkb', 'web')$$, true), '^42501: ',
               'render_inference_service of B denied to A''s owner');
SELECT matches(public.tap_api_try('atk_a', $$SELECT mlplat.render_inference_service('atkb', 'web', 1)$$, true), '^42501: ',
               'render_inference_service of B with a guessed revision denied');
SELECT matches(public.tap_api_try('atk_a', $$SELECT mlplat.render_workflow('atkb', 'r1')$$, true), '^42501: ',
               'render_workflow of B denied to A''s owner');
SELECT matches(public.tap_api_try('atk_a', $$SELECT mlplat.render_inference_service('atkz', 'web')$$, true), '^42501: ',
               'a project that does not exist looks the same as one you may not see');
SELECT is(public.tap_api_try('atk_a', $$SELECT mlplat.render_inference_service('atka', 'web')$$, true), 'ok',
          'render_inference_service of A works for A''s owner');
-- guessing ids: B's ids, looked up directly, through the RLS helper, and with a leaky function
CREATE TEMP TABLE atk_b_ids AS
  SELECT 'projects' AS rel, id FROM mlplat.projects WHERE name = 'atkb'
  UNION ALL SELECT 'deployments', d.id FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'atkb'
  UNION ALL SELECT 'runs', r.id FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id WHERE p.name = 'atkb'
  UNION ALL SELECT 'model_versions', v.id FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id
            JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'atkb';
GRANT SELECT ON atk_b_ids TO PUBLIC;
SELECT is((SELECT count(DISTINCT rel) FROM atk_b_ids), 4::bigint, 'B has a project, deployment, run and model version');
SET LOCAL ROLE atk_a;
SELECT is((SELECT count(*) FROM mlplat.projects WHERE id IN (SELECT id FROM atk_b_ids WHERE rel = 'projects')), 0::bigint, 'B''s project id finds nothing');
SELECT is((SELECT count(*) FROM mlplat.deployments WHERE id IN (SELECT id FROM atk_b_ids WHERE rel = 'deployments')), 0::bigint, 'B''s deployment id finds nothing');
SELECT is((SELECT count(*) FROM mlplat.runs WHERE id IN (SELECT id FROM atk_b_ids WHERE rel = 'runs')), 0::bigint, 'B''s run id finds nothing');
SELECT is((SELECT count(*) FROM mlplat.model_versions WHERE id IN (SELECT id FROM atk_b_ids WHERE rel = 'model_versions')), 0::bigint, 'B''s model version id finds nothing');
SELECT is((SELECT count(*) FROM mlplat.deployment_revisions WHERE deployment_id IN (SELECT id FROM atk_b_ids WHERE rel = 'deployments')), 0::bigint,
          'B''s deployment id finds none of its revisions (specs)');
SELECT is(mlplat._can_view((SELECT id FROM atk_b_ids WHERE rel = 'projects')), false, 'the RLS helper says no for B''s id');
RESET ROLE;
CREATE TABLE public.atk_seen (v text);
GRANT INSERT, SELECT ON public.atk_seen TO PUBLIC;
CREATE FUNCTION public.atk_leaky(v text) RETURNS boolean LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN INSERT INTO public.atk_seen VALUES (v); RETURN true; END $$;
GRANT EXECUTE ON FUNCTION public.atk_leaky(text) TO PUBLIC;
SET LOCAL ROLE atk_a;
DO $$ BEGIN
  PERFORM count(*) FROM mlplat.projects WHERE public.atk_leaky(name);
  PERFORM count(*) FROM mlplat.model_versions WHERE public.atk_leaky(artifact_uri);
  PERFORM count(*) FROM mlplat.deployment_status WHERE public.atk_leaky(project);
END $$;
RESET ROLE;
SELECT ok(EXISTS (SELECT 1 FROM public.atk_seen WHERE v = 'atka'), 'a cheap leaky function in WHERE sees A''s rows ...');
SELECT is((SELECT count(*) FROM public.atk_seen WHERE v LIKE 'atkb%'), 0::bigint, '... and never B''s (policies run first)');
-- the pure JSON functions run as the caller and read no table: nothing to reach through them
SELECT is((SELECT count(*) FROM pg_proc WHERE pronamespace = 'mlplat'::regnamespace AND NOT prosecdef
           AND proname IN ('spec_diff', 'canonical_json', 'content_id', 'plan_rollout', 'with_content_id')), 6::bigint,
          'spec_diff, canonical_json, content_id (2), plan_rollout, with_content_id run as the caller (no SECURITY DEFINER)');
SELECT is(public.tap_api_try('atk_a', $$SELECT mlplat.spec_diff((SELECT spec FROM mlplat.deployment_revisions r
            JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.id IN (SELECT id FROM atk_b_ids WHERE rel = 'deployments')), '{}')$$, true),
          'ok', 'spec_diff over B''s spec by id runs ...');
SET LOCAL ROLE atk_a;
SELECT is(mlplat.spec_diff((SELECT spec FROM mlplat.deployment_revisions r WHERE r.deployment_id IN
            (SELECT id FROM atk_b_ids WHERE rel = 'deployments') LIMIT 1), '{}'), NULL, '... but gets NULL: the spec is not visible');
RESET ROLE;
-- roles inside one project
SELECT matches(public.atk_do('atk_viewer', $$SELECT mlplat.deploy('atka', 'web2', 'm', '1', 'kserve-sklearnserver')$$),
               '^42501 rows\+0: permission denied: deploy on project "atka"', 'a viewer cannot deploy; nothing written');
SELECT matches(public.atk_do('atk_deployer', $$SELECT mlplat.grant_role('atka', 'atk_deployer', 'owner')$$),
               '^42501 rows\+0: permission denied: grant_role', 'a deployer cannot grant itself owner; nothing written');
SELECT matches(public.atk_do('atk_deployer', $$SELECT mlplat.grant_role('atka', 'atk_noright', 'viewer')$$),
               '^42501 rows\+0: ', 'a deployer cannot grant even viewer; nothing written');
SELECT matches(public.atk_do('atk_deployer', $$SELECT mlplat.revoke_role('atka', 'atk_a', 'owner')$$),
               '^42501 rows\+0: ', 'a deployer cannot revoke the owner; nothing written');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.grant_role('atkb', 'atk_a', 'owner')$$),
               '^42501 rows\+0: ', 'owner of A cannot grant itself a role in B; nothing written');

-- COPY goes through the same policies (psql writes what COPY sends to a file in the work
-- directory test/run.sh exports as WORK; read it back)
\getenv atk_work WORK
\set atk_copy :atk_work/atk-copy.txt
SET ROLE atk_a;
\o :atk_copy
COPY mlplat.projects TO STDOUT;
COPY mlplat.model_versions TO STDOUT;
COPY mlplat.deployment_revisions TO STDOUT;
COPY mlplat.runs TO STDOUT;
COPY mlplat.audit_events TO STDOUT;
COPY (SELECT * FROM mlplat.deployment_status) TO STDOUT;
\o
RESET ROLE;
SELECT ok(strpos(pg_read_file(:'atk_copy'), 'atka-private') > 0, 'COPY ... TO STDOUT by A''s owner returns A''s rows ...');
SELECT is(strpos(pg_read_file(:'atk_copy'), 'atkb-private'), 0, '... and nothing of B');
SELECT matches(public.atk_do('atk_a', $$COPY mlplat.projects FROM PROGRAM 'true'$$), '^42501 rows\+0: ',
               'COPY FROM (server side) is refused');

-- ---------------------------------------------------------------- SECURITY DEFINER hygiene

SELECT is((SELECT array_agg(r ORDER BY r) FROM unnest(ARRAY['atk_a', 'atk_app', 'atk_noright']) r
           WHERE has_schema_privilege(r, 'mlplat', 'CREATE')), NULL,
          'no caller can create objects in mlplat (where the pinned search_path looks)');
-- look-alikes in the caller's temporary schema and more in public; all count their calls
CREATE SEQUENCE public.atk_calls;
GRANT USAGE, SELECT ON SEQUENCE public.atk_calls TO PUBLIC;
CREATE FUNCTION public.atk_true(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT nextval('public.atk_calls') > 0 $$;
CREATE OPERATOR public.~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.atk_true);
CREATE OPERATOR public.~~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.atk_true);
CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.atk_true);
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 'number' $$;
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 'x' $$;
CREATE FUNCTION public.left(text, int) RETURNS text LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 'x' $$;
CREATE FUNCTION public.split_part(text, text, int) RETURNS text LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 'x' $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;
SET LOCAL ROLE atk_a;
CREATE FUNCTION pg_temp.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION pg_temp.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT '00000000-0000-0000-0000-000000000001'::uuid $$;
CREATE FUNCTION pg_temp.length(text) RETURNS int LANGUAGE sql AS $$ SELECT nextval('public.atk_calls'); SELECT 1 $$;
CREATE FUNCTION pg_temp.atk_eq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT nextval('public.atk_calls') > 0 $$;
CREATE OPERATOR pg_temp.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_temp.atk_eq);
CREATE OPERATOR pg_temp.!~ (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_temp.atk_eq);
CREATE TEMP TABLE members (project_id bigint, principal text, role text);
CREATE TEMP TABLE policies (role text, action text);
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.grant_role('atka', E'ev\nil', 'viewer')$$), '22023',
          'hostile search_path: principal still checked for control characters (look-alike ~ unused)');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.start_run('atka', 'r7', '{"image": "x", "gpus": true}')$$), '22023',
          'hostile search_path: booleans still refused as counts (look-alike jsonb_typeof unused)');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.deploy('atkb', 'web', 'm', '1', 'kserve-sklearnserver')$$), '42501',
          'hostile search_path: membership read from mlplat, not pg_temp.members (look-alike = unused)');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.grant_role('atka', 'atk_viewer', 'developer')$$), 'ok:GRANTED',
          'hostile search_path: grant_role works');
RESET ROLE;
SELECT is((SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.atk_calls), 0::bigint,
          'no look-alike in pg_temp or public was ever called');
SELECT is((SELECT request_id::text FROM mlplat.audit_events WHERE action = 'grant_role' AND detail->>'role' = 'developer' AND project = 'atka'
           ORDER BY id DESC LIMIT 1) <> '00000000-0000-0000-0000-000000000001', true, 'request id is not the look-alike''s');
-- the catalog check of api_security.sql really catches a definer function that forgot its path
CREATE FUNCTION public.atk_unpinned_definers() RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
  WHERE p.pronamespace = 'mlplat'::regnamespace AND p.prosecdef
    AND NOT coalesce('search_path=pg_catalog, mlplat, pg_temp' = ANY (p.proconfig), false) $$;
SELECT is(public.atk_unpinned_definers(), NULL, 'no SECURITY DEFINER function in mlplat lacks the pinned search_path');
CREATE FUNCTION mlplat.atk_planted_a() RETURNS int LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$;
CREATE FUNCTION mlplat.atk_planted_b() RETURNS int LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_catalog AS $$ SELECT 1 $$;
SELECT is(public.atk_unpinned_definers(), ARRAY['atk_planted_a', 'atk_planted_b'],
          'a planted definer without search_path, or with public first, is caught by the same check');
DROP FUNCTION mlplat.atk_planted_a(), mlplat.atk_planted_b();

-- ---------------------------------------------------------------- impersonation and identities

SELECT matches(public.atk_do('atk_noright', $$SELECT mlplat.deploy('atka', 'web3', 'm', '1', 'kserve-sklearnserver')$$, 'atk_deployer'),
               '^42501 rows\+0: role "atk_noright" may not act on behalf of another person',
               'impersonating a real deployer without the right is refused; nothing written');
SELECT matches(public.atk_do('atk_noright', $$SELECT mlplat.render_inference_service('atka', 'web')$$, 'atk_a'),
               '^42501 rows\+0: ', 'not even for reading');
SELECT is(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-alice', 'm', '1', 'kserve-sklearnserver')$$, 'alice'),
          'ok rows+4', 'an impersonator acts for alice (deployment, revision, audit, API span)');
SELECT is((SELECT array_agg(a.actor || '/' || a.db_role) FROM mlplat.audit_events a JOIN mlplat.deployments d ON d.id = a.entity_id
           WHERE a.action = 'deploy' AND d.name = 'web-alice'), ARRAY['alice/atk_app'], 'the audit records the person and the database role');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, 'аlice'),
               '^42501 rows\+0: ', 'Cyrillic "аlice" is not alice (no right, nothing written)');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, E'alice\u200b'),
               '^42501 rows\+0: ', 'alice + zero-width space is not alice');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, 'Alice'),
               '^42501 rows\+0: ', 'Alice is not alice');
SELECT is(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-obrien', 'm', '1', 'kserve-sklearnserver')$$, 'o''brien "q"'),
          'ok rows+4', 'an identity with quotes works when granted');
SELECT is((SELECT array_agg(a.actor) FROM mlplat.audit_events a JOIN mlplat.deployments d ON d.id = a.entity_id
           WHERE a.action = 'deploy' AND d.name = 'web-obrien'), ARRAY['o''brien "q"'],
          'the audit shows the quoted identity exactly');
SELECT is((SELECT count(*) FROM mlplat.audit_events WHERE actor IN ('аlice', E'alice\u200b', 'Alice')), 0::bigint,
          'no audit event under a look-alike of alice');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, E'alice\nLOG:  forged'),
               '^22023 rows\+0: mlplat.on_behalf_of contains a control character$', 'a newline in the identity is refused');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, E'al\u001bice'),
               '^22023 rows\+0: ', 'an escape character in the identity is refused');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.deploy('atka', 'web-x', 'm', '1', 'kserve-sklearnserver')$$, repeat('a', 64)),
               '^22023 rows\+0: mlplat.on_behalf_of is too long', 'a 64-character identity is refused');
SELECT matches(public.atk_do('atk_app', $$SELECT mlplat.create_project('atkz', 1)$$, 'postgres'),
               '^42501 rows\+0: ', 'acting for a superuser''s name does not make an administrator');
SELECT is(public.atk_do('atk_a', $$SELECT mlplat.grant_role('atka', 'аlice', 'viewer')$$), 'ok rows+3',
          'a look-alike principal can be granted ...');
SELECT is((SELECT array_agg(role ORDER BY role) FROM mlplat.members m JOIN mlplat.projects p ON p.id = m.project_id
           WHERE p.name = 'atka' AND m.principal IN ('alice', 'аlice')), ARRAY['deployer', 'viewer'],
          '... and stays a separate member from alice');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.grant_role('atka', E'bob\r', 'viewer')$$), '^22023 rows\+0: invalid principal',
               'grant_role refuses a principal with a control character');

-- ---------------------------------------------------------------- forged traceparent

SELECT throws_ok($$SET LOCAL mlplat.traceparent = '00-00000000000000000000000000000000-b7ad6b7169203331-01'$$, '22023',
                 'invalid value for "mlplat.traceparent"', 'traceparent with an all-zero trace id is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01'$$, '22023',
                 NULL, 'all-zero parent id is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'$$, '22023',
                 NULL, 'version ff (forbidden) is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'$$, '22023',
                 NULL, 'an unknown version is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01'$$, '22023',
                 NULL, 'upper-case hex is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra'$$, '22023',
                 NULL, 'an overlong value (extra field) is refused');
SELECT throws_ok($$SET LOCAL mlplat.traceparent = '00-0af7651916cd43dd8448eb211c80319c00-b7ad6b7169203331-01'$$, '22023',
                 NULL, 'an overlong trace id is refused');
SELECT throws_ok($$SELECT set_config('mlplat.traceparent', E'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n', true)$$,
                 '22023', NULL, 'a trailing newline is refused (set_config path too)');
SELECT throws_ok($$SELECT set_config('mlplat.traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0''; DROP TABLE mlplat.audit_events; --', true)$$,
                 '22023', NULL, 'SQL in a traceparent is refused');
SET LOCAL mlplat.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT throws_ok($$SET LOCAL mlplat.traceparent = 'garbage'$$, '22023', NULL, 'garbage is refused ...');
SELECT is(current_setting('mlplat.traceparent'), '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
          '... and the previous value stays');
SELECT is(public.atk_do('atk_a', $$SELECT mlplat.set_project_quota('atka', 9)$$), 'ok rows+2',
          'a call with a valid traceparent (audit event and API span)');
-- the stored traceparent keeps the caller's trace id and flags; its parent-id is the call's own
-- span, whose parent is the caller's span
SELECT is((SELECT substr(a.traceparent, 1, 36) || '…' || substr(a.traceparent, 53) || ' ' || a.trace_id || ' ' || s.parent_span_id
             FROM mlplat.audit_events a
             JOIN mlplat.spans s ON s.trace_id = a.trace_id AND s.span_id = split_part(a.traceparent, '-', 3)
            WHERE a.action = 'set_project_quota' AND a.project = 'atka'),
          '00-4bf92f3577b34da6a3ce929d0e0e4736-…-01 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7',
          'the audit keeps the caller''s trace id and flags, and its API span is the caller''s span''s child');
RESET mlplat.traceparent;

-- ---------------------------------------------------------------- hostile inputs

SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.deploy('atka', repeat('a', 100000), 'm', '1', 'kserve-sklearnserver')$$),
               '^22023 rows\+0: invalid deployment: ', 'a 100 kB name is refused; nothing written');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.deploy('atka', 'web''; DROP TABLE mlplat.audit_events; --', 'm', '1', 'kserve-sklearnserver')$$),
               '^22023 rows\+0: invalid deployment: ', 'SQL in a name is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.deploy('atka', 'wеb', 'm', '1', 'kserve-sklearnserver')$$),
               '^22023 rows\+0: invalid deployment: ', 'a name with a Cyrillic look-alike letter is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', E'r\n1', '{"image": "x"}')$$),
               '^22023 rows\+0: invalid run: ', 'a control character in a name is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.register_model_version('atka', 'm', repeat('1', 100000), 's3://b/m', repeat('a', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid version: ', 'an oversized version is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.register_model_version('atka', 'm', '7', 's3://b/' || repeat('x', 1000000), repeat('a', 64), 'kserve-sklearnserver', 'sklearn')$$),
               '^22023 rows\+0: invalid artifact_uri: ', 'a 1 MB URI is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', jsonb_build_object('image', 'x', 'args', jsonb_build_array(repeat('y', 70000))))$$),
               '^22023 rows\+0: invalid spec: is larger than 64 kB', 'oversized JSON is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', ('{"image": "x", "args": ' || repeat('[', 5000) || repeat(']', 5000) || '}')::jsonb)$$),
               '^22023 rows\+0: invalid spec.args: ', 'deeply nested JSON is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.deploy('atka', 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, ('{"A": ' || repeat('{"a": ', 2000) || '1' || repeat('}', 2000) || '}')::jsonb)$$),
               '^22023 rows\+0: invalid env: ', 'deeply nested env is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.deploy('atka', 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, (SELECT jsonb_object_agg('K' || i, 'v') FROM generate_series(1, 5000) i))$$),
               '^22023 rows\+0: invalid env: has more than 64 variables', 'an env with 5000 variables is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_pipeline_run('atka', 'p', (SELECT jsonb_agg(jsonb_build_object('name', 's' || i, 'image', 'x')) FROM generate_series(1, 5000) i))$$),
               '^22023 rows\+0: invalid steps: ', 'a pipeline of 5000 steps is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x", "gpus": "NaN"}')$$),
               '^22023 rows\+0: invalid spec.gpus: must be a JSON number, not string', '"NaN" as a count is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x", "gpus": "Infinity"}')$$),
               '^22023 rows\+0: invalid spec.gpus: ', '"Infinity" as a count is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x", "gpus": 1e400}')$$),
               '^22023 rows\+0: invalid spec.gpus: must be in ', '1e400 is refused as out of range');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x", "gpus": NaN}')$$),
               '^22P02 rows\+0: invalid input syntax for type json', 'a bare NaN is not JSON');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x", "gpus": true}')$$),
               '^22023 rows\+0: invalid spec.gpus: must be a JSON number, not boolean', 'a boolean as a count is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_rollout('atka', 'web', 'm', '1', '{"steps": [0.5], "min_samples": true}')$$),
               '^22023 rows\+0: invalid policy.min_samples: must be a JSON number, not boolean', 'a boolean as a sample count is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_rollout('atka', 'web', 'm', '1', '{"steps": ["0.5"]}')$$),
               '^22023 rows\+0: invalid policy.steps\[1\]: must be a JSON number, not string', 'a string as a fraction is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.start_run('atka', 'r2', '{"image": "x"}', repeat('k', 100000))$$),
               '^22023 rows\+0: invalid idempotency_key: ', 'a 100 kB idempotency key is refused');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat.set_project_quota('atka', -1)$$),
               '^22023 rows\+0: ', 'a negative quota is refused');
SELECT matches(public.tap_api_try('atk_a', $$SELECT mlplat.plan_rollout('{"content_id": true}', '{}')$$, true),
               '^22023: invalid rollout contract', 'plan_rollout refuses a boolean where an id belongs');

-- ---------------------------------------------------------------- secrets

CREATE TEMP TABLE atk_secret_settings AS
  SELECT name FROM pg_settings WHERE name ~ '^mlplat\.' AND name ~ '(token|secret|password|credential|_url$|_file$)';
GRANT SELECT ON atk_secret_settings TO PUBLIC;
SELECT ok((SELECT count(*) FROM atk_secret_settings WHERE name IN ('mlplat.kube_token_file', 'mlplat.registry_token_file')) = 2,
          'the credential settings exist (so the checks below can fail)');
SET LOCAL ROLE atk_a;
SELECT is((SELECT array_agg(name ORDER BY name) FROM pg_settings WHERE name IN (SELECT name FROM atk_secret_settings)), NULL,
          'no credential setting (token, secret, URL, file) is visible in pg_settings to an ordinary role');
RESET ROLE;
SELECT matches(public.tap_api_try('atk_a', $$SHOW mlplat.registry_token_file$$, true), '^42501: ', 'SHOW of the registry token file is refused');
SELECT matches(public.tap_api_try('atk_a', $$SELECT current_setting('mlplat.kube_token_file')$$, true), '^42501: ', 'current_setting of the kube token file is refused');
SELECT matches(public.tap_api_try('atk_a', $$SELECT * FROM pg_file_settings$$, true), '^42501: ', 'pg_file_settings is refused');
SELECT matches(public.tap_api_try('atk_a', format('SELECT pg_read_file(%L)', current_setting('mlplat.registry_token_file')), true), '^42501: ',
               'reading the token file through the server is refused');
CREATE TEMP TABLE atk_secret AS
  SELECT nullif(current_setting('mlplat.registry_token_file'), '') AS path,
         CASE WHEN current_setting('mlplat.registry_token_file') <> ''
              THEN pg_read_file(current_setting('mlplat.registry_token_file')) END AS value;
SELECT ok((SELECT length(value) >= 8 FROM atk_secret), 'a credential is planted (test/run.sh sets mlplat.registry_token_file)');
SELECT is(public.atk_leaks('postgres', (SELECT value FROM atk_secret)), '{}'::text[],
          'the planted credential is in no mlplat table, ledger or view');
SELECT is(public.atk_leaks('atk_a', (SELECT path FROM atk_secret)), '{}'::text[],
          'not even its location is in anything an ordinary role can read');
SELECT is(strpos(public.tap_api_try('atk_a', $$SHOW mlplat.registry_token_file$$, true), (SELECT path FROM atk_secret)), 0,
          'the refusal does not name the file');

-- ---------------------------------------------------------------- audit

SELECT is((SELECT array_agg(rolname::text ORDER BY rolname) FROM pg_roles
           WHERE NOT rolsuper AND has_table_privilege(oid, 'mlplat.audit_events', 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')),
          ARRAY['pg_write_all_data'], 'no role but superusers and the predefined pg_write_all_data holds a write privilege on the audit');
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'atk_writer') THEN CREATE ROLE atk_writer; END IF;
END $$;
GRANT pg_write_all_data TO atk_writer;
CREATE TEMP TABLE atk_audit_before AS SELECT md5(string_agg(a::text, ',' ORDER BY id)) AS h FROM mlplat.audit_events a;
SELECT matches(public.atk_do('atk_writer', $$INSERT INTO mlplat.audit_events (actor, db_role, action) VALUES ('x', 'x', 'deploy')$$),
               '^42501 rows\+0: new row violates row-level security policy', '... and a member of pg_write_all_data still cannot INSERT (no write policy)');
SELECT is(public.atk_do('atk_writer', $$UPDATE mlplat.audit_events SET actor = 'x'; DELETE FROM mlplat.audit_events$$), 'ok rows+0',
          '... and its UPDATE and DELETE reach no row');
SELECT is((SELECT md5(string_agg(a::text, ',' ORDER BY id)) FROM mlplat.audit_events a), (SELECT h FROM atk_audit_before),
          'the audit is byte for byte unchanged');
SELECT matches(public.atk_do('atk_writer', $$TRUNCATE mlplat.audit_events$$), '^42501 rows\+0: ', '... and it cannot TRUNCATE');
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c JOIN pg_roles o ON o.oid = c.relowner
           WHERE c.relnamespace = 'mlplat'::regnamespace AND NOT o.rolsuper), NULL,
          'every mlplat relation is owned by a superuser (no owner path around triggers or RLS)');
SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p JOIN pg_roles o ON o.oid = p.proowner
           WHERE p.pronamespace = 'mlplat'::regnamespace AND NOT o.rolsuper), NULL,
          'every mlplat function is owned by a superuser');
SELECT matches(public.atk_do('atk_a', $$INSERT INTO mlplat.audit_events (actor, db_role, action) VALUES ('x', 'x', 'deploy')$$),
               '^42501 rows\+0: ', 'INSERT into the audit is refused');
SELECT matches(public.atk_do('atk_a', $$UPDATE mlplat.audit_events SET actor = 'x'$$), '^42501 rows\+0: ', 'UPDATE of the audit is refused');
SELECT matches(public.atk_do('atk_a', $$DELETE FROM mlplat.audit_events$$), '^42501 rows\+0: ', 'DELETE from the audit is refused');
SELECT matches(public.atk_do('atk_a', $$TRUNCATE mlplat.audit_events$$), '^42501 rows\+0: ', 'TRUNCATE of the audit is refused');
SELECT matches(public.atk_do('atk_a', $$ALTER TABLE mlplat.audit_events DISABLE TRIGGER USER$$), '^42501 rows\+0: ',
               'disabling the audit''s triggers is refused');
SELECT matches(public.atk_do('atk_a', $$SET session_replication_role = replica$$), '^42501 rows\+0: ',
               'session_replication_role (which skips triggers) cannot be set');
SELECT matches(public.atk_do('atk_a', $$SELECT mlplat._audit('deploy', 'atka', NULL, NULL, NULL, NULL, NULL, '{}')$$),
               '^42501 rows\+0: ', 'the audit writer is not callable');
SELECT throws_ok($$UPDATE mlplat.audit_events SET actor = 'x' WHERE project = 'atka'$$, '55000', NULL, 'even the owner cannot UPDATE the audit');

SELECT * FROM finish();
ROLLBACK;
