-- campaigns: admission and spend (the claim of the campaigns reconciler), write-back fences,
-- builder GPUs in the quota (issue 14: R2, R3, R5, R13 database half, scenarios 5, 10, 15).
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
SET client_min_messages = warning;
SELECT status FROM mlplat.create_project('adm', 3);
SELECT status FROM mlplat.add_artifact_location('adm', 's3://bkt/');
SELECT status FROM mlplat.register_model_version('adm', 'm', '1', 's3://bkt/m1', repeat('a', 64), 'vllm', 'safetensors');
SELECT status FROM mlplat.register_evidence_signer('adm-evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
-- the leader of the campaigns kind, as the worker would hold it
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('campaigns', 5, 1, 0, 'regress');
-- cand(name, gpus, max_seconds): one candidate plan
CREATE FUNCTION pg_temp.cand(n text, g int, s int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('name', n, 'kind', 'checkpoint',
    'builder', '{"image": "r.example/b@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llmc", "tool_version": "0.5.1"}'::jsonb,
    'algorithm', 'gptq', 'precision', 'w4a16', 'config', '{}'::jsonb,
    'hardware', jsonb_build_object('accelerator', 'h100', 'arch', 'sm_90', 'gpus', g), 'spdx', 'Apache-2.0', 'max_seconds', s) $$;
CREATE FUNCTION pg_temp.def(cands jsonb, mp int DEFAULT 1) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('base', '{"model": "m", "version": "1", "model_family": "llama"}'::jsonb,
    'output_prefix', 's3://bkt/opt/', 'max_parallel', mp,
    'quality_gate', '{"metric": "accuracy", "max_drop": 0.01, "signers": ["adm-evals"]}'::jsonb, 'candidates', cands) $$;
CREATE FUNCTION pg_temp.show(c text) RETURNS TABLE (ordinal int, status text, reason_code text, status_reason text, job text)
LANGUAGE sql AS $$
  SELECT ordinal, status, reason_code, status_reason, job FROM mlplat.campaign_candidate_status WHERE campaign = c ORDER BY ordinal $$;
-- finish(campaign, ordinal, status, reason, actual): a write-back from the current leader,
-- through the typed seam the worker uses (an array of mlplat.campaign_writeback)
CREATE FUNCTION pg_temp.finish(c text, o int, st text, reason text, actual bigint) RETURNS boolean LANGUAGE sql AS $$
  SELECT count(*) = 1 FROM mlplat._campaigns_writeback_set(5, (
    SELECT array_agg(ROW(k.id, k.row_version, st, reason, NULL, '{}'::jsonb, now() - interval '1 minute', actual,
      CASE WHEN st = 'BUILT' THEN jsonb_build_object('output_uri', 's3://bkt/opt/adm/' || c || '/' || o || '/artifact',
        'output_sha256', repeat('e', 64), 'output_bytes', 10, 'attestation', '{}'::jsonb, 'attestation_sha256', repeat('f', 64),
        'verified_by', 'x-amz-checksum-sha256') END, false, NULL)::mlplat.campaign_writeback)
      FROM mlplat.campaign_candidates k JOIN mlplat.campaigns x ON x.id = k.campaign_id WHERE x.name = c AND k.ordinal = o)) $$;

-- (the admission pass acts on every project's campaigns: the results are read per campaign)
-- nothing is admitted before approval
SELECT status FROM mlplat.create_campaign('adm', 'spend', pg_temp.def(jsonb_build_array(pg_temp.cand('big', 1, 1200), pg_temp.cand('small', 1, 600))));
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('spend');
-- scenario 5: max 1000 GPU-seconds against a 1 x 1200 s candidate: SPEND_EXHAUSTED, no Job;
-- the next one (600) fits
SELECT status FROM mlplat.approve_campaign('adm', 'spend', 1000, '1 day');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('spend');
SELECT state, spend_committed_gpu_seconds FROM mlplat.campaign_status WHERE campaign = 'spend';
SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'adm';
-- the claim hands the worker the Job to create (exactly render_builder_job)
SELECT candidate, status, job_name, manifest = mlplat.render_builder_job('adm', 'spend', 'small') AS same_manifest, cleanup, output_uri
  FROM mlplat._campaigns_claim(5, 'regress');
-- a builder holds the project: no deletion while it runs
SELECT status FROM mlplat.delete_project('adm');

-- max_parallel 1: the second build is admitted only once the first has finished
SELECT status FROM mlplat.create_campaign('adm', 'serial', pg_temp.def(jsonb_build_array(pg_temp.cand('a', 1, 600), pg_temp.cand('b', 1, 600))));
SELECT status FROM mlplat.approve_campaign('adm', 'serial', 10000, '1 day');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('serial');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed_again;
SELECT ordinal, status FROM pg_temp.show('serial');
SELECT pg_temp.finish('serial', 1, 'BUILT', NULL, 300) AS written;
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('serial');

-- the GPU quota (3): a 2-GPU build waits (never fails) while 2 GPUs are in use
SELECT status FROM mlplat.create_campaign('adm', 'quota', pg_temp.def(jsonb_build_array(pg_temp.cand('wide', 2, 600))));
SELECT status FROM mlplat.approve_campaign('adm', 'quota', 10000, '1 day');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('quota');
SELECT pg_temp.finish('spend', 2, 'FAILED', 'BUILD_FAILED', 100) AS written;
SELECT pg_temp.finish('serial', 2, 'BUILT', NULL, 999999) AS written;
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('quota');
-- actual spend is capped at the reservation, whatever a clock said
SELECT candidate, actual_gpu_seconds FROM mlplat.campaign_candidate_status WHERE campaign = 'serial' ORDER BY ordinal;

-- scenario 15: two parallel candidates racing for the last budget: the second waits while the
-- first runs, and becomes NOT_RUN only when nothing of the campaign runs and it still does not fit
SELECT status FROM mlplat.set_project_quota('adm', 16);
SELECT status FROM mlplat.create_campaign('adm', 'race', pg_temp.def(jsonb_build_array(pg_temp.cand('r1', 1, 600), pg_temp.cand('r2', 1, 600)), 2));
SELECT status FROM mlplat.approve_campaign('adm', 'race', 1000, '1 day');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('race');
SELECT pg_temp.finish('race', 1, 'BUILT', NULL, 500) AS written;
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT * FROM pg_temp.show('race');
SELECT state, spend_actual_gpu_seconds, max_spend_gpu_seconds FROM mlplat.campaign_status WHERE campaign = 'race';

-- the approval window: a build that would outlive the approval is never started
SELECT status FROM mlplat.create_campaign('adm', 'window', pg_temp.def(jsonb_build_array(pg_temp.cand('long', 1, 7200), pg_temp.cand('short', 1, 600))));
SELECT status FROM mlplat.approve_campaign('adm', 'window', 100000, '1 hour');
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT ordinal, status, reason_code FROM pg_temp.show('window');

-- expiry: every PLANNED candidate NOT_RUN APPROVAL_EXPIRED; the campaign EXPIRED
SELECT status FROM mlplat.create_campaign('adm', 'late', pg_temp.def(jsonb_build_array(pg_temp.cand('x', 1, 60))));
SELECT status FROM mlplat.approve_campaign('adm', 'late', 100, '1 second');
SELECT pg_sleep(1.1);
SELECT mlplat._campaigns_admit(5, 'regress') IS NOT NULL AS passed;
SELECT ordinal, status, reason_code FROM pg_temp.show('late');
SELECT mlplat.campaign_state('adm', 'late');

-- write-back fences (scenario 10): an old row_version or an old epoch writes nothing
SELECT (SELECT count(*) FROM mlplat._campaigns_writeback_set(5, ARRAY[ROW(k.id, k.row_version - 1, 'FAILED', 'BUILD_FAILED', NULL, '{}', NULL, 1, NULL, false, NULL)::mlplat.campaign_writeback])) AS stale_row_version_written,
       (SELECT count(*) FROM mlplat._campaigns_writeback_set(4, ARRAY[ROW(k.id, k.row_version, 'FAILED', 'BUILD_FAILED', NULL, '{}', NULL, 1, NULL, false, NULL)::mlplat.campaign_writeback])) AS old_epoch_written
  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'window' AND k.ordinal = 2;
SELECT ordinal, status FROM pg_temp.show('window') WHERE ordinal = 2;
-- backoff: a failed request (retry_ms > 0) counts an attempt and defers the next one (the claim
-- says not due), an observation alone (NULL) leaves it, a success (0) resets it
CREATE FUNCTION pg_temp.retry(o int, ms int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM mlplat._campaigns_writeback_set(5, (
    SELECT array_agg(ROW(k.id, k.row_version, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, ms)::mlplat.campaign_writeback)
      FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'window' AND k.ordinal = o)) $$;
CREATE FUNCTION pg_temp.backoff(o int) RETURNS TABLE (attempts int, deferred_s int, due boolean) LANGUAGE sql AS $$
  SELECT k.attempts, greatest(0, round(extract(epoch FROM k.next_attempt_at - now())))::int, c.due
    FROM mlplat.campaign_candidates k JOIN mlplat._campaigns_claim(5, 'regress') c ON c.id = k.id
    JOIN mlplat.campaigns x ON x.id = k.campaign_id WHERE x.name = 'window' AND k.ordinal = o $$;
SELECT * FROM pg_temp.backoff(2);
SELECT pg_temp.retry(2, 60000) AS written;
SELECT * FROM pg_temp.backoff(2);
SELECT pg_temp.retry(2, 120000) AS written;
SELECT * FROM pg_temp.backoff(2);
SELECT pg_temp.retry(2, NULL) AS written;
SELECT * FROM pg_temp.backoff(2);
SELECT pg_temp.retry(2, 0) AS written;
SELECT * FROM pg_temp.backoff(2);
-- cancel while building: CANCEL_REQUESTED, then CANCELLED once the worker saw the Job gone
SELECT :acc FROM mlplat.cancel_campaign('adm', 'window');
-- finalizer_stuck (threshold 1 s, passed): before the worker's DELETE was answered the
-- alert says the Job is not yet deleted; after it, how long ago the DELETE was, not the cancel
SET mlplat.finalizer_alert_after = '1s';
SELECT pg_sleep(1.2) IS NOT NULL AS waited;
SELECT detail ~ '^builder Job mlp-adm/opt-window-2 not yet deleted; cancel requested (@ \d secs?|00:00:0\d) ago \(candidate short CANCEL_REQUESTED' AS not_yet_deleted
  FROM mlplat.alerts WHERE alert = 'finalizer_stuck' AND kind = 'campaigns' AND project = 'adm';
INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, epoch, controller)
SELECT 'campaigns', 'campaign_candidate', k.id, 'adm', 'DELETE', 'OK', 5, 'regress'
  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'window' AND k.ordinal = 2;
SELECT detail ~ '^builder Job mlp-adm/opt-window-2 deleted (@ 0|00:00:00) ago and not yet gone; cancel requested (@ \d secs?|00:00:0\d) ago' AS deleted_just_now
  FROM mlplat.alerts WHERE alert = 'finalizer_stuck' AND kind = 'campaigns' AND project = 'adm';
RESET mlplat.finalizer_alert_after;
DELETE FROM mlplat.reconcile_ledger WHERE controller = 'regress' AND action = 'DELETE';
SELECT mlplat._campaigns_writeback(k.id, k.row_version, 5, 'regress', 'CANCELLED', 'CAMPAIGN_CANCELLED', 'the Job is gone', '{}', NULL, 40, NULL) AS written
  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'window' AND k.ordinal = 2;
SELECT mlplat.campaign_state('adm', 'window');

-- a BUILT write-back: the artifact with every provenance field, evidence_version bumped, not qualified
SELECT kind, tool, tool_version, builder_image_digest = 'sha256:' || repeat('1', 64) AS digest_pinned, algorithm, precision,
       hardware, spdx, output_uri, verified_by, qualified, candidate
  FROM mlplat.optimized_artifact_status WHERE campaign = 'serial' ORDER BY candidate;
SELECT candidate, evidence_version, qualified FROM mlplat.campaign_candidate_status WHERE campaign = 'serial' ORDER BY ordinal;
SELECT t.to_status, t.reason_code, t.epoch, t.controller, t.actor FROM mlplat.candidate_transitions t
  JOIN mlplat.campaign_candidates k ON k.id = t.candidate_id JOIN mlplat.campaigns c ON c.id = k.campaign_id
 WHERE c.name = 'serial' AND k.ordinal = 1 ORDER BY t.seq;
-- BUILT needs the verified artifact
SELECT mlplat._campaigns_writeback(k.id, k.row_version, 5, 'regress', 'BUILT', NULL, NULL, '{}', NULL, 1, NULL)
  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'spend' AND k.ordinal = 2;
-- cleanup: terminal candidates with a Job are handed out until cleaned, then never again
SELECT campaign, candidate, status, cleanup FROM mlplat._campaigns_claim(5, 'regress') WHERE project = 'adm' ORDER BY campaign, ordinal;
SELECT count(*) AS cleaned FROM mlplat._campaigns_writeback_set(5, (
  SELECT array_agg(ROW(c.id, c.row_version, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true, NULL)::mlplat.campaign_writeback)
    FROM mlplat._campaigns_claim(5, 'regress') c WHERE c.project = 'adm' AND c.cleanup));
SELECT campaign, candidate, status, cleanup FROM mlplat._campaigns_claim(5, 'regress') WHERE project = 'adm' ORDER BY campaign, ordinal;
SELECT gpus_in_use FROM mlplat.project_status WHERE project = 'adm';
DELETE FROM mlplat.leader_epochs WHERE kind = 'campaigns';
