-- 37_api_campaigns: optimization campaigns (issue 14, docs/campaigns.md).
--
-- A campaign is an immutable, content-addressed plan of 1 to 64 ordered candidate builds of an
-- optimized artifact (quantized checkpoint, speculative draft, TensorRT engine) from one
-- registered model version.  Creating it touches nothing outside the database; paid work
-- (builder Jobs) needs an approval row with an actor, a hard maximum spend and an expiry,
-- and that first authority is never extended.  Campaign state has no column: one function,
-- _campaign_state, derives it from the candidates for every view, result and worker.
-- Predicted and measured evidence live in separate append-only tables and never qualify an
-- artifact; only signed, bound quality evidence does (qualify_artifact).

INSERT INTO mlplat.policies (role, action)
SELECT r.role, a.action
FROM (VALUES ('viewer', 1), ('developer', 2), ('deployer', 3), ('owner', 4)) AS r(role, rank)
JOIN (VALUES ('create_campaign', 2), ('cancel_campaign', 2), ('record_candidate_evidence', 2),
             ('qualify_artifact', 3), ('approve_campaign', 4), ('set_serving_owner', 4))
     AS a(action, min_rank) ON r.rank >= a.min_rank;

-- ---------------------------------------------------------------- platform data

CREATE TABLE mlplat.evidence_signers (
  name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  public_key bytea NOT NULL CHECK (pg_catalog.octet_length(public_key) = 32),
  added_by   text NOT NULL,
  added_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
  revoked_at timestamptz
);
COMMENT ON TABLE mlplat.evidence_signers IS
  'Ed25519 public keys whose signed quality evidence qualify_artifact accepts (administrators; revocation only).';

