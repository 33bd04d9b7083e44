-- pgTAP: Model Lab privileges, row-level security, membership-only authorization, the
-- no-leak validation errors and the read-only preflight (docs/lab.md).
BEGIN;
SELECT plan(61);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['tap_lab_viewer', 'tap_lab_dev', 'tap_lab_deployer', 'tap_lab_owner', 'tap_lab_outsider',
                           'tap_lab_admin', 'tap_lab_app'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('tap_lab_admin') ON CONFLICT DO NOTHING;
INSERT INTO mlplat.impersonators (app_role) VALUES ('tap_lab_app') ON CONFLICT DO NOTHING;

CREATE TEMP TABLE lab_ids (cand bigint, prof bigint, node bigint, appr bigint);
GRANT SELECT ON lab_ids TO PUBLIC;
DO $$
DECLARE
  pid bigint;
BEGIN
  -- (room to spare: the GPU starts before the slot tests below take one quota slot each)
  PERFORM mlplat.create_project('tlab', 64, NULL, NULL, NULL, 'tap_lab_owner');
  PERFORM mlplat.create_project('tlab-other', 8, NULL, NULL, NULL, 'tap_lab_outsider');
  PERFORM mlplat.add_artifact_location('tlab', 's3://lab/');
  PERFORM mlplat.grant_role('tlab', 'tap_lab_viewer', 'viewer');
  PERFORM mlplat.grant_role('tlab', 'tap_lab_dev', 'developer');
  PERFORM mlplat.grant_role('tlab', 'tap_lab_deployer', 'deployer');
  PERFORM mlplat.register_model_version('tlab', 'llm', '1', 's3://lab/llm/1', repeat('a', 64), 'vllm', 'custom');
  PERFORM mlplat.set_model_stage('tlab', 'llm', '1', 'CANDIDATE');
  PERFORM mlplat.register_lab_node('tap-gpu-1', 'nvidia-a100', 8);
  UPDATE mlplat.lab_nodes SET observed_ready = true, observed_unschedulable = false, observed_gpus = 8,
         observed_accelerator = 'nvidia-a100', observed_at = now() WHERE name = 'tap-gpu-1';
  pid := (SELECT id FROM mlplat.projects WHERE name = 'tlab');
  EXECUTE 'SET LOCAL ROLE tap_lab_owner';
  PERFORM mlplat.register_lab_profile('tlab', 'vllm', jsonb_build_object('runtime_kind', 'vllm',
    'image', 'r.example/vllm@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'nvidia-a100',
    'families', '["text_generation"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536));
  RESET ROLE;
  INSERT INTO lab_ids SELECT (SELECT id FROM mlplat.model_versions WHERE project_id = pid),
    (SELECT id FROM mlplat.lab_profiles WHERE project_id = pid), (SELECT id FROM mlplat.lab_nodes WHERE name = 'tap-gpu-1');
  EXECUTE 'SET LOCAL ROLE tap_lab_owner';
  PERFORM mlplat.approve_lab('tlab', (SELECT cand FROM lab_ids), repeat('a', 64), (SELECT prof FROM lab_ids),
    (SELECT node FROM lab_ids), '{text_generation}', '{}', 3, '1 day');
  RESET ROLE;
  UPDATE lab_ids SET appr = (SELECT id FROM mlplat.lab_approvals WHERE project_id = pid);
  -- probe evidence through the API (never inserted by hand), ended the way the lab_runs
  -- reconciler ends it: its claim dispatches it, the write-back records the Job Complete with
  -- an output (PASSED), the next pass sees the Job gone (lease released)
  EXECUTE 'SET LOCAL ROLE tap_lab_deployer';
  PERFORM mlplat.start_lab_probe('tlab', cand, repeat('a', 64), prof, node, 'tap-probe') FROM lab_ids;
  RESET ROLE;
  PERFORM 1 FROM mlplat._lab_runs_claim(1, 'tap', 'lab-bucket');
  PERFORM mlplat._lab_runs_observed(r.id, r.row_version, 1, 'tap', 'COMPLETED', '{}', convert_to('{"ok": true}', 'UTF8'))
  FROM mlplat.lab_runs r WHERE r.project_id = pid AND r.purpose = 'probe';
  PERFORM mlplat._lab_runs_job_gone(r.id, r.row_version, 1, 'tap', '{"job": "absent"}')
  FROM mlplat.lab_runs r WHERE r.project_id = pid AND r.purpose = 'probe';
END $$;
SELECT is((SELECT string_agg(pb.status || ' ' || (pb.completed_at IS NOT NULL) || ' ' || r.purpose, ',')
           FROM mlplat.lab_probes pb JOIN mlplat.lab_runs r ON r.id = pb.lab_run_id JOIN lab_ids ON r.node_id = lab_ids.node),
          'PASSED true probe', 'the fixture probe was made with start_lab_probe and passed');

CREATE FUNCTION pg_temp.pf_sql(p_inputs text DEFAULT '[{"prompt": "hi", "max_tokens": 4}]') RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT mlplat.lab_preflight(%L, %s, %L, %s, %s, %s, %L, %L)', 'tlab', cand, repeat('a', 64), prof, node,
                appr, 'text_generation', p_inputs) FROM lab_ids
$$;

-- ---------------------------------------------------------------- privileges
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
           WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relname LIKE 'lab\_%' AND c.relkind = 'r'
             AND NOT c.relrowsecurity AND c.relname NOT IN ('lab_nodes', 'lab_leases')),
          NULL, 'every project-scoped lab table has row-level security');
