-- mlplat API: Model Lab reference data and the read-only preflight (docs/lab.md).
\set SHOW_CONTEXT never
\set acc 'entity, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_lab_owner', 'regress_lab_dev', 'regress_lab_viewer', 'regress_lab_deployer',
                           'regress_lab_app', 'regress_lab_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('regress_lab_admin') ON CONFLICT DO NOTHING;
INSERT INTO mlplat.impersonators (app_role) VALUES ('regress_lab_app') ON CONFLICT DO NOTHING;
SELECT :acc FROM mlplat.create_project('labp', 8, NULL, NULL, NULL, 'regress_lab_owner');
SELECT :acc FROM mlplat.add_artifact_location('labp', 's3://lab/');
SELECT :acc FROM mlplat.grant_role('labp', 'regress_lab_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('labp', 'regress_lab_viewer', 'viewer');
SELECT :acc FROM mlplat.grant_role('labp', 'regress_lab_deployer', 'deployer');
SET ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.register_model_version('labp', 'llm', '1', 's3://lab/llm/1', repeat('a', 64), 'vllm', 'custom');
SELECT :acc FROM mlplat.set_model_stage('labp', 'llm', '1', 'CANDIDATE');
RESET ROLE;

-- nodes are platform data: administrators only; names and GPUs are checked, code-only
SET ROLE regress_lab_dev;
SELECT :acc FROM mlplat.register_lab_node('gpu-1', 'nvidia-a100', 8);
SET ROLE regress_lab_admin;
SELECT :acc FROM mlplat.register_lab_node('gpu-1', 'nvidia-a100', 8);
SELECT :acc FROM mlplat.register_lab_node('gpu-2', 'nvidia-a100', 8);
SELECT :acc FROM mlplat.register_lab_node('Bad_Node', 'nvidia-a100', 8);
SELECT :acc FROM mlplat.register_lab_node('gpu-3', 'nvidia-a100', 65);
RESET ROLE;
-- until the lab_runs reconciler observes them: what it writes from the Node objects
UPDATE mlplat.lab_nodes SET observed_ready = true, observed_unschedulable = false, observed_gpus = 8,
       observed_accelerator = 'nvidia-a100', observed_at = now();

-- runtime profiles: deployer+, closed spec, immutable
SET ROLE regress_lab_dev;
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100', '{}');
SET ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100', '{"runtime_kind": "vllm"}');
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100',
  jsonb_build_object('runtime_kind', 'vllm', 'image', 'registry.example/lab/vllm:0.6@sha256:' || repeat('e', 64),
    'gpus', 2, 'accelerator', 'nvidia-a100', 'families', '["text_generation", "embedding"]'::jsonb,
    'max_execution_seconds', 300, 'max_output_bytes', 131072, 'extra', 1));
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100',
  jsonb_build_object('runtime_kind', 'vllm', 'image', 'registry.example/lab/vllm:0.6',
    'gpus', 2, 'accelerator', 'nvidia-a100', 'families', '["text_generation", "embedding"]'::jsonb,
    'max_execution_seconds', 300, 'max_output_bytes', 131072));
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100',
  jsonb_build_object('runtime_kind', 'vllm', 'image', 'registry.example/lab/vllm:0.6@sha256:' || repeat('e', 64),
    'gpus', 2, 'accelerator', 'nvidia-a100', 'families', '["text_generation", "embedding"]'::jsonb,
    'max_execution_seconds', 300, 'max_output_bytes', 131072), 'prof-1');
SELECT :acc FROM mlplat.register_lab_profile('labp', 'vllm-a100',
  jsonb_build_object('runtime_kind', 'vllm', 'image', 'registry.example/lab/vllm:0.6@sha256:' || repeat('e', 64),
    'gpus', 2, 'accelerator', 'nvidia-a100', 'families', '["text_generation", "embedding"]'::jsonb,
    'max_execution_seconds', 300, 'max_output_bytes', 131072), 'prof-1');
RESET ROLE;
UPDATE mlplat.lab_profiles SET spec = '{}' WHERE name = 'vllm-a100';

CREATE TEMP TABLE ids AS
SELECT (SELECT id FROM mlplat.model_versions WHERE artifact_uri = 's3://lab/llm/1') AS cand,
       repeat('a', 64) AS sha,
       (SELECT id FROM mlplat.lab_profiles WHERE name = 'vllm-a100') AS prof,
       (SELECT id FROM mlplat.lab_nodes WHERE name = 'gpu-1') AS node,
       (SELECT id FROM mlplat.lab_nodes WHERE name = 'gpu-2') AS node2,
       NULL::bigint AS appr, NULL::bigint AS appr2;
GRANT SELECT ON ids TO PUBLIC;

-- probe evidence through the API (acceptance 15: never inserted by hand).  A probe ends the way
-- the lab_runs reconciler ends it, with no worker here: its claim dispatches the probe (lease,
-- DISPATCHED), the write-back records what its Job did (COMPLETED with an output: PASSED;
-- FAILED: FAILED), and the next pass sees the Job gone (lease released).  Returns the probes'
-- statuses.
CREATE FUNCTION pg_temp.probes_end(p_event text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.lab_runs;
BEGIN
  PERFORM 1 FROM mlplat._lab_runs_claim(1, 'regress', 'lab-bucket');
  FOR r IN SELECT * FROM mlplat.lab_runs x WHERE x.purpose = 'probe' AND x.status = 'DISPATCHED' ORDER BY x.id LOOP
    PERFORM mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', p_event, '{}', convert_to('{"ok": true}', 'UTF8'));
    PERFORM mlplat._lab_runs_job_gone(x.id, x.row_version, 1, 'regress', '{"job": "absent"}')
    FROM mlplat.lab_runs x WHERE x.id = r.id;
    RETURN NEXT (SELECT pb.status || ' ' || (pb.completed_at IS NOT NULL) FROM mlplat.lab_probes pb WHERE pb.lab_run_id = r.id);
  END LOOP;
END $$;
SET ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), 'probe-0');
RESET ROLE;
SELECT pg_temp.probes_end('COMPLETED') AS fixture_probe;
SELECT count(*) AS leases FROM mlplat.lab_leases;

