-- pgTAP: optimization campaigns (issue 14): the role x action matrix of every campaign entry
-- point, platform-data functions for administrators only, row-level security across projects,
-- and the immutability of campaigns, approvals, transitions, evidence and artifacts even for
-- the table owner.
BEGIN;
SELECT plan(88);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['tapc_viewer', 'tapc_developer', 'tapc_deployer', 'tapc_owner', 'tapc_outsider', 'tapc_other'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;

CREATE TEMP TABLE tapc_def AS SELECT '{"base": {"model": "m", "version": "1", "model_family": "llama"},
  "output_prefix": "s3://bkt/opt/", "quality_gate": {"metric": "accuracy", "max_drop": 0.01, "signers": ["tapc-evals"]},
  "candidates": [{"name": "q", "kind": "checkpoint", "builder": {"image": "r.example/b@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llmc", "tool_version": "0.5.1"},
                  "algorithm": "gptq", "precision": "w4a16", "config": {}, "hardware": {"accelerator": "h100", "arch": "sm_90", "gpus": 1},
                  "spdx": "Apache-2.0", "max_seconds": 600}]}'::jsonb AS d;
GRANT SELECT ON tapc_def TO PUBLIC;
DO $$ DECLARE p text; BEGIN
  PERFORM mlplat.register_evidence_signer('tapc-evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
  PERFORM mlplat.create_project('tapc', 8, NULL, NULL, NULL, 'tapc_owner');
  PERFORM mlplat.create_project('tapd', 8, NULL, NULL, NULL, 'tapc_other');
  PERFORM mlplat.grant_role('tapc', 'tapc_viewer', 'viewer');
  PERFORM mlplat.grant_role('tapc', 'tapc_developer', 'developer');
  PERFORM mlplat.grant_role('tapc', 'tapc_deployer', 'deployer');
  FOREACH p IN ARRAY ARRAY['tapc', 'tapd'] LOOP
    PERFORM mlplat.add_artifact_location(p, 's3://bkt/');
    PERFORM mlplat.register_model_version(p, 'm', '1', 's3://bkt/m1', repeat('a', 64), 'vllm', 'safetensors');
    PERFORM mlplat.set_model_stage(p, 'm', '1', 'CHAMPION');
    PERFORM mlplat.deploy(p, 'web', 'm', '1', 'vllm');
    PERFORM mlplat.create_campaign(p, 'c', (SELECT d FROM tapc_def));
    PERFORM mlplat.create_campaign(p, 'c2', '{"base": {"model": "m", "version": "1", "model_family": "llama"},
      "output_prefix": "s3://bkt/opt/", "quality_gate": {"metric": "accuracy", "max_drop": 0.01, "signers": ["tapc-evals"]},
      "candidates": [{"name": "q", "kind": "checkpoint", "builder": {"image": "r.example/b@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llmc", "tool_version": "0.5.1"},
                      "algorithm": "awq", "precision": "w4a16", "config": {}, "hardware": {"accelerator": "h100", "arch": "sm_90", "gpus": 1},
                      "spdx": "MIT", "max_seconds": 600}]}');
    PERFORM mlplat.approve_campaign(p, 'c2', 600, '1 hour');
    PERFORM mlplat.record_candidate_evidence(p, 'c2', 'q', 'predicted', '{"metric": "quality_drop", "value": 0.01, "estimator": "guess"}', 0);
  END LOOP;
  PERFORM mlplat.cancel_campaign('tapd', 'c');
END $$;

CREATE TEMP TABLE tapc_actions (action text, rank int, sql text);
INSERT INTO tapc_actions VALUES
  ('campaign_state',            1, $q$SELECT mlplat.campaign_state('tapc', 'c')$q$),
  ('render_builder_job',        1, $q$SELECT mlplat.render_builder_job('tapc', 'c', 'q')$q$),
  ('create_campaign',           2, $q$SELECT mlplat.create_campaign('tapc', 'c', (SELECT d FROM tapc_def))$q$),
  ('cancel_campaign',           2, $q$SELECT mlplat.cancel_campaign('tapc', 'c')$q$),
  ('record_candidate_evidence', 2, $q$SELECT mlplat.record_candidate_evidence('tapc', 'c', 'q', 'predicted', '{"metric": "p50_ms_ratio", "value": 0.9, "estimator": "x"}', 0)$q$),
  ('approve_campaign',          4, $q$SELECT mlplat.approve_campaign('tapc', 'c', 600, '1 hour')$q$),
  ('set_serving_owner',         4, $q$SELECT mlplat.set_serving_owner('tapc', 'web', 'routing', NULL)$q$);
CREATE TEMP TABLE tapc_roles (role text, rank int);
INSERT INTO tapc_roles VALUES ('tapc_outsider', 0), ('tapc_viewer', 1), ('tapc_developer', 2), ('tapc_deployer', 3), ('tapc_owner', 4);
GRANT SELECT ON tapc_actions, tapc_roles TO PUBLIC;

-- the matrix (7 actions x 5 roles = 35): allowed exactly when the role's rank reaches the action's
SELECT is(public.tap_api_try(r.role, a.sql) <> '42501', r.rank >= a.rank,
          format('%s %s %s', r.role, CASE WHEN r.rank >= a.rank THEN 'may' ELSE 'may not' END, a.action))
FROM tapc_roles r CROSS JOIN tapc_actions a ORDER BY a.rank, a.action, r.rank;
-- allowed calls really succeed
SELECT is(public.tap_api_try(CASE WHEN rank = 4 THEN 'tapc_owner' ELSE 'tapc_developer' END, sql), 'ok', action || ' succeeds for its role')
FROM tapc_actions ORDER BY action;
-- a full owner of tapc has no rights in tapd
SELECT is(public.tap_api_try('tapc_owner', replace(sql, '''tapc''', '''tapd''')), '42501', 'tapc owner may not ' || action || ' in tapd')
FROM tapc_actions WHERE action IN ('approve_campaign', 'cancel_campaign', 'campaign_state', 'record_candidate_evidence') ORDER BY action;

-- platform data: administrators only, whatever project role
SELECT is(public.tap_api_try('tapc_owner', q), '42501', 'a project owner may not ' || f)
FROM (VALUES ('register_evidence_signer', $q$SELECT mlplat.register_evidence_signer('x', decode(repeat('00', 32), 'hex'))$q$),
             ('revoke_evidence_signer', $q$SELECT mlplat.revoke_evidence_signer('tapc-evals')$q$),
             ('register_optimization_preset', $q$SELECT mlplat.register_optimization_preset('x', '{}')$q$),
             ('register_component', $q$SELECT mlplat.register_component('x', 'cache', '{"capabilities": []}', 'regress:x')$q$),
             ('register_capability', $q$SELECT mlplat.register_capability('{}')$q$),
             ('set_capability_qualification', $q$SELECT mlplat.set_capability_qualification(1, 'LOCAL', 'regress:x')$q$)) v(f, q)
ORDER BY f;
-- everyone may compile and verify (pure reads of platform data)
SELECT is(public.tap_api_try('tapc_outsider', $q$SELECT mlplat.ed25519_verify('\x00', '\x00', '\x00')$q$), 'ok', 'anyone may call ed25519_verify');
SELECT is(public.tap_api_try('tapc_outsider', $q$SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'x', 'fp8', 'h100', '{}')$q$), '55000',
          'anyone may call compile_runtime_args (and it fails closed on an empty catalog)');

