-- pgTAP: SECURITY DEFINER hygiene, search_path hijacks, audit immutability, privileges.
BEGIN;
SELECT plan(40);
\ir lib/helpers.sql

DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_attacker') THEN CREATE ROLE tap_attacker; END IF;
END $$;

-- every SECURITY DEFINER function in mlplat pins search_path, with pg_temp last
SELECT is(
  (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.prosecdef), 
  (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.prosecdef
     AND 'search_path=pg_catalog, mlplat, pg_temp' = ANY (p.proconfig)),
  'every SECURITY DEFINER function pins search_path = pg_catalog, mlplat, pg_temp');
-- the intent calls' rule (sql/install/99_entry_points.sql): every public function that answers
-- mlplat.accepted is SECURITY DEFINER with search_path pinned first
SELECT is(
  (SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
   WHERE p.pronamespace = 'mlplat'::regnamespace AND p.prorettype = 'mlplat.accepted'::regtype
     AND p.proname NOT LIKE '\_%'
     AND NOT (p.prosecdef AND p.proconfig[1] = 'search_path=pg_catalog, mlplat, pg_temp')),
  NULL, 'every intent call (a public function answering mlplat.accepted) follows the entry-point rule');
CREATE TEMP TABLE tap_api_functions (name text);
INSERT INTO tap_api_functions VALUES ('create_project'), ('set_project_quota'), ('delete_project'), ('grant_role'),
  ('revoke_role'), ('register_model_version'), ('set_model_stage'), ('deploy'), ('rollback_deployment'),
  ('undeploy'), ('render_inference_service'), ('start_run'), ('start_pipeline_run'), ('cancel_run'),
  ('start_rollout'), ('promote_rollout'), ('abort_rollout'), ('set_drift_policy'),
  ('set_deploy_deadline'), ('set_metrics_preset'), ('lab_preflight'), ('start_lab_run'), ('cancel_lab_run'),
  ('start_lab_probe'), ('lab_run_result'), ('render_lab_job'), ('register_lab_profile'), ('disable_lab_profile'),
  ('approve_lab'), ('revoke_lab_approval'), ('register_lab_node'), ('disable_lab_node');
SELECT is(
  (SELECT array_agg(f.name ORDER BY f.name) FROM tap_api_functions f
   WHERE NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace
                     AND p.proname = f.name AND p.prosecdef)),
  NULL, 'every API entry point exists and is SECURITY DEFINER');
-- every SQL or PL/pgSQL function a role other than its owner may call (PUBLIC or a grant)
-- pins search_path; the internal helpers, which run on the pinned path of the entry point or
-- worker that calls them (sql/install/14_api_core.sql), are executable by their owner only
SELECT is(
  (SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
   WHERE p.pronamespace = 'mlplat'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
     AND EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                 WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE')
     AND NOT coalesce('search_path=pg_catalog, mlplat, pg_temp' = ANY (p.proconfig), false)
     -- the inlined rules (sql/install/05_rules.sql): fully qualified, checked below under a
     -- hostile search_path
     AND p.proname NOT IN ('rollout_is_active', 'run_is_active', 'lab_run_is_active', 'lab_run_is_running',
                           'candidate_is_building', 'candidate_is_finished', 'project_is_deleting',
                           'deployment_is_deleting', 'deployment_is_changing', 'deployment_is_serving',
                           'model_stage_is_deployable')),
  NULL, 'no function callable by ordinary roles runs with the caller''s search_path');
-- a trigger function runs on the path of whoever's statement fires it: each in SQL or
-- PL/pgSQL pins its own
SELECT is(
  (SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
   WHERE p.pronamespace = 'mlplat'::regnamespace AND p.prorettype = 'trigger'::regtype
     AND l.lanname IN ('sql', 'plpgsql')
     AND NOT coalesce('search_path=pg_catalog, mlplat, pg_temp' = ANY (p.proconfig), false)),
  NULL, 'every SQL or PL/pgSQL trigger function pins search_path');
-- internals are not callable by PUBLIC (except the RLS helper)
SELECT is(
  (SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
   WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname LIKE '\_%' AND p.proname NOT IN ('_can_view', '_campaign_state', '_campaign_state_of')
     AND has_function_privilege('tap_attacker', p.oid, 'EXECUTE')),
  NULL, 'internal functions are not executable by ordinary roles');
-- no table in mlplat is writable by an ordinary role
SELECT is(
  (SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
   WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'v', 'p')
     AND has_table_privilege('tap_attacker', c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')),
  NULL, 'no mlplat table or view is writable by callers');
-- every table with project rows has row-level security
SELECT is(
  (SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
   WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind = 'r' AND NOT c.relrowsecurity
     AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'project_id')),
  NULL, 'every table with project_id has row-level security');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'mlplat.projects'::regclass), 'projects has row-level security');
-- the people-facing views apply the caller's policies
SELECT is(
  (SELECT array_agg(v ORDER BY v) FROM unnest(ARRAY['project_status', 'deployment_status', 'run_status',
                                                    'rollout_status', 'audit_log', 'routes', 'lab_run_status',
                                                    'lab_approval_status', 'lab_node_status']) v
   WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relname = v
                     AND c.relkind = 'v' AND 'security_invoker=true' = ANY (c.reloptions))),
  NULL, 'every status view exists and is security_invoker');