-- approvals: owners only (no admin bypass); ids must exist; artifact must be the candidate's
SET ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '1 day');
SET ROLE regress_lab_admin;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '1 day');
SET ROLE regress_lab_owner;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('b', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '1 day');
SELECT :acc FROM mlplat.approve_lab('labp', 999999999, repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '1 day');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{"concurrency": 1}', 5, '1 day');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 0, '1 day');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '31 days');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{poetry}', '{}', 5, '1 day');
RESET ROLE;
SET mlplat.on_behalf_of = 'regress_lab_owner';
SET ROLE regress_lab_app;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{"max_execution_seconds": 900, "max_output_bytes": 262144}', 5, '1 day', 'appr-1');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{"max_execution_seconds": 900, "max_output_bytes": 262144}', 5, '1 day', 'appr-1');
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 5, '1 day', 'appr-1');
RESET ROLE;
RESET mlplat.on_behalf_of;
-- an impersonated approval is audited with both the person and the database role
SELECT actor, db_role, detail->'limits' AS limits FROM mlplat.audit_events WHERE action = 'approve_lab';
UPDATE ids SET appr = (SELECT max(id) FROM mlplat.lab_approvals);
SET ROLE regress_lab_owner;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids), '{text_generation}', '{}', 5, '1 day');
RESET ROLE;
UPDATE ids SET appr2 = (SELECT max(id) FROM mlplat.lab_approvals);
-- approvals carry no text and their scope never changes, for superusers neither
UPDATE mlplat.lab_approvals SET max_runs = 1000;
SELECT count(*) AS text_columns FROM information_schema.columns
WHERE table_schema = 'mlplat' AND table_name = 'lab_approvals' AND data_type = 'text'
  AND column_name NOT IN ('kind', 'artifact_sha256', 'approved_by', 'db_role', 'revoked_by', 'request_hash');

-- the fixture's preflight, as a function of what a case changes
CREATE FUNCTION pg_temp.pf(p_family text DEFAULT 'text_generation',
                           p_inputs jsonb DEFAULT '[{"prompt": "Say hi.", "max_tokens": 16}]',
                           p_limits jsonb DEFAULT '{}', p_cand bigint DEFAULT NULL, p_sha text DEFAULT NULL,
                           p_prof bigint DEFAULT NULL, p_node bigint DEFAULT NULL, p_appr bigint DEFAULT NULL)
RETURNS mlplat.lab_preflight_result LANGUAGE sql AS $$
  SELECT * FROM mlplat.lab_preflight('labp', coalesce(p_cand, (SELECT cand FROM ids)), coalesce(p_sha, (SELECT sha FROM ids)),
    coalesce(p_prof, (SELECT prof FROM ids)), coalesce(p_node, (SELECT node FROM ids)),
    coalesce(p_appr, (SELECT appr FROM ids)), p_family, p_inputs, p_limits)
$$;

-- 1. the valid fixture: passed, no blockers, both flags false, digest/count/bytes, default limits
SET ROLE regress_lab_dev;
\x on
SELECT passed, blockers, project, model, version, node, family, input_count, input_bytes,
       input_digest = mlplat.content_id('[{"prompt": "Say hi.", "max_tokens": 16}]') AS digest_is_content_id,
       input_bytes = octet_length(mlplat.canonical_json('[{"prompt": "Say hi.", "max_tokens": 16}]')) AS bytes_canonical,
       runtime_profile_content_id = (SELECT content_id FROM mlplat.lab_profiles WHERE name = 'vllm-a100') AS content_id_ok,
       max_execution_seconds, max_queue_seconds, retention_seconds, max_output_bytes, max_attempts, concurrency,
       execution_started, permission_granted, assessed_at = now() AS assessed_now
FROM pg_temp.pf();
\x off
-- the result type has exactly the documented attributes, in order
SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'mlplat.lab_preflight_result'::regclass AND attnum > 0;
-- 2. read-only: in a READ ONLY transaction, nothing written
BEGIN READ ONLY;
SELECT passed FROM pg_temp.pf();
COMMIT;
RESET ROLE;
SELECT count(*) AS preflight_audit FROM mlplat.audit_events WHERE action = 'lab_preflight';