-- a signer registered again (mlplat._registered): the same key answers REGISTERED with no
-- second audit row; another key, or a revoked signer, is refused (42710) in the signer's words
SELECT mlplat.register_evidence_signer('tapc-sig2', decode(repeat('11', 32), 'hex'));
SELECT is((mlplat.register_evidence_signer('tapc-sig2', decode(repeat('11', 32), 'hex'))).status, 'REGISTERED',
          'a signer registered again with the same key: REGISTERED');
SELECT is((SELECT count(*) FROM mlplat.audit_events WHERE action = 'register_evidence_signer' AND detail->>'name' = 'tapc-sig2'),
          1::bigint, 'a signer registered again: no second audit row');
SELECT is(public.tap_api_try(current_user, $q$SELECT mlplat.register_evidence_signer('tapc-sig2', decode(repeat('22', 32), 'hex'))$q$, true),
          '42710: evidence signer "tapc-sig2" already exists with another key or was revoked', 'a signer with another key: refused');
SELECT mlplat.revoke_evidence_signer('tapc-sig2');
SELECT is(public.tap_api_try(current_user, $q$SELECT mlplat.register_evidence_signer('tapc-sig2', decode(repeat('11', 32), 'hex'))$q$),
          '42710', 'a revoked signer registered again: refused');

