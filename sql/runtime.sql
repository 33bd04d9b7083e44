-- Runtime tables and views: retention, alerts, ledger fencing.
SELECT mlplat.create_project('rt', 2) IS NOT NULL AS created;
SELECT (mlplat.add_artifact_location('rt', 's3://b/m/')).status AS located;
SELECT mlplat.register_model_version('rt', 'm', '1', 's3://b/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn') IS NOT NULL AS registered;
SELECT (mlplat.set_model_stage('rt', 'm', '1', 'CANDIDATE')).status IS NOT NULL AS staged;
SELECT (mlplat.deploy('rt', 'd', 'm', '1', 'kserve-sklearnserver')).status;

-- repeated failures surface as an alert naming the last error
UPDATE mlplat.deployments SET attempts = 5, last_error = 'HTTP 403: inferenceservices is forbidden' WHERE name = 'd';
SELECT alert, severity, kind, project, entity, detail FROM mlplat.alerts
 WHERE alert IN ('repeated_failures', 'reconcile_age') ORDER BY alert;
-- intent unobserved for more than 5 minutes: reconcile_age
UPDATE mlplat.deployments SET attempts = 0, updated_at = now() - interval '6 minutes' WHERE name = 'd';
SELECT alert, kind, entity, regexp_replace(detail, 'for .*$', 'for <age>') AS detail
  FROM mlplat.alerts WHERE alert IN ('repeated_failures', 'reconcile_age');

-- a ledger write needs the kind's current epoch
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('deployments', 7, 1, 0, 'test')
  ON CONFLICT (kind) DO UPDATE SET epoch = 7;
SELECT mlplat._ledger_append('deployments', 'deployment', 1, 'rt', 'APPLY', 'OK', NULL, NULL, 201, NULL, 6, 'old', NULL) AS stale_epoch_lands,
       mlplat._ledger_append('deployments', 'deployment', 1, 'rt', 'APPLY', 'OK', NULL, NULL, 201, NULL, 7, 'cur', NULL) AS current_epoch_lands;
\set VERBOSITY terse
SELECT mlplat._ledger_append('deployments', 'deployment', 1, 'rt', 'JUMP', 'OK', NULL, NULL, 201, NULL, 7, 'cur', NULL);
\set VERBOSITY default

-- retention: rows past their settings go, recent ones stay
INSERT INTO mlplat.reconcile_ledger (at, kind, entity, action, outcome, epoch, controller)
VALUES (now() - interval '31 days', 'deployments', 'deployment', 'APPLY', 'OK', 7, 'old'),
       (now() - interval '29 days', 'deployments', 'deployment', 'APPLY', 'OK', 7, 'recent');
INSERT INTO mlplat.idempotency_keys (principal, action, key, request_hash, created_at)
VALUES ('x', 'deploy', 'old-key', 'h', now() - interval '8 days'), ('x', 'deploy', 'new-key', 'h', now());
SELECT * FROM mlplat.run_retention() ORDER BY what;
SELECT controller, count(*) FROM mlplat.reconcile_ledger GROUP BY controller ORDER BY controller;
SELECT key FROM mlplat.idempotency_keys WHERE principal = 'x' ORDER BY key;
-- ordinary roles cannot see health, alerts or run retention
CREATE ROLE rt_nobody;
SET ROLE rt_nobody;
SELECT count(*) FROM mlplat.alerts;
SELECT count(*) FROM mlplat.reconciler_health;
SELECT mlplat.run_retention();
RESET ROLE;
DROP ROLE rt_nobody;
