-- 0.2.0 -> 0.3.0, part 41: inputs that travel outward are checked (issue 18, finding 9):
-- no Kubernetes system identity as a RoleBinding subject, no Argo template syntax in a
-- run's image/command/args/env, no control character in an artifact URI.  create_project's
-- check of its owner is in its final definition, part 99_isvc9.

CREATE OR REPLACE FUNCTION mlplat._check_subject(field text, principal text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.lower(pg_catalog.btrim(principal)) LIKE 'system:%' THEN
    PERFORM mlplat._bad_input(field, 'must not start with "system:", the prefix Kubernetes reserves for its own users, groups and service accounts',
      'Grant roles to people (their login names), never to Kubernetes system identities.');
  END IF;
END $$;

CREATE OR REPLACE FUNCTION mlplat.grant_role(project text, principal text, role text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._membership_begin('grant_role', grant_role.project, grant_role.principal, grant_role.role);
BEGIN
  PERFORM mlplat._check_subject('principal', grant_role.principal);
  INSERT INTO mlplat.members (project_id, principal, role, granted_by)
  VALUES (api.pid, grant_role.principal, grant_role.role, mlplat._actor()) ON CONFLICT DO NOTHING;
  RETURN mlplat._membership_changed(api, 'GRANTED', grant_role.principal, grant_role.role, FOUND);
END $$;

CREATE OR REPLACE FUNCTION mlplat._check_no_template(field text, val jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF val IS NOT NULL AND pg_catalog.strpos(val::text, '{{') > 0 THEN
    PERFORM mlplat._bad_input(field, 'must not contain "{{": Argo Workflows would read it as template syntax and substitute it',
      'Pass the text literally without "{{" (e.g. read values from the environment in the program instead).');
  END IF;
END $$;

CREATE OR REPLACE FUNCTION mlplat._check_container(field text, s jsonb, extra_keys text[] DEFAULT '{}') RETURNS int
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

CREATE OR REPLACE FUNCTION mlplat.register_model_version(project text, model text, version text, artifact_uri text,
                                              artifact_sha256 text, runtime_kind text, model_format text,
                                              idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('register_model', register_model_version.project, register_model_version.idempotency_key);
  r mlplat.accepted;
  mid bigint;
  v mlplat.model_versions;
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(register_model_version.project, register_model_version.model,
           register_model_version.version, register_model_version.artifact_uri, register_model_version.artifact_sha256,
           register_model_version.runtime_kind, register_model_version.model_format));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  PERFORM mlplat._check_label('model', register_model_version.model, 63);
  IF register_model_version.version IS NULL OR register_model_version.version !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
    PERFORM mlplat._bad_input('version', 'must be 1 to 64 characters of letters, digits, ''.'', ''_'' or ''-''',
      'Use the registry''s version, e.g. 3 or 2024-06-01.1.');
  END IF;
  -- a control character would reach the storage initializer's command line, the object
  -- store request and every log line that names the artifact
  IF register_model_version.artifact_uri ~ '[[:cntrl:]]' THEN
    PERFORM mlplat._bad_input('artifact_uri', 'must not contain control characters',
      'Pass the URI as printable text; percent-encode what the object key needs.');
  END IF;
  IF register_model_version.artifact_uri IS NULL OR pg_catalog.length(register_model_version.artifact_uri) > 2048
     OR register_model_version.artifact_uri !~ '^(s3|gs|pvc|hf|oci|https|http)://[^/[:space:]@]+(/[^[:space:]]*)?$' THEN
    PERFORM mlplat._bad_input('artifact_uri',
      'must be an s3://, gs://, pvc://, hf://, oci:// or http(s):// URI of at most 2048 characters, without spaces or credentials',
      'Credentials never go in the URI; the storage initializer reads them from a secret.');
  END IF;
  -- only from the project's own artifact locations: the platform reads the artifact with its
  -- own credentials, and must not do so for another tenant's objects
  PERFORM mlplat._check_artifact_location(api.pid, register_model_version.project, register_model_version.artifact_uri);
  IF register_model_version.artifact_sha256 IS NULL OR register_model_version.artifact_sha256 !~ '^[0-9a-f]{64}$' THEN
    PERFORM mlplat._bad_input('artifact_sha256', 'must be 64 lower-case hex characters',
      'Pass the SHA-256 digest of the artifact, e.g. from sha256sum.');
  END IF;
  PERFORM mlplat._check_label('runtime_kind', register_model_version.runtime_kind, 63);
  PERFORM mlplat._check_label('model_format', register_model_version.model_format, 63);

  INSERT INTO mlplat.models (project_id, name) VALUES (api.pid, register_model_version.model)
  ON CONFLICT ON CONSTRAINT models_project_id_name_key DO NOTHING;
  SELECT m.id INTO mid FROM mlplat.models m WHERE m.project_id = api.pid AND m.name = register_model_version.model;

  r := (pg_catalog.gen_random_uuid(), 'model_version', NULL, NULL, NULL, false)::mlplat.accepted;
  INSERT INTO mlplat.model_versions (project_id, model_id, version, artifact_uri, artifact_sha256,
                                     runtime_kind, model_format, created_by)
  VALUES (api.pid, mid, register_model_version.version, register_model_version.artifact_uri,
          register_model_version.artifact_sha256, register_model_version.runtime_kind,
          register_model_version.model_format, mlplat._actor())
  ON CONFLICT ON CONSTRAINT model_versions_model_id_version_key DO NOTHING
  RETURNING * INTO v;
  IF v.id IS NULL THEN
    SELECT * INTO v FROM mlplat.model_versions mv WHERE mv.model_id = mid AND mv.version = register_model_version.version;
    IF (v.artifact_uri, v.artifact_sha256, v.runtime_kind, v.model_format) IS DISTINCT FROM
       (register_model_version.artifact_uri, register_model_version.artifact_sha256,
        register_model_version.runtime_kind, register_model_version.model_format) THEN
      RAISE EXCEPTION USING ERRCODE = '42710',
        MESSAGE = pg_catalog.format('version "%s" of model "%s" is already registered with a different artifact',
                                    v.version, register_model_version.model),
        DETAIL = 'Model versions are immutable once registered.',
        HINT = 'Register the new artifact under a new version.';
    END IF;
  END IF;
  r.entity_id := v.id; r.status := v.stage;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('model', register_model_version.model, 'version', v.version,
      'artifact_sha256', v.artifact_sha256, 'runtime_kind', v.runtime_kind, 'model_format', v.model_format));
END $$;


REVOKE ALL ON FUNCTION mlplat._check_subject(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._check_no_template(text, jsonb) FROM PUBLIC;
