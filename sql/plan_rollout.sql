--
-- mlplat.plan_rollout(contract, evidence): validate, then decide exactly one
-- transition.  Rules, shapes and reason codes: docs/rollouts.md.
--
-- The base contract and evidence below qualify for ADVANCE 0.2 -> 0.5.  Each
-- case changes one thing (a path set to a JSON value, or '<delete>'), then
-- the records get correct content ids, so a case tests exactly its rule.
--
CREATE TEMP TABLE base AS SELECT
 '{"scope":{"project":"fraud","deployment":"scorer",
            "target_revision":"scorer-r18","previous_revision":"scorer-r17",
            "model_digest":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "config_digest":"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
   "policy":{"steps":[0.05,0.2,0.5,1],"ceiling_fraction":0.5,
             "min_samples":500,"window_seconds":300,
             "max_error_rate":0.01,"max_p95_ms":250,
             "max_error_rate_increase":0.005,"max_p95_increase_ratio":1.25,
             "health_max_age_seconds":60,
             "surge_replicas":1,"rollback_headroom_replicas":2,"capacity_quota_replicas":12}}'::jsonb AS contract,
 '{"scope":{"project":"fraud","deployment":"scorer",
            "target_revision":"scorer-r18","previous_revision":"scorer-r17",
            "model_digest":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "config_digest":"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
   "observed_at":1764410400,"current_fraction":0.2,
   "window_start":1764410100,"window_seconds":300,
   "target":{"desired_replicas":4,"ready_replicas":4,"load_attempts":4,"load_successes":4,
             "health_observed_at":1764410390,"requests":1200,"errors":2,"p95_ms":180},
   "previous":{"desired_replicas":4,"ready_replicas":4,"load_attempts":4,"load_successes":4,
               "health_observed_at":1764410395,"requests":4800,"errors":9,"p95_ms":170},
   "desired_capacity":8}'::jsonb AS evidence;