-- row-level security: tapc's owner sees tapc's campaign rows only, in every table and view
SET LOCAL ROLE tapc_owner;
SELECT is((SELECT count(*) FROM mlplat.campaigns), 2::bigint, 'campaigns: own project only');
SELECT is((SELECT count(*) FROM mlplat.campaign_candidates), 2::bigint, 'campaign_candidates: own project only');
SELECT is((SELECT count(*) FROM mlplat.campaign_approvals), 1::bigint, 'campaign_approvals: own project only');
SELECT is((SELECT count(*) FROM mlplat.candidate_transitions), 2::bigint, 'candidate_transitions: own project only');
SELECT is((SELECT count(*) FROM mlplat.candidate_predictions), 1::bigint, 'candidate_predictions: own project only');
SELECT is((SELECT count(*) FROM mlplat.campaign_status WHERE project = 'tapd'), 0::bigint, 'campaign_status hides tapd');
SELECT is((SELECT count(*) FROM mlplat.campaign_candidate_status WHERE project = 'tapd'), 0::bigint, 'campaign_candidate_status hides tapd');
SELECT is((SELECT count(*) FROM mlplat.evidence_signers WHERE name = 'tapc-evals'), 1::bigint, 'evidence signers are platform data, readable by all');
RESET ROLE;

-- privileges: nothing writable by callers, even the campaign's creator
SELECT is((SELECT array_agg(t ORDER BY t) FROM unnest(ARRAY['campaigns', 'campaign_approvals', 'campaign_candidates',
           'candidate_transitions', 'candidate_predictions', 'candidate_measurements', 'optimized_artifacts',
           'artifact_qualifications', 'evidence_signers', 'optimization_presets', 'components', 'serving_owners',
           'capability_descriptors']) t
           WHERE has_table_privilege('tapc_developer', 'mlplat.' || t, 'INSERT, UPDATE, DELETE, TRUNCATE')), NULL,
          'no campaign table is writable by callers');
SELECT is((SELECT array_agg(v ORDER BY v) FROM unnest(ARRAY['campaign_status', 'campaign_candidate_status', 'optimized_artifact_status']) v
           WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relname = v
                             AND 'security_invoker=true' = ANY (c.reloptions))), NULL, 'the three campaign views are security_invoker');

-- immutability holds for the owner of the tables too (triggers, not grants)
SELECT is(public.tap_api_try('postgres', sql), '55000', what)
FROM (VALUES ('campaigns: no definition change', $q$UPDATE mlplat.campaigns SET definition = '{}'$q$),
             ('campaigns: no delete', $q$DELETE FROM mlplat.campaigns$q$),
             ('campaigns: no truncate', $q$TRUNCATE mlplat.campaigns CASCADE$q$),
             ('campaigns: a cancel request is never rewritten', $q$UPDATE mlplat.campaigns SET cancel_requested_at = now() + interval '1 day' WHERE cancel_requested_at IS NOT NULL$q$),
             ('approvals: no change', $q$UPDATE mlplat.campaign_approvals SET max_spend_gpu_seconds = max_spend_gpu_seconds + 1$q$),
             ('approvals: no delete', $q$DELETE FROM mlplat.campaign_approvals$q$),
             ('candidates: plan immutable', $q$UPDATE mlplat.campaign_candidates SET plan = plan || '{"x": 1}'$q$),
             ('candidates: reservation immutable', $q$UPDATE mlplat.campaign_candidates SET reserved_gpu_seconds = 1$q$),
             ('candidates: no delete', $q$DELETE FROM mlplat.campaign_candidates$q$),
             ('transitions: append-only', $q$UPDATE mlplat.candidate_transitions SET to_status = 'BUILT'$q$),
             ('predictions: append-only', $q$UPDATE mlplat.candidate_predictions SET value = 9$q$),
             ('predictions: no truncate', $q$TRUNCATE mlplat.candidate_predictions$q$),
             ('signers: key never changes', $q$UPDATE mlplat.evidence_signers SET public_key = decode(repeat('11', 32), 'hex')$q$),
             ('signers: no delete', $q$DELETE FROM mlplat.evidence_signers$q$)) v(what, sql)
