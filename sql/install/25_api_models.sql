-- 25_api_models: model versions, stages and the registry aliases that follow them.

CREATE FUNCTION mlplat._find_version(p_project_id bigint, p_model text, p_version text)
RETURNS mlplat.model_versions LANGUAGE plpgsql STABLE AS $$
DECLARE
  v mlplat.model_versions;
BEGIN
  SELECT mv.* INTO v FROM mlplat.model_versions mv JOIN mlplat.models m ON m.id = mv.model_id
  WHERE m.project_id = p_project_id AND m.name = p_model AND mv.version = p_version;
  IF v.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = 'model version not found',
      DETAIL = pg_catalog.format('The project has no version "%s" of model "%s".',
                                 pg_catalog.left(p_version, 64), pg_catalog.left(p_model, 64)),
      HINT = 'Register it with mlplat.register_model_version() first.';
  END IF;
  RETURN v;
END $$;

CREATE FUNCTION mlplat.register_model_version(project text, model text, version text, artifact_uri text,
                                              artifact_sha256 text, runtime_kind text, model_format text,
                                              idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
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

-- Make the desired aliases follow the stages: champion -> the CHAMPION version,
-- candidate -> the CANDIDATE most recently staged.  Returns whether anything moved.
CREATE FUNCTION mlplat._sync_aliases(p_model_id bigint, p_traceparent text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  pid bigint;
  a record;
  moved boolean := false;
BEGIN
  SELECT m.project_id INTO pid FROM mlplat.models m WHERE m.id = p_model_id;
  FOR a IN
    SELECT x.alias,
           (SELECT mv.id FROM mlplat.model_versions mv
            WHERE mv.model_id = p_model_id AND mv.stage = x.stage
            ORDER BY mv.stage_changed_at DESC, mv.id DESC LIMIT 1) AS version_id
    FROM (VALUES ('champion', 'CHAMPION'), ('candidate', 'CANDIDATE')) AS x(alias, stage)
  LOOP
    INSERT INTO mlplat.model_aliases AS ma (project_id, model_id, alias, version_id, moved_by, traceparent)
    SELECT pid, p_model_id, a.alias, a.version_id, mlplat._actor(), p_traceparent
    WHERE a.version_id IS NOT NULL
    ON CONFLICT ON CONSTRAINT model_aliases_model_id_alias_key DO UPDATE
      SET version_id = excluded.version_id, moved_by = excluded.moved_by, traceparent = excluded.traceparent,
          generation = ma.generation + 1, row_version = ma.row_version + 1, status = 'PENDING',
          attempts = 0, next_attempt_at = pg_catalog.now(), updated_at = pg_catalog.now()
      WHERE ma.version_id IS DISTINCT FROM excluded.version_id;
    moved := moved OR FOUND;
    IF a.version_id IS NULL THEN
      UPDATE mlplat.model_aliases ma
      SET version_id = NULL, moved_by = mlplat._actor(), traceparent = p_traceparent,
          generation = ma.generation + 1, row_version = ma.row_version + 1, status = 'PENDING',
          attempts = 0, next_attempt_at = pg_catalog.now(), updated_at = pg_catalog.now()
      WHERE ma.model_id = p_model_id AND ma.alias = a.alias AND ma.version_id IS NOT NULL;
      moved := moved OR FOUND;
    END IF;
  END LOOP;
  RETURN moved;
END $$;

CREATE FUNCTION mlplat.set_model_stage(project text, model text, version text, stage text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('set_model_stage', set_model_stage.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'model_version', NULL, NULL, NULL, false)::mlplat.accepted;
  v mlplat.model_versions;
  demoted text;
  moved boolean;
BEGIN
  PERFORM mlplat._bound_api_waits();
  IF set_model_stage.stage IS NULL OR set_model_stage.stage NOT IN ('NONE', 'CANDIDATE', 'CHAMPION', 'ARCHIVED') THEN
    PERFORM mlplat._bad_input('stage', 'must be one of NONE, CANDIDATE, CHAMPION, ARCHIVED',
      'CHAMPION serves production; CANDIDATE may be deployed for trials.');
  END IF;
  v := mlplat._find_version(api.pid, set_model_stage.model, set_model_stage.version);
  -- Stage changes of one model are serialized on the model row.
  PERFORM 1 FROM mlplat.models m WHERE m.id = v.model_id FOR UPDATE;
  SELECT * INTO v FROM mlplat.model_versions mv WHERE mv.id = v.id;
  r.entity_id := v.id;
  IF v.stage = set_model_stage.stage THEN
    r.status := v.stage;
    RETURN r;
  END IF;
  IF set_model_stage.stage = 'CHAMPION' THEN
    -- One CHAMPION per model: the previous one is ARCHIVED.
    UPDATE mlplat.model_versions mv SET stage = 'ARCHIVED', stage_changed_at = pg_catalog.clock_timestamp()
    WHERE mv.model_id = v.model_id AND mv.stage = 'CHAMPION'
    RETURNING mv.version INTO demoted;
  END IF;
  UPDATE mlplat.model_versions mv SET stage = set_model_stage.stage, stage_changed_at = pg_catalog.clock_timestamp()
  WHERE mv.id = v.id;
  moved := mlplat._sync_aliases(v.model_id, api.tp);
  r.status := set_model_stage.stage;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('model', set_model_stage.model, 'version', v.version, 'from', v.stage,
                                  'to', set_model_stage.stage, 'archived_champion', demoted, 'aliases_moved', moved),
    CASE WHEN moved THEN 'model_aliases' END);
END $$;
