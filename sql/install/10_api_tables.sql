-- 12_api_projects_tables: projects and their members.
--
-- Reconciled entities share one set of columns the reconcilers rely on:
--   generation (bumped by every intent change), observed_generation, status, status_reason,
--   row_version (bumped by every write; compare-and-swap compares it), next_attempt_at,
--   attempts, last_error, traceparent, observed, observed_at, epoch, created_at, updated_at.

-- The bookkeeping columns of every reconciled entity (row_version .. updated_at above), written
-- once: each entity's table copies them with LIKE ... INCLUDING DEFAULTS after its own
-- generation, observed_generation, status and status_reason, so a new kind gets them in one
-- line and no two kinds can drift apart in a type or a default the claim and write-back code
-- relies on.  It holds no rows and grants nothing; LIKE copies names, types, NOT NULL and
-- defaults, so the tables do not depend on it.
CREATE TABLE mlplat._reconciled_columns (
  row_version     bigint NOT NULL DEFAULT 1,
  next_attempt_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts        int NOT NULL DEFAULT 0,
  last_error      text,
  traceparent     text,
  observed        jsonb,
  observed_at     timestamptz,
  epoch           bigint,
  created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- pg_dump keeps the rows of an extension's tables only when they are marked as its
-- configuration, and a table's identity sequence must be marked with it or a restored
-- database hands out ids from 1 again and collides with its own rows.  One function, so every
-- kind's tables are marked by the same rule (45_api_views, 37_api_campaigns, 39_api_lab).
-- Only an extension script can call it: pg_extension_config_dump refuses anywhere else.
CREATE FUNCTION mlplat._config_dump(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    PERFORM pg_catalog.pg_extension_config_dump(('mlplat.' || t)::regclass, '');
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = ('mlplat.' || t)::regclass
               AND a.attname = 'id' AND a.attidentity <> '') THEN
      PERFORM pg_catalog.pg_extension_config_dump(
        pg_catalog.pg_get_serial_sequence('mlplat.' || t, 'id')::regclass, '');
    END IF;
  END LOOP;
END $$;

-- Row-level security of a project's rows, the same for every table that has them: on, with
-- one policy, member_reads, that shows a row to whoever may view its project
-- (mlplat._can_view).  Writes need no policy: callers hold no write privilege on any table,
-- and the API functions that write run as the owner.  (projects reads _can_view(id), its own
-- id: 45_api_views.)
CREATE FUNCTION mlplat._member_reads(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    EXECUTE pg_catalog.format('ALTER TABLE mlplat.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE pg_catalog.format('CREATE POLICY member_reads ON mlplat.%I FOR SELECT USING (mlplat._can_view(project_id))', t);
  END LOOP;
END $$;

-- Refuses changes to append-only tables (audit events, deployment revisions), except the
-- DELETE of a row past retention (mlplat._purgeable, 80_retention): history of a living
-- entity stays, even for the owner.
CREATE FUNCTION mlplat._refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  IF TG_OP = 'DELETE' AND mlplat._purgeable(TG_TABLE_NAME, pg_catalog.to_jsonb(OLD)) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s on %s is not allowed: rows are immutable', TG_OP, TG_TABLE_NAME),
    DETAIL = pg_catalog.format('%s is append-only.', TG_TABLE_NAME),
    HINT = 'Record a new row instead of changing history.';
END $$;

-- Makes tables append-only, the same way for each: a row trigger (_refuse_change, which lets
-- retention delete what is past it) and a statement trigger for TRUNCATE, which no row
-- trigger sees.  One function, so no append-only table gets the first without the second.
-- (campaigns, evidence_signers and campaign_candidates are not append-only: each has a
-- guard that lets one column change, 37_api_campaigns, and only the TRUNCATE half here.)
CREATE FUNCTION mlplat._append_only(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON mlplat.%I
                                 FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change()', t || '_immutable', t);
    EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE TRUNCATE ON mlplat.%I
                                 FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change()', t || '_no_truncate', t);
  END LOOP;
END $$;

CREATE TABLE mlplat.projects (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name                text NOT NULL UNIQUE,
  gpu_quota           int NOT NULL CHECK (gpu_quota >= 0),
  cpu_quota           text,
  memory_quota        text,
  generation          bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  status              text NOT NULL DEFAULT 'PROVISIONING'
                      CHECK (status IN ('PROVISIONING', 'READY', 'FAILED', 'DELETING', 'DELETED')),
  status_reason       text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,
  -- what the project's intents determine, rendered by them (mlplat._project_render_store)
  rendered            json,
  rendered_content_id text
);

CREATE TABLE mlplat.members (
  project_id bigint NOT NULL REFERENCES mlplat.projects (id),
  principal  text NOT NULL,
  role       text NOT NULL CHECK (role IN ('viewer', 'developer', 'deployer', 'owner')),
  granted_by text NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (project_id, principal, role)
);
CREATE INDEX ON mlplat.members (principal);

CREATE TABLE mlplat.models (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id bigint NOT NULL REFERENCES mlplat.projects (id),
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (project_id, name)
);

CREATE TABLE mlplat.model_versions (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id       bigint NOT NULL REFERENCES mlplat.projects (id),
  model_id         bigint NOT NULL REFERENCES mlplat.models (id),
  version          text NOT NULL,
  artifact_uri     text NOT NULL,
  artifact_sha256  text NOT NULL CHECK (artifact_sha256 ~ '^[0-9a-f]{64}$'),
  runtime_kind     text NOT NULL,
  model_format     text NOT NULL,
  stage            text NOT NULL DEFAULT 'NONE' CHECK (stage IN ('NONE', 'CANDIDATE', 'CHAMPION', 'ARCHIVED')),
  stage_changed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  created_by       text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (model_id, version)
);
-- At most one CHAMPION per model.
CREATE UNIQUE INDEX model_versions_one_champion ON mlplat.model_versions (model_id) WHERE stage = 'CHAMPION';

-- Desired registry aliases (champion, candidate) -> version; the model_aliases reconciler
-- makes the registry equal.  version_id NULL means the alias must not exist.
CREATE TABLE mlplat.model_aliases (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  model_id            bigint NOT NULL REFERENCES mlplat.models (id),
  alias               text NOT NULL CHECK (alias IN ('champion', 'candidate')),
  version_id          bigint REFERENCES mlplat.model_versions (id),
  moved_by            text,
  generation          bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  status              text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SYNCED', 'FAILED')),
  status_reason       text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,
  UNIQUE (model_id, alias)
);

CREATE TABLE mlplat.deployments (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  name                text NOT NULL,
  desired_revision    int,
  previous_revision   int,
  latest_revision     int NOT NULL DEFAULT 0,
  observed_revision   int,                        -- the revision last applied
  ready_revision      int,                        -- the revision last observed READY: what serves
  desired_gpus        int NOT NULL DEFAULT 0,     -- gpus x max_replicas of the desired revision
  endpoint            text,
  generation          bigint NOT NULL DEFAULT 0,
  observed_generation bigint NOT NULL DEFAULT 0,
  status              text NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'DEPLOYING', 'READY', 'FAILED', 'DRIFTED', 'DELETING', 'DELETED')),
  status_reason       text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,
  UNIQUE (project_id, name)
);

-- Immutable, numbered per deployment; spec is exactly what the reconciler applies.
CREATE TABLE mlplat.deployment_revisions (
  deployment_id    bigint NOT NULL REFERENCES mlplat.deployments (id),
  revision         int NOT NULL,
  project_id       bigint NOT NULL REFERENCES mlplat.projects (id),
  model_version_id bigint NOT NULL REFERENCES mlplat.model_versions (id),
  intent           jsonb NOT NULL,   -- the caller's arguments that shaped the spec
  spec             jsonb NOT NULL,   -- rendered KServe InferenceService
  spec_digest      text NOT NULL,
  created_by       text NOT NULL,
  traceparent      text,
  created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (deployment_id, revision)
);
SELECT mlplat._append_only('deployment_revisions');

-- Runs and pipeline runs (kind = 'run' | 'pipeline').
CREATE TABLE mlplat.runs (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  name                text NOT NULL,
  kind                text NOT NULL CHECK (kind IN ('run', 'pipeline')),
  spec                jsonb NOT NULL,
  gpus                int NOT NULL DEFAULT 0,
  created_by          text NOT NULL,
  generation          bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  status              text NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'SUCCEEDED', 'FAILED',
                                        'CANCEL_REQUESTED', 'CANCELLED')),
  status_reason       text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,
  UNIQUE (project_id, name)
);
CREATE INDEX runs_active ON mlplat.runs (project_id)
  WHERE mlplat.run_is_active(status);

