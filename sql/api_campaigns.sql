-- mlplat API: optimization campaigns (issue 14): create, approve, cancel, derived state,
-- evidence fences, builder Job render, Ed25519, capability compile, serving owners.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_cmp_owner', 'regress_cmp_dev', 'regress_cmp_viewer', 'regress_cmp_deployer',
                           'regress_cmp_outsider'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
SELECT :acc FROM mlplat.create_project('opt', 16, NULL, NULL, NULL, 'regress_cmp_owner');
SELECT :acc FROM mlplat.add_artifact_location('opt', 's3://artifacts/');
SELECT :acc FROM mlplat.grant_role('opt', 'regress_cmp_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('opt', 'regress_cmp_viewer', 'viewer');
SELECT :acc FROM mlplat.grant_role('opt', 'regress_cmp_deployer', 'deployer');
SELECT :acc FROM mlplat.register_model_version('opt', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'safetensors');

-- ---------------------------------------------------------------- Ed25519 (RFC 8032 section 7.1)
SELECT mlplat.ed25519_verify(decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'), '',
  decode('e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b', 'hex')) AS test1;
SELECT mlplat.ed25519_verify(decode('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'), '\x72',
  decode('92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00', 'hex')) AS test2;
SELECT mlplat.ed25519_verify(decode('fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025', 'hex'), '\xaf82',
  decode('6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a', 'hex')) AS test3;
-- one bit off in the message, the signature or the key; wrong lengths: false, never an error
SELECT mlplat.ed25519_verify(decode('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'), '\x73',
  decode('92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00', 'hex')) AS other_message,
       mlplat.ed25519_verify(decode('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'), '\x72',
  decode('92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c01', 'hex')) AS other_signature,
       mlplat.ed25519_verify(decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'), '\x72',
  decode('92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00', 'hex')) AS other_key,
       mlplat.ed25519_verify('\x00', '\x72', '\x00') AS short_inputs;

-- ---------------------------------------------------------------- SPDX expressions (src/validate/spdx.c)
SELECT left(e, 60) AS expression, length(e) AS len, coalesce(mlplat._spdx_error(e), 'valid') AS verdict
  FROM unnest(ARRAY['MIT', 'Apache-2.0 OR MIT', 'GPL-2.0-or-later WITH Classpath-exception-2.0', 'LGPL-2.1+',
                    '(MIT OR Apache-2.0) AND (BSD-3-Clause OR (ISC AND Zlib))', 'LicenseRef-acme-internal',
                    'DocumentRef-spdx-tool-1.2:LicenseRef-MIT-Style-2', ' MIT ', '', 'NONE', 'MIT AND NOASSERTION',
                    'MIT and Apache-2.0', 'MIT OR', 'OR MIT', '()', 'MIT)', '((MIT)', 'MIT WITH', 'MIT++',
                    'DocumentRef-x:MIT', 'MIT/Apache-2.0', repeat('A', 257),
                    repeat('(', 33) || 'MIT' || repeat(')', 33)]) AS e;

-- ---------------------------------------------------------------- platform data (administrators)
SELECT :acc FROM mlplat.register_evidence_signer('evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SELECT :acc FROM mlplat.register_evidence_signer('evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SELECT :acc FROM mlplat.register_evidence_signer('evals', decode('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'));
SELECT :acc FROM mlplat.register_evidence_signer('short', '\x0102');
SELECT :acc FROM mlplat.register_optimization_preset('llmc-fp8', '{"kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llm-compressor", "tool_version": "0.5.1"}, "algorithm": "fp8-dynamic", "precision": "fp8", "config": {"scheme": "FP8_DYNAMIC"}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 1800}');
SELECT :acc FROM mlplat.register_optimization_preset('llmc-fp8', '{"kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llm-compressor", "tool_version": "0.5.1"}, "algorithm": "fp8-dynamic", "precision": "fp8", "config": {"scheme": "FP8_DYNAMIC"}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 1800}');
SELECT :acc FROM mlplat.register_optimization_preset('llmc-fp8', '{"kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llm-compressor", "tool_version": "0.5.2"}, "algorithm": "fp8-dynamic", "precision": "fp8", "config": {"scheme": "FP8_DYNAMIC"}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 1800}');
SELECT :acc FROM mlplat.register_optimization_preset('tagged', '{"kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc:0.5.1", "tool": "llm-compressor", "tool_version": "0.5.1"}, "algorithm": "gptq", "precision": "w4a16", "config": {}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 1800}');
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.register_evidence_signer('mine', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SELECT :acc FROM mlplat.register_optimization_preset('mine', '{}');
RESET ROLE;

-- ---------------------------------------------------------------- create (scenario 1, 2)
CREATE TEMP TABLE def AS SELECT $j${
  "base": {"model": "llm", "version": "1", "model_family": "llama-3-1"},
  "output_prefix": "s3://artifacts/opt/",
  "quality_gate": {"metric": "accuracy", "max_drop": 0.01, "signers": ["evals"]},
  "candidates": [
    {"name": "fp8", "preset": "llmc-fp8",
     "predicted": [{"metric": "tokens_per_s_ratio", "value": 1.6, "estimator": "roofline-v1"}]},
    {"name": "w4a16", "kind": "checkpoint",
     "builder": {"image": "registry.example/acme/llmc@sha256:2222222222222222222222222222222222222222222222222222222222222222", "tool": "llm-compressor", "tool_version": "0.5.1"},
     "algorithm": "gptq", "precision": "w4a16", "config": {"group_size": 128},
     "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1, "min_gpu_memory_gib": 80},
     "spdx": "Apache-2.0", "max_seconds": 3600},
    {"name": "eagle", "kind": "speculator",
     "builder": {"image": "registry.example/acme/spec@sha256:3333333333333333333333333333333333333333333333333333333333333333", "tool": "speculators", "tool_version": "0.1.0"},
     "algorithm": "eagle3", "precision": "bf16", "config": {},
     "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 2},
     "spdx": "Apache-2.0 AND (MIT OR BSD-3-Clause)", "max_seconds": 600}
  ]}$j$::jsonb AS d;
GRANT SELECT ON def TO PUBLIC;
SET ROLE regress_cmp_viewer;
SELECT :acc FROM mlplat.create_campaign('opt', 'c1', (SELECT d FROM def));
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.create_campaign('opt', 'c1', (SELECT d FROM def), 'k1');
SELECT :acc FROM mlplat.create_campaign('opt', 'c1', (SELECT d FROM def), 'k1');
SELECT :acc FROM mlplat.create_campaign('opt', 'c1', (SELECT d FROM def));
SELECT :acc FROM mlplat.create_campaign('opt', 'c1', jsonb_set((SELECT d FROM def), '{max_parallel}', '2'));
RESET ROLE;
-- one id for all three calls; nothing outside the database: no approval, no Job, no GPU count
SELECT count(DISTINCT entity_id) AS ids FROM mlplat.audit_events WHERE action = 'create_campaign';
SELECT state, candidates, planned, approved_by, spend_committed_gpu_seconds FROM mlplat.campaign_status;
SELECT candidate, ordinal, kind, algorithm, precision, status, reserved_gpu_seconds, predicted, actual, evidence_version
  FROM mlplat.campaign_candidate_status ORDER BY ordinal;
SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'opt';
SELECT count(*) AS outward FROM mlplat.campaign_approvals;
SELECT ordinal, from_status, to_status, actor FROM mlplat.candidate_transitions t
  JOIN mlplat.campaign_candidates k ON k.id = t.candidate_id ORDER BY ordinal;
-- no status column anywhere on a campaign
SELECT count(*) AS status_columns FROM pg_attribute WHERE attrelid = 'mlplat.campaigns'::regclass AND attname IN ('status', 'state');
-- the expanded definition: preset replaced, defaults filled, base digest frozen
SELECT definition->'base' AS base, definition->'max_parallel' AS max_parallel,
       definition->'candidates'->0 AS fp8 FROM mlplat.campaigns WHERE name = 'c1';
SELECT content_id = mlplat.content_id(definition) AS content_id_ok FROM mlplat.campaigns;

-- ---------------------------------------------------------------- definition errors (scenario 3)
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,builder,image}', '"registry.example/acme/llmc:0.5.1"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,builder,tool_version}', '">=0.5"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,builder,tool_version}', '"latest"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,spdx}', '"Apache-2.0 AND"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,spdx}', '"NOASSERTION"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,spdx}', '"(MIT"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,spdx}', '"MIT Apache-2.0"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,hardware,turbo}', 'true'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,hardware,gpus}', '"1"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,hardware,gpus}', '1.5'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,hardware,arch}', '"hopper"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,max_seconds}', '10'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,precision}', '"fp4"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,1,name}', '"fp8"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,0,preset}', '"nope"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{surprise}', '1'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{output_prefix}', '"s3://elsewhere/opt/"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{output_prefix}', '"s3://artifacts/../x/"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{quality_gate,signers}', '["nobody"]'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{base,version}', '"9"'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{max_parallel}', '9'));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates}',
  (SELECT jsonb_agg(jsonb_set((SELECT d FROM def)->'candidates'->1, '{name}', to_jsonb('c' || i))) FROM generate_series(1, 65) i)));