-- 3. each blocker from one change of the fixture (rolled back); two at once are sorted
CREATE FUNCTION pg_temp.blk(p_family text DEFAULT 'text_generation', p_inputs jsonb DEFAULT '[{"prompt": "Say hi.", "max_tokens": 16}]',
                            p_limits jsonb DEFAULT '{}', p_cand bigint DEFAULT NULL, p_sha text DEFAULT NULL,
                            p_prof bigint DEFAULT NULL, p_node bigint DEFAULT NULL, p_appr bigint DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
  SELECT (r).passed || ' ' || (r).blockers::text FROM (SELECT pg_temp.pf(p_family, p_inputs, p_limits, p_cand, p_sha, p_prof, p_node, p_appr) AS r) x
$$;
BEGIN; UPDATE mlplat.projects SET status = 'DELETING' WHERE name = 'labp';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS project_not_active; ROLLBACK;
SET ROLE regress_lab_dev;
SELECT pg_temp.blk(p_cand => 999999999) AS candidate_not_found;
SELECT pg_temp.blk(p_prof => 999999999) AS profile_not_found;
SELECT pg_temp.blk(p_node => 999999999) AS node_not_found;
SELECT pg_temp.blk(p_appr => 999999999) AS approval_not_found;
SELECT pg_temp.blk(p_appr => (SELECT appr2 FROM ids)) AS approval_scope_mismatch;
SELECT pg_temp.blk('embedding', '[{"text": "hello"}]') AS family_not_approved;
SELECT pg_temp.blk('tabular_predict', '[{"features": [1, 2.5]}]') AS family_not_supported;
SELECT pg_temp.blk(p_limits => '{"max_execution_seconds": 400}') AS limit_exceeds_profile;
SELECT pg_temp.blk(p_limits => '{"max_queue_seconds": 1200}') AS limit_exceeds_approval;
SELECT pg_temp.blk(p_limits => '{"max_execution_seconds": 300, "max_output_bytes": 131072}') AS limits_at_caps;
RESET ROLE;
BEGIN; UPDATE mlplat.model_versions SET stage = 'NONE' WHERE id = (SELECT cand FROM ids);
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS candidate_not_eligible; ROLLBACK;
BEGIN; UPDATE mlplat.model_versions SET artifact_sha256 = repeat('f', 64) WHERE id = (SELECT cand FROM ids);
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS artifact_mismatch; ROLLBACK;
BEGIN; UPDATE mlplat.model_versions SET runtime_kind = 'triton' WHERE id = (SELECT cand FROM ids);
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS profile_runtime_mismatch; ROLLBACK;
BEGIN; UPDATE mlplat.lab_profiles SET enabled = false;
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS profile_disabled; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET enabled = false WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_disabled; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_at = NULL WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_not_observed; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_at = now() - interval '2 minutes' WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_observation_stale;
RESET ROLE; SET LOCAL mlplat.lab_node_max_age = '5min';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS fresh_within_5min; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_ready = false WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_not_ready; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_unschedulable = true WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_cordoned; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_accelerator = 'nvidia-h100' WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_accelerator_mismatch; ROLLBACK;
BEGIN; UPDATE mlplat.lab_nodes SET observed_gpus = 1 WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS node_insufficient_gpus; ROLLBACK;
-- probes, all through the API: gpu-2 (with its own approval) has none yet; a probe started there
-- runs; a newer probe of the fixture's node that fails is the latest evidence
SET ROLE regress_lab_dev;
SELECT pg_temp.blk(p_node => (SELECT node2 FROM ids), p_appr => (SELECT appr2 FROM ids)) AS probe_missing;
RESET ROLE;
BEGIN; SET LOCAL ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids), 'probe-running');
SET LOCAL ROLE regress_lab_dev;
SELECT pg_temp.blk(p_node => (SELECT node2 FROM ids), p_appr => (SELECT appr2 FROM ids)) AS probe_running; ROLLBACK;
BEGIN; SET LOCAL ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), 'probe-failed');
RESET ROLE; SELECT pg_temp.probes_end('FAILED') AS probe;
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS probe_failed; ROLLBACK;
-- stale: the setting lowered below the fixture probe's age (at least 1 s, its minimum), not its
-- completed_at moved
SELECT pg_sleep(greatest(0, 1.1 - extract(epoch FROM clock_timestamp() - completed_at)::float8)) AS waited
FROM mlplat.lab_probes WHERE lab_run_id = (SELECT min(id) FROM mlplat.lab_runs);
BEGIN; SET LOCAL mlplat.lab_probe_max_age = '1s';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS probe_stale;
RESET ROLE; SET LOCAL mlplat.lab_probe_max_age = '1h';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS probe_fresh_within_1h; ROLLBACK;
BEGIN; SET LOCAL ROLE regress_lab_owner; SELECT :acc FROM mlplat.revoke_lab_approval('labp', (SELECT appr FROM ids));
SELECT :acc FROM mlplat.revoke_lab_approval('labp', (SELECT appr FROM ids));
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS approval_revoked; ROLLBACK;
BEGIN; UPDATE mlplat.lab_approvals SET runs_used = max_runs WHERE id = (SELECT appr FROM ids);
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS approval_exhausted; ROLLBACK;
-- an approval's expiry is immutable: only with triggers off can a test move it
BEGIN; SET LOCAL session_replication_role = replica;
UPDATE mlplat.lab_approvals SET expires_at = now() - interval '1 second' WHERE id = (SELECT appr FROM ids);
SET LOCAL session_replication_role = origin;
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS approval_expired;
RESET ROLE; SET LOCAL mlplat.lab_probe_max_age = '1s';
SET LOCAL ROLE regress_lab_dev; SELECT pg_temp.blk() AS two_sorted; ROLLBACK;

-- 5. who may preflight: developers and up, by their own membership only
SET ROLE regress_lab_viewer;
SELECT pg_temp.blk() AS viewer;
SET ROLE regress_lab_admin;
SELECT pg_temp.blk() AS admin_without_role;
RESET ROLE;
SELECT pg_temp.blk() AS superuser_without_role;
SET ROLE regress_lab_deployer;
SELECT pg_temp.blk() AS deployer;
RESET ROLE;
SELECT mlplat.lab_preflight('no-such-project', 1, repeat('a', 64), 1, 1, 1, 'embedding', '[{"text": "x"}]');
SET mlplat.on_behalf_of = 'regress_lab_dev';
SET ROLE regress_lab_app;
SELECT pg_temp.blk() AS app_for_developer;
SET mlplat.on_behalf_of = 'regress_lab_viewer';
SELECT pg_temp.blk() AS app_for_viewer;
RESET ROLE;
RESET mlplat.on_behalf_of;
-- the application role's own membership does not count either
SELECT :acc FROM mlplat.grant_role('labp', 'regress_lab_app', 'developer');
SET ROLE regress_lab_app;
SET mlplat.on_behalf_of = 'regress_lab_viewer';
SELECT pg_temp.blk() AS app_member_for_viewer;
RESET mlplat.on_behalf_of;
SELECT pg_temp.blk() AS app_as_itself;
RESET ROLE;
SELECT :acc FROM mlplat.revoke_role('labp', 'regress_lab_app', 'developer');

-- 6. validation: a rule code and nothing the caller wrote, per family
SET ROLE regress_lab_dev;
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 16, "temperature": 0.7, "stop": ["\n"]}]') AS tg_valid;
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": true}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": "16"}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 16, "seed": 1}]');
SELECT pg_temp.blk('text_generation', jsonb_build_array(jsonb_build_object('prompt', repeat('x', 16000), 'max_tokens', 1),
  jsonb_build_object('prompt', repeat('x', 16000), 'max_tokens', 1), jsonb_build_object('prompt', repeat('x', 16000), 'max_tokens', 1),
  jsonb_build_object('prompt', repeat('x', 16000), 'max_tokens', 1), jsonb_build_object('prompt', repeat('x', 16000), 'max_tokens', 1)));
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 1.5}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 5000}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "", "max_tokens": 5}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 5, "temperature": 2.5}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 5, "stop": [1]}]');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 5, "stop": ["a", "b", "c", "d", "e"]}]');
SELECT pg_temp.blk('embedding', '[{"text": "hello"}]') AS emb_valid;
SELECT pg_temp.blk('embedding', '[{"text": false}]');
SELECT pg_temp.blk('embedding', '[{"text": 16}]');
SELECT pg_temp.blk('embedding', '[{"text": "x", "model": "y"}]');
SELECT pg_temp.blk('embedding', jsonb_build_array(jsonb_build_object('text', repeat('x', 8000)), jsonb_build_object('text', repeat('x', 8000)),
  jsonb_build_object('text', repeat('x', 8000)), jsonb_build_object('text', repeat('x', 8000)), jsonb_build_object('text', repeat('x', 8000)),
  jsonb_build_object('text', repeat('x', 8000)), jsonb_build_object('text', repeat('x', 8000)), jsonb_build_object('text', repeat('x', 8000)),
  jsonb_build_object('text', repeat('x', 8000))));