-- hijack attempts: look-alike functions and operators in public, shadow tables in pg_temp,
-- and a caller search_path that puts them first
DO $$ DECLARE p text; BEGIN
  PERFORM mlplat.create_project('hij', 4, NULL, NULL, NULL, 'tap_attacker');
  PERFORM mlplat.add_artifact_location('hij', 's3://b/');
  PERFORM mlplat.register_model_version('hij', 'm', '1', 's3://b/m1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.set_model_stage('hij', 'm', '1', 'CHAMPION');
END $$;
-- Look-alikes count their calls in a sequence (non-transactional: calls inside failed
-- statements still count).
CREATE SEQUENCE public.tap_hijack_calls;
GRANT USAGE, SELECT ON SEQUENCE public.tap_hijack_calls TO PUBLIC;
CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT '00000000-0000-0000-0000-000000000000'::uuid $$;
CREATE FUNCTION public.length(text) RETURNS int LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT 1 $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION public.tap_never_matches(text, text) RETURNS boolean LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT false $$;
CREATE OPERATOR public.!~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.tap_never_matches);
CREATE FUNCTION public.tap_always_equal(text, text) RETURNS boolean LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT true $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.tap_always_equal);
CREATE FUNCTION public.tap_int_plus(int, int) RETURNS int LANGUAGE sql
  AS $$ SELECT nextval('public.tap_hijack_calls'); SELECT 0 $$;
CREATE OPERATOR public.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = public.tap_int_plus);
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;

SET LOCAL ROLE tap_attacker;
CREATE TEMP TABLE projects (id bigint, name text, gpu_quota int, status text);
INSERT INTO projects VALUES (1, 'hij', 1000, 'READY');
CREATE TEMP TABLE deployments (id bigint);
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.create_project('BAD NAME', 1)$$), '42501',
          'non-admin still denied under a hostile search_path');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.deploy('hij', 'Bad Name', 'm', '1', 'kserve-sklearnserver')$$), '22023',
          'names still validated under a hostile search_path (look-alike !~ and length not used)');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.deploy('hij', 'web', 'm', '1', 'kserve-sklearnserver', 8, 1, 1)$$), '23514',
          'quota read from mlplat.projects, not pg_temp.projects');
-- the inlined status rules use pg_catalog's = whatever the caller's search_path says
SELECT is(public.tap_hostile($$SELECT mlplat.rollout_is_active('PROMOTED')$$), 'ok:false',
          'rollout_is_active ignores a look-alike = in a hostile search_path');
SELECT is(public.tap_hostile($$SELECT mlplat.run_is_active('FAILED') FROM (SELECT 1) x$$), 'ok:false',
          'run_is_active ignores a look-alike = in a hostile search_path');
SELECT is(public.tap_hostile($$SELECT mlplat.lab_run_is_active('SUCCEEDED') FROM (SELECT 1) x$$), 'ok:false',
          'lab_run_is_active ignores a look-alike = in a hostile search_path');
-- ... and so do the other rules, each asked of a value it is false for (the names of those that are not)
SELECT is(
  (SELECT array_agg(v.f ORDER BY v.f)
     FROM (VALUES ('lab_run_is_running', 'QUEUED'), ('candidate_is_building', 'PLANNED'),
                  ('candidate_is_finished', 'BUILDING'), ('project_is_deleting', 'READY'),
                  ('deployment_is_deleting', 'FAILED'), ('deployment_is_changing', 'READY'),
                  ('deployment_is_serving', 'FAILED'), ('model_stage_is_deployable', 'ARCHIVED')) v(f, arg)
    WHERE public.tap_hostile(format('SELECT mlplat.%I(%L) FROM (SELECT 1) x', v.f, v.arg)) <> 'ok:false'),
  NULL, 'the other status rules ignore a look-alike = in a hostile search_path');
SELECT is(public.tap_hostile($$SELECT revision FROM mlplat.deploy('hij', 'web', 'm', '1', 'kserve-sklearnserver', 1, 1, 1)$$), 'ok:1',
          'deploy works under a hostile search_path');
SELECT isnt(public.tap_hostile($$SELECT request_id FROM mlplat.deploy('hij', 'web', 'm', '1', 'kserve-sklearnserver', 1, 1, 2)$$),
            'ok:00000000-0000-0000-0000-000000000000', 'request ids come from pg_catalog.gen_random_uuid');
SELECT is(public.tap_hostile($$SELECT revision FROM mlplat.rollback_deployment('hij', 'web')$$), 'ok:1',
          'rollback works under a hostile search_path');