SELECT :acc FROM mlplat.create_campaign('opt', 'Bad_Name', (SELECT d FROM def));
SELECT :acc FROM mlplat.create_campaign('opt', 'bad', jsonb_set((SELECT d FROM def), '{candidates,0,predicted,0,metric}', '"speed"'));
RESET ROLE;
SELECT count(*) AS campaigns, (SELECT count(*) FROM mlplat.campaign_candidates) AS candidates FROM mlplat.campaigns;

-- ---------------------------------------------------------------- presets freeze (scenario 15)
-- a preset never changes; the campaign carries the plan it expanded, not a reference
SELECT (SELECT plan FROM mlplat.campaign_candidates WHERE name = 'fp8' AND ordinal = 1 AND campaign_id = (SELECT id FROM mlplat.campaigns WHERE name = 'c1')) = (SELECT plan FROM mlplat.optimization_presets WHERE name = 'llmc-fp8') AS frozen_equal;
UPDATE mlplat.optimization_presets SET plan = '{}';
DELETE FROM mlplat.optimization_presets;

-- ---------------------------------------------------------------- approval (scenario 4)
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '1 hour');
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 0, '1 hour');
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '0 seconds');
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '31 days');
SELECT :acc FROM mlplat.approve_campaign('opt', 'nope', 3600, '1 hour');
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '1 hour', 'a1');
CREATE TEMP TABLE first_approval AS SELECT expires_at, approved_at FROM mlplat.campaign_approvals;
SELECT pg_sleep(1.1);
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '1 hour', 'a1');
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '60 minutes');
-- (the refusals below name the expiry time: only their SQLSTATE is shown)
\set VERBOSITY sqlstate
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 7200, '1 hour');
\set VERBOSITY default
RESET ROLE;
SELECT a.expires_at = f.expires_at AS expires_unchanged, a.approved_by, a.db_role, count(*) OVER () AS approvals
  FROM mlplat.campaign_approvals a, first_approval f;