SELECT pg_temp.blk('tabular_predict', '[{"features": [1, 2.5, -3e2]}]') AS tab_valid;
SELECT pg_temp.blk('tabular_predict', '[{"features": [1, true]}]');
SELECT pg_temp.blk('tabular_predict', '[{"features": [1, "16"]}]');
SELECT pg_temp.blk('tabular_predict', '[{"features": [1], "id": 7}]');
SELECT pg_temp.blk('tabular_predict', jsonb_build_array(jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512))),
  jsonb_build_object('features', (SELECT jsonb_agg(1.23456789e-5) FROM generate_series(1, 512)))));
SELECT pg_temp.blk('tabular_predict', '[{"features": []}]');
SELECT pg_temp.blk('image_classification', '[{"image_base64": "iVBORw0KGgo=", "content_type": "image/png", "top_k": 5}]') AS img_valid;
SELECT pg_temp.blk('image_classification', '[{"image_base64": "iVBORw0KGgo=", "content_type": "image/png", "top_k": false}]');
SELECT pg_temp.blk('image_classification', '[{"image_base64": "iVBORw0KGgo=", "content_type": "image/png", "top_k": "16"}]');
SELECT pg_temp.blk('image_classification', '[{"image_base64": "iVBORw0KGgo=", "content_type": "image/png", "url": "x"}]');
SELECT pg_temp.blk('image_classification', jsonb_build_array(jsonb_build_object('image_base64', repeat('AAAA', 16384), 'content_type', 'image/png'),
  jsonb_build_object('image_base64', repeat('AAAA', 16384), 'content_type', 'image/png')));
SELECT pg_temp.blk('image_classification', '[{"image_base64": "not base64!", "content_type": "image/png"}]');
SELECT pg_temp.blk('image_classification', '[{"image_base64": "iVBORw0KGgo=", "content_type": "image/gif"}]');
SELECT pg_temp.blk('speech_to_text', '[{"audio_base64": "UklGRg==", "content_type": "audio/wav", "language": "en-US"}]') AS stt_valid;
SELECT pg_temp.blk('speech_to_text', '[{"audio_base64": "UklGRg==", "content_type": true}]');
SELECT pg_temp.blk('speech_to_text', '[{"audio_base64": "UklGRg==", "content_type": "audio/wav", "language": 16}]');
SELECT pg_temp.blk('speech_to_text', '[{"audio_base64": "UklGRg==", "content_type": "audio/wav", "speaker": "x"}]');
SELECT pg_temp.blk('speech_to_text', jsonb_build_array(jsonb_build_object('audio_base64', repeat('AAAA', 16384), 'content_type', 'audio/wav'),
  jsonb_build_object('audio_base64', repeat('AAAA', 16384), 'content_type', 'audio/wav')));
SELECT pg_temp.blk('speech_to_text', '[{"audio_base64": "UklGRg==", "content_type": "audio/wav", "language": "English"}]');
-- arguments and limits
SELECT pg_temp.blk(p_limits => '{"concurrency": 2}');
SELECT pg_temp.blk(p_limits => '{"concurrency": 1}') AS concurrency_one;
SELECT pg_temp.blk(p_limits => '{"max_attempts": 4}');
SELECT pg_temp.blk(p_limits => '{"max_attempts": "2"}');
SELECT pg_temp.blk(p_limits => '{"retention_seconds": 59}');
SELECT pg_temp.blk(p_limits => '{"parallelism": 2}');
SELECT pg_temp.blk(p_limits => '[]');
SELECT pg_temp.blk('poetry');
SELECT pg_temp.blk(p_inputs => '{"prompt": "p"}');
SELECT pg_temp.blk(p_inputs => '[]');
SELECT pg_temp.blk(p_inputs => '["p"]');
SELECT pg_temp.blk(p_inputs => (SELECT jsonb_agg('{"prompt": "p", "max_tokens": 1}'::jsonb) FROM generate_series(1, 65)));
SELECT pg_temp.blk(p_sha => 'ABC');
SELECT pg_temp.blk(p_cand => -1);
SELECT mlplat.lab_preflight('labp', NULL, repeat('a', 64), 1, 1, 1, 'embedding', '[{"text": "x"}]');
-- the first broken rule decides: arguments left to right, then items in order
SELECT pg_temp.blk('poetry', '[]', '{"concurrency": 2}', p_sha => 'x');
SELECT pg_temp.blk('text_generation', '[{"prompt": "p", "max_tokens": 1}, {"prompt": 1, "max_tokens": 1}, {"prompt": "p"}]');
RESET ROLE;

-- the views show ids and statuses, never content
SELECT node, accelerator, gpus, enabled, observed_ready, leased_by_lab_run FROM mlplat.lab_node_status ORDER BY node;
SET ROLE regress_lab_viewer;
SELECT project, families, max_runs, runs_used, approved_by, status FROM mlplat.lab_approval_status ORDER BY approval_id;
SELECT count(*) FROM mlplat.lab_run_payloads;
RESET ROLE;