RESET ROLE;
-- the route publisher (a deferred trigger: made immediate here, this test never commits) and
-- the drift policy under the same hostile search_path
SET CONSTRAINTS ALL IMMEDIATE;
UPDATE mlplat.deployments d SET status = 'READY', endpoint = 'http://web.hij', observed_revision = d.desired_revision, ready_revision = d.desired_revision
FROM mlplat.projects p WHERE p.id = d.project_id AND p.name = 'hij' AND d.name = 'web';
SET LOCAL ROLE tap_attacker;
CREATE TEMP TABLE route_generations (generation bigint, project_id bigint, routes jsonb);
CREATE TEMP TABLE route_entries (project_id bigint, deployment text, model text, endpoint text, revision int,
                                 version text, from_gen bigint, to_gen bigint);
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.set_drift_policy('hij', 'web', 'report')$$), 'ok:READY',
          'set_drift_policy works under a hostile search_path');
SELECT is(public.tap_hostile($$SELECT status FROM mlplat.undeploy('hij', 'web')$$), 'ok:DELETING',
          'undeploy of a READY deployment publishes under a hostile search_path');
SELECT is(public.tap_hostile($$SELECT count(*)::text FROM mlplat.route_table()$$), 'ok:0', 'route_table under a hostile search_path');
RESET ROLE;
SELECT is((SELECT array_agg((SELECT coalesce(string_agg(t.model || ' ' || t.deployment || ' ' || t.endpoint || ' ' || t.revision
                                                      || ' ' || t.version, ','), '')
                               FROM mlplat.route_table(g.generation) t WHERE t.project = 'hij') ORDER BY g.generation)
             FROM mlplat.route_generations g JOIN mlplat.projects p ON p.id = g.project_id WHERE p.name = 'hij'),
          ARRAY['m web http://web.hij 1 1', ''],
          'READY published the route, undeploy removed it');
SELECT is((SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.tap_hijack_calls), 0::bigint,
          'no look-alike function or operator was ever called');
SELECT is((SELECT d.updated_at > 'epoch'::timestamptz FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
           WHERE p.name = 'hij'), true, 'timestamps come from pg_catalog.now');

-- audit immutability, even for the table owner
SELECT throws_ok($$UPDATE mlplat.audit_events SET actor = 'x'$$, '55000', NULL, 'audit UPDATE refused');
SELECT throws_ok($$DELETE FROM mlplat.audit_events$$, '55000', NULL, 'audit DELETE refused');
SELECT throws_ok($$TRUNCATE mlplat.audit_events$$, '55000', NULL, 'audit TRUNCATE refused');
SELECT throws_ok($$UPDATE mlplat.route_generations SET created_at = now()$$, '55000', NULL, 'route generation UPDATE refused');
SELECT throws_ok($$DELETE FROM mlplat.route_generations$$, '55000', NULL, 'route generation DELETE refused');
SELECT throws_ok($$TRUNCATE mlplat.route_generations$$, '55000', NULL, 'route generation TRUNCATE refused');
SELECT throws_ok($$UPDATE mlplat.route_entries SET endpoint = 'x'$$, '55000', NULL, 'route entry UPDATE refused');
SELECT throws_ok($$DELETE FROM mlplat.route_entries$$, '55000', NULL, 'route entry DELETE refused');
SELECT throws_ok($$TRUNCATE mlplat.route_entries$$, '55000', NULL, 'route entry TRUNCATE refused');
SELECT throws_ok($$TRUNCATE mlplat.model_alias_history$$, '55000', NULL, 'alias history TRUNCATE refused');
-- a row trigger does not see TRUNCATE: every table whose rows _refuse_change guards refuses it too
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
           WHERE c.relnamespace = 'mlplat'::regnamespace
             AND EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgfoid = 'mlplat._refuse_change'::regproc
                           AND g.tgtype & 1 = 1)
             AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgtype & 32 = 32)),
          NULL, 'every append-only table refuses TRUNCATE as well as UPDATE and DELETE');
SELECT is((SELECT count(*) FROM mlplat.audit_events WHERE project = 'hij' AND actor = 'tap_attacker'), 5::bigint,
          'one audit event per successful intent (2 deploys, 1 rollback, 1 drift policy, 1 undeploy), with the person');
-- a lost compare-and-swap is a retryable serialization failure
SELECT throws_ok($$SELECT mlplat._cas_lost('deployment', 'web')$$, '40001', 'deployment "web" changed concurrently',
                 'a lost CAS raises 40001');

-- A call that bounds its lock waits (_lock_project, _bound_api_waits: SET LOCAL lock_timeout,
-- directly or through a helper) names lock_timeout in its own SET clause, or the bound
-- outlives the call in its caller's transaction.
SELECT is((WITH RECURSIVE bounding(name) AS (
             SELECT unnest(ARRAY['_lock_project', '_bound_api_waits'])
             UNION
             SELECT p.proname::text COLLATE "default" FROM pg_proc p, bounding b
             WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname LIKE '\_%'
               AND p.prosrc LIKE '%' || b.name || '(%')
           SELECT array_agg(DISTINCT p.proname::text ORDER BY p.proname::text) FROM pg_proc p
           WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname NOT LIKE '\_%'
             AND EXISTS (SELECT 1 FROM bounding b WHERE p.prosrc LIKE '%' || b.name || '(%')
             AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'lock\_timeout=%')),
          NULL, 'every call that bounds its lock waits gives the caller''s lock_timeout back');

SELECT * FROM finish();
ROLLBACK;