SELECT state, approved_by, max_spend_gpu_seconds FROM mlplat.campaign_status WHERE campaign = 'c1';
SELECT mlplat.campaign_state('opt', 'c1');
UPDATE mlplat.campaign_approvals SET max_spend_gpu_seconds = 1;
DELETE FROM mlplat.campaign_approvals;
TRUNCATE mlplat.campaign_approvals;
-- expiry: at once EXPIRED (derived, before any reconciler), and never renewed
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.create_campaign('opt', 'short', jsonb_set((SELECT d FROM def), '{candidates}', (SELECT d->'candidates'->1 FROM def) || '[]'));
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.approve_campaign('opt', 'short', 100, '1 second');
SELECT pg_sleep(1.2);
SELECT mlplat.campaign_state('opt', 'short');
\set VERBOSITY sqlstate
SELECT :acc FROM mlplat.approve_campaign('opt', 'short', 100, '1 second');
SELECT :acc FROM mlplat.approve_campaign('opt', 'short', 100, '1 hour');
\set VERBOSITY default
RESET ROLE;

-- ---------------------------------------------------------------- immutability
UPDATE mlplat.campaigns SET max_parallel = 2 WHERE name = 'c1';
UPDATE mlplat.campaigns SET definition = '{}' WHERE name = 'c1';
DELETE FROM mlplat.campaigns WHERE name = 'c1';
UPDATE mlplat.campaign_candidates SET plan = '{}' WHERE name = 'fp8';
UPDATE mlplat.campaign_candidates SET gpus = 8 WHERE name = 'fp8';
-- statuses move along mlplat._campaign_candidate_transitions() only (docs/reconcilers.md)
DO $$ BEGIN
  UPDATE mlplat.campaign_candidates SET status = 'BUILT' WHERE name = 'fp8';
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, 'campaign_candidates [0-9]+', 'campaign_candidates N');
END $$;
DELETE FROM mlplat.campaign_candidates;
UPDATE mlplat.candidate_transitions SET to_status = 'BUILT';
DELETE FROM mlplat.candidate_transitions;