-- ---------------------------------------------------------------- LabRuns
-- 8. start needs an idempotency key; the same key replays, another request under it is refused
SET ROLE regress_lab_dev;
CREATE FUNCTION pg_temp.start(p_key text, p_inputs jsonb DEFAULT '[{"prompt": "Say hi.", "max_tokens": 16}]',
                              p_appr bigint DEFAULT NULL, p_node bigint DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql AS $$
  SELECT * FROM mlplat.start_lab_run('labp', (SELECT cand FROM ids), (SELECT sha FROM ids), (SELECT prof FROM ids),
    coalesce(p_node, (SELECT node FROM ids)), coalesce(p_appr, (SELECT appr FROM ids)), 'text_generation', p_inputs, '{}', p_key)
$$;
SELECT :acc FROM pg_temp.start(NULL);
SELECT :acc FROM pg_temp.start('run-1');
SELECT :acc FROM pg_temp.start('run-1');
SELECT :acc FROM pg_temp.start('run-1', '[{"prompt": "Say bye.", "max_tokens": 16}]');
SELECT lab_run_id IS NOT NULL AS has_id, purpose, status, in_flight, attempt, max_attempts, gpus, input_count, input_bytes,
       approval_id = (SELECT appr FROM ids) AS bound_approval, node_name, family, cancel_acknowledged_at,
       queue_deadline_at - created_at AS queue_budget, run_deadline_at - created_at AS run_budget
FROM mlplat.lab_run_status WHERE purpose = 'run';
SELECT runs_used FROM mlplat.lab_approval_status WHERE approval_id = (SELECT appr FROM ids);
SELECT project, gpus_in_use FROM mlplat.project_status WHERE project = 'labp';
-- the Job: explicit node, no retries by Kubernetes, the execution budget, no input content
SELECT j->'metadata'->>'name' = 'lab-' || (SELECT max(id) FROM mlplat.lab_runs) || '-1' AS job_name,
       j->'metadata'->>'namespace' AS namespace, j->'spec'->'backoffLimit' AS backoff_limit,
       j->'spec'->'activeDeadlineSeconds' AS deadline,
       j->'spec'->'template'->'spec'->'nodeSelector' AS node_selector,
       j->'spec'->'template'->'spec'->'automountServiceAccountToken' AS token,
       j->'spec'->'template'->'spec'->>'serviceAccountName' AS service_account,
       j->'spec'->'template'->'spec'->'containers'->0->'resources' AS resources,
       (SELECT jsonb_object_agg(e->>'name', e->>'value') FROM jsonb_array_elements(j->'spec'->'template'->'spec'->'containers'->0->'env') e
         WHERE e->>'name' IN ('MLPLAT_CONCURRENCY', 'MLPLAT_LAB_MODE', 'MLPLAT_INPUT_PATH', 'MLPLAT_MAX_OUTPUT_BYTES')) AS env,
       strpos(j::text, 'Say hi') = 0 AS no_input_content,
       j = mlplat.render_lab_job('labp', (SELECT max(id) FROM mlplat.lab_runs)) AS deterministic
FROM (SELECT mlplat.render_lab_job('labp', (SELECT max(id) FROM mlplat.lab_runs)) AS j) x;
SELECT status, output, purged FROM mlplat.lab_run_result('labp', (SELECT max(id) FROM mlplat.lab_runs));
SET ROLE regress_lab_viewer;
SELECT status FROM mlplat.lab_run_result('labp', (SELECT max(id) FROM mlplat.lab_runs));
RESET ROLE;
-- content only in the payload table; the audit, transitions and views carry ids and digests
SELECT convert_from(content, 'UTF8') AS input, sha256 = (SELECT input_digest FROM mlplat.lab_runs WHERE purpose = 'run') AS digest_ok
FROM mlplat.lab_run_payloads WHERE direction = 'input';
SELECT action, actor, strpos(detail::text, 'Say hi') = 0 AS no_content, detail ? 'input_digest' AS has_digest
FROM mlplat.audit_events WHERE action = 'start_lab_run';
-- provenance is immutable, for superusers too; lifecycle columns are not
UPDATE mlplat.lab_runs SET node_name = 'other-node';
UPDATE mlplat.lab_runs SET limits = '{}';
BEGIN; UPDATE mlplat.lab_runs SET status_reason = 'x'; ROLLBACK;

-- 7. a passing preflight is no token: revoked after it, the start is refused with the codes, nothing written
BEGIN;
SET LOCAL ROLE regress_lab_dev;
SELECT passed FROM pg_temp.pf();
SET LOCAL ROLE regress_lab_owner;
SELECT :acc FROM mlplat.revoke_lab_approval('labp', (SELECT appr FROM ids));
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('run-2');
ROLLBACK;
SELECT count(*) AS lab_runs FROM mlplat.lab_runs WHERE purpose = 'run';
-- the GPU quota counts lab runs: quota 3, one run holds 2, the next needs 2
SELECT :acc FROM mlplat.set_project_quota('labp', 3);
SET ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('run-3');
RESET ROLE;
SELECT :acc FROM mlplat.set_project_quota('labp', 8);

-- 12 (SQL side). cancel: CANCEL_REQUESTED, not acknowledged; a repeat is a no-op; never CANCELLED by the API
SET ROLE regress_lab_viewer;
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT max(id) FROM mlplat.lab_runs));
SET ROLE regress_lab_dev;
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT max(id) FROM mlplat.lab_runs));
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT max(id) FROM mlplat.lab_runs));
SELECT status, cancel_requested_by, cancel_requested_at IS NOT NULL AS requested, cancel_acknowledged_at,
       in_flight FROM mlplat.lab_run_status WHERE purpose = 'run';
SELECT project, gpus_in_use FROM mlplat.project_status WHERE project = 'labp';
SELECT seq, attempt, from_status, to_status, actor FROM mlplat.lab_run_transitions
WHERE lab_run_id IN (SELECT id FROM mlplat.lab_runs WHERE purpose = 'run') ORDER BY seq;
SELECT :acc FROM mlplat.cancel_lab_run('labp', 999999999);
RESET ROLE;
BEGIN; UPDATE mlplat.lab_runs SET status = 'SUCCEEDED';
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT max(id) FROM mlplat.lab_runs));
ROLLBACK;

-- an approval for one run admits exactly one
SET ROLE regress_lab_owner;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 1, '1 hour');
SET ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('once-1', p_appr => (SELECT max(id) FROM mlplat.lab_approvals));
SELECT :acc FROM pg_temp.start('once-2', p_appr => (SELECT max(id) FROM mlplat.lab_approvals));
RESET ROLE;

