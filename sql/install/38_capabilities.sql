-- 38_capabilities: the composition contract and runtime capability descriptors (issue 14).
--
-- Builders, caches and orchestrators (LLM Compressor, ModelOpt, LMCache, llm-d, ...) are
-- components registered by administrators: mlplat stores their contract (image, tool,
-- version, what they own), never their objects.  Runtime arguments for an optimized
-- artifact compile only from exact capability descriptors that a test in this repository
-- checks (LOCAL) or that a signed measurement backs (REAL); anything unknown, unqualified
-- or conflicting fails closed.  One component owns a serving graph's scaling and routing:
-- while an orchestrator owns routing, mlplat's rollouts of that deployment are refused.

CREATE TABLE mlplat.components (
  name             text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  role             text NOT NULL CHECK (role IN ('builder', 'cache', 'orchestrator')),
  contract_version int NOT NULL DEFAULT 1 CHECK (contract_version = 1),
  spec             jsonb NOT NULL,
  owns             text[] NOT NULL DEFAULT '{}' CHECK (owns <@ ARRAY['scaling', 'routing']),
  regression_test  text NOT NULL,
  registered_by    text NOT NULL,
  at               timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.components IS
  'External builders, caches and orchestrators behind the composition contract (administrators; immutable).';

CREATE TABLE mlplat.serving_owners (
  deployment_id bigint NOT NULL REFERENCES mlplat.deployments (id),
  project_id    bigint NOT NULL REFERENCES mlplat.projects (id),
  domain        text NOT NULL CHECK (domain IN ('scaling', 'routing')),
  component     text NOT NULL REFERENCES mlplat.components (name),
  set_by        text NOT NULL,
  set_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (deployment_id, domain)
);
COMMENT ON TABLE mlplat.serving_owners IS
  'Domains of a deployment owned by an external orchestrator instead of mlplat (no row: mlplat owns it).';

CREATE TABLE mlplat.capability_descriptors (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  runtime         text NOT NULL,
  runtime_version text NOT NULL,
  model_family    text NOT NULL,
  "precision"      text NOT NULL,
  accelerator     text NOT NULL,
  mechanism       text NOT NULL,
  args            jsonb NOT NULL,
  env             jsonb NOT NULL DEFAULT '{}',
  conflicts       text[] NOT NULL DEFAULT '{}',
  qualification   text NOT NULL CHECK (qualification IN ('UNQUALIFIED', 'LOCAL', 'REAL')),
  regression_test text CHECK (regression_test IS NOT NULL OR qualification = 'UNQUALIFIED'),
  registered_by   text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (runtime, runtime_version, model_family, precision, accelerator, mechanism)
);
COMMENT ON TABLE mlplat.capability_descriptors IS
  'Exact runtime/version/family/precision/accelerator/mechanism tuples and the arguments they compile to.';

SELECT mlplat._append_only('components');

-- ---------------------------------------------------------------- registration

CREATE FUNCTION mlplat._check_mechanism(field text, m text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF m IS NULL OR NOT (m = 'none' OR m ~ '^(quantization|speculative|engine|kv-cache):[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$'
                       OR mlplat.is_dns_label(m, 63)) THEN
    PERFORM mlplat._bad_input(field, 'must be none, <class>:<name> (class quantization, speculative, engine, kv-cache) or a bare label',
      'E.g. "quantization:fp8", "kv-cache:lmcache", "prefix-caching".');
  END IF;
END $$;

CREATE FUNCTION mlplat._check_regression_test(field text, t text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF t IS NULL OR t !~ '^[a-z]+:[A-Za-z0-9_./-]{1,200}$' THEN
    PERFORM mlplat._bad_input(field, 'must name a test the runner runs, as <suite>:<name> (e.g. regress:capabilities)',
      'LOCAL and REAL descriptors and every component name the test that checks them.');
  END IF;
END $$;

CREATE FUNCTION mlplat.register_component(name text, role text, spec jsonb, regression_test text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'component', NULL, NULL, 'REGISTERED', false)::mlplat.accepted;
  api mlplat.api_call := mlplat._api_platform('register_component');
  s jsonb := register_component.spec;
  owns text[] := '{}';
  cur mlplat.components;
  added boolean;
BEGIN
  PERFORM mlplat._check_label('name', register_component.name, 63);
  IF register_component.role IS NULL OR register_component.role NOT IN ('builder', 'cache', 'orchestrator') THEN
    PERFORM mlplat._bad_input('role', 'must be builder, cache or orchestrator', 'See docs/campaigns.md, composition contract.');
  END IF;
  PERFORM mlplat._check_regression_test('regression_test', register_component.regression_test);
  IF register_component.role = 'builder' THEN
    PERFORM mlplat._json_closed('spec', s, ARRAY['image', 'tool', 'tool_version', 'kinds', 'algorithms'],
                                ARRAY['image', 'tool', 'tool_version', 'kinds', 'algorithms']);
    -- the same rules as a plan's builder (digest-pinned image, exact version)
    PERFORM mlplat._campaign_plan('spec', pg_catalog.jsonb_build_object('kind', 'checkpoint',
      'builder', pg_catalog.jsonb_build_object('image', s->'image', 'tool', s->'tool', 'tool_version', s->'tool_version'),
      'algorithm', 'x', 'precision', 'bf16', 'config', '{}'::jsonb,
      'hardware', '{"accelerator": "x", "arch": "sm_90", "gpus": 1}'::jsonb, 'spdx', 'MIT', 'max_seconds', 60));
    PERFORM mlplat._json_strings('spec.kinds', s->'kinds', 3);
    PERFORM mlplat._json_strings('spec.algorithms', s->'algorithms', 64);
  ELSIF register_component.role = 'cache' THEN
    PERFORM mlplat._json_closed('spec', s, ARRAY['capabilities'], ARRAY['capabilities']);
    PERFORM mlplat._json_strings('spec.capabilities', s->'capabilities', 64);
  ELSE
    PERFORM mlplat._json_closed('spec', s, ARRAY['capabilities', 'owns'], ARRAY['capabilities', 'owns']);
    PERFORM mlplat._json_strings('spec.capabilities', s->'capabilities', 64);
    PERFORM mlplat._json_strings('spec.owns', s->'owns', 2);
    owns := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(s->'owns'));
    IF NOT owns <@ ARRAY['scaling', 'routing'] THEN
      PERFORM mlplat._bad_input('spec.owns', 'may only list scaling and routing', 'The domains the orchestrator may own.');
    END IF;
  END IF;
  INSERT INTO mlplat.components (name, role, spec, owns, regression_test, registered_by)
  VALUES (register_component.name, register_component.role, s, owns, register_component.regression_test, mlplat._actor())
  ON CONFLICT ON CONSTRAINT components_pkey DO NOTHING RETURNING * INTO cur;
  added := FOUND;
  IF NOT added THEN
    SELECT * INTO cur FROM mlplat.components x WHERE x.name = register_component.name;
  END IF;
  RETURN mlplat._registered(api, r, added,
    (cur.role, cur.spec, cur.regression_test) IS NOT DISTINCT FROM (register_component.role, s, register_component.regression_test),
    ARRAY[pg_catalog.format('component "%s" already exists with a different contract', cur.name),
          'Components are immutable.', 'Register the new version under a new name.'],
    pg_catalog.jsonb_build_object('name', cur.name, 'role', cur.role, 'spec', cur.spec));
END $$;

CREATE FUNCTION mlplat.register_capability(descriptor jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  d jsonb := register_capability.descriptor;
  f text;
  q text;
  m text;
  cur mlplat.capability_descriptors;
  tp text := mlplat._traceparent();
BEGIN
  PERFORM mlplat._require_admin('register_capability');
  PERFORM mlplat._json_closed('descriptor', d,
    ARRAY['runtime', 'runtime_version', 'model_family', 'precision', 'accelerator', 'mechanism', 'args', 'env',
          'conflicts', 'qualification', 'regression_test'],
    ARRAY['runtime', 'runtime_version', 'model_family', 'precision', 'accelerator', 'mechanism', 'args', 'qualification']);
  FOREACH f IN ARRAY ARRAY['runtime', 'model_family', 'accelerator'] LOOP
    PERFORM mlplat._json_label('descriptor.' || f, d->f, 63);
  END LOOP;
  IF pg_catalog.jsonb_typeof(d->'runtime_version') IS DISTINCT FROM 'string'
     OR (d->>'runtime_version') !~ '^[0-9]+(\.[0-9]+){1,3}([-+.][0-9A-Za-z.-]+)?$' THEN
    PERFORM mlplat._bad_input('descriptor.runtime_version', 'must be an exact version', 'E.g. "0.8.4"; ranges are refused.');
  END IF;
  IF pg_catalog.jsonb_typeof(d->'precision') IS DISTINCT FROM 'string'
     OR NOT (d->>'precision') IN ('bf16', 'fp16', 'fp8', 'int8', 'w8a8', 'w4a16', 'w4a8', 'nvfp4') THEN
    PERFORM mlplat._bad_input('descriptor.precision', 'must be one of bf16, fp16, fp8, int8, w8a8, w4a16, w4a8, nvfp4', 'The served precision.');
  END IF;
  IF pg_catalog.jsonb_typeof(d->'mechanism') IS DISTINCT FROM 'string' THEN
    PERFORM mlplat._bad_input('descriptor.mechanism', 'must be a JSON string', 'E.g. "none" or "quantization:fp8".');
  END IF;
  PERFORM mlplat._check_mechanism('descriptor.mechanism', d->>'mechanism');
  PERFORM mlplat._json_strings('descriptor.args', d->'args', 64);
  IF d->'args' IS NULL OR pg_catalog.jsonb_typeof(d->'args') <> 'array' THEN
    PERFORM mlplat._bad_input('descriptor.args', 'must be an array of at most 64 strings', 'E.g. ["--quantization", "fp8"].');
  END IF;
  PERFORM mlplat._check_env('descriptor.env', coalesce(d->'env', '{}'));
  PERFORM mlplat._json_strings('descriptor.conflicts', d->'conflicts', 64);
  FOR m IN SELECT pg_catalog.jsonb_array_elements_text(coalesce(d->'conflicts', '[]')) LOOP
    PERFORM mlplat._check_mechanism('descriptor.conflicts', m);
  END LOOP;
  q := d->>'qualification';
  IF q IS NULL OR q NOT IN ('UNQUALIFIED', 'LOCAL', 'REAL') THEN
    PERFORM mlplat._bad_input('descriptor.qualification', 'must be UNQUALIFIED, LOCAL or REAL',
      'LOCAL: a test here compiles and checks the exact tuple; REAL: also a signed measurement on the hardware.');
  END IF;
  IF q <> 'UNQUALIFIED' OR d ? 'regression_test' THEN
    IF pg_catalog.jsonb_typeof(d->'regression_test') IS DISTINCT FROM 'string' THEN
      PERFORM mlplat._bad_input('descriptor.regression_test', 'is required unless UNQUALIFIED', 'Name the test that checks the tuple.');
    END IF;
    PERFORM mlplat._check_regression_test('descriptor.regression_test', d->>'regression_test');
  END IF;
  INSERT INTO mlplat.capability_descriptors (runtime, runtime_version, model_family, precision, accelerator, mechanism,
                                             args, env, conflicts, qualification, regression_test, registered_by)
  VALUES (d->>'runtime', d->>'runtime_version', d->>'model_family', d->>'precision', d->>'accelerator', d->>'mechanism',
          d->'args', coalesce(d->'env', '{}'),
          ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(d->'conflicts', '[]'))), q, d->>'regression_test',
          mlplat._actor())
  ON CONFLICT (runtime, runtime_version, model_family, precision, accelerator, mechanism) DO NOTHING
  RETURNING * INTO cur;
  IF cur.id IS NULL THEN
    SELECT * INTO cur FROM mlplat.capability_descriptors x
     WHERE (x.runtime, x.runtime_version, x.model_family, x.precision, x.accelerator, x.mechanism)
         = (d->>'runtime', d->>'runtime_version', d->>'model_family', d->>'precision', d->>'accelerator', d->>'mechanism');
    IF (cur.args, cur.env, cur.conflicts, cur.qualification, cur.regression_test) IS DISTINCT FROM
       (d->'args', coalesce(d->'env', '{}'), ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(d->'conflicts', '[]'))),
        q, d->>'regression_test') THEN
      RAISE EXCEPTION USING ERRCODE = '42710',
        MESSAGE = pg_catalog.format('capability descriptor %s already exists with different content', cur.id),
        DETAIL = 'The tuple (runtime, runtime_version, model_family, precision, accelerator, mechanism) is its identity.',
        HINT = 'Change its qualification with mlplat.set_capability_qualification(); other content needs a new runtime version.';
    END IF;
    RETURN cur.id;
  END IF;
  PERFORM mlplat._audit('register_capability', NULL, NULL, 'capability_descriptor', cur.id, pg_catalog.gen_random_uuid(), tp,
    pg_catalog.to_jsonb(cur) - 'created_at');
  RETURN cur.id;
