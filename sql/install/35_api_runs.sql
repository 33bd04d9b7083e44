-- 35_api_runs: runs and pipeline runs (Argo workflows), and their cancellation.

-- A JSON number within [lo, hi] (optionally integral).  Booleans, strings, null are rejected;
-- jsonb cannot hold NaN or Infinity, and their string spellings are not numbers.
CREATE FUNCTION mlplat._json_num(field text, val jsonb, lo numeric, hi numeric, integral boolean,
                                 lo_open boolean DEFAULT false)
RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
  n numeric;
BEGIN
  IF val IS NULL OR pg_catalog.jsonb_typeof(val) <> 'number' THEN
    PERFORM mlplat._bad_input(field, pg_catalog.format('must be a JSON number, not %s',
      coalesce(pg_catalog.jsonb_typeof(val), 'missing')), 'Write a bare number such as 1 or 0.5.');
  END IF;
  n := (val #>> '{}')::numeric;
  IF integral AND n <> pg_catalog.trunc(n) THEN
    PERFORM mlplat._bad_input(field, 'must be an integer', 'Write a whole number.');
  END IF;
  IF n > hi OR n < lo OR (lo_open AND n = lo) THEN
    PERFORM mlplat._bad_input(field, pg_catalog.format('must be in %s%s, %s]',
      CASE WHEN lo_open THEN '(' ELSE '[' END, lo, hi), 'Pick a value inside the range.');
  END IF;
  RETURN n;
END $$;

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

CREATE FUNCTION mlplat._json_strings(field text, val jsonb, max_items int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF val IS NULL THEN RETURN; END IF;
  IF pg_catalog.jsonb_typeof(val) <> 'array' OR pg_catalog.jsonb_array_length(val) > max_items
     OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(val) e
                WHERE pg_catalog.jsonb_typeof(e) <> 'string' OR pg_catalog.length(e #>> '{}') > 4096) THEN
    PERFORM mlplat._bad_input(field, pg_catalog.format('must be an array of at most %s strings of at most 4096 characters', max_items),
      'Write e.g. ["python", "train.py"].');
  END IF;
END $$;

-- Argo Workflows substitutes "{{...}}" in a template's image, command, args and env values
-- before the pod starts, and evaluates "{{=...}}" as an expression: a caller's string with
-- such syntax would be rewritten by Argo (workflow parameters, other steps' outputs) instead
-- of passed as written.  Argo has no escape for it, so it is refused.  val is a JSON string,
-- array of strings or object of strings; in its text "{{" can only come from a string.
CREATE FUNCTION mlplat._check_no_template(field text, val jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF val IS NOT NULL AND pg_catalog.strpos(val::text, '{{') > 0 THEN
    PERFORM mlplat._bad_input(field, 'must not contain "{{": Argo Workflows would read it as template syntax and substitute it',
      'Pass the text literally without "{{" (e.g. read values from the environment in the program instead).');
  END IF;
END $$;

-- One container spec: image, command, args, env, gpus, cpu, memory (+ extra allowed keys).
-- Returns its GPUs.
CREATE FUNCTION mlplat._check_container(field text, s jsonb, extra_keys text[] DEFAULT '{}') RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  k text;
  g int := 0;
BEGIN
  IF s IS NULL OR pg_catalog.jsonb_typeof(s) <> 'object' THEN
    PERFORM mlplat._bad_input(field, 'must be a JSON object', 'Pass e.g. {"image": "python:3.12", "command": ["python", "t.py"]}.');
  END IF;
  IF pg_catalog.octet_length(s::text) > 65536 THEN
    PERFORM mlplat._bad_input(field, 'is larger than 64 kB', 'Keep specs small; put data in the artifact store.');
  END IF;
  FOR k IN SELECT pg_catalog.jsonb_object_keys(s) LOOP
    IF NOT (k = ANY (ARRAY['image', 'command', 'args', 'env', 'gpus', 'cpu', 'memory'] || extra_keys)) THEN
      PERFORM mlplat._bad_input(field, pg_catalog.format('unknown key "%s"', pg_catalog.left(k, 64)),
        pg_catalog.format('Allowed keys: %s.', pg_catalog.array_to_string(
          ARRAY['image', 'command', 'args', 'env', 'gpus', 'cpu', 'memory'] || extra_keys, ', ')));
    END IF;
  END LOOP;
  IF pg_catalog.jsonb_typeof(s->'image') IS DISTINCT FROM 'string'
     OR (s->>'image') !~ '^[^[:space:][:cntrl:]]+$' OR pg_catalog.length(s->>'image') > 512 THEN
    PERFORM mlplat._bad_input(field || '.image', 'is required: a container image reference of 1 to 512 characters without spaces',
      'Pass e.g. "ghcr.io/acme/train:1.4".');
  END IF;
  PERFORM mlplat._json_strings(field || '.command', s->'command', 64);
  PERFORM mlplat._json_strings(field || '.args', s->'args', 256);
  PERFORM mlplat._check_env(field || '.env', s->'env');
  PERFORM mlplat._check_no_template(field || '.image', s->'image');
  PERFORM mlplat._check_no_template(field || '.command', s->'command');
  PERFORM mlplat._check_no_template(field || '.args', s->'args');
  PERFORM mlplat._check_no_template(field || '.env', s->'env');
  IF s ? 'gpus' THEN
    g := mlplat._json_num(field || '.gpus', s->'gpus', 0, 64, true);
  END IF;
  FOREACH k IN ARRAY ARRAY['cpu', 'memory'] LOOP
    IF s ? k AND NOT (pg_catalog.jsonb_typeof(s->k) = 'string'
                      AND (s->>k) ~ '^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$'
                      AND pg_catalog.length(s->>k) <= 32) THEN
      PERFORM mlplat._bad_input(field || '.' || k, 'must be a Kubernetes quantity string such as "2", "500m" or "8Gi"',
        'Quote the quantity.');
    END IF;
  END LOOP;
  RETURN g;
END $$;

-- Validate a pipeline's steps: unique names, known dependencies, no cycle (the cycle is
-- reported).  Returns the total GPUs of all steps (the quota reservation).
CREATE FUNCTION mlplat._check_steps(steps jsonb) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  st jsonb;
  i int := 0;
  total int := 0;
  names text[] := '{}';
  deps text[];
  dep text;
  done text[] := '{}';
  progress boolean;
  cur text;
  path text[];
BEGIN
  IF steps IS NULL OR pg_catalog.jsonb_typeof(steps) <> 'array'
     OR pg_catalog.jsonb_array_length(steps) NOT BETWEEN 1 AND 64 THEN
    PERFORM mlplat._bad_input('steps', 'must be a JSON array of 1 to 64 step objects',
      'Pass e.g. [{"name": "prep", "image": "..."}, {"name": "train", "image": "...", "depends_on": ["prep"]}].');
  END IF;
  FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(steps) e LOOP
    i := i + 1;
    total := total + mlplat._check_container(pg_catalog.format('steps[%s]', i), st, ARRAY['name', 'depends_on']);
    IF pg_catalog.jsonb_typeof(st->'name') IS DISTINCT FROM 'string' THEN
      PERFORM mlplat._bad_input(pg_catalog.format('steps[%s].name', i), 'is required: a DNS-1123 label', 'Name every step.');
    END IF;
    PERFORM mlplat._check_label(pg_catalog.format('steps[%s].name', i), st->>'name', 63);
    IF (st->>'name') = ANY (names) THEN
      PERFORM mlplat._bad_input('steps', pg_catalog.format('step name "%s" is used twice', st->>'name'),
        'Step names must be unique within a pipeline.');
    END IF;
    names := names || (st->>'name');
    PERFORM mlplat._json_strings(pg_catalog.format('steps[%s].depends_on', i), st->'depends_on', 64);
  END LOOP;
  -- dependencies name existing steps
  FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(steps) e LOOP
    FOR dep IN SELECT pg_catalog.jsonb_array_elements_text(coalesce(st->'depends_on', '[]')) LOOP
      IF NOT dep = ANY (names) THEN
        PERFORM mlplat._bad_input('steps', pg_catalog.format('step "%s" depends on unknown step "%s"',
          st->>'name', pg_catalog.left(dep, 64)), 'depends_on lists names of other steps in the same pipeline.');
      END IF;
    END LOOP;
  END LOOP;
  -- Kahn: repeatedly take steps whose dependencies are all done.
  LOOP
    progress := false;
    FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(steps) e LOOP
      CONTINUE WHEN (st->>'name') = ANY (done);
      deps := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(st->'depends_on', '[]')));
      IF deps <@ done THEN
        done := done || (st->>'name');
        progress := true;
      END IF;
    END LOOP;
    EXIT WHEN NOT progress;
  END LOOP;
  IF pg_catalog.cardinality(done) < pg_catalog.cardinality(names) THEN
    -- Every step left has a dependency that is also left: walk them until a step repeats.
    SELECT n INTO cur FROM pg_catalog.unnest(names) WITH ORDINALITY AS u(n, o) WHERE NOT n = ANY (done) ORDER BY o LIMIT 1;
    path := ARRAY[cur];
    LOOP
      SELECT d INTO cur
      FROM pg_catalog.jsonb_array_elements(steps) e,
           pg_catalog.jsonb_array_elements_text(coalesce(e->'depends_on', '[]')) WITH ORDINALITY AS x(d, o)
      WHERE e->>'name' = cur AND NOT d = ANY (done) ORDER BY o LIMIT 1;
      EXIT WHEN cur = ANY (path);
      path := path || cur;
    END LOOP;
    path := path[pg_catalog.array_position(path, cur):] || cur;
    PERFORM mlplat._bad_input('steps', pg_catalog.format('dependencies form a cycle: %s',
      pg_catalog.array_to_string(path, ' -> ')), 'A pipeline is a DAG: remove one of these dependencies.');
  END IF;
  RETURN total;
END $$;

-- A run or a pipeline started for start_run or start_pipeline_run (api: their call).
CREATE FUNCTION mlplat._start_run(api mlplat.api_call, p_name text, p_kind text, p_spec jsonb, p_gpus int,
                                  p_steps jsonb, p_request jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted;
  p mlplat.projects;
  u mlplat.runs;
  st jsonb;
  i int := 0;
BEGIN
  r := mlplat._api_claim(api, p_request);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  -- validation that needs no data happened in the caller; now state
  p := mlplat._lock_project(api.pid, p_gpus > 0, api.action);
  r := (pg_catalog.gen_random_uuid(), p_kind, NULL, NULL, NULL, false)::mlplat.accepted;
  SELECT * INTO u FROM mlplat.runs x WHERE x.project_id = api.pid AND x.name = p_name;
  IF u.id IS NOT NULL THEN
    IF u.kind = p_kind AND u.spec = p_spec THEN
      r.entity_id := u.id; r.status := u.status;   -- the same run again: nothing to do
      RETURN mlplat._api_keep(api, r);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42710',
      MESSAGE = pg_catalog.format('run "%s" already exists in project "%s" with a different spec', p_name, api.project),
      DETAIL = 'Run names are unique within a project and runs are immutable.',
      HINT = 'Choose a new run name.';
  END IF;
  IF p_gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, p_gpus, NULL);
  END IF;
  INSERT INTO mlplat.runs (project_id, name, kind, spec, gpus, created_by, traceparent)
  VALUES (api.pid, p_name, p_kind, p_spec, p_gpus, mlplat._actor(), api.tp)
  ON CONFLICT ON CONSTRAINT runs_project_id_name_key DO NOTHING
  RETURNING * INTO u;
  IF u.id IS NULL THEN
    PERFORM mlplat._cas_lost('run', p_name);   -- a concurrent start of the same name won
  END IF;
  IF p_steps IS NOT NULL THEN
    FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(p_steps) e LOOP
      i := i + 1;
      INSERT INTO mlplat.run_steps (run_id, project_id, name, ordinal, spec, depends_on)
      VALUES (u.id, api.pid, st->>'name', i, st - 'name' - 'depends_on',
              ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(st->'depends_on', '[]'))));
    END LOOP;
  END IF;
  r.entity_id := u.id; r.status := u.status;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('run', p_name, 'gpus', p_gpus), 'runs');