-- 15 (SQL side). probes through the API: deployer+; a running probe is PROBE_RUNNING, none PROBE_MISSING
SET ROLE regress_lab_dev;
SELECT pg_temp.blk(p_node => (SELECT node2 FROM ids), p_appr => (SELECT appr2 FROM ids)) AS before_probe;
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids), 'probe-1');
SET ROLE regress_lab_deployer;
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids));
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids), 'probe-1');
SELECT :acc FROM mlplat.start_lab_probe('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node2 FROM ids), 'probe-1');
SELECT purpose, status, node_name, approval_id, family, input_digest, limits FROM mlplat.lab_run_status WHERE purpose = 'probe';
SELECT status, completed_at FROM mlplat.lab_probes WHERE node_id = (SELECT node2 FROM ids);
SET ROLE regress_lab_dev;
SELECT pg_temp.blk(p_node => (SELECT node2 FROM ids), p_appr => (SELECT appr2 FROM ids)) AS probe_running;
RESET ROLE;
SELECT count(*) AS probe_inputs FROM mlplat.lab_run_payloads p JOIN mlplat.lab_runs r ON r.id = p.lab_run_id
WHERE r.purpose = 'probe' AND p.direction = 'input';

-- ---------------------------------------------------------------- the lab_runs claim (database half)
-- the runs a claim dispatched now (the claim returns every run in flight: mlplat.lab_run_claim)
CREATE FUNCTION pg_temp.claim(p_bucket text) RETURNS TABLE (lab_run_id bigint, attempt int, job jsonb, secret jsonb)
LANGUAGE sql AS $$ SELECT c.id, c.attempt, c.job::jsonb, c.secret::jsonb
  FROM mlplat._lab_runs_claim(1, 'regress', p_bucket) c WHERE c.dispatched_now $$;
-- no payload store configured: runs wait, and say so
SELECT count(*) AS dispatched FROM pg_temp.claim('');
SELECT lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run') AS newest, status, status_reason
FROM mlplat.lab_run_status WHERE purpose = 'run' ORDER BY lab_run_id;
-- 12. a cancelled run that never took a lease is CANCELLED (no create was ever sent); the oldest
-- QUEUED run of a free node is dispatched: its lease, DISPATCHED, the Secret and Job to create
SELECT lab_run_id = (SELECT min(id) FROM mlplat.lab_runs WHERE status = 'QUEUED' AND purpose = 'run') AS oldest_run,
       job->'metadata'->>'name' = 'lab-' || lab_run_id || '-1' AS job_name,
       secret->'metadata'->>'name' = 'lab-' || lab_run_id || '-input' AS secret_name, secret->'immutable' AS immutable,
       convert_from(decode(secret->'data'->>'inputs.json', 'base64'), 'UTF8') AS secret_inputs,
       secret->'metadata'->'annotations'->>'mlplat.io/content-id' = (SELECT input_digest FROM mlplat.lab_runs r WHERE r.id = c.lab_run_id) AS content_id,
       job->'spec'->'template'->'spec'->'containers'->0->'env' @> '[{"name": "MLPLAT_OUTPUT_URI"}]' AS has_output_uri
FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT purpose, status, reason_code, cancel_acknowledged_at IS NOT NULL AS acknowledged, finished_at IS NOT NULL AS finished,
       job_name IS NOT NULL AS has_job, node_name FROM mlplat.lab_run_status ORDER BY lab_run_id;
SELECT node, leased_by_lab_run = (SELECT id FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run') AS leased_by_run
FROM mlplat.lab_node_status WHERE leased_by_lab_run IS NOT NULL ORDER BY node;
-- the cancelled run's input content is gone; the transitions say who did what
SELECT count(*) AS input_payloads_of_cancelled FROM mlplat.lab_run_payloads pl JOIN mlplat.lab_runs r ON r.id = pl.lab_run_id
WHERE r.status = 'CANCELLED';
SELECT r.status, t.seq, t.from_status, t.to_status, t.actor, t.epoch, t.controller FROM mlplat.lab_run_transitions t
JOIN mlplat.lab_runs r ON r.id = t.lab_run_id WHERE r.purpose = 'run' ORDER BY t.lab_run_id, t.seq;
-- 10. two runs, one node: the second stays QUEUED while the first holds the lease
SET ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('run-4');
RESET ROLE;
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c
WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT status FROM mlplat.lab_run_status WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
-- 12. cancel the dispatched run: CANCEL_REQUESTED, lease and GPUs held until its Job is seen gone
SET ROLE regress_lab_dev;
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT id FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run'));
RESET ROLE;
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c
WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT status, cancel_acknowledged_at, (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = s.lab_run_id) AS leases
FROM mlplat.lab_run_status s WHERE status = 'CANCEL_REQUESTED';
SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'labp';
-- a stale row version loses; the right one acknowledges: CANCELLED, lease released
SELECT mlplat._lab_runs_job_gone(id, row_version - 1, 1, 'regress', '{"job": "absent"}') AS stale
FROM mlplat.lab_runs WHERE status = 'CANCEL_REQUESTED';
SELECT mlplat._lab_runs_job_gone(id, row_version, 1, 'regress', '{"job": "absent"}') AS acknowledged
FROM mlplat.lab_runs WHERE status = 'CANCEL_REQUESTED';
SELECT count(*) AS leases_of_run_node FROM mlplat.lab_leases l JOIN mlplat.lab_nodes n ON n.id = l.node_id WHERE n.name = 'gpu-1';
-- ... and the next run of the node is dispatched
SELECT lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run') AS second_run
FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
-- 11. a node NotReady: the run waits with the reason; past its queue deadline it FAILS
-- QUEUE_DEADLINE_EXCEEDED and nothing was created
SELECT mlplat._lab_observe_nodes(ARRAY[('gpu-1', false, false, 8, 'nvidia-a100')::mlplat.lab_node_observed,
                                        ('gpu-2', true, false, 8, 'nvidia-a100')::mlplat.lab_node_observed]) AS observed;
SELECT node, observed_ready, observed_at > now() - interval '1 minute' AS fresh FROM mlplat.lab_node_status ORDER BY node;
SET ROLE regress_lab_owner;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{}', 3, '1 hour');
RESET ROLE;
UPDATE ids SET appr = (SELECT max(id) FROM mlplat.lab_approvals);
SELECT mlplat._lab_runs_job_gone(id, row_version, 1, 'regress', '{}') AS released FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run';
BEGIN;
UPDATE mlplat.lab_runs SET status = 'SUCCEEDED', finished_at = now() WHERE status = 'DISPATCHED' AND purpose = 'run';
SELECT mlplat._lab_runs_job_gone(id, row_version, 1, 'regress', '{}') AS released FROM mlplat.lab_runs r
WHERE EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id) AND r.purpose = 'run';
UPDATE mlplat.lab_nodes SET observed_ready = true WHERE name = 'gpu-1';
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('run-5');
RESET ROLE;
UPDATE mlplat.lab_nodes SET observed_ready = false WHERE name = 'gpu-1';
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT status, status_reason FROM mlplat.lab_run_status WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
SET LOCAL session_replication_role = replica;
UPDATE mlplat.lab_runs SET queue_deadline_at = now() - interval '1 second' WHERE id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
SET LOCAL session_replication_role = origin;
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT status, reason_code, job_name, dispatched_at FROM mlplat.lab_run_status WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
ROLLBACK;
-- an approval revoked before dispatch withdraws the admission
BEGIN;
UPDATE mlplat.lab_runs SET status = 'SUCCEEDED', finished_at = now() WHERE status = 'DISPATCHED' AND purpose = 'run';
SELECT mlplat._lab_runs_job_gone(id, row_version, 1, 'regress', '{}') AS released FROM mlplat.lab_runs r
WHERE EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id) AND r.purpose = 'run';
UPDATE mlplat.lab_nodes SET observed_ready = true, observed_at = now();
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM pg_temp.start('run-6');
SET LOCAL ROLE regress_lab_owner;
SELECT :acc FROM mlplat.revoke_lab_approval('labp', (SELECT appr FROM ids));
RESET ROLE;
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT status, reason_code FROM mlplat.lab_run_status WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
ROLLBACK;