END $$;

CREATE FUNCTION mlplat.set_capability_qualification(id bigint, qualification text, regression_test text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'capability_descriptor', set_capability_qualification.id, NULL,
                        set_capability_qualification.qualification, false)::mlplat.accepted;
  api mlplat.api_call := mlplat._api_platform('set_capability_qualification');
  cur mlplat.capability_descriptors;
BEGIN
  IF set_capability_qualification.qualification IS NULL
     OR set_capability_qualification.qualification NOT IN ('UNQUALIFIED', 'LOCAL', 'REAL') THEN
    PERFORM mlplat._bad_input('qualification', 'must be UNQUALIFIED, LOCAL or REAL', 'See docs/campaigns.md.');
  END IF;
  IF set_capability_qualification.qualification <> 'UNQUALIFIED' OR set_capability_qualification.regression_test IS NOT NULL THEN
    PERFORM mlplat._check_regression_test('regression_test', set_capability_qualification.regression_test);
  END IF;
  SELECT * INTO cur FROM mlplat.capability_descriptors x WHERE x.id = set_capability_qualification.id FOR UPDATE;
  IF cur.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('capability descriptor %s does not exist', set_capability_qualification.id),
      HINT = 'See mlplat.capability_descriptors.';
  END IF;
  UPDATE mlplat.capability_descriptors x SET qualification = set_capability_qualification.qualification,
         regression_test = set_capability_qualification.regression_test WHERE x.id = cur.id;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('from', cur.qualification, 'to', set_capability_qualification.qualification,
                                  'regression_test', set_capability_qualification.regression_test));
