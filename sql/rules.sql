--
-- Each input rule once (issue 19 item 5): these pin what the rules accept and
-- reject, and the exact error each rejection raises, so moving a rule into one
-- definition cannot change what a caller sees.
--
\set VERBOSITY default
CREATE FUNCTION pg_temp.why(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN pg_catalog.format('%s %s / %s / %s', st, msg, det, hnt);
END $$;

-- ---------------------------------------------------------------- env
-- an object of at most 64 string members named like environment variables,
-- values of at most 4096 characters (characters, not bytes)
SELECT e, pg_temp.why(pg_catalog.format('SELECT mlplat._check_env(%L, %L::jsonb)', 'env', e)) AS verdict
FROM (VALUES
  (NULL),
  ('{}'),
  ('{"LOG_LEVEL": "info", "_X1": "", "a": "b"}'),
  ('[]'),
  ('"str"'),
  ('{"1X": "a"}'),
  ('{"A-B": "a"}'),
  ('{"": "a"}'),
  ('{"N": 1}'),
  ('{"N": null}'),
  ('{"N": {"x": "y"}}'),
  ('{"Ä": "a"}'),
  ('{"OK": "a", "bad name": "b", "N": 1}'),
  ('{"B": 1, "A": 2}')
) v(e);
-- name and value lengths, at the bounds
SELECT n, pg_temp.why(pg_catalog.format('SELECT mlplat._check_env(%L, %L::jsonb)', 'env',
         jsonb_build_object(repeat('A', n), 'v'))) AS verdict
FROM (VALUES (127), (128), (129)) v(n);
SELECT n, pg_temp.why(pg_catalog.format('SELECT mlplat._check_env(%L, %L::jsonb)', 'env',
         jsonb_build_object('V', repeat(c, n)))) AS verdict
FROM (VALUES (4096, 'x'), (4097, 'x'), (4096, 'é'), (4097, 'é'), (2048, '€')) v(n, c);
-- at most 64 variables
SELECT k, pg_temp.why(pg_catalog.format('SELECT mlplat._check_env(%L, %L::jsonb)', 'env',
         (SELECT jsonb_object_agg('V' || i, 'x') FROM generate_series(1, k) i))) AS verdict
FROM (VALUES (64), (65)) v(k);
-- 65 variables with a bad name among them: the count is named first
SELECT pg_temp.why(pg_catalog.format('SELECT mlplat._check_env(%L, %L::jsonb)', 'steps[1].env',
         (SELECT jsonb_object_agg('V' || i, 'x') FROM generate_series(1, 64) i) || '{"9": "x"}'));

-- ---------------------------------------------------------------- DNS-1123 labels
SELECT v, m, mlplat.is_dns_label(v, m) AS is_label,
       pg_temp.why(pg_catalog.format('SELECT mlplat._check_label(%L, %L, %s)', 'name', v, m)) AS verdict
FROM (VALUES
  (NULL, 63), ('', 63), ('a', 63), ('0', 63), ('a-b', 63), ('-a', 63), ('a-', 63),
  ('A', 63), ('a_b', 63), ('a.b', 63), ('é', 63), ('a b', 63), (E'a\n', 63),
  (repeat('a', 59), 59), (repeat('a', 60), 59), (repeat('a', 63), 63), (repeat('a', 64), 63)
) x(v, m);

-- ---------------------------------------------------------------- active statuses
-- every status a rollout or a run can have (their CHECK constraints), and which are active
SELECT s AS rollout_status, mlplat.rollout_is_active(s) AS active
FROM (SELECT unnest(regexp_matches(pg_get_constraintdef(c.oid), '''([A-Z_]+)''', 'g')) s
        FROM pg_constraint c WHERE c.conrelid = 'mlplat.rollouts'::regclass AND c.contype = 'c'
         AND pg_get_constraintdef(c.oid) LIKE '%status%PROGRESSING%') x ORDER BY 1;
SELECT s AS run_status, mlplat.run_is_active(s) AS active
FROM (SELECT unnest(regexp_matches(pg_get_constraintdef(c.oid), '''([A-Z_]+)''', 'g')) s
        FROM pg_constraint c WHERE c.conrelid = 'mlplat.runs'::regclass AND c.contype = 'c'
         AND pg_get_constraintdef(c.oid) LIKE '%status%SUBMITTED%') x ORDER BY 1;
SELECT mlplat.rollout_is_active(NULL) AS rollout_null, mlplat.run_is_active(NULL) AS run_null;
-- the planner inlines the rules: the partial indexes still answer "active" queries
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM mlplat.runs WHERE project_id = 1 AND mlplat.run_is_active(status);
EXPLAIN (COSTS OFF) SELECT id FROM mlplat.rollouts WHERE deployment_id = 1 AND mlplat.rollout_is_active(status);
RESET enable_seqscan;

-- ---------------------------------------------------------------- namespace and labels
-- one definition for C and SQL: the C-rendered InferenceService and the SQL functions agree
SELECT mlplat._project_namespace('alpha') AS ns, mlplat._managed_by_label() AS managed_by;
SELECT r->'metadata'->>'namespace' = mlplat._project_namespace('alpha') AS isvc_namespace_agrees,
       r->'metadata'->'labels' @> mlplat._managed_by_label() AS isvc_labels_agree,
       r->'metadata'->'labels'->>'mlplat.io/project' AS project_label
FROM mlplat._render_isvc('alpha', 'web', 1, 'inst', 'sklearn', 'kserve-sklearnserver', 's3://b/m', repeat('a', 64),
                         0, 1, 1, NULL) r;