-- 14 (SQL side). retention: the output goes at retain_until, the run and its history stay
BEGIN;
UPDATE mlplat.lab_runs SET status = 'SUCCEEDED', finished_at = now(), output_digest = repeat('d', 64), output_bytes = 13,
       retain_until = now() + interval '1 hour'
WHERE id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
INSERT INTO mlplat.lab_run_payloads (lab_run_id, direction, content, sha256, bytes)
SELECT max(id), 'output', convert_to('{"text": "hi"}', 'UTF8'), repeat('d', 64), 13 FROM mlplat.lab_runs WHERE purpose = 'run';
SET LOCAL ROLE regress_lab_dev;
SELECT status, output, purged FROM mlplat.lab_run_result('labp', (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run'));
RESET ROLE;
UPDATE mlplat.lab_runs SET retain_until = now() - interval '1 second' WHERE id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
SELECT count(*) AS dispatched FROM pg_temp.claim('lab-bucket') c WHERE c.job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SET LOCAL ROLE regress_lab_dev;
SELECT status, output_digest = repeat('d', 64) AS digest_kept, output, purged FROM mlplat.lab_run_result('labp', (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run'));
SELECT purged_at IS NOT NULL AS purged, input_digest IS NOT NULL AS provenance_kept FROM mlplat.lab_run_status
WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
RESET ROLE;
SELECT count(*) AS payloads_left FROM mlplat.lab_run_payloads WHERE lab_run_id = (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run');
ROLLBACK;

-- alerts: a cancel not acknowledged after mlplat.lab_cancel_alert_after, a finished run still
-- holding a lease, a node not observed for mlplat.lab_node_max_age
BEGIN;
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM mlplat.cancel_lab_run('labp', (SELECT max(id) FROM mlplat.lab_runs WHERE purpose = 'run'));
RESET ROLE;
SELECT alert, kind, entity FROM mlplat.alerts WHERE kind = 'lab_runs' ORDER BY 1;
UPDATE mlplat.lab_runs SET cancel_requested_at = now() - interval '6 minutes' WHERE status = 'CANCEL_REQUESTED';
UPDATE mlplat.lab_runs SET status = 'FAILED', finished_at = now() - interval '6 minutes' WHERE purpose = 'probe' AND node_name = 'gpu-2';
UPDATE mlplat.lab_nodes SET observed_at = now() - interval '2 minutes' WHERE name = 'gpu-2';
SELECT alert, severity, project, entity, detail FROM mlplat.alerts WHERE kind = 'lab_runs' ORDER BY 1;
SET LOCAL mlplat.lab_cancel_alert_after = '10min';
SELECT alert FROM mlplat.alerts WHERE kind = 'lab_runs' ORDER BY 1;
ROLLBACK;

-- ---------------------------------------------------------------- Job observations (write-back)
-- a dispatched run: BLOCKED says why it waits (status unchanged), UNBLOCKED clears that;
-- CREATED records the answer to its Job create once; a Job gone after that is JOB_DISAPPEARED
BEGIN;
CREATE TEMP TABLE wb0 AS SELECT id, row_version FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run';
-- one event written back, then the run as it is (row_version counted from the start)
CREATE FUNCTION pg_temp.obs(p_event text, p_obs jsonb)
RETURNS TABLE (event text, ok boolean, status text, reason_code text, status_reason text, job_created boolean, row_version bigint)
LANGUAGE plpgsql AS $$
DECLARE
  b boolean;
BEGIN
  SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', p_event, p_obs) INTO b
  FROM mlplat.lab_runs r WHERE r.id = (SELECT w.id FROM wb0 w);
  RETURN QUERY SELECT p_event, b, r.status, r.reason_code, r.status_reason, r.job_created_at IS NOT NULL,
                      r.row_version - (SELECT w.row_version FROM wb0 w)
               FROM mlplat.lab_runs r WHERE r.id = (SELECT w.id FROM wb0 w);
END $$;
SELECT * FROM pg_temp.obs('BLOCKED', '{"blocked": "the create was refused (HTTP 403)"}');
SELECT * FROM pg_temp.obs('BLOCKED', '{"blocked": "the create was refused (HTTP 403)"}');   -- the same: no write
SELECT * FROM pg_temp.obs('UNBLOCKED', '{}');
SELECT * FROM pg_temp.obs('CREATED', '{"seen": "created"}');
SELECT * FROM pg_temp.obs('CREATED', '{"seen": "seen"}');   -- recorded once
SELECT * FROM pg_temp.obs('DISAPPEARED', '{"seen": "disappeared"}');
ROLLBACK;
-- a create refused for good (422: the same render never passes): FAILED WORKER_REFUSED with
-- the refusal in status_reason, the lease kept until the Job is seen absent; a non-dispatched
-- run takes no refusal
BEGIN;
CREATE TEMP TABLE wb1 AS SELECT id FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run';
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'REFUSED',
         '{"refused": "the create of mlp-labp/lab-input was refused (HTTP 422): Secret is invalid"}') AS refused
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb1);
SELECT status, reason_code, status_reason, finished_at IS NOT NULL AS finished,
       (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id) AS lease
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb1);
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'REFUSED', '{"refused": "again"}') AS refused_again
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb1);
SELECT mlplat._lab_runs_job_gone(r.id, r.row_version, 1, 'regress', '{"job": "absent"}') AS released
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb1);
SELECT count(*) AS lease FROM mlplat.lab_leases WHERE lab_run_id = (SELECT id FROM wb1);
SELECT to_status, reason_code FROM mlplat.lab_run_transitions WHERE lab_run_id = (SELECT id FROM wb1) ORDER BY seq DESC LIMIT 1;
ROLLBACK;