-- doc with changes {"dotted.path": value, ...} applied; "<delete>" removes the path
CREATE FUNCTION pg_temp.mut(doc jsonb, changes jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  k text; v jsonb;
BEGIN
  FOR k, v IN SELECT * FROM jsonb_each(changes) LOOP
    IF v = '"<delete>"' THEN
      doc := doc #- string_to_array(k, '.');
    ELSE
      doc := jsonb_set(doc, string_to_array(k, '.'), v, true);
    END IF;
  END LOOP;
  RETURN doc;
END $$;

-- the base contract with changes, stamped with its content id
CREATE FUNCTION pg_temp.con(changes jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$ SELECT mlplat.with_content_id(pg_temp.mut(contract, changes)) FROM base $$;

-- the base evidence bound to contract c, with changes, stamped with its id
CREATE FUNCTION pg_temp.ev(c jsonb, changes jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT mlplat.with_content_id(pg_temp.mut(
           evidence || jsonb_build_object('contract_content_id', c->>'content_id'), changes))
  FROM base $$;

-- a one-line outcome: the decision, or the error
CREATE FUNCTION pg_temp.try(c jsonb, e jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  p jsonb; st text; msg text; det text;
BEGIN
  p := mlplat.plan_rollout(c, e);
  RETURN format('%s %s -> %s %s', p->>'decision', p->'current_fraction',
                p->'next_fraction', p->'reasons');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
  RETURN format('ERROR %s: %s [%s]', st, msg, split_part(split_part(det, ':', 1), ' ', 2));
END $$;

-- ------------------------------------------------------------------ decisions
CREATE TEMP TABLE decisions (name text, contract jsonb, evidence jsonb);
INSERT INTO decisions SELECT name, c, pg_temp.ev(c, kv) FROM (VALUES
 -- ADVANCE
 ('advance: qualified evidence, next step',        pg_temp.con(), '{}'::jsonb),
 ('advance: from 0, readiness alone qualifies',    pg_temp.con(), '{"current_fraction": 0, "target.requests": 0, "target.errors": 0, "target.p95_ms": null}'),
 ('advance: from between two steps',               pg_temp.con(), '{"current_fraction": 0.1}'),
 ('advance: capped by the ceiling',                pg_temp.con('{"policy.ceiling_fraction": 0.3}'), '{}'),
 ('advance: error rate exactly at the maximum',    pg_temp.con(), '{"target.errors": 12, "previous.errors": 48}'),
 ('advance: health exactly at its maximum age',    pg_temp.con(), '{"target.health_observed_at": 1764410340}'),
 ('advance: millisecond times, window exactly complete', pg_temp.con(), '{"observed_at": 1764410400.25, "window_start": 1764410100.25, "target.health_observed_at": 1764410340.25, "previous.health_observed_at": 1764410400.25}'),
 ('advance: samples exactly at the minimum',       pg_temp.con(), '{"target.requests": 500}'),
 ('advance: 5.0 is a count (same content as 5)',   pg_temp.con(), '{"target.requests": 1200.0}'),
 ('advance: relative check needs previous samples', pg_temp.con(), '{"target.errors": 11, "previous.requests": 100, "previous.errors": 0}'),
 -- ROLLBACK: demonstrated regressions over a complete window
 ('rollback: error rate above maximum',            pg_temp.con(), '{"target.errors": 30}'),
 ('rollback: p95 above maximum',                   pg_temp.con(), '{"target.p95_ms": 300}'),
 ('rollback: error rate increase vs previous',     pg_temp.con(), '{"target.errors": 11, "previous.errors": 0}'),
 ('rollback: p95 increase ratio vs previous',      pg_temp.con(), '{"target.p95_ms": 240}'),
 ('rollback: several regressions, sorted',         pg_temp.con(), '{"target.errors": 60, "target.p95_ms": 400}'),
 ('rollback: regression wins over stale health',   pg_temp.con(), '{"target.errors": 30, "target.health_observed_at": 1764400000, "target.ready_replicas": 3}'),
 ('rollback: with null p95, error rate suffices',  pg_temp.con(), '{"target.errors": 30, "target.p95_ms": null}'),
 -- HOLD: incomplete evidence never rolls back
 ('hold: regression but window incomplete',        pg_temp.con(), '{"target.errors": 30, "window_seconds": 299}'),
 ('hold: regression but too few samples',          pg_temp.con(), '{"target.errors": 100, "target.requests": 499}'),
 ('hold: target not all ready',                    pg_temp.con(), '{"target.ready_replicas": 3}'),
 ('hold: target desired 0',                        pg_temp.con(), '{"target.desired_replicas": 0, "target.ready_replicas": 0, "desired_capacity": 4}'),
 ('hold: a load failed',                           pg_temp.con(), '{"target.load_successes": 3}'),
 ('hold: no load attempts',                        pg_temp.con(), '{"target.load_attempts": 0, "target.load_successes": 0}'),
 ('hold: health never observed',                   pg_temp.con(), '{"target.health_observed_at": null}'),
 ('hold: health stale',                            pg_temp.con(), '{"target.health_observed_at": 1764410339}'),
 ('hold: previous not ready (rollback not warm)',  pg_temp.con(), '{"previous.ready_replicas": 3}'),
 ('hold: previous desired 0',                      pg_temp.con(), '{"previous.desired_replicas": 0, "previous.ready_replicas": 0, "desired_capacity": 4}'),
 ('hold: window incomplete',                       pg_temp.con(), '{"window_seconds": 120}'),
 ('hold: window incomplete by a millisecond',      pg_temp.con(), '{"window_seconds": 299.999}'),
 ('hold: health stale by a millisecond',           pg_temp.con(), '{"target.health_observed_at": 1764410339.999}'),
 ('hold: too few samples',                         pg_temp.con(), '{"target.requests": 499}'),
 ('hold: no requests at all (silent metrics)',     pg_temp.con(), '{"target.requests": 0, "target.errors": 0, "target.p95_ms": null}'),
 ('hold: p95 missing',                             pg_temp.con(), '{"target.p95_ms": null}'),
 ('hold: at a ceiling below 1',                    pg_temp.con(), '{"current_fraction": 0.5}'),
 ('hold: complete at 1, awaiting promotion',       pg_temp.con('{"policy.ceiling_fraction": 1}'), '{"current_fraction": 1}'),
 ('hold: several reasons, sorted',                 pg_temp.con(), '{"current_fraction": 0.5, "target.ready_replicas": 3, "target.health_observed_at": null, "previous.ready_replicas": 0}')
) v(name, c, kv);

SELECT name, pg_temp.try(contract, evidence) AS outcome FROM decisions ORDER BY name;

-- every decision and every reason code is covered by the table above
SELECT d AS decision, count(*) FROM decisions, LATERAL (SELECT mlplat.plan_rollout(contract, evidence)->>'decision') x(d)
GROUP BY 1 ORDER BY 1;
SELECT r AS reason, count(*) FROM decisions,
  LATERAL jsonb_array_elements_text(mlplat.plan_rollout(contract, evidence)->'reasons') r
GROUP BY 1 ORDER BY 1;

-- ------------------------------------------------------------------ the whole output
SELECT jsonb_pretty(mlplat.plan_rollout(contract, evidence)) FROM decisions
WHERE name = 'advance: qualified evidence, next step';

-- ------------------------------------------------------------------ refusals (SQLSTATE 22023)
CREATE TEMP TABLE refusals (name text, contract jsonb, evidence jsonb);
INSERT INTO refusals SELECT name, c, CASE WHEN e IS NOT NULL THEN e ELSE pg_temp.ev(c, kv) END
FROM (VALUES
 ('contract content_id does not match its content', pg_temp.con() || '{"content_id":"0000000000000000000000000000000000000000000000000000000000000000"}', NULL::jsonb, '{}'::jsonb),
 ('contract edited after its id was computed',     jsonb_set(pg_temp.con(), '{policy,min_samples}', '1'), NULL, '{}'),
 ('evidence edited after its id was computed',     pg_temp.con(), pg_temp.ev(pg_temp.con()) || '{"current_fraction":0.05}', '{}'),
 ('evidence content_id is not an id',              pg_temp.con(), pg_temp.ev(pg_temp.con()) || '{"content_id":"abc"}', '{}'),
 ('evidence for another contract',                 pg_temp.con(), pg_temp.ev(pg_temp.con('{"policy.min_samples": 100}')), '{}'),
 ('evidence for another scope',                    pg_temp.con(), NULL, '{"scope.deployment": "other"}'),
 ('evidence for another model digest',             pg_temp.con(), NULL, '{"scope.model_digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}'),
 ('boolean where a count belongs',                 pg_temp.con(), NULL, '{"target.requests": true}'),
 ('boolean where a fraction belongs',              pg_temp.con(), NULL, '{"current_fraction": false}'),
 ('numeric-looking string where a count belongs',  pg_temp.con(), NULL, '{"target.errors": "5"}'),
 ('numeric-looking string where a fraction belongs', pg_temp.con(), NULL, '{"current_fraction": "0.2"}'),
 ('string where p95 belongs',                      pg_temp.con(), NULL, '{"target.p95_ms": "180"}'),
 ('number beyond double range (non-finite)',       pg_temp.con(), jsonb_set(pg_temp.ev(pg_temp.con()), '{target,p95_ms}', '1e400'), '{}'),
 ('negative count',                                pg_temp.con(), NULL, '{"previous.errors": -1}'),
 ('negative p95',                                  pg_temp.con(), NULL, '{"previous.p95_ms": -0.5}'),
 ('non-integer count',                             pg_temp.con(), NULL, '{"target.requests": 1200.5}'),
 ('epoch seconds finer than a millisecond',        pg_temp.con(), NULL, '{"observed_at": 1764410400.0005}'),
 ('window finer than a millisecond',               pg_temp.con(), NULL, '{"window_seconds": 299.9999}'),
 ('negative window',                               pg_temp.con(), NULL, '{"window_seconds": -1}'),
 ('epoch seconds beyond 2^53 ms',                  pg_temp.con(), NULL, '{"observed_at": 9007199254741}'),
 ('count beyond 2^53',                             pg_temp.con(), NULL, '{"target.requests": 9007199254740993}'),
 ('fraction above 1',                              pg_temp.con(), NULL, '{"current_fraction": 1.5}'),
 ('fraction below 0',                              pg_temp.con(), NULL, '{"current_fraction": -0.1}'),
 ('step outside (0,1]',                            pg_temp.con('{"policy.steps": [0, 0.5, 1]}'), NULL, '{}'),
 ('steps not increasing',                          pg_temp.con('{"policy.steps": [0.05, 0.5, 0.2, 1]}'), NULL, '{}'),
 ('no steps',                                      pg_temp.con('{"policy.steps": []}'), NULL, '{}'),
 ('ceiling above the last step',                   pg_temp.con('{"policy.steps": [0.05, 0.2]}'), NULL, '{}'),
 ('max_error_rate above 1',                        pg_temp.con('{"policy.max_error_rate": 2}'), NULL, '{}'),
 ('p95 increase ratio below 1',                    pg_temp.con('{"policy.max_p95_increase_ratio": 0.9}'), NULL, '{}'),
 ('min_samples 0',                                 pg_temp.con('{"policy.min_samples": 0}'), NULL, '{}'),
 ('errors above requests',                         pg_temp.con(), NULL, '{"target.errors": 1201}'),
 ('load successes above attempts',                 pg_temp.con(), NULL, '{"target.load_successes": 5}'),
 ('ready above desired',                           pg_temp.con(), NULL, '{"previous.ready_replicas": 5}'),
 ('desired_capacity not the sum',                  pg_temp.con(), NULL, '{"desired_capacity": 9}'),
 ('window ends after observed_at',                 pg_temp.con(), NULL, '{"window_start": 1764410200}'),
 ('window ends a millisecond after observed_at',   pg_temp.con(), NULL, '{"window_start": 1764410100.001}'),
 ('health observed after observed_at',             pg_temp.con(), NULL, '{"target.health_observed_at": 1764410401}'),
 ('unknown key in evidence',                       pg_temp.con(), NULL, '{"traffic": 0.2}'),
 ('unknown key in a revision',                     pg_temp.con(), NULL, '{"target.p99_ms": 300}'),
 ('unknown key in the policy',                     pg_temp.con('{"policy.max_p99_ms": 300}'), NULL, '{}'),
 ('missing key in evidence',                       pg_temp.con(), NULL, '{"observed_at": "<delete>"}'),
 ('missing key in a revision',                     pg_temp.con(), NULL, '{"previous.p95_ms": "<delete>"}'),
 ('missing key in the contract',                   pg_temp.con('{"policy.window_seconds": "<delete>"}'), NULL, '{}'),
 ('revision object of the wrong type',             pg_temp.con(), NULL, '{"target": []}'),
 ('scope string of the wrong type',                pg_temp.con(), NULL, '{"scope.project": 7}'),
 ('digest without its algorithm',                  pg_temp.con('{"scope.config_digest": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}'), NULL, '{}'),
 ('target and previous revision the same',         pg_temp.con('{"scope.previous_revision": "scorer-r18"}'), NULL, '{}'),
 ('desired-capacity overcommit',                   pg_temp.con(), NULL, '{"target.desired_replicas": 6, "target.ready_replicas": 6, "desired_capacity": 10}'),
 ('traffic above the policy ceiling',              pg_temp.con(), NULL, '{"current_fraction": 0.6}'),
 ('evidence that is not an object',                pg_temp.con(), '[]', '{}')
) v(name, c, e, kv);

SELECT name, pg_temp.try(contract, evidence) AS outcome FROM refusals ORDER BY name;

-- the full report: message with the path, detail with the rule, and a hint
\set VERBOSITY default
SELECT mlplat.plan_rollout(contract, evidence) FROM refusals WHERE name = 'boolean where a count belongs';
SELECT mlplat.plan_rollout(contract, evidence) FROM refusals WHERE name = 'evidence edited after its id was computed';
SELECT mlplat.plan_rollout(contract, evidence) FROM refusals WHERE name = 'desired-capacity overcommit';
SELECT mlplat.plan_rollout(contract, evidence) FROM refusals WHERE name = 'evidence for another contract';
\set VERBOSITY terse

-- ------------------------------------------------------------------ determinism and ids
-- the same call twice gives the same text
SELECT count(*) AS cases,
       count(*) FILTER (WHERE mlplat.plan_rollout(contract, evidence)::text
                              = mlplat.plan_rollout(contract, evidence)::text) AS identical
FROM decisions;
-- decision_digest is the content id of the output without it; the ids are the
-- inputs'; two cases (1200 and 1200.0) are the same evidence, hence one digest fewer
SELECT count(*) FILTER (WHERE p->>'decision_digest' = mlplat.content_id(p, 'decision_digest')) AS digest_ok,
       count(*) FILTER (WHERE p->>'contract_content_id' = contract->>'content_id'
                          AND p->>'evidence_content_id' = evidence->>'content_id') AS ids_ok,
       count(DISTINCT p->>'decision_digest') AS distinct_digests
FROM decisions, LATERAL mlplat.plan_rollout(contract, evidence) p;
-- a pinned digest: any change to the output's bytes is noticed
SELECT mlplat.plan_rollout(contract, evidence)->>'decision_digest' AS pinned
FROM decisions WHERE name = 'advance: qualified evidence, next step';
-- the same content spelt differently (key order, 1200.0) is the same evidence
SELECT mlplat.plan_rollout(contract, evidence) = mlplat.plan_rollout(contract,
         jsonb_set(evidence, '{target,requests}', '1200.0')) AS same_plan
FROM decisions WHERE name = 'advance: qualified evidence, next step';
-- the contract is cached between rows only while it is byte-identical
SELECT n, mlplat.plan_rollout(c, e)->>'decision' AS decision
FROM (VALUES (1, pg_temp.con(), pg_temp.ev(pg_temp.con())),
             (2, pg_temp.con('{"policy.ceiling_fraction": 0.2}'), pg_temp.ev(pg_temp.con('{"policy.ceiling_fraction": 0.2}'))),
             (3, pg_temp.con(), pg_temp.ev(pg_temp.con())),
             (4, pg_temp.con('{"policy.min_samples": 5000}'), pg_temp.ev(pg_temp.con('{"policy.min_samples": 5000}')))) v(n, c, e)
ORDER BY n;
-- a cached contract is used only for the same bytes: a contract edited after its id was
-- computed ends with the same content id (the datum's tail, which keys the cache) as the
-- valid one decided just before it, and is still refused
SELECT n, mlplat.plan_rollout(c, e)->>'decision' AS decision
FROM (VALUES (1, pg_temp.con(), pg_temp.ev(pg_temp.con())),
             (2, jsonb_set(pg_temp.con(), '{policy,min_samples}', '5000'), pg_temp.ev(pg_temp.con()))) v(n, c, e)
ORDER BY n;
-- the function is declared pure
SELECT proname, provolatile, proisstrict, proparallel FROM pg_proc
WHERE oid IN ('mlplat.plan_rollout(jsonb,jsonb)'::regprocedure, 'mlplat.with_content_id(jsonb)'::regprocedure)
ORDER BY 1;

-- ------------------------------------------------------------------ with_content_id
SELECT mlplat.with_content_id('{"b":1,"a":[1.0]}');
-- idempotent, and a stale id is replaced
SELECT mlplat.with_content_id(mlplat.with_content_id('{"b":1}')) = mlplat.with_content_id('{"b":1}') AS idempotent,
       mlplat.with_content_id('{"b":1,"content_id":"stale"}') = mlplat.with_content_id('{"b":1}') AS replaces_stale;
SELECT mlplat.with_content_id('[1,2]');

-- ------------------------------------------------------------------ both routes
-- Evidence of the exact shape is read in one pass from its jsonb (numbers remembered per
-- field between calls); a record that pass declines is read as a tree.  A number whose
-- text takes 64 bytes or more (desired_capacity as 8.000...0, 70 decimals) is declined,
-- so E' below takes the tree route while E, the same content with the same content id,
-- takes the one pass: 12,000 generated records, valid and not, must give the same plan or
-- the same error (SQLSTATE, message, detail, hint) both ways, compared as text, and the
-- one pass the same again in reverse order (other numbers remembered).
CREATE FUNCTION pg_temp.outcome(c jsonb, e jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  detail text; hint text;
BEGIN
  RETURN jsonb_build_object('plan', mlplat.plan_rollout(c, e));
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN jsonb_build_object('error', jsonb_build_array(SQLSTATE, SQLERRM, detail, hint));
END $$;
CREATE TEMP TABLE routes_contract AS SELECT pg_temp.con() AS c;
CREATE TEMP TABLE routes AS
SELECT i, e, jsonb_set(e, '{desired_capacity}',
                       to_jsonb(round((e->>'desired_capacity')::numeric, 70))) AS e_tree
FROM (SELECT i, pg_temp.ev((SELECT c FROM routes_contract), jsonb_build_object(
  'observed_at', 1764410400 + (i % 8) * 0.125 + CASE WHEN i % 211 = 0 THEN 0.0005 ELSE 0 END,
  'current_fraction', CASE WHEN i % 97 = 0 THEN 1.5 ELSE (ARRAY[0, 0.05, 0.1, 0.2, 0.25, 0.5])[1 + i % 6] END,
  'window_start', 1764410100 + (i % 5) * 0.001, 'window_seconds', (ARRAY[300, 200, 299.75, 2.5e2])[1 + i % 4],
  'target.ready_replicas', i % 5, 'target.load_successes', 3 + i % 2,
  'target.health_observed_at', CASE WHEN i % 37 = 0 THEN NULL ELSE 1764410400 - i % 90 END,
  'target.requests', CASE WHEN i % 101 = 0 THEN 1000000000000 + i WHEN i % 103 = 0 THEN 1e15 ELSE (i * 7919) % 3000 END,
  'target.errors', CASE WHEN i % 193 = 0 THEN -1 WHEN i % 89 = 0 THEN 2.5 ELSE i % 19 END,
  'target.p95_ms', CASE WHEN i % 31 = 0 THEN NULL ELSE 150 + (i % 200) * 0.25 END,
  'previous.requests', 4000 + i % 1700, 'previous.errors', i % 11,
  'previous.p95_ms', CASE WHEN i % 43 = 0 THEN 1e-7 ELSE 160 + i % 30 END,
  'desired_capacity', CASE WHEN i % 53 = 0 THEN 4 + i % 9 ELSE 8 END)) AS e
  FROM generate_series(1, 12000) i) g;
CREATE TEMP TABLE routes_out AS
SELECT i, pg_temp.outcome(c, e) AS one_pass, pg_temp.outcome(c, e_tree) AS tree
FROM routes, routes_contract ORDER BY i;
SELECT count(*) AS records, count(*) FILTER (WHERE one_pass::text IS DISTINCT FROM tree::text) AS differ,
       count(*) FILTER (WHERE one_pass ? 'error') AS errors,
       count(DISTINCT one_pass) AS distinct_outcomes
FROM routes_out;
SELECT count(*) AS differ_in_reverse_order
FROM (SELECT i, pg_temp.outcome(c, e) AS again FROM routes, routes_contract ORDER BY i DESC) r
JOIN routes_out USING (i) WHERE again::text IS DISTINCT FROM one_pass::text;