-- ---------------------------------------------------------------- the builder Job
SELECT jsonb_pretty(mlplat.render_builder_job('opt', 'c1', 'w4a16')
  #- '{metadata,labels,mlplat.io/instance}' #- '{spec,template,metadata,labels,mlplat.io/instance}'
  #- '{metadata,annotations,mlplat.io/traceparent}') AS job;
SELECT mlplat.render_builder_job('opt', 'c1', 'w4a16')->'metadata'->'annotations'->>'mlplat.io/campaign-content-id'
       = (SELECT content_id FROM mlplat.campaigns WHERE name = 'c1') AS annotated,
       mlplat.render_builder_job('opt', 'c1', 'w4a16')->'metadata'->'labels'->>'mlplat.io/instance'
       = (SELECT instance_id FROM mlplat.installation) AS instance;
SET ROLE regress_cmp_outsider;
SELECT mlplat.render_builder_job('opt', 'c1', 'w4a16');
RESET ROLE;

-- ---------------------------------------------------------------- evidence and its fence (scenario 10)
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "tokens_per_s_ratio", "value": 1.4, "estimator": "roofline-v1"}', 0);
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "p50_ms_ratio", "value": 0.8, "estimator": "roofline-v1"}', 0);
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "p50_ms_ratio", "value": 0.7, "estimator": "roofline-v2"}', 1, 'e1');
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "p50_ms_ratio", "value": 0.7, "estimator": "roofline-v2"}', 1, 'e1');
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'actual', ('{"metric": "tokens_per_s", "value": 900, "workload_sha256": "' || repeat('c', 64) || '", "revision": {"deployment": "web", "revision": 1}, "measured_at": 1764410400}')::jsonb, 2);
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'measured', '{}', 2);
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "p50_ms_ratio", "value": "fast", "estimator": "x"}', 2);
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'nope', 'predicted', '{"metric": "p50_ms_ratio", "value": 1, "estimator": "x"}', 2);
SELECT mlplat.render_builder_job('opt', 'c1', 'nope');
SELECT mlplat.compile_artifact_args('opt', 0, 'vllm', '0.6.3', 'h100');
SET ROLE regress_cmp_viewer;
SELECT :acc FROM mlplat.record_candidate_evidence('opt', 'c1', 'w4a16', 'predicted', '{"metric": "p50_ms_ratio", "value": 1, "estimator": "x"}', 2);
RESET ROLE;
SELECT candidate, predicted, actual, evidence_version FROM mlplat.campaign_candidate_status WHERE campaign = 'c1' AND candidate = 'w4a16';
SELECT count(*) AS measurements FROM mlplat.candidate_measurements;

-- ---------------------------------------------------------------- cancel
SET ROLE regress_cmp_viewer;
SELECT :acc FROM mlplat.cancel_campaign('opt', 'c1');
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.cancel_campaign('opt', 'c1');
SELECT :acc FROM mlplat.cancel_campaign('opt', 'c1');
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.approve_campaign('opt', 'c1', 3600, '1 hour');
RESET ROLE;
SELECT candidate, status, reason_code FROM mlplat.campaign_candidate_status WHERE campaign = 'c1' ORDER BY ordinal;
SELECT campaign, state, cancelled, cancel_requested_at IS NOT NULL AS requested FROM mlplat.campaign_status ORDER BY campaign;
UPDATE mlplat.campaigns SET cancel_requested_by = 'someone-else' WHERE name = 'c1';