-- 9/12. the dispatched run starts, completes with its output: SUCCEEDED, output and digest in
-- lab_run_result, input gone; the lease goes only once the Job is seen gone
BEGIN;
CREATE TEMP TABLE wb AS SELECT id, row_version FROM mlplat.lab_runs WHERE status = 'DISPATCHED' AND purpose = 'run';
GRANT SELECT ON wb TO PUBLIC;
SELECT mlplat._lab_runs_observed(id, row_version, 1, 'regress', 'STARTED', '{"active": 1}') AS started FROM wb;
SELECT mlplat._lab_runs_observed(id, row_version, 1, 'regress', 'STARTED', '{"active": 1}') AS stale FROM wb;
SELECT status, started_at IS NOT NULL AS started FROM mlplat.lab_run_status WHERE lab_run_id = (SELECT id FROM wb);
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'COMPLETED', '{"succeeded": 1}', convert_to('{"text": "hello"}', 'UTF8')) AS completed
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb);
SET LOCAL ROLE regress_lab_dev;
SELECT status, reason_code, output_digest = encode(sha256(convert_to('{"text": "hello"}', 'UTF8')), 'hex') AS digest, output_bytes,
       output, retain_until > now() AS retained, purged
FROM mlplat.lab_run_result('labp', (SELECT id FROM wb));
RESET ROLE;
SELECT direction FROM mlplat.lab_run_payloads WHERE lab_run_id = (SELECT id FROM wb);
SELECT count(*) AS lease_held FROM mlplat.lab_leases WHERE lab_run_id = (SELECT id FROM wb);
SELECT mlplat._lab_runs_job_gone(r.id, r.row_version, 1, 'regress', '{"job": "absent"}') AS released
FROM mlplat.lab_runs r WHERE r.id = (SELECT id FROM wb);
SELECT count(*) AS lease_held FROM mlplat.lab_leases WHERE lab_run_id = (SELECT id FROM wb);
-- 11. attempt 1 fails, max_attempts 2: RETRY_WAIT, the lease kept; once the failed Job is gone
-- and the backoff over, lab-<id>-2 is dispatched; it fails too: FAILED WORKER_FAILED
UPDATE mlplat.lab_nodes SET observed_ready = true, observed_at = now();
SET LOCAL ROLE regress_lab_owner;
SELECT :acc FROM mlplat.approve_lab('labp', (SELECT cand FROM ids), repeat('a', 64), (SELECT prof FROM ids),
  (SELECT node FROM ids), '{text_generation}', '{"max_attempts": 3}', 3, '1 hour');
SET LOCAL ROLE regress_lab_dev;
SELECT :acc FROM mlplat.start_lab_run('labp', (SELECT cand FROM ids), (SELECT sha FROM ids), (SELECT prof FROM ids),
  (SELECT node FROM ids), (SELECT max(id) FROM mlplat.lab_approvals), 'text_generation', '[{"prompt": "p", "max_tokens": 1}]',
  '{"max_attempts": 2}', 'retry-1');
RESET ROLE;
SELECT attempt, job->'metadata'->>'name' ~ '-1$' AS first_job FROM pg_temp.claim('lab-bucket')
WHERE job->'metadata'->'labels'->>'mlplat.io/purpose' = 'run';
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'FAILED', '{"reason": "BackoffLimitExceeded"}') AS failed
FROM mlplat.lab_runs r WHERE r.idempotency_key = 'retry-1';
SELECT status, reason_code, attempt, next_attempt_at > now() AS backing_off,
       (SELECT count(*) FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id) AS lease
FROM mlplat.lab_runs r WHERE r.idempotency_key = 'retry-1';
SELECT count(*) AS dispatched_before_gone FROM pg_temp.claim('lab-bucket');
SELECT mlplat._lab_runs_job_gone(r.id, r.row_version, 1, 'regress', '{}') AS first_job_gone FROM mlplat.lab_runs r WHERE r.idempotency_key = 'retry-1';
UPDATE mlplat.lab_runs SET next_attempt_at = now() WHERE idempotency_key = 'retry-1';   -- the backoff has passed
SELECT attempt, job->'metadata'->>'name' = 'lab-' || lab_run_id || '-2' AS second_job,
       job->'metadata'->'labels'->>'mlplat.io/attempt' AS attempt_label
FROM pg_temp.claim('lab-bucket');
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'FAILED', '{"reason": "BackoffLimitExceeded"}') AS failed_again
FROM mlplat.lab_runs r WHERE r.idempotency_key = 'retry-1';
SELECT status, reason_code, attempt FROM mlplat.lab_runs WHERE idempotency_key = 'retry-1';
SELECT t.seq, t.attempt, t.from_status, t.to_status, t.reason_code FROM mlplat.lab_run_transitions t
JOIN mlplat.lab_runs r ON r.id = t.lab_run_id WHERE r.idempotency_key = 'retry-1' ORDER BY t.seq;
ROLLBACK;
-- 11. the execution deadline is a budget: FAILED EXECUTION_DEADLINE_EXCEEDED, no retry; a probe
-- that completes records PASSED with completed_at
BEGIN;
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'DEADLINE', '{"reason": "DeadlineExceeded"}') AS deadline
FROM mlplat.lab_runs r WHERE r.status = 'DISPATCHED' AND r.purpose = 'run';
SELECT status, reason_code FROM mlplat.lab_run_status WHERE purpose = 'run' AND status = 'FAILED' AND reason_code = 'EXECUTION_DEADLINE_EXCEEDED';
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'COMPLETED', '{}', convert_to('{"ok": true}', 'UTF8')) AS probe_done
FROM mlplat.lab_runs r WHERE r.purpose = 'probe' AND r.node_name = 'gpu-2';
SELECT status, completed_at IS NOT NULL AS completed FROM mlplat.lab_probes WHERE node_id = (SELECT node2 FROM ids);
ROLLBACK;
-- an output above max_output_bytes, or none, fails the run
BEGIN;
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'COMPLETED', '{}', convert_to(repeat('x', 70000), 'UTF8')) AS too_large
FROM mlplat.lab_runs r WHERE r.status = 'DISPATCHED' AND r.purpose = 'run';
SELECT reason_code FROM mlplat.lab_run_status WHERE reason_code = 'OUTPUT_TOO_LARGE';
ROLLBACK;
BEGIN;
SELECT mlplat._lab_runs_observed(r.id, r.row_version, 1, 'regress', 'COMPLETED', '{}', NULL) AS missing
FROM mlplat.lab_runs r WHERE r.status = 'DISPATCHED' AND r.purpose = 'run';
SELECT reason_code FROM mlplat.lab_run_status WHERE reason_code = 'OUTPUT_MISSING';
ROLLBACK;