SELECT ok(NOT has_table_privilege('tap_lab_owner', 'mlplat.lab_run_payloads', 'SELECT'),
          'no caller may read lab_run_payloads (content)');
SELECT ok(NOT has_table_privilege('tap_lab_dev', 'mlplat.lab_run_payloads', 'SELECT'),
          'a developer may not read lab_run_payloads either');
SELECT is((SELECT count(*)::int FROM pg_class c, unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
           WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relname LIKE 'lab\_%' AND c.relkind = 'r'
             AND has_table_privilege('tap_lab_owner', c.oid, p)), 0,
          'no lab table is writable by callers: only the API functions write');
SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
           WHERE p.pronamespace = 'mlplat'::regnamespace
             AND (p.proname LIKE '\_lab\_%' OR p.proname IN ('_authorize_member', '_render_lab_job', '_render_lab_secret'))
             AND has_function_privilege('tap_lab_owner', p.oid, 'EXECUTE')),
          NULL, 'internal lab functions are not callable by callers');
SELECT ok((SELECT provolatile = 's' AND prosecdef FROM pg_proc WHERE proname = 'lab_preflight'),
          'lab_preflight is STABLE and SECURITY DEFINER');
SELECT is((SELECT count(*)::int FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relname LIKE 'lab\_%\_status'
             AND a.attname IN ('content', 'inputs', 'output', 'image', 'artifact_uri') AND a.attnum > 0), 0,
          'no lab view carries content, image or payload location');

-- ---------------------------------------------------------------- RLS
SELECT is(tap_api_try('tap_lab_outsider', 'SELECT 1/count(*) FROM mlplat.lab_approvals'), '22012',
          'an outsider sees no approval of the project');
SELECT is(tap_api_try('tap_lab_outsider', 'SELECT 1/count(*) FROM mlplat.lab_profiles'), '22012',
          'an outsider sees no profile of the project');
SELECT is(tap_api_try('tap_lab_viewer', 'SELECT 1/count(*) FROM mlplat.lab_approval_status'), 'ok',
          'a viewer sees the project''s approvals');
SELECT is(tap_api_try('tap_lab_viewer', 'SELECT 1/count(*) FROM mlplat.lab_node_status'), 'ok',
          'lab nodes are platform data everyone may see');

-- ---------------------------------------------------------------- membership-only authorization
SELECT is(tap_api_try('tap_lab_viewer', pg_temp.pf_sql()), '42501', 'viewer: no preflight');
SELECT is(tap_api_try('tap_lab_dev', pg_temp.pf_sql()), 'ok', 'developer: preflight');
SELECT is(tap_api_try('tap_lab_deployer', pg_temp.pf_sql()), 'ok', 'deployer: preflight');
SELECT is(tap_api_try('tap_lab_owner', pg_temp.pf_sql()), 'ok', 'owner: preflight');
SELECT is(tap_api_try('tap_lab_outsider', pg_temp.pf_sql()), '42501', 'member of another project: no preflight');
SELECT is(tap_api_try('tap_lab_admin', pg_temp.pf_sql()), '42501', 'administrator without a role: no preflight');
SELECT is(tap_api_try(current_user, pg_temp.pf_sql()), '42501', 'superuser without a role: no preflight');
SELECT is(tap_api_try('tap_lab_admin', $q$SELECT mlplat.lab_preflight('no-such', 1, repeat('a', 64), 1, 1, 1, 'embedding', '[{"text": "x"}]')$q$),
          '42501', 'a missing project is a denial, for administrators too');