CREATE TABLE mlplat.run_steps (
  run_id     bigint NOT NULL REFERENCES mlplat.runs (id),
  project_id bigint NOT NULL REFERENCES mlplat.projects (id),
  name       text NOT NULL,
  ordinal    int NOT NULL,
  spec       jsonb NOT NULL,
  depends_on text[] NOT NULL DEFAULT '{}',
  phase      text,        -- written by the runs reconciler (Argo node phase)
  exit_code  text,        -- Argo reports exit codes as strings
  PRIMARY KEY (run_id, name)
);

CREATE TABLE mlplat.rollouts (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  deployment_id       bigint NOT NULL REFERENCES mlplat.deployments (id),
  baseline_revision   int NOT NULL,
  target_revision     int NOT NULL,
  policy              jsonb NOT NULL,
  requested_action    text CHECK (requested_action IN ('PROMOTE', 'ABORT')),
  current_fraction    numeric NOT NULL DEFAULT 0,
  -- GPUs reserved for the canary while the rollout is active: the target revision runs beside
  -- the previous one, so its gpus x max_replicas count against the quota until the rollout ends
  surge_gpus          int NOT NULL DEFAULT 0 CHECK (surge_gpus >= 0),
  created_by          text NOT NULL,
  generation          bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  status              text NOT NULL DEFAULT 'PROGRESSING'
                      CHECK (status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'PROMOTED',
                                        'ROLLING_BACK', 'ROLLED_BACK', 'ABORTED', 'FAILED')),
  status_reason       text,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS
);
-- At most one active rollout per deployment.
CREATE UNIQUE INDEX rollouts_one_active ON mlplat.rollouts (deployment_id)
  WHERE mlplat.rollout_is_active(status);
