-- pgTAP: who may read and write the rollouts reconciler's tables, views and functions.
BEGIN;
SELECT plan(15);

DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_ro_member') THEN CREATE ROLE tap_ro_member; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_ro_outsider') THEN CREATE ROLE tap_ro_outsider; END IF;
END $$;
-- a rollout with one ledger row, in a project tap_ro_member owns
DO $$ BEGIN
  PERFORM mlplat.create_project('tro', 4, NULL, NULL, NULL, 'tap_ro_member');
  PERFORM mlplat.add_artifact_location('tro', 's3://b/');
  PERFORM mlplat.register_model_version('tro', 'm', v, 's3://b/m' || v, repeat(v, 64), 'kserve-sklearnserver', 'sklearn')
     FROM unnest(ARRAY['1', '2']) v;
  PERFORM mlplat.set_model_stage('tro', 'm', '1', 'CHAMPION');
  PERFORM mlplat.set_model_stage('tro', 'm', '2', 'CANDIDATE');
  PERFORM mlplat.deploy('tro', 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1);
  UPDATE mlplat.deployments SET status = 'READY' WHERE name = 'web';
  PERFORM mlplat.start_rollout('tro', 'web', 'm', '2', '{"steps": [0.5]}');
  PERFORM mlplat._rollouts_claim();
  INSERT INTO mlplat.rollout_transitions (rollout_id, project_id, seq, decision, reasons, from_status, to_status,
      from_fraction, to_fraction, contract_content_id, contract, evidence_content_id, evidence, observation, epoch, controller)
  SELECT r.id, r.project_id, 1, 'HOLD', '{TARGET_NOT_READY}', 'PROGRESSING', 'HOLDING', 0, 0,
         r.contract->>'content_id', r.contract, repeat('e', 64), '{}', '{}', 1, 'tap'
    FROM mlplat.rollouts r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'web';
END $$;

SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'mlplat.rollout_transitions'::regclass),
          'the transition ledger has row-level security');
SELECT ok(has_table_privilege('tap_ro_outsider', 'mlplat.rollout_transitions', 'SELECT'),
          'the ledger is readable (rows filtered by project membership)');
SELECT ok(NOT has_table_privilege('tap_ro_member', 'mlplat.rollout_transitions', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'no caller may write the ledger, not even a project owner');
-- The two checks below skip a name that matches no function: first, every name must exist,
-- so a rename fails here instead of silently shrinking what they check.
SELECT is(
  (SELECT array_agg(f ORDER BY f) FROM unnest(ARRAY['_rollouts_claim', '_rollouts_observe', '_rollout_record', '_rollout_close',
                                                    '_rollout_contract', '_rollout_pass_plan', '_rollout_fraction',
                                                    '_rollout_want_percent', '_rollout_replicas', '_prometheus_classify']) f
    WHERE NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname = f)),
  NULL, 'every reconciler function named below exists');
SELECT is(
  (SELECT array_agg(f ORDER BY f) FROM unnest(ARRAY['_rollouts_claim', '_rollouts_observe', '_rollout_record', '_rollout_close',
                                                    '_rollout_contract', '_rollout_pass_plan', '_rollout_fraction',
                                                    '_rollout_want_percent', '_rollout_replicas', '_prometheus_classify']) f
    WHERE EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname = f
                    AND has_function_privilege('tap_ro_member', p.oid, 'EXECUTE'))),
  NULL, 'the reconciler''s functions are not callable by callers');
SELECT is(
  (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace
      AND p.proname IN ('_rollouts_claim', '_rollouts_observe', '_rollout_record', '_rollout_close', '_rollout_contract',
                        '_rollout_pass_plan', '_rollout_fraction', '_rollout_want_percent', '_rollout_replicas',
                        '_prometheus_classify')
      AND (p.prosecdef OR p.proconfig IS NOT NULL AND 'search_path=pg_catalog, mlplat, pg_temp' <> ALL (p.proconfig)
           AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%'))),
  0::bigint, 'and each runs as its caller, on its caller''s pinned search_path (or its own, the same)');
SELECT ok(NOT has_table_privilege('tap_ro_member', 'mlplat.alerts', 'SELECT')
          AND NOT has_table_privilege('tap_ro_member', 'mlplat._rollout_alerts', 'SELECT'),
          'rollout alerts are for operators only');

SET LOCAL ROLE tap_ro_member;
SELECT is((SELECT count(*) FROM mlplat.rollout_transitions t JOIN mlplat.projects p ON p.id = t.project_id WHERE p.name = 'tro'),
          1::bigint, 'a project member reads its rollout''s ledger');
SELECT is((SELECT status || '/' || last_decision || '/' || transitions FROM mlplat.rollout_status WHERE project = 'tro'),
          'PROGRESSING/HOLD/1', 'rollout_status shows the last decision and the ledger size to a member');
SELECT throws_ok($$INSERT INTO mlplat.rollout_transitions (rollout_id, project_id, seq, decision, reasons, from_status,
                     to_status, from_fraction, to_fraction, contract_content_id, contract, evidence_content_id, evidence,
                     observation, epoch, controller) VALUES (1, 1, 9, 'ADVANCE', '{}', 'a', 'b', 0, 1, 'c', '{}', 'x', '{}', '{}', 1, 'me')$$,
                 '42501', NULL, 'a member cannot forge a transition');
SELECT throws_ok($$SELECT mlplat._rollouts_observe(1, ROW(1, 1, 'me', '{}', false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::mlplat.rollout_writeback)$$, '42501', NULL,
                 'a member cannot drive the reconciler''s write-back');
RESET ROLE;
SET LOCAL ROLE tap_ro_outsider;
SELECT is((SELECT count(*) FROM mlplat.rollout_transitions t JOIN mlplat.rollouts r ON r.id = t.rollout_id), 0::bigint,
          'an outsider sees no ledger rows');
RESET ROLE;

-- append-only even for the owner
SELECT throws_ok($$UPDATE mlplat.rollout_transitions SET decision = 'ADVANCE'$$, '55000', NULL, 'ledger UPDATE refused');
SELECT throws_ok($$DELETE FROM mlplat.rollout_transitions$$, '55000', NULL, 'ledger DELETE refused');
SELECT throws_ok($$TRUNCATE mlplat.rollout_transitions$$, '55000', NULL, 'ledger TRUNCATE refused');

SELECT * FROM finish();
ROLLBACK;