SELECT is(tap_api_try('tap_lab_dev', $q$SELECT mlplat.register_lab_profile('tlab', 'p2', '{}')$q$), '42501',
          'developer: no profile registration');
SELECT is(tap_api_try('tap_lab_deployer', format($q$SELECT mlplat.approve_lab('tlab', %s, repeat('a', 64), %s, %s, '{text_generation}', '{}', 1, '1 hour')$q$,
          (SELECT cand FROM lab_ids), (SELECT prof FROM lab_ids), (SELECT node FROM lab_ids))), '42501', 'deployer: no approval');
SELECT is(tap_api_try('tap_lab_admin', format($q$SELECT mlplat.approve_lab('tlab', %s, repeat('a', 64), %s, %s, '{text_generation}', '{}', 1, '1 hour')$q$,
          (SELECT cand FROM lab_ids), (SELECT prof FROM lab_ids), (SELECT node FROM lab_ids))), '42501', 'administrator: no approval');
SELECT is(tap_api_try('tap_lab_owner', format($q$SELECT mlplat.approve_lab('tlab', %s, repeat('a', 64), %s, %s, '{text_generation}', '{}', 1, '1 hour')$q$,
          (SELECT cand FROM lab_ids), (SELECT prof FROM lab_ids), (SELECT node FROM lab_ids))), 'ok', 'owner: approval');
SELECT is(tap_api_try('tap_lab_owner', $q$SELECT mlplat.register_lab_node('x-node', 'a100', 1)$q$), '42501',
          'a project owner may not register lab nodes');
SELECT is(tap_api_try('tap_lab_admin', $q$SELECT mlplat.register_lab_node('x-node', 'a100', 1)$q$), 'ok',
          'an administrator registers lab nodes');
SET mlplat.on_behalf_of = 'tap_lab_dev';
SELECT is(tap_api_try('tap_lab_app', pg_temp.pf_sql()), 'ok', 'application role for a developer: preflight');
SET mlplat.on_behalf_of = 'tap_lab_viewer';
SELECT is(tap_api_try('tap_lab_app', pg_temp.pf_sql()), '42501', 'application role for a viewer: denied');
RESET mlplat.on_behalf_of;
CREATE FUNCTION pg_temp.start_sql(p_key text) RETURNS text LANGUAGE sql AS $$
  SELECT format('SELECT mlplat.start_lab_run(%L, %s, %L, %s, %s, %s, %L, %L, %L, %L)', 'tlab', cand, repeat('a', 64), prof,
                node, appr, 'text_generation', '[{"prompt": "hi", "max_tokens": 4}]', '{}', p_key) FROM lab_ids
$$;
SELECT is(tap_api_try('tap_lab_viewer', pg_temp.start_sql('k1')), '42501', 'viewer: no start_lab_run');
SELECT is(tap_api_try('tap_lab_admin', pg_temp.start_sql('k1')), '42501', 'administrator without a role: no start_lab_run');
SELECT is(tap_api_try(current_user, pg_temp.start_sql('k1')), '42501', 'superuser without a role: no start_lab_run');
SET mlplat.on_behalf_of = 'tap_lab_dev';
SET ROLE tap_lab_app;
SELECT lives_ok(pg_temp.start_sql('k-app'), 'application role for a developer: start_lab_run');
RESET ROLE;
RESET mlplat.on_behalf_of;
SELECT is((SELECT actor || '/' || db_role FROM mlplat.audit_events WHERE action = 'start_lab_run'),
          'tap_lab_dev/tap_lab_app', 'the impersonated start is audited with both the person and the database role');
SELECT is((SELECT actor || '/' || db_role FROM mlplat.lab_runs WHERE purpose = 'run'), 'tap_lab_dev/tap_lab_app',
          'the run''s provenance names both too');
-- register_lab_profile and approve_lab answer through the API epilogue (_api_accept/_api_keep):
-- the audit row names the person and the database role, a replay of the key gives the
-- stored answer, and the same profile registered again writes no audit row
CREATE FUNCTION pg_temp.tap_spec() RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('runtime_kind', 'vllm', 'image', 'r.example/v@sha256:' || repeat('e', 64), 'gpus', 1,
    'accelerator', 'nvidia-a100', 'families', '["text_generation"]'::jsonb, 'max_execution_seconds', 300,
    'max_output_bytes', 65536)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.tap_spec() TO PUBLIC;