END $$;

-- ---------------------------------------------------------------- compile

CREATE FUNCTION mlplat._cannot_compile(p_code text, p_detail text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = 'cannot compile runtime arguments: ' || p_code,
    DETAIL = pg_catalog.format('Rule %s: %s', p_code, p_detail),
    HINT = 'Only exact, LOCAL or REAL qualified capability descriptors compile (mlplat.capability_descriptors).';
END $$;

CREATE FUNCTION mlplat.compile_runtime_args(runtime text, runtime_version text, model_family text, "precision" text,
                                            accelerator text, mechanisms text[])
RETURNS jsonb LANGUAGE plpgsql STABLE SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  mechs text[] := CASE WHEN coalesce(pg_catalog.cardinality(compile_runtime_args.mechanisms), 0) = 0 THEN ARRAY['none']
                       ELSE compile_runtime_args.mechanisms END;
  ds mlplat.capability_descriptors[] := '{}';
  d mlplat.capability_descriptors;
  e mlplat.capability_descriptors;
  m text;
  args jsonb := '[]';
  env jsonb := '{}';
  kv record;
  weakest text := 'REAL';
  ids jsonb := '[]';
  code text;     -- the first rule broken, and what broke it: raised once, after the checks
  detail text;
BEGIN
  <<compile>>
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime) THEN
      code := 'UNKNOWN_RUNTIME'; detail := pg_catalog.format('no descriptor for runtime %s', compile_runtime_args.runtime);
      EXIT compile;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime
                     AND x.runtime_version = compile_runtime_args.runtime_version) THEN
      code := 'UNKNOWN_RUNTIME_VERSION'; detail := pg_catalog.format('no descriptor for %s %s (versions match exactly)',
        compile_runtime_args.runtime, compile_runtime_args.runtime_version);
      EXIT compile;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime
                     AND x.runtime_version = compile_runtime_args.runtime_version AND x.model_family = compile_runtime_args.model_family) THEN
      code := 'UNKNOWN_MODEL_FAMILY'; detail := pg_catalog.format('no descriptor for model family %s on %s %s',
        compile_runtime_args.model_family, compile_runtime_args.runtime, compile_runtime_args.runtime_version);
      EXIT compile;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime
                     AND x.runtime_version = compile_runtime_args.runtime_version AND x.model_family = compile_runtime_args.model_family
                     AND x.precision = compile_runtime_args.precision) THEN
      code := 'UNKNOWN_PRECISION'; detail := pg_catalog.format('no descriptor for precision %s of %s on %s %s',
        compile_runtime_args.precision, compile_runtime_args.model_family, compile_runtime_args.runtime, compile_runtime_args.runtime_version);
      EXIT compile;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime
                     AND x.runtime_version = compile_runtime_args.runtime_version AND x.model_family = compile_runtime_args.model_family
                     AND x.precision = compile_runtime_args.precision AND x.accelerator = compile_runtime_args.accelerator) THEN
      code := 'UNKNOWN_ACCELERATOR'; detail := pg_catalog.format('no descriptor for accelerator %s (%s %s, %s, %s)',
        compile_runtime_args.accelerator, compile_runtime_args.runtime, compile_runtime_args.runtime_version,
        compile_runtime_args.model_family, compile_runtime_args.precision);
      EXIT compile;
    END IF;
    FOREACH m IN ARRAY mechs LOOP
      SELECT * INTO d FROM mlplat.capability_descriptors x WHERE x.runtime = compile_runtime_args.runtime
         AND x.runtime_version = compile_runtime_args.runtime_version AND x.model_family = compile_runtime_args.model_family
         AND x.precision = compile_runtime_args.precision AND x.accelerator = compile_runtime_args.accelerator AND x.mechanism = m;
      IF d.id IS NULL THEN
        code := 'UNKNOWN_MECHANISM'; detail := pg_catalog.format('no descriptor for mechanism %s of this exact tuple', m);
        EXIT compile;
      END IF;
      ds := ds || d;
    END LOOP;
    FOREACH d IN ARRAY ds LOOP
      IF d.qualification = 'UNQUALIFIED' THEN
        code := 'UNQUALIFIED_CAPABILITY'; detail := pg_catalog.format('descriptor %s (%s) is UNQUALIFIED', d.id, d.mechanism);
        EXIT compile;
      END IF;
      IF d.qualification = 'LOCAL' THEN weakest := 'LOCAL'; END IF;
    END LOOP;
    -- every pair once: the same mechanism twice, two of one class, or listed in the other's conflicts
    FOR i IN 1 .. pg_catalog.cardinality(ds) LOOP
      FOR j IN i + 1 .. pg_catalog.cardinality(ds) LOOP
        d := ds[i]; e := ds[j];
        IF d.id = e.id OR (pg_catalog.strpos(d.mechanism, ':') > 0
                           AND pg_catalog.split_part(d.mechanism, ':', 1) = pg_catalog.split_part(e.mechanism, ':', 1))
           OR e.mechanism = ANY (d.conflicts) OR d.mechanism = ANY (e.conflicts) THEN
          code := 'CONFLICTING_MECHANISMS'; detail := pg_catalog.format('%s and %s cannot be combined', d.mechanism, e.mechanism);
          EXIT compile;
        END IF;
      END LOOP;
    END LOOP;
    FOREACH d IN ARRAY ds LOOP
      args := args || d.args;
      ids := ids || pg_catalog.to_jsonb(d.id);
      FOR kv IN SELECT * FROM pg_catalog.jsonb_each(d.env) LOOP
        IF env ? kv.key AND env->kv.key <> kv.value THEN
          code := 'CONFLICTING_MECHANISMS'; detail := pg_catalog.format('two descriptors set %s differently', kv.key);
          EXIT compile;
        END IF;
        env := env || pg_catalog.jsonb_build_object(kv.key, kv.value);
      END LOOP;
    END LOOP;
  END compile;
  -- raised here, not by _cannot_compile: this function runs as the caller, who may not call
  -- internal helpers
  IF code IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'cannot compile runtime arguments: ' || code,
      DETAIL = pg_catalog.format('Rule %s: %s', code, detail),
      HINT = 'Only exact, LOCAL or REAL qualified capability descriptors compile (mlplat.capability_descriptors).';
  END IF;
  RETURN pg_catalog.jsonb_build_object('runtime', compile_runtime_args.runtime, 'runtime_version', compile_runtime_args.runtime_version,
    'args', args, 'env', env,
    'descriptors', ids,
    'qualification', weakest);