-- ---------------------------------------------------------------- the state derivation, edge by edge
-- (the reconciler's transitions, written here as it would; the guard refuses impossible edges)
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.create_campaign('opt', 'runs', (SELECT d FROM def));
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.approve_campaign('opt', 'runs', 100000, '1 day');
RESET ROLE;
SELECT mlplat.campaign_state('opt', 'runs') AS approved;
UPDATE mlplat.campaign_candidates k SET status = 'BUILDING' FROM mlplat.campaigns c WHERE c.id = k.campaign_id AND c.name = 'runs' AND k.ordinal = 1;
SELECT mlplat.campaign_state('opt', 'runs') AS one_building;
UPDATE mlplat.campaign_candidates k SET status = 'BUILT', actual_gpu_seconds = 100 FROM mlplat.campaigns c WHERE c.id = k.campaign_id AND c.name = 'runs' AND k.ordinal = 1;
SELECT mlplat.campaign_state('opt', 'runs') AS one_built_rest_planned;
-- a terminal candidate stays terminal
DO $$ BEGIN
  UPDATE mlplat.campaign_candidates k SET status = 'BUILDING' FROM mlplat.campaigns c WHERE c.id = k.campaign_id AND c.name = 'runs' AND k.ordinal = 1;
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, 'campaign_candidates [0-9]+', 'campaign_candidates N');
END $$;
UPDATE mlplat.campaign_candidates k SET status = 'NOT_RUN', reason_code = 'SPEND_EXHAUSTED', actual_gpu_seconds = 0 FROM mlplat.campaigns c WHERE c.id = k.campaign_id AND c.name = 'runs' AND k.ordinal > 1;
SELECT state, built, not_run, spend_actual_gpu_seconds FROM mlplat.campaign_status WHERE campaign = 'runs';
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.cancel_campaign('opt', 'runs');
RESET ROLE;

-- ---------------------------------------------------------------- RLS: another project sees nothing
SELECT :acc FROM mlplat.create_project('other', 1, NULL, NULL, NULL, 'regress_cmp_outsider');
SET ROLE regress_cmp_outsider;
SELECT count(*) AS campaigns, (SELECT count(*) FROM mlplat.campaign_candidates) AS candidates,
       (SELECT count(*) FROM mlplat.candidate_predictions) AS predictions,
       (SELECT count(*) FROM mlplat.campaign_candidate_status) AS rows_in_view,
       mlplat._campaign_state((SELECT min(id) FROM mlplat.campaigns)) AS state_of_invisible
  FROM mlplat.campaign_status;
SELECT mlplat.campaign_state('opt', 'c1');
RESET ROLE;

-- ---------------------------------------------------------------- capabilities (scenario 12)
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "quantization:fp8", "args": ["--model", "${artifact_uri}", "--quantization", "fp8"], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "none", "args": ["--model", "${artifact_uri}"], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "kv-cache:lmcache", "args": ["--kv-transfer-config", "lmcache"], "env": {"LMCACHE_CHUNK_SIZE": "256"}, "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "kv-cache:offload", "args": ["--cpu-offload-gb", "64"], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "speculative:eagle3", "args": ["--speculative-config", "eagle3"], "qualification": "UNQUALIFIED"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "prefix-caching", "args": ["--enable-prefix-caching"], "conflicts": ["kv-cache:offload"], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}') > 0 AS registered;
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "none", "args": ["--other"], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}');
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": ">=0.8", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "none", "args": [], "qualification": "LOCAL", "regression_test": "regress:api_campaigns"}');
SELECT mlplat.register_capability('{"runtime": "vllm", "runtime_version": "0.8.4", "model_family": "llama-3-1", "precision": "fp8", "accelerator": "nvidia-h100", "mechanism": "lora", "args": [], "qualification": "LOCAL"}');
SET ROLE regress_cmp_owner;
SELECT mlplat.register_capability('{}');
-- compile is callable by everyone and is byte-for-byte deterministic
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['quantization:fp8', 'kv-cache:lmcache']) - 'descriptors' AS compiled;
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['quantization:fp8', 'kv-cache:lmcache'])::text
     = mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['quantization:fp8', 'kv-cache:lmcache'])::text AS identical;
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', '{}') - 'descriptors' AS plain;
SELECT mlplat.compile_runtime_args('sglang', '0.4.0', 'llama-3-1', 'fp8', 'nvidia-h100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.5', 'llama-3-1', 'fp8', 'nvidia-h100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4.post1', 'llama-3-1', 'fp8', 'nvidia-h100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'qwen-2', 'fp8', 'nvidia-h100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'int8', 'nvidia-h100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-a100', '{}');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['quantization:awq']);
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['speculative:eagle3']);
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['kv-cache:lmcache', 'kv-cache:offload']);
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['prefix-caching', 'kv-cache:offload']);
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['prefix-caching', 'prefix-caching']);
RESET ROLE;
SELECT :acc FROM mlplat.set_capability_qualification((SELECT id FROM mlplat.capability_descriptors WHERE mechanism = 'speculative:eagle3'), 'LOCAL', 'regress:api_campaigns');
SELECT mlplat.compile_runtime_args('vllm', '0.8.4', 'llama-3-1', 'fp8', 'nvidia-h100', ARRAY['speculative:eagle3'])->'qualification' AS now_local;