END $$;

CREATE FUNCTION mlplat.start_run(project text, run text, spec jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('start_run', start_run.project, start_run.idempotency_key);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_run.idempotency_key);
  PERFORM mlplat._check_label('run', start_run.run, 50);
  g := mlplat._check_container('spec', start_run.spec);
  RETURN mlplat._start_run(api, start_run.run, 'run', start_run.spec, g, NULL,
           pg_catalog.jsonb_build_array(start_run.project, start_run.run, start_run.spec));
END $$;

CREATE FUNCTION mlplat.start_pipeline_run(project text, name text, steps jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('start_pipeline_run', start_pipeline_run.project,
                                           start_pipeline_run.idempotency_key);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_pipeline_run.idempotency_key);
  PERFORM mlplat._check_label('name', start_pipeline_run.name, 50);
  g := mlplat._check_steps(start_pipeline_run.steps);
  RETURN mlplat._start_run(api, start_pipeline_run.name, 'pipeline',
           pg_catalog.jsonb_build_object('steps', start_pipeline_run.steps), g, start_pipeline_run.steps,
           pg_catalog.jsonb_build_array(start_pipeline_run.project, start_pipeline_run.name, start_pipeline_run.steps));
END $$;

-- The run of this name in the project, or 42704 (as _find_deployment for deployments).
CREATE FUNCTION mlplat._find_run(p_project_id bigint, p_run text)
RETURNS mlplat.runs LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.runs x WHERE x.project_id = p_project_id AND x.name = p_run),
                       'run', p_run, 'See mlplat.run_status for the project''s runs.');
END $$;

CREATE FUNCTION mlplat.cancel_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('cancel_run', cancel_run.project);
  -- locked and read again: a concurrent cancel finds this one's CANCEL_REQUESTED
  seen mlplat.runs := mlplat._lock_again(mlplat._find_run(api.pid, cancel_run.run));
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), seen.kind, seen.id, NULL, seen.status, false)::mlplat.accepted;
BEGIN
  IF seen.status IN ('CANCEL_REQUESTED', 'CANCELLED') THEN
    RETURN r;      -- already asked for
  END IF;
  IF seen.status IN ('SUCCEEDED', 'FAILED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'cancel_run', 'The run has already finished.');
  END IF;
  UPDATE mlplat.runs x
  SET status = 'CANCEL_REQUESTED', status_reason = 'cancel requested', generation = x.generation + 1,
      row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(), traceparent = api.tp,
      updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  r.status := 'CANCEL_REQUESTED';
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('from', seen.status), 'runs');
END $$;