END $$;

CREATE FUNCTION mlplat.compile_artifact_args(project text, artifact_id bigint, runtime text, runtime_version text,
                                             accelerator text, extra_mechanisms text[] DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', compile_artifact_args.project);
  a mlplat.optimized_artifacts;
  fam text;
  mech text;
  out jsonb;
BEGIN
  a := mlplat._find_artifact(pid, compile_artifact_args.artifact_id);
  SELECT c.model_family INTO fam FROM mlplat.campaigns c WHERE c.id = a.campaign_id;
  IF (a.hardware->>'accelerator') IS DISTINCT FROM compile_artifact_args.accelerator THEN
    PERFORM mlplat._cannot_compile('HARDWARE_MISMATCH', pg_catalog.format('the artifact was built for %s, not %s',
      a.hardware->>'accelerator', compile_artifact_args.accelerator));
  END IF;
  mech := CASE a.kind WHEN 'checkpoint' THEN CASE WHEN a.precision IN ('bf16', 'fp16') THEN NULL ELSE 'quantization:' || a.precision END
                      WHEN 'speculator' THEN 'speculative:' || a.algorithm
                      ELSE 'engine:' || a.tool END;
  out := mlplat.compile_runtime_args(compile_artifact_args.runtime, compile_artifact_args.runtime_version, fam, a.precision,
           compile_artifact_args.accelerator,
           CASE WHEN mech IS NULL THEN '{}'::text[] ELSE ARRAY[mech] END || coalesce(compile_artifact_args.extra_mechanisms, '{}'));
  -- the artifact's own location replaces ${artifact_uri}
  RETURN pg_catalog.jsonb_set(out, '{args}', pg_catalog.replace((out->'args')::text, '${artifact_uri}', a.output_uri)::jsonb);
END $$;

-- ---------------------------------------------------------------- serving owners

CREATE FUNCTION mlplat.set_serving_owner(project text, deployment text, domain text, component text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('set_serving_owner', set_serving_owner.project);
  r mlplat.accepted;
  d mlplat.deployments;
  cur mlplat.serving_owners;
  comp mlplat.components;
BEGIN
  IF set_serving_owner.domain IS NULL OR set_serving_owner.domain NOT IN ('scaling', 'routing') THEN
    PERFORM mlplat._bad_input('domain', 'must be scaling or routing', 'The domain an orchestrator takes over.');
  END IF;
  d := mlplat._find_deployment(api.pid, set_serving_owner.deployment);
  PERFORM 1 FROM mlplat.deployments x WHERE x.id = d.id FOR NO KEY UPDATE;
  r := (pg_catalog.gen_random_uuid(), 'serving_owner', d.id, NULL, coalesce(set_serving_owner.component, 'mlplat'), false)::mlplat.accepted;
  SELECT * INTO cur FROM mlplat.serving_owners x WHERE x.deployment_id = d.id AND x.domain = set_serving_owner.domain;
  IF set_serving_owner.component IS NULL THEN
    IF cur.deployment_id IS NULL THEN RETURN r; END IF;
    DELETE FROM mlplat.serving_owners x WHERE x.deployment_id = d.id AND x.domain = set_serving_owner.domain;
  ELSE
    SELECT * INTO comp FROM mlplat.components x WHERE x.name = set_serving_owner.component;
    IF comp.name IS NULL OR comp.role <> 'orchestrator' OR NOT set_serving_owner.domain = ANY (comp.owns) THEN
      RAISE EXCEPTION USING ERRCODE = '42704',
        MESSAGE = pg_catalog.format('no orchestrator component "%s" that owns %s', pg_catalog.left(set_serving_owner.component, 64),
                                    set_serving_owner.domain),
        HINT = 'See mlplat.components (role orchestrator, owns).';
    END IF;
    IF cur.component = comp.name THEN RETURN r; END IF;
    IF cur.deployment_id IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = pg_catalog.format('deployment "%s" %s is owned by component "%s": set_serving_owner is not possible',
                                    d.name, set_serving_owner.domain, cur.component),
        DETAIL = 'One component owns a domain of a serving graph at a time.',
        HINT = 'Give the domain back to mlplat first (component NULL), then hand it to the other component.';
    END IF;
    INSERT INTO mlplat.serving_owners (deployment_id, project_id, domain, component, set_by)
    VALUES (d.id, api.pid, set_serving_owner.domain, comp.name, mlplat._actor());
  END IF;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('deployment', d.name, 'domain', set_serving_owner.domain, 'from', coalesce(cur.component, 'mlplat'),
                                  'to', coalesce(set_serving_owner.component, 'mlplat')));
END $$;

-- While an orchestrator owns a deployment's routing, mlplat never moves its traffic: a new
-- rollout (INSERT) and a promote or abort request (requested_action set) are refused.  A
-- trigger, so every path that writes rollouts is covered, whichever function it is.
CREATE FUNCTION mlplat._serving_owner_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  owner text;
  dname text;
  action text;
BEGIN
  IF TG_TABLE_NAME = 'rollouts' THEN
    IF TG_OP = 'UPDATE' AND NEW.requested_action IS NOT DISTINCT FROM OLD.requested_action THEN
      RETURN NEW;
    END IF;
    SELECT o.component INTO owner FROM mlplat.serving_owners o WHERE o.deployment_id = NEW.deployment_id AND o.domain = 'routing';
    action := CASE WHEN TG_OP = 'INSERT' THEN 'start_rollout'
                   WHEN NEW.requested_action = 'PROMOTE' THEN 'promote_rollout' ELSE 'abort_rollout' END;
  ELSE
    -- deployment_revisions: a new revision may not change the replica bounds of an externally scaled deployment
    SELECT o.component INTO owner FROM mlplat.serving_owners o WHERE o.deployment_id = NEW.deployment_id AND o.domain = 'scaling';
    -- compared with the revision before this one (deploy moves desired_revision in the same
    -- statement that inserts the revision, so the deployment row may already name NEW)
    IF owner IS NULL OR NOT EXISTS (
         SELECT 1 FROM (SELECT dr.intent FROM mlplat.deployment_revisions dr
                         WHERE dr.deployment_id = NEW.deployment_id AND dr.revision < NEW.revision
                         ORDER BY dr.revision DESC LIMIT 1) prev
          WHERE (prev.intent->'min_replicas') IS DISTINCT FROM (NEW.intent->'min_replicas')
             OR (prev.intent->'max_replicas') IS DISTINCT FROM (NEW.intent->'max_replicas')) THEN
      RETURN NEW;
    END IF;
    action := 'deploy';
  END IF;
  IF owner IS NULL THEN
    RETURN NEW;
  END IF;
  SELECT d.name INTO dname FROM mlplat.deployments d WHERE d.id = NEW.deployment_id;
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('deployment "%s" %s is owned by component "%s": %s is not possible', dname,
                                CASE WHEN TG_TABLE_NAME = 'rollouts' THEN 'routing' ELSE 'scaling' END, owner, action),
    DETAIL = 'One component owns scaling and routing mutations for a serving graph.',
    HINT = 'Use the orchestrator, or give the domain back to mlplat with mlplat.set_serving_owner(..., NULL).';
END $$;
CREATE TRIGGER rollouts_serving_owner BEFORE INSERT OR UPDATE ON mlplat.rollouts
  FOR EACH ROW EXECUTE FUNCTION mlplat._serving_owner_guard();
CREATE TRIGGER deployment_revisions_serving_owner BEFORE INSERT ON mlplat.deployment_revisions
  FOR EACH ROW EXECUTE FUNCTION mlplat._serving_owner_guard();

-- ---------------------------------------------------------------- security

SELECT mlplat._member_reads('serving_owners');
GRANT SELECT ON mlplat.components, mlplat.serving_owners, mlplat.capability_descriptors TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.components', '');
SELECT pg_catalog.pg_extension_config_dump('mlplat.serving_owners', '');
SELECT pg_catalog.pg_extension_config_dump('mlplat.capability_descriptors', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('mlplat.capability_descriptors', 'id')::regclass, '');

REVOKE ALL ON FUNCTION mlplat._check_mechanism(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._check_regression_test(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._cannot_compile(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._serving_owner_guard() FROM PUBLIC;