SET mlplat.on_behalf_of = 'tap_lab_owner';
SET ROLE tap_lab_app;
-- (each call in FROM: a (f()).* in the select list would call it once per column)
CREATE TEMP TABLE tap_epi AS
  SELECT 'profile' AS what, a.* FROM mlplat.register_lab_profile('tlab', 'p-app', pg_temp.tap_spec(), 'kp-app') a;
INSERT INTO tap_epi SELECT 'profile again', a.* FROM mlplat.register_lab_profile('tlab', 'p-app', pg_temp.tap_spec(), 'kp-app') a;
INSERT INTO tap_epi SELECT 'profile same', a.* FROM mlplat.register_lab_profile('tlab', 'p-app', pg_temp.tap_spec(), 'kp-2') a;
INSERT INTO tap_epi SELECT 'profile same again', a.* FROM mlplat.register_lab_profile('tlab', 'p-app', pg_temp.tap_spec(), 'kp-2') a;
INSERT INTO tap_epi SELECT 'approval', a.* FROM lab_ids,
  mlplat.approve_lab('tlab', cand, repeat('a', 64), prof, node, '{text_generation}', '{}', 2, '1 hour', 'ka-app') a;
INSERT INTO tap_epi SELECT 'approval again', a.* FROM lab_ids,
  mlplat.approve_lab('tlab', cand, repeat('a', 64), prof, node, '{text_generation}', '{}', 2, '1 hour', 'ka-app') a;
RESET ROLE;
RESET mlplat.on_behalf_of;
SELECT is((SELECT string_agg(e.actor || '/' || e.db_role || ' ' || e.entity || ' ' || (e.request_id = t.request_id)
                             || ' ' || (e.trace_id IS NOT NULL), ',' ORDER BY e.id)
           FROM mlplat.audit_events e JOIN tap_epi t ON t.what IN ('profile', 'approval') AND t.entity_id = e.entity_id
                                                    AND t.entity = e.entity
           WHERE e.action IN ('register_lab_profile', 'approve_lab')),
          'tap_lab_owner/tap_lab_app lab_profile true true,tap_lab_owner/tap_lab_app lab_approval true true',
          'impersonated register_lab_profile and approve_lab: one audit row each, naming the person and the role');
SELECT is((SELECT string_agg(t.what || ' ' || t.replayed || ' ' || (t.request_id = f.request_id), ',' ORDER BY t.what)
           FROM tap_epi t JOIN tap_epi f ON t.what = f.what || ' again'),
          'approval again true true,profile again true true,profile same again true true',
          'a replay of the key answers the stored answer (a new one, a kept one)');
SELECT is((SELECT string_agg(t.replayed || ' ' || t.status || ' ' || (t.entity_id = f.entity_id), ',')
           FROM tap_epi t JOIN tap_epi f ON f.what = 'profile' WHERE t.what = 'profile same'),
          'false ENABLED true', 'the same profile again: the existing profile, not a replay');
SELECT is((SELECT count(*) FROM mlplat.audit_events e JOIN tap_epi t ON t.what = 'profile' AND e.entity = 'lab_profile'
           AND e.entity_id = t.entity_id), 1::bigint, 'the same profile again writes no audit row');
SELECT is(tap_api_try('tap_lab_owner', $q$SELECT mlplat.register_lab_profile('tlab', 'p-app',
            pg_temp.tap_spec() || '{"gpus": 2}')$q$, true),
          '42710: lab profile already exists with another spec',
          'another spec under a profile''s name: 42710, as every immutable registration');
-- a status moves only along mlplat._lab_run_transitions() (the shared state-machine trigger)
SELECT is(public.tap_api_try('postgres', $q$UPDATE mlplat.lab_runs SET status = 'SUCCEEDED' WHERE purpose = 'run'$q$), '23514',
          'lab runs: no illegal edge (QUEUED -> SUCCEEDED), for superusers too');

