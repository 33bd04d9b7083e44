-- pgTAP: per-row resync of deployments (issue 20, target 2).  A claim between full passes
-- returns the rows that changed or whose own resync is due, not every live row; the write-back
-- and _deployments_resynced move a row's next resync on, spread over mlplat.resync_interval;
-- an option setter makes the row due at once.  Before: _deployments_claim(false) returned
-- every live row, so every pass read the whole fleet.
BEGIN;
SELECT plan(22);

SELECT mlplat.create_project('rrs', 4);
SELECT mlplat.add_artifact_location('rrs', 's3://models/');
SELECT mlplat.register_model_version('rrs', 'm', '1', 's3://models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT mlplat.set_model_stage('rrs', 'm', '1', 'CHAMPION');
SELECT count(mlplat.deploy('rrs', 'r' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, 3) i;
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('deployments', 4242, 1, 0, 'tap')
ON CONFLICT (kind) DO UPDATE SET epoch = 4242;
CREATE TEMP VIEW rrs_claim AS
  SELECT c.name, c.due FROM mlplat._deployments_claim(false) c WHERE c.project = 'rrs';

SELECT is((SELECT string_agg(name, ',' ORDER BY name) FROM rrs_claim), 'r1,r2,r3',
          'intents not yet applied are claimed (changed rows)');

-- the three converge: READY, observed; nothing changed since
SELECT mlplat._deployments_writeback(d.id, d.row_version, 4242, 'READY', 'ready', d.generation, d.desired_revision,
                                     'http://x', NULL, NULL, NULL)
  FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'rrs';
SELECT is((SELECT count(*) FROM rrs_claim), 0::bigint,
          'a steady fleet whose resyncs are not due: a claim between full passes reads none of it');
SELECT is((SELECT count(*) FROM mlplat._deployments_claim(true) c WHERE c.project = 'rrs' AND c.due), 3::bigint,
          'a full pass claims every live row, each due');
SELECT ok((SELECT bool_and(d.next_resync_at >= now() + current_setting('mlplat.resync_interval')::interval * 0.5
                      AND d.next_resync_at < now() + current_setting('mlplat.resync_interval')::interval * 1.5)
             FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'rrs'),
          'the write-back set each next resync within [0.5, 1.5) x mlplat.resync_interval');
SELECT ok((SELECT min(t) >= 0.5 AND max(t) < 1.5 AND max(t) - min(t) > 0.8
             FROM (SELECT extract(epoch FROM mlplat._next_resync_at() - now())
                          / extract(epoch FROM current_setting('mlplat.resync_interval')::interval) AS t
                     FROM generate_series(1, 1000)) x),
          '_next_resync_at spreads over [0.5, 1.5) intervals (1000 draws)');

-- one row's resync falls due: that row alone is claimed
UPDATE mlplat.deployments SET next_resync_at = now() - interval '1 ms' WHERE name = 'r2';
SELECT is((SELECT string_agg(name || ':' || due, ',') FROM rrs_claim), 'r2:true',
          'a row whose resync is due is claimed alone, and due');
CREATE TEMP TABLE rrs_before AS SELECT id, row_version FROM mlplat.deployments WHERE name = 'r2';
SELECT mlplat._deployments_resynced(4243, ARRAY(SELECT id FROM rrs_before));
SELECT is((SELECT count(*) FROM rrs_claim), 1::bigint, 'a deposed leader (another epoch) marks nothing resynced');
SELECT mlplat._deployments_resynced(4242, ARRAY(SELECT id FROM rrs_before));
SELECT is((SELECT count(*) FROM rrs_claim), 0::bigint, 'once marked resynced it is not claimed again');
SELECT is((SELECT d.row_version FROM mlplat.deployments d JOIN rrs_before b USING (id)),
          (SELECT row_version FROM rrs_before),
          '... and its row_version did not move (an intent''s compare-and-swap is not lost to a resync)');
SELECT ok((SELECT next_resync_at > now() FROM mlplat.deployments WHERE name = 'r2'), '... its next resync is later');

-- what makes a row due at once
SELECT mlplat.set_drift_policy('rrs', 'r1', 'report');
SELECT is((SELECT string_agg(name, ',') FROM rrs_claim), 'r1', 'set_drift_policy makes the row due at once');
SELECT mlplat.undeploy('rrs', 'r3');
SELECT is((SELECT string_agg(name, ',' ORDER BY name) FROM rrs_claim), 'r1,r3', 'an undeploy is a change: claimed');
SELECT is((SELECT count(*) FROM mlplat._deployments_claim(false, true) c WHERE c.project = 'rrs'), 1::bigint,
          'a woken pass takes only the intent not yet applied (the undeploy)');

-- a watch event brings a resync forward (_deployments_due), only while the epoch is the kind's,
-- never pushes one back, and leaves a DELETED row alone
SELECT mlplat._deployments_resynced(4242, ARRAY(SELECT id FROM rrs_before));
SELECT mlplat._deployments_due(4243, ARRAY[mlplat._project_namespace('rrs')], ARRAY['r2']);
SELECT ok((SELECT next_resync_at > now() FROM mlplat.deployments WHERE name = 'r2'),
          'a deposed leader''s watch event makes nothing due');
SELECT mlplat._deployments_due(4242, ARRAY[mlplat._project_namespace('rrs')], ARRAY['r2']);
SELECT is((SELECT next_resync_at FROM mlplat.deployments WHERE name = 'r2'), now(),
          'a watch event makes its row due now');
UPDATE mlplat.deployments SET next_resync_at = now() - interval '1 hour' WHERE name = 'r2';
SELECT mlplat._deployments_due(4242, ARRAY[mlplat._project_namespace('rrs')], ARRAY['r2']);
SELECT is((SELECT next_resync_at FROM mlplat.deployments WHERE name = 'r2'), now() - interval '1 hour',
          '... and does not push back a resync due earlier');
UPDATE mlplat.deployments SET status = 'DELETED', next_resync_at = now() + interval '1 hour' WHERE name = 'r3';
SELECT mlplat._deployments_due(4242, ARRAY[mlplat._project_namespace('rrs')], ARRAY['r3']);
SELECT is((SELECT next_resync_at FROM mlplat.deployments WHERE name = 'r3'), now() + interval '1 hour',
          '... nor touches a DELETED row');
-- due9: the keys whose rows need no write (due already, DELETED, no such row) are dropped
-- before the write; the others in the same call are still made due
UPDATE mlplat.deployments SET next_resync_at = now() + interval '1 hour' WHERE name = 'r1';
SELECT mlplat._deployments_due(4242, array_fill(mlplat._project_namespace('rrs'), ARRAY[4]),
                               ARRAY['r2', 'no-such', 'r3', 'r1']);
SELECT is((SELECT string_agg(name || ':' || (next_resync_at - now()), ',' ORDER BY name) FROM mlplat.deployments
            WHERE name IN ('r1', 'r2', 'r3') AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'rrs')),
          'r1:00:00:00,r2:-01:00:00,r3:01:00:00',
          '... in one call with keys it drops: only the row due later is made due');

-- claim9: a claim between full passes takes the first p_limit rows in (next_resync_at, id)
-- order of the due and the changed ones, and reads about that many index entries to find
-- them.  Before: every changed and every due row was read and sorted for each chunk (40
-- here, 10,000 in a converge of 10,000).  40 intents, a quarter of them then written back
-- READY (steady), next resyncs on both sides of now(), in pairs (ties go by id), not in id order.
SELECT mlplat.create_project('rrc', 4);
SELECT mlplat.add_artifact_location('rrc', 's3://models/');
SELECT mlplat.register_model_version('rrc', 'm', '1', 's3://models/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT mlplat.set_model_stage('rrc', 'm', '1', 'CHAMPION');
SELECT count(mlplat.deploy('rrc', 'c' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, 40) i;
SELECT count(*) FROM mlplat._deployments_writeback_set(4242, ARRAY(
  SELECT ROW(d.id, d.row_version, 'READY', 'ready', d.generation, d.desired_revision, 'http://x', NULL, NULL, NULL)::mlplat.deployment_writeback
    FROM mlplat.deployments d WHERE d.name ~ '^c' AND substr(d.name, 2)::int % 4 = 0 ORDER BY d.id));
UPDATE mlplat.deployments SET next_resync_at = now() + ((substr(name, 2)::int * 7) % 20 - 10) * interval '1 s'
 WHERE name ~ '^c';
CREATE TEMP VIEW rrc_reads AS
  SELECT sum(pg_catalog.pg_stat_get_xact_tuples_returned(i))::int AS n
    FROM unnest(ARRAY['mlplat.deployments_changed'::regclass, 'mlplat.deployments_resync_due'::regclass]) i;
SELECT is((SELECT array_agg(c.id ORDER BY c.id) FROM mlplat._deployments_claim(false, false, 0, 0, 25) c),
          (SELECT array_agg(x.id ORDER BY x.id) FROM (SELECT d.id FROM mlplat.deployments d
             WHERE d.status <> 'DELETED' AND (d.next_resync_at <= now() OR mlplat.deployment_is_changing(d.status)
                                              OR d.generation <> d.observed_generation)
             ORDER BY d.next_resync_at, d.id LIMIT 25) x),
          'a chunk of a pass between full passes: the first rows due or changed by (next_resync_at, id)');
SELECT is((SELECT array_agg(c.id ORDER BY c.id) FROM mlplat._deployments_claim(false, true, 0, 0, 7) c),
          (SELECT array_agg(x.id ORDER BY x.id) FROM (SELECT d.id FROM mlplat.deployments d
             WHERE d.status <> 'DELETED' AND d.generation <> d.observed_generation AND d.next_attempt_at <= now()
             ORDER BY d.next_resync_at, d.id LIMIT 7) x),
          'a chunk of a woken pass: the first intents not yet applied by (next_resync_at, id)');
CREATE TEMP TABLE rrc_before AS SELECT n FROM rrc_reads;
SELECT count(*) FROM mlplat._deployments_claim(false, false, 0, 0, 5);
SELECT cmp_ok((SELECT n FROM rrc_reads) - (SELECT n FROM rrc_before), '<', 20,
              'a chunk of 5 due or changed rows reads about its own rows off the indexes, not all 40');
TRUNCATE rrc_before;
INSERT INTO rrc_before SELECT n FROM rrc_reads;
SELECT count(*) FROM mlplat._deployments_claim(false, true, 0, 0, 5);
SELECT cmp_ok((SELECT n FROM rrc_reads) - (SELECT n FROM rrc_before), '<', 20,
              'a chunk of 5 intents reads about its own rows off deployments_changed, not all 30');

SELECT * FROM finish();
ROLLBACK;
