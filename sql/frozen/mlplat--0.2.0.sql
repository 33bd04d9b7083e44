-- mlplat 0.2.0: generated from sql/install/*.sql; edit the parts, not this file.
\echo Use "CREATE EXTENSION mlplat" to load this file. \quit

-- ==== sql/install/00_foundation.sql
-- 00_foundation: what every release has had since 0.1.0.
-- Later parts must not change these objects without an upgrade step.

COMMENT ON SCHEMA mlplat IS 'mlplat: ML platform control plane (intent, audit, reconcilers)';

CREATE FUNCTION mlplat.version(OUT extension_version text, OUT library_version text)
RETURNS record
LANGUAGE C STRICT VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_version';
COMMENT ON FUNCTION mlplat.version() IS
  'Installed extension version and loaded library version; an error with a hint when they differ.';

REVOKE ALL ON SCHEMA mlplat FROM PUBLIC;
GRANT USAGE ON SCHEMA mlplat TO PUBLIC;

-- ==== sql/install/10_api_tables.sql
-- 12_api_projects_tables: projects and their members.
--
-- Reconciled entities share one set of columns the reconcilers rely on:
--   generation (bumped by every intent change), observed_generation, status, status_reason,
--   row_version (bumped by every write; compare-and-swap compares it), next_attempt_at,
--   attempts, last_error, traceparent, observed, observed_at, epoch, created_at, updated_at.

-- Refuses changes to append-only tables (audit events, deployment revisions).
CREATE FUNCTION mlplat._refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s on %s is not allowed: rows are immutable', TG_OP, TG_TABLE_NAME),
    DETAIL = pg_catalog.format('%s is append-only.', TG_TABLE_NAME),
    HINT = 'Record a new row instead of changing history.';
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
  row_version         bigint NOT NULL DEFAULT 1,
  next_attempt_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts            int NOT NULL DEFAULT 0,
  last_error          text,
  traceparent         text,
  observed            jsonb,
  observed_at         timestamptz,
  epoch               bigint,
  created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now()
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
  row_version         bigint NOT NULL DEFAULT 1,
  next_attempt_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts            int NOT NULL DEFAULT 0,
  last_error          text,
  traceparent         text,
  observed            jsonb,
  observed_at         timestamptz,
  epoch               bigint,
  created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
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
  row_version         bigint NOT NULL DEFAULT 1,
  next_attempt_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts            int NOT NULL DEFAULT 0,
  last_error          text,
  traceparent         text,
  observed            jsonb,
  observed_at         timestamptz,
  epoch               bigint,
  created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
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
CREATE TRIGGER deployment_revisions_immutable BEFORE UPDATE OR DELETE ON mlplat.deployment_revisions
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER deployment_revisions_no_truncate BEFORE TRUNCATE ON mlplat.deployment_revisions
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

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
  row_version         bigint NOT NULL DEFAULT 1,
  next_attempt_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts            int NOT NULL DEFAULT 0,
  last_error          text,
  traceparent         text,
  observed            jsonb,
  observed_at         timestamptz,
  epoch               bigint,
  created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (project_id, name)
);
CREATE INDEX runs_active ON mlplat.runs (project_id)
  WHERE status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED');

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
  row_version         bigint NOT NULL DEFAULT 1,
  next_attempt_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts            int NOT NULL DEFAULT 0,
  last_error          text,
  traceparent         text,
  observed            jsonb,
  observed_at         timestamptz,
  epoch               bigint,
  created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now()
);
-- At most one active rollout per deployment.
CREATE UNIQUE INDEX rollouts_one_active ON mlplat.rollouts (deployment_id)
  WHERE status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK');

-- ==== sql/install/14_api_core.sql
-- 10_api_core: identity, authorization as data, idempotency, audit, trace context.
--
-- Conventions for every API function in later parts:
--   SECURITY DEFINER, SET search_path = pg_catalog, mlplat, pg_temp, every
--   reference schema-qualified; authorize -> idempotency claim -> validate ->
--   write desired state + audit -> wake on commit -> return mlplat.accepted.
-- Internal helpers (names starting with '_') are PL/pgSQL without a SET clause: they are
-- not executable by PUBLIC (45_api_views.sql revokes them), so they only ever run inside an
-- entry point and inherit its pinned search_path.  A SET clause per helper call costs a GUC
-- save/restore and a search-path recomputation, and SQL-language helpers re-plan on every
-- transaction; together that tripled the cost of deploy().

CREATE FUNCTION mlplat._wake_on_commit(kind text) RETURNS void
LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'mlplat_wake_on_commit';
REVOKE ALL ON FUNCTION mlplat._wake_on_commit(text) FROM PUBLIC;

CREATE TYPE mlplat.accepted AS (
  request_id uuid,
  entity     text,
  entity_id  bigint,
  revision   int,
  status     text,
  replayed   boolean
);

-- One row: the identity of this installation, stamped on every external object
-- (label mlplat.io/instance) so two installations never adopt each other's objects.
CREATE TABLE mlplat.installation (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  instance_id text NOT NULL DEFAULT pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', ''),
  created_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO mlplat.installation DEFAULT VALUES;

-- Platform administrators (superusers are administrators too).
CREATE TABLE mlplat.admins (
  principal  text PRIMARY KEY,
  granted_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Database roles allowed to act for a person via SET mlplat.on_behalf_of.
CREATE TABLE mlplat.impersonators (
  app_role   text PRIMARY KEY,
  granted_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Authorization is data: which project role may perform which action.
CREATE TABLE mlplat.policies (
  role   text NOT NULL CHECK (role IN ('viewer', 'developer', 'deployer', 'owner')),
  action text NOT NULL,
  PRIMARY KEY (role, action)
);
INSERT INTO mlplat.policies (role, action)
SELECT r.role, a.action
FROM (VALUES ('viewer', 1), ('developer', 2), ('deployer', 3), ('owner', 4)) AS r(role, rank)
JOIN (VALUES ('view', 1),
             ('register_model', 2), ('start_run', 2), ('start_pipeline_run', 2), ('cancel_run', 2),
             ('deploy', 3), ('rollback_deployment', 3), ('undeploy', 3), ('set_model_stage', 3),
             ('start_rollout', 3), ('promote_rollout', 3), ('abort_rollout', 3),
             ('set_project_quota', 4), ('delete_project', 4), ('grant_role', 4), ('revoke_role', 4))
     AS a(action, min_rank) ON r.rank >= a.min_rank;

-- Idempotency records: one per (principal, action, key).
CREATE TABLE mlplat.idempotency_keys (
  principal    text NOT NULL,
  action       text NOT NULL,
  key          text NOT NULL,
  request_hash text NOT NULL,
  result       mlplat.accepted,
  created_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (principal, action, key)
);
-- run_retention purges by age; keys arrive in created_at order (see spans_end_time)
CREATE INDEX idempotency_keys_created_at ON mlplat.idempotency_keys USING brin (created_at);

-- Append-only audit trail.
CREATE TABLE mlplat.audit_events (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  actor       text NOT NULL,
  db_role     text NOT NULL,
  action      text NOT NULL,
  project     text,
  project_id  bigint,
  entity      text,
  entity_id   bigint,
  request_id  uuid,
  trace_id    text,
  traceparent text,
  detail      jsonb NOT NULL DEFAULT '{}',
  epoch       bigint,
  controller  text
);
CREATE INDEX ON mlplat.audit_events (project_id, at);


CREATE TRIGGER audit_events_immutable BEFORE UPDATE OR DELETE ON mlplat.audit_events
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON mlplat.audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

-- ---------------------------------------------------------------- identity

-- The database role that called us (SET ROLE honoured; current_user is the definer here).
CREATE FUNCTION mlplat._db_role() RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT CASE WHEN pg_catalog.current_setting('role') = 'none'
                THEN SESSION_USER::text ELSE pg_catalog.current_setting('role') END);
END $$;

CREATE FUNCTION mlplat._is_superuser(r text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce((SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = r), false));
END $$;

-- The person the request is for: mlplat.on_behalf_of when the caller holds the
-- impersonation right, else the database role.
CREATE FUNCTION mlplat._actor() RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  obo text := coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '');
  r text;
BEGIN
  IF obo = '' THEN
    RETURN mlplat._db_role();
  END IF;
  r := mlplat._db_role();
  IF NOT mlplat._is_superuser(r)
     AND NOT EXISTS (SELECT 1 FROM mlplat.impersonators i WHERE i.app_role = r) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('role "%s" may not act on behalf of another person', r),
      DETAIL = 'mlplat.on_behalf_of is set but the role holds no impersonation right.',
      HINT = 'An administrator must add the role to mlplat.impersonators, or RESET mlplat.on_behalf_of.';
  END IF;
  IF pg_catalog.length(obo) > 63 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'mlplat.on_behalf_of is too long',
      DETAIL = 'A principal name has at most 63 characters.', HINT = 'Use the person''s principal name.';
  END IF;
  -- grant_role never accepts such a principal, and echoing one in a denial would let the
  -- caller write forged lines into the server log
  IF obo ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'mlplat.on_behalf_of contains a control character',
      DETAIL = 'A principal name has 1 to 63 printable characters.', HINT = 'Use the person''s principal name.';
  END IF;
  RETURN obo;
END $$;

CREATE FUNCTION mlplat._is_admin() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT mlplat._is_superuser(mlplat._db_role()) AND coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '') = ''
        OR EXISTS (SELECT 1 FROM mlplat.admins a WHERE a.principal = mlplat._actor()));
END $$;

-- ---------------------------------------------------------------- trace context

-- The traceparent an intent stores: the caller's trace (mlplat.traceparent, validated when
-- set) or a new one, with a new span id (pg_strong_random) as parent-id: the id of the
-- intent's own API span (mlplat._span_api), so reconciler spans become its children.
CREATE FUNCTION mlplat._traceparent() RETURNS text
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'mlplat_new_traceparent';

-- ---------------------------------------------------------------- validation helpers

CREATE FUNCTION mlplat._bad_input(field text, rule text, hint text, code text DEFAULT '22023')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = code,
    MESSAGE = pg_catalog.format('invalid %s: %s', field, rule),
    DETAIL = pg_catalog.format('The argument %s was rejected before anything was written.', field),
    HINT = hint;
END $$;

-- DNS-1123 label of at most max_len characters.
CREATE FUNCTION mlplat._check_label(field text, v text, max_len int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF v IS NULL THEN
    PERFORM mlplat._bad_input(field, 'must not be null', 'Pass a name.');
  ELSIF pg_catalog.length(v) OPERATOR(pg_catalog.>) max_len OR v !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN
    PERFORM mlplat._bad_input(field,
      pg_catalog.format('must be a DNS-1123 label of 1 to %s characters', max_len),
      'Use lower-case letters, digits and ''-'', starting and ending with a letter or digit.');
  END IF;
END $$;

CREATE FUNCTION mlplat._check_quantity(field text, v text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF v IS NOT NULL AND (pg_catalog.length(v) > 32
      OR v !~ '^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$') THEN
    PERFORM mlplat._bad_input(field, 'must be a Kubernetes quantity such as 4, 500m or 16Gi',
      'Use a non-negative number with an optional suffix m, k, M, G, Ki, Mi, Gi, ...');
  END IF;
END $$;

CREATE FUNCTION mlplat._check_key(k text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF k IS NOT NULL AND (pg_catalog.length(k) < 1 OR pg_catalog.length(k) > 128) THEN
    PERFORM mlplat._bad_input('idempotency_key', 'must have 1 to 128 characters',
      'Use a client-generated UUID or similar token.');
  END IF;
END $$;

-- env: an object of string -> string, names like environment variables.
CREATE FUNCTION mlplat._check_env(field text, env jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  e record;
BEGIN
  IF env IS NULL THEN
    RETURN;
  END IF;
  IF pg_catalog.jsonb_typeof(env) <> 'object' THEN
    PERFORM mlplat._bad_input(field, 'must be a JSON object of name -> string value',
      'Pass e.g. ''{"LOG_LEVEL": "info"}''.');
  END IF;
  -- fast path: one query decides; the loop below only names the offending variable
  IF (SELECT pg_catalog.count(*) <= 64
             AND coalesce(pg_catalog.bool_and(kv.key ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
                                              AND pg_catalog.jsonb_typeof(kv.value) = 'string'
                                              AND pg_catalog.length(kv.value #>> '{}') <= 4096), true)
      FROM pg_catalog.jsonb_each(env) kv) THEN
    RETURN;
  END IF;
  IF (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(env)) > 64 THEN
    PERFORM mlplat._bad_input(field, 'has more than 64 variables', 'Keep configuration small; use a config file for more.');
  END IF;
  FOR e IN SELECT * FROM pg_catalog.jsonb_each(env) LOOP
    IF e.key !~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$' THEN
      PERFORM mlplat._bad_input(field, 'variable names must match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters)',
        'Rename the variable.');
    END IF;
    IF pg_catalog.jsonb_typeof(e.value) <> 'string' THEN
      PERFORM mlplat._bad_input(field, pg_catalog.format('value of %s must be a string', e.key),
        'Quote numbers and booleans: {"N": "1"}.');
    END IF;
    IF pg_catalog.length(e.value #>> '{}') > 4096 THEN
      PERFORM mlplat._bad_input(field, pg_catalog.format('value of %s is longer than 4096 characters', e.key),
        'Keep values short; mount large configuration as a file.');
    END IF;
  END LOOP;
END $$;

-- The fast yes of _check_env (src/validate/env.c): true only when _check_env accepts env.  On
-- false, call _check_env: it decides, and names the offending variable.
CREATE FUNCTION mlplat._env_ok(env jsonb) RETURNS boolean
LANGUAGE C STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_env_ok';

-- ---------------------------------------------------------------- authorization

-- Project id if the actor may perform action on the project, else 42501.
-- A missing project is reported as a denial to non-administrators (no existence leak).
CREATE FUNCTION mlplat._authorize(p_action text, p_project text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  pid bigint;
  allowed boolean;
  who text := mlplat._actor();
BEGIN
  SELECT p.id, EXISTS (SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
                        WHERE m.project_id = p.id AND m.principal = who AND po.action = p_action)
  INTO pid, allowed
  FROM mlplat.projects p WHERE p.name = p_project;
  IF pid IS NOT NULL AND (allowed OR mlplat._is_admin()) THEN
    RETURN pid;
  END IF;
  IF pid IS NULL AND mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('project "%s" does not exist', p_project),
      HINT = 'Create it with mlplat.create_project().';
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42501',
    MESSAGE = pg_catalog.format('permission denied: %s on project "%s"', p_action, p_project),
    DETAIL = pg_catalog.format('Principal "%s" holds no role in the project whose policy allows %s.', who, p_action),
    HINT = 'Ask a project owner to grant a role that allows this action.';
END $$;

-- May the actor read the project's rows?  Used by row-level security; SECURITY DEFINER so
-- the membership lookup itself is not subject to RLS (no recursion).
CREATE FUNCTION mlplat._can_view(p_project_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  RETURN EXISTS (
    SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
    WHERE m.project_id = p_project_id AND m.principal = mlplat._actor() AND po.action = 'view') OR mlplat._is_admin();
END $$;

-- ---------------------------------------------------------------- idempotency

-- Claim (principal, action, key).  Returns NULL when this call owns the key (go on and
-- do the work, then _idem_store), or the stored result marked replayed.  A concurrent
-- claimer of the same key waits for the first to commit (unique index), then replays.
CREATE FUNCTION mlplat._idem_claim(p_action text, p_key text, p_request jsonb, p_who text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  h text;
  who text;
  rec mlplat.idempotency_keys;
  res mlplat.accepted;
BEGIN
  IF p_key IS NULL THEN
    RETURN NULL;
  END IF;
  IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 128 THEN
    PERFORM mlplat._check_key(p_key);   -- raises (a PERFORM per call cost a statement)
  END IF;
  h := pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_request::text, 'UTF8')), 'hex');
  who := coalesce(p_who, mlplat._actor());
  INSERT INTO mlplat.idempotency_keys (principal, action, key, request_hash)
  VALUES (who, p_action, p_key, h) ON CONFLICT DO NOTHING;
  IF FOUND THEN
    RETURN NULL;
  END IF;
  SELECT * INTO rec FROM mlplat.idempotency_keys k
  WHERE k.principal = who AND k.action = p_action AND k.key = p_key;
  IF rec.request_hash <> h THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = pg_catalog.format('idempotency key already used for a different %s request', p_action),
      DETAIL = 'The same key was used before with different arguments.',
      HINT = 'Use a new idempotency key for a new request.';
  END IF;
  res := rec.result;
  res.replayed := true;
  RETURN res;
END $$;

CREATE FUNCTION mlplat._idem_store(p_action text, p_key text, r mlplat.accepted, p_who text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_key IS NOT NULL THEN
    UPDATE mlplat.idempotency_keys k SET result = r
    WHERE k.principal = coalesce(p_who, mlplat._actor()) AND k.action = p_action AND k.key = p_key;
  END IF;
END $$;

-- ---------------------------------------------------------------- audit

CREATE FUNCTION mlplat._audit(p_action text, p_project text, p_project_id bigint, p_entity text,
                              p_entity_id bigint, p_request_id uuid, p_traceparent text, p_detail jsonb,
                              p_who text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id,
                                   request_id, trace_id, traceparent, detail)
  VALUES (coalesce(p_who, mlplat._actor()), mlplat._db_role(), p_action, p_project, p_project_id, p_entity,
          p_entity_id, p_request_id, pg_catalog.split_part(p_traceparent, '-', 2), p_traceparent,
          coalesce(p_detail, '{}'));
  PERFORM mlplat._span_api(p_action, p_traceparent, p_project_id, p_entity, p_entity_id, p_request_id);
END $$;

-- A lost compare-and-swap.
CREATE FUNCTION mlplat._cas_lost(p_entity text, p_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '40001',
    MESSAGE = pg_catalog.format('%s "%s" changed concurrently', p_entity, p_name),
    DETAIL = 'Its status or row version is no longer the one this transaction read.',
    HINT = 'Retry the transaction: re-read the current state and decide again.';
END $$;

-- ==== sql/install/20_api_projects.sql
-- 20_api_projects: projects, quotas and membership.

-- GPUs the project has committed: every deployment's desired allocation (gpus x max_replicas)
-- that is not yet DELETED, every active rollout's canary reservation, plus every active run's
-- GPUs: desired allocations, never transient ready counts.  Callers that need a stable answer
-- hold the project's quota lock.
CREATE FUNCTION mlplat._gpus_in_use(p_project_id bigint, p_except_deployment bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce((SELECT pg_catalog.sum(d.desired_gpus) FROM mlplat.deployments d
                     WHERE d.project_id = p_project_id AND d.status <> 'DELETED'
                       AND d.id IS DISTINCT FROM p_except_deployment), 0)
         + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro
                     WHERE ro.project_id = p_project_id
                       AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')
                       AND ro.deployment_id IS DISTINCT FROM p_except_deployment), 0)
         + coalesce((SELECT pg_catalog.sum(r.gpus) FROM mlplat.runs r
                     WHERE r.project_id = p_project_id
                       AND r.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')), 0));
END $$;

CREATE FUNCTION mlplat._check_quotas(gpu_quota int, cpu_quota text, memory_quota text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF gpu_quota IS NULL OR gpu_quota < 0 OR gpu_quota > 100000 THEN
    PERFORM mlplat._bad_input('gpu_quota', 'must be an integer from 0 to 100000', 'Pass the number of GPUs the project may use.');
  END IF;
  PERFORM mlplat._check_quantity('cpu_quota', cpu_quota);
  PERFORM mlplat._check_quantity('memory_quota', memory_quota);
END $$;

CREATE FUNCTION mlplat._wrong_state(p_entity text, p_name text, p_status text, p_action text, p_hint text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s "%s" is %s: %s is not possible', p_entity, p_name, p_status, p_action),
    DETAIL = pg_catalog.format('The %s''s current status does not allow %s.', p_entity, p_action),
    HINT = p_hint;
END $$;

CREATE FUNCTION mlplat.create_project(name text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                      memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL,
                                      owner text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  p mlplat.projects;
BEGIN
  IF NOT mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('permission denied: create_project on project "%s"', create_project.name),
      DETAIL = 'Only platform administrators create projects.',
      HINT = 'Ask an administrator (a member of mlplat.admins) to create the project and grant you a role.';
  END IF;
  r := mlplat._idem_claim('create_project', create_project.idempotency_key,
         pg_catalog.jsonb_build_array(create_project.name, create_project.gpu_quota, create_project.cpu_quota,
                                      create_project.memory_quota, create_project.owner));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  PERFORM mlplat._check_label('name', create_project.name, 59);
  PERFORM mlplat._check_quotas(create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota);
  IF create_project.owner IS NOT NULL AND (pg_catalog.length(create_project.owner) NOT BETWEEN 1 AND 63
                                           OR create_project.owner ~ '[[:cntrl:]]') THEN
    PERFORM mlplat._bad_input('owner', 'must be a principal name of 1 to 63 printable characters', 'Pass the person''s role name.');
  END IF;

  r := (pg_catalog.gen_random_uuid(), 'project', NULL, NULL, NULL, false)::mlplat.accepted;
  INSERT INTO mlplat.projects (name, gpu_quota, cpu_quota, memory_quota, traceparent)
  VALUES (create_project.name, create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota, tp)
  ON CONFLICT ON CONSTRAINT projects_name_key DO NOTHING
  RETURNING * INTO p;
  IF p.id IS NULL THEN
    SELECT * INTO p FROM mlplat.projects x WHERE x.name = create_project.name FOR UPDATE;
    IF p.status = 'DELETED' THEN
      UPDATE mlplat.projects x SET gpu_quota = create_project.gpu_quota, cpu_quota = create_project.cpu_quota,
             memory_quota = create_project.memory_quota, status = 'PROVISIONING', status_reason = NULL,
             generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0, last_error = NULL,
             next_attempt_at = pg_catalog.now(), traceparent = tp, updated_at = pg_catalog.now()
      WHERE x.id = p.id RETURNING * INTO p;
      -- A re-created project starts with no members: old grants do not come back.
      DELETE FROM mlplat.members m WHERE m.project_id = p.id;
    ELSIF p.status = 'DELETING' THEN
      PERFORM mlplat._wrong_state('project', p.name, p.status, 'create_project', 'Wait until the project is DELETED, then create it again.');
    ELSIF (p.gpu_quota, p.cpu_quota, p.memory_quota) IS DISTINCT FROM
          (create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota) THEN
      RAISE EXCEPTION USING ERRCODE = '42710',
        MESSAGE = pg_catalog.format('project "%s" already exists with different quotas', p.name),
        DETAIL = 'create_project is repeatable only with the same arguments.',
        HINT = 'Use mlplat.set_project_quota() to change quotas.';
    ELSE
      -- Nothing to change: the existing project is the answer.
      r.entity_id := p.id; r.status := p.status;
      PERFORM mlplat._audit('create_project', p.name, p.id, 'project', p.id, r.request_id, tp,
                            pg_catalog.jsonb_build_object('unchanged', true));
      PERFORM mlplat._idem_store('create_project', create_project.idempotency_key, r);
      RETURN r;
    END IF;
  END IF;
  IF create_project.owner IS NOT NULL THEN
    INSERT INTO mlplat.members (project_id, principal, role, granted_by)
    VALUES (p.id, create_project.owner, 'owner', mlplat._actor()) ON CONFLICT DO NOTHING;
  END IF;
  r.entity_id := p.id; r.status := p.status;
  PERFORM mlplat._audit('create_project', p.name, p.id, 'project', p.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('gpu_quota', p.gpu_quota, 'cpu_quota', p.cpu_quota,
                                  'memory_quota', p.memory_quota, 'owner', create_project.owner));
  PERFORM mlplat._idem_store('create_project', create_project.idempotency_key, r);
  PERFORM mlplat._wake_on_commit('projects');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.set_project_quota(project text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                         memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('set_project_quota', set_project_quota.project);
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  p mlplat.projects;
  used bigint;
BEGIN
  r := mlplat._idem_claim('set_project_quota', set_project_quota.idempotency_key,
         pg_catalog.jsonb_build_array(set_project_quota.project, set_project_quota.gpu_quota,
                                      set_project_quota.cpu_quota, set_project_quota.memory_quota));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._check_quotas(set_project_quota.gpu_quota, set_project_quota.cpu_quota, set_project_quota.memory_quota);
  -- Exclusive project lock: waits for every deploy or run start in flight (they hold it shared).
  PERFORM pg_catalog.pg_advisory_xact_lock(mlplat._project_lock_key(1), pid::int);
  SELECT * INTO p FROM mlplat.projects x WHERE x.id = pid FOR UPDATE;
  IF p.status IN ('DELETING', 'DELETED') THEN
    PERFORM mlplat._wrong_state('project', p.name, p.status, 'set_project_quota', 'The project is being deleted.');
  END IF;
  used := mlplat._gpus_in_use(pid);
  IF set_project_quota.gpu_quota < used THEN
    RAISE EXCEPTION USING ERRCODE = '23514',
      MESSAGE = pg_catalog.format('invalid gpu_quota: %s is below the %s GPUs project "%s" already uses',
                                  set_project_quota.gpu_quota, used, p.name),
      DETAIL = 'Deployments'' desired GPUs (gpus x max_replicas) and active runs count against the quota.',
      HINT = 'Scale down or undeploy first, or choose a larger quota.';
  END IF;
  UPDATE mlplat.projects x SET gpu_quota = set_project_quota.gpu_quota, cpu_quota = set_project_quota.cpu_quota,
         memory_quota = set_project_quota.memory_quota, generation = x.generation + 1,
         row_version = x.row_version + 1, traceparent = tp, attempts = 0, next_attempt_at = pg_catalog.now(),
         updated_at = pg_catalog.now()
  WHERE x.id = pid RETURNING * INTO p;
  r := (pg_catalog.gen_random_uuid(), 'project', pid, NULL, p.status, false)::mlplat.accepted;
  PERFORM mlplat._audit('set_project_quota', p.name, pid, 'project', pid, r.request_id, tp,
    pg_catalog.jsonb_build_object('gpu_quota', p.gpu_quota, 'cpu_quota', p.cpu_quota, 'memory_quota', p.memory_quota));
  PERFORM mlplat._idem_store('set_project_quota', set_project_quota.idempotency_key, r);
  PERFORM mlplat._wake_on_commit('projects');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.delete_project(name text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('delete_project', delete_project.name);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'project', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.projects;
  p mlplat.projects;
BEGIN
  SELECT * INTO seen FROM mlplat.projects x WHERE x.id = pid;
  r.entity_id := pid;
  IF seen.status IN ('DELETING', 'DELETED') THEN
    r.status := seen.status;       -- already asked for: nothing changes
    RETURN r;
  END IF;
  -- Compare-and-swap: lock, and insist the row is still the one we read.  The exclusive
  -- project lock also waits for deploys in flight (they hold it shared), so the count below
  -- is final.
  PERFORM pg_catalog.pg_advisory_xact_lock(mlplat._project_lock_key(1), pid::int);
  SELECT * INTO p FROM mlplat.projects x WHERE x.id = pid FOR UPDATE;
  IF p.row_version <> seen.row_version OR p.status <> seen.status THEN
    PERFORM mlplat._cas_lost('project', seen.name);
  END IF;
  IF EXISTS (SELECT 1 FROM mlplat.deployments d WHERE d.project_id = pid AND d.status <> 'DELETED')
     OR EXISTS (SELECT 1 FROM mlplat.runs u WHERE u.project_id = pid
                AND u.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('project "%s" still has deployments or active runs', p.name),
      DETAIL = 'A project is deleted only once nothing in it is live.',
      HINT = 'Undeploy its deployments and cancel its runs, wait for DELETED/CANCELLED, then retry.';
  END IF;
  UPDATE mlplat.projects x SET status = 'DELETING', status_reason = 'deletion requested',
         generation = x.generation + 1, row_version = x.row_version + 1, traceparent = tp,
         attempts = 0, next_attempt_at = pg_catalog.now(), updated_at = pg_catalog.now()
  WHERE x.id = pid AND x.row_version = seen.row_version RETURNING * INTO p;
  r.status := p.status;
  PERFORM mlplat._audit('delete_project', p.name, pid, 'project', pid, r.request_id, tp, '{}');
  PERFORM mlplat._wake_on_commit('projects');
  RETURN r;
END $$;

CREATE FUNCTION mlplat._check_role_args(principal text, role text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF principal IS NULL OR pg_catalog.length(principal) NOT BETWEEN 1 AND 63 OR principal ~ '[[:cntrl:]]' THEN
    PERFORM mlplat._bad_input('principal', 'must be a name of 1 to 63 printable characters', 'Pass the person''s or role''s name.');
  END IF;
  IF role IS NULL OR role NOT IN ('viewer', 'developer', 'deployer', 'owner') THEN
    PERFORM mlplat._bad_input('role', 'must be one of viewer, developer, deployer, owner',
      'Roles are cumulative: developer can do what viewer can, and so on; see mlplat.policies.');
  END IF;
END $$;

CREATE FUNCTION mlplat.grant_role(project text, principal text, role text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('grant_role', grant_role.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'member', NULL, NULL, 'GRANTED', false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  changed boolean;
BEGIN
  PERFORM mlplat._check_role_args(grant_role.principal, grant_role.role);
  r.entity_id := pid;
  INSERT INTO mlplat.members (project_id, principal, role, granted_by)
  VALUES (pid, grant_role.principal, grant_role.role, mlplat._actor()) ON CONFLICT DO NOTHING;
  changed := FOUND;
  -- the binding this makes is traced under this call's span (the reconciler reads tp from the project)
  IF changed THEN
    UPDATE mlplat.projects x SET traceparent = tp WHERE x.id = pid;
  END IF;
  PERFORM mlplat._audit('grant_role', grant_role.project, pid, 'member', pid, r.request_id, tp,
    pg_catalog.jsonb_build_object('principal', grant_role.principal, 'role', grant_role.role, 'changed', changed));
  PERFORM mlplat._wake_on_commit('projects');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.revoke_role(project text, principal text, role text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('revoke_role', revoke_role.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'member', NULL, NULL, 'REVOKED', false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  changed boolean;
BEGIN
  PERFORM mlplat._check_role_args(revoke_role.principal, revoke_role.role);
  r.entity_id := pid;
  -- Serialize membership changes of this project so "last owner" is decided on settled data.
  PERFORM 1 FROM mlplat.projects x WHERE x.id = pid FOR NO KEY UPDATE;
  DELETE FROM mlplat.members m
  WHERE m.project_id = pid AND m.principal = revoke_role.principal AND m.role = revoke_role.role;
  changed := FOUND;
  IF revoke_role.role = 'owner' AND changed
     AND NOT EXISTS (SELECT 1 FROM mlplat.members m WHERE m.project_id = pid AND m.role = 'owner') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('cannot revoke the last owner of project "%s"', revoke_role.project),
      DETAIL = 'Every project keeps at least one owner.',
      HINT = 'Grant owner to someone else first.';
  END IF;
  IF changed THEN
    UPDATE mlplat.projects x SET traceparent = tp WHERE x.id = pid;
  END IF;
  PERFORM mlplat._audit('revoke_role', revoke_role.project, pid, 'member', pid, r.request_id, tp,
    pg_catalog.jsonb_build_object('principal', revoke_role.principal, 'role', revoke_role.role, 'changed', changed));
  PERFORM mlplat._wake_on_commit('projects');
  RETURN r;
END $$;

-- ==== sql/install/25_api_models.sql
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
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('register_model', register_model_version.project);
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  mid bigint;
  v mlplat.model_versions;
BEGIN
  r := mlplat._idem_claim('register_model', register_model_version.idempotency_key,
         pg_catalog.jsonb_build_array(register_model_version.project, register_model_version.model,
           register_model_version.version, register_model_version.artifact_uri, register_model_version.artifact_sha256,
           register_model_version.runtime_kind, register_model_version.model_format));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  PERFORM mlplat._check_label('model', register_model_version.model, 63);
  IF register_model_version.version IS NULL OR register_model_version.version !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
    PERFORM mlplat._bad_input('version', 'must be 1 to 64 characters of letters, digits, ''.'', ''_'' or ''-''',
      'Use the registry''s version, e.g. 3 or 2024-06-01.1.');
  END IF;
  IF register_model_version.artifact_uri IS NULL OR pg_catalog.length(register_model_version.artifact_uri) > 2048
     OR register_model_version.artifact_uri !~ '^(s3|gs|pvc|hf|oci|https|http)://[^/[:space:]@]+(/[^[:space:]]*)?$' THEN
    PERFORM mlplat._bad_input('artifact_uri',
      'must be an s3://, gs://, pvc://, hf://, oci:// or http(s):// URI of at most 2048 characters, without spaces or credentials',
      'Credentials never go in the URI; the storage initializer reads them from a secret.');
  END IF;
  IF register_model_version.artifact_sha256 IS NULL OR register_model_version.artifact_sha256 !~ '^[0-9a-f]{64}$' THEN
    PERFORM mlplat._bad_input('artifact_sha256', 'must be 64 lower-case hex characters',
      'Pass the SHA-256 digest of the artifact, e.g. from sha256sum.');
  END IF;
  PERFORM mlplat._check_label('runtime_kind', register_model_version.runtime_kind, 63);
  PERFORM mlplat._check_label('model_format', register_model_version.model_format, 63);

  INSERT INTO mlplat.models (project_id, name) VALUES (pid, register_model_version.model)
  ON CONFLICT ON CONSTRAINT models_project_id_name_key DO NOTHING;
  SELECT m.id INTO mid FROM mlplat.models m WHERE m.project_id = pid AND m.name = register_model_version.model;

  r := (pg_catalog.gen_random_uuid(), 'model_version', NULL, NULL, NULL, false)::mlplat.accepted;
  INSERT INTO mlplat.model_versions (project_id, model_id, version, artifact_uri, artifact_sha256,
                                     runtime_kind, model_format, created_by)
  VALUES (pid, mid, register_model_version.version, register_model_version.artifact_uri,
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
  PERFORM mlplat._audit('register_model', register_model_version.project, pid, 'model_version', v.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('model', register_model_version.model, 'version', v.version,
      'artifact_sha256', v.artifact_sha256, 'runtime_kind', v.runtime_kind, 'model_format', v.model_format));
  PERFORM mlplat._idem_store('register_model', register_model_version.idempotency_key, r);
  RETURN r;
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
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('set_model_stage', set_model_stage.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'model_version', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  v mlplat.model_versions;
  demoted text;
  moved boolean;
BEGIN
  IF set_model_stage.stage IS NULL OR set_model_stage.stage NOT IN ('NONE', 'CANDIDATE', 'CHAMPION', 'ARCHIVED') THEN
    PERFORM mlplat._bad_input('stage', 'must be one of NONE, CANDIDATE, CHAMPION, ARCHIVED',
      'CHAMPION serves production; CANDIDATE may be deployed for trials.');
  END IF;
  v := mlplat._find_version(pid, set_model_stage.model, set_model_stage.version);
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
  moved := mlplat._sync_aliases(v.model_id, tp);
  r.status := set_model_stage.stage;
  PERFORM mlplat._audit('set_model_stage', set_model_stage.project, pid, 'model_version', v.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('model', set_model_stage.model, 'version', v.version, 'from', v.stage,
                                  'to', set_model_stage.stage, 'archived_champion', demoted, 'aliases_moved', moved));
  IF moved THEN
    PERFORM mlplat._wake_on_commit('model_aliases');
  END IF;
  RETURN r;
END $$;

-- ==== sql/install/30_api_deployments.sql
-- 30_api_deployments: deploy, roll back, undeploy; the KServe manifest each revision applies.

-- drift_policy: 'repair' re-applies the desired revision over drift, 'report' only shows it.
-- ready_wait_since: when the intent (deploy, rollback) that the deployment still waits on was
--   made; the deploy deadline counts from it.  NULL once READY.
-- deploy_deadline: this deployment's deadline; NULL: the setting mlplat.deploy_deadline.
ALTER TABLE mlplat.deployments
  ADD COLUMN drift_policy text NOT NULL DEFAULT 'repair' CHECK (drift_policy IN ('repair', 'report')),
  ADD COLUMN ready_wait_since timestamptz,
  ADD COLUMN deploy_deadline interval;
INSERT INTO mlplat.policies (role, action)
VALUES ('deployer', 'set_drift_policy'), ('owner', 'set_drift_policy'),
       ('deployer', 'set_deploy_deadline'), ('owner', 'set_deploy_deadline');

-- Pure renderer: the exact KServe v1beta1 InferenceService for one revision.  Deterministic
-- (same arguments, same jsonb), no I/O.  The result is stored in the revision at deploy time
-- and the deployments reconciler applies exactly that.  In C (src/render/isvc.c): it is on
-- deploy()'s hot path, and the nested jsonb_build_object it replaces (same jsonb, byte for
-- byte) cost as much as the rest of deploy()'s validation.
CREATE FUNCTION mlplat._render_isvc(p_project text, p_deployment text, p_revision int, p_instance text,
                                    p_model_format text, p_runtime text, p_storage_uri text, p_sha256 text,
                                    p_gpus int, p_min_replicas int, p_max_replicas int, p_env jsonb)
RETURNS jsonb LANGUAGE C IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_render_isvc';

CREATE FUNCTION mlplat._spec_digest(spec jsonb) RETURNS text
LANGUAGE sql STABLE AS $$   -- STABLE like convert_to, so it is inlined
  SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(spec::text, 'UTF8')), 'hex')
$$;

CREATE FUNCTION mlplat._find_deployment(p_project_id bigint, p_deployment text)
RETURNS mlplat.deployments LANGUAGE plpgsql STABLE AS $$
DECLARE
  d mlplat.deployments;
BEGIN
  SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = p_project_id AND x.name = p_deployment;
  IF d.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('deployment "%s" does not exist', pg_catalog.left(p_deployment, 64)),
      HINT = 'Create it with mlplat.deploy().';
  END IF;
  RETURN d;
END $$;

CREATE FUNCTION mlplat._no_active_rollout(d mlplat.deployments, p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id
             AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has an active rollout: %s is not possible', d.name, p_action),
      DETAIL = 'While a rollout runs, the rollout controller owns the deployment''s traffic.',
      HINT = 'Promote or abort the rollout first.';
  END IF;
END $$;

-- Project locks are transaction-scoped advisory locks (lock manager only: no tuple lock, no
-- WAL, no MultiXact on a hot project row):
--   mlplat._project_lock_key(1) on the project id: SHARED by every change that adds to the
--     project (deploy, start_run, ...), EXCLUSIVE by delete_project and set_project_quota;
--   mlplat._project_lock_key(2): EXCLUSIVE by changes that raise the GPU allocation, so quota
--     checks serialize while ordinary redeploys run concurrently.
-- Lock order everywhere: key 1, key 2, then the entity row.
CREATE FUNCTION mlplat._project_lock_key(kind int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1836871680 + kind $$;   -- an arbitrary constant, "mlplat"-specific

CREATE FUNCTION mlplat._lock_project(p_project_id bigint, p_for_quota boolean, p_action text)
RETURNS mlplat.projects LANGUAGE plpgsql AS $$
DECLARE
  p mlplat.projects;
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock_shared(mlplat._project_lock_key(1), p_project_id::int);
  IF p_for_quota THEN
    PERFORM pg_catalog.pg_advisory_xact_lock(mlplat._project_lock_key(2), p_project_id::int);
  END IF;
  SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id;
  IF p.status IN ('DELETING', 'DELETED') THEN
    PERFORM mlplat._wrong_state('project', p.name, p.status, p_action, 'The project is being deleted.');
  END IF;
  RETURN p;
END $$;

CREATE FUNCTION mlplat._check_gpu_quota(p mlplat.projects, p_more bigint, p_except_deployment bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  used bigint := mlplat._gpus_in_use(p.id, p_except_deployment);
BEGIN
  IF used + p_more > p.gpu_quota THEN
    RAISE EXCEPTION USING ERRCODE = '23514',
      MESSAGE = pg_catalog.format('GPU quota of project "%s" exceeded: %s requested, %s of %s in use',
                                  p.name, p_more, used, p.gpu_quota),
      DETAIL = 'A deployment counts gpus x max_replicas; active runs count their GPUs.',
      HINT = 'Ask a project owner to raise the quota (set_project_quota), or request fewer GPUs or replicas.';
  END IF;
END $$;

CREATE FUNCTION mlplat.deploy(project text, deployment text, model text, version text, runtime_kind text,
                              gpus int DEFAULT 0, min_replicas int DEFAULT 1, max_replicas int DEFAULT 1,
                              env jsonb DEFAULT '{}', idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('deploy', deploy.project);
  who text := mlplat._actor();
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  v mlplat.model_versions;
  p mlplat.projects;
  d mlplat.deployments;
  seen_alloc int;
  old_alloc int;
  alloc int;
  need_quota boolean;
  v_intent jsonb;
  rev int;
  v_spec jsonb;
  rollout_active boolean;
  unchanged boolean;
  inst text;
  q record;
BEGIN
  r := mlplat._idem_claim('deploy', deploy.idempotency_key,
         pg_catalog.jsonb_build_array(deploy.project, deploy.deployment, deploy.model, deploy.version,
           deploy.runtime_kind, deploy.gpus, deploy.min_replicas, deploy.max_replicas, deploy.env), who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  -- validate (nothing is written before this passes)
  IF deploy.deployment IS NULL OR pg_catalog.length(deploy.deployment) > 45
     OR deploy.deployment !~ '^[a-z]([-a-z0-9]*[a-z0-9])?$' THEN
    PERFORM mlplat._bad_input('deployment', 'must be a DNS-1035 label of 1 to 45 characters',
      'Start with a letter; use lower-case letters, digits and ''-''. KServe appends suffixes up to 63 characters.');
  END IF;
  IF deploy.runtime_kind IS NULL OR NOT mlplat.is_dns_label(deploy.runtime_kind, 63) THEN
    PERFORM mlplat._check_label('runtime_kind', deploy.runtime_kind, 63);   -- the same rule; raises
  END IF;
  IF deploy.gpus IS NULL OR deploy.gpus NOT BETWEEN 0 AND 64 THEN
    PERFORM mlplat._bad_input('gpus', 'must be an integer from 0 to 64 (GPUs per replica)', 'Pass 0 for CPU-only serving.');
  END IF;
  IF deploy.min_replicas IS NULL OR deploy.min_replicas NOT BETWEEN 0 AND 100 THEN
    PERFORM mlplat._bad_input('min_replicas', 'must be an integer from 0 to 100', '0 allows scale to zero.');
  END IF;
  IF deploy.max_replicas IS NULL OR deploy.max_replicas NOT BETWEEN 1 AND 100 OR deploy.max_replicas < deploy.min_replicas THEN
    PERFORM mlplat._bad_input('max_replicas', 'must be an integer from 1 to 100 and at least min_replicas',
      'Raise max_replicas or lower min_replicas.');
  END IF;
  IF deploy.env IS NOT NULL AND NOT mlplat._env_ok(deploy.env) THEN
    PERFORM mlplat._check_env('env', deploy.env);   -- decides, and names what is wrong
  END IF;
  v := mlplat._find_version(pid, deploy.model, deploy.version);
  IF v.stage NOT IN ('CANDIDATE', 'CHAMPION') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('model version "%s" of "%s" is %s: deploy needs CANDIDATE or CHAMPION',
                                  v.version, deploy.model, v.stage),
      DETAIL = 'Only versions staged for serving may be deployed.',
      HINT = 'Stage it with mlplat.set_model_stage(..., ''CANDIDATE'') first.';
  END IF;
  IF v.runtime_kind <> deploy.runtime_kind THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'invalid runtime_kind: does not match the model version''s runtime kind',
      DETAIL = pg_catalog.format('The version was registered for runtime kind "%s".', v.runtime_kind),
      HINT = 'Deploy with the runtime kind the version was registered with.';
  END IF;

  v_intent := pg_catalog.jsonb_build_object('model', deploy.model, 'version', deploy.version,
              'runtime_kind', deploy.runtime_kind, 'gpus', deploy.gpus, 'min_replicas', deploy.min_replicas,
              'max_replicas', deploy.max_replicas, 'env', coalesce(deploy.env, '{}'::jsonb));
  alloc := deploy.gpus * deploy.max_replicas;

  -- lock order everywhere: project lock(s), then the deployment row
  SELECT CASE WHEN x.status = 'DELETED' THEN 0 ELSE x.desired_gpus END INTO seen_alloc
  FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment;
  need_quota := alloc > coalesce(seen_alloc, 0);
  PERFORM pg_catalog.pg_advisory_xact_lock_shared(1836871681, pid::int);   -- _project_lock_key(1)
  IF need_quota THEN
    PERFORM pg_catalog.pg_advisory_xact_lock(1836871682, pid::int);        -- _project_lock_key(2)
  END IF;
  SELECT * INTO p FROM mlplat.projects x WHERE x.id = pid;
  IF p.status IN ('DELETING', 'DELETED') THEN
    PERFORM mlplat._wrong_state('project', p.name, p.status, 'deploy', 'The project is being deleted.');
  END IF;

  -- the deployment row, whether a rollout is active, whether the desired revision is this request,
  -- and (for the manifest) the installation id
  SELECT x AS dep,
         EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = x.id
                 AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')) AS ra,
         x.status <> 'DELETED' AND EXISTS (SELECT 1 FROM mlplat.deployment_revisions dr
                 WHERE dr.deployment_id = x.id AND dr.revision = x.desired_revision
                   AND dr.intent = v_intent AND dr.model_version_id = v.id) AS un,
         (SELECT i.instance_id FROM mlplat.installation i) AS inst
  INTO q
  FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment FOR NO KEY UPDATE OF x;
  IF FOUND THEN
    d := q.dep; rollout_active := q.ra; unchanged := q.un; inst := q.inst;
  ELSE
    inst := (SELECT i.instance_id FROM mlplat.installation i);
    INSERT INTO mlplat.deployments (project_id, name, traceparent) VALUES (pid, deploy.deployment, tp)
    ON CONFLICT ON CONSTRAINT deployments_project_id_name_key DO NOTHING;
    SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment FOR NO KEY UPDATE;
    rollout_active := false; unchanged := false;
  END IF;
  old_alloc := CASE WHEN d.status = 'DELETED' THEN 0 ELSE d.desired_gpus END;
  IF alloc > old_alloc AND NOT need_quota THEN
    PERFORM mlplat._cas_lost('deployment', d.name);   -- its allocation dropped under us
  END IF;
  IF d.status = 'DELETING' THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, 'deploy', 'Wait until it is DELETED, then deploy again.');
  END IF;
  IF rollout_active THEN
    PERFORM mlplat._no_active_rollout(d, 'deploy');   -- raises the error
  END IF;

  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, NULL, NULL, false)::mlplat.accepted;
  -- Deploying what is already desired changes nothing: the existing revision is the answer.
  IF unchanged THEN
    r.revision := d.desired_revision; r.status := d.status;
    PERFORM mlplat._audit('deploy', deploy.project, pid, 'deployment', d.id, r.request_id, tp,
      pg_catalog.jsonb_build_object('revision', d.desired_revision, 'unchanged', true), who);
    PERFORM mlplat._idem_store('deploy', deploy.idempotency_key, r, who);
    RETURN r;
  END IF;
  IF need_quota THEN
    PERFORM mlplat._check_gpu_quota(p, alloc, d.id);
  END IF;

  rev := d.latest_revision + 1;
  v_spec := mlplat._render_isvc(deploy.project, deploy.deployment, rev,
            inst, v.model_format, v.runtime_kind, v.artifact_uri,
            v.artifact_sha256, deploy.gpus, deploy.min_replicas, deploy.max_replicas, deploy.env);
  r.revision := rev; r.status := 'DEPLOYING';
  -- one statement: the new revision, the deployment's desired state, the idempotency result
  -- (what _idem_store does, for the key claimed above), the audit event
  WITH new_rev AS (
    INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent,
                                             spec, spec_digest, created_by, traceparent)
    VALUES (d.id, rev, pid, v.id, v_intent, v_spec, mlplat._spec_digest(v_spec), who, tp)
  ), upd AS (
    UPDATE mlplat.deployments x
    SET previous_revision = CASE WHEN x.status = 'DELETED' THEN NULL ELSE x.desired_revision END,
        desired_revision = rev, latest_revision = rev, desired_gpus = alloc,
        generation = x.generation + 1, row_version = x.row_version + 1,
        status = 'DEPLOYING', status_reason = pg_catalog.format('revision %s requested', rev),
        attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(), traceparent = tp,
        ready_wait_since = pg_catalog.now(), updated_at = pg_catalog.now()
    WHERE x.id = d.id
  ), idem AS (
    UPDATE mlplat.idempotency_keys k SET result = r
    WHERE deploy.idempotency_key IS NOT NULL
      AND k.principal = who AND k.action = 'deploy' AND k.key = deploy.idempotency_key
  )
  INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id,
                                   request_id, trace_id, traceparent, detail)
  VALUES (who, mlplat._db_role(), 'deploy', deploy.project, pid, 'deployment', d.id, r.request_id,
          pg_catalog.split_part(tp, '-', 2), tp,
          pg_catalog.jsonb_build_object('revision', rev, 'model', deploy.model, 'version', deploy.version,
                                        'gpus', deploy.gpus, 'max_replicas', deploy.max_replicas));
  PERFORM mlplat._span_api('deploy', tp, pid, 'deployment', d.id, r.request_id);
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.rollback_deployment(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('rollback_deployment', rollback_deployment.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'deployment', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.deployments;
  d mlplat.deployments;
  p mlplat.projects;
  prev jsonb;
  alloc int;
BEGIN
  seen := mlplat._find_deployment(pid, rollback_deployment.deployment);
  IF seen.status IN ('DELETING', 'DELETED') THEN
    PERFORM mlplat._wrong_state('deployment', seen.name, seen.status, 'rollback_deployment', 'Deploy it again instead.');
  END IF;
  IF seen.previous_revision IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has no previous revision to roll back to', seen.name),
      DETAIL = 'Only one revision has been desired since the deployment was created.',
      HINT = 'Deploy the version you want instead.';
  END IF;
  SELECT dr.intent INTO prev FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = seen.id AND dr.revision = seen.previous_revision;
  alloc := (prev->>'gpus')::int * (prev->>'max_replicas')::int;
  p := mlplat._lock_project(pid, alloc > seen.desired_gpus, 'rollback_deployment');
  SELECT * INTO d FROM mlplat.deployments x WHERE x.id = seen.id FOR NO KEY UPDATE;
  IF d.row_version <> seen.row_version OR d.status <> seen.status THEN
    PERFORM mlplat._cas_lost('deployment', seen.name);
  END IF;
  PERFORM mlplat._no_active_rollout(d, 'rollback_deployment');
  IF alloc > d.desired_gpus THEN
    PERFORM mlplat._check_gpu_quota(p, alloc, d.id);
  END IF;
  -- Revisions are never edited: the previous one becomes desired again (a new intent).
  UPDATE mlplat.deployments x
  SET desired_revision = d.previous_revision, previous_revision = d.desired_revision, desired_gpus = alloc,
      generation = x.generation + 1, row_version = x.row_version + 1, status = 'DEPLOYING',
      status_reason = pg_catalog.format('rollback to revision %s requested', d.previous_revision),
      attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(), traceparent = tp,
      ready_wait_since = pg_catalog.now(), updated_at = pg_catalog.now()
  WHERE x.id = d.id;
  r.entity_id := d.id; r.revision := d.previous_revision; r.status := 'DEPLOYING';
  PERFORM mlplat._audit('rollback_deployment', rollback_deployment.project, pid, 'deployment', d.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('from_revision', d.desired_revision, 'to_revision', d.previous_revision));
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.undeploy(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('undeploy', undeploy.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'deployment', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.deployments;
BEGIN
  seen := mlplat._find_deployment(pid, undeploy.deployment);
  r.entity_id := seen.id; r.revision := seen.desired_revision;
  IF seen.status IN ('DELETING', 'DELETED') THEN
    r.status := seen.status;      -- already asked for
    RETURN r;
  END IF;
  PERFORM mlplat._no_active_rollout(seen, 'undeploy');
  -- compare-and-swap on status + row_version
  UPDATE mlplat.deployments x
  SET status = 'DELETING', status_reason = 'undeploy requested', generation = x.generation + 1,
      row_version = x.row_version + 1, attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(),
      traceparent = tp, updated_at = pg_catalog.now()
  WHERE x.id = seen.id AND x.row_version = seen.row_version AND x.status = seen.status;
  IF NOT FOUND THEN
    PERFORM mlplat._cas_lost('deployment', seen.name);
  END IF;
  r.status := 'DELETING';
  PERFORM mlplat._audit('undeploy', undeploy.project, pid, 'deployment', seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('revision', seen.desired_revision));
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN r;
END $$;

-- Preview: the manifest the reconciler applies for a revision (default: the desired one).
CREATE FUNCTION mlplat.render_inference_service(project text, deployment text, revision int DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_inference_service.project);
  d mlplat.deployments := mlplat._find_deployment(pid, render_inference_service.deployment);
  s jsonb;
BEGIN
  SELECT dr.spec INTO s FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = d.id AND dr.revision = coalesce(render_inference_service.revision, d.desired_revision);
  IF s IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('deployment "%s" has no revision %s', d.name,
                                  coalesce(render_inference_service.revision::text, '(desired)')),
      HINT = 'List revisions in mlplat.deployment_revisions.';
  END IF;
  RETURN s;
END $$;

-- What set_drift_policy and set_deploy_deadline share: not an intent for the cluster (no
-- revision, no generation bump), so only row_version + 1 (a pass that decided under the old
-- setting loses its compare-and-swap) and a wake: the reconciler looks again at once.  The
-- caller has authorized and validated; p_action names the setting it changes.
CREATE FUNCTION mlplat._set_deployment_option(p_action text, p_pid bigint, p_project text, p_deployment text,
                                              p_policy text, p_deadline interval, p_key text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  who text := mlplat._actor();
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  d mlplat.deployments;
  is_policy boolean := p_action = 'set_drift_policy';
  unchanged boolean;
BEGIN
  r := mlplat._idem_claim(p_action, p_key,
         pg_catalog.jsonb_build_array(p_project, p_deployment,
           CASE WHEN is_policy THEN pg_catalog.to_jsonb(p_policy)
                ELSE pg_catalog.to_jsonb(pg_catalog.date_part('epoch', p_deadline)) END), who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._find_deployment(p_pid, p_deployment);
  PERFORM mlplat._lock_project(p_pid, false, p_action);
  SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = p_pid AND x.name = p_deployment FOR NO KEY UPDATE;
  IF d.status IN ('DELETING', 'DELETED') THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, p_action, 'Deploy it again first.');
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, d.desired_revision, d.status, false)::mlplat.accepted;
  unchanged := CASE WHEN is_policy THEN d.drift_policy = p_policy
                    ELSE d.deploy_deadline IS NOT DISTINCT FROM p_deadline END;
  IF NOT unchanged THEN
    UPDATE mlplat.deployments x
    SET drift_policy = CASE WHEN is_policy THEN p_policy ELSE x.drift_policy END,
        deploy_deadline = CASE WHEN is_policy THEN x.deploy_deadline ELSE p_deadline END,
        row_version = x.row_version + 1, next_attempt_at = LEAST(x.next_attempt_at, pg_catalog.now()),
        updated_at = pg_catalog.now()
    WHERE x.id = d.id;
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  PERFORM mlplat._audit(p_action, p_project, p_pid, 'deployment', d.id, r.request_id, tp,
    CASE WHEN is_policy THEN pg_catalog.jsonb_build_object('from', d.drift_policy, 'to', p_policy)
         ELSE pg_catalog.jsonb_build_object('from_seconds', pg_catalog.date_part('epoch', d.deploy_deadline),
                                            'to_seconds', pg_catalog.date_part('epoch', p_deadline)) END
    || pg_catalog.jsonb_build_object('unchanged', unchanged), who);
  PERFORM mlplat._idem_store(p_action, p_key, r, who);
  RETURN r;
END $$;

-- How the deployments reconciler treats drift of this deployment: 'repair' (the default)
-- re-applies the desired revision, 'report' only marks it DRIFTED with the differing paths.
CREATE FUNCTION mlplat.set_drift_policy(project text, deployment text, policy text,
                                        idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('set_drift_policy', set_drift_policy.project);
BEGIN
  PERFORM mlplat._check_key(set_drift_policy.idempotency_key);
  IF set_drift_policy.policy IS NULL OR set_drift_policy.policy NOT IN ('repair', 'report') THEN
    PERFORM mlplat._bad_input('policy', 'must be ''repair'' or ''report''',
      '''repair'' re-applies the desired revision over drift; ''report'' only shows the differing paths.');
  END IF;
  RETURN mlplat._set_deployment_option('set_drift_policy', pid, set_drift_policy.project, set_drift_policy.deployment,
                                       set_drift_policy.policy, NULL, set_drift_policy.idempotency_key);
END $$;

-- This deployment's deploy deadline (NULL: the setting mlplat.deploy_deadline; 0: none).  It
-- applies to the wait in progress too, counted from the deploy or rollback that started it.
CREATE FUNCTION mlplat.set_deploy_deadline(project text, deployment text, deadline interval,
                                           idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('set_deploy_deadline', set_deploy_deadline.project);
BEGIN
  PERFORM mlplat._check_key(set_deploy_deadline.idempotency_key);
  IF set_deploy_deadline.deadline < interval '0' OR set_deploy_deadline.deadline > interval '7 days' THEN
    PERFORM mlplat._bad_input('deadline', 'must be from 0 to 7 days',
      'Pass e.g. ''15 minutes''; 0 disables the deadline, NULL uses the setting mlplat.deploy_deadline.');
  END IF;
  RETURN mlplat._set_deployment_option('set_deploy_deadline', pid, set_deploy_deadline.project,
                                       set_deploy_deadline.deployment, NULL, set_deploy_deadline.deadline,
                                       set_deploy_deadline.idempotency_key);
END $$;

-- ==== sql/install/35_api_runs.sql
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

CREATE FUNCTION mlplat._start_run(p_action text, p_project text, p_name text, p_kind text, p_spec jsonb,
                                  p_gpus int, p_steps jsonb, p_key text, p_request jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(p_action, p_project);
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  p mlplat.projects;
  u mlplat.runs;
  st jsonb;
  i int := 0;
BEGIN
  r := mlplat._idem_claim(p_action, p_key, p_request);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  -- validation that needs no data happened in the caller; now state
  p := mlplat._lock_project(pid, p_gpus > 0, p_action);
  r := (pg_catalog.gen_random_uuid(), p_kind, NULL, NULL, NULL, false)::mlplat.accepted;
  SELECT * INTO u FROM mlplat.runs x WHERE x.project_id = pid AND x.name = p_name;
  IF u.id IS NOT NULL THEN
    IF u.kind = p_kind AND u.spec = p_spec THEN
      r.entity_id := u.id; r.status := u.status;   -- the same run again: nothing to do
      PERFORM mlplat._idem_store(p_action, p_key, r);
      RETURN r;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42710',
      MESSAGE = pg_catalog.format('run "%s" already exists in project "%s" with a different spec', p_name, p_project),
      DETAIL = 'Run names are unique within a project and runs are immutable.',
      HINT = 'Choose a new run name.';
  END IF;
  IF p_gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, p_gpus, NULL);
  END IF;
  INSERT INTO mlplat.runs (project_id, name, kind, spec, gpus, created_by, traceparent)
  VALUES (pid, p_name, p_kind, p_spec, p_gpus, mlplat._actor(), tp)
  ON CONFLICT ON CONSTRAINT runs_project_id_name_key DO NOTHING
  RETURNING * INTO u;
  IF u.id IS NULL THEN
    PERFORM mlplat._cas_lost('run', p_name);   -- a concurrent start of the same name won
  END IF;
  IF p_steps IS NOT NULL THEN
    FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(p_steps) e LOOP
      i := i + 1;
      INSERT INTO mlplat.run_steps (run_id, project_id, name, ordinal, spec, depends_on)
      VALUES (u.id, pid, st->>'name', i, st - 'name' - 'depends_on',
              ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(st->'depends_on', '[]'))));
    END LOOP;
  END IF;
  r.entity_id := u.id; r.status := u.status;
  PERFORM mlplat._audit(p_action, p_project, pid, p_kind, u.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('run', p_name, 'gpus', p_gpus));
  PERFORM mlplat._idem_store(p_action, p_key, r);
  PERFORM mlplat._wake_on_commit('runs');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.start_run(project text, run text, spec jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('start_run', start_run.project);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_run.idempotency_key);
  PERFORM mlplat._check_label('run', start_run.run, 50);
  g := mlplat._check_container('spec', start_run.spec);
  RETURN mlplat._start_run('start_run', start_run.project, start_run.run, 'run', start_run.spec, g, NULL,
           start_run.idempotency_key, pg_catalog.jsonb_build_array(start_run.project, start_run.run, start_run.spec));
END $$;

CREATE FUNCTION mlplat.start_pipeline_run(project text, name text, steps jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('start_pipeline_run', start_pipeline_run.project);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_pipeline_run.idempotency_key);
  PERFORM mlplat._check_label('name', start_pipeline_run.name, 50);
  g := mlplat._check_steps(start_pipeline_run.steps);
  RETURN mlplat._start_run('start_pipeline_run', start_pipeline_run.project, start_pipeline_run.name, 'pipeline',
           pg_catalog.jsonb_build_object('steps', start_pipeline_run.steps), g, start_pipeline_run.steps,
           start_pipeline_run.idempotency_key,
           pg_catalog.jsonb_build_array(start_pipeline_run.project, start_pipeline_run.name, start_pipeline_run.steps));
END $$;

CREATE FUNCTION mlplat.cancel_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('cancel_run', cancel_run.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'run', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.runs;
BEGIN
  SELECT * INTO seen FROM mlplat.runs x WHERE x.project_id = pid AND x.name = cancel_run.run;
  IF seen.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('run "%s" does not exist', pg_catalog.left(cancel_run.run, 64)),
      HINT = 'See mlplat.run_status for the project''s runs.';
  END IF;
  r.entity := seen.kind; r.entity_id := seen.id;
  IF seen.status IN ('CANCEL_REQUESTED', 'CANCELLED') THEN
    r.status := seen.status;
    RETURN r;
  END IF;
  IF seen.status IN ('SUCCEEDED', 'FAILED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'cancel_run', 'The run has already finished.');
  END IF;
  UPDATE mlplat.runs x
  SET status = 'CANCEL_REQUESTED', status_reason = 'cancel requested', generation = x.generation + 1,
      row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(), traceparent = tp,
      updated_at = pg_catalog.now()
  WHERE x.id = seen.id AND x.row_version = seen.row_version AND x.status = seen.status;
  IF NOT FOUND THEN
    PERFORM mlplat._cas_lost('run', seen.name);
  END IF;
  r.status := 'CANCEL_REQUESTED';
  PERFORM mlplat._audit('cancel_run', cancel_run.project, pid, seen.kind, seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('from', seen.status));
  PERFORM mlplat._wake_on_commit('runs');
  RETURN r;
END $$;

-- ==== sql/install/40_api_rollouts.sql
-- 40_api_rollouts: canary rollout intents.  The rollouts reconciler (its own issue) shifts
-- traffic, reads metrics and records decisions; these functions only record what is wanted.

-- Validate a rollout policy and return it with defaults filled in.
CREATE FUNCTION mlplat._check_policy(policy jsonb) RETURNS jsonb
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
  IF pg_catalog.jsonb_typeof(policy->'steps') IS DISTINCT FROM 'array'
     OR pg_catalog.jsonb_array_length(policy->'steps') NOT BETWEEN 1 AND 20 THEN
    PERFORM mlplat._bad_input('policy.steps', 'is required: an array of 1 to 20 traffic fractions',
      'Fractions are in (0, 1], e.g. [0.05, 0.25, 0.5, 1].');
  END IF;
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

CREATE FUNCTION mlplat.start_rollout(project text, deployment text, model text, version text, policy jsonb,
                                     idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('start_rollout', start_rollout.project);
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  pol jsonb;
  v mlplat.model_versions;
  d mlplat.deployments;
  base jsonb;
  v_intent jsonb;
  v_spec jsonb;
  rev int;
  ro_id bigint;
  surge bigint;
  prj mlplat.projects;
  used bigint;
BEGIN
  r := mlplat._idem_claim('start_rollout', start_rollout.idempotency_key,
         pg_catalog.jsonb_build_array(start_rollout.project, start_rollout.deployment, start_rollout.model,
                                      start_rollout.version, start_rollout.policy));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  pol := mlplat._check_policy(start_rollout.policy);
  d := mlplat._find_deployment(pid, start_rollout.deployment);
  v := mlplat._find_version(pid, start_rollout.model, start_rollout.version);
  IF v.stage NOT IN ('CANDIDATE', 'CHAMPION') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('model version "%s" of "%s" is %s: a rollout needs CANDIDATE or CHAMPION',
                                  v.version, start_rollout.model, v.stage),
      HINT = 'Stage it with mlplat.set_model_stage(..., ''CANDIDATE'') first.';
  END IF;
  -- the canary's GPUs are reserved for the rollout's life: take the quota lock when it has any
  SELECT (dr.intent->>'gpus')::bigint * (dr.intent->>'max_replicas')::bigint INTO surge
  FROM mlplat.deployment_revisions dr WHERE dr.deployment_id = d.id AND dr.revision = d.desired_revision;
  surge := coalesce(surge, 0);
  prj := mlplat._lock_project(pid, surge > 0, 'start_rollout');
  SELECT * INTO d FROM mlplat.deployments x WHERE x.id = d.id FOR UPDATE;
  IF d.status NOT IN ('READY', 'DRIFTED') THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, 'start_rollout',
      'A rollout starts from a READY deployment; wait for the current change to finish.');
  END IF;
  PERFORM mlplat._no_active_rollout(d, 'start_rollout');
  SELECT dr.intent INTO base FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = d.id AND dr.revision = d.desired_revision;
  IF v.runtime_kind <> base->>'runtime_kind' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'invalid version: its runtime kind differs from the deployment''s',
      DETAIL = pg_catalog.format('The deployment serves runtime kind "%s"; the version needs "%s".',
                                 base->>'runtime_kind', v.runtime_kind),
      HINT = 'Roll out a version built for the same runtime, or deploy a new deployment.';
  END IF;
  -- The canary revision: the desired revision's shape with the new model version.
  v_intent := base || pg_catalog.jsonb_build_object('model', start_rollout.model, 'version', v.version);
  -- ... which runs beside the previous revision until the rollout ends: its allocation must fit
  -- next to everything the project has committed (the deployment's own desired GPUs included).
  IF (base->>'gpus')::bigint * (base->>'max_replicas')::bigint <> surge THEN
    PERFORM mlplat._cas_lost('deployment', d.name);   -- redeployed between our read and the lock
  END IF;
  IF surge > 0 THEN
    used := mlplat._gpus_in_use(pid);
    IF used + surge > prj.gpu_quota THEN
      RAISE EXCEPTION USING ERRCODE = '23514',
        MESSAGE = pg_catalog.format('GPU quota of project "%s" cannot hold the canary: it needs %s GPUs, %s of %s are in use',
                                    prj.name, surge, used, prj.gpu_quota),
        DETAIL = 'During a rollout the target revision runs beside the previous one, so its gpus x max_replicas are reserved until the rollout ends.',
        HINT = 'Ask a project owner to raise the quota (set_project_quota), or free GPUs before starting the rollout.';
    END IF;
  END IF;
  rev := d.latest_revision + 1;
  v_spec := mlplat._render_isvc(start_rollout.project, d.name, rev, (SELECT i.instance_id FROM mlplat.installation i),
              v.model_format, v.runtime_kind, v.artifact_uri, v.artifact_sha256, (base->>'gpus')::int,
              (base->>'min_replicas')::int, (base->>'max_replicas')::int, base->'env');
  INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent,
                                           spec, spec_digest, created_by, traceparent)
  VALUES (d.id, rev, pid, v.id, v_intent, v_spec, mlplat._spec_digest(v_spec), mlplat._actor(), tp);
  UPDATE mlplat.deployments x SET latest_revision = rev, row_version = x.row_version + 1, updated_at = pg_catalog.now()
  WHERE x.id = d.id;
  INSERT INTO mlplat.rollouts (project_id, deployment_id, baseline_revision, target_revision, policy, created_by, traceparent,
                              surge_gpus)
  VALUES (pid, d.id, d.desired_revision, rev, pol, mlplat._actor(), tp, surge)
  RETURNING id INTO ro_id;
  r := (pg_catalog.gen_random_uuid(), 'rollout', ro_id, rev, 'PROGRESSING', false)::mlplat.accepted;
  PERFORM mlplat._audit('start_rollout', start_rollout.project, pid, 'rollout', ro_id, r.request_id, tp,
    pg_catalog.jsonb_build_object('deployment', d.name, 'baseline_revision', d.desired_revision,
                                  'target_revision', rev, 'policy', pol));
  PERFORM mlplat._idem_store('start_rollout', start_rollout.idempotency_key, r);
  PERFORM mlplat._wake_on_commit('rollouts');
  RETURN r;
END $$;

-- promote/abort: CAS on the active rollout's status + row_version.
CREATE FUNCTION mlplat._rollout_request(p_action text, p_project text, p_deployment text) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(p_action, p_project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'rollout', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  d mlplat.deployments := mlplat._find_deployment(pid, p_deployment);
  seen mlplat.rollouts;
  want text := CASE p_action WHEN 'promote_rollout' THEN 'PROMOTE' ELSE 'ABORT' END;
  new_status text;
BEGIN
  -- locked: the reconciler writes the row every few hundred ms while a rollout runs, and a
  -- person's promote or abort must not fail on that (the reconciler's next write-back loses
  -- its compare-and-swap instead, and reads the row again)
  SELECT * INTO seen FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id ORDER BY ro.id DESC LIMIT 1 FOR UPDATE;
  IF seen.id IS NULL OR seen.status NOT IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has no active rollout: %s is not possible', d.name, p_action),
      DETAIL = pg_catalog.format('The latest rollout is %s.', coalesce(seen.status, 'absent')),
      HINT = 'Start one with mlplat.start_rollout().';
  END IF;
  r.entity_id := seen.id; r.revision := seen.target_revision;
  IF seen.requested_action IS NOT DISTINCT FROM want THEN
    r.status := seen.status;    -- already requested
    RETURN r;
  END IF;
  IF seen.status = 'ROLLING_BACK' OR seen.requested_action IS NOT NULL THEN
    PERFORM mlplat._wrong_state('rollout of deployment', d.name, coalesce(seen.requested_action || ' requested', seen.status),
      p_action, 'The rollout is already being finished; watch mlplat.rollout_status.');
  END IF;
  new_status := CASE want WHEN 'ABORT' THEN 'ROLLING_BACK' ELSE seen.status END;
  UPDATE mlplat.rollouts ro
  SET requested_action = want, status = new_status,
      status_reason = pg_catalog.format('%s requested', pg_catalog.lower(want)),
      generation = ro.generation + 1, row_version = ro.row_version + 1, attempts = 0,
      next_attempt_at = pg_catalog.now(), traceparent = tp, updated_at = pg_catalog.now()
  WHERE ro.id = seen.id AND ro.row_version = seen.row_version AND ro.status = seen.status;
  IF NOT FOUND THEN
    PERFORM mlplat._cas_lost('rollout of deployment', d.name);
  END IF;
  r.status := new_status;
  PERFORM mlplat._audit(p_action, p_project, pid, 'rollout', seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('deployment', d.name, 'from', seen.status, 'requested', want));
  PERFORM mlplat._wake_on_commit('rollouts');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.promote_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT * FROM mlplat._rollout_request('promote_rollout', project, deployment)
$$;

CREATE FUNCTION mlplat.abort_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT * FROM mlplat._rollout_request('abort_rollout', project, deployment)
$$;

-- ==== sql/install/42_rollout_ledger.sql
-- 42_rollout_ledger: the rollouts reconciler's state on the rollout row and its
-- transition ledger (before 45/50 so the views and alerts can read them; the
-- reconciler's functions are in 72_reconcile_rollouts).

ALTER TABLE mlplat.rollouts
  ADD COLUMN contract        jsonb,         -- frozen at the first claim; its content_id binds every decision
  ADD COLUMN applied_percent int,           -- canaryTrafficPercent last applied (-1: removed for promotion)
  ADD COLUMN window_start    timestamptz,   -- when the observed traffic first matched the current fraction
  ADD COLUMN decide_at       numeric;       -- epoch seconds (millisecond precision) from which the next decision is due

-- The transition ledger: append-only, one row per transition the controller took.
-- A decision is keyed by the content id of the evidence it was made on, so replaying
-- the same evidence (a retried pass, a new leader) cannot record or apply it twice.
CREATE TABLE mlplat.rollout_transitions (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rollout_id          bigint NOT NULL REFERENCES mlplat.rollouts (id),
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  seq                 int NOT NULL,
  decision            text NOT NULL CHECK (decision IN ('ADVANCE', 'HOLD', 'ROLLBACK', 'ROUTE_RESTORED', 'PROMOTED')),
  reasons             text[] NOT NULL,
  from_status         text NOT NULL,
  to_status           text NOT NULL,
  from_fraction       numeric NOT NULL,
  to_fraction         numeric NOT NULL,
  contract_content_id text NOT NULL,
  contract            jsonb NOT NULL,
  evidence_content_id text NOT NULL,
  evidence            jsonb NOT NULL,     -- plan_rollout's evidence, or the observed route for ROUTE_RESTORED/PROMOTED
  plan                jsonb,              -- plan_rollout's output (decisions only)
  observation         jsonb NOT NULL,     -- what else the controller saw: revision names, traffic, metric gaps
  epoch               bigint NOT NULL,
  controller          text NOT NULL,
  at                  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  UNIQUE (rollout_id, evidence_content_id),
  UNIQUE (rollout_id, seq)
);
CREATE TRIGGER rollout_transitions_immutable BEFORE UPDATE OR DELETE ON mlplat.rollout_transitions
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER rollout_transitions_no_truncate BEFORE TRUNCATE ON mlplat.rollout_transitions
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();
COMMENT ON TABLE mlplat.rollout_transitions IS
  'Append-only transition ledger of canary rollouts: contract, evidence, decision, controller and resulting state.';
ALTER TABLE mlplat.rollout_transitions ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.rollout_transitions FOR SELECT USING (mlplat._can_view(project_id));
GRANT SELECT ON mlplat.rollout_transitions TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.rollout_transitions', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('mlplat.rollout_transitions', 'id')::regclass, '');

-- ==== sql/install/45_api_views.sql
-- 45_api_views: what people look at, row-level security, privileges.
--
-- Callers read tables and views; only the SECURITY DEFINER API functions write.  Row-level
-- security shows a member only their projects' rows; the views are security_invoker, so
-- the same policies apply through them.

CREATE VIEW mlplat.project_status WITH (security_invoker = true) AS
SELECT p.name AS project, p.status, p.status_reason,
       (p.status IN ('PROVISIONING', 'DELETING') OR p.observed_generation < p.generation) AS in_flight,
       p.gpu_quota,
       coalesce((SELECT pg_catalog.sum(d.desired_gpus) FROM mlplat.deployments d
                 WHERE d.project_id = p.id AND d.status <> 'DELETED'), 0)
       + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro WHERE ro.project_id = p.id
                   AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')), 0)
       + coalesce((SELECT pg_catalog.sum(u.gpus) FROM mlplat.runs u WHERE u.project_id = p.id
                   AND u.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')), 0) AS gpus_in_use,
       p.cpu_quota, p.memory_quota, p.generation, p.observed_generation,
       p.attempts, p.last_error, p.next_attempt_at, p.traceparent, p.created_at, p.updated_at
FROM mlplat.projects p;

CREATE VIEW mlplat.deployment_status WITH (security_invoker = true) AS
SELECT p.name AS project, d.name AS deployment, d.status, d.status_reason,
       (d.status IN ('PENDING', 'DEPLOYING', 'DELETING') OR (d.status = 'DRIFTED' AND d.drift_policy = 'repair')
        OR d.observed_generation < d.generation) AS in_flight,
       d.desired_revision, d.observed_revision, dr.intent->>'model' AS model, dr.intent->>'version' AS version,
       (dr.intent->>'gpus')::int AS gpus, (dr.intent->>'min_replicas')::int AS min_replicas,
       (dr.intent->>'max_replicas')::int AS max_replicas, d.endpoint,
       d.drift_policy, CASE WHEN d.status = 'DRIFTED' THEN d.observed->'drift_paths' END AS drift_paths,
       d.ready_wait_since, d.deploy_deadline,
       d.generation, d.observed_generation, d.attempts, d.last_error, d.next_attempt_at,
       CASE WHEN d.observed_generation < d.generation THEN pg_catalog.now() - d.updated_at END AS pending_for,
       d.traceparent, d.created_at, d.updated_at
FROM mlplat.deployments d
JOIN mlplat.projects p ON p.id = d.project_id
LEFT JOIN mlplat.deployment_revisions dr ON dr.deployment_id = d.id AND dr.revision = d.desired_revision;

CREATE VIEW mlplat.run_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.kind, u.status, u.status_reason,
       (u.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')) AS in_flight,
       u.gpus, (SELECT pg_catalog.count(*) FROM mlplat.run_steps s WHERE s.run_id = u.id) AS steps,
       u.created_by, u.generation, u.observed_generation, u.attempts, u.last_error, u.next_attempt_at,
       u.traceparent, u.created_at, u.updated_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id;

CREATE VIEW mlplat.rollout_status WITH (security_invoker = true) AS
SELECT p.name AS project, d.name AS deployment, ro.id AS rollout_id, ro.status, ro.status_reason,
       ro.requested_action,
       (ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')) AS in_flight,
       ro.baseline_revision, ro.target_revision, ro.current_fraction, ro.policy, ro.created_by,
       ro.generation, ro.observed_generation, ro.attempts, ro.last_error, ro.traceparent,
       ro.created_at, ro.updated_at,
       -- what the controller last saw, not what it asked for: the split KServe reports
       (ro.observed->>'target_percent')::int AS observed_target_percent,
       ro.observed->'traffic' AS observed_traffic, ro.observed_at,
       ro.window_start,
       lt.decision AS last_decision, lt.reasons AS last_reasons, lt.at AS last_decision_at,
       (SELECT pg_catalog.count(*) FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id) AS transitions
FROM mlplat.rollouts ro
LEFT JOIN LATERAL (SELECT t.decision, t.reasons, t.at FROM mlplat.rollout_transitions t
                    WHERE t.rollout_id = ro.id ORDER BY t.seq DESC LIMIT 1) lt ON true
JOIN mlplat.deployments d ON d.id = ro.deployment_id
JOIN mlplat.projects p ON p.id = ro.project_id;

CREATE VIEW mlplat.audit_log WITH (security_invoker = true) AS
SELECT a.id, a.at, a.actor, a.db_role, a.action, a.project, a.entity, a.entity_id, a.request_id,
       a.trace_id, a.detail, a.epoch, a.controller
FROM mlplat.audit_events a;

-- Row-level security: one policy per table, all through mlplat._can_view().
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['members', 'models', 'model_versions', 'model_aliases', 'deployments',
                           'deployment_revisions', 'runs', 'run_steps', 'rollouts', 'audit_events'] LOOP
    EXECUTE pg_catalog.format('ALTER TABLE mlplat.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE pg_catalog.format('CREATE POLICY member_reads ON mlplat.%I FOR SELECT USING (mlplat._can_view(project_id))', t);
  END LOOP;
END $$;
ALTER TABLE mlplat.projects ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.projects FOR SELECT USING (mlplat._can_view(id));

-- Privileges: read-only for everyone (RLS filters); nothing writable; internals not callable.
GRANT SELECT ON mlplat.projects, mlplat.members, mlplat.models, mlplat.model_versions, mlplat.model_aliases,
                mlplat.deployments, mlplat.deployment_revisions, mlplat.runs, mlplat.run_steps, mlplat.rollouts,
                mlplat.audit_events, mlplat.policies, mlplat.installation,
                mlplat.project_status, mlplat.deployment_status, mlplat.run_status, mlplat.rollout_status,
                mlplat.audit_log
  TO PUBLIC;
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname LIKE '\_%' AND p.proname <> '_can_view' LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$;

-- pg_dump keeps the data of extension tables marked as configuration.
DO $$
DECLARE
  t text;
  s text;
BEGIN
  FOREACH t IN ARRAY ARRAY['admins', 'impersonators', 'idempotency_keys', 'projects', 'members', 'models',
                           'model_versions', 'model_aliases', 'deployments', 'deployment_revisions', 'runs',
                           'run_steps', 'rollouts', 'audit_events'] LOOP
    PERFORM pg_catalog.pg_extension_config_dump(('mlplat.' || t)::regclass, '');
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = ('mlplat.' || t)::regclass
               AND a.attname = 'id' AND a.attidentity <> '') THEN
      s := pg_catalog.pg_get_serial_sequence('mlplat.' || t, 'id');
      PERFORM pg_catalog.pg_extension_config_dump(s::regclass, '');
    END IF;
  END LOOP;
END $$;

-- ==== sql/install/50_runtime.sql
-- 50_runtime: state the reconciler workers keep in tables.
--
-- Leadership itself is a session advisory lock (see src/worker/worker.c); the
-- table only records each acquisition, so every write a leader makes can be
-- stamped with, and fenced by, the epoch it led under.

CREATE TABLE mlplat.leader_epochs (
    kind        text PRIMARY KEY,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.leader_epochs IS
  'Current leader epoch per reconciler kind; bumped each time a replica takes the leader lock.';

CREATE TABLE mlplat.leader_history (
    kind        text NOT NULL,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (kind, epoch)
);

-- Called by a worker right after it took the kind's advisory lock.
CREATE FUNCTION mlplat._take_leadership(p_kind text, p_pid int, p_replica int)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
    v_epoch bigint;
    v_host  text := coalesce(pg_catalog.inet_server_addr()::text, pg_catalog.current_setting('cluster_name'), '')
                    || ':' || pg_catalog.current_setting('port');
BEGIN
    INSERT INTO mlplat.leader_epochs AS e (kind, epoch, pid, replica, host, acquired_at)
    VALUES (p_kind, 1, p_pid, p_replica, v_host, pg_catalog.clock_timestamp())
    ON CONFLICT (kind) DO UPDATE
       SET epoch = e.epoch + 1, pid = EXCLUDED.pid, replica = EXCLUDED.replica,
           host = EXCLUDED.host, acquired_at = EXCLUDED.acquired_at
    RETURNING epoch INTO v_epoch;
    INSERT INTO mlplat.leader_history (kind, epoch, pid, replica, host, acquired_at)
    VALUES (p_kind, v_epoch, p_pid, p_replica, v_host, pg_catalog.clock_timestamp());
    RETURN v_epoch;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._take_leadership(text, int, int) FROM PUBLIC;

-- One row per worker replica, from shared memory (empty when not preloaded).
CREATE FUNCTION mlplat._replica_states(
    OUT kind text, OUT replica int, OUT pid int, OUT role text, OUT epoch bigint,
    OUT started_at timestamptz, OUT last_pass_start timestamptz, OUT last_pass_end timestamptz,
    OUT passes bigint, OUT pass_errors bigint, OUT http_requests bigint, OUT http_errors bigint,
    OUT status text, OUT http_latency_ms_total float8)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_replica_states';
REVOKE ALL ON FUNCTION mlplat._replica_states() FROM PUBLIC;

-- The reconcile ledger: one row per apply, delete, repair or orphan teardown,
-- written by the leader that did it, in the same transaction as its write-back.
CREATE TABLE mlplat.reconcile_ledger (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    kind           text NOT NULL,
    entity         text NOT NULL,
    entity_id      bigint,
    project        text,
    action         text NOT NULL CHECK (action IN ('APPLY', 'CREATE', 'ADOPT', 'DELETE', 'REPAIR',
                                                   'ORPHAN_TEARDOWN', 'PATCH', 'VERIFY', 'OBSERVE')),
    outcome        text NOT NULL CHECK (outcome IN ('OK', 'FAILED', 'CONFLICT', 'RETRY', 'SKIPPED')),
    desired_digest text,
    observed_digest text,
    http_status    int,
    error          text,
    epoch          bigint NOT NULL,
    controller     text NOT NULL,
    trace_id       text,
    detail         jsonb
);
CREATE INDEX reconcile_ledger_at ON mlplat.reconcile_ledger (at);
CREATE INDEX reconcile_ledger_entity ON mlplat.reconcile_ledger (kind, entity_id, at);
COMMENT ON TABLE mlplat.reconcile_ledger IS
  'What each reconciler did to the outside world, with the leader epoch and controller that did it.';

-- Appends ledger rows if, and only if, p_epoch is still the kind's current epoch: a deposed
-- leader's write is refused, never silently mixed in.  Element i of every array is one row
-- (a pass writes all its rows with one statement); they are inserted in array order.  A note
-- goes into detail as {"note": ...}.  Returns the number of rows written.
CREATE FUNCTION mlplat._ledger_append_set(
    p_kind text, p_epoch bigint, p_controller text,
    p_entity text[], p_entity_id bigint[], p_project text[], p_action text[], p_outcome text[],
    p_desired_digest text[], p_observed_digest text[], p_http_status int[], p_error text[],
    p_trace_id text[], p_note text[])
RETURNS int
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  WITH ins AS (
    INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, desired_digest,
                                         observed_digest, http_status, error, epoch, controller, trace_id, detail)
    SELECT p_kind, r.entity, r.entity_id, r.project, r.action, r.outcome, r.desired_digest,
           r.observed_digest, r.http_status, left(r.error, 2000), p_epoch, p_controller, r.trace_id,
           CASE WHEN r.note IS NULL THEN NULL ELSE pg_catalog.jsonb_build_object('note', r.note) END
      -- multi-argument unnest is FROM-clause syntax only unqualified (search_path is pinned)
      FROM unnest(p_entity, p_entity_id, p_project, p_action, p_outcome, p_desired_digest,
                             p_observed_digest, p_http_status, p_error, p_trace_id, p_note) WITH ORDINALITY
           AS r(entity, entity_id, project, action, outcome, desired_digest, observed_digest,
                http_status, error, trace_id, note, ord)
     WHERE EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch)
     ORDER BY r.ord
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;
REVOKE ALL ON FUNCTION mlplat._ledger_append_set(text, bigint, text, text[], bigint[], text[], text[], text[], text[], text[], int[], text[], text[], text[]) FROM PUBLIC;

-- One row: true if it was written (false: p_epoch is not the kind's current epoch).
CREATE FUNCTION mlplat._ledger_append(
    p_kind text, p_entity text, p_entity_id bigint, p_project text, p_action text, p_outcome text,
    p_desired_digest text, p_observed_digest text, p_http_status int, p_error text,
    p_epoch bigint, p_controller text, p_trace_id text, p_detail jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch) THEN
        RETURN false;
    END IF;
    INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, desired_digest,
                                         observed_digest, http_status, error, epoch, controller, trace_id, detail)
    VALUES (p_kind, p_entity, p_entity_id, p_project, p_action, p_outcome, p_desired_digest,
            p_observed_digest, p_http_status, left(p_error, 2000), p_epoch, p_controller, p_trace_id, p_detail);
    RETURN true;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._ledger_append(text, text, bigint, text, text, text, text, text, int, text, bigint, text, text, jsonb) FROM PUBLIC;

-- Retention: purge ledger rows older than mlplat.ledger_retention days.
-- Scheduled hourly with pg_cron when pg_cron is installed in this database;
-- otherwise call it from any scheduler.
CREATE FUNCTION mlplat.run_retention()
RETURNS TABLE (what text, deleted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    DELETE FROM mlplat.reconcile_ledger
     WHERE at < pg_catalog.now() - pg_catalog.make_interval(days => pg_catalog.current_setting('mlplat.ledger_retention')::int);
    GET DIAGNOSTICS n = ROW_COUNT;
    what := 'reconcile_ledger'; deleted := n;
    RETURN NEXT;
    DELETE FROM mlplat.idempotency_keys
     WHERE created_at < pg_catalog.now() - pg_catalog.make_interval(days => pg_catalog.current_setting('mlplat.idempotency_retention')::int);
    GET DIAGNOSTICS n = ROW_COUNT;
    what := 'idempotency_keys'; deleted := n;
    RETURN NEXT;
    -- exported or not: an exporter down for that long must not grow the table without bound
    DELETE FROM mlplat.spans
     WHERE end_time < pg_catalog.now() - pg_catalog.make_interval(days => pg_catalog.current_setting('mlplat.span_retention')::int);
    GET DIAGNOSTICS n = ROW_COUNT;
    what := 'spans'; deleted := n;
    RETURN NEXT;
END;
$$;
REVOKE ALL ON FUNCTION mlplat.run_retention() FROM PUBLIC;
COMMENT ON FUNCTION mlplat.run_retention() IS
  'Deletes ledger rows older than mlplat.ledger_retention days, idempotency keys older than mlplat.idempotency_retention days and spans older than mlplat.span_retention days.';

DO $do$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
        -- The command survives DROP EXTENSION mlplat harmlessly: it checks first.
        PERFORM cron.schedule('mlplat-retention', '17 * * * *',
            $cmd$DO $x$ BEGIN IF pg_catalog.to_regproc('mlplat.run_retention') IS NOT NULL THEN PERFORM mlplat.run_retention(); END IF; END $x$ $cmd$);
    END IF;
END;
$do$;


-- Every live reconciled entity with the columns all kinds share; the health
-- and alerts views read it.
CREATE VIEW mlplat._entities AS
    SELECT 'projects' AS kind, p.name AS entity, p.id AS entity_id, p.name AS project,
           p.generation, p.observed_generation, p.attempts, p.last_error, p.status, p.updated_at
      FROM mlplat.projects p WHERE p.status <> 'DELETED'
    UNION ALL
    SELECT 'deployments', d.name, d.id, p.name, d.generation, d.observed_generation, d.attempts,
           d.last_error, d.status, d.updated_at
      FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE d.status <> 'DELETED'
    UNION ALL
    SELECT 'runs', r.name, r.id, p.name, r.generation, r.observed_generation, r.attempts,
           r.last_error, r.status, r.updated_at
      FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id
     WHERE r.status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
    UNION ALL
    SELECT 'model_aliases', a.alias, a.id, p.name, a.generation, a.observed_generation, a.attempts,
           a.last_error, a.status, a.updated_at
      FROM mlplat.model_aliases a JOIN mlplat.models m ON m.id = a.model_id JOIN mlplat.projects p ON p.id = m.project_id
    UNION ALL
    SELECT 'rollouts', d.name, o.id, p.name, o.generation, o.observed_generation, o.attempts,
           o.last_error, o.status, o.updated_at
      FROM mlplat.rollouts o JOIN mlplat.deployments d ON d.id = o.deployment_id JOIN mlplat.projects p ON p.id = d.project_id
     WHERE o.status NOT IN ('PROMOTED', 'ROLLED_BACK', 'ABORTED', 'FAILED');
REVOKE ALL ON mlplat._entities FROM PUBLIC;

-- Per kind and replica: leader or standby, epoch, last pass, the kind's pending
-- entities and the age of the oldest, errors, HTTP counts and mean latency.
CREATE VIEW mlplat.reconciler_health AS
SELECT s.kind, s.replica, s.pid, s.role,
       CASE WHEN s.role IN ('leader', 'idle') THEN e.epoch END AS epoch,
       s.started_at, s.last_pass_start, s.last_pass_end,
       s.last_pass_end - s.last_pass_start AS last_pass_duration,
       s.passes, s.pass_errors,
       coalesce(p.pending, 0) AS pending,
       p.oldest_pending_age,
       (SELECT count(*) FROM mlplat.reconcile_ledger l
         WHERE l.kind = s.kind AND l.outcome = 'FAILED' AND l.at > pg_catalog.now() - interval '1 hour') AS errors_last_hour,
       s.http_requests, s.http_errors,
       round((s.http_latency_ms_total / NULLIF(s.http_requests, 0))::numeric, 1) AS http_mean_latency_ms,
       s.status
  FROM mlplat._replica_states() s
  LEFT JOIN mlplat.leader_epochs e ON e.kind = s.kind
  LEFT JOIN (SELECT x.kind, count(*) AS pending, pg_catalog.now() - min(x.updated_at) AS oldest_pending_age
               FROM mlplat._entities x
              WHERE x.generation <> x.observed_generation
                 OR x.status IN ('PENDING', 'PROVISIONING', 'DEPLOYING', 'DRIFTED', 'DELETING',
                                 'SUBMITTED', 'CANCEL_REQUESTED', 'PROGRESSING', 'ROLLING_BACK')
              GROUP BY x.kind) p ON p.kind = s.kind;
COMMENT ON VIEW mlplat.reconciler_health IS
  'One row per reconciler replica: role, epoch, last pass, pending work and its age, errors, HTTP counts and latency.';
REVOKE ALL ON mlplat.reconciler_health FROM PUBLIC;

-- Conditions of canary rollouts an operator should look at (part of mlplat.alerts):
--   repeated_holds       the last 3 decisions of a HOLDING rollout were all HOLD
--   stale_health         an active rollout not observed for longer than its window
--   rollback_route_loss  the previous revision is missing from the route (rolling back,
--                        or a decision found it not warm)
--   surge_exhaustion     an active canary's reserved GPUs (start_rollout reserves them) no
--                        longer fit the project's quota (the quota row was changed
--                        outside set_project_quota, which refuses to go below use)
--   request_regression   a rollout rolled back on a demonstrated request regression (last hour)
CREATE VIEW mlplat._rollout_alerts AS
WITH active AS (
  SELECT ro.*, p.name AS project, d.name AS deployment, p.gpu_quota,
         (SELECT pg_catalog.array_agg(t.decision ORDER BY t.seq DESC) FROM
            (SELECT t.decision, t.seq FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id
              ORDER BY t.seq DESC LIMIT 3) t) AS last3,
         (SELECT t.reasons FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id
           ORDER BY t.seq DESC LIMIT 1) AS last_reasons
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
   WHERE ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK'))
SELECT 'repeated_holds' AS alert, 'warning' AS severity, a.project, a.deployment, a.id AS rollout_id,
       pg_catalog.format('3 HOLD decisions in a row; last reasons: %s', pg_catalog.array_to_string(a.last_reasons, ', ')) AS detail,
       a.updated_at AS since
  FROM active a WHERE a.status = 'HOLDING' AND a.last3 = ARRAY['HOLD', 'HOLD', 'HOLD']
UNION ALL
SELECT 'stale_health', 'warning', a.project, a.deployment, a.id,
       pg_catalog.format('InferenceService last observed %s ago; last error: %s',
                         pg_catalog.date_trunc('second', pg_catalog.now() - coalesce(a.observed_at, a.created_at)),
                         coalesce(a.last_error, '-')),
       coalesce(a.observed_at, a.created_at)
  FROM active a
 WHERE coalesce(a.observed_at, a.created_at)
       < pg_catalog.now() - pg_catalog.make_interval(secs => GREATEST((a.policy->>'window_seconds')::int, 30))
UNION ALL
SELECT 'rollback_route_loss', 'critical', a.project, a.deployment, a.id,
       coalesce(CASE WHEN a.status_reason LIKE 'rollback route lost%' THEN a.status_reason END,
                'the last decision found the previous revision not ready and warm'),
       a.updated_at
  FROM active a
 WHERE a.status_reason LIKE 'rollback route lost%' OR 'PREVIOUS_NOT_WARM' = ANY (a.last_reasons)
UNION ALL
SELECT 'surge_exhaustion', 'warning', a.project, a.deployment, a.id,
       pg_catalog.format('canary reserves %s GPUs; %s committed, quota %s', a.surge_gpus, x.in_use, a.gpu_quota),
       a.created_at
  FROM active a
  CROSS JOIN LATERAL (SELECT mlplat._gpus_in_use(a.project_id) AS in_use) x
 WHERE a.surge_gpus > 0 AND x.in_use > a.gpu_quota
UNION ALL
SELECT 'request_regression', 'critical', p.name, d.name, ro.id,
       pg_catalog.format('rolled back revision %s: %s', ro.target_revision, pg_catalog.array_to_string(t.reasons, ', ')),
       t.at
  FROM mlplat.rollout_transitions t
  JOIN mlplat.rollouts ro ON ro.id = t.rollout_id
  JOIN mlplat.deployments d ON d.id = ro.deployment_id
  JOIN mlplat.projects p ON p.id = ro.project_id
 WHERE t.decision = 'ROLLBACK' AND t.at > pg_catalog.now() - interval '1 hour';
REVOKE ALL ON mlplat._rollout_alerts FROM PUBLIC;


-- ==== sql/install/51_reconcile_deployments.sql
-- 51_reconcile_deployments: the deployments reconciler's two short transactions.
--
-- Claim reads desired state and commits before any HTTP; write-back runs after
-- the HTTP in a new transaction and applies only if the row is still at the
-- version the claim read (an intent committed meanwhile wins; the entity is
-- simply read again next pass) and the caller still holds the kind's epoch.

-- p_only_new: a pass woken by a commit takes just the intents not yet applied.
-- p_deadline_ms: mlplat.deploy_deadline of the calling worker (0: none); a deployment's own
-- deploy_deadline overrides it.  deadline_ms is the one that applies (deadline_own: the
-- deployment's), deadline_passed says the revision asked for at ready_wait_since has had
-- longer than that to become READY.
CREATE FUNCTION mlplat._deployments_claim(p_resync boolean, p_only_new boolean DEFAULT false,
                                          p_deadline_ms int DEFAULT 0)
RETURNS TABLE (id bigint, project text, namespace text, name text, status text,
               generation bigint, observed_generation bigint, row_version bigint,
               desired_revision int, spec text, spec_digest text, traceparent text,
               attempts int, due boolean, drift_policy text, status_reason text,
               deadline_passed boolean, deadline_ms bigint, deadline_own boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT d.id, p.name, 'mlp-' || p.name, d.name, d.status,
         d.generation, d.observed_generation, d.row_version,
         d.desired_revision, r.spec::text, r.spec_digest, d.traceparent, d.attempts,
         d.next_attempt_at <= pg_catalog.now()
           AND (p_resync OR d.generation <> d.observed_generation
                OR d.status IN ('PENDING', 'DEPLOYING', 'DRIFTED', 'DELETING'))
           -- an active rollout owns the InferenceService (see src/reconcile/rollouts.c)
           AND NOT EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id
                            AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')),
         d.drift_policy, d.status_reason,
         dl.ms > 0 AND d.ready_wait_since IS NOT NULL
           AND d.ready_wait_since + pg_catalog.make_interval(secs => dl.ms / 1000.0) < pg_catalog.now(),
         dl.ms, d.deploy_deadline IS NOT NULL
    FROM mlplat.deployments d
    CROSS JOIN LATERAL (SELECT coalesce((pg_catalog.date_part('epoch', d.deploy_deadline) * 1000)::bigint,
                                        p_deadline_ms) AS ms) dl
    JOIN mlplat.projects p ON p.id = d.project_id
    LEFT JOIN mlplat.deployment_revisions r
           ON r.deployment_id = d.id AND r.revision = d.desired_revision
   WHERE d.status <> 'DELETED'
     AND (NOT p_only_new OR (d.generation <> d.observed_generation AND d.next_attempt_at <= pg_catalog.now()))
   ORDER BY d.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_claim(boolean, boolean, int) FROM PUBLIC;

-- The write-back of a whole pass in one statement: element i of every array describes one
-- deployment (the arrays are parallel, one element per row written).  p_retry_ms[i]: NULL = no
-- retry scheduled (success: attempts reset); otherwise attempts + 1 and next_attempt_at =
-- now() + p_retry_ms[i].  NULL in p_observed_generation / p_observed_revision / p_endpoint
-- keeps the stored value; top-level keys of p_observed[i] replace those of observed.  A row is
-- written only if it is still at p_row_version[i] (an intent or another leader that got there
-- first wins) and p_epoch is still the kind's epoch.  Returns the ids written.  The planner
-- takes an unnest of a parameter for a few rows, so it probes the primary key once per
-- element, in array order: a caller passing ids ascending locks rows in id order, as
-- writing them one by one did.
CREATE FUNCTION mlplat._deployments_writeback_set(
    p_epoch bigint, p_id bigint[], p_row_version bigint[],
    p_status text[], p_reason text[], p_observed_generation bigint[], p_observed_revision int[],
    p_endpoint text[], p_observed jsonb[], p_error text[], p_retry_ms int[])
RETURNS SETOF bigint
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  UPDATE mlplat.deployments d
     SET status = w.status,
         status_reason = w.reason,
         observed_generation = coalesce(w.observed_generation, d.observed_generation),
         observed_revision = coalesce(w.observed_revision, d.observed_revision),
         ready_revision = CASE WHEN w.status = 'READY' THEN coalesce(w.observed_revision, d.observed_revision)
                               WHEN w.status = 'DELETED' THEN NULL ELSE d.ready_revision END,
         endpoint = CASE WHEN w.status IN ('DELETED') THEN NULL ELSE coalesce(w.endpoint, d.endpoint) END,
         ready_wait_since = CASE WHEN w.status = 'READY' THEN NULL ELSE d.ready_wait_since END,
         observed = CASE WHEN w.observed IS NULL THEN d.observed ELSE coalesce(d.observed, '{}'::jsonb) || w.observed END,
         observed_at = pg_catalog.now(),
         last_error = w.error,
         attempts = CASE WHEN w.retry_ms IS NULL THEN 0 ELSE d.attempts + 1 END,
         next_attempt_at = CASE WHEN w.retry_ms IS NULL THEN pg_catalog.now()
                                ELSE pg_catalog.now() + pg_catalog.make_interval(secs => w.retry_ms / 1000.0) END,
         epoch = p_epoch,
         row_version = d.row_version + 1,
         updated_at = pg_catalog.now()
    -- multi-argument unnest is FROM-clause syntax only unqualified (search_path is pinned)
    FROM unnest(p_id, p_row_version, p_status, p_reason, p_observed_generation, p_observed_revision,
                p_endpoint, p_observed, p_error, p_retry_ms)
         AS w(id, row_version, status, reason, observed_generation, observed_revision,
              endpoint, observed, error, retry_ms)
   WHERE d.id = w.id AND d.row_version = w.row_version
     AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'deployments' AND e.epoch = p_epoch)
  RETURNING d.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback_set(bigint, bigint[], bigint[], text[], text[], bigint[], int[], text[], jsonb[], text[], int[]) FROM PUBLIC;

-- One deployment's write-back (tests and operators standing in for the reconciler).
CREATE FUNCTION mlplat._deployments_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint, p_observed_revision int,
    p_endpoint text, p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT EXISTS (SELECT 1 FROM mlplat._deployments_writeback_set(
           p_epoch, ARRAY[p_id], ARRAY[p_row_version], ARRAY[p_status], ARRAY[p_reason],
           ARRAY[p_observed_generation], ARRAY[p_observed_revision], ARRAY[p_endpoint],
           ARRAY[p_observed], ARRAY[p_error], ARRAY[p_retry_ms]))
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback(bigint, bigint, bigint, text, text, bigint, int, text, jsonb, text, int) FROM PUBLIC;

CREATE FUNCTION mlplat._instance_id() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$ SELECT instance_id FROM mlplat.installation LIMIT 1 $$;
REVOKE ALL ON FUNCTION mlplat._instance_id() FROM PUBLIC;

-- ---------------------------------------------------------------- route generations
--
-- What gateways route to: per project, model -> the deployments whose endpoint serves a
-- revision we saw READY (ready_revision), while READY, DRIFTED (drift is a difference in the
-- spec; the endpoint stays up while it is shown or repaired) or DEPLOYING a newer revision
-- (KServe keeps the last ready revision serving until the new one is ready, so a redeploy
-- must not blank the route; the route moves to the new revision when it is READY).  FAILED,
-- DELETING and PENDING are not routed.  Every change of that set is a new, immutable,
-- numbered generation written by the transaction that changed it (the write-back, or
-- undeploy taking a deployment out), and NOTIFY mlplat_routes
-- carries its number, delivered by PostgreSQL only when that transaction commits.
--
-- Numbers are global (a gateway reads "the table as of N"), strictly increasing in commit
-- order, without gaps: publishers serialize on the one route_head row, which each holds
-- from its final check until it commits, and a set read before taking it is used only if
-- no generation of that project was published since; otherwise it is read again under the
-- lock, when it includes every earlier generation's changes.  The payload is only the number: it names no
-- project, so listening reveals nothing RLS would hide.
CREATE TABLE mlplat.route_generations (
  generation  bigint PRIMARY KEY,
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  routes      jsonb NOT NULL,   -- {"<model>": [{deployment, endpoint, revision, version}, ...]}
  created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  -- which transaction, and which of its statements (normally the COMMIT) published it
  created_xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
  created_statement_at timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp()
);
CREATE INDEX route_generations_project ON mlplat.route_generations (project_id, generation);
CREATE TRIGGER route_generations_immutable BEFORE UPDATE OR DELETE ON mlplat.route_generations
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
CREATE TRIGGER route_generations_no_truncate BEFORE TRUNCATE ON mlplat.route_generations
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();

-- The publishers' lock.  Its value is informational (numbers come from route_generations,
-- which survives pg_dump); every publish updates it so that a REPEATABLE READ publisher
-- whose snapshot predates another publish fails with a serialization error instead of
-- publishing a set computed from that old snapshot.
CREATE TABLE mlplat.route_head (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  generation bigint NOT NULL DEFAULT 0
);
INSERT INTO mlplat.route_head DEFAULT VALUES;

-- The routes of one project as the caller's snapshot shows them.  Names sort in "C" order:
-- deterministic, and far cheaper than the locale's collation.
CREATE FUNCTION mlplat._routes_of(p_project_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce(pg_catalog.jsonb_object_agg(m.model, m.entries), '{}'::jsonb)
          FROM (SELECT dr.intent->>'model' AS model,
                       pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                         'deployment', d.name, 'endpoint', d.endpoint, 'revision', d.ready_revision,
                         'version', dr.intent->>'version') ORDER BY d.name COLLATE "C") AS entries
                FROM mlplat.deployments d
                JOIN mlplat.deployment_revisions dr ON dr.deployment_id = d.id AND dr.revision = d.ready_revision
                WHERE d.project_id = p_project_id AND d.status IN ('READY', 'DRIFTED', 'DEPLOYING')
                  AND d.endpoint IS NOT NULL
                GROUP BY 1) m);
END $$;
REVOKE ALL ON FUNCTION mlplat._routes_of(bigint) FROM PUBLIC;

-- Deferred to commit: runs once the transaction's changes are all made.  SECURITY DEFINER
-- because deferred triggers run as the session's user, outside the API function that made
-- the change.
CREATE FUNCTION mlplat._routes_publish() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  seen_gen bigint;
  seen boolean;
  last_gen bigint;
  last_routes jsonb;
  cur jsonb;
  n bigint;
BEGIN
  -- One generation per project and commit: deferred, every firing runs in the COMMIT, after
  -- the last change, so the first one saw them all (1,000 deployments READY in one write-back
  -- make one generation, not 1,000 recomputations).  Under SET CONSTRAINTS IMMEDIATE the
  -- firings follow each statement, so a later statement publishes again.
  SELECT g.generation,
         g.created_xid = pg_catalog.pg_current_xact_id() AND g.created_statement_at = pg_catalog.statement_timestamp()
  INTO seen_gen, seen FROM mlplat.route_generations g
  WHERE g.project_id = NEW.project_id ORDER BY g.generation DESC LIMIT 1;
  IF seen THEN
    RETURN NULL;
  END IF;
  -- Computed before the lock, so publishers hold it only for an instant ...
  cur := mlplat._routes_of(NEW.project_id);
  PERFORM 1 FROM mlplat.route_head h FOR UPDATE;
  -- ... and valid only if nobody published for this project meanwhile; else computed again,
  -- now after that publisher committed (READ COMMITTED: a new snapshot per statement).
  SELECT g.generation, g.routes INTO last_gen, last_routes FROM mlplat.route_generations g
  WHERE g.project_id = NEW.project_id ORDER BY g.generation DESC LIMIT 1;
  IF last_gen IS DISTINCT FROM seen_gen THEN
    cur := mlplat._routes_of(NEW.project_id);
  END IF;
  IF cur = coalesce(last_routes, '{}'::jsonb) THEN
    RETURN NULL;
  END IF;
  n := coalesce((SELECT pg_catalog.max(g.generation) FROM mlplat.route_generations g), 0) + 1;
  INSERT INTO mlplat.route_generations (generation, project_id, routes) VALUES (n, NEW.project_id, cur);
  UPDATE mlplat.route_head SET generation = n;
  PERFORM pg_catalog.pg_notify('mlplat_routes', n::text);
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION mlplat._routes_publish() FROM PUBLIC;

-- Fires only for changes that can change a route: becoming or ceasing to be routable (the
-- predicate of _routes_of), or a routable deployment's endpoint or serving revision changing.
-- A deploy() of a READY deployment (READY -> DEPLOYING, same ready_revision) fires nothing.
CREATE CONSTRAINT TRIGGER deployments_publish_routes AFTER UPDATE ON mlplat.deployments
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (coalesce(OLD.status IN ('READY', 'DRIFTED', 'DEPLOYING') AND OLD.endpoint IS NOT NULL
                 AND OLD.ready_revision IS NOT NULL, false)
          IS DISTINCT FROM
        coalesce(NEW.status IN ('READY', 'DRIFTED', 'DEPLOYING') AND NEW.endpoint IS NOT NULL
                 AND NEW.ready_revision IS NOT NULL, false)
        OR (NEW.status IN ('READY', 'DRIFTED', 'DEPLOYING')
            AND (OLD.endpoint, OLD.ready_revision) IS DISTINCT FROM (NEW.endpoint, NEW.ready_revision)))
  EXECUTE FUNCTION mlplat._routes_publish();

-- The route table as of a generation (default: the latest): per project, the newest
-- generation at or before it.  Not SECURITY DEFINER: row-level security shows a caller the
-- projects they may view (a gateway's role is a platform administrator or a viewer).
CREATE FUNCTION mlplat.route_table(as_of bigint DEFAULT NULL)
RETURNS TABLE (generation bigint, project text, model text, deployment text, endpoint text,
               revision int, version text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT g.generation, p.name, e.key, r->>'deployment', r->>'endpoint', (r->>'revision')::int, r->>'version'
  FROM (SELECT DISTINCT ON (x.project_id) x.project_id, x.generation, x.routes
        FROM mlplat.route_generations x
        WHERE route_table.as_of IS NULL OR x.generation <= route_table.as_of
        ORDER BY x.project_id, x.generation DESC) g
  JOIN mlplat.projects p ON p.id = g.project_id
  CROSS JOIN LATERAL pg_catalog.jsonb_each(g.routes) e
  CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(e.value) r
  ORDER BY p.name, e.key, r->>'deployment'
$$;

-- For people: the current routes, one row per serving deployment.
CREATE VIEW mlplat.routes WITH (security_invoker = true) AS
SELECT p.name AS project, g.generation, e.key AS model, r->>'deployment' AS deployment,
       r->>'endpoint' AS endpoint, (r->>'revision')::int AS revision, r->>'version' AS version,
       g.created_at AS published_at
FROM (SELECT DISTINCT ON (x.project_id) x.project_id, x.generation, x.routes, x.created_at
      FROM mlplat.route_generations x ORDER BY x.project_id, x.generation DESC) g
JOIN mlplat.projects p ON p.id = g.project_id
CROSS JOIN LATERAL pg_catalog.jsonb_each(g.routes) e
CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(e.value) r;

ALTER TABLE mlplat.route_generations ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.route_generations FOR SELECT USING (mlplat._can_view(project_id));
GRANT SELECT ON mlplat.route_generations, mlplat.routes TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.route_generations', '');

-- ==== sql/install/52_reconcile_projects.sql
-- 52_reconcile_projects: the projects reconciler's two short transactions.
--
-- observed->'quota_generation' is the generation whose quota was last applied: a
-- quota change may drop a resource, which only an apply removes and a comparison of
-- the fields still wanted cannot see.
--
-- The claim returns every live project with everything its objects are rendered
-- from, members included: grant_role/revoke_role do not bump the project's
-- generation, but every pass compares each desired object with what it observed,
-- so a membership change is seen on the pass its commit wakes.  Write-back is a
-- compare-and-swap on row_version and the leader epoch, as for deployments.

-- The RoleBinding name for a member: mlplat-<role>-<principal>, where a
-- principal that is not already a DNS label is slugged and suffixed with a short
-- hash of its exact spelling (so "Alice" and "alice" never share a binding).
CREATE FUNCTION mlplat._rolebinding_name(p_role text, p_principal text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT 'mlplat-' || p_role || '-' ||
         CASE WHEN p_principal ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN p_principal
              ELSE coalesce(nullif(pg_catalog.left(pg_catalog.btrim(
                       pg_catalog.regexp_replace(pg_catalog.lower(p_principal), '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'p')
                   || '-' || pg_catalog.left(pg_catalog.md5(p_principal), 8)
         END
$$;
REVOKE ALL ON FUNCTION mlplat._rolebinding_name(text, text) FROM PUBLIC;

CREATE FUNCTION mlplat._projects_claim()
RETURNS TABLE (id bigint, name text, gpu_quota int, cpu_quota text, memory_quota text,
               status text, status_reason text, last_error text,
               generation bigint, observed_generation bigint, row_version bigint,
               traceparent text, attempts int, due boolean, members text,
               quota_generation bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT p.id, p.name, p.gpu_quota, p.cpu_quota, p.memory_quota,
         p.status, p.status_reason, p.last_error,
         p.generation, p.observed_generation, p.row_version,
         p.traceparent, p.attempts, p.next_attempt_at <= pg_catalog.now(),
         coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                            'principal', m.principal, 'role', m.role,
                            'binding', mlplat._rolebinding_name(m.role, m.principal))
                          ORDER BY m.role, m.principal)
                     FROM mlplat.members m WHERE m.project_id = p.id), '[]'::jsonb)::text,
         coalesce((p.observed->>'quota_generation')::bigint, 0)
    FROM mlplat.projects p
   WHERE p.status <> 'DELETED'
   ORDER BY p.id
$$;
REVOKE ALL ON FUNCTION mlplat._projects_claim() FROM PUBLIC;

-- p_retry_ms: NULL = no retry scheduled (attempts reset, due again at once);
-- otherwise attempts + 1 and next_attempt_at = now() + p_retry_ms.
CREATE FUNCTION mlplat._projects_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint,
    p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    UPDATE mlplat.projects p
       SET status = p_status,
           status_reason = p_reason,
           observed_generation = coalesce(p_observed_generation, p.observed_generation),
           observed = coalesce(p_observed, p.observed),
           observed_at = pg_catalog.now(),
           last_error = p_error,
           attempts = CASE WHEN p_retry_ms IS NULL THEN 0 ELSE p.attempts + 1 END,
           next_attempt_at = CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                                  ELSE pg_catalog.now() + pg_catalog.make_interval(secs => p_retry_ms / 1000.0) END,
           epoch = p_epoch,
           row_version = p.row_version + 1,
           updated_at = pg_catalog.now()
     WHERE p.id = p_id AND p.row_version = p_row_version
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'projects' AND e.epoch = p_epoch);
    RETURN FOUND;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._projects_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int) FROM PUBLIC;

-- ==== sql/install/53_reconcile_runs.sql
-- 53_reconcile_runs: runs and pipeline runs on Argo Workflows.
--
-- A run is submitted once as a Workflow named <run>-<attempt> (deterministic: a retried
-- create after a lost response finds the same object, answered 409 AlreadyExists, and
-- adopts it).  The reconciler observes workflows by LIST with our labels and writes the
-- phase back into mlplat.runs and the nodes into mlplat.run_nodes, only when the
-- workflow's resourceVersion moved.  An explicit retry_run() is a new attempt with a new
-- workflow name.

ALTER TABLE mlplat.runs
  ADD COLUMN attempt            int NOT NULL DEFAULT 1,
  ADD COLUMN submitted_at       timestamptz,          -- the create was acknowledged (201 or 409) or the workflow seen
  ADD COLUMN observed_rv        text,                 -- resourceVersion of the workflow last written back
  ADD COLUMN observed_changes   bigint NOT NULL DEFAULT 0,  -- workflow versions written back
  ADD COLUMN step_rows_written  bigint NOT NULL DEFAULT 0;  -- step rows inserted/updated for them

-- What Argo reports per node (the Pod nodes: one per pipeline step; "main" for a single run).
CREATE TABLE mlplat.run_nodes (
  run_id      bigint NOT NULL REFERENCES mlplat.runs (id),
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  attempt     int NOT NULL,
  name        text NOT NULL,
  node_id     text,
  type        text,
  phase       text,
  exit_code   int,          -- parsed from Argo's string form; NULL while unknown
  started_at  timestamptz,
  finished_at timestamptz,
  message     text,
  updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (run_id, name)
);
ALTER TABLE mlplat.run_nodes ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.run_nodes FOR SELECT USING (mlplat._can_view(project_id));
GRANT SELECT ON mlplat.run_nodes TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.run_nodes', '');

INSERT INTO mlplat.policies (role, action)
VALUES ('developer', 'retry_run'), ('deployer', 'retry_run'), ('owner', 'retry_run');

CREATE FUNCTION mlplat._run_workflow_name(p_run text, p_attempt int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT p_run || '-' || p_attempt $$;

-- One Argo container from a validated container spec.
CREATE FUNCTION mlplat._run_container(s jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'name', 'main',
    'image', s->>'image',
    'command', s->'command',
    'args', s->'args',
    'env', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('name', e.key, 'value', e.value) ORDER BY e.key)
              FROM pg_catalog.jsonb_each_text(s->'env') e),
    'resources', CASE WHEN s ?| ARRAY['cpu', 'memory'] OR coalesce((s->>'gpus')::int, 0) > 0 THEN
      pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'requests', CASE WHEN s ?| ARRAY['cpu', 'memory'] THEN
                      pg_catalog.jsonb_build_object('cpu', s->'cpu', 'memory', s->'memory') END,
        'limits', CASE WHEN coalesce((s->>'gpus')::int, 0) > 0 THEN
                    pg_catalog.jsonb_build_object('nvidia.com/gpu', (s->>'gpus')::int) END)) END))
$$;

-- The exact Workflow for a run's current attempt.
CREATE FUNCTION mlplat._render_workflow(p_run_id bigint) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT pg_catalog.jsonb_build_object(
    'apiVersion', 'argoproj.io/v1alpha1',
    'kind', 'Workflow',
    'metadata', pg_catalog.jsonb_build_object(
      'name', mlplat._run_workflow_name(u.name, u.attempt),
      'namespace', 'mlp-' || p.name,
      'labels', pg_catalog.jsonb_build_object(
        'app.kubernetes.io/managed-by', 'mlplat',
        'mlplat.io/project', p.name,
        'mlplat.io/run', u.name,
        'mlplat.io/attempt', u.attempt::text,
        'mlplat.io/instance', mlplat._instance_id())),
    'spec', CASE WHEN u.kind = 'run' THEN
      pg_catalog.jsonb_build_object(
        'entrypoint', 'main',
        'templates', pg_catalog.jsonb_build_array(
          pg_catalog.jsonb_build_object('name', 'main', 'container', mlplat._run_container(u.spec))))
    ELSE
      pg_catalog.jsonb_build_object(
        'entrypoint', 'pipeline',
        'templates', pg_catalog.jsonb_build_array(
          pg_catalog.jsonb_build_object('name', 'pipeline', 'dag', pg_catalog.jsonb_build_object('tasks',
            (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                      'name', s.name, 'template', 'step-' || s.name,
                      'dependencies', CASE WHEN pg_catalog.cardinality(s.depends_on) > 0
                                           THEN pg_catalog.to_jsonb(s.depends_on) END)) ORDER BY s.ordinal)
               FROM mlplat.run_steps s WHERE s.run_id = u.id))))
        || (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                     'name', 'step-' || s.name, 'container', mlplat._run_container(s.spec)) ORDER BY s.ordinal)
              FROM mlplat.run_steps s WHERE s.run_id = u.id))
    END)
  FROM mlplat.runs u JOIN mlplat.projects p ON p.id = u.project_id
  WHERE u.id = p_run_id
$$;

-- The SQL-callable preview: callers see renders only for projects they may view.
CREATE FUNCTION mlplat.render_workflow(project text, run text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_workflow.project);
  rid bigint;
BEGIN
  SELECT u.id INTO rid FROM mlplat.runs u WHERE u.project_id = pid AND u.name = render_workflow.run;
  IF rid IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('run "%s" does not exist', pg_catalog.left(render_workflow.run, 64)),
      HINT = 'See mlplat.run_status for the project''s runs.';
  END IF;
  RETURN mlplat._render_workflow(rid);
END $$;

-- An explicit retry of a finished, unsuccessful run: a new attempt, a new workflow name.
CREATE FUNCTION mlplat.retry_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('retry_run', retry_run.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'run', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.runs;
  p mlplat.projects;
BEGIN
  SELECT * INTO seen FROM mlplat.runs x WHERE x.project_id = pid AND x.name = retry_run.run;
  IF seen.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('run "%s" does not exist', pg_catalog.left(retry_run.run, 64)),
      HINT = 'See mlplat.run_status for the project''s runs.';
  END IF;
  IF seen.status NOT IN ('FAILED', 'CANCELLED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'retry_run',
      'Only a FAILED or CANCELLED run can be retried.');
  END IF;
  p := mlplat._lock_project(pid, seen.gpus > 0, 'retry_run');
  IF seen.gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, seen.gpus, NULL);
  END IF;
  UPDATE mlplat.runs x
  SET status = 'PENDING', status_reason = pg_catalog.format('retry requested: attempt %s', seen.attempt + 1),
      attempt = seen.attempt + 1, submitted_at = NULL, observed_rv = NULL, last_error = NULL,
      generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0,
      next_attempt_at = pg_catalog.now(), traceparent = tp, updated_at = pg_catalog.now()
  WHERE x.id = seen.id AND x.row_version = seen.row_version AND x.status = seen.status;
  IF NOT FOUND THEN
    PERFORM mlplat._cas_lost('run', seen.name);
  END IF;
  DELETE FROM mlplat.run_nodes n WHERE n.run_id = seen.id;
  UPDATE mlplat.run_steps s SET phase = NULL, exit_code = NULL WHERE s.run_id = seen.id;
  r.entity := seen.kind; r.entity_id := seen.id; r.status := 'PENDING';
  PERFORM mlplat._audit('retry_run', retry_run.project, pid, seen.kind, seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('from', seen.status, 'attempt', seen.attempt + 1,
                                  'workflow', mlplat._run_workflow_name(seen.name, seen.attempt + 1)));
  PERFORM mlplat._wake_on_commit('runs');
  RETURN r;
END $$;

-- Claim: every active run; the render only where a create may be needed.
CREATE FUNCTION mlplat._runs_claim()
RETURNS TABLE (id bigint, project text, namespace text, name text, kind text, status text,
               attempt int, workflow text, manifest text, row_version bigint, attempts int,
               due boolean, submitted boolean, observed_rv text, traceparent text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT u.id, p.name, 'mlp-' || p.name, u.name, u.kind, u.status, u.attempt,
         mlplat._run_workflow_name(u.name, u.attempt),
         CASE WHEN u.status = 'PENDING' THEN mlplat._render_workflow(u.id)::text END,
         u.row_version, u.attempts, u.next_attempt_at <= pg_catalog.now(),
         u.submitted_at IS NOT NULL, u.observed_rv, u.traceparent
    FROM mlplat.runs u
    JOIN mlplat.projects p ON p.id = u.project_id
   WHERE u.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')
   ORDER BY u.id
$$;

-- Write-back with CAS on row_version and the leader epoch.  p_nodes (when the observed
-- workflow moved) is [{name, node_id, type, phase, exit_code (string), started_at,
-- finished_at, message}]; only rows that differ are written.  Returns the step rows
-- written, or -1 when the CAS lost.
CREATE FUNCTION mlplat._runs_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint, p_status text, p_reason text,
    p_error text, p_retry_ms int, p_submitted boolean, p_observed_rv text, p_nodes jsonb)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
  u mlplat.runs;
  n int := 0;
  m int;
BEGIN
  UPDATE mlplat.runs r
     SET status = p_status,
         status_reason = coalesce(p_reason, r.status_reason),
         submitted_at = CASE WHEN p_submitted THEN coalesce(r.submitted_at, pg_catalog.now()) ELSE r.submitted_at END,
         observed_rv = coalesce(p_observed_rv, r.observed_rv),
         observed_changes = r.observed_changes + (p_observed_rv IS NOT NULL)::int,
         observed_generation = r.generation,
         observed_at = pg_catalog.now(),
         last_error = p_error,
         attempts = CASE WHEN p_retry_ms IS NULL THEN 0 ELSE r.attempts + 1 END,
         next_attempt_at = CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                                ELSE pg_catalog.now() + pg_catalog.make_interval(secs => p_retry_ms / 1000.0) END,
         epoch = p_epoch,
         row_version = r.row_version + 1,
         updated_at = pg_catalog.now()
   WHERE r.id = p_id AND r.row_version = p_row_version
     AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'runs' AND e.epoch = p_epoch)
  RETURNING * INTO u;
  IF u.id IS NULL THEN
    RETURN -1;
  END IF;
  IF p_nodes IS NOT NULL THEN
    INSERT INTO mlplat.run_nodes AS o (run_id, project_id, attempt, name, node_id, type, phase, exit_code,
                                       started_at, finished_at, message)
    SELECT u.id, u.project_id, u.attempt, x.name, x.node_id, x.type, x.phase,
           CASE WHEN x.exit_code ~ '^-?[0-9]{1,9}$' THEN x.exit_code::int END,
           NULLIF(x.started_at, '')::timestamptz, NULLIF(x.finished_at, '')::timestamptz,
           NULLIF(x.message, '')
      FROM pg_catalog.jsonb_to_recordset(p_nodes)
           AS x(name text, node_id text, type text, phase text, exit_code text, started_at text,
                finished_at text, message text)
    ON CONFLICT (run_id, name) DO UPDATE
       SET attempt = EXCLUDED.attempt, node_id = EXCLUDED.node_id, type = EXCLUDED.type, phase = EXCLUDED.phase,
           exit_code = EXCLUDED.exit_code, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
           message = EXCLUDED.message, updated_at = pg_catalog.now()
     WHERE (o.attempt, o.node_id, o.type, o.phase, o.exit_code, o.started_at, o.finished_at, o.message)
           IS DISTINCT FROM (EXCLUDED.attempt, EXCLUDED.node_id, EXCLUDED.type, EXCLUDED.phase, EXCLUDED.exit_code,
                             EXCLUDED.started_at, EXCLUDED.finished_at, EXCLUDED.message);
    GET DIAGNOSTICS n = ROW_COUNT;
    -- the declared steps of a pipeline carry phase and exit code too (exit code as Argo's string)
    UPDATE mlplat.run_steps s SET phase = x.phase, exit_code = NULLIF(x.exit_code, '')
      FROM pg_catalog.jsonb_to_recordset(p_nodes) AS x(name text, phase text, exit_code text)
     WHERE s.run_id = u.id AND s.name = x.name
       AND (s.phase, s.exit_code) IS DISTINCT FROM (x.phase, NULLIF(x.exit_code, ''));
    GET DIAGNOSTICS m = ROW_COUNT;
    n := n + m;
    UPDATE mlplat.runs r SET step_rows_written = r.step_rows_written + n WHERE r.id = u.id AND n > 0;
  END IF;
  RETURN n;
END;
$$;

-- The runs view, plus the attempt and its workflow.
CREATE OR REPLACE VIEW mlplat.run_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.kind, u.status, u.status_reason,
       (u.status IN ('PENDING', 'SUBMITTED', 'RUNNING', 'CANCEL_REQUESTED')) AS in_flight,
       u.gpus, (SELECT pg_catalog.count(*) FROM mlplat.run_steps s WHERE s.run_id = u.id) AS steps,
       u.created_by, u.generation, u.observed_generation, u.attempts, u.last_error, u.next_attempt_at,
       u.traceparent, u.created_at, u.updated_at,
       u.attempt, u.name || '-' || u.attempt AS workflow, u.submitted_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id;

-- One row per step: the declared steps of a pipeline (observed or not yet), and what Argo
-- reports for a single run ("main").
CREATE VIEW mlplat.run_step_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.attempt, st.name AS step, st.ordinal, st.depends_on,
       n.type, coalesce(n.phase, 'Waiting') AS phase, n.exit_code, n.started_at, n.finished_at, n.message,
       n.updated_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id
JOIN LATERAL (
  SELECT s.name, s.ordinal, s.depends_on FROM mlplat.run_steps s WHERE s.run_id = u.id
  UNION ALL
  SELECT o.name, NULL::int, NULL::text[] FROM mlplat.run_nodes o
   WHERE o.run_id = u.id AND NOT EXISTS (SELECT 1 FROM mlplat.run_steps s WHERE s.run_id = u.id AND s.name = o.name)
) st ON true
LEFT JOIN mlplat.run_nodes n ON n.run_id = u.id AND n.name = st.name;
GRANT SELECT ON mlplat.run_step_status TO PUBLIC;

REVOKE ALL ON FUNCTION mlplat._run_workflow_name(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._run_container(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._render_workflow(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_claim() FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_writeback(bigint, bigint, bigint, text, text, text, int, boolean, text, jsonb) FROM PUBLIC;

-- ==== sql/install/54_reconcile_aliases.sql
-- 54_reconcile_aliases: the model_aliases reconciler's tables and short transactions.
--
-- The registry (MLflow) knows a model as the registered model "<project>.<model>"
-- (MLflow names allow dots; project and model names are DNS labels, so the
-- mapping is one-to-one).  MLflow numbers versions itself, so which registry
-- version holds which mlplat version is recorded here, once, when the reconciler
-- creates (or finds) it.

CREATE TABLE mlplat.model_registry_versions (
  version_id        bigint PRIMARY KEY REFERENCES mlplat.model_versions (id),
  project_id        bigint NOT NULL REFERENCES mlplat.projects (id),
  registered_model  text NOT NULL,
  registry_version  text NOT NULL,
  epoch             bigint NOT NULL,
  recorded_at       timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.model_registry_versions IS
  'Which registry (MLflow) version number holds each mlplat model version.';

-- Every move of a registry alias mlplat made, including repairs of moves made
-- outside mlplat, which MLflow itself does not keep.
CREATE TABLE mlplat.model_alias_history (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id        bigint NOT NULL REFERENCES mlplat.projects (id),
  model_id          bigint NOT NULL REFERENCES mlplat.models (id),
  alias_id          bigint NOT NULL REFERENCES mlplat.model_aliases (id),
  registered_model  text NOT NULL,
  alias             text NOT NULL,
  action            text NOT NULL CHECK (action IN ('SET', 'DELETE', 'REPAIR')),
  requested_by      text,          -- the person whose intent this is (model_aliases.moved_by)
  version_id        bigint REFERENCES mlplat.model_versions (id),  -- NULL: the alias was deleted
  version           text,          -- mlplat's version label
  registry_version  text,          -- what the alias points at now (verified), NULL when deleted
  observed_version  text,          -- what the registry had before the move (NULL: no alias)
  observed_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  epoch             bigint NOT NULL,
  controller        text NOT NULL,
  trace_id          text
);
CREATE INDEX ON mlplat.model_alias_history (model_id, alias, observed_at);
CREATE TRIGGER model_alias_history_immutable BEFORE UPDATE OR DELETE ON mlplat.model_alias_history
  FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change();
COMMENT ON TABLE mlplat.model_alias_history IS
  'Append-only: every registry alias move made by mlplat (SET, DELETE, REPAIR of an outside move).';

-- Read like the other project tables: members only, through RLS.
ALTER TABLE mlplat.model_alias_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.model_alias_history FOR SELECT USING (mlplat._can_view(project_id));
ALTER TABLE mlplat.model_registry_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.model_registry_versions FOR SELECT USING (mlplat._can_view(project_id));
GRANT SELECT ON mlplat.model_alias_history, mlplat.model_registry_versions TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.model_alias_history', '');
SELECT pg_catalog.pg_extension_config_dump('mlplat.model_registry_versions', '');

CREATE FUNCTION mlplat._aliases_claim(p_resync boolean)
RETURNS TABLE (id bigint, project text, registered_model text, alias text,
               version_id bigint, version text, artifact_uri text, registry_version text,
               status text, generation bigint, observed_generation bigint, row_version bigint,
               moved_by text, traceparent text, attempts int, due boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT a.id, p.name, p.name || '.' || m.name, a.alias,
         a.version_id, mv.version, mv.artifact_uri, rv.registry_version,
         a.status, a.generation, a.observed_generation, a.row_version,
         a.moved_by, a.traceparent, a.attempts,
         a.next_attempt_at <= pg_catalog.now()
           AND (p_resync OR a.status <> 'SYNCED' OR a.generation <> a.observed_generation)
    FROM mlplat.model_aliases a
    JOIN mlplat.models m ON m.id = a.model_id
    JOIN mlplat.projects p ON p.id = a.project_id
    LEFT JOIN mlplat.model_versions mv ON mv.id = a.version_id
    LEFT JOIN mlplat.model_registry_versions rv ON rv.version_id = a.version_id
   WHERE p.status <> 'DELETED'
   ORDER BY a.id
$$;

-- p_retry_ms: NULL = no retry (attempts reset); otherwise attempts + 1 and
-- next_attempt_at = now() + p_retry_ms.  Compare-and-swap on row_version and epoch.
CREATE FUNCTION mlplat._aliases_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint, p_status text, p_reason text,
    p_observed_generation bigint, p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    UPDATE mlplat.model_aliases a
       SET status = p_status,
           status_reason = p_reason,
           observed_generation = coalesce(p_observed_generation, a.observed_generation),
           observed = coalesce(p_observed, a.observed),
           observed_at = pg_catalog.now(),
           last_error = p_error,
           attempts = CASE WHEN p_retry_ms IS NULL THEN 0 ELSE a.attempts + 1 END,
           next_attempt_at = CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                                  ELSE pg_catalog.now() + pg_catalog.make_interval(secs => p_retry_ms / 1000.0) END,
           epoch = p_epoch,
           row_version = a.row_version + 1,
           updated_at = pg_catalog.now()
     WHERE a.id = p_id AND a.row_version = p_row_version
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'model_aliases' AND e.epoch = p_epoch);
    RETURN FOUND;
END;
$$;

-- Record (p_registry_version not NULL) or forget (NULL: the registry lost it)
-- which registry version holds an mlplat version.  Facts about the registry are
-- kept even when the alias write-back loses its compare-and-swap.
CREATE FUNCTION mlplat._aliases_map_version(p_version_id bigint, p_registered_model text,
                                            p_registry_version text, p_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'model_aliases' AND e.epoch = p_epoch) THEN
        RETURN false;
    END IF;
    IF p_registry_version IS NULL THEN
        DELETE FROM mlplat.model_registry_versions WHERE version_id = p_version_id;
        RETURN true;
    END IF;
    INSERT INTO mlplat.model_registry_versions (version_id, project_id, registered_model, registry_version, epoch)
    SELECT mv.id, mv.project_id, p_registered_model, p_registry_version, p_epoch
      FROM mlplat.model_versions mv WHERE mv.id = p_version_id
    ON CONFLICT (version_id) DO UPDATE
      SET registered_model = excluded.registered_model, registry_version = excluded.registry_version,
          epoch = excluded.epoch, recorded_at = pg_catalog.now();
    RETURN true;
END;
$$;

-- Values are those the move was made for (as claimed), so a move whose
-- write-back then lost its compare-and-swap is still recorded truthfully.
CREATE FUNCTION mlplat._aliases_history(p_alias_id bigint, p_action text, p_version_id bigint,
                                        p_requested_by text, p_registry_version text,
                                        p_observed_version text, p_epoch bigint, p_controller text,
                                        p_trace_id text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'model_aliases' AND e.epoch = p_epoch) THEN
        RETURN false;
    END IF;
    INSERT INTO mlplat.model_alias_history (project_id, model_id, alias_id, registered_model, alias, action,
                                            requested_by, version_id, version, registry_version,
                                            observed_version, epoch, controller, trace_id)
    SELECT a.project_id, a.model_id, a.id, p.name || '.' || m.name, a.alias, p_action,
           p_requested_by, p_version_id, mv.version, p_registry_version,
           p_observed_version, p_epoch, p_controller, p_trace_id
      FROM mlplat.model_aliases a
      JOIN mlplat.models m ON m.id = a.model_id
      JOIN mlplat.projects p ON p.id = a.project_id
      LEFT JOIN mlplat.model_versions mv ON mv.id = p_version_id
     WHERE a.id = p_alias_id;
    RETURN FOUND;
END;
$$;

REVOKE ALL ON FUNCTION mlplat._aliases_claim(boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_map_version(bigint, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_history(bigint, text, bigint, text, text, text, bigint, text, text) FROM PUBLIC;

-- ==== sql/install/55_http.sql
-- 55_http: superuser-only test hooks for the HTTP client (src/http/).
-- They exist so the client can be tested from SQL without background workers;
-- nothing in the API depends on them.

CREATE FUNCTION mlplat._http_probe(urls text[], method text DEFAULT 'GET',
                                   timeout_ms int DEFAULT NULL,
                                   connect_timeout_ms int DEFAULT NULL,
                                   max_body int DEFAULT NULL)
RETURNS TABLE(url text, status int, error text, elapsed_ms float8, body text,
              retry_after_s int, content_type text)
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_http_probe';
COMMENT ON FUNCTION mlplat._http_probe(text[], text, int, int, int) IS
  'Test hook: run the given URLs concurrently through the HTTP client (first 4 kB of each body).';
REVOKE EXECUTE ON FUNCTION mlplat._http_probe(text[], text, int, int, int) FROM PUBLIC;

CREATE FUNCTION mlplat._backoff_delay_ms(attempts int, base_ms int, max_ms int,
                                         retry_after_s int, seed int)
RETURNS int
LANGUAGE C IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'mlplat_backoff_delay_sql';
COMMENT ON FUNCTION mlplat._backoff_delay_ms(int, int, int, int, int) IS
  'Test hook: the retry delay after attempts failures (exponential, full jitter, Retry-After honoured).';
REVOKE EXECUTE ON FUNCTION mlplat._backoff_delay_ms(int, int, int, int, int) FROM PUBLIC;

-- Kubernetes client hooks.  _kube_configure points only the calling backend at
-- a server (NULL url: back to the mlplat.kube_* settings), so tests never
-- change what the workers use.
CREATE FUNCTION mlplat._kube_configure(url text, token_file text DEFAULT NULL,
                                       ca_file text DEFAULT NULL)
RETURNS text
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_kube_configure_sql';
COMMENT ON FUNCTION mlplat._kube_configure(text, text, text) IS
  'Test hook: use this Kubernetes API URL, token file and CA file in this backend only.';
REVOKE EXECUTE ON FUNCTION mlplat._kube_configure(text, text, text) FROM PUBLIC;

CREATE FUNCTION mlplat._kube_call(op text, api_group text, api_version text, plural text,
                                  namespace text DEFAULT NULL, name text DEFAULT NULL,
                                  body jsonb DEFAULT NULL, label_selector text DEFAULT NULL,
                                  lim int DEFAULT 0, continue_token text DEFAULT NULL,
                                  OUT url text, OUT outcome text, OUT status int,
                                  OUT reason text, OUT message text, OUT resp_body jsonb,
                                  OUT next_continue text)
RETURNS record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_kube_call_sql';
COMMENT ON FUNCTION mlplat._kube_call(text, text, text, text, text, text, jsonb, text, int, text) IS
  'Test hook: one Kubernetes request (get, list, apply, create, replace, merge_patch, delete) and its classified result.';
REVOKE EXECUTE ON FUNCTION mlplat._kube_call(text, text, text, text, text, text, jsonb, text, int, text) FROM PUBLIC;

CREATE FUNCTION mlplat._kube_lease(namespace text, name text, identity text, duration_s int,
                                   OUT result text, OUT detail text)
RETURNS record
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_kube_lease_sql';
COMMENT ON FUNCTION mlplat._kube_lease(text, text, text, int) IS
  'Test hook: one round of the Lease fence (GET, create if missing, PUT with resourceVersion).';
REVOKE EXECUTE ON FUNCTION mlplat._kube_lease(text, text, text, int) FROM PUBLIC;

-- Self-test in the setting the client is built for: a background worker with
-- no transaction open, parsing a Kubernetes answer into jsonb; it reports with
-- NOTIFY mlplat_http_selftest.
CREATE FUNCTION mlplat._http_worker_selftest(base_url text)
RETURNS void
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_http_worker_selftest';
COMMENT ON FUNCTION mlplat._http_worker_selftest(text) IS
  'Test hook: GET configmap team-a/cm-selftest from base_url in a background worker outside any transaction; NOTIFY mlplat_http_selftest with the result.';
REVOKE EXECUTE ON FUNCTION mlplat._http_worker_selftest(text) FROM PUBLIC;

-- ==== sql/install/56_artifacts.sql
-- 56_artifacts: what the deployments reconciler learned about artifacts in the
-- object store.  Before the first apply of a revision it checks that the model
-- version's artifact exists and that its SHA-256 is the registered one
-- (src/reconcile/artifact.c).  A download to hash an object is the expensive
-- part, so the digest found is kept per (URI, ETag): a second revision of the
-- same artifact, a restart or another leader does not download it again, and
-- an object written anew gets a new ETag and is hashed again.

CREATE TABLE mlplat.artifact_digests (
  uri          text NOT NULL,
  etag         text NOT NULL,
  sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  size_bytes   bigint,
  source       text NOT NULL CHECK (source IN ('download', 'x-amz-checksum-sha256', 'x-amz-meta-sha256')),
  verified_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (uri, etag)
);
REVOKE ALL ON mlplat.artifact_digests FROM PUBLIC;
COMMENT ON TABLE mlplat.artifact_digests IS
  'SHA-256 of object-store artifacts as found by the deployments reconciler, per URI and ETag (a cache: deleting rows only costs downloads).';

-- The artifact of each (deployment, revision) to check, with every digest
-- already known for its URI (etags[i] has digest sha256s[i]); ord is the
-- position in the arrays passed (1-based).
CREATE FUNCTION mlplat._artifact_claim(p_deployment_ids bigint[], p_revisions int[])
RETURNS TABLE (ord bigint, artifact_uri text, artifact_sha256 text, etags text[], sha256s text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT w.ord, v.artifact_uri, v.artifact_sha256,
         (SELECT pg_catalog.array_agg(a.etag ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri),
         (SELECT pg_catalog.array_agg(a.sha256 ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri)
    FROM unnest(p_deployment_ids, p_revisions) WITH ORDINALITY AS w(id, rev, ord)
    JOIN mlplat.deployment_revisions r ON r.deployment_id = w.id AND r.revision = w.rev
    JOIN mlplat.model_versions v ON v.id = r.model_version_id
$$;
REVOKE ALL ON FUNCTION mlplat._artifact_claim(bigint[], int[]) FROM PUBLIC;

CREATE FUNCTION mlplat._artifact_remember(p_uri text, p_etag text, p_sha256 text, p_size bigint, p_source text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  INSERT INTO mlplat.artifact_digests AS a (uri, etag, sha256, size_bytes, source)
  VALUES (p_uri, p_etag, p_sha256, p_size, p_source)
  ON CONFLICT (uri, etag) DO UPDATE
     SET sha256 = excluded.sha256, size_bytes = excluded.size_bytes, source = excluded.source,
         verified_at = pg_catalog.now()
$$;
REVOKE ALL ON FUNCTION mlplat._artifact_remember(text, text, text, bigint, text) FROM PUBLIC;

-- ==== sql/install/58_trace.sql
-- 58_trace: spans of one trace, from the API call to the reconciler's last step, and
-- their export over OTLP/HTTP JSON.
--
-- An intent function records one span (SERVER, "mlplat.<action>") and stores a traceparent
-- whose parent-id is that span's id, so the reconcilers' spans (claim, apply, readiness
-- wait, ...) read from the entity become its children.  Spans are written in the same
-- transaction as what they describe: a rolled-back call or a lost write-back leaves none.
-- Writers are the API functions and the workers only; callers read the trace_spans view.

CREATE TABLE mlplat.spans (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    trace_id       text NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    span_id        text NOT NULL CHECK (span_id ~ '^[0-9a-f]{16}$'),
    parent_span_id text CHECK (parent_span_id ~ '^[0-9a-f]{16}$'),
    name           text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER')),
    start_time     timestamptz NOT NULL,
    end_time       timestamptz NOT NULL,
    status         text NOT NULL DEFAULT 'UNSET' CHECK (status IN ('UNSET', 'OK', 'ERROR')),
    status_message text,
    attributes     jsonb NOT NULL DEFAULT '{}',
    project_id     bigint,
    entity         text,
    entity_id      bigint,
    exported_at    timestamptz,
    PRIMARY KEY (trace_id, span_id)
);
-- the exporter's queue: small, because exported rows leave it
CREATE INDEX spans_unexported ON mlplat.spans (id) WHERE exported_at IS NULL;
-- run_retention deletes by end_time; rows arrive in about end_time order, so a BRIN index
-- (a few pages, next to nothing per insert) spares the hourly purge a full scan
CREATE INDEX spans_end_time ON mlplat.spans USING brin (end_time);
COMMENT ON TABLE mlplat.spans IS
  'Trace spans of the API calls and the reconcilers, kept for mlplat.span_retention days; exported over OTLP when mlplat.otlp_endpoint is set.';

ALTER TABLE mlplat.spans ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.spans FOR SELECT USING (mlplat._can_view(project_id));
REVOKE ALL ON mlplat.spans FROM PUBLIC;

-- What callers read: the spans of their projects (administrators: all), like the other
-- views.  A definer view over a table nobody else may read, filtered by the same
-- predicate the row-level security policies use.
CREATE VIEW mlplat.trace_spans WITH (security_barrier = true) AS
SELECT s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.start_time, s.end_time,
       s.end_time - s.start_time AS duration, s.status, s.status_message, s.attributes,
       p.name AS project, s.entity, s.entity_id, s.exported_at
  FROM mlplat.spans s
  LEFT JOIN mlplat.projects p ON p.id = s.project_id
 WHERE mlplat._can_view(s.project_id);
REVOKE ALL ON mlplat.trace_spans FROM PUBLIC;
GRANT SELECT ON mlplat.trace_spans TO PUBLIC;
COMMENT ON VIEW mlplat.trace_spans IS
  'Spans of the projects the caller may view: API calls and reconciler steps, with their trace and parent ids.';

SELECT pg_catalog.pg_extension_config_dump('mlplat.spans', '');

-- The API span of an intent, called where its audit event is written.  tp is the
-- traceparent the intent stores (its parent-id is this span's id); the caller's own span,
-- if mlplat.traceparent was set, is the parent.  Starts with the caller's statement.
CREATE FUNCTION mlplat._span_api(p_action text, p_traceparent text, p_project_id bigint,
                                 p_entity text, p_entity_id bigint, p_request_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  caller text := pg_catalog.current_setting('mlplat.traceparent', true);
BEGIN
  IF p_traceparent IS NULL OR pg_catalog.length(p_traceparent) <> 55 THEN
    RETURN;
  END IF;
  INSERT INTO mlplat.spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                            attributes, project_id, entity, entity_id)
  VALUES (pg_catalog.substr(p_traceparent, 4, 32), pg_catalog.substr(p_traceparent, 37, 16),
          CASE WHEN pg_catalog.substr(caller, 4, 32) = pg_catalog.substr(p_traceparent, 4, 32)
               THEN pg_catalog.substr(caller, 37, 16) END,
          'mlplat.' || p_action, 'SERVER', pg_catalog.statement_timestamp(), pg_catalog.clock_timestamp(), 'OK',
          pg_catalog.jsonb_build_object('mlplat.request_id', p_request_id), p_project_id, p_entity, p_entity_id)
  ON CONFLICT DO NOTHING;
END $$;
REVOKE ALL ON FUNCTION mlplat._span_api(text, text, bigint, text, bigint, uuid) FROM PUBLIC;

-- Spans a worker collected during a pass, in one statement (src/trace/span.c): one array per
-- column, element i of each is span i (no JSON to build and parse: a pass of 10,000 applies
-- writes 30,000 spans).  start_after names an earlier span of the same trace and entity
-- whose end is this span's start when it exists (a readiness wait starts where the apply,
-- made in an earlier pass, ended).  Returns the number of spans written.
CREATE FUNCTION mlplat._spans_record_set(
    p_trace_id text[], p_span_id text[], p_parent_span_id text[], p_name text[], p_kind text[],
    p_start_time timestamptz[], p_end_time timestamptz[], p_status text[], p_status_message text[],
    p_attributes jsonb[], p_project text[], p_entity text[], p_entity_id bigint[], p_start_after text[])
RETURNS int LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  WITH ins AS (
    INSERT INTO mlplat.spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                              status_message, attributes, project_id, entity, entity_id)
    SELECT x.trace_id, x.span_id, x.parent_span_id, x.name, x.kind,
           coalesce((SELECT max(s.end_time) FROM mlplat.spans s
                      WHERE x.start_after IS NOT NULL AND s.trace_id = x.trace_id AND s.name = x.start_after
                        AND s.entity_id IS NOT DISTINCT FROM x.entity_id AND s.end_time <= x.end_time),
                    x.start_time),
           x.end_time, x.status, pg_catalog.left(x.status_message, 2000), coalesce(x.attributes, '{}'),
           p.id, x.entity, x.entity_id
      -- multi-argument unnest is FROM-clause syntax only unqualified (search_path is pinned)
      FROM unnest(p_trace_id, p_span_id, p_parent_span_id, p_name, p_kind, p_start_time, p_end_time,
                  p_status, p_status_message, p_attributes, p_project, p_entity, p_entity_id, p_start_after)
           WITH ORDINALITY AS x(trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                                status_message, attributes, project, entity, entity_id, start_after, ord)
      LEFT JOIN mlplat.projects p ON p.name = x.project
     ORDER BY x.ord
    ON CONFLICT DO NOTHING
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;
REVOKE ALL ON FUNCTION mlplat._spans_record_set(text[], text[], text[], text[], text[], timestamptz[], timestamptz[], text[], text[], jsonb[], text[], text[], bigint[], text[]) FROM PUBLIC;

-- The same from a JSON array of {trace_id, span_id, parent_span_id, name, kind, start_time,
-- end_time, status, status_message, attributes, project, entity, entity_id, start_after}.
CREATE FUNCTION mlplat._spans_record(p_spans jsonb)
RETURNS int LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT mlplat._spans_record_set(
           pg_catalog.array_agg(x.trace_id ORDER BY x.ord), pg_catalog.array_agg(x.span_id ORDER BY x.ord),
           pg_catalog.array_agg(x.parent_span_id ORDER BY x.ord), pg_catalog.array_agg(x.name ORDER BY x.ord),
           pg_catalog.array_agg(x.kind ORDER BY x.ord), pg_catalog.array_agg(x.start_time ORDER BY x.ord),
           pg_catalog.array_agg(x.end_time ORDER BY x.ord), pg_catalog.array_agg(x.status ORDER BY x.ord),
           pg_catalog.array_agg(x.status_message ORDER BY x.ord), pg_catalog.array_agg(x.attributes ORDER BY x.ord),
           pg_catalog.array_agg(x.project ORDER BY x.ord), pg_catalog.array_agg(x.entity ORDER BY x.ord),
           pg_catalog.array_agg(x.entity_id ORDER BY x.ord), pg_catalog.array_agg(x.start_after ORDER BY x.ord))
    FROM ROWS FROM (pg_catalog.jsonb_to_recordset(p_spans)
           AS (trace_id text, span_id text, parent_span_id text, name text, kind text, start_time timestamptz,
               end_time timestamptz, status text, status_message text, attributes jsonb, project text,
               entity text, entity_id bigint, start_after text)) WITH ORDINALITY
         AS x(trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status, status_message,
              attributes, project, entity, entity_id, start_after, ord)
$$;
REVOKE ALL ON FUNCTION mlplat._spans_record(jsonb) FROM PUBLIC;

-- ---------------------------------------------------------------- OTLP/HTTP JSON rendering

-- A jsonb value as an OTLP AnyValue (int64 as a decimal string, as the JSON mapping says).
CREATE FUNCTION mlplat._otlp_value(v jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT CASE pg_catalog.jsonb_typeof(v)
           WHEN 'boolean' THEN pg_catalog.jsonb_build_object('boolValue', v)
           WHEN 'number' THEN
             CASE WHEN (v #>> '{}')::numeric = pg_catalog.trunc((v #>> '{}')::numeric)
                       AND pg_catalog.abs((v #>> '{}')::numeric) < 9223372036854775807
                  THEN pg_catalog.jsonb_build_object('intValue', ((v #>> '{}')::numeric)::bigint::text)
                  ELSE pg_catalog.jsonb_build_object('doubleValue', v) END
           WHEN 'string' THEN pg_catalog.jsonb_build_object('stringValue', v)
           ELSE pg_catalog.jsonb_build_object('stringValue', v::text) END
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_value(jsonb) FROM PUBLIC;

-- One span in the OTLP JSON mapping: hex ids, times as decimal strings of nanoseconds
-- since the Unix epoch, kind and status code as enum numbers, attributes as key/value.
CREATE FUNCTION mlplat._otlp_span(s mlplat.spans) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'traceId', s.trace_id,
    'spanId', s.span_id,
    'parentSpanId', s.parent_span_id,
    'name', s.name,
    'kind', CASE s.kind WHEN 'INTERNAL' THEN 1 WHEN 'SERVER' THEN 2 WHEN 'CLIENT' THEN 3
                        WHEN 'PRODUCER' THEN 4 WHEN 'CONSUMER' THEN 5 ELSE 0 END,
    'startTimeUnixNano', (EXTRACT(epoch FROM s.start_time) * 1000000000)::bigint::text,
    'endTimeUnixNano', (EXTRACT(epoch FROM s.end_time) * 1000000000)::bigint::text,
    'attributes', coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                                     'key', a.key, 'value', mlplat._otlp_value(a.value)) ORDER BY a.key)
                              FROM pg_catalog.jsonb_each(s.attributes
                                     || pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                                          'mlplat.entity', s.entity, 'mlplat.entity_id', s.entity_id))) a),
                           '[]'::jsonb),
    'status', pg_catalog.jsonb_build_object(
                'code', CASE s.status WHEN 'OK' THEN 1 WHEN 'ERROR' THEN 2 ELSE 0 END,
                'message', s.status_message)))
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_span(mlplat.spans) FROM PUBLIC;

-- An ExportTraceServiceRequest for a batch of spans (in the given order), from one
-- resource: service.name mlplat, service.instance.id the installation's instance id.
CREATE FUNCTION mlplat._otlp_render(p_spans mlplat.spans[], p_instance text, p_version text)
RETURNS jsonb LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT pg_catalog.jsonb_build_object('resourceSpans', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
    'resource', pg_catalog.jsonb_build_object('attributes', pg_catalog.jsonb_build_array(
        pg_catalog.jsonb_build_object('key', 'service.name', 'value', pg_catalog.jsonb_build_object('stringValue', 'mlplat')),
        pg_catalog.jsonb_build_object('key', 'service.instance.id', 'value', pg_catalog.jsonb_build_object('stringValue', p_instance)))),
    'scopeSpans', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
        'scope', pg_catalog.jsonb_build_object('name', 'mlplat', 'version', p_version),
        'spans', coalesce((SELECT pg_catalog.jsonb_agg(mlplat._otlp_span(p_spans[i]) ORDER BY i)
                             FROM pg_catalog.generate_subscripts(p_spans, 1) AS i), '[]'::jsonb))))))
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_render(mlplat.spans[], text, text) FROM PUBLIC;

-- ---------------------------------------------------------------- export (src/trace/export.c)

-- The oldest unexported spans, at most p_limit, rendered; no row when there are none.
CREATE FUNCTION mlplat._spans_export_batch(p_limit int)
RETURNS TABLE (ids bigint[], body text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  WITH b AS (SELECT s FROM mlplat.spans s WHERE s.exported_at IS NULL ORDER BY s.id LIMIT p_limit)
  SELECT pg_catalog.array_agg((b.s).id ORDER BY (b.s).id),
         mlplat._otlp_render(pg_catalog.array_agg(b.s ORDER BY (b.s).id), mlplat._instance_id(),
                             (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'mlplat'))::text
    FROM b
  HAVING pg_catalog.count(*) > 0
$$;
REVOKE ALL ON FUNCTION mlplat._spans_export_batch(int) FROM PUBLIC;

-- After a 2xx: mark the batch exported, if the exporter still leads (kind 'projects', whose
-- leader runs the export).
CREATE FUNCTION mlplat._spans_mark_exported(p_ids bigint[], p_epoch bigint)
RETURNS int LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  n int;
BEGIN
  UPDATE mlplat.spans s SET exported_at = pg_catalog.now()
   WHERE s.id = ANY (p_ids) AND s.exported_at IS NULL
     AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'projects' AND e.epoch = p_epoch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
REVOKE ALL ON FUNCTION mlplat._spans_mark_exported(bigint[], bigint) FROM PUBLIC;

-- The span exporter as an operator sees it: what waits, from the table (true across
-- restarts and failovers), and how its POSTs went, from shared memory (since this server
-- started; the projects leader runs the exporter).  No exporter row without preload.
CREATE FUNCTION mlplat._span_export_state(
    OUT spans_sent bigint, OUT batches_sent bigint, OUT batches_failed bigint,
    OUT consecutive_failures int, OUT last_success timestamptz, OUT last_failure timestamptz,
    OUT next_attempt timestamptz, OUT last_error text)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_span_export_state';
REVOKE ALL ON FUNCTION mlplat._span_export_state() FROM PUBLIC;

CREATE VIEW mlplat.span_export_status AS
SELECT coalesce(pg_catalog.current_setting('mlplat.otlp_endpoint', true), '') <> '' AS enabled,
       w.waiting AS spans_waiting,
       pg_catalog.now() - (SELECT s.start_time FROM mlplat.spans s WHERE s.exported_at IS NULL
                            ORDER BY s.id LIMIT 1) AS oldest_waiting_age,
       x.spans_sent, x.batches_sent, x.batches_failed, x.consecutive_failures,
       x.last_success, x.last_failure, x.next_attempt, x.last_error
  FROM (SELECT pg_catalog.count(*) AS waiting FROM mlplat.spans s WHERE s.exported_at IS NULL) w
  LEFT JOIN mlplat._span_export_state() x ON true;
COMMENT ON VIEW mlplat.span_export_status IS
  'The OTLP span exporter: spans waiting and the oldest one''s age; POSTs sent and failed since this server started, the last error and the next attempt.';
REVOKE ALL ON mlplat.span_export_status FROM PUBLIC;

-- ==== sql/install/60_json.sql
-- 60_json: the pure JSON core (canonical JSON, content ids, default-aware
-- spec diff) and the name validators, callable from SQL.  All pure: no
-- catalog access, no I/O, same answer for the same input.

CREATE FUNCTION mlplat.canonical_json(doc jsonb)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_canonical_json';
COMMENT ON FUNCTION mlplat.canonical_json(jsonb) IS
  'RFC 8785 canonical JSON text of doc: sorted keys, no whitespace, shortest numbers.';

CREATE FUNCTION mlplat.content_id(doc jsonb)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_content_id';
COMMENT ON FUNCTION mlplat.content_id(jsonb) IS
  'Lower-case hex SHA-256 of canonical_json(doc).';

CREATE FUNCTION mlplat.content_id(doc jsonb, exclude_key text)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_content_id_excluding';
COMMENT ON FUNCTION mlplat.content_id(jsonb, text) IS
  'Content id of doc without its top-level member exclude_key (to verify records that carry their own id).';

CREATE FUNCTION mlplat.spec_diff(desired jsonb, observed jsonb)
RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_spec_diff';
COMMENT ON FUNCTION mlplat.spec_diff(jsonb, jsonb) IS
  'Default-aware drift: [{path, desired, observed}] for fields of desired that observed does not match (see docs/drift.md).';

CREATE FUNCTION mlplat.is_dns_label(name text, max_len integer DEFAULT 63)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_is_dns_label';
COMMENT ON FUNCTION mlplat.is_dns_label(text, integer) IS
  'RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..max_len bytes.';

CREATE FUNCTION mlplat.is_traceparent(value text)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_is_traceparent';
COMMENT ON FUNCTION mlplat.is_traceparent(text) IS
  'W3C trace-context version 00 traceparent, lower-case hex, non-zero ids.';

-- ==== sql/install/70_rollout.sql
-- 70_rollout: the rollout decision function (pure, see docs/rollouts.md) and a
-- helper that stamps a record with its own content id.

CREATE FUNCTION mlplat.plan_rollout(contract jsonb, evidence jsonb)
RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_plan_rollout';
COMMENT ON FUNCTION mlplat.plan_rollout(jsonb, jsonb) IS
  'Validate a rollout contract and an evidence record, then decide exactly one transition: ADVANCE, HOLD or ROLLBACK (see docs/rollouts.md).';

CREATE FUNCTION mlplat.with_content_id(record jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
	IF pg_catalog.jsonb_typeof(record) <> 'object' THEN
		RAISE EXCEPTION 'with_content_id: record must be a JSON object, not %',
			pg_catalog.jsonb_typeof(record)
			USING ERRCODE = '22023',
			      DETAIL = 'Only an object can carry a content_id member.',
			      HINT = 'Pass the contract or evidence object itself.';
	END IF;
	RETURN record || pg_catalog.jsonb_build_object('content_id',
		mlplat.content_id(record, 'content_id'));
END
$$;
COMMENT ON FUNCTION mlplat.with_content_id(jsonb) IS
  'record with content_id set to the content id of record without its content_id member.';

-- ==== sql/install/72_reconcile_rollouts.sql
-- 72_reconcile_rollouts: the rollouts reconciler's state, its transition ledger and
-- its two short transactions (see docs/rollouts.md, "The reconciler").
--
-- The C pass (src/reconcile/rollouts.c) only does I/O: it reads the InferenceService,
-- applies the traffic split it is told to, queries Prometheus, and hands what it saw
-- to mlplat._rollouts_observe().  Everything that decides — when a window starts,
-- whether evidence is due, the evidence record itself, plan_rollout, the ledger row
-- and the one transition — happens here, in one transaction, under a compare-and-swap
-- on the rollout's row_version and the kind's leader epoch.

-- Replicas a revision is expected to keep ready: its minReplicas, at least one (a
-- revision scaled to zero cannot prove readiness).
CREATE FUNCTION mlplat._rollout_replicas(p_intent jsonb) RETURNS int
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$ SELECT GREATEST(coalesce((p_intent->>'min_replicas')::int, 1), 1) $$;
REVOKE ALL ON FUNCTION mlplat._rollout_replicas(jsonb) FROM PUBLIC;

-- The decision contract of a rollout, from its row, its revisions and its policy.
-- Built once (the first claim stores it); see docs/rollouts.md for the mapping.
CREATE FUNCTION mlplat._rollout_contract(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT mlplat.with_content_id(pg_catalog.jsonb_build_object(
    'scope', pg_catalog.jsonb_build_object(
      'project', p.name, 'deployment', d.name,
      'target_revision', 'r' || ro.target_revision, 'previous_revision', 'r' || ro.baseline_revision,
      'model_digest', 'sha256:' || mv.artifact_sha256, 'config_digest', 'sha256:' || tr.spec_digest),
    'policy', pg_catalog.jsonb_build_object(
      'steps', ro.policy->'steps',
      'ceiling_fraction', LEAST((ro.policy->>'ceiling')::numeric,
                                (ro.policy->'steps'->>(pg_catalog.jsonb_array_length(ro.policy->'steps') - 1))::numeric),
      'min_samples', ro.policy->'min_samples',
      'window_seconds', ro.policy->'window_seconds',
      'max_error_rate', ro.policy->'max_error_rate',
      'max_p95_ms', coalesce(ro.policy->'max_p95_ms', '600000'),
      'max_error_rate_increase', ro.policy->'max_error_rate',
      'max_p95_increase_ratio', coalesce(ro.policy->'max_p95_ratio', '100'),
      'health_max_age_seconds', ro.policy->'window_seconds',
      'surge_replicas', 0,
      'rollback_headroom_replicas', 0,
      'capacity_quota_replicas', GREATEST((tr.intent->>'max_replicas')::int, mlplat._rollout_replicas(tr.intent))
                                 + GREATEST((br.intent->>'max_replicas')::int, mlplat._rollout_replicas(br.intent)))))
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
    JOIN mlplat.deployment_revisions tr ON tr.deployment_id = d.id AND tr.revision = ro.target_revision
    JOIN mlplat.deployment_revisions br ON br.deployment_id = d.id AND br.revision = ro.baseline_revision
    JOIN mlplat.model_versions mv ON mv.id = tr.model_version_id
   WHERE ro.id = p_id
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_contract(bigint) FROM PUBLIC;

-- The traffic fraction the rollout stands at, from the ledger (not from memory).
CREATE FUNCTION mlplat._rollout_fraction(p_id bigint) RETURNS numeric
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT coalesce((SELECT t.to_fraction FROM mlplat.rollout_transitions t
                    WHERE t.rollout_id = p_id ORDER BY t.seq DESC LIMIT 1), 0)
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_fraction(bigint) FROM PUBLIC;

-- canaryTrafficPercent the InferenceService must carry now: 0 while rolling back,
-- -1 (no canary setting) once promotion is requested, else the current fraction.
CREATE FUNCTION mlplat._rollout_want_percent(p_status text, p_requested text, p_fraction numeric) RETURNS int
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT CASE WHEN p_status = 'ROLLING_BACK' THEN 0
              WHEN p_requested = 'PROMOTE' THEN -1
              ELSE pg_catalog.round(p_fraction * 100)::int END
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_want_percent(text, text, numeric) FROM PUBLIC;

-- Claim: every active rollout, with the target's manifest and what the pass must do.
-- Freezes the contract of a rollout seen for the first time.
CREATE FUNCTION mlplat._rollouts_claim()
RETURNS TABLE (id bigint, project text, namespace text, name text, status text, row_version bigint,
               spec text, want_percent int, target_revision int, target_kn text, previous_kn text,
               window_start_ms bigint, window_seconds int, decide_at_ms bigint, attempts int, due boolean,
               traceparent text)
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
  UPDATE mlplat.rollouts ro SET contract = mlplat._rollout_contract(ro.id)
   WHERE ro.contract IS NULL AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK');
  RETURN QUERY
  SELECT c.id, c.project, c.namespace, c.name, c.status, c.row_version,
         (CASE WHEN c.want < 0 THEN c.spec
               ELSE pg_catalog.jsonb_set(c.spec, '{spec,predictor,canaryTrafficPercent}', pg_catalog.to_jsonb(c.want)) END)::text,
         c.want, c.target_revision, c.target_kn, c.previous_kn, c.window_start_ms, c.window_seconds, c.decide_at_ms,
         c.attempts, c.due, c.traceparent
    FROM (
  SELECT ro.id, p.name AS project, 'mlp-' || p.name AS namespace, d.name, ro.status, ro.row_version,
         tr.spec,
         mlplat._rollout_want_percent(ro.status, ro.requested_action, mlplat._rollout_fraction(ro.id)) AS want,
         ro.target_revision, ro.observed->>'target_kn' AS target_kn, ro.observed->>'previous_kn' AS previous_kn,
         pg_catalog.round(EXTRACT(epoch FROM ro.window_start) * 1000)::bigint AS window_start_ms,
         (ro.policy->>'window_seconds')::int AS window_seconds,
         pg_catalog.round(ro.decide_at * 1000)::bigint AS decide_at_ms, ro.attempts,
         ro.next_attempt_at <= pg_catalog.now() AS due, ro.traceparent
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
    JOIN mlplat.deployment_revisions tr ON tr.deployment_id = d.id AND tr.revision = ro.target_revision
   WHERE ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')) c
   ORDER BY c.id;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_claim() FROM PUBLIC;

-- The evidence record of one decision (without its content id), from the contract,
-- the fraction and one observation (see _rollouts_observe for its shape).  Times are
-- epoch seconds with millisecond precision, written without trailing zeros.
CREATE FUNCTION mlplat._rollout_evidence(p_contract jsonb, p_fraction numeric, p_target_replicas int,
                                         p_previous_replicas int, p_obs jsonb, p_target_kn text,
                                         p_previous_kn text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
  at numeric := pg_catalog.trim_scale((p_obs->>'observed_at')::numeric);
  m jsonb := coalesce(p_obs->'metrics', '{}');
  t_ready boolean := coalesce((p_obs->>'ready')::boolean, false) AND p_obs->>'latest_ready_kn' = p_target_kn;
  p_ready boolean := EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(coalesce(p_obs->'traffic', '[]')) e
                              WHERE e->>'revision' = p_previous_kn);
  load text := p_obs->>'load';
  rev jsonb;
BEGIN
  RETURN pg_catalog.jsonb_build_object(
    'contract_content_id', p_contract->'content_id',
    'scope', p_contract->'scope',
    'observed_at', at,
    'current_fraction', p_fraction,
    'window_start', coalesce(pg_catalog.trim_scale((m->>'window_start')::numeric), at),
    'window_seconds', coalesce(pg_catalog.trim_scale((m->>'window_seconds')::numeric), 0),
    'target', pg_catalog.jsonb_build_object(
      'desired_replicas', p_target_replicas,
      'ready_replicas', CASE WHEN t_ready THEN p_target_replicas ELSE 0 END,
      'load_attempts', CASE WHEN load IN ('UpToDate', 'BlockedByFailedLoad') THEN 1 ELSE 0 END,
      'load_successes', CASE WHEN load = 'UpToDate' THEN 1 ELSE 0 END,
      'health_observed_at', CASE WHEN t_ready THEN at END,
      'requests', coalesce((m->'target'->>'requests')::bigint, 0),
      'errors', coalesce((m->'target'->>'errors')::bigint, 0),
      'p95_ms', m->'target'->'p95_ms'),
    'previous', pg_catalog.jsonb_build_object(
      'desired_replicas', p_previous_replicas,
      'ready_replicas', CASE WHEN p_ready THEN p_previous_replicas ELSE 0 END,
      'load_attempts', CASE WHEN p_ready THEN 1 ELSE 0 END,
      'load_successes', CASE WHEN p_ready THEN 1 ELSE 0 END,
      'health_observed_at', CASE WHEN p_ready THEN at END,
      'requests', coalesce((m->'previous'->>'requests')::bigint, 0),
      'errors', coalesce((m->'previous'->>'errors')::bigint, 0),
      'p95_ms', m->'previous'->'p95_ms'),
    'desired_capacity', p_target_replicas + p_previous_replicas);
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_evidence(jsonb, numeric, int, int, jsonb, text, text) FROM PUBLIC;

-- Append one transition (transaction open, rollout row locked).  Returns false when
-- a transition on this evidence is already recorded: a replay, nothing to apply.
CREATE FUNCTION mlplat._rollout_record(ro mlplat.rollouts, p_decision text, p_reasons text[], p_to_status text,
                                       p_from_fraction numeric, p_to_fraction numeric, p_evidence jsonb,
                                       p_plan jsonb, p_obs jsonb, p_epoch bigint, p_controller text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
  INSERT INTO mlplat.rollout_transitions (rollout_id, project_id, seq, decision, reasons, from_status, to_status,
                                          from_fraction, to_fraction, contract_content_id, contract,
                                          evidence_content_id, evidence, plan, observation, epoch, controller)
  VALUES (ro.id, ro.project_id,
          coalesce((SELECT max(t.seq) FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id), 0) + 1,
          p_decision, p_reasons, ro.status, p_to_status, p_from_fraction, p_to_fraction,
          ro.contract->>'content_id', ro.contract, p_evidence->>'content_id', p_evidence, p_plan, p_obs,
          p_epoch, p_controller)
  ON CONFLICT (rollout_id, evidence_content_id) DO NOTHING;
  RETURN FOUND;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_record(mlplat.rollouts, text, text[], text, numeric, numeric, jsonb, jsonb, jsonb, bigint, text) FROM PUBLIC;

-- Close a rollout whose final route is proven: the observation shows 100% of the
-- traffic on the revision it must be on.
CREATE FUNCTION mlplat._rollout_close(ro mlplat.rollouts, p_obs jsonb, p_revision_kn text, p_to_status text,
                                      p_epoch bigint, p_controller text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
  frac numeric := mlplat._rollout_fraction(ro.id);
  route jsonb;
  v mlplat.model_versions;
BEGIN
  route := mlplat.with_content_id(pg_catalog.jsonb_build_object(
    'contract_content_id', ro.contract->'content_id', 'observed_at', p_obs->'observed_at',
    'revision', p_revision_kn, 'traffic', p_obs->'traffic'));
  IF NOT mlplat._rollout_record(ro, CASE WHEN p_to_status = 'PROMOTED' THEN 'PROMOTED' ELSE 'ROUTE_RESTORED' END,
                                ARRAY['TRAFFIC_OBSERVED_100'], p_to_status, frac,
                                CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
                                route, NULL, p_obs, p_epoch, p_controller) THEN
    RETURN 'REPLAYED';
  END IF;
  UPDATE mlplat.rollouts x
     SET status = p_to_status, current_fraction = CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
         status_reason = pg_catalog.format('100%% of the traffic observed on %s', p_revision_kn),
         observed_generation = x.generation
   WHERE x.id = ro.id;
  IF p_to_status = 'PROMOTED' THEN
    -- The deployment now serves the target; the baseline becomes its rollback revision
    -- (and stops being reserved: the rollout's extra capacity is released).
    UPDATE mlplat.deployments d
       SET previous_revision = ro.baseline_revision, desired_revision = ro.target_revision,
           status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s promoted revision %s', ro.id, ro.target_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
    -- The promoted version becomes the model's CHAMPION, as set_model_stage would do.
    SELECT mv.* INTO v FROM mlplat.model_versions mv
      JOIN mlplat.deployment_revisions dr ON dr.model_version_id = mv.id
     WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.target_revision;
    IF v.stage <> 'CHAMPION' THEN
      PERFORM 1 FROM mlplat.models m WHERE m.id = v.model_id FOR UPDATE;
      UPDATE mlplat.model_versions mv SET stage = 'ARCHIVED', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.model_id = v.model_id AND mv.stage = 'CHAMPION';
      UPDATE mlplat.model_versions mv SET stage = 'CHAMPION', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.id = v.id;
      IF mlplat._sync_aliases(v.model_id, ro.traceparent) THEN
        PERFORM mlplat._wake_on_commit('model_aliases');
      END IF;
    END IF;
  ELSE
    -- Rolled back: the deployment reconciler owns the object again and re-applies the
    -- baseline's manifest (dropping the canary setting).
    UPDATE mlplat.deployments d
       SET status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s rolled back to revision %s', ro.id, ro.baseline_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
  END IF;
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN p_to_status;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_close(mlplat.rollouts, jsonb, text, text, bigint, text) FROM PUBLIC;

-- Write-back.  p_obs (from the C pass) is
--   {"observed_at": epoch s (millisecond precision), "settled": bool (status describes the current generation and
--    the object carries the wanted revision and traffic setting), "ready": bool,
--    "latest_ready_kn", "latest_created_kn", "rolledout_kn": KServe revision names,
--    "traffic": [{"revision", "percent", "latest"}], "load": transitionStatus,
--    "metrics": {"window_start", "window_seconds", "target": {requests, errors, p95_ms},
--                "previous": {...}, "gaps": [why a value is missing]} or absent}
-- p_applied: the canaryTrafficPercent this pass applied (NULL: none).  p_error: the pass
-- could not observe or apply (retried after p_retry_ms).  Returns what happened:
-- LOST (compare-and-swap lost), ERROR, APPLIED, OBSERVED, a decision, REPLAYED, or the
-- terminal status.
CREATE FUNCTION mlplat._rollouts_observe(p_id bigint, p_row_version bigint, p_epoch bigint, p_controller text,
                                         p_obs jsonb, p_applied int, p_error text, p_retry_ms int)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
  ro mlplat.rollouts;
  frac numeric;
  want int;
  at numeric := pg_catalog.trim_scale((p_obs->>'observed_at')::numeric);
  tkn text;
  pkn text;
  t_pct int;
  p_pct int;
  ws numeric;
  evidence jsonb;
  plan jsonb;
  reasons text[];
  new_status text;
  recheck int;
  tr jsonb;
  br jsonb;
  result text := 'OBSERVED';
BEGIN
  SELECT * INTO ro FROM mlplat.rollouts x
   WHERE x.id = p_id AND x.row_version = p_row_version
     AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'rollouts' AND e.epoch = p_epoch)
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'LOST';
  END IF;
  UPDATE mlplat.rollouts x SET epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now()
   WHERE x.id = ro.id;
  IF p_error IS NOT NULL THEN
    UPDATE mlplat.rollouts x
       SET last_error = p_error, attempts = x.attempts + 1,
           next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => coalesce(p_retry_ms, 1000) / 1000.0)
     WHERE x.id = ro.id;
    RETURN 'ERROR';
  END IF;
  UPDATE mlplat.rollouts x SET last_error = NULL, attempts = 0, next_attempt_at = pg_catalog.now()
   WHERE x.id = ro.id;
  IF p_applied IS NOT NULL THEN
    -- a new traffic setting: any window in progress no longer describes what users get
    UPDATE mlplat.rollouts x SET applied_percent = p_applied, window_start = NULL, decide_at = NULL
     WHERE x.id = ro.id;
    RETURN 'APPLIED';
  END IF;

  frac := mlplat._rollout_fraction(ro.id);
  want := mlplat._rollout_want_percent(ro.status, ro.requested_action, frac);
  -- KServe's names for our two revisions, fixed at first sight: the target is the
  -- revision created for our manifest, the previous one is what KServe had rolled out.
  tkn := coalesce(ro.observed->>'target_kn', CASE WHEN (p_obs->>'settled')::boolean THEN p_obs->>'latest_created_kn' END);
  pkn := coalesce(ro.observed->>'previous_kn',
                  CASE WHEN (p_obs->>'settled')::boolean AND p_obs->>'rolledout_kn' IS DISTINCT FROM tkn
                       THEN p_obs->>'rolledout_kn' END);
  SELECT coalesce(sum((e->>'percent')::int) FILTER (WHERE e->>'revision' = tkn), 0),
         coalesce(sum((e->>'percent')::int) FILTER (WHERE e->>'revision' = pkn), 0)
    INTO t_pct, p_pct
    FROM pg_catalog.jsonb_array_elements(coalesce(p_obs->'traffic', '[]')) e;
  UPDATE mlplat.rollouts x
     SET observed = pg_catalog.jsonb_build_object('target_kn', tkn, 'previous_kn', pkn,
                      'traffic', p_obs->'traffic', 'target_percent', t_pct, 'previous_percent', p_pct,
                      'ready', p_obs->'ready', 'load', p_obs->'load', 'observed_at', p_obs->'observed_at'),
         observed_at = pg_catalog.now()
   WHERE x.id = ro.id;
  SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  IF NOT coalesce((p_obs->>'settled')::boolean, false) OR tkn IS NULL THEN
    RETURN result;              -- KServe has not caught up with what we applied yet
  END IF;

  IF ro.status = 'ROLLING_BACK' THEN
    IF pkn IS NOT NULL AND p_pct = 100 THEN
      RETURN mlplat._rollout_close(ro, p_obs, pkn, CASE WHEN ro.requested_action = 'ABORT' THEN 'ABORTED' ELSE 'ROLLED_BACK' END,
                                   p_epoch, p_controller);
    END IF;
    UPDATE mlplat.rollouts x
       SET status_reason = CASE WHEN pkn IS NULL OR NOT EXISTS (
                                   SELECT 1 FROM pg_catalog.jsonb_array_elements(coalesce(p_obs->'traffic', '[]')) e
                                    WHERE e->>'revision' = pkn)
                                THEN pg_catalog.format('rollback route lost: previous revision %s is not in the route',
                                                       coalesce(pkn, '(unknown)'))
                                ELSE pg_catalog.format('rolling back: %s%% still on the target', t_pct) END
     WHERE x.id = ro.id;
    RETURN result;
  END IF;
  IF ro.requested_action = 'PROMOTE' THEN
    IF t_pct = 100 THEN
      RETURN mlplat._rollout_close(ro, p_obs, tkn, 'PROMOTED', p_epoch, p_controller);
    END IF;
    UPDATE mlplat.rollouts x SET status_reason = pg_catalog.format('promoting: %s%% on the target so far', t_pct)
     WHERE x.id = ro.id;
    RETURN result;
  END IF;

  -- A window runs while the observed split is the one the rollout stands at.
  IF t_pct <> want THEN
    UPDATE mlplat.rollouts x SET window_start = NULL, decide_at = NULL,
           status_reason = pg_catalog.format('waiting for %s%% on the target (observed %s%%)', want, t_pct)
     WHERE x.id = ro.id;
    RETURN result;
  END IF;
  IF ro.window_start IS NULL THEN
    -- The window starts when this observation saw the split (evidence times have
    -- millisecond precision, so no waiting for a whole second).
    ws := at;
    UPDATE mlplat.rollouts x
       SET window_start = pg_catalog.to_timestamp(ws::float8),
           decide_at = ws + CASE WHEN frac = 0 THEN 0 ELSE (ro.policy->>'window_seconds')::int END,
           status_reason = pg_catalog.format('observing %s%% on the target', want)
     WHERE x.id = ro.id;
    IF frac <> 0 THEN
      RETURN result;
    END IF;
    -- At 0% the first decision needs readiness only (no window, no request metrics):
    -- this observation is the evidence, so decide on it at once.
    SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  END IF;
  IF (p_obs->'metrics' IS NULL AND frac <> 0) OR at < ro.decide_at THEN
    RETURN result;
  END IF;

  -- Decide exactly one transition.
  SELECT dr.intent INTO tr FROM mlplat.deployment_revisions dr
   WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.target_revision;
  SELECT dr.intent INTO br FROM mlplat.deployment_revisions dr
   WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.baseline_revision;
  evidence := mlplat.with_content_id(mlplat._rollout_evidence(ro.contract, frac, mlplat._rollout_replicas(tr),
                                                              mlplat._rollout_replicas(br), p_obs, tkn, pkn));
  BEGIN
    plan := mlplat.plan_rollout(ro.contract, evidence);
  EXCEPTION WHEN invalid_parameter_value THEN
    -- evidence this controller built and the decision function refused: a bug to see,
    -- not a transition; keep it out of the ledger and retry slowly
    UPDATE mlplat.rollouts x
       SET last_error = pg_catalog.format('plan_rollout refused the evidence: %s', SQLERRM),
           attempts = x.attempts + 1, next_attempt_at = pg_catalog.now() + interval '30 seconds'
     WHERE x.id = ro.id;
    RETURN 'REFUSED';
  END;
  SELECT pg_catalog.array_agg(r ORDER BY r) INTO reasons FROM pg_catalog.jsonb_array_elements_text(plan->'reasons') r;
  new_status := CASE plan->>'decision'
                  WHEN 'ADVANCE' THEN 'PROGRESSING'
                  WHEN 'ROLLBACK' THEN 'ROLLING_BACK'
                  ELSE CASE WHEN reasons && ARRAY['AT_CEILING', 'TRAFFIC_COMPLETE'] THEN 'AT_CEILING' ELSE 'HOLDING' END
                END;
  IF NOT mlplat._rollout_record(ro, plan->>'decision', reasons, new_status, frac, (plan->>'next_fraction')::numeric,
                                evidence, plan, p_obs - 'metrics' || pg_catalog.jsonb_build_object(
                                  'target_kn', tkn, 'previous_kn', pkn, 'metric_gaps', p_obs->'metrics'->'gaps'),
                                p_epoch, p_controller) THEN
    RETURN 'REPLAYED';
  END IF;
  -- After a hold, look again a fifth of a window later (1 s to 60 s); at the ceiling,
  -- where only a regression can still change anything, once per window.
  recheck := CASE WHEN new_status = 'AT_CEILING' THEN (ro.policy->>'window_seconds')::int
                  ELSE LEAST(GREATEST((ro.policy->>'window_seconds')::int / 5, 1), 60) END;
  UPDATE mlplat.rollouts x
     SET status = new_status,
         current_fraction = (plan->>'next_fraction')::numeric,
         status_reason = pg_catalog.format('%s: %s', plan->>'decision', pg_catalog.array_to_string(reasons, ', ')),
         window_start = CASE WHEN plan->>'decision' = 'HOLD' THEN x.window_start END,
         decide_at = CASE WHEN plan->>'decision' = 'HOLD' THEN at + recheck END,
         observed_generation = x.generation
   WHERE x.id = ro.id;
  RETURN plan->>'decision';
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_observe(bigint, bigint, bigint, text, jsonb, int, text, int) FROM PUBLIC;

-- Test hook: how the reconciler reads one Prometheus /api/v1/query answer.
CREATE FUNCTION mlplat._prometheus_classify(http_status int, body text) RETURNS jsonb
LANGUAGE C IMMUTABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS 'MODULE_PATHNAME', 'mlplat_prometheus_classify';
REVOKE ALL ON FUNCTION mlplat._prometheus_classify(int, text) FROM PUBLIC;

-- ==== sql/install/74_rollout_artifacts.sql
-- 74_rollout_artifacts: a rollout's target artifact is verified before the rollout
-- first applies the target revision (the same check the deployments reconciler makes
-- before a first apply: src/reconcile/artifact.c, 56_artifacts).  Kept apart from
-- 72_reconcile_rollouts: the rollouts pass calls it as a hook
-- (src/reconcile/rollout_artifacts.c) around its own claim and write-back.

-- Set once the target's artifact was found with its registered SHA-256; the check is
-- not repeated for the rollout's later steps (nor after a restart).
ALTER TABLE mlplat.rollouts ADD COLUMN artifact_verified_at timestamptz;

-- Of the given (claimed, due) rollouts, those whose target artifact is not verified yet.
CREATE FUNCTION mlplat._rollout_artifacts_pending(p_ids bigint[])
RETURNS TABLE (id bigint, deployment_id bigint, target_revision int)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT ro.id, ro.deployment_id, ro.target_revision
    FROM mlplat.rollouts ro
   WHERE ro.id = ANY (p_ids) AND ro.artifact_verified_at IS NULL
     AND ro.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')
   ORDER BY ro.id
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifacts_pending(bigint[]) FROM PUBLIC;

-- The verdict of one check (p_verdict OK, FAILED, RETRY or WAIT), under the leader
-- epoch and, for everything but OK, the compare-and-swap on row_version the pass
-- claimed with.  OK only marks the artifact verified (row_version unchanged: the
-- pass goes on to apply and writes back as usual).  FAILED ends the rollout FAILED:
-- nothing of the target was applied, the previous revision keeps all traffic, and the
-- deployment reconciler owns its InferenceService again.  RETRY/WAIT say why and
-- back off.  Returns the verdict, or LOST.
CREATE FUNCTION mlplat._rollout_artifact_verdict(p_id bigint, p_row_version bigint, p_epoch bigint,
                                                 p_verdict text, p_reason text, p_retry_ms int)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
  IF p_verdict NOT IN ('OK', 'FAILED', 'RETRY', 'WAIT') THEN
    RAISE EXCEPTION 'mlplat: unknown artifact verdict %', p_verdict USING ERRCODE = '22023';
  END IF;
  IF p_verdict = 'OK' THEN
    UPDATE mlplat.rollouts x SET artifact_verified_at = pg_catalog.now()
     WHERE x.id = p_id AND x.artifact_verified_at IS NULL
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'rollouts' AND e.epoch = p_epoch);
    RETURN CASE WHEN FOUND THEN 'OK' ELSE 'LOST' END;
  END IF;
  UPDATE mlplat.rollouts x
     SET epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now(),
         status_reason = p_reason, last_error = p_reason,
         status = CASE WHEN p_verdict = 'FAILED' THEN 'FAILED' ELSE x.status END,
         observed_generation = CASE WHEN p_verdict = 'FAILED' THEN x.generation ELSE x.observed_generation END,
         attempts = CASE WHEN p_verdict = 'FAILED' THEN x.attempts ELSE x.attempts + 1 END,
         next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => coalesce(p_retry_ms, 1000) / 1000.0)
   WHERE x.id = p_id AND x.row_version = p_row_version
     AND x.status IN ('PROGRESSING', 'HOLDING', 'AT_CEILING', 'ROLLING_BACK')
     AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'rollouts' AND e.epoch = p_epoch);
  IF NOT FOUND THEN
    RETURN 'LOST';
  END IF;
  IF p_verdict = 'FAILED' THEN
    -- the deployment serves its own revision as before; let its reconciler look at once
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  RETURN p_verdict;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifact_verdict(bigint, bigint, bigint, text, text, int) FROM PUBLIC;

-- ==== sql/install/90_alerts.sql
-- 90_alerts: the one view an operator watches.  Last, because it reads every part
-- before it (the reconcilers' entities, the rollouts' alerts, the span exporter).

-- What an operator should look at now.  One row per condition:
--   reconcile_age      intent not yet observed after 5 minutes
--   repeated_failures  5 or more failed attempts in a row
--   no_leader          a kind with no leading replica (workers not running?)
--   stale_leader       a leader whose last pass ended over 3 resync intervals ago
--   write_conflicts    ledger CONFLICT outcomes in the last hour
--   repeated_holds, stale_health, rollback_route_loss, surge_exhaustion,
--   request_regression: canary rollouts (see _rollout_alerts)
--   span_export_stalled  mlplat.otlp_endpoint is set but a span has waited for export
--                        longer than max(1 minute, 10 export intervals)
CREATE VIEW mlplat.alerts AS
SELECT 'reconcile_age' AS alert, 'warning' AS severity, e.kind, e.project, e.entity, e.entity_id,
       pg_catalog.format('intent generation %s not observed for %s', e.generation,
                         pg_catalog.date_trunc('second', pg_catalog.now() - e.updated_at)) AS detail,
       e.updated_at AS since
  FROM mlplat._entities e
 WHERE e.generation <> e.observed_generation AND e.updated_at < pg_catalog.now() - interval '5 minutes'
UNION ALL
SELECT 'repeated_failures', 'critical', e.kind, e.project, e.entity, e.entity_id,
       pg_catalog.format('%s failed attempts; last error: %s', e.attempts, coalesce(e.last_error, '-')),
       e.updated_at
  FROM mlplat._entities e WHERE e.attempts >= 5
UNION ALL
SELECT 'no_leader', 'critical', k.kind, NULL, NULL, NULL,
       'no replica of this kind leads (is mlplat in shared_preload_libraries, and mlplat.database this database?)', NULL
  FROM pg_catalog.unnest(ARRAY['projects', 'deployments', 'runs', 'rollouts', 'model_aliases']) AS k(kind)
 WHERE NOT EXISTS (SELECT 1 FROM mlplat._replica_states() s WHERE s.kind = k.kind AND s.role IN ('leader', 'idle'))
UNION ALL
SELECT 'stale_leader', 'critical', s.kind, NULL, NULL, NULL,
       pg_catalog.format('leader pid %s last finished a pass at %s', s.pid, s.last_pass_end), s.last_pass_end
  FROM mlplat._replica_states() s
 WHERE s.role = 'leader' AND s.last_pass_end IS NOT NULL
   AND s.last_pass_end < pg_catalog.now() - 3 * pg_catalog.current_setting('mlplat.resync_interval')::interval
UNION ALL
SELECT 'write_conflicts', 'warning', l.kind, l.project, l.entity, l.entity_id,
       pg_catalog.format('%s CONFLICT outcomes in the last hour', pg_catalog.count(*)), pg_catalog.min(l.at)
  FROM mlplat.reconcile_ledger l
 WHERE l.outcome = 'CONFLICT' AND l.at > pg_catalog.now() - interval '1 hour'
 GROUP BY l.kind, l.project, l.entity, l.entity_id
UNION ALL
SELECT a.alert, a.severity, 'rollouts', a.project, a.deployment, a.rollout_id, a.detail, a.since
  FROM mlplat._rollout_alerts a
UNION ALL
SELECT 'span_export_stalled', 'warning', 'projects', NULL, 'span exporter', NULL,
       pg_catalog.format('%s spans wait for export, the oldest for %s; %s consecutive failed POSTs; last error: %s',
                         x.spans_waiting, pg_catalog.date_trunc('second', x.oldest_waiting_age),
                         coalesce(x.consecutive_failures, 0), coalesce(x.last_error, '-')),
       pg_catalog.now() - x.oldest_waiting_age
  FROM mlplat.span_export_status x
 WHERE x.enabled
   AND x.oldest_waiting_age > GREATEST(interval '1 minute',
                                       10 * pg_catalog.current_setting('mlplat.otlp_export_interval')::interval);
COMMENT ON VIEW mlplat.alerts IS
  'Conditions an operator should look at: reconcile age, repeated failures, missing or stale leaders, write conflicts, canary rollouts, stalled span export.';
REVOKE ALL ON mlplat.alerts FROM PUBLIC;