-- ---------------------------------------------------------------- no caller content in errors
CREATE FUNCTION pg_temp.err_parts(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  m text; d text; h text;
BEGIN
  SET LOCAL ROLE tap_lab_dev;
  EXECUTE sql;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
  RETURN SQLSTATE || '|' || m || '|' || d || '|' || h;
END $$;
SELECT is(split_part(pg_temp.err_parts(pg_temp.pf_sql('[{"prompt": "SECRET-MARKER-7f3a", "max_tokens": "SECRET-MARKER-7f3a"}]')), '|', 3),
          'Rule input_type.', 'a wrong type is Rule input_type.');
SELECT ok(pg_temp.err_parts(pg_temp.pf_sql('[{"prompt": "SECRET-MARKER-7f3a", "max_tokens": "SECRET-MARKER-7f3a"}]'))
          !~ '(SECRET-MARKER|prompt|max_tokens|\[0\]|\[1\])', 'message, detail and hint carry no value, field or index');
SELECT ok(pg_temp.err_parts(pg_temp.pf_sql('[{"prompt": "a", "max_tokens": 1}, {"SECRET-MARKER-7f3a": 1}]'))
          !~ '(SECRET-MARKER|\[1\]|prompt)', 'an unknown key is not echoed');
SELECT is(split_part(pg_temp.err_parts(pg_temp.pf_sql('[{"prompt": "a", "max_tokens": 1}, {"SECRET-MARKER-7f3a": 1}]')), '|', 2),
          'invalid lab request', 'the message is fixed');
SELECT ok(pg_temp.err_parts(format($q$SELECT mlplat.lab_preflight('tlab', 1, 'SECRET-MARKER-7f3a', 1, 1, 1, 'x', '[]', '{"SECRET-MARKER-7f3a": 1}')$q$))
          !~ 'SECRET-MARKER', 'a bad digest is not echoed');
SELECT ok(pg_temp.err_parts(format($q$SELECT mlplat.lab_preflight('tlab', 1, repeat('a', 64), 1, 1, 1, 'SECRET-MARKER-7f3a', '[]')$q$))
          ~ '^22023\|invalid lab request\|Rule unknown_family\.\|', 'an unknown family is not echoed');

-- ---------------------------------------------------------------- read-only
CREATE TEMP TABLE tap_writes AS
SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS n FROM pg_stat_xact_user_tables
WHERE schemaname NOT LIKE 'pg\_temp%';
CREATE TEMP TABLE tap_audit AS SELECT count(*) AS n FROM mlplat.audit_events;
CREATE TEMP TABLE tap_spans AS SELECT count(*) AS n FROM mlplat.spans;
CREATE TEMP TABLE tap_keys AS SELECT count(*) AS n FROM mlplat.idempotency_keys;
CREATE FUNCTION pg_temp.ro_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  res text;
BEGIN
  BEGIN
    PERFORM set_config('transaction_read_only', 'on', true);
    EXECUTE 'SET LOCAL ROLE tap_lab_dev';
    EXECUTE sql INTO res;
    res := 'read_only=' || current_setting('transaction_read_only') || ' ' || res;
    RAISE EXCEPTION USING ERRCODE = 'P0999', MESSAGE = res;
  EXCEPTION WHEN OTHERS THEN
    RETURN CASE WHEN SQLSTATE = 'P0999' THEN SQLERRM ELSE SQLSTATE || ': ' || SQLERRM END;
  END;
END $$;
SELECT alike(pg_temp.ro_try(pg_temp.pf_sql()), 'read_only=on (t,{},tlab,%',
          'the preflight passes in a READ ONLY transaction');
SELECT is((SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_xact_user_tables
           WHERE schemaname NOT LIKE 'pg\_temp%') - (SELECT n FROM tap_writes), 0::bigint,
          'pg_stat_xact_user_tables: the preflight wrote no tuple');
SELECT is((SELECT count(*) FROM mlplat.audit_events) - (SELECT n FROM tap_audit), 0::bigint, 'no audit event');
SELECT is((SELECT count(*) FROM mlplat.spans) - (SELECT n FROM tap_spans), 0::bigint, 'no span');
SELECT is((SELECT count(*) FROM mlplat.idempotency_keys) - (SELECT n FROM tap_keys), 0::bigint, 'no idempotency record');

-- ---------------------------------------------------------------- GPU quota: slots and leases
-- (_lab_reserve_gpus) with room to spare a GPU start holds one quota slot (a user lock no SQL
-- can take) more; one slot per reservation; close to the quota the exact way (FOR NO KEY
-- UPDATE and every slot).  A lease of an ended run still counts its GPUs.
CREATE FUNCTION pg_temp.tap_slots() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pg_locks WHERE locktype = 'userlock' AND classid = x'6d6c7173'::int::oid
    AND objid = (SELECT id FROM mlplat.projects WHERE name = 'tlab')::oid AND pid = pg_backend_pid() AND granted
$$;
CREATE FUNCTION pg_temp.tap_start(k text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  id bigint;
BEGIN
  EXECUTE 'SET LOCAL ROLE tap_lab_dev';
  SELECT (mlplat.start_lab_run('tlab', cand, repeat('a', 64), prof, node, (SELECT max(a.id) FROM mlplat.lab_approvals a),
          'text_generation', '[{"prompt": "hi", "max_tokens": 4}]', '{}', k)).entity_id INTO id FROM lab_ids;
  RESET ROLE;
  RETURN id;
END $$;
CREATE FUNCTION pg_temp.tap_gpus(p text DEFAULT 'tlab') RETURNS bigint LANGUAGE sql AS $$
  SELECT mlplat._gpus_in_use((SELECT id FROM mlplat.projects WHERE name = p))
$$;
SET LOCAL ROLE tap_lab_owner;
SELECT mlplat.approve_lab('tlab', cand, repeat('a', 64), prof, node, '{text_generation}', '{}', 5, '1 day') FROM lab_ids;
RESET ROLE;
CREATE TEMP TABLE tap_base AS SELECT pg_temp.tap_gpus() AS n;
SELECT mlplat.set_project_quota('tlab', 64);
CREATE TEMP TABLE tap_slots_before AS SELECT pg_temp.tap_slots() AS n;
CREATE TEMP TABLE tap_runs AS SELECT pg_temp.tap_start('tap-quota-1') AS id;
SELECT is(pg_temp.tap_slots() - (SELECT n FROM tap_slots_before), 1::bigint,
          'room to spare: the GPU start holds one quota slot more');
SELECT is(pg_temp.tap_gpus() - (SELECT n FROM tap_base), 1::bigint, 'its GPU counts');
INSERT INTO tap_runs SELECT pg_temp.tap_start('tap-quota-2');
SELECT is(pg_temp.tap_slots() - (SELECT n FROM tap_slots_before), 2::bigint,
          'a second GPU start in the same transaction takes another slot');
SELECT mlplat.set_project_quota('tlab', 8);
INSERT INTO tap_runs SELECT pg_temp.tap_start('tap-quota-3');
SELECT is(pg_temp.tap_slots(), 8::bigint, 'close to the quota: the exact way, every slot');
SELECT is(pg_temp.tap_gpus() - (SELECT n FROM tap_base), 3::bigint, 'three GPUs in use');
-- the counter the quota reads (mlplat.lab_gpus, kept by trigger) against the runs themselves
CREATE FUNCTION pg_temp.tap_counted() RETURNS boolean LANGUAGE sql AS $$
  SELECT (SELECT coalesce(sum(c.gpus), 0) FROM mlplat.lab_gpus c JOIN mlplat.projects p ON p.id = c.project_id
          WHERE p.name = 'tlab')
       = (SELECT coalesce(sum(r.gpus), 0) FROM mlplat.lab_runs r JOIN mlplat.projects p ON p.id = r.project_id
          WHERE p.name = 'tlab' AND mlplat.lab_run_is_active(r.status))
$$;
SELECT ok(pg_temp.tap_counted(), 'the GPU counter equals the sum over the active runs (fast and exact starts)');
UPDATE mlplat.lab_runs SET status = 'FAILED', reason_code = 'QUEUE_DEADLINE_EXCEEDED', finished_at = now()
WHERE id IN (SELECT id FROM tap_runs);
SELECT ok(pg_temp.tap_counted(), 'the GPU counter equals the sum over the active runs (the runs ended)');
INSERT INTO mlplat.lab_leases (node_id, lab_run_id, attempt) SELECT node, (SELECT min(id) FROM tap_runs), 1 FROM lab_ids;
SELECT is(pg_temp.tap_gpus() - (SELECT n FROM tap_base), 1::bigint, 'an ended run counts while it holds its lease');
SELECT is(pg_temp.tap_gpus('tlab-other'), 0::bigint, 'a lease counts in its run''s project only');
SELECT is((SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'tlab')::bigint, pg_temp.tap_gpus(),
          'project_status agrees');

SELECT * FROM finish();
ROLLBACK;
