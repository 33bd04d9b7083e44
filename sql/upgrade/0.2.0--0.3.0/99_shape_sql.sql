-- 0.2.0 -> 0.3.0, part 99 (shape_sql): a rule of the intent checks written once (issue 19).
--
-- mlplat._json_array (sql/install/35_api_runs.sql): "a JSON array of lo..hi elements", which
-- the campaign definition (signers, candidates; _campaign_expand, part 60) and the rollout
-- policy (steps) checked each in its own IF; _check_policy, unchanged since 0.2.0 but for
-- that call, in its final form.

-- A JSON array of lo..hi elements, else 22023 naming the field; what the array holds and
-- how to write it are the caller's words (problem, hint).  Returns the array.
CREATE FUNCTION mlplat._json_array(field text, val jsonb, lo int, hi int, problem text, hint text) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.jsonb_typeof(val) IS DISTINCT FROM 'array'
     OR pg_catalog.jsonb_array_length(val) NOT BETWEEN lo AND hi THEN
    PERFORM mlplat._bad_input(field, problem, hint);
  END IF;
  RETURN val;
END $$;
-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._json_array(text, jsonb, int, int, text, text) FROM PUBLIC;

-- Validate a rollout policy and return it with defaults filled in.
CREATE OR REPLACE FUNCTION mlplat._check_policy(policy jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  allowed text[] := ARRAY['steps', 'ceiling', 'min_samples', 'window_seconds', 'max_error_rate',
                          'max_p95_ms', 'max_error_rate_ratio', 'max_p95_ratio'];
  k text;
  s jsonb;
  i int := 0;
  prev numeric := 0;
  f numeric;
  ceiling numeric := 1;
  res jsonb;
BEGIN
  IF policy IS NULL OR pg_catalog.jsonb_typeof(policy) <> 'object' THEN
    PERFORM mlplat._bad_input('policy', 'must be a JSON object', 'Pass e.g. {"steps": [0.1, 0.5, 1]}.');
  END IF;
  FOR k IN SELECT pg_catalog.jsonb_object_keys(policy) LOOP
    IF NOT k = ANY (allowed) THEN
      PERFORM mlplat._bad_input('policy', pg_catalog.format('unknown key "%s"', pg_catalog.left(k, 64)),
        pg_catalog.format('Allowed keys: %s.', pg_catalog.array_to_string(allowed, ', ')));
    END IF;
  END LOOP;
  IF policy ? 'ceiling' THEN
    ceiling := mlplat._json_num('policy.ceiling', policy->'ceiling', 0, 1, false, true);
  END IF;
  PERFORM mlplat._json_array('policy.steps', policy->'steps', 1, 20,
    'is required: an array of 1 to 20 traffic fractions', 'Fractions are in (0, 1], e.g. [0.05, 0.25, 0.5, 1].');
  FOR s IN SELECT e FROM pg_catalog.jsonb_array_elements(policy->'steps') e LOOP
    i := i + 1;
    f := mlplat._json_num(pg_catalog.format('policy.steps[%s]', i), s, 0, 1, false, true);
    IF f <= prev THEN
      PERFORM mlplat._bad_input('policy.steps', 'fractions must increase strictly', 'Sort the steps and drop repeats.');
    END IF;
    IF f > ceiling THEN
      PERFORM mlplat._bad_input('policy.steps', 'a step exceeds the ceiling', 'Lower the step or raise policy.ceiling.');
    END IF;
    prev := f;
  END LOOP;
  res := pg_catalog.jsonb_build_object(
    'steps', policy->'steps',
    'ceiling', ceiling,
    'min_samples', CASE WHEN policy ? 'min_samples'
                        THEN mlplat._json_num('policy.min_samples', policy->'min_samples', 1, 1000000000, true) ELSE 100 END,
    'window_seconds', CASE WHEN policy ? 'window_seconds'
                        THEN mlplat._json_num('policy.window_seconds', policy->'window_seconds', 5, 86400, true) ELSE 300 END,
    'max_error_rate', CASE WHEN policy ? 'max_error_rate'
                        THEN mlplat._json_num('policy.max_error_rate', policy->'max_error_rate', 0, 1, false) ELSE 0.01 END);
  IF policy ? 'max_p95_ms' THEN
    res := res || pg_catalog.jsonb_build_object('max_p95_ms',
      mlplat._json_num('policy.max_p95_ms', policy->'max_p95_ms', 0, 600000, false, true));
  END IF;
  IF policy ? 'max_error_rate_ratio' THEN
    res := res || pg_catalog.jsonb_build_object('max_error_rate_ratio',
      mlplat._json_num('policy.max_error_rate_ratio', policy->'max_error_rate_ratio', 1, 100, false));
  END IF;
  IF policy ? 'max_p95_ratio' THEN
    res := res || pg_catalog.jsonb_build_object('max_p95_ratio',
      mlplat._json_num('policy.max_p95_ratio', policy->'max_p95_ratio', 1, 100, false));
  END IF;
  RETURN res;
END $$;