ORDER BY what;
-- a status moves only along mlplat._campaign_candidate_transitions() (the shared state-machine trigger)
SELECT is(public.tap_api_try('postgres', $q$UPDATE mlplat.campaign_candidates SET status = 'BUILT'$q$), '23514',
          'candidates: no illegal edge');
SELECT is(public.tap_api_try('postgres', $q$UPDATE mlplat.campaigns SET cancel_requested_at = now(), cancel_requested_by = 'x' WHERE name = 'c2'$q$),
          'ok', 'the one allowed change: a cancel request, once');

-- a candidate's identity: the content id of its plan with its name (create_campaign takes it
-- from the expanded candidate as it stands; this holds it to the definition)
SELECT ok((SELECT count(*) > 0 AND bool_and(k.content_id = mlplat.content_id(k.plan || jsonb_build_object('name', k.name)))
             FROM mlplat.campaign_candidates k),
          'each candidate''s content id is that of its plan with its name');

-- a candidate is in its campaign's project, a transition in its candidate's: one key each
-- (campaign/candidate, project), which create_campaign's 64 rows check once per row; with the
-- former separate keys to projects a row of another, existing project was accepted
SELECT is(public.tap_api_try('postgres', $q$INSERT INTO mlplat.campaign_candidates (campaign_id, project_id, ordinal, name, plan,
            content_id, gpus, reserved_gpu_seconds)
          SELECT k.campaign_id, (SELECT id FROM mlplat.projects WHERE name = 'tapd'), 64, 'elsewhere', k.plan, k.content_id,
                 k.gpus, k.reserved_gpu_seconds
            FROM mlplat.campaign_candidates k WHERE k.project_id <> (SELECT id FROM mlplat.projects WHERE name = 'tapd')
           ORDER BY k.id LIMIT 1$q$), '23503',
          'a candidate in another project than its campaign''s is refused');
SELECT is(public.tap_api_try('postgres', $q$INSERT INTO mlplat.candidate_transitions (candidate_id, project_id, seq, to_status, actor)
          SELECT k.id, (SELECT id FROM mlplat.projects WHERE name = 'tapd'), 99, 'PLANNED', 'x'
            FROM mlplat.campaign_candidates k WHERE k.project_id <> (SELECT id FROM mlplat.projects WHERE name = 'tapd')
           ORDER BY k.id LIMIT 1$q$), '23503',
          'a transition in another project than its candidate''s is refused');

-- every campaign entry point pins its search_path and is SECURITY DEFINER (or a pure read)
SELECT is((SELECT array_agg(f ORDER BY f) FROM unnest(ARRAY['create_campaign', 'approve_campaign', 'cancel_campaign',
           'record_candidate_evidence', 'qualify_artifact', 'campaign_state', 'render_builder_job', 'compile_artifact_args',
           'register_optimization_preset', 'register_evidence_signer', 'revoke_evidence_signer', 'register_component',
           'register_capability', 'set_capability_qualification', 'set_serving_owner']) f
           WHERE NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname = f
                             AND p.prosecdef AND 'search_path=pg_catalog, mlplat, pg_temp' = ANY (p.proconfig))), NULL,
          'every campaign entry point is SECURITY DEFINER with the pinned search_path');

SELECT * FROM finish();
ROLLBACK;