CREATE TABLE mlplat.optimization_presets (
  name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  plan       jsonb NOT NULL,
  content_id text NOT NULL,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.optimization_presets IS
  'Named, exact, digest-pinned candidate plans; a campaign freezes the plan it expanded.';

-- ---------------------------------------------------------------- campaigns

CREATE TABLE mlplat.campaigns (
  id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id            bigint NOT NULL REFERENCES mlplat.projects (id),
  name                  text NOT NULL,
  definition            jsonb NOT NULL,   -- expanded: presets replaced, defaults filled, base sha256 added
  content_id            text NOT NULL,    -- mlplat.content_id(definition)
  base_model_version_id bigint NOT NULL REFERENCES mlplat.model_versions (id),
  base_artifact_sha256  text NOT NULL CHECK (base_artifact_sha256 ~ '^[0-9a-f]{64}$'),
  model_family          text NOT NULL,
  quality_gate          jsonb NOT NULL,
  output_prefix         text NOT NULL,
  max_parallel          int NOT NULL CHECK (max_parallel BETWEEN 1 AND 8),
  created_by            text NOT NULL,
  db_role               text NOT NULL,
  traceparent           text,
  created_at            timestamptz NOT NULL DEFAULT pg_catalog.now(),
  cancel_requested_at   timestamptz,
  cancel_requested_by   text,
  UNIQUE (project_id, name),
  UNIQUE (id, project_id)   -- the target of the candidates' (campaign, project) key
);
COMMENT ON TABLE mlplat.campaigns IS
  'Immutable optimization campaigns; only cancel_requested_at/by change, once.  No status column: see mlplat._campaign_state.';

CREATE TABLE mlplat.campaign_approvals (
  campaign_id           bigint PRIMARY KEY REFERENCES mlplat.campaigns (id),
  project_id            bigint NOT NULL REFERENCES mlplat.projects (id),
  approved_by           text NOT NULL,
  db_role               text NOT NULL,
  max_spend_gpu_seconds bigint NOT NULL CHECK (max_spend_gpu_seconds > 0),
  valid_for             interval NOT NULL,
  expires_at            timestamptz NOT NULL,
  approved_at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
  request_hash          text NOT NULL,
  traceparent           text
);
COMMENT ON TABLE mlplat.campaign_approvals IS
  'The one approval of a campaign: actor, hard maximum spend, expiry.  Append-only: an approval is never changed or renewed.';

CREATE TABLE mlplat.campaign_candidates (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  campaign_id          bigint NOT NULL,
  project_id           bigint NOT NULL,
  ordinal              int NOT NULL CHECK (ordinal BETWEEN 1 AND 64),
  name                 text NOT NULL,
  plan                 jsonb NOT NULL,
  content_id           text NOT NULL,
  gpus                 int NOT NULL CHECK (gpus BETWEEN 1 AND 8),
  reserved_gpu_seconds bigint NOT NULL CHECK (reserved_gpu_seconds > 0),
  reason_code          text,
  job_name             text,
  claimed_at           timestamptz,
  started_at           timestamptz,
  finished_at          timestamptz,
  actual_gpu_seconds   bigint CHECK (actual_gpu_seconds >= 0),
  evidence_version     bigint NOT NULL DEFAULT 0,
  cleanup_done_at      timestamptz,
  generation           bigint NOT NULL DEFAULT 1,
  observed_generation  bigint NOT NULL DEFAULT 0,
  status               text NOT NULL DEFAULT 'PLANNED'
                       CHECK (status IN ('PLANNED', 'BUILDING', 'CANCEL_REQUESTED', 'BUILT', 'FAILED',
                                         'CANCELLED', 'NOT_RUN')),
  status_reason        text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,
  UNIQUE (campaign_id, ordinal),
  UNIQUE (campaign_id, name),
  UNIQUE (id, project_id),   -- the target of the transitions' (candidate, project) key
  -- One key for the campaign and the project, not one each: a candidate is in its campaign's
  -- project (stronger than two separate keys), and create_campaign's 64 rows pay one
  -- referential check each instead of two (the campaign references the project).
  FOREIGN KEY (campaign_id, project_id) REFERENCES mlplat.campaigns (id, project_id)
);
-- the reconciler's claim reads only these; finished campaigns cost it nothing
CREATE INDEX campaign_candidates_active ON mlplat.campaign_candidates (campaign_id)
  WHERE NOT mlplat.candidate_is_finished(status);
CREATE INDEX campaign_candidates_uncleaned ON mlplat.campaign_candidates (campaign_id)
  WHERE cleanup_done_at IS NULL AND mlplat.candidate_is_finished(status);

CREATE TABLE mlplat.candidate_transitions (
  candidate_id bigint NOT NULL,
  project_id   bigint NOT NULL,
  seq          int NOT NULL,
  from_status  text,
  to_status    text NOT NULL,
  reason_code  text,
  observation  jsonb NOT NULL DEFAULT '{}',
  actor        text,        -- API transitions
  epoch        bigint,      -- reconciler transitions
  controller   text,
  at           timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  PRIMARY KEY (candidate_id, seq),
  -- as the candidates': one check per transition row, and the row is in its candidate's project
  FOREIGN KEY (candidate_id, project_id) REFERENCES mlplat.campaign_candidates (id, project_id)
);

-- What every recorded fact about a candidate (a prediction, a measurement) carries, once: its
-- place in the candidate's evidence sequence, the metric and value, the evidence as sent, and
-- who recorded it under which fence.  A template like mlplat._reconciled_columns: no rows, no
-- grants; LIKE copies names, types, NOT NULL and defaults, so the tables do not depend on it.
CREATE TABLE mlplat._candidate_fact_columns (
  seq           bigint NOT NULL,
  metric        text NOT NULL,
  value         numeric NOT NULL,
  evidence      jsonb NOT NULL,
  content_id    text NOT NULL,
  fence_version bigint NOT NULL,
  recorded_by   text NOT NULL,
  db_role       text NOT NULL,
  at            timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);

CREATE TABLE mlplat.candidate_predictions (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  candidate_id  bigint NOT NULL REFERENCES mlplat.campaign_candidates (id),
  project_id    bigint NOT NULL REFERENCES mlplat.projects (id),
  LIKE mlplat._candidate_fact_columns INCLUDING DEFAULTS,
  estimator     text NOT NULL,
  UNIQUE (candidate_id, seq)
);

CREATE TABLE mlplat.candidate_measurements (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  candidate_id    bigint NOT NULL REFERENCES mlplat.campaign_candidates (id),
  project_id      bigint NOT NULL REFERENCES mlplat.projects (id),
  LIKE mlplat._candidate_fact_columns INCLUDING DEFAULTS,
  workload_sha256 text NOT NULL,
  deployment_id   bigint NOT NULL REFERENCES mlplat.deployments (id),
  revision        int NOT NULL,
  measured_at     timestamptz NOT NULL,
  UNIQUE (candidate_id, seq)
);

CREATE TABLE mlplat.optimized_artifacts (
  id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id            bigint NOT NULL REFERENCES mlplat.projects (id),
  campaign_id           bigint NOT NULL REFERENCES mlplat.campaigns (id),
  candidate_id          bigint NOT NULL UNIQUE REFERENCES mlplat.campaign_candidates (id),
  kind                  text NOT NULL CHECK (kind IN ('checkpoint', 'speculator', 'engine')),
  base_model_version_id bigint NOT NULL REFERENCES mlplat.model_versions (id),
  base_artifact_sha256  text NOT NULL CHECK (base_artifact_sha256 ~ '^[0-9a-f]{64}$'),
  tool                  text NOT NULL,
  tool_version          text NOT NULL,
  builder_image         text NOT NULL,
  builder_image_digest  text NOT NULL CHECK (builder_image_digest ~ '^sha256:[0-9a-f]{64}$'),
  algorithm             text NOT NULL,
  "precision"            text NOT NULL,
  config                jsonb NOT NULL,
  config_content_id     text NOT NULL,
  hardware              jsonb NOT NULL,
  spdx                  text NOT NULL,
  sbom_sha256           text CHECK (sbom_sha256 ~ '^[0-9a-f]{64}$'),
  output_uri            text NOT NULL,
  output_sha256         text NOT NULL CHECK (output_sha256 ~ '^[0-9a-f]{64}$'),
  output_bytes          bigint NOT NULL CHECK (output_bytes >= 0),
  attestation           jsonb NOT NULL,
  attestation_sha256    text NOT NULL,
  -- how the output digest was verified in the object store; never the uploader's own
  -- x-amz-meta-sha256 (the builder is untrusted)
  verified_by           text NOT NULL CHECK (verified_by IN ('x-amz-checksum-sha256', 'cache', 'download')),
  content_id            text NOT NULL,
  epoch                 bigint,
  controller            text,
  created_at            timestamptz NOT NULL DEFAULT pg_catalog.now()
);

CREATE TABLE mlplat.artifact_qualifications (
  artifact_id          bigint PRIMARY KEY REFERENCES mlplat.optimized_artifacts (id),
  project_id           bigint NOT NULL REFERENCES mlplat.projects (id),
  candidate_id         bigint NOT NULL REFERENCES mlplat.campaign_candidates (id),
  deployment_id        bigint NOT NULL REFERENCES mlplat.deployments (id),
  revision             int NOT NULL,
  spec_digest          text NOT NULL,
  statement            jsonb NOT NULL,
  statement_content_id text NOT NULL,
  signer               text NOT NULL REFERENCES mlplat.evidence_signers (name),
  signature            text NOT NULL,
  metric               text NOT NULL,
  baseline_score       numeric NOT NULL,
  candidate_score      numeric NOT NULL,
  max_drop             numeric NOT NULL,
  qualified_by         text NOT NULL,
  db_role              text NOT NULL,
  traceparent          text,
  at                   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- ---------------------------------------------------------------- immutability

SELECT mlplat._append_only('campaign_approvals', 'candidate_transitions', 'candidate_predictions',
                            'candidate_measurements', 'optimized_artifacts', 'artifact_qualifications',
                            'optimization_presets');

-- A campaign changes once: its cancel request (NULL -> value).  A signer changes once: its
-- revocation.  Everything else about both is history.
CREATE FUNCTION mlplat._campaign_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  mutable text[] := CASE TG_TABLE_NAME WHEN 'campaigns' THEN ARRAY['cancel_requested_at', 'cancel_requested_by']
                                       ELSE ARRAY['revoked_at'] END;
BEGIN
  IF TG_OP = 'UPDATE'
     AND (pg_catalog.to_jsonb(NEW) - mutable) = (pg_catalog.to_jsonb(OLD) - mutable)
     AND (pg_catalog.to_jsonb(OLD) ->> mutable[1]) IS NULL THEN
    RETURN NEW;
  END IF;
  -- retention: a campaign that ended past mlplat.history_retention (80_retention.sql)
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'campaigns' AND mlplat._purgeable(TG_TABLE_NAME, pg_catalog.to_jsonb(OLD)) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s on %s is not allowed: rows are immutable', TG_OP, TG_TABLE_NAME),
    DETAIL = pg_catalog.format('Only %s may be set, once.', pg_catalog.array_to_string(mutable, ' and ')),
    HINT = 'Create a new campaign (or register a new signer) instead of changing one.';
END $$;
CREATE TRIGGER campaigns_guard BEFORE UPDATE OR DELETE ON mlplat.campaigns
  FOR EACH ROW EXECUTE FUNCTION mlplat._campaign_guard();
CREATE TRIGGER campaigns_no_truncate BEFORE TRUNCATE ON mlplat.campaigns
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER evidence_signers_guard BEFORE UPDATE OR DELETE ON mlplat.evidence_signers
  FOR EACH ROW EXECUTE FUNCTION mlplat._campaign_guard();
CREATE TRIGGER evidence_signers_no_truncate BEFORE TRUNCATE ON mlplat.evidence_signers
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

-- A candidate's plan and identity never change.  Its status moves only along the edges of
-- mlplat._campaign_candidate_transitions() (sql/install/41_state_machines.sql).
CREATE FUNCTION mlplat._candidate_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  IF TG_OP = 'DELETE' AND mlplat._purgeable(TG_TABLE_NAME, pg_catalog.to_jsonb(OLD)) THEN
    RETURN OLD;   -- retention: its campaign ended past mlplat.history_retention
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = 'DELETE on campaign_candidates is not allowed: rows are immutable',
      DETAIL = 'Candidates are the history of paid work.', HINT = 'Cancel the campaign instead.';
  END IF;
  IF (NEW.id, NEW.campaign_id, NEW.project_id, NEW.ordinal, NEW.name, NEW.plan, NEW.content_id, NEW.gpus,
      NEW.reserved_gpu_seconds)
     IS DISTINCT FROM (OLD.id, OLD.campaign_id, OLD.project_id, OLD.ordinal, OLD.name, OLD.plan, OLD.content_id,
                       OLD.gpus, OLD.reserved_gpu_seconds) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('candidate "%s": its plan and identity are immutable', OLD.name),
      DETAIL = 'plan, content_id, ordinal, name, gpus and reserved_gpu_seconds never change.',
      HINT = 'Create a new campaign with the new plan.';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER campaign_candidates_guard BEFORE UPDATE OR DELETE ON mlplat.campaign_candidates
  FOR EACH ROW EXECUTE FUNCTION mlplat._candidate_guard();
CREATE TRIGGER campaign_candidates_no_truncate BEFORE TRUNCATE ON mlplat.campaign_candidates
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

-- ---------------------------------------------------------------- the one state derivation

-- The campaign's state, derived from its candidates, cancel request and approval (first
-- match wins; docs/campaigns.md).  The decision is this one function of the facts; every
-- view, accepted.status and the reconciler reach it (_campaign_state gathers the facts of
-- one campaign, campaign_status of all of them in its own scan).  IMMUTABLE: a function of
-- its arguments only (expired is decided by the caller against now()).
CREATE FUNCTION mlplat._campaign_state_of(active boolean, planned boolean, not_planned boolean, all_built boolean,
                                          some_built boolean, expired_not_run boolean, cancel boolean,
                                          approved boolean, approval_expired boolean)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT CASE
           WHEN active AND cancel THEN 'CANCELLING'
           WHEN active THEN 'RUNNING'
           WHEN planned AND cancel THEN 'CANCELLED'
           WHEN planned AND NOT approved THEN 'AWAITING_APPROVAL'
           WHEN planned AND approval_expired THEN 'EXPIRED'
           WHEN planned AND not_planned THEN 'RUNNING'
           WHEN planned THEN 'APPROVED'
           WHEN cancel THEN 'CANCELLED'
           WHEN all_built THEN 'SUCCEEDED'
           WHEN some_built THEN 'PARTIALLY_SUCCEEDED'
           WHEN expired_not_run THEN 'EXPIRED'
           ELSE 'FAILED'
         END
$$;

CREATE FUNCTION mlplat._campaign_state(p_campaign_id bigint) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  RETURN (
  SELECT mlplat._campaign_state_of(s.active, s.planned, s.not_planned, s.all_built, s.some_built, s.expired,
                                   c.cancel_requested_at IS NOT NULL, a.expires_at IS NOT NULL,
                                   a.expires_at <= pg_catalog.now())
    FROM mlplat.campaigns c
    LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
    CROSS JOIN LATERAL (
      SELECT coalesce(pg_catalog.bool_or(mlplat.candidate_is_building(k.status)), false) AS active,
             coalesce(pg_catalog.bool_or(k.status = 'PLANNED'), false) AS planned,
             coalesce(pg_catalog.bool_or(k.status <> 'PLANNED'), false) AS not_planned,
             coalesce(pg_catalog.bool_and(k.status = 'BUILT'), false) AS all_built,
             coalesce(pg_catalog.bool_or(k.status = 'BUILT'), false) AS some_built,
             coalesce(pg_catalog.bool_or(k.status = 'NOT_RUN' AND k.reason_code = 'APPROVAL_EXPIRED'), false) AS expired
        FROM mlplat.campaign_candidates k WHERE k.campaign_id = c.id) s
   WHERE c.id = p_campaign_id);
END $$;

-- ---------------------------------------------------------------- validation

-- A closed JSON object: every key in allowed, every key of required present.
CREATE FUNCTION mlplat._json_closed(field text, val jsonb, allowed text[], required text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  k text;
BEGIN
  IF val IS NULL OR pg_catalog.jsonb_typeof(val) <> 'object' THEN
    PERFORM mlplat._bad_input(field, pg_catalog.format('must be a JSON object, not %s',
      coalesce(pg_catalog.jsonb_typeof(val), 'missing')), pg_catalog.format('Allowed keys: %s.',
      pg_catalog.array_to_string(allowed, ', ')));
  END IF;
  FOR k IN SELECT pg_catalog.jsonb_object_keys(val) LOOP
    IF NOT k = ANY (allowed) THEN
      PERFORM mlplat._bad_input(field, pg_catalog.format('unknown key "%s"', pg_catalog.left(k, 64)),
        pg_catalog.format('Allowed keys: %s.', pg_catalog.array_to_string(allowed, ', ')));
    END IF;
  END LOOP;
  FOREACH k IN ARRAY required LOOP
    IF NOT val ? k THEN
      PERFORM mlplat._bad_input(field || '.' || k, 'is required', pg_catalog.format('Required keys: %s.',
        pg_catalog.array_to_string(required, ', ')));
    END IF;
  END LOOP;
END $$;

-- A JSON string that is a DNS label of at most max_len.
CREATE FUNCTION mlplat._json_label(field text, val jsonb, max_len int) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF val IS NULL OR pg_catalog.jsonb_typeof(val) <> 'string' THEN
    PERFORM mlplat._bad_input(field, pg_catalog.format('must be a JSON string, not %s',
      coalesce(pg_catalog.jsonb_typeof(val), 'missing')), 'Write a lower-case name such as "gptq".');
  END IF;
  PERFORM mlplat._check_label(field, val #>> '{}', max_len);
  RETURN val #>> '{}';
END $$;

-- SPDX license expression: NULL when valid, else why not (src/validate/spdx.c).
CREATE FUNCTION mlplat._spdx_error(expr text) RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_spdx_error';

CREATE FUNCTION mlplat.ed25519_verify(public_key bytea, message bytea, signature bytea) RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_ed25519_verify';
COMMENT ON FUNCTION mlplat.ed25519_verify(bytea, bytea, bytea) IS
  'RFC 8032 Ed25519 verification of signature over message with a 32-byte public key; wrong lengths are false.';

-- The candidate rules in C (src/validate/campaign_plan.c): NULL, or {field, rule, hint,
-- sqlstate} of the first problem, for mlplat._bad_input.  Catalog lookups stay in SQL: the
-- presets and builder components a definition names are passed in (name -> plan / builder).
CREATE FUNCTION mlplat._campaign_plan_problem(field text, plan jsonb, components jsonb) RETURNS text[]
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_campaign_plan_problem';
CREATE FUNCTION mlplat._campaign_candidates_problem(candidates jsonb, presets jsonb, components jsonb) RETURNS text[]
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_campaign_candidates_problem';
CREATE FUNCTION mlplat._prediction_problem(field text, e jsonb) RETURNS text[]
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_prediction_problem';
-- The stored form of candidates the check accepted: presets replaced by their plans, each
-- plan shaped as _campaign_plan_shape does, builder components resolved (one pass in C).
CREATE FUNCTION mlplat._campaign_candidates_expand(candidates jsonb, presets jsonb, components jsonb) RETURNS jsonb
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_campaign_candidates_expand';

-- The builder components (role builder) that plans name, as {name: {image, tool, tool_version}}.
CREATE FUNCTION mlplat._builder_components(p_plans jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(pg_catalog.jsonb_object_agg(x.name, pg_catalog.jsonb_build_object('image', x.spec->'image',
                    'tool', x.spec->'tool', 'tool_version', x.spec->'tool_version')), '{}')
    FROM mlplat.components x
   WHERE x.role = 'builder'
     AND x.name IN (SELECT e #>> '{builder,component}' FROM pg_catalog.jsonb_array_elements(p_plans) e)
$$;

-- A valid plan with its builder component replaced by the component's exact builder.
CREATE FUNCTION mlplat._campaign_plan_resolved(c jsonb, components jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN pg_catalog.jsonb_typeof(c->'builder') = 'object' AND c->'builder' ? 'component'
              THEN c || pg_catalog.jsonb_build_object('builder', components->(c #>> '{builder,component}')) ELSE c END
$$;

-- One candidate plan (without name/predicted), validated and normalized: builder components
-- expanded to their exact image, tool and version.  field is the plan's path for errors.
CREATE FUNCTION mlplat._campaign_plan(field text, c jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  comps jsonb := mlplat._builder_components(pg_catalog.jsonb_build_array(c));
  problem text[] := mlplat._campaign_plan_problem(field, c, comps);
BEGIN
  IF problem IS NOT NULL THEN
    PERFORM mlplat._bad_input(problem[1], problem[2], problem[3], problem[4]);
  END IF;
  RETURN mlplat._campaign_plan_shape(mlplat._campaign_plan_resolved(c, comps));
END $$;

-- The stored form of a valid plan: integers as integers, only the plan's keys.
CREATE FUNCTION mlplat._campaign_plan_shape(c jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT pg_catalog.jsonb_build_object('kind', c->'kind',
           'builder', pg_catalog.jsonb_build_object('image', c #> '{builder,image}', 'tool', c #> '{builder,tool}',
                                                    'tool_version', c #> '{builder,tool_version}'),
           'algorithm', c->'algorithm', 'precision', c->'precision', 'config', c->'config',
           'hardware', pg_catalog.jsonb_build_object('accelerator', c #> '{hardware,accelerator}', 'arch', c #> '{hardware,arch}',
                                                     'gpus', (c #>> '{hardware,gpus}')::numeric::int)
                       || CASE WHEN c->'hardware' ? 'min_gpu_memory_gib'
                               THEN pg_catalog.jsonb_build_object('min_gpu_memory_gib', (c #>> '{hardware,min_gpu_memory_gib}')::numeric::int)
                               ELSE '{}'::jsonb END,
           'spdx', c->'spdx', 'max_seconds', (c->>'max_seconds')::numeric::int)
$$;

-- One prediction or measurement {metric, value, estimator} (the rule: src/validate/campaign_plan.c).
CREATE FUNCTION mlplat._check_prediction(field text, e jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  problem text[] := mlplat._prediction_problem(field, e);
BEGIN
  IF problem IS NOT NULL THEN
    PERFORM mlplat._bad_input(problem[1], problem[2], problem[3], problem[4]);
  END IF;
END $$;

-- The whole definition, validated and expanded.  Returns the expanded definition (presets
-- replaced by their plans, defaults filled, base.artifact_sha256 added).
CREATE FUNCTION mlplat._campaign_expand(p_project_id bigint, p_def jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  base jsonb := p_def->'base';
  g jsonb := p_def->'quality_gate';
  v mlplat.model_versions;
  prefix text;
  cands jsonb;
  presets jsonb;
  comps jsonb;
  problem text[];
  s jsonb;
  mp int := 1;
BEGIN
  IF p_def IS NULL OR pg_catalog.octet_length(p_def::text) > 262144 THEN
    PERFORM mlplat._bad_input('definition', 'must be a JSON object of at most 256 kB', 'See docs/campaigns.md.');
  END IF;
  PERFORM mlplat._json_closed('definition', p_def,
    ARRAY['base', 'output_prefix', 'max_parallel', 'quality_gate', 'candidates'],
    ARRAY['base', 'output_prefix', 'quality_gate', 'candidates']);
  PERFORM mlplat._json_closed('definition.base', base, ARRAY['model', 'version', 'model_family'],
                              ARRAY['model', 'version', 'model_family']);
  IF pg_catalog.jsonb_typeof(base->'model') IS DISTINCT FROM 'string'
     OR pg_catalog.jsonb_typeof(base->'version') IS DISTINCT FROM 'string' THEN
    PERFORM mlplat._bad_input('definition.base', 'model and version must be JSON strings', 'Name a registered model version.');
  END IF;
  PERFORM mlplat._json_label('definition.base.model_family', base->'model_family', 63);
  v := mlplat._find_version(p_project_id, base->>'model', base->>'version');
  IF pg_catalog.jsonb_typeof(p_def->'output_prefix') IS DISTINCT FROM 'string' THEN
    PERFORM mlplat._bad_input('definition.output_prefix', 'must be a JSON string', 'Pass e.g. "s3://artifacts/opt/".');
  END IF;
  prefix := p_def->>'output_prefix';
  IF pg_catalog.octet_length(prefix) > 900 OR prefix ~ '[[:cntrl:][:space:]]'
     OR prefix !~ '^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([^/]+/)*$' OR prefix ~ '/\.\.?/' THEN
    PERFORM mlplat._bad_input('definition.output_prefix',
      's3://<bucket>/<key prefix>/ ending with ''/'', at most 900 bytes, without blanks, control characters, ''.'' or ''..'' segments',
      'Pass e.g. "s3://artifacts/opt/".');
  END IF;
  -- outputs are verified with the platform's own object-store credentials: only inside the
  -- project's declared artifact locations (as register_model_version)
  IF NOT EXISTS (SELECT 1 FROM mlplat.artifact_locations l
                  WHERE l.project_id = p_project_id AND pg_catalog.starts_with(prefix, l.location)) THEN
    PERFORM mlplat._bad_input('definition.output_prefix', 'must lie inside one of the project''s artifact locations',
      'A project owner adds one with mlplat.add_artifact_location().');
  END IF;
  IF p_def ? 'max_parallel' THEN
    mp := mlplat._json_num('definition.max_parallel', p_def->'max_parallel', 1, 8, true);
  END IF;
  PERFORM mlplat._json_closed('definition.quality_gate', g, ARRAY['metric', 'max_drop', 'signers'],
                              ARRAY['metric', 'max_drop', 'signers']);
  PERFORM mlplat._json_label('definition.quality_gate.metric', g->'metric', 63);
  PERFORM mlplat._json_num('definition.quality_gate.max_drop', g->'max_drop', 0, 1, false);
  PERFORM mlplat._json_array('definition.quality_gate.signers', g->'signers', 1, 8,
    'must be an array of 1 to 8 evidence signer names', 'See mlplat.evidence_signers.');
  FOR s IN SELECT x FROM pg_catalog.jsonb_array_elements(g->'signers') x LOOP
    IF pg_catalog.jsonb_typeof(s) <> 'string' OR NOT EXISTS (
         SELECT 1 FROM mlplat.evidence_signers e WHERE e.name = (s #>> '{}') AND e.revoked_at IS NULL) THEN
      PERFORM mlplat._bad_input('definition.quality_gate.signers',
        pg_catalog.format('%s is not a registered, unrevoked evidence signer', pg_catalog.left(s::text, 64)),
        'An administrator registers signers with mlplat.register_evidence_signer().');
    END IF;
  END LOOP;
  PERFORM mlplat._json_array('definition.candidates', p_def->'candidates', 1, 64,
    'must be an array of 1 to 64 candidates', 'Split larger sweeps into several campaigns.');
  -- every candidate in one C call (src/validate/campaign_plan.c): the presets and builder
  -- components it names are looked up first, so a missing one is reported in order (42704)
  SELECT coalesce(pg_catalog.jsonb_object_agg(x.name, x.plan), '{}') INTO presets FROM mlplat.optimization_presets x
   WHERE x.name IN (SELECT e->>'preset' FROM pg_catalog.jsonb_array_elements(p_def->'candidates') e
                     WHERE pg_catalog.jsonb_typeof(e) = 'object');
  comps := mlplat._builder_components(p_def->'candidates');
  problem := mlplat._campaign_candidates_problem(p_def->'candidates', presets, comps);
  IF problem IS NOT NULL THEN
    PERFORM mlplat._bad_input(problem[1], problem[2], problem[3], problem[4]);
  END IF;
  cands := mlplat._campaign_candidates_expand(p_def->'candidates', presets, comps);
  RETURN pg_catalog.jsonb_build_object(
    'base', base || pg_catalog.jsonb_build_object('artifact_sha256', v.artifact_sha256),
    'output_prefix', prefix, 'max_parallel', mp,
    'quality_gate', pg_catalog.jsonb_build_object('metric', g->'metric', 'max_drop', g->'max_drop', 'signers', g->'signers'),
    'candidates', cands);
END $$;

CREATE FUNCTION mlplat._find_campaign(p_project_id bigint, p_campaign text) RETURNS mlplat.campaigns
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaigns x WHERE x.project_id = p_project_id AND x.name = p_campaign),
                       'campaign', p_campaign, 'See mlplat.campaign_status for the project''s campaigns.');
END $$;

-- The campaign's candidate of this name, or 42704.
CREATE FUNCTION mlplat._find_candidate(p_campaign mlplat.campaigns, p_candidate text) RETURNS mlplat.campaign_candidates
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaign_candidates x WHERE x.campaign_id = p_campaign.id AND x.name = p_candidate),
                       NULL, NULL, 'See mlplat.campaign_candidate_status.',
                       pg_catalog.format('candidate "%s" does not exist in campaign "%s"', pg_catalog.left(p_candidate, 64), p_campaign.name));
END $$;

-- The project's optimized artifact with this id, or 42704.
CREATE FUNCTION mlplat._find_artifact(p_project_id bigint, p_artifact_id bigint) RETURNS mlplat.optimized_artifacts
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.optimized_artifacts x WHERE x.id = p_artifact_id AND x.project_id = p_project_id),
                       NULL, NULL, 'See mlplat.optimized_artifact_status.', pg_catalog.format('optimized artifact %s does not exist', p_artifact_id));
END $$;

CREATE FUNCTION mlplat._candidate_transition(p_candidate mlplat.campaign_candidates, p_to text, p_reason text,
                                             p_observation jsonb, p_actor text, p_epoch bigint, p_controller text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mlplat.candidate_transitions (candidate_id, project_id, seq, from_status, to_status, reason_code,
                                            observation, actor, epoch, controller)
  SELECT p_candidate.id, p_candidate.project_id,
         coalesce((SELECT pg_catalog.max(t.seq) FROM mlplat.candidate_transitions t WHERE t.candidate_id = p_candidate.id), 0) + 1,
         CASE WHEN p_to = 'PLANNED' AND p_candidate.status = 'PLANNED' THEN NULL ELSE p_candidate.status END,
         p_to, p_reason, coalesce(p_observation, '{}'), p_actor, p_epoch, p_controller;
END $$;

-- ---------------------------------------------------------------- API

CREATE FUNCTION mlplat.create_campaign(project text, campaign text, definition jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('create_campaign', create_campaign.project, create_campaign.idempotency_key);
  r mlplat.accepted;
  def jsonb;
  cid text;
  c mlplat.campaigns;
  i int := 0;
  who text := mlplat._actor();   -- once, not once per transition row
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(create_campaign.project, create_campaign.campaign, create_campaign.definition));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._check_label('campaign', create_campaign.campaign, 40);
  PERFORM mlplat._lock_project(api.pid, false, 'create_campaign');
  def := mlplat._campaign_expand(api.pid, create_campaign.definition);
  cid := mlplat.content_id(def);
  r := (pg_catalog.gen_random_uuid(), 'campaign', NULL, NULL, NULL, false)::mlplat.accepted;
  INSERT INTO mlplat.campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                                model_family, quality_gate, output_prefix, max_parallel, created_by, db_role, traceparent)
  SELECT api.pid, create_campaign.campaign, def, cid, v.id, v.artifact_sha256, def #>> '{base,model_family}',
         def->'quality_gate', def->>'output_prefix', (def->>'max_parallel')::int, who, mlplat._db_role(), api.tp
    FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id
   WHERE m.project_id = api.pid AND m.name = def #>> '{base,model}' AND v.version = def #>> '{base,version}'
  ON CONFLICT ON CONSTRAINT campaigns_project_id_name_key DO NOTHING
  RETURNING * INTO c;
  IF c.id IS NULL THEN
    -- the name exists (perhaps committed by a concurrent create that we waited for)
    SELECT * INTO c FROM mlplat.campaigns x WHERE x.project_id = api.pid AND x.name = create_campaign.campaign;
    IF c.content_id <> cid THEN
      RAISE EXCEPTION USING ERRCODE = '42710',
        MESSAGE = pg_catalog.format('campaign "%s" already exists in project "%s" with a different definition',
                                    create_campaign.campaign, create_campaign.project),
        DETAIL = pg_catalog.format('Its content id is %s; this definition''s is %s.', c.content_id, cid),
        HINT = 'Campaigns are immutable: choose a new campaign name.';
    END IF;
    r.entity_id := c.id; r.status := mlplat._campaign_state(c.id);
    RETURN mlplat._api_keep(api, r);
  END IF;
  -- the candidates and their first transitions, set-based (one statement each, not one per candidate)
  WITH e AS (
    SELECT x.v - 'name' - 'predicted' AS plan, x.v->'name' AS name, x.o::int AS ordinal
      FROM pg_catalog.jsonb_array_elements(def->'candidates') WITH ORDINALITY AS x(v, o)
  ), ins AS (
    INSERT INTO mlplat.campaign_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus,
                                            reserved_gpu_seconds, traceparent)
    SELECT c.id, api.pid, e.ordinal, e.name #>> '{}', e.plan,
           mlplat.content_id(e.plan || pg_catalog.jsonb_build_object('name', e.name)),
           (e.plan #>> '{hardware,gpus}')::int,
           (e.plan #>> '{hardware,gpus}')::bigint * (e.plan->>'max_seconds')::bigint, api.tp
      FROM e
    RETURNING id, project_id
  )
  INSERT INTO mlplat.candidate_transitions (candidate_id, project_id, seq, from_status, to_status, actor)
  SELECT ins.id, ins.project_id, 1, NULL, 'PLANNED', who FROM ins;
  GET DIAGNOSTICS i = ROW_COUNT;
  r.entity_id := c.id; r.status := mlplat._campaign_state(c.id);
  -- no wake: nothing may happen outside the database until the campaign is approved
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('campaign', c.name, 'content_id', cid, 'candidates', i));
END $$;

CREATE FUNCTION mlplat.approve_campaign(project text, campaign text, max_spend_gpu_seconds bigint, valid_for interval,
                                        idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('approve_campaign', approve_campaign.project, approve_campaign.idempotency_key);
  r mlplat.accepted;
  req jsonb := pg_catalog.jsonb_build_array(approve_campaign.project, approve_campaign.campaign,
                 approve_campaign.max_spend_gpu_seconds, approve_campaign.valid_for::text);
  c mlplat.campaigns;
  a mlplat.campaign_approvals;
  st text;
BEGIN
  r := mlplat._api_claim(api, req);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  IF approve_campaign.max_spend_gpu_seconds IS NULL OR approve_campaign.max_spend_gpu_seconds NOT BETWEEN 1 AND 1000000000000 THEN
    PERFORM mlplat._bad_input('max_spend_gpu_seconds', 'must be from 1 to 10^12',
      'The hard limit of GPU-seconds every build of the campaign may use together.');
  END IF;
  IF approve_campaign.valid_for IS NULL OR approve_campaign.valid_for <= interval '0'
     OR approve_campaign.valid_for > interval '30 days' THEN
    PERFORM mlplat._bad_input('valid_for', 'must be more than 0 and at most 30 days',
      'Builds must start and finish inside this window; pass e.g. ''8 hours''.');
  END IF;
  c := mlplat._find_campaign(api.pid, approve_campaign.campaign);
  -- approvals and cancellations of one campaign are serialized on its row
  PERFORM 1 FROM mlplat.campaigns x WHERE x.id = c.id FOR NO KEY UPDATE;
  SELECT * INTO c FROM mlplat.campaigns x WHERE x.id = c.id;
  st := mlplat._campaign_state(c.id);
  IF st IN ('CANCELLED', 'CANCELLING') THEN
    PERFORM mlplat._wrong_state('campaign', c.name, st, 'approve_campaign', 'A cancelled campaign is never approved; create a new one.');
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'campaign_approval', c.id, NULL, NULL, false)::mlplat.accepted;
  SELECT * INTO a FROM mlplat.campaign_approvals x WHERE x.campaign_id = c.id;
  IF a.campaign_id IS NOT NULL THEN
    IF a.expires_at <= pg_catalog.now() THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = pg_catalog.format('approval of campaign "%s" expired at %s: create a new campaign', c.name, a.expires_at),
        DETAIL = 'An approval is never renewed, whatever the terms.',
        HINT = 'Create a new campaign (a new name) and approve it.';
    END IF;
    IF a.max_spend_gpu_seconds = approve_campaign.max_spend_gpu_seconds AND a.valid_for = approve_campaign.valid_for THEN
      -- the same terms again (a retry, perhaps much later): the first authority, unchanged
      r.status := st;
      RETURN mlplat._api_keep(api, r);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42710',
      MESSAGE = pg_catalog.format('campaign "%s" is already approved (max spend %s GPU-seconds until %s); an approval is never changed',
                                  c.name, a.max_spend_gpu_seconds, a.expires_at),
      DETAIL = pg_catalog.format('This call asked for %s GPU-seconds for %s.', approve_campaign.max_spend_gpu_seconds,
                                 approve_campaign.valid_for),
      HINT = 'Create a new campaign for other terms.';
  END IF;
  INSERT INTO mlplat.campaign_approvals (campaign_id, project_id, approved_by, db_role, max_spend_gpu_seconds, valid_for,
                                         expires_at, request_hash, traceparent)
  VALUES (c.id, api.pid, mlplat._actor(), mlplat._db_role(), approve_campaign.max_spend_gpu_seconds, approve_campaign.valid_for,
          pg_catalog.now() + approve_campaign.valid_for,
          pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(req::text, 'UTF8')), 'hex'), api.tp)
  RETURNING * INTO a;
  r.status := mlplat._campaign_state(c.id);
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('campaign', c.name, 'max_spend_gpu_seconds', a.max_spend_gpu_seconds,
                                  'valid_for', a.valid_for::text, 'expires_at', a.expires_at), 'campaigns');
END $$;

CREATE FUNCTION mlplat.cancel_campaign(project text, campaign text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('cancel_campaign', cancel_campaign.project);
  r mlplat.accepted;
  c mlplat.campaigns;
  k mlplat.campaign_candidates;
  st text;
  who text := mlplat._actor();
BEGIN
  c := mlplat._find_campaign(api.pid, cancel_campaign.campaign);
  PERFORM 1 FROM mlplat.campaigns x WHERE x.id = c.id FOR NO KEY UPDATE;
  SELECT * INTO c FROM mlplat.campaigns x WHERE x.id = c.id;
  r := (pg_catalog.gen_random_uuid(), 'campaign', c.id, NULL, NULL, false)::mlplat.accepted;
  st := mlplat._campaign_state(c.id);
  IF st IN ('CANCELLED', 'CANCELLING') THEN
    r.status := st;
    RETURN r;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM mlplat.campaign_candidates x
                  WHERE x.campaign_id = c.id AND NOT mlplat.candidate_is_finished(x.status)) THEN
    PERFORM mlplat._wrong_state('campaign', c.name, st, 'cancel_campaign', 'Every candidate has finished.');
  END IF;
  UPDATE mlplat.campaigns x SET cancel_requested_at = pg_catalog.now(), cancel_requested_by = who WHERE x.id = c.id;
  FOR k IN SELECT * FROM mlplat.campaign_candidates x
            WHERE x.campaign_id = c.id AND x.status IN ('PLANNED', 'BUILDING') ORDER BY x.ordinal LOOP
    UPDATE mlplat.campaign_candidates x
       SET status = CASE WHEN k.status = 'PLANNED' THEN 'CANCELLED' ELSE 'CANCEL_REQUESTED' END,
           reason_code = CASE WHEN k.status = 'PLANNED' THEN 'CAMPAIGN_CANCELLED' END,
           status_reason = 'campaign cancelled by ' || who,
           finished_at = CASE WHEN k.status = 'PLANNED' THEN pg_catalog.now() END,
           actual_gpu_seconds = CASE WHEN k.status = 'PLANNED' THEN 0 END,
           generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0,
           next_attempt_at = pg_catalog.now(), updated_at = pg_catalog.now()
     WHERE x.id = k.id AND x.row_version = k.row_version AND x.status = k.status;
    IF NOT FOUND THEN
      PERFORM mlplat._cas_lost('candidate', k.name);
    END IF;
    PERFORM mlplat._candidate_transition(k, CASE WHEN k.status = 'PLANNED' THEN 'CANCELLED' ELSE 'CANCEL_REQUESTED' END,
      CASE WHEN k.status = 'PLANNED' THEN 'CAMPAIGN_CANCELLED' END, '{}', who, NULL, NULL);
  END LOOP;
  r.status := mlplat._campaign_state(c.id);
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('campaign', c.name, 'from', st, 'to', r.status), 'campaigns');
END $$;

CREATE FUNCTION mlplat.campaign_state(project text, campaign text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', campaign_state.project);
BEGIN
  RETURN mlplat._campaign_state((mlplat._find_campaign(pid, campaign_state.campaign)).id);
END $$;

-- The revision binding of evidence: the revision exists (42704) and the model version it
-- serves has the artifact's digest (55000 BINDING_MISMATCH).  Returns the revision row.
CREATE FUNCTION mlplat._bound_revision(p_project_id bigint, p_deployment text, p_revision int, p_output_sha256 text,
                                       p_spec_digest text DEFAULT NULL)
RETURNS mlplat.deployment_revisions LANGUAGE plpgsql STABLE AS $$
DECLARE
  dr mlplat.deployment_revisions;
  served text;
BEGIN
  SELECT x.* INTO dr FROM mlplat.deployment_revisions x JOIN mlplat.deployments d ON d.id = x.deployment_id
   WHERE d.project_id = p_project_id AND d.name = p_deployment AND x.revision = p_revision;
  IF dr.deployment_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('revision %s of deployment "%s" does not exist', p_revision, pg_catalog.left(p_deployment, 64)),
      HINT = 'Evidence names an immutable revision of a deployment in the same project.';
  END IF;
  IF p_spec_digest IS NOT NULL AND dr.spec_digest <> p_spec_digest THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = 'evidence does not match: revision.spec_digest',
      DETAIL = pg_catalog.format('Rule BINDING_MISMATCH: revision %s of "%s" has spec_digest %s; the statement says %s.',
                                 p_revision, p_deployment, dr.spec_digest, pg_catalog.left(p_spec_digest, 80)),
      HINT = 'Evaluate the exact revision that serves the artifact.';
  END IF;
  SELECT v.artifact_sha256 INTO served FROM mlplat.model_versions v WHERE v.id = dr.model_version_id;
  IF served IS DISTINCT FROM p_output_sha256 THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = 'evidence does not match: revision',
      DETAIL = pg_catalog.format('Rule BINDING_MISMATCH: revision %s of "%s" serves an artifact with sha256 %s, not the optimized artifact %s.',
                                 p_revision, p_deployment, served, p_output_sha256),
      HINT = 'Register the optimized artifact as a model version, deploy it, and measure that revision.';
  END IF;
  RETURN dr;
END $$;

CREATE FUNCTION mlplat.record_candidate_evidence(project text, campaign text, candidate text, class text, evidence jsonb,
                                                 observed_version bigint, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('record_candidate_evidence', record_candidate_evidence.project, record_candidate_evidence.idempotency_key);
  r mlplat.accepted;
  ev jsonb := record_candidate_evidence.evidence;
  c mlplat.campaigns;
  k mlplat.campaign_candidates;
  art mlplat.optimized_artifacts;
  dr mlplat.deployment_revisions;
  fence bigint;
  new_id bigint;
  who text := mlplat._actor();
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(record_candidate_evidence.project, record_candidate_evidence.campaign,
           record_candidate_evidence.candidate, record_candidate_evidence.class, ev, record_candidate_evidence.observed_version));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  IF record_candidate_evidence.class IS NULL OR record_candidate_evidence.class NOT IN ('predicted', 'actual') THEN
    PERFORM mlplat._bad_input('class', 'must be predicted or actual',
      'predicted: an estimate (never qualifies); actual: a measurement of a built artifact on a serving revision.');
  END IF;
  IF record_candidate_evidence.class = 'predicted' THEN
    PERFORM mlplat._check_prediction('evidence', ev);
  ELSE
    PERFORM mlplat._json_closed('evidence', ev, ARRAY['metric', 'value', 'workload_sha256', 'revision', 'measured_at'],
                                ARRAY['metric', 'value', 'workload_sha256', 'revision', 'measured_at']);
    IF pg_catalog.jsonb_typeof(ev->'metric') IS DISTINCT FROM 'string'
       OR NOT (ev->>'metric') IN ('tokens_per_s', 'p50_ms', 'p95_ms', 'gpu_memory_gib', 'error_rate') THEN
      PERFORM mlplat._bad_input('evidence.metric', 'must be one of tokens_per_s, p50_ms, p95_ms, gpu_memory_gib, error_rate',
        'Measurements are absolute values on a serving revision.');
    END IF;
    PERFORM mlplat._json_num('evidence.value', ev->'value', -1e15, 1e15, false);
    IF pg_catalog.jsonb_typeof(ev->'workload_sha256') IS DISTINCT FROM 'string' OR (ev->>'workload_sha256') !~ '^[0-9a-f]{64}$' THEN
      PERFORM mlplat._bad_input('evidence.workload_sha256', 'must be 64 lower-case hex characters', 'The SHA-256 of the workload replayed.');
    END IF;
    PERFORM mlplat._json_closed('evidence.revision', ev->'revision', ARRAY['deployment', 'revision'], ARRAY['deployment', 'revision']);
    PERFORM mlplat._json_label('evidence.revision.deployment', ev #> '{revision,deployment}', 63);
    PERFORM mlplat._json_num('evidence.revision.revision', ev #> '{revision,revision}', 1, 2147483647, true);
    PERFORM mlplat._json_num('evidence.measured_at', ev->'measured_at', 0, 253402300799, false);
  END IF;
  c := mlplat._find_campaign(api.pid, record_candidate_evidence.campaign);
  k := mlplat._find_candidate(c, record_candidate_evidence.candidate);
  IF record_candidate_evidence.class = 'actual' THEN
    IF k.status <> 'BUILT' THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = pg_catalog.format('candidate "%s" is %s: actual evidence needs a built artifact', k.name, k.status),
        DETAIL = 'Measurements are of an optimized artifact served by a deployment revision.',
        HINT = 'Record a prediction instead, or wait until the candidate is BUILT.';
    END IF;
    SELECT * INTO art FROM mlplat.optimized_artifacts x WHERE x.candidate_id = k.id;
    dr := mlplat._bound_revision(api.pid, ev #>> '{revision,deployment}', (ev #>> '{revision,revision}')::numeric::int, art.output_sha256);
  END IF;
  -- the fence: evidence is recorded against the version the caller observed
  UPDATE mlplat.campaign_candidates x SET evidence_version = x.evidence_version + 1
   WHERE x.id = k.id AND x.evidence_version = record_candidate_evidence.observed_version
  RETURNING x.evidence_version INTO fence;
  IF fence IS NULL THEN
    PERFORM mlplat._cas_lost('candidate', k.name);
  END IF;
  IF record_candidate_evidence.class = 'predicted' THEN
    INSERT INTO mlplat.candidate_predictions (candidate_id, project_id, seq, metric, value, estimator, evidence, content_id,
                                              fence_version, recorded_by, db_role)
    VALUES (k.id, api.pid, fence, ev->>'metric', (ev->>'value')::numeric, ev->>'estimator', ev, mlplat.content_id(ev),
            fence, who, mlplat._db_role())
    RETURNING id INTO new_id;
  ELSE
    INSERT INTO mlplat.candidate_measurements (candidate_id, project_id, seq, metric, value, workload_sha256, deployment_id,
                                               revision, measured_at, evidence, content_id, fence_version, recorded_by, db_role)
    VALUES (k.id, api.pid, fence, ev->>'metric', (ev->>'value')::numeric, ev->>'workload_sha256', dr.deployment_id, dr.revision,
            pg_catalog.to_timestamp((ev->>'measured_at')::numeric::double precision), ev, mlplat.content_id(ev), fence,
            who, mlplat._db_role())
    RETURNING id INTO new_id;
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'candidate_evidence', new_id, NULL, pg_catalog.upper(record_candidate_evidence.class), false)::mlplat.accepted;
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('campaign', c.name, 'candidate', k.name,
    'class', record_candidate_evidence.class, 'metric', ev->>'metric', 'evidence_version', fence));
END $$;

-- ---------------------------------------------------------------- the builder Job

-- Where a candidate's builder writes: <output_prefix><project>/<campaign>/<ordinal>/, the
-- artifact and attestation.json under it.  The render hands the builder these URIs and the
-- claim fetches and verifies the same ones, so both take them from here.
CREATE FUNCTION mlplat._candidate_output_dir(p_prefix text, p_project text, p_campaign text, p_ordinal int)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_prefix || p_project || '/' || p_campaign || '/' || p_ordinal || '/' $$;
REVOKE ALL ON FUNCTION mlplat._candidate_output_dir(text, text, text, int) FROM PUBLIC;

-- Exactly what the campaigns reconciler POSTs for a candidate (docs/campaigns.md).
CREATE FUNCTION mlplat._render_builder_job(p_candidate_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  q record;
  labels jsonb;
  uri text;
BEGIN
  SELECT k.*, c.name AS cname, c.content_id AS ccid, c.output_prefix, c.traceparent AS ctp, p.name AS pname,
         v.artifact_uri, v.artifact_sha256, a.traceparent AS atp,
         (SELECT i.instance_id FROM mlplat.installation i) AS inst
    INTO q
    FROM mlplat.campaign_candidates k
    JOIN mlplat.campaigns c ON c.id = k.campaign_id
    JOIN mlplat.projects p ON p.id = k.project_id
    JOIN mlplat.model_versions v ON v.id = c.base_model_version_id
    LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
   WHERE k.id = p_candidate_id;
  labels := mlplat._managed_by_label() || pg_catalog.jsonb_build_object(
              'app.kubernetes.io/component', 'optimization-builder', 'mlplat.io/project', q.pname,
              'mlplat.io/campaign', q.cname, 'mlplat.io/candidate', q.name, 'mlplat.io/instance', q.inst);
  uri := mlplat._candidate_output_dir(q.output_prefix, q.pname, q.cname, q.ordinal);
  RETURN pg_catalog.jsonb_build_object(
    'apiVersion', 'batch/v1', 'kind', 'Job',
    'metadata', pg_catalog.jsonb_build_object(
      'name', 'opt-' || q.cname || '-' || q.ordinal, 'namespace', mlplat._project_namespace(q.pname), 'labels', labels,
      'annotations', pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'mlplat.io/campaign-content-id', q.ccid, 'mlplat.io/candidate-content-id', q.content_id,
        'mlplat.io/traceparent', coalesce(q.atp, q.ctp)))),
    'spec', pg_catalog.jsonb_build_object(
      'backoffLimit', 0, 'activeDeadlineSeconds', (q.plan->>'max_seconds')::int,
      'template', pg_catalog.jsonb_build_object(
        'metadata', pg_catalog.jsonb_build_object('labels', labels),
        'spec', pg_catalog.jsonb_build_object(
          'restartPolicy', 'Never', 'serviceAccountName', mlplat._runner_service_account(),
          'automountServiceAccountToken', false,
          'nodeSelector', pg_catalog.jsonb_build_object('mlplat.io/accelerator', q.plan #> '{hardware,accelerator}'),
          'containers', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'name', 'builder', 'image', q.plan #> '{builder,image}',
            'env', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('name', e.n, 'value', e.v) ORDER BY e.n)
                      FROM (VALUES ('MLPLAT_ALGORITHM', q.plan->>'algorithm'),
                                   ('MLPLAT_ATTESTATION_URI', uri || 'attestation.json'),
                                   ('MLPLAT_BASE_SHA256', q.artifact_sha256),
                                   ('MLPLAT_BASE_URI', q.artifact_uri),
                                   ('MLPLAT_CAMPAIGN_CONTENT_ID', q.ccid),
                                   ('MLPLAT_CANDIDATE', q.name),
                                   ('MLPLAT_CANDIDATE_CONTENT_ID', q.content_id),
                                   ('MLPLAT_CONFIG', mlplat.canonical_json(q.plan->'config')),
                                   ('MLPLAT_OUTPUT_URI', uri || 'artifact'),
                                   ('MLPLAT_PRECISION', q.plan->>'precision')) AS e(n, v)),
            'resources', pg_catalog.jsonb_build_object('limits',
              pg_catalog.jsonb_build_object('nvidia.com/gpu', q.gpus::text))))))));
END $$;

CREATE FUNCTION mlplat.render_builder_job(project text, campaign text, candidate text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_builder_job.project);
  c mlplat.campaigns := mlplat._find_campaign(pid, render_builder_job.campaign);
BEGIN
  RETURN mlplat._render_builder_job((mlplat._find_candidate(c, render_builder_job.candidate)).id);
END $$;

-- ---------------------------------------------------------------- qualification

CREATE FUNCTION mlplat._rule(p_code text, p_message text, p_detail text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = p_message,
    DETAIL = pg_catalog.format('Rule %s: %s', p_code, p_detail),
    HINT = 'Nothing was written.  Qualification needs signed, passing quality evidence bound to this exact artifact and revision.';
END $$;

CREATE FUNCTION mlplat.qualify_artifact(project text, artifact_id bigint, evidence jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('qualify_artifact', qualify_artifact.project, qualify_artifact.idempotency_key);
  r mlplat.accepted;
  ev jsonb := qualify_artifact.evidence;
  st jsonb := ev->'statement';
  art mlplat.optimized_artifacts;
  k mlplat.campaign_candidates;
  c mlplat.campaigns;
  signer mlplat.evidence_signers;
  dr mlplat.deployment_revisions;
  q mlplat.artifact_qualifications;
  sig bytea;
  f text;
  want text;
  max_drop numeric;
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(qualify_artifact.project, qualify_artifact.artifact_id, ev));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  -- 1. the artifact, in this project, of a BUILT candidate
  art := mlplat._find_artifact(api.pid, qualify_artifact.artifact_id);
  SELECT * INTO k FROM mlplat.campaign_candidates x WHERE x.id = art.candidate_id;
  SELECT * INTO c FROM mlplat.campaigns x WHERE x.id = art.campaign_id;
  IF k.status <> 'BUILT' THEN
    PERFORM mlplat._wrong_state('candidate', k.name, k.status, 'qualify_artifact', 'Only a BUILT candidate''s artifact qualifies.');
  END IF;
  -- 2. shape
  PERFORM mlplat._json_closed('evidence', ev, ARRAY['statement', 'signer', 'signature'], ARRAY['statement', 'signer', 'signature']);
  PERFORM mlplat._json_closed('evidence.statement', st,
    ARRAY['type', 'project', 'campaign', 'campaign_content_id', 'candidate', 'artifact_sha256', 'revision', 'metric',
          'baseline_score', 'candidate_score', 'dataset_sha256', 'evaluated_at'],
    ARRAY['type', 'project', 'campaign', 'campaign_content_id', 'candidate', 'artifact_sha256', 'revision', 'metric',
          'baseline_score', 'candidate_score', 'dataset_sha256', 'evaluated_at']);
  IF st->'type' IS DISTINCT FROM '"mlplat.io/quality-evidence/v1"' THEN
    PERFORM mlplat._bad_input('evidence.statement.type', 'must be "mlplat.io/quality-evidence/v1"', 'See docs/campaigns.md.');
  END IF;
  FOREACH f IN ARRAY ARRAY['project', 'campaign', 'candidate', 'metric'] LOOP
    PERFORM mlplat._json_label('evidence.statement.' || f, st->f, 63);
  END LOOP;
  FOREACH f IN ARRAY ARRAY['campaign_content_id', 'artifact_sha256', 'dataset_sha256'] LOOP
    IF pg_catalog.jsonb_typeof(st->f) IS DISTINCT FROM 'string' OR (st->>f) !~ '^[0-9a-f]{64}$' THEN
      PERFORM mlplat._bad_input('evidence.statement.' || f, 'must be 64 lower-case hex characters', 'A SHA-256 in hex.');
    END IF;
  END LOOP;
  PERFORM mlplat._json_closed('evidence.statement.revision', st->'revision', ARRAY['deployment', 'revision', 'spec_digest'],
                              ARRAY['deployment', 'revision', 'spec_digest']);
  PERFORM mlplat._json_label('evidence.statement.revision.deployment', st #> '{revision,deployment}', 63);
  PERFORM mlplat._json_num('evidence.statement.revision.revision', st #> '{revision,revision}', 1, 2147483647, true);
  IF pg_catalog.jsonb_typeof(st #> '{revision,spec_digest}') IS DISTINCT FROM 'string'
     OR (st #>> '{revision,spec_digest}') !~ '^[0-9a-f]{64}$' THEN
    PERFORM mlplat._bad_input('evidence.statement.revision.spec_digest', 'must be 64 lower-case hex characters',
      'The spec_digest of the evaluated revision (mlplat.deployment_revisions).');
  END IF;
  PERFORM mlplat._json_num('evidence.statement.baseline_score', st->'baseline_score', -1e12, 1e12, false);
  PERFORM mlplat._json_num('evidence.statement.candidate_score', st->'candidate_score', -1e12, 1e12, false);
  PERFORM mlplat._json_num('evidence.statement.evaluated_at', st->'evaluated_at', 0, 253402300799, false);
  PERFORM mlplat._json_label('evidence.signer', ev->'signer', 63);
  IF pg_catalog.jsonb_typeof(ev->'signature') IS DISTINCT FROM 'string'
     OR (ev->>'signature') !~ '^[A-Za-z0-9+/]{86}==$' THEN
    PERFORM mlplat._bad_input('evidence.signature', 'must be the padded base64 of a 64-byte Ed25519 signature',
      'Sign convert_to(mlplat.canonical_json(statement), ''UTF8'') and encode the 64 bytes in base64 (RFC 4648).');
  END IF;
  sig := pg_catalog.decode(ev->>'signature', 'base64');
  -- 3. the signer: registered, not revoked, named by the campaign's quality gate
  SELECT * INTO signer FROM mlplat.evidence_signers x WHERE x.name = (ev->>'signer');
  IF signer.name IS NULL OR signer.revoked_at IS NOT NULL OR NOT (c.quality_gate->'signers') ? (ev->>'signer') THEN
    PERFORM mlplat._rule('SIGNER_UNKNOWN', pg_catalog.format('evidence signer "%s" is not accepted', ev->>'signer'),
      pg_catalog.format('signer "%s" is %s.', ev->>'signer',
        CASE WHEN signer.name IS NULL THEN 'not registered' WHEN signer.revoked_at IS NOT NULL THEN 'revoked'
             ELSE pg_catalog.format('not in the quality gate of campaign "%s"', c.name) END));
  END IF;
  -- 4. the signature over the canonical statement
  IF NOT mlplat.ed25519_verify(signer.public_key, pg_catalog.convert_to(mlplat.canonical_json(st), 'UTF8'), sig) THEN
    PERFORM mlplat._rule('SIGNATURE_INVALID', 'the evidence signature is not valid',
      pg_catalog.format('the signature does not verify with the public key of signer "%s" over the canonical statement.', signer.name));
  END IF;
  -- 5. binding
  FOREACH f IN ARRAY ARRAY['project', 'campaign', 'campaign_content_id', 'candidate', 'artifact_sha256', 'metric'] LOOP
    -- (a CASE cannot stand in an IF condition: PL/pgSQL ends the condition at its first THEN)
    want := CASE f WHEN 'project' THEN qualify_artifact.project WHEN 'campaign' THEN c.name
                   WHEN 'campaign_content_id' THEN c.content_id WHEN 'candidate' THEN k.name
                   WHEN 'artifact_sha256' THEN art.output_sha256 ELSE c.quality_gate->>'metric' END;
    IF (st->>f) IS DISTINCT FROM want THEN
      PERFORM mlplat._rule('BINDING_MISMATCH', pg_catalog.format('evidence does not match: %s', f),
        pg_catalog.format('statement.%s is "%s"; the artifact''s is "%s".', f, st->>f, want));
    END IF;
  END LOOP;
  dr := mlplat._bound_revision(api.pid, st #>> '{revision,deployment}', (st #>> '{revision,revision}')::numeric::int,
                               art.output_sha256, st #>> '{revision,spec_digest}');
  -- 6. passing
  max_drop := (c.quality_gate->>'max_drop')::numeric;
  IF (st->>'candidate_score')::numeric < (st->>'baseline_score')::numeric - max_drop THEN
    PERFORM mlplat._rule('NOT_PASSING',
      pg_catalog.format('quality evidence does not pass: candidate_score %s < baseline_score %s − max_drop %s',
                        st->>'candidate_score', st->>'baseline_score', max_drop),
      pg_catalog.format('metric %s may drop by at most %s.', c.quality_gate->>'metric', max_drop));
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'artifact_qualification', art.id, NULL, 'QUALIFIED', false)::mlplat.accepted;
  SELECT * INTO q FROM mlplat.artifact_qualifications x WHERE x.artifact_id = art.id;
  IF q.artifact_id IS NULL THEN
    INSERT INTO mlplat.artifact_qualifications (artifact_id, project_id, candidate_id, deployment_id, revision, spec_digest,
      statement, statement_content_id, signer, signature, metric, baseline_score, candidate_score, max_drop,
      qualified_by, db_role, traceparent)
    VALUES (art.id, api.pid, k.id, dr.deployment_id, dr.revision, dr.spec_digest, st, mlplat.content_id(st), signer.name,
            ev->>'signature', st->>'metric', (st->>'baseline_score')::numeric, (st->>'candidate_score')::numeric, max_drop,
            mlplat._actor(), mlplat._db_role(), api.tp)
    ON CONFLICT ON CONSTRAINT artifact_qualifications_pkey DO NOTHING
    RETURNING * INTO q;
    IF q.artifact_id IS NULL THEN
      SELECT * INTO q FROM mlplat.artifact_qualifications x WHERE x.artifact_id = art.id;
    ELSE
      RETURN mlplat._api_accept(api, r,
        pg_catalog.jsonb_build_object('campaign', c.name, 'candidate', k.name, 'statement_content_id', q.statement_content_id,
                                      'signer', signer.name, 'deployment', st #>> '{revision,deployment}', 'revision', dr.revision));
    END IF;
  END IF;
  IF q.statement_content_id <> mlplat.content_id(st) OR q.signer <> signer.name THEN
    RAISE EXCEPTION USING ERRCODE = '42710',
      MESSAGE = pg_catalog.format('optimized artifact %s is already qualified by other evidence', art.id),
      DETAIL = pg_catalog.format('Its qualification statement has content id %s.', q.statement_content_id),
      HINT = 'A qualification is never replaced.';
  END IF;
  RETURN mlplat._api_keep(api, r);
END $$;

-- ---------------------------------------------------------------- administrators

-- p_detail and p_hint: the lab's node functions say it their own way (39_api_lab).
CREATE FUNCTION mlplat._require_admin(
    p_action text,
    p_detail text DEFAULT 'Only platform administrators change platform data (signers, presets, components, capabilities).',
    p_hint text DEFAULT 'Ask an administrator (a member of mlplat.admins).') RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format('permission denied: %s', p_action),
      DETAIL = p_detail, HINT = p_hint;
  END IF;
END $$;

CREATE FUNCTION mlplat.register_evidence_signer(name text, public_key bytea)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'evidence_signer', NULL, NULL, 'REGISTERED', false)::mlplat.accepted;
  api mlplat.api_call := mlplat._api_platform('register_evidence_signer');
  s mlplat.evidence_signers;
  added boolean;
BEGIN
  PERFORM mlplat._check_label('name', register_evidence_signer.name, 63);
  IF register_evidence_signer.public_key IS NULL OR pg_catalog.octet_length(register_evidence_signer.public_key) <> 32 THEN
    PERFORM mlplat._bad_input('public_key', 'must be a 32-byte Ed25519 public key', 'Pass the raw key, e.g. decode(''<64 hex>'', ''hex'').');
  END IF;
  INSERT INTO mlplat.evidence_signers (name, public_key, added_by)
  VALUES (register_evidence_signer.name, register_evidence_signer.public_key, mlplat._actor())
  ON CONFLICT ON CONSTRAINT evidence_signers_pkey DO NOTHING RETURNING * INTO s;
  added := s.name IS NOT NULL;
  IF NOT added THEN
    SELECT * INTO s FROM mlplat.evidence_signers x WHERE x.name = register_evidence_signer.name;
  END IF;
  RETURN mlplat._registered(api, r, added,
    s.public_key = register_evidence_signer.public_key AND s.revoked_at IS NULL,
    ARRAY[pg_catalog.format('evidence signer "%s" already exists with another key or was revoked', s.name),
          'A signer''s key never changes; revocation is final.', 'Register the new key under a new name.'],
    pg_catalog.jsonb_build_object('name', s.name, 'public_key', pg_catalog.encode(s.public_key, 'hex')));
END $$;

CREATE FUNCTION mlplat.revoke_evidence_signer(name text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'evidence_signer', NULL, NULL, 'REVOKED', false)::mlplat.accepted;
  api mlplat.api_call := mlplat._api_platform('revoke_evidence_signer');
BEGIN
  IF NOT EXISTS (SELECT 1 FROM mlplat.evidence_signers x WHERE x.name = revoke_evidence_signer.name) THEN
    PERFORM mlplat._no_such('evidence signer', revoke_evidence_signer.name, 'See mlplat.evidence_signers.');
  END IF;
  UPDATE mlplat.evidence_signers x SET revoked_at = pg_catalog.now()
   WHERE x.name = revoke_evidence_signer.name AND x.revoked_at IS NULL;
  IF FOUND THEN
    PERFORM mlplat._audit('revoke_evidence_signer', NULL, NULL, 'evidence_signer', NULL, r.request_id, api.tp,
      pg_catalog.jsonb_build_object('name', revoke_evidence_signer.name));
  END IF;
  RETURN r;
END $$;

-- The answer of a call that registers something immutable under a name
-- (register_optimization_preset, register_component, register_evidence_signer,
-- register_lab_profile): a new name (p_added) is audited with
-- p_detail; a name registered before is answered as it is when its content is the same
-- (p_same: nothing written, no audit) and refused with 42710 in p_words (message, detail,
-- hint) when it is not.
CREATE FUNCTION mlplat._registered(c mlplat.api_call, r mlplat.accepted, p_added boolean, p_same boolean,
                                   p_words text[], p_detail jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  IF p_added THEN
    RETURN mlplat._api_accept(c, r, p_detail);
  ELSIF NOT p_same THEN
    RAISE EXCEPTION USING ERRCODE = '42710', MESSAGE = p_words[1], DETAIL = p_words[2], HINT = p_words[3];
  END IF;
  RETURN mlplat._api_keep(c, r);
END $$;

CREATE FUNCTION mlplat.register_optimization_preset(name text, plan jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'optimization_preset', NULL, NULL, 'REGISTERED', false)::mlplat.accepted;
  api mlplat.api_call := mlplat._api_platform('register_optimization_preset');
  p jsonb;
  cur mlplat.optimization_presets;
  added boolean;
BEGIN
  PERFORM mlplat._check_label('name', register_optimization_preset.name, 63);
  PERFORM mlplat._json_closed('plan', register_optimization_preset.plan,
    ARRAY['kind', 'builder', 'algorithm', 'precision', 'config', 'hardware', 'spdx', 'max_seconds'],
    ARRAY['kind', 'builder', 'algorithm', 'precision', 'config', 'hardware', 'spdx', 'max_seconds']);
  p := mlplat._campaign_plan('plan', register_optimization_preset.plan);
  INSERT INTO mlplat.optimization_presets (name, plan, content_id, created_by)
  VALUES (register_optimization_preset.name, p, mlplat.content_id(p), mlplat._actor())
  ON CONFLICT ON CONSTRAINT optimization_presets_pkey DO NOTHING RETURNING * INTO cur;
  added := FOUND;
  IF NOT added THEN
    SELECT * INTO cur FROM mlplat.optimization_presets x WHERE x.name = register_optimization_preset.name;
  END IF;
  RETURN mlplat._registered(api, r, added, cur.content_id = mlplat.content_id(p),
    ARRAY[pg_catalog.format('optimization preset "%s" already exists with a different plan', cur.name),
          'Presets are immutable; campaigns froze the plans they expanded.', 'Register a new preset name.'],
    pg_catalog.jsonb_build_object('name', cur.name, 'content_id', cur.content_id));
END $$;

-- ---------------------------------------------------------------- views

CREATE VIEW mlplat.campaign_status WITH (security_invoker = true) AS
SELECT p.name AS project, c.name AS campaign,
       mlplat._campaign_state_of(s.building > 0, s.planned > 0, s.planned < s.candidates, s.built = s.candidates AND s.candidates > 0,
                                 s.built > 0, s.expired_not_run > 0, c.cancel_requested_at IS NOT NULL,
                                 a.expires_at IS NOT NULL, a.expires_at <= pg_catalog.now()) AS state,
       c.content_id,
       m.name AS base_model, v.version AS base_version, c.base_artifact_sha256, c.model_family,
       s.candidates, s.planned, s.building, s.built, s.failed, s.cancelled, s.not_run,
       a.approved_by, a.max_spend_gpu_seconds, a.expires_at,
       s.spend_committed AS spend_committed_gpu_seconds, s.spend_actual AS spend_actual_gpu_seconds,
       c.cancel_requested_at, c.created_by, c.created_at
FROM mlplat.campaigns c
JOIN mlplat.projects p ON p.id = c.project_id
JOIN mlplat.model_versions v ON v.id = c.base_model_version_id
JOIN mlplat.models m ON m.id = v.model_id
LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
CROSS JOIN LATERAL (
  SELECT pg_catalog.count(*) AS candidates,
         pg_catalog.count(*) FILTER (WHERE k.status = 'PLANNED') AS planned,
         pg_catalog.count(*) FILTER (WHERE mlplat.candidate_is_building(k.status)) AS building,
         pg_catalog.count(*) FILTER (WHERE k.status = 'BUILT') AS built,
         pg_catalog.count(*) FILTER (WHERE k.status = 'FAILED') AS failed,
         pg_catalog.count(*) FILTER (WHERE k.status = 'CANCELLED') AS cancelled,
         pg_catalog.count(*) FILTER (WHERE k.status = 'NOT_RUN') AS not_run,
         pg_catalog.count(*) FILTER (WHERE k.status = 'NOT_RUN' AND k.reason_code = 'APPROVAL_EXPIRED') AS expired_not_run,
         coalesce(pg_catalog.sum(CASE WHEN mlplat.candidate_is_building(k.status) THEN k.reserved_gpu_seconds
                                      ELSE k.actual_gpu_seconds END), 0)::bigint AS spend_committed,
         coalesce(pg_catalog.sum(k.actual_gpu_seconds), 0)::bigint AS spend_actual
    FROM mlplat.campaign_candidates k WHERE k.campaign_id = c.id) s;

CREATE VIEW mlplat.optimized_artifact_status WITH (security_invoker = true) AS
SELECT o.*, c.name AS campaign, k.name AS candidate, (q.artifact_id IS NOT NULL) AS qualified,
       q.at AS qualified_at, q.revision AS qualified_revision, q.baseline_score, q.candidate_score, q.signer
FROM mlplat.optimized_artifacts o
JOIN mlplat.campaigns c ON c.id = o.campaign_id
JOIN mlplat.campaign_candidates k ON k.id = o.candidate_id
LEFT JOIN mlplat.artifact_qualifications q ON q.artifact_id = o.id;

CREATE VIEW mlplat.campaign_candidate_status WITH (security_invoker = true) AS
SELECT p.name AS project, c.name AS campaign, k.name AS candidate, k.ordinal, k.plan->>'kind' AS kind,
       k.plan->>'algorithm' AS algorithm, k.plan->>'precision' AS precision, k.status, k.reason_code, k.status_reason,
       k.job_name AS job, k.reserved_gpu_seconds, k.actual_gpu_seconds,
       coalesce((SELECT pg_catalog.jsonb_object_agg(x.metric, pg_catalog.jsonb_build_object('value', x.value, 'estimator', x.estimator))
                   FROM (SELECT DISTINCT ON (pr.metric) pr.metric, pr.value, pr.estimator FROM mlplat.candidate_predictions pr
                          WHERE pr.candidate_id = k.id ORDER BY pr.metric, pr.seq DESC) x), '{}') AS predicted,
       coalesce((SELECT pg_catalog.jsonb_object_agg(x.metric, pg_catalog.jsonb_build_object('value', x.value,
                          'revision', x.revision, 'measured_at', x.measured_at))
                   FROM (SELECT DISTINCT ON (me.metric) me.metric, me.value, me.revision, me.measured_at
                           FROM mlplat.candidate_measurements me
                          WHERE me.candidate_id = k.id ORDER BY me.metric, me.seq DESC) x), '{}') AS actual,
       k.evidence_version, o.id AS artifact_id, (q.artifact_id IS NOT NULL) AS qualified
FROM mlplat.campaign_candidates k
JOIN mlplat.campaigns c ON c.id = k.campaign_id
JOIN mlplat.projects p ON p.id = k.project_id
LEFT JOIN mlplat.optimized_artifacts o ON o.candidate_id = k.id
LEFT JOIN mlplat.artifact_qualifications q ON q.artifact_id = o.id;

-- ---------------------------------------------------------------- security

SELECT mlplat._member_reads('campaigns', 'campaign_approvals', 'campaign_candidates', 'candidate_transitions',
                            'candidate_predictions', 'candidate_measurements', 'optimized_artifacts',
                            'artifact_qualifications');
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['campaigns', 'campaign_approvals', 'campaign_candidates', 'candidate_transitions',
                           'candidate_predictions', 'candidate_measurements', 'optimized_artifacts',
                           'artifact_qualifications', 'evidence_signers', 'optimization_presets'] LOOP
    EXECUTE pg_catalog.format('GRANT SELECT ON mlplat.%I TO PUBLIC', t);
    PERFORM mlplat._config_dump(t);
  END LOOP;
END $$;
GRANT SELECT ON mlplat.campaign_status, mlplat.campaign_candidate_status, mlplat.optimized_artifact_status TO PUBLIC;

REVOKE ALL ON FUNCTION mlplat._campaign_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._candidate_guard() FROM PUBLIC;
-- the status view calls the decision as the reader (security_invoker); _campaign_state reads
-- through the caller's row-level security, so another project's campaign derives to NULL
REVOKE ALL ON FUNCTION mlplat._campaign_state(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mlplat._campaign_state(bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_state_of(boolean, boolean, boolean, boolean, boolean, boolean, boolean, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mlplat._campaign_state_of(boolean, boolean, boolean, boolean, boolean, boolean, boolean, boolean, boolean) TO PUBLIC;
REVOKE ALL ON FUNCTION mlplat._json_closed(text, jsonb, text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._json_label(text, jsonb, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._spdx_error(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_plan(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_plan_problem(text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_candidates_problem(jsonb, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._prediction_problem(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_candidates_expand(jsonb, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._builder_components(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_plan_resolved(jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._check_prediction(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_expand(bigint, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaign_plan_shape(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._find_campaign(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._find_candidate(mlplat.campaigns, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._find_artifact(bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._candidate_transition(mlplat.campaign_candidates, text, text, jsonb, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._bound_revision(bigint, text, int, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._render_builder_job(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._rule(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._require_admin(text, text, text) FROM PUBLIC;