-- ---------------------------------------------------------------- composition and serving owners (scenario 14)
SELECT :acc FROM mlplat.register_component('llm-d', 'orchestrator', '{"capabilities": ["prefix-aware-routing"], "owns": ["routing", "scaling"]}', 'regress:api_campaigns');
SELECT :acc FROM mlplat.register_component('aibrix', 'orchestrator', '{"capabilities": ["autoscaling"], "owns": ["routing"]}', 'regress:api_campaigns');
SELECT :acc FROM mlplat.register_component('lmcache', 'cache', '{"capabilities": ["kv-cache:lmcache"]}', 'regress:api_campaigns');
SELECT :acc FROM mlplat.register_component('llmc', 'builder', '{"image": "registry.example/acme/llmc@sha256:4444444444444444444444444444444444444444444444444444444444444444", "tool": "llm-compressor", "tool_version": "0.5.1", "kinds": ["checkpoint"], "algorithms": ["gptq", "awq"]}', 'regress:api_campaigns');
SELECT :acc FROM mlplat.register_component('llmc-tag', 'builder', '{"image": "registry.example/acme/llmc:latest", "tool": "llm-compressor", "tool_version": "0.5.1", "kinds": ["checkpoint"], "algorithms": ["gptq"]}', 'regress:api_campaigns');
SELECT :acc FROM mlplat.register_component('nothing', 'orchestrator', '{"capabilities": [], "owns": ["everything"]}', 'regress:api_campaigns');
-- a builder component expands to its exact image in the campaign
SET ROLE regress_cmp_dev;
SELECT :acc FROM mlplat.create_campaign('opt', 'comp', jsonb_set((SELECT d FROM def), '{candidates}',
  jsonb_build_array(jsonb_set((SELECT d->'candidates'->1 FROM def), '{builder}', '{"component": "llmc"}'))));
RESET ROLE;
SELECT plan->'builder' AS builder FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'comp';
-- (in a transaction that is rolled back: the later tests list every deployment and alias)
\set ON_ERROR_ROLLBACK on
BEGIN;
SELECT :acc FROM mlplat.set_model_stage('opt', 'llm', '1', 'CHAMPION');
SELECT :acc FROM mlplat.deploy('opt', 'web', 'llm', '1', 'vllm', 1, 1, 2);
UPDATE mlplat.deployments SET status = 'READY', observed_revision = 1, ready_revision = 1 WHERE name = 'web';
SET ROLE regress_cmp_deployer;
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'llm-d');
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'lmcache');
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'llm-d');
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'llm-d');
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'aibrix');
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'scaling', 'llm-d');
RESET ROLE;
SELECT :acc FROM mlplat.register_model_version('opt', 'llm', '2', 's3://artifacts/llm/2', repeat('b', 64), 'vllm', 'safetensors');
SELECT :acc FROM mlplat.set_model_stage('opt', 'llm', '2', 'CANDIDATE');
SELECT :acc FROM mlplat.start_rollout('opt', 'web', 'llm', '2', '{"steps": [0.5]}');
-- scaling is llm-d's: other replica bounds are refused, the same bounds are not
SELECT :acc FROM mlplat.deploy('opt', 'web', 'llm', '1', 'vllm', 1, 1, 3);
SELECT :acc FROM mlplat.deploy('opt', 'web', 'llm', '1', 'vllm', 1, 1, 2);
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', NULL);
RESET ROLE;
SELECT domain, component FROM mlplat.serving_owners ORDER BY domain;
SELECT :acc FROM mlplat.start_rollout('opt', 'web', 'llm', '2', '{"steps": [0.5]}');
SELECT status FROM mlplat.rollouts;
SET ROLE regress_cmp_owner;
SELECT :acc FROM mlplat.set_serving_owner('opt', 'web', 'routing', 'aibrix');
RESET ROLE;
SELECT :acc FROM mlplat.promote_rollout('opt', 'web');
ROLLBACK;
\set ON_ERROR_ROLLBACK off
UPDATE mlplat.components SET spec = '{}';
