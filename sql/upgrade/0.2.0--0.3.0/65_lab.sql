-- 0.2.0 -> 0.3.0: Model Lab (sql/install/39_api_lab.sql, repeated here: every object is new
-- in 0.3.0).  Internal functions are revoked from PUBLIC here, as 45_api_views does for a
-- fresh install.

INSERT INTO mlplat.policies (role, action)
SELECT r.role, a.action
FROM (VALUES ('viewer', 1), ('developer', 2), ('deployer', 3), ('owner', 4)) AS r(role, rank)
JOIN (VALUES ('lab_preflight', 2), ('start_lab_run', 2), ('cancel_lab_run', 2), ('view_lab_results', 2),
             ('register_lab_profile', 3), ('disable_lab_profile', 3), ('start_lab_probe', 3),
             ('approve_lab', 4), ('revoke_lab_approval', 4))
     AS a(action, min_rank) ON r.rank >= a.min_rank;

-- ---------------------------------------------------------------- errors without caller content

-- 22023 "invalid lab request", DETAIL "Rule <code>.", a fixed hint; the failing statement is
-- kept out of the server log (src/validate/lab_errors.c).
CREATE FUNCTION mlplat._lab_reject(code text) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'mlplat_lab_reject';
-- 55000 "lab run not admitted", DETAIL "Blockers: <CODE>, ...".
CREATE FUNCTION mlplat._lab_not_admitted(blockers text[]) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'mlplat_lab_not_admitted';

-- ---------------------------------------------------------------- tables

-- A LabRun or probe that is in flight (reconciled, counted against the project's GPUs; a
-- finished one still counts while it holds its node lease).  Inlined like 05_rules.
CREATE FUNCTION mlplat.lab_run_is_active(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{QUEUED,DISPATCHED,RUNNING,RETRY_WAIT,CANCEL_REQUESTED}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.lab_run_is_active(text) IS
  'True for the lab run statuses that are in flight: QUEUED, DISPATCHED, RUNNING, RETRY_WAIT, CANCEL_REQUESTED.';

-- A LabRun or probe whose Job is out: created or being created, its run deadline counting.
CREATE FUNCTION mlplat.lab_run_is_running(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.lab_run_is_running(text) IS
  'True for the lab run statuses whose Job is out: DISPATCHED, RUNNING.';

-- Platform data: GPU nodes an administrator opened for lab runs.  observed_* are written by
-- the lab_runs reconciler from the Node object (label mlplat.io/lab=true) on every full pass.
CREATE TABLE mlplat.lab_nodes (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name                   text NOT NULL UNIQUE
                         CHECK (pg_catalog.length(name) <= 253
                                AND name ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'),
  accelerator            text NOT NULL CHECK (pg_catalog.length(accelerator) <= 63
                                              AND accelerator ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'),
  gpus                   int NOT NULL CHECK (gpus BETWEEN 1 AND 64),
  enabled                boolean NOT NULL DEFAULT true,
  registered_by          text NOT NULL,
  registered_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
  observed_ready         boolean,
  observed_unschedulable boolean,
  observed_gpus          int,
  observed_accelerator   text,
  observed_at            timestamptz
);
COMMENT ON TABLE mlplat.lab_nodes IS
  'GPU nodes open for lab runs (administrators); observed_* come from the Node object, observed_at is its freshness.';

-- A project's runtime profiles: the worker image and what it can run.  The spec is immutable;
-- a profile is only ever disabled.
CREATE TABLE mlplat.lab_profiles (
  id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id            bigint NOT NULL REFERENCES mlplat.projects (id),
  name                  text NOT NULL CHECK (pg_catalog.length(name) <= 63 AND name ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'),
  spec                  jsonb NOT NULL,
  content_id            text NOT NULL,
  runtime_kind          text NOT NULL,
  image                 text NOT NULL,
  gpus                  int NOT NULL CHECK (gpus BETWEEN 0 AND 8),
  accelerator           text NOT NULL,
  families              text[] NOT NULL,
  max_execution_seconds int NOT NULL CHECK (max_execution_seconds BETWEEN 1 AND 900),
  max_output_bytes      int NOT NULL CHECK (max_output_bytes BETWEEN 1 AND 262144),
  enabled               boolean NOT NULL DEFAULT true,
  created_by            text NOT NULL,
  created_at            timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (project_id, name)
);

-- An owner's LAB approval: exactly one candidate, artifact, profile and node; caps; a run
-- budget; an expiry.  No free-text column at all.
CREATE TABLE mlplat.lab_approvals (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id         bigint NOT NULL REFERENCES mlplat.projects (id),
  kind               text NOT NULL DEFAULT 'LAB' CHECK (kind = 'LAB'),
  candidate_id       bigint NOT NULL REFERENCES mlplat.model_versions (id),
  artifact_sha256    text NOT NULL CHECK (artifact_sha256 ~ '^[0-9a-f]{64}$'),
  runtime_profile_id bigint NOT NULL REFERENCES mlplat.lab_profiles (id),
  node_id            bigint NOT NULL REFERENCES mlplat.lab_nodes (id),
  families           text[] NOT NULL,
  limits             jsonb NOT NULL,
  max_runs           int NOT NULL CHECK (max_runs BETWEEN 1 AND 1000),
  runs_used          int NOT NULL DEFAULT 0 CHECK (runs_used >= 0),
  approved_by        text NOT NULL,
  db_role            text NOT NULL,
  approved_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
  valid_for          interval NOT NULL,
  expires_at         timestamptz NOT NULL,
  revoked_at         timestamptz,
  revoked_by         text,
  request_hash       text
);

-- Probe evidence for exactly (artifact, profile, node): RUNNING while its probe LabRun runs,
-- PASSED/FAILED with completed_at when it ends.
CREATE TABLE mlplat.lab_probes (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id         bigint NOT NULL REFERENCES mlplat.projects (id),
  artifact_sha256    text NOT NULL CHECK (artifact_sha256 ~ '^[0-9a-f]{64}$'),
  runtime_profile_id bigint NOT NULL REFERENCES mlplat.lab_profiles (id),
  node_id            bigint NOT NULL REFERENCES mlplat.lab_nodes (id),
  lab_run_id         bigint,
  status             text NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'PASSED', 'FAILED')),
  completed_at       timestamptz,
  created_at         timestamptz NOT NULL DEFAULT pg_catalog.now(),
  CHECK ((status = 'RUNNING') = (completed_at IS NULL))
);
CREATE INDEX lab_probes_evidence ON mlplat.lab_probes (runtime_profile_id, node_id, artifact_sha256, completed_at);

-- A LabRun (purpose 'run') or probe (purpose 'probe').  The provenance columns, from id to
-- created_at, never change after the insert (lab_runs_provenance, for superusers too).
CREATE TABLE mlplat.lab_runs (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id             bigint NOT NULL REFERENCES mlplat.projects (id),
  purpose                text NOT NULL CHECK (purpose IN ('run', 'probe')),
  actor                  text NOT NULL,
  db_role                text NOT NULL,
  idempotency_key        text NOT NULL,
  request_digest         text NOT NULL,
  candidate_id           bigint NOT NULL,
  model_version_id       bigint NOT NULL REFERENCES mlplat.model_versions (id),
  artifact_uri           text NOT NULL,
  artifact_sha256        text NOT NULL CHECK (artifact_sha256 ~ '^[0-9a-f]{64}$'),
  runtime_profile_id     bigint NOT NULL REFERENCES mlplat.lab_profiles (id),
  profile_content_id     text NOT NULL,
  node_id                bigint NOT NULL REFERENCES mlplat.lab_nodes (id),
  node_name              text NOT NULL,
  approval_id            bigint REFERENCES mlplat.lab_approvals (id),
  family                 text,
  input_digest           text,
  input_count            int,
  input_bytes            int,
  limits                 jsonb NOT NULL,
  gpus                   int NOT NULL,
  max_attempts           int NOT NULL CHECK (max_attempts BETWEEN 1 AND 3),
  queue_deadline_at      timestamptz NOT NULL,
  run_deadline_at        timestamptz NOT NULL,
  -- lifecycle (API: CANCEL_REQUESTED; everything else: the lab_runs reconciler)
  status                 text NOT NULL DEFAULT 'QUEUED'
                         CHECK (status IN ('QUEUED', 'DISPATCHED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED',
                                           'FAILED', 'CANCEL_REQUESTED', 'CANCELLED')),
  reason_code            text,
  status_reason          text,
  attempt                int NOT NULL DEFAULT 1,
  job_name               text,
  -- a write-back recorded the answer to this attempt's Job create (or found the Job): from
  -- then on an absent Job vanished (JOB_DISAPPEARED); before, it is created or looked for
  job_created_at         timestamptz,
  dispatched_at          timestamptz,
  started_at             timestamptz,
  finished_at            timestamptz,
  cancel_requested_at    timestamptz,
  cancel_requested_by    text,
  cancel_acknowledged_at timestamptz,
  output_digest          text,
  output_bytes           int,
  retain_until           timestamptz,
  purged_at              timestamptz,
  generation             bigint NOT NULL DEFAULT 1,
  observed_generation    bigint NOT NULL DEFAULT 0,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,   -- row_version .. updated_at, created_at among them
  CHECK ((purpose = 'run') = (approval_id IS NOT NULL))
);
CREATE UNIQUE INDEX lab_runs_idempotency ON mlplat.lab_runs (project_id, actor, purpose, idempotency_key);
CREATE INDEX lab_runs_active ON mlplat.lab_runs (node_id, id) WHERE mlplat.lab_run_is_active(status);
ALTER TABLE mlplat.lab_probes
  ADD CONSTRAINT lab_probes_lab_run_id_fkey FOREIGN KEY (lab_run_id) REFERENCES mlplat.lab_runs (id);

-- Transient content: inputs until the run ends, the output until retain_until.  No privileges
-- for anyone but the extension owner; in no view; RLS on with no policy as a second wall.
CREATE TABLE mlplat.lab_run_payloads (
  lab_run_id bigint NOT NULL REFERENCES mlplat.lab_runs (id),
  direction  text NOT NULL CHECK (direction IN ('input', 'output')),
  content    bytea NOT NULL,
  sha256     text NOT NULL,
  bytes      int NOT NULL,
  created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (lab_run_id, direction)
);

-- One lease per node: at most one LabRun or probe executes on a node.  Never expires by time;
-- released only by a write-back that saw the Job reclaimed.
CREATE TABLE mlplat.lab_leases (
  node_id     bigint PRIMARY KEY REFERENCES mlplat.lab_nodes (id),
  lab_run_id  bigint NOT NULL UNIQUE REFERENCES mlplat.lab_runs (id),
  attempt     int NOT NULL,
  epoch       bigint,
  acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  renewed_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The GPUs of a project's active lab runs and probes (lab_run_is_active, gpus > 0), kept by
-- lab_runs_gpus so the GPU quota reads at most nine rows (_gpus_in_use) instead of summing
-- every active run on each GPU start, deploy and run.  Split by quota slot so starts side by
-- side never wait for each other: a change made by a transaction holding a quota slot goes
-- to that slot's row (0-7; only its holder writes it; an exact reservation holds them all
-- and writes row 0), any other change (the reconciler ending a run, a cancel) to row 8.
-- The sum of a project's rows is the sum over its active runs at every commit.  Internal:
-- no privileges, RLS on with no policy; not in pg_dump's data (restoring lab_runs fires the
-- trigger, which rebuilds it).
CREATE TABLE mlplat.lab_gpus (
  project_id bigint NOT NULL REFERENCES mlplat.projects (id) ON DELETE CASCADE,
  slot       int NOT NULL CHECK (slot BETWEEN 0 AND 8),
  gpus       bigint NOT NULL,
  PRIMARY KEY (project_id, slot)
);
ALTER TABLE mlplat.lab_gpus ENABLE ROW LEVEL SECURITY;

-- src/quota_slot.c: the lowest quota slot of the project this transaction holds, or -1.
CREATE FUNCTION mlplat._lab_quota_slot_held(project_id bigint) RETURNS int
LANGUAGE C STRICT VOLATILE AS 'MODULE_PATHNAME', 'mlplat_held_quota_slot';

-- (SECURITY DEFINER: whoever ends a run, the reconciler's role included, updates the count)
CREATE FUNCTION mlplat._lab_gpus_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  project bigint;
  delta bigint;
  held int;
BEGIN
  IF TG_OP = 'INSERT' THEN
    project := NEW.project_id;
    delta := NEW.gpus;
  ELSIF TG_OP = 'DELETE' THEN
    project := OLD.project_id;
    delta := -OLD.gpus;
  ELSE   -- the WHEN clause: the status went into or out of the active ones
    project := NEW.project_id;
    delta := CASE WHEN mlplat.lab_run_is_active(NEW.status) THEN NEW.gpus ELSE -NEW.gpus END;
  END IF;
  held := mlplat._lab_quota_slot_held(project);
  INSERT INTO mlplat.lab_gpus AS c (project_id, slot, gpus)
  VALUES (project, CASE WHEN held >= 0 THEN held ELSE 8 END, delta)
  ON CONFLICT (project_id, slot) DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
  RETURN NULL;
END $$;
CREATE TRIGGER lab_runs_gpus_insert AFTER INSERT ON mlplat.lab_runs FOR EACH ROW
  WHEN (NEW.gpus > 0 AND mlplat.lab_run_is_active(NEW.status))
  EXECUTE FUNCTION mlplat._lab_gpus_count();
CREATE TRIGGER lab_runs_gpus_status AFTER UPDATE OF status ON mlplat.lab_runs FOR EACH ROW
  WHEN (NEW.gpus > 0 AND mlplat.lab_run_is_active(OLD.status) <> mlplat.lab_run_is_active(NEW.status))
  EXECUTE FUNCTION mlplat._lab_gpus_count();
CREATE TRIGGER lab_runs_gpus_delete AFTER DELETE ON mlplat.lab_runs FOR EACH ROW
  WHEN (OLD.gpus > 0 AND mlplat.lab_run_is_active(OLD.status))
  EXECUTE FUNCTION mlplat._lab_gpus_count();

-- Append-only history of every status change: ids, codes and what was observed, no content.
CREATE TABLE mlplat.lab_run_transitions (
  lab_run_id  bigint NOT NULL REFERENCES mlplat.lab_runs (id),
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  seq         int NOT NULL,
  attempt     int NOT NULL,
  from_status text,
  to_status   text NOT NULL,
  reason_code text,
  observation jsonb,
  actor       text,
  epoch       bigint,
  controller  text,
  at          timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  PRIMARY KEY (lab_run_id, seq)
);
SELECT mlplat._append_only('lab_run_transitions');

-- Provenance and specs do not change: a LabRun's binding, a profile's spec, an approval's
-- scope.  Enforced by trigger, so a superuser's UPDATE is refused too (55000).  The WHEN
-- clause keeps the function (and its row-to-jsonb work) off the path of every allowed update
-- (runs_used + 1 at each start, every lifecycle write-back): it runs only to name the column.
CREATE FUNCTION mlplat._lab_immutable() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  o jsonb := pg_catalog.to_jsonb(OLD);
  n jsonb := pg_catalog.to_jsonb(NEW);
  c text;
BEGIN
  FOREACH c IN ARRAY TG_ARGV LOOP
    IF o->c IS DISTINCT FROM n->c THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = pg_catalog.format('%s.%s is immutable', TG_TABLE_NAME, c),
        DETAIL = pg_catalog.format('The %s of a %s row is provenance and never changes after it is written.', c, TG_TABLE_NAME),
        HINT = 'Make a new one instead (a new lab run, profile or approval).';
    END IF;
  END LOOP;
  RETURN NEW;
END $$;
CREATE TRIGGER lab_runs_provenance BEFORE UPDATE ON mlplat.lab_runs FOR EACH ROW
  WHEN ((OLD.id, OLD.project_id, OLD.purpose, OLD.actor, OLD.db_role, OLD.idempotency_key,
         OLD.request_digest, OLD.candidate_id, OLD.model_version_id, OLD.artifact_uri,
         OLD.artifact_sha256, OLD.runtime_profile_id, OLD.profile_content_id, OLD.node_id,
         OLD.node_name, OLD.approval_id, OLD.family, OLD.input_digest, OLD.input_count,
         OLD.input_bytes, OLD.limits, OLD.gpus, OLD.max_attempts, OLD.queue_deadline_at,
         OLD.run_deadline_at, OLD.created_at)
        IS DISTINCT FROM (NEW.id, NEW.project_id, NEW.purpose, NEW.actor, NEW.db_role, NEW.idempotency_key,
                          NEW.request_digest, NEW.candidate_id, NEW.model_version_id,
                          NEW.artifact_uri, NEW.artifact_sha256, NEW.runtime_profile_id,
                          NEW.profile_content_id, NEW.node_id, NEW.node_name, NEW.approval_id,
                          NEW.family, NEW.input_digest, NEW.input_count, NEW.input_bytes,
                          NEW.limits, NEW.gpus, NEW.max_attempts, NEW.queue_deadline_at,
                          NEW.run_deadline_at, NEW.created_at))
  EXECUTE FUNCTION mlplat._lab_immutable('id', 'project_id', 'purpose', 'actor', 'db_role', 'idempotency_key',
    'request_digest', 'candidate_id', 'model_version_id', 'artifact_uri', 'artifact_sha256', 'runtime_profile_id',
    'profile_content_id', 'node_id', 'node_name', 'approval_id', 'family', 'input_digest', 'input_count',
    'input_bytes', 'limits', 'gpus', 'max_attempts', 'queue_deadline_at', 'run_deadline_at', 'created_at');
CREATE TRIGGER lab_profiles_spec BEFORE UPDATE ON mlplat.lab_profiles FOR EACH ROW
  WHEN ((OLD.id, OLD.project_id, OLD.name, OLD.spec, OLD.content_id, OLD.runtime_kind, OLD.image,
         OLD.gpus, OLD.accelerator, OLD.families, OLD.max_execution_seconds,
         OLD.max_output_bytes, OLD.created_by, OLD.created_at)
        IS DISTINCT FROM (NEW.id, NEW.project_id, NEW.name, NEW.spec, NEW.content_id, NEW.runtime_kind, NEW.image,
                          NEW.gpus, NEW.accelerator, NEW.families, NEW.max_execution_seconds,
                          NEW.max_output_bytes, NEW.created_by, NEW.created_at))
  EXECUTE FUNCTION mlplat._lab_immutable('id', 'project_id', 'name', 'spec', 'content_id', 'runtime_kind', 'image',
    'gpus', 'accelerator', 'families', 'max_execution_seconds', 'max_output_bytes', 'created_by', 'created_at');
CREATE TRIGGER lab_approvals_scope BEFORE UPDATE ON mlplat.lab_approvals FOR EACH ROW
  WHEN ((OLD.id, OLD.project_id, OLD.kind, OLD.candidate_id, OLD.artifact_sha256, OLD.runtime_profile_id,
         OLD.node_id, OLD.families, OLD.limits, OLD.max_runs, OLD.approved_by, OLD.db_role,
         OLD.approved_at, OLD.valid_for, OLD.expires_at, OLD.request_hash)
        IS DISTINCT FROM (NEW.id, NEW.project_id, NEW.kind, NEW.candidate_id, NEW.artifact_sha256, NEW.runtime_profile_id,
                          NEW.node_id, NEW.families, NEW.limits, NEW.max_runs, NEW.approved_by,
                          NEW.db_role, NEW.approved_at, NEW.valid_for, NEW.expires_at,
                          NEW.request_hash))
  EXECUTE FUNCTION mlplat._lab_immutable('id', 'project_id', 'kind', 'candidate_id', 'artifact_sha256',
    'runtime_profile_id', 'node_id', 'families', 'limits', 'max_runs', 'approved_by', 'db_role', 'approved_at',
    'valid_for', 'expires_at', 'request_hash');

-- ---------------------------------------------------------------- admission guards

-- What a start assessed stays so until it commits (src/lab_guard.c).  A start holds a guard
-- on its node, profile and version in SHARE mode (_lab_admit); every UPDATE or DELETE of
-- those rows takes the row's guard exclusively first, by trigger, so it reaches the API's
-- writes, a rollout's promotion and a superuser's UPDATE alike.  A writer holds its row lock
-- before its guard; a start its guard before its inserts' FOR KEY SHARE on the same rows
-- (the foreign keys), which a non-key UPDATE does not block: no cycle.  The reconciler's
-- observation of a node (observed_*, refreshed on every full pass of every node) takes no
-- guard: it neither waits for starts nor makes them wait, and the claim assesses the node
-- again before any dispatch (NODE_NOT_READY, stale, cordoned: the run waits).
CREATE FUNCTION mlplat._lab_guard_share(node_id bigint, profile_id bigint, version_id bigint) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'mlplat_lab_guard_share';
CREATE FUNCTION mlplat._lab_guard_write() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'mlplat_lab_guard_write';
CREATE TRIGGER lab_nodes_guard BEFORE UPDATE ON mlplat.lab_nodes FOR EACH ROW
  WHEN ((OLD.id, OLD.name, OLD.accelerator, OLD.gpus, OLD.enabled, OLD.registered_by, OLD.registered_at)
        IS DISTINCT FROM (NEW.id, NEW.name, NEW.accelerator, NEW.gpus, NEW.enabled, NEW.registered_by,
                          NEW.registered_at))
  EXECUTE FUNCTION mlplat._lab_guard_write('node');
CREATE TRIGGER lab_nodes_guard_delete BEFORE DELETE ON mlplat.lab_nodes FOR EACH ROW
  EXECUTE FUNCTION mlplat._lab_guard_write('node');
CREATE TRIGGER lab_profiles_guard BEFORE UPDATE OR DELETE ON mlplat.lab_profiles FOR EACH ROW
  EXECUTE FUNCTION mlplat._lab_guard_write('profile');
CREATE TRIGGER model_versions_lab_guard BEFORE UPDATE OR DELETE ON mlplat.model_versions FOR EACH ROW
  EXECUTE FUNCTION mlplat._lab_guard_write('version');

-- ---------------------------------------------------------------- authorization

-- Like _authorize, without the administrator bypass: the person (mlplat.on_behalf_of when the
-- calling role may impersonate, else the database role) must hold a project role whose policy
-- allows the action.  Superuser status, mlplat.admins and the application role's own
-- memberships never count.  A missing project is 42501 for everyone.
CREATE FUNCTION mlplat._authorize_member(p_action text, p_project text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  who text := mlplat._actor();
  pid bigint;
BEGIN
  SELECT p.id INTO pid
  FROM mlplat.projects p
  WHERE p.name = p_project
    AND EXISTS (SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
                WHERE m.project_id = p.id AND m.principal = who AND po.action = p_action);
  IF pid IS NOT NULL AND mlplat._impersonation_allows(p_project) THEN
    RETURN pid;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42501',
    MESSAGE = pg_catalog.format('permission denied: %s', p_action),
    DETAIL = 'Lab actions need the person''s own project role whose policy allows the action; platform administration does not count.',
    HINT = 'Ask a project owner to grant you a role in the project (docs/lab.md).';
END $$;

-- ---------------------------------------------------------------- typed validators

-- A JSON number within [lo, hi] (integral when asked): NULL when valid, else the rule code.
-- The shared validator _json_num decides; its path-bearing error is discarded.
CREATE FUNCTION mlplat._lab_num(val jsonb, lo numeric, hi numeric, integral boolean, bad_type text, bad_range text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  n numeric;
BEGIN
  -- fast yes without a subtransaction
  IF pg_catalog.jsonb_typeof(val) = 'number' THEN
    n := (val #>> '{}')::numeric;
    IF (NOT integral OR n = pg_catalog.trunc(n)) AND n BETWEEN lo AND hi THEN
      RETURN NULL;
    END IF;
  END IF;
  BEGIN
    PERFORM mlplat._json_num('value', val, lo, hi, integral);
    RETURN NULL;
  EXCEPTION WHEN invalid_parameter_value THEN
    IF pg_catalog.jsonb_typeof(val) IS DISTINCT FROM 'number' OR (integral AND n <> pg_catalog.trunc(n)) THEN
      RETURN bad_type;
    END IF;
    RETURN bad_range;
  END;
END $$;

-- A JSON string of lo..hi characters: NULL, 'input_type' or 'input_range'.
CREATE FUNCTION mlplat._lab_str(val jsonb, lo int, hi int) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF pg_catalog.jsonb_typeof(val) IS DISTINCT FROM 'string' THEN
    RETURN 'input_type';
  ELSIF pg_catalog.length(val #>> '{}') NOT BETWEEN lo AND hi THEN
    RETURN 'input_range';
  END IF;
  RETURN NULL;
END $$;

-- RFC 4648 base64 (padded, no whitespace) decoding to lo..hi bytes.
CREATE FUNCTION mlplat._lab_base64(val jsonb, lo int, hi int) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  s text;
  n bigint;
BEGIN
  IF pg_catalog.jsonb_typeof(val) IS DISTINCT FROM 'string' THEN
    RETURN 'input_type';
  END IF;
  s := val #>> '{}';
  IF pg_catalog.length(s) % 4 <> 0 OR s !~ '^[A-Za-z0-9+/]*(={0,2})$' OR s ~ '=[^=]' THEN
    RETURN 'input_type';
  END IF;
  n := pg_catalog.length(s) / 4 * 3 - pg_catalog.length(s) + pg_catalog.length(pg_catalog.rtrim(s, '='));
  IF n NOT BETWEEN lo AND hi THEN
    RETURN 'input_range';
  END IF;
  RETURN NULL;
END $$;

-- A media item (image, audio): its base64 payload under p_key (1..49152 bytes) and its
-- content_type, one of p_types; the rule it breaks first, or NULL.
CREATE FUNCTION mlplat._lab_media(it jsonb, p_key text, p_types text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN coalesce(mlplat._lab_base64(it->p_key, 1, 49152),
                  CASE WHEN pg_catalog.jsonb_typeof(it->'content_type') <> 'string' THEN 'input_type'
                       WHEN NOT (it->>'content_type' = ANY (p_types)) THEN 'input_range' END);
END $$;

-- The rule one item of a family breaks (first failing field in a fixed order), or NULL.
CREATE FUNCTION mlplat._lab_item_rule(p_family text, it jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  allowed text[];
  required text[];
  keys text[];
  code text;
  e jsonb;
BEGIN
  IF pg_catalog.jsonb_typeof(it) <> 'object' THEN
    RETURN 'input_shape';
  END IF;
  CASE p_family
    WHEN 'text_generation' THEN
      allowed := '{prompt,max_tokens,temperature,stop}'; required := '{prompt,max_tokens}';
    WHEN 'embedding' THEN
      allowed := '{text}'; required := '{text}';
    WHEN 'tabular_predict' THEN
      allowed := '{features}'; required := '{features}';
    WHEN 'image_classification' THEN
      allowed := '{image_base64,content_type,top_k}'; required := '{image_base64,content_type}';
    ELSE  -- speech_to_text
      allowed := '{audio_base64,content_type,language}'; required := '{audio_base64,content_type}';
  END CASE;
  keys := ARRAY(SELECT pg_catalog.jsonb_object_keys(it));
  IF NOT (keys <@ allowed AND keys @> required) THEN
    RETURN 'input_shape';
  END IF;
  CASE p_family
    WHEN 'text_generation' THEN
      code := coalesce(mlplat._lab_str(it->'prompt', 1, 16384),
                       mlplat._lab_num(it->'max_tokens', 1, 4096, true, 'input_type', 'input_range'));
      IF code IS NULL AND it ? 'temperature' THEN
        code := mlplat._lab_num(it->'temperature', 0, 2, false, 'input_type', 'input_range');
      END IF;
      IF code IS NULL AND it ? 'stop' THEN
        BEGIN
          PERFORM mlplat._json_strings('stop', it->'stop', 4);
        EXCEPTION WHEN invalid_parameter_value THEN
          code := CASE WHEN pg_catalog.jsonb_typeof(it->'stop') <> 'array'
                         OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(it->'stop') x
                                     WHERE pg_catalog.jsonb_typeof(x) <> 'string')
                       THEN 'input_type' ELSE 'input_range' END;
        END;
        IF code IS NULL AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements_text(it->'stop') x
                                     WHERE pg_catalog.length(x) > 64) THEN
          code := 'input_range';
        END IF;
      END IF;
    WHEN 'embedding' THEN
      code := mlplat._lab_str(it->'text', 1, 8192);
    WHEN 'tabular_predict' THEN
      e := it->'features';
      IF pg_catalog.jsonb_typeof(e) <> 'array' THEN
        code := 'input_type';
      ELSE
        SELECT x INTO code FROM (
          SELECT mlplat._lab_num(f, -1e308, 1e308, false, 'input_type', 'input_range') AS x, o
          FROM pg_catalog.jsonb_array_elements(e) WITH ORDINALITY AS t(f, o)) s
        WHERE x IS NOT NULL ORDER BY o LIMIT 1;
        IF code IS NULL AND pg_catalog.jsonb_array_length(e) NOT BETWEEN 1 AND 512 THEN
          code := 'input_range';
        END IF;
      END IF;
    WHEN 'image_classification' THEN
      code := mlplat._lab_media(it, 'image_base64', '{image/png,image/jpeg}');
      IF code IS NULL AND it ? 'top_k' THEN
        code := mlplat._lab_num(it->'top_k', 1, 20, true, 'input_type', 'input_range');
      END IF;
    ELSE  -- speech_to_text
      code := mlplat._lab_media(it, 'audio_base64', '{audio/wav,audio/flac}');
      IF code IS NULL AND it ? 'language' THEN
        code := CASE WHEN pg_catalog.jsonb_typeof(it->'language') <> 'string' THEN 'input_type'
                     WHEN it->>'language' !~ '^[a-z]{2,3}(-[A-Z]{2})?$' THEN 'input_range' END;
      END IF;
  END CASE;
  RETURN code;
END $$;

-- family and inputs (§3): raises the first broken rule; returns the canonical input text.
CREATE FUNCTION mlplat._lab_check_inputs(p_family text, p_inputs jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  c text;
  code text;
BEGIN
  IF p_family IS NULL THEN
    PERFORM mlplat._lab_reject('null_argument');
  ELSIF p_family NOT IN ('text_generation', 'embedding', 'tabular_predict', 'image_classification', 'speech_to_text') THEN
    PERFORM mlplat._lab_reject('unknown_family');
  END IF;
  IF p_inputs IS NULL THEN
    PERFORM mlplat._lab_reject('null_argument');
  ELSIF pg_catalog.jsonb_typeof(p_inputs) <> 'array' THEN
    PERFORM mlplat._lab_reject('inputs_not_array');
  ELSIF pg_catalog.jsonb_array_length(p_inputs) NOT BETWEEN 1 AND 64 THEN
    PERFORM mlplat._lab_reject('input_count');
  END IF;
  c := mlplat.canonical_json(p_inputs);
  IF pg_catalog.octet_length(c) > 65536 THEN
    PERFORM mlplat._lab_reject('input_too_large');
  END IF;
  SELECT r INTO code FROM (
    SELECT mlplat._lab_item_rule(p_family, it) AS r, o
    FROM pg_catalog.jsonb_array_elements(p_inputs) WITH ORDINALITY AS t(it, o)) s
  WHERE r IS NOT NULL ORDER BY o LIMIT 1;
  IF code IS NOT NULL THEN
    PERFORM mlplat._lab_reject(code);
  END IF;
  RETURN c;
END $$;

-- limits (§3): a closed object of whole JSON numbers, defaults filled.  For an approval the
-- limits are caps and concurrency is not one of them.
CREATE FUNCTION mlplat._lab_limits(p_limits jsonb, p_for_approval boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  spec CONSTANT jsonb := '[["max_execution_seconds", 1, 900, 120], ["max_queue_seconds", 1, 3600, 600],
                           ["retention_seconds", 60, 604800, 86400], ["max_output_bytes", 1, 262144, 65536],
                           ["max_attempts", 1, 3, 1]]';
  res jsonb := '{}';
  k jsonb;
  code text;
BEGIN
  IF p_limits IS NULL THEN
    PERFORM mlplat._lab_reject('null_argument');
  ELSIF pg_catalog.jsonb_typeof(p_limits) <> 'object'
        OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(p_limits) x
                   WHERE x NOT IN ('max_execution_seconds', 'max_queue_seconds', 'retention_seconds',
                                   'max_output_bytes', 'max_attempts', 'concurrency')
                      OR (p_for_approval AND x = 'concurrency')) THEN
    PERFORM mlplat._lab_reject('limits_shape');
  END IF;
  FOR k IN SELECT x FROM pg_catalog.jsonb_array_elements(spec) x LOOP
    IF p_limits ? (k->>0) THEN
      code := mlplat._lab_num(p_limits->(k->>0), (k->>1)::numeric, (k->>2)::numeric, true,
                              'limit_type', 'limit_out_of_range');
      IF code IS NOT NULL THEN
        PERFORM mlplat._lab_reject(code);
      END IF;
      res := res || pg_catalog.jsonb_build_object(k->>0, (p_limits->>(k->>0))::numeric::int);
    ELSE
      res := res || pg_catalog.jsonb_build_object(k->>0, (k->>3)::int);
    END IF;
  END LOOP;
  IF NOT p_for_approval THEN
    IF p_limits ? 'concurrency' THEN
      code := mlplat._lab_num(p_limits->'concurrency', 1, 1, true, 'limit_type', 'concurrency_not_one');
      IF code IS NOT NULL THEN
        PERFORM mlplat._lab_reject(code);
      END IF;
    END IF;
    res := res || '{"concurrency": 1}';
  END IF;
  RETURN res;
END $$;

-- The id arguments shared by preflight, start and approvals, left to right.
CREATE FUNCTION mlplat._lab_check_ids(p_candidate bigint, p_sha256 text, p_profile bigint, p_node bigint,
                                      p_approval bigint, p_need_approval boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_candidate IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF p_candidate <= 0 THEN PERFORM mlplat._lab_reject('bad_id'); END IF;
  IF p_sha256 IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF p_sha256 !~ '^[0-9a-f]{64}$' THEN PERFORM mlplat._lab_reject('bad_digest'); END IF;
  IF p_profile IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF p_profile <= 0 THEN PERFORM mlplat._lab_reject('bad_id'); END IF;
  IF p_node IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF p_node <= 0 THEN PERFORM mlplat._lab_reject('bad_id'); END IF;
  IF p_need_approval THEN
    IF p_approval IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
    IF p_approval <= 0 THEN PERFORM mlplat._lab_reject('bad_id'); END IF;
  END IF;
END $$;

-- ---------------------------------------------------------------- assessment

-- Every blocker of a request, recomputed from the tables at now(): distinct, in byte order.
-- Dependants are skipped when their parent is missing (docs/lab.md, "Blockers").  Used by
-- lab_preflight, by start_lab_run under its locks, and by the reconciler before dispatch.
-- p_approval NULL: a probe (no approval checks).  Reads only.
CREATE FUNCTION mlplat._lab_assess(p_project_id bigint, p_candidate bigint, p_sha256 text, p_profile bigint,
                                   p_node bigint, p_approval bigint, p_family text, p_limits jsonb,
                                   p_input_count int) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  b text[] := '{}';
  pst text;
  v mlplat.model_versions;
  pr mlplat.lab_profiles;
  n mlplat.lab_nodes;
  a mlplat.lab_approvals;
  probe_status text;
  probe_done timestamptz;
  probe_running boolean;
  node_age interval := coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_node_max_age', true), ''), '60s')::interval;
  probe_age interval := coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_probe_max_age', true), ''), '24h')::interval;
BEGIN
  SELECT x.status INTO pst FROM mlplat.projects x WHERE x.id = p_project_id;
  IF pst IS NULL OR mlplat.project_is_deleting(pst) THEN
    b := b || 'PROJECT_NOT_ACTIVE'::text;
  END IF;

  SELECT * INTO v FROM mlplat.model_versions x WHERE x.id = p_candidate AND x.project_id = p_project_id;
  IF v.id IS NULL THEN
    b := b || 'CANDIDATE_NOT_FOUND'::text;
  ELSE
    IF NOT mlplat.model_stage_is_deployable(v.stage) THEN b := b || 'CANDIDATE_NOT_ELIGIBLE'::text; END IF;
    IF v.artifact_sha256 <> p_sha256 THEN b := b || 'ARTIFACT_MISMATCH'::text; END IF;
  END IF;

  SELECT * INTO pr FROM mlplat.lab_profiles x WHERE x.id = p_profile AND x.project_id = p_project_id;
  IF pr.id IS NULL THEN
    b := b || 'PROFILE_NOT_FOUND'::text;
  ELSE
    IF NOT pr.enabled THEN b := b || 'PROFILE_DISABLED'::text; END IF;
    IF v.id IS NOT NULL AND pr.runtime_kind <> v.runtime_kind THEN b := b || 'PROFILE_RUNTIME_MISMATCH'::text; END IF;
    IF p_family IS NOT NULL AND NOT p_family = ANY (pr.families) THEN b := b || 'FAMILY_NOT_SUPPORTED'::text; END IF;
    IF (p_limits->>'max_execution_seconds')::int > pr.max_execution_seconds
       OR (p_limits->>'max_output_bytes')::int > pr.max_output_bytes THEN
      b := b || 'LIMIT_EXCEEDS_PROFILE'::text;
    END IF;
  END IF;

  SELECT * INTO n FROM mlplat.lab_nodes x WHERE x.id = p_node;
  IF n.id IS NULL THEN
    b := b || 'NODE_NOT_FOUND'::text;
  ELSE
    IF NOT n.enabled THEN b := b || 'NODE_DISABLED'::text; END IF;
    IF n.observed_at IS NULL THEN
      b := b || 'NODE_NOT_OBSERVED'::text;
    ELSE
      IF pg_catalog.now() - n.observed_at > node_age THEN b := b || 'NODE_OBSERVATION_STALE'::text; END IF;
      IF NOT coalesce(n.observed_ready, false) THEN b := b || 'NODE_NOT_READY'::text; END IF;
      IF coalesce(n.observed_unschedulable, false) THEN b := b || 'NODE_CORDONED'::text; END IF;
      IF pr.id IS NOT NULL THEN
        IF n.observed_accelerator IS DISTINCT FROM pr.accelerator THEN b := b || 'NODE_ACCELERATOR_MISMATCH'::text; END IF;
        IF coalesce(n.observed_gpus, 0) < pr.gpus THEN b := b || 'NODE_INSUFFICIENT_GPUS'::text; END IF;
      END IF;
    END IF;
  END IF;

  -- probe evidence for exactly (artifact, profile, node); a probe's own run needs none
  IF v.id IS NOT NULL AND pr.id IS NOT NULL AND n.id IS NOT NULL AND p_approval IS NOT NULL THEN
    SELECT x.status, x.completed_at INTO probe_status, probe_done
    FROM mlplat.lab_probes x
    WHERE x.runtime_profile_id = p_profile AND x.node_id = p_node AND x.artifact_sha256 = p_sha256
      AND x.project_id = p_project_id AND x.completed_at IS NOT NULL
    ORDER BY x.completed_at DESC, x.id DESC LIMIT 1;
    IF probe_status IS NULL THEN
      probe_running := EXISTS (SELECT 1 FROM mlplat.lab_probes x
                               WHERE x.runtime_profile_id = p_profile AND x.node_id = p_node
                                 AND x.artifact_sha256 = p_sha256 AND x.project_id = p_project_id
                                 AND x.status = 'RUNNING');
      b := b || CASE WHEN probe_running THEN 'PROBE_RUNNING' ELSE 'PROBE_MISSING' END;
    ELSIF probe_status = 'FAILED' THEN
      b := b || 'PROBE_FAILED'::text;
    ELSIF pg_catalog.now() - probe_done > probe_age THEN
      b := b || 'PROBE_STALE'::text;
    END IF;
  END IF;

  IF p_approval IS NOT NULL THEN
    SELECT * INTO a FROM mlplat.lab_approvals x WHERE x.id = p_approval AND x.project_id = p_project_id;
    IF a.id IS NULL THEN
      b := b || 'APPROVAL_NOT_FOUND'::text;
    ELSE
      IF a.candidate_id <> p_candidate OR a.artifact_sha256 <> p_sha256 OR a.runtime_profile_id <> p_profile
         OR a.node_id <> p_node THEN
        b := b || 'APPROVAL_SCOPE_MISMATCH'::text;
      END IF;
      IF a.expires_at <= pg_catalog.now() THEN b := b || 'APPROVAL_EXPIRED'::text; END IF;
      IF a.revoked_at IS NOT NULL THEN b := b || 'APPROVAL_REVOKED'::text; END IF;
      IF a.runs_used >= a.max_runs THEN b := b || 'APPROVAL_EXHAUSTED'::text; END IF;
      IF NOT p_family = ANY (a.families) THEN b := b || 'FAMILY_NOT_APPROVED'::text; END IF;
      IF EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(a.limits) c
                 WHERE (p_limits->>c.key)::numeric > (c.value #>> '{}')::numeric) THEN
        b := b || 'LIMIT_EXCEEDS_APPROVAL'::text;
      END IF;
    END IF;
  END IF;
  RETURN ARRAY(SELECT DISTINCT c COLLATE "C" FROM pg_catalog.unnest(b) c ORDER BY 1);
END $$;

-- ---------------------------------------------------------------- preflight

CREATE TYPE mlplat.lab_preflight_result AS (
  passed                     boolean,
  blockers                   text[],
  project                    text,
  candidate_id               bigint,
  model                      text,
  version                    text,
  artifact_sha256            text,
  runtime_profile_id         bigint,
  runtime_profile_content_id text,
  node_id                    bigint,
  node                       text,
  approval_id                bigint,
  family                     text,
  input_digest               text,
  input_count                int,
  input_bytes                int,
  max_execution_seconds      int,
  max_queue_seconds          int,
  retention_seconds          int,
  max_output_bytes           int,
  max_attempts               int,
  concurrency                int,
  execution_started          boolean,
  permission_granted         boolean,
  assessed_at                timestamptz
);

-- Side-effect free: reads, and writes nothing at all (no audit event, span, idempotency record,
-- wake, lease, payload, Job or Secret), so it works in BEGIN READ ONLY and on a hot standby.
-- A pass grants nothing: start_lab_run assesses again under its locks.
CREATE FUNCTION mlplat.lab_preflight(project text, candidate_id bigint, artifact_sha256 text,
                                     runtime_profile_id bigint, node_id bigint, approval_id bigint,
                                     family text, inputs jsonb, limits jsonb DEFAULT '{}')
RETURNS mlplat.lab_preflight_result LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize_member('lab_preflight', lab_preflight.project);
  r mlplat.lab_preflight_result;
  c text;
  lim jsonb;
BEGIN
  PERFORM mlplat._lab_check_ids(lab_preflight.candidate_id, lab_preflight.artifact_sha256,
    lab_preflight.runtime_profile_id, lab_preflight.node_id, lab_preflight.approval_id, true);
  c := mlplat._lab_check_inputs(lab_preflight.family, lab_preflight.inputs);
  lim := mlplat._lab_limits(lab_preflight.limits, false);
  r.blockers := mlplat._lab_assess(pid, lab_preflight.candidate_id, lab_preflight.artifact_sha256,
    lab_preflight.runtime_profile_id, lab_preflight.node_id, lab_preflight.approval_id, lab_preflight.family,
    lim, pg_catalog.jsonb_array_length(lab_preflight.inputs));
  r.passed := pg_catalog.cardinality(r.blockers) = 0;
  r.project := lab_preflight.project;
  r.candidate_id := lab_preflight.candidate_id;
  SELECT m.name, v.version INTO r.model, r.version
  FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id
  WHERE v.id = lab_preflight.candidate_id AND v.project_id = pid;
  r.artifact_sha256 := lab_preflight.artifact_sha256;
  r.runtime_profile_id := lab_preflight.runtime_profile_id;
  r.runtime_profile_content_id := (SELECT x.content_id FROM mlplat.lab_profiles x
                                   WHERE x.id = lab_preflight.runtime_profile_id AND x.project_id = pid);
  r.node_id := lab_preflight.node_id;
  r.node := (SELECT x.name FROM mlplat.lab_nodes x WHERE x.id = lab_preflight.node_id);
  r.approval_id := lab_preflight.approval_id;
  r.family := lab_preflight.family;
  r.input_digest := pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(c, 'UTF8')), 'hex');
  r.input_count := pg_catalog.jsonb_array_length(lab_preflight.inputs);
  r.input_bytes := pg_catalog.octet_length(c);
  r.max_execution_seconds := (lim->>'max_execution_seconds')::int;
  r.max_queue_seconds := (lim->>'max_queue_seconds')::int;
  r.retention_seconds := (lim->>'retention_seconds')::int;
  r.max_output_bytes := (lim->>'max_output_bytes')::int;
  r.max_attempts := (lim->>'max_attempts')::int;
  r.concurrency := 1;
  r.execution_started := false;
  r.permission_granted := false;
  r.assessed_at := pg_catalog.now();
  RETURN r;
END $$;
COMMENT ON FUNCTION mlplat.lab_preflight(text, bigint, text, bigint, bigint, bigint, text, jsonb, jsonb) IS
  'Read-only Model Lab check: typed binding, input digest/count/size, limits and blocker codes; writes nothing, grants nothing.';

-- ---------------------------------------------------------------- nodes (administrators)

-- ---------------------------------------------------------------- runtime profiles

-- The closed profile spec (docs/lab.md): true when valid.
CREATE FUNCTION mlplat._lab_profile_ok(s jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RETURN s IS NOT NULL AND pg_catalog.jsonb_typeof(s) = 'object'
    AND ARRAY(SELECT pg_catalog.jsonb_object_keys(s)) <@ '{runtime_kind,image,gpus,accelerator,families,max_execution_seconds,max_output_bytes,env}'::text[]
    AND ARRAY(SELECT pg_catalog.jsonb_object_keys(s)) @> '{runtime_kind,image,gpus,accelerator,families,max_execution_seconds,max_output_bytes}'::text[]
    AND pg_catalog.jsonb_typeof(s->'runtime_kind') = 'string' AND mlplat.is_dns_label(s->>'runtime_kind', 63)
    AND pg_catalog.jsonb_typeof(s->'image') = 'string' AND pg_catalog.length(s->>'image') <= 512
    AND s->>'image' ~ '^[a-z0-9][-a-z0-9._/:]*[a-z0-9]@sha256:[0-9a-f]{64}$'
    AND mlplat._lab_num(s->'gpus', 0, 8, true, 'x', 'x') IS NULL
    AND pg_catalog.jsonb_typeof(s->'accelerator') = 'string' AND mlplat.is_dns_label(s->>'accelerator', 63)
    AND pg_catalog.jsonb_typeof(s->'families') = 'array'
    AND pg_catalog.jsonb_array_length(s->'families') BETWEEN 1 AND 5
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(s->'families') f
                    WHERE pg_catalog.jsonb_typeof(f) <> 'string'
                       OR f #>> '{}' NOT IN ('text_generation', 'embedding', 'tabular_predict',
                                             'image_classification', 'speech_to_text'))
    AND (SELECT pg_catalog.count(DISTINCT f) FROM pg_catalog.jsonb_array_elements_text(s->'families') f)
        = pg_catalog.jsonb_array_length(s->'families')
    AND mlplat._lab_num(s->'max_execution_seconds', 1, 900, true, 'x', 'x') IS NULL
    AND mlplat._lab_num(s->'max_output_bytes', 1, 262144, true, 'x', 'x') IS NULL
    AND (NOT s ? 'env' OR mlplat._env_ok(s->'env'));
END $$;

-- ---------------------------------------------------------------- views, RLS, privileges

CREATE VIEW mlplat.lab_node_status WITH (security_invoker = true) AS
SELECT n.id AS node_id, n.name AS node, n.accelerator, n.gpus, n.enabled,
       n.observed_ready, n.observed_unschedulable, n.observed_gpus, n.observed_accelerator, n.observed_at,
       (SELECT l.lab_run_id FROM mlplat.lab_leases l WHERE l.node_id = n.id) AS leased_by_lab_run,
       n.registered_at
FROM mlplat.lab_nodes n;

CREATE VIEW mlplat.lab_approval_status WITH (security_invoker = true) AS
SELECT p.name AS project, a.id AS approval_id, a.candidate_id, a.artifact_sha256, a.runtime_profile_id, a.node_id,
       a.families, a.limits, a.max_runs, a.runs_used, a.approved_by, a.approved_at, a.expires_at,
       a.revoked_at, a.revoked_by,
       CASE WHEN a.revoked_at IS NOT NULL THEN 'REVOKED' WHEN a.expires_at <= pg_catalog.now() THEN 'EXPIRED'
            WHEN a.runs_used >= a.max_runs THEN 'EXHAUSTED' ELSE 'ACTIVE' END AS status
FROM mlplat.lab_approvals a JOIN mlplat.projects p ON p.id = a.project_id;

CREATE VIEW mlplat.lab_run_status WITH (security_invoker = true) AS
SELECT p.name AS project, r.id AS lab_run_id, r.purpose, r.status, r.reason_code, r.status_reason,
       mlplat.lab_run_is_active(r.status) AS in_flight,
       r.actor, r.candidate_id, r.artifact_sha256, r.runtime_profile_id, r.profile_content_id, r.node_id, r.node_name,
       r.approval_id, r.family, r.input_digest, r.input_count, r.input_bytes, r.limits, r.gpus,
       r.attempt, r.max_attempts, r.job_name, r.queue_deadline_at, r.run_deadline_at,
       r.dispatched_at, r.started_at, r.finished_at, r.cancel_requested_at, r.cancel_requested_by,
       r.cancel_acknowledged_at, r.output_digest, r.output_bytes, r.retain_until, r.purged_at,
       r.created_at, r.updated_at
FROM mlplat.lab_runs r JOIN mlplat.projects p ON p.id = r.project_id;

SELECT mlplat._member_reads('lab_profiles', 'lab_approvals', 'lab_probes', 'lab_runs', 'lab_run_transitions');
ALTER TABLE mlplat.lab_run_payloads ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON mlplat.lab_run_payloads FROM PUBLIC;
GRANT SELECT ON mlplat.lab_nodes, mlplat.lab_leases, mlplat.lab_profiles, mlplat.lab_approvals, mlplat.lab_probes, mlplat.lab_runs,
                mlplat.lab_run_transitions, mlplat.lab_node_status, mlplat.lab_approval_status, mlplat.lab_run_status
  TO PUBLIC;

SELECT mlplat._config_dump('lab_nodes', 'lab_profiles', 'lab_approvals', 'lab_probes', 'lab_runs',
                           'lab_run_payloads', 'lab_leases', 'lab_run_transitions');

-- ---------------------------------------------------------------- LabRuns: start, cancel, probe

-- The Job of a run's current attempt (docs/lab.md "The Job"): deterministic, no input content
-- (the inputs are in the Secret lab-<id>-input), no service-account token.
CREATE FUNCTION mlplat._render_lab_job(r mlplat.lab_runs, p_project text, p_instance text, p_bucket text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  pr mlplat.lab_profiles;
  labels jsonb;
  env jsonb;
  job jsonb;
BEGIN
  SELECT * INTO pr FROM mlplat.lab_profiles x WHERE x.id = r.runtime_profile_id;
  labels := mlplat._managed_by_label() || pg_catalog.jsonb_build_object('app.kubernetes.io/component', 'lab-worker',
    'mlplat.io/project', p_project, 'mlplat.io/lab-run', r.id::text, 'mlplat.io/attempt', r.attempt::text,
    'mlplat.io/purpose', r.purpose, 'mlplat.io/instance', p_instance);
  -- the profile's variables first, sorted; mlplat's own after them (a later entry wins)
  SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('name', e.key, 'value', e.value) ORDER BY e.key), '[]')
  INTO env FROM pg_catalog.jsonb_each_text(coalesce(pr.spec->'env', '{}')) e WHERE e.key NOT LIKE 'MLPLAT\_%';
  env := env || pg_catalog.jsonb_build_array(
    pg_catalog.jsonb_build_object('name', 'MLPLAT_ARTIFACT_SHA256', 'value', r.artifact_sha256),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_ARTIFACT_URI', 'value', r.artifact_uri),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_CONCURRENCY', 'value', '1'),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_INPUT_PATH', 'value', '/mlplat/input/inputs.json'),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_LAB_FAMILY', 'value', coalesce(r.family, '')),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_LAB_MODE', 'value', r.purpose),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_MAX_OUTPUT_BYTES', 'value', (r.limits->>'max_output_bytes')),
    pg_catalog.jsonb_build_object('name', 'MLPLAT_OUTPUT_URI', 'value',
      pg_catalog.format('s3://%s/%s/lab/%s/%s/output.json', p_bucket, p_instance, r.id, r.attempt)));
  -- the content id of the render without it, as an annotation: an object found under the
  -- Job's name is adopted only when it carries it (docs/reconcilers.md, unanswered writes)
  job := pg_catalog.jsonb_build_object(
    'apiVersion', 'batch/v1', 'kind', 'Job',
    'metadata', pg_catalog.jsonb_build_object('name', pg_catalog.format('lab-%s-%s', r.id, r.attempt),
                  'namespace', mlplat._project_namespace(p_project), 'labels', labels),
    'spec', pg_catalog.jsonb_build_object(
      'backoffLimit', 0,
      'activeDeadlineSeconds', (r.limits->>'max_execution_seconds')::int,
      'template', pg_catalog.jsonb_build_object(
        'metadata', pg_catalog.jsonb_build_object('labels', labels),
        'spec', pg_catalog.jsonb_build_object(
          'restartPolicy', 'Never',
          'serviceAccountName', mlplat._runner_service_account(),
          'automountServiceAccountToken', false,
          'nodeSelector', pg_catalog.jsonb_build_object('kubernetes.io/hostname', r.node_name),
          'tolerations', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'key', 'mlplat.io/lab', 'operator', 'Exists', 'effect', 'NoSchedule')),
          'containers', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'name', 'worker', 'image', pr.image, 'env', env,
            'resources', CASE WHEN r.gpus > 0 THEN pg_catalog.jsonb_build_object('limits',
                           pg_catalog.jsonb_build_object('nvidia.com/gpu', r.gpus::text)) ELSE '{}'::jsonb END,
            'volumeMounts', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
              'name', 'input', 'mountPath', '/mlplat/input', 'readOnly', true)))),
          'volumes', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'name', 'input', 'secret', pg_catalog.jsonb_build_object('secretName', pg_catalog.format('lab-%s-input', r.id))))))));
  RETURN pg_catalog.jsonb_set(job, '{metadata,annotations}',
    pg_catalog.jsonb_build_object('mlplat.io/content-id', mlplat.content_id(job)));
END $$;

-- One transition row (ids and codes only): from the run's status as the caller read it (none
-- for the first), by a person (API) or by a leader's epoch and controller (reconciler).
CREATE FUNCTION mlplat._lab_transition(r mlplat.lab_runs, p_to text, p_reason text, p_actor text, p_observation jsonb,
                                       p_epoch bigint DEFAULT NULL, p_controller text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mlplat.lab_run_transitions (lab_run_id, project_id, seq, attempt, from_status, to_status, reason_code,
                                          observation, actor, epoch, controller)
  SELECT r.id, r.project_id, coalesce(pg_catalog.max(t.seq), 0) + 1, r.attempt,
         CASE WHEN pg_catalog.count(t.seq) > 0 THEN r.status END, p_to, p_reason, p_observation, p_actor,
         p_epoch, p_controller
  FROM mlplat.lab_run_transitions t WHERE t.lab_run_id = r.id;
END $$;

-- The common admission of a LabRun or probe under locks: the project row shared, the approval
-- FOR UPDATE (runs_used, max_runs), the guards of node, profile and version (_lab_guard_share,
-- src/lab_guard.c: every writer of those rows waits for them, and they wait for a writer in
-- flight); the full assessment again (a passing preflight is no token), on a snapshot taken
-- after them.  Raises 55000 with the blocker codes.  Returns the profile.  (The GPU quota
-- comes after, in _lab_reserve_gpus.)
CREATE FUNCTION mlplat._lab_admit(p_project_id bigint, p_action text, p_candidate bigint, p_sha256 text,
                                  p_profile bigint, p_node bigint, p_approval bigint, p_family text,
                                  p_limits jsonb, p_input_count int) RETURNS mlplat.lab_profiles
LANGUAGE plpgsql AS $$
DECLARE
  pr mlplat.lab_profiles;
  p mlplat.projects;
  blockers text[];
BEGIN
  -- the project's lock shared: it stays active (no delete) while the run is admitted; a GPU
  -- reservation takes it exclusively at the very end (_lab_reserve_gpus), so starts in one
  -- project serialize only over their quota check and commit, not over their whole work
  p := mlplat._lock_project_row(p_project_id, 'share', p_action);
  IF p_approval IS NOT NULL THEN
    PERFORM FROM mlplat.lab_approvals x WHERE x.id = p_approval AND x.project_id = p_project_id FOR UPDATE;
  END IF;
  -- guards, not row locks: a row lock FOR SHARE on the profile and version every start
  -- shares made a multixact per start.  A statement of its own, so the assessment's snapshot
  -- is taken after it.
  IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    PERFORM mlplat._lab_guard_share(p_node, p_profile, p_candidate);
  ELSE
    -- this transaction's snapshot predates anything it locks, and may predate a write
    -- committed before: the rows FOR SHARE fail it (40001) when they changed since, and
    -- hold off writers as the guards do (no guard here: a writer holds its row lock while it
    -- waits for a guard, and this would wait for that row lock)
    PERFORM FROM mlplat.lab_nodes x WHERE x.id = p_node FOR SHARE;
    PERFORM FROM mlplat.lab_profiles x WHERE x.id = p_profile AND x.project_id = p_project_id FOR SHARE;
    PERFORM FROM mlplat.model_versions x WHERE x.id = p_candidate AND x.project_id = p_project_id FOR SHARE;
  END IF;
  SELECT * INTO pr FROM mlplat.lab_profiles x WHERE x.id = p_profile AND x.project_id = p_project_id;
  blockers := mlplat._lab_assess(p_project_id, p_candidate, p_sha256, p_profile, p_node, p_approval, p_family,
                                 p_limits, p_input_count);
  IF pg_catalog.cardinality(blockers) > 0 THEN
    PERFORM mlplat._lab_not_admitted(blockers);
  END IF;
  RETURN pr;
END $$;

-- The GPU quota of an admitted lab run or probe, after its validation, admission and
-- assessment and right before its rows are written (23514 when over).  One guarantee, two
-- ways: the GPUs of a project's committed reservations plus those of every reservation in
-- flight never exceed its quota.
--  * Room to spare (the fast way): the reservation takes one of the project's eight quota
--    slots (_lab_quota_slot: a transaction lock no login can take; never waits), then sums
--    the committed GPUs on a snapshot taken after it.  Every exact reservation (FOR NO KEY
--    UPDATE: deploy() and start_run growing, runs, campaigns, the exact way below) takes all
--    eight slots, waiting for their holders, before its own sum (_lock_project_row
--    'reserve'): one that holds them all has ended before this slot was free (its commit is
--    seen), and one that does not yet counts this reservation in its own sum.  What the sum
--    cannot see is only other slot holders: at most seven, each of at most eight GPUs (a
--    profile's cap, _lab_profile_ok; a slot holds one reservation).  When the committed GPUs
--    + its own + 7 x 8 fit the quota it is admitted, without waiting for any other lab
--    reservation or its commit: starts in a project with room run side by side.  The quota
--    read cannot change until commit: _lab_admit holds the project's row FOR KEY SHARE, and
--    set_project_quota takes it FOR UPDATE.
--  * Otherwise (the quota too close, no slot free, or a transaction that is not READ
--    COMMITTED, whose snapshot predates its locks) the exact way, as deploy() when its
--    allocation grows: the project's row FOR NO KEY UPDATE and every slot, which waits for
--    the slot holders to end, and the exact sum under them; such reservations serialize over
--    the check, the writes and the commit.  A fast attempt whose sum finds too little room
--    gives its slot back first (a lock, unlike a row lock, can be released; two of them
--    holding one slot each and waiting for all would deadlock), so no savepoint is needed.
-- Either way the outcome is the one of some serial order of the reservations.
CREATE FUNCTION mlplat._lab_reserve_gpus(p_project_id bigint, p_gpus int, p_action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  p mlplat.projects;
  slots constant int := 8;
  most constant int := 8;
  quota int;
  slot int;
BEGIN
  IF coalesce(p_gpus, 0) <= 0 THEN
    RETURN;
  END IF;
  IF p_gpus <= most AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    quota := (SELECT x.gpu_quota FROM mlplat.projects x WHERE x.id = p_project_id);
    IF quota >= p_gpus + (slots - 1) * most THEN
      slot := mlplat._lab_quota_slot(p_project_id, slots);
      IF slot >= 0 THEN
        IF mlplat._gpus_in_use(p_project_id) + p_gpus + (slots - 1) * most <= quota THEN
          RETURN;
        END IF;
        PERFORM mlplat._lab_quota_slot_release(p_project_id, slot);
      END IF;
    END IF;
  END IF;
  p := mlplat._lock_project_row(p_project_id, 'reserve', p_action);
  PERFORM mlplat._check_gpu_quota(p, p_gpus, NULL);
END $$;

-- src/quota_slot.c: one of a project's quota slots for this transaction, or -1 when all
-- are taken; never waits.
CREATE FUNCTION mlplat._lab_quota_slot(project_id bigint, slots int) RETURNS int
LANGUAGE C STRICT VOLATILE AS 'MODULE_PATHNAME', 'mlplat_try_quota_slot';

-- src/quota_slot.c: gives back the slot _lab_quota_slot gave this transaction.
CREATE FUNCTION mlplat._lab_quota_slot_release(project_id bigint, slot int) RETURNS void
LANGUAGE C STRICT VOLATILE AS 'MODULE_PATHNAME', 'mlplat_release_quota_slot';

-- The run's outcome and output (until purged).
CREATE TYPE mlplat.lab_run_outcome AS (
  lab_run_id    bigint,
  status        text,
  reason_code   text,
  output_digest text,
  output_bytes  int,
  output        jsonb,
  retain_until  timestamptz,
  purged        boolean
);
CREATE FUNCTION mlplat.lab_run_result(project text, lab_run_id bigint) RETURNS mlplat.lab_run_outcome
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize_member('view_lab_results', lab_run_result.project);
  run mlplat.lab_runs;
  o mlplat.lab_run_outcome;
BEGIN
  run := mlplat._lab_run_of(pid, lab_run_result.lab_run_id);
  o.lab_run_id := run.id; o.status := run.status; o.reason_code := run.reason_code;
  o.output_digest := run.output_digest; o.output_bytes := run.output_bytes; o.retain_until := run.retain_until;
  o.purged := run.purged_at IS NOT NULL;
  o.output := (SELECT pg_catalog.convert_from(pl.content, 'UTF8')::jsonb FROM mlplat.lab_run_payloads pl
               WHERE pl.lab_run_id = run.id AND pl.direction = 'output');
  RETURN o;
END $$;

CREATE FUNCTION mlplat.render_lab_job(project text, lab_run_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize_member('view', render_lab_job.project);
  run mlplat.lab_runs;
BEGIN
  run := mlplat._lab_run_of(pid, render_lab_job.lab_run_id);
  RETURN mlplat._render_lab_job(run, render_lab_job.project, (SELECT i.instance_id FROM mlplat.installation i),
    coalesce(pg_catalog.current_setting('mlplat.lab_payload_bucket', true), ''));
END $$;

-- ---------------------------------------------------------------- the lab_runs reconciler's database half
--
-- What the lab_runs reconciler (docs/lab.md, not wired to a worker yet) does in the database, in
-- short transactions before and after its requests.  Each is called by the leader with its
-- epoch; none sends anything.

-- A run leaves the queue for good: terminal status, its input content deleted, the probe
-- (if any) recorded, a transition.  p_run is the row as locked by the caller.
CREATE FUNCTION mlplat._lab_finish(p_run mlplat.lab_runs, p_status text, p_reason text, p_epoch bigint,
                                   p_controller text, p_observation jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE mlplat.lab_runs x
  SET status = p_status, reason_code = p_reason, finished_at = pg_catalog.now(),
      cancel_acknowledged_at = CASE WHEN p_status = 'CANCELLED' THEN pg_catalog.now() ELSE x.cancel_acknowledged_at END,
      retain_until = pg_catalog.now() + pg_catalog.make_interval(secs => (x.limits->>'retention_seconds')::int),
      status_reason = NULL, row_version = x.row_version + 1, observed_generation = x.generation,
      epoch = p_epoch, updated_at = pg_catalog.now()
  WHERE x.id = p_run.id;
  DELETE FROM mlplat.lab_run_payloads pl WHERE pl.lab_run_id = p_run.id AND pl.direction = 'input';
  UPDATE mlplat.lab_probes pb SET status = CASE WHEN p_status = 'SUCCEEDED' THEN 'PASSED' ELSE 'FAILED' END,
         completed_at = pg_catalog.now()
  WHERE pb.lab_run_id = p_run.id AND pb.status = 'RUNNING';
  PERFORM mlplat._lab_transition(p_run, p_status, p_reason, NULL, p_observation, p_epoch, p_controller);
END $$;

-- A Node the reconciler LISTed (label mlplat.io/lab=true), as its pass carries it (the typed
-- seam: C builds an array of these by attribute name).
CREATE TYPE mlplat.lab_node_observed AS (
  name text, ready boolean, unschedulable boolean, gpus int, accelerator text
);

-- The Nodes the reconciler LISTed.  Every registered node is stamped observed now; one missing
-- from the LIST is observed not ready with no GPUs.
CREATE FUNCTION mlplat._lab_observe_nodes(p_nodes mlplat.lab_node_observed[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  UPDATE mlplat.lab_nodes x
  SET observed_ready = coalesce(o.ready, false),
      observed_unschedulable = coalesce(o.unschedulable, false),
      observed_gpus = coalesce(o.gpus, 0),
      observed_accelerator = o.accelerator,
      observed_at = pg_catalog.now()
  FROM mlplat.lab_nodes nd
  LEFT JOIN LATERAL (SELECT e.* FROM pg_catalog.unnest(p_nodes) e WHERE e.name = nd.name LIMIT 1) o ON true
  WHERE x.id = nd.id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

-- The Secret of a run's inputs (immutable; its content id as an annotation, so an adoption on
-- 409 can tell it is ours and unchanged).
CREATE FUNCTION mlplat._render_lab_secret(r mlplat.lab_runs, p_project text, p_instance text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  c bytea;
BEGIN
  SELECT pl.content INTO c FROM mlplat.lab_run_payloads pl WHERE pl.lab_run_id = r.id AND pl.direction = 'input';
  c := coalesce(c, pg_catalog.convert_to('[]', 'UTF8'));
  RETURN pg_catalog.jsonb_build_object(
    'apiVersion', 'v1', 'kind', 'Secret',
    'metadata', pg_catalog.jsonb_build_object(
      'name', pg_catalog.format('lab-%s-input', r.id), 'namespace', mlplat._project_namespace(p_project),
      'labels', mlplat._managed_by_label() || pg_catalog.jsonb_build_object(
        'app.kubernetes.io/component', 'lab-worker', 'mlplat.io/project', p_project,
        'mlplat.io/lab-run', r.id::text, 'mlplat.io/purpose', r.purpose, 'mlplat.io/instance', p_instance),
      'annotations', pg_catalog.jsonb_build_object('mlplat.io/content-id',
        pg_catalog.encode(pg_catalog.sha256(c), 'hex'))),
    'immutable', true, 'type', 'Opaque',
    'data', pg_catalog.jsonb_build_object('inputs.json', pg_catalog.translate(pg_catalog.encode(c, 'base64'), E'\n', '')));
END $$;

-- One claim (short transaction, before any request):
--  0. a finished run past retain_until: its payloads (input, output) deleted, purged_at set;
--  1. a CANCEL_REQUESTED run that never took a lease (no create was ever sent) -> CANCELLED;
--  2. a QUEUED run past its queue deadline -> FAILED QUEUE_DEADLINE_EXCEEDED (nothing was created);
--  3. per node without a lease, its oldest QUEUED run (FIFO by id) is assessed again:
--     approval blockers -> FAILED ADMISSION_WITHDRAWN; other blockers -> it waits (status_reason);
--     none -> the node's lease and DISPATCHED, committed before the Secret and Job are sent.
-- Returns (the typed seam, mlplat.lab_run_claim) every run whose Job the reconciler must look
-- at: dispatched or running (with the Secret and Job to create while DISPATCHED), cancel
-- requested after a dispatch, a failed attempt whose Job is not yet seen gone, and a finished
-- run still holding its lease.  APPROVAL_EXHAUSTED is not a blocker here: the run itself was
-- counted in runs_used when it was admitted.
CREATE TYPE mlplat.lab_run_claim AS (
  id bigint, project text, namespace text, purpose text, status text, attempt int, job_name text,
  secret_name text, row_version bigint, job text, secret text, output_uri text, max_output_bytes int,
  past_deadline boolean, finished boolean, dispatched_now boolean, traceparent text,
  job_created boolean, blocked boolean
);
CREATE TYPE mlplat.lab_run_writeback AS (
  id bigint, row_version bigint, controller text, event text, observation jsonb, output text
);
CREATE FUNCTION mlplat._lab_runs_claim(p_epoch bigint, p_controller text, p_bucket text)
RETURNS SETOF mlplat.lab_run_claim
LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.lab_runs;
  prev mlplat.lab_runs;
  b text[];
  inst text := (SELECT i.instance_id FROM mlplat.installation i);
  proj text;
  nid bigint;
  now_dispatched bigint[] := '{}';
BEGIN
  -- retention: a finished run's content goes at retain_until; the run and its history stay
  WITH due AS (
    UPDATE mlplat.lab_runs x SET purged_at = pg_catalog.now(), row_version = x.row_version + 1, updated_at = pg_catalog.now()
    WHERE x.retain_until <= pg_catalog.now() AND x.purged_at IS NULL AND NOT mlplat.lab_run_is_active(x.status)
    RETURNING x.id)
  DELETE FROM mlplat.lab_run_payloads pl USING due WHERE pl.lab_run_id = due.id;
  FOR r IN SELECT * FROM mlplat.lab_runs x
           WHERE x.status = 'CANCEL_REQUESTED' AND x.dispatched_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.lab_run_id = x.id)
           ORDER BY x.id FOR UPDATE SKIP LOCKED LOOP
    PERFORM mlplat._lab_finish(r, 'CANCELLED', NULL, p_epoch, p_controller, '{"created": false}');
  END LOOP;
  FOR r IN SELECT * FROM mlplat.lab_runs x
           WHERE x.status = 'QUEUED' AND x.queue_deadline_at <= pg_catalog.now()
           ORDER BY x.id FOR UPDATE SKIP LOCKED LOOP
    PERFORM mlplat._lab_finish(r, 'FAILED', 'QUEUE_DEADLINE_EXCEEDED', p_epoch, p_controller, '{"created": false}');
  END LOOP;
  -- retries: the failed attempt's Job was seen gone (job_name cleared), the backoff is over;
  -- past the run deadline the run fails instead.  The node lease is still the run's.
  FOR r IN SELECT * FROM mlplat.lab_runs x
           WHERE x.status = 'RETRY_WAIT' AND x.job_name IS NULL AND x.next_attempt_at <= pg_catalog.now()
           ORDER BY x.id FOR UPDATE SKIP LOCKED LOOP
    IF pg_catalog.now() + pg_catalog.make_interval(secs => (r.limits->>'max_execution_seconds')::int) > r.run_deadline_at
       OR coalesce(p_bucket, '') = '' THEN
      PERFORM mlplat._lab_finish(r, 'FAILED', 'RUN_DEADLINE_EXCEEDED', p_epoch, p_controller, '{"created": false}');
      DELETE FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id;
      CONTINUE;
    END IF;
    prev := r;
    UPDATE mlplat.lab_runs x
    SET status = 'DISPATCHED', attempt = x.attempt + 1, dispatched_at = pg_catalog.now(),
        job_name = pg_catalog.format('lab-%s-%s', x.id, x.attempt + 1), job_created_at = NULL, status_reason = NULL,
        row_version = x.row_version + 1, epoch = p_epoch, updated_at = pg_catalog.now()
    WHERE x.id = r.id RETURNING * INTO r;
    UPDATE mlplat.lab_leases l SET attempt = r.attempt, epoch = p_epoch, renewed_at = pg_catalog.now()
    WHERE l.lab_run_id = r.id;
    prev.attempt := r.attempt;   -- from RETRY_WAIT, recorded under the new attempt
    now_dispatched := now_dispatched || r.id;
    PERFORM mlplat._lab_transition(prev, 'DISPATCHED', NULL, NULL,
      pg_catalog.jsonb_build_object('job', r.job_name), p_epoch, p_controller);
  END LOOP;
  IF coalesce(p_bucket, '') = '' THEN
    UPDATE mlplat.lab_runs x SET status_reason = 'waiting: no lab payload store configured'
    WHERE x.status = 'QUEUED' AND x.status_reason IS DISTINCT FROM 'waiting: no lab payload store configured';
  END IF;
  FOR nid IN SELECT DISTINCT x.node_id FROM mlplat.lab_runs x
             WHERE coalesce(p_bucket, '') <> '' AND x.status = 'QUEUED'
               AND NOT EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.node_id = x.node_id)
             ORDER BY 1 LOOP
    SELECT * INTO r FROM mlplat.lab_runs x WHERE x.node_id = nid AND x.status = 'QUEUED'
    ORDER BY x.id LIMIT 1 FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN r.id IS NULL;
    b := ARRAY(SELECT c FROM pg_catalog.unnest(mlplat._lab_assess(r.project_id, r.candidate_id, r.artifact_sha256,
                   r.runtime_profile_id, r.node_id, r.approval_id, r.family, r.limits, r.input_count)) c
               WHERE c <> 'APPROVAL_EXHAUSTED');
    IF b && ARRAY['APPROVAL_NOT_FOUND', 'APPROVAL_SCOPE_MISMATCH', 'APPROVAL_EXPIRED', 'APPROVAL_REVOKED',
                  'FAMILY_NOT_APPROVED', 'LIMIT_EXCEEDS_APPROVAL'] THEN
      PERFORM mlplat._lab_finish(r, 'FAILED', 'ADMISSION_WITHDRAWN', p_epoch, p_controller,
        pg_catalog.jsonb_build_object('blockers', pg_catalog.to_jsonb(b)));
      CONTINUE;
    END IF;
    IF pg_catalog.cardinality(b) > 0 THEN
      UPDATE mlplat.lab_runs x SET status_reason = 'waiting: ' || pg_catalog.array_to_string(b, ', ')
      WHERE x.id = r.id AND x.status_reason IS DISTINCT FROM 'waiting: ' || pg_catalog.array_to_string(b, ', ');
      CONTINUE;
    END IF;
    INSERT INTO mlplat.lab_leases (node_id, lab_run_id, attempt, epoch) VALUES (r.node_id, r.id, r.attempt, p_epoch)
    ON CONFLICT DO NOTHING;
    CONTINUE WHEN NOT FOUND;
    UPDATE mlplat.lab_runs x
    SET status = 'DISPATCHED', dispatched_at = pg_catalog.now(), job_name = pg_catalog.format('lab-%s-%s', x.id, x.attempt),
        status_reason = NULL, row_version = x.row_version + 1, epoch = p_epoch, updated_at = pg_catalog.now()
    WHERE x.id = r.id;
    PERFORM mlplat._lab_transition(r, 'DISPATCHED', NULL, NULL,
      pg_catalog.jsonb_build_object('job', pg_catalog.format('lab-%s-%s', r.id, r.attempt)), p_epoch, p_controller);
    now_dispatched := now_dispatched || r.id;
  END LOOP;
  -- past the run deadline a dispatched or running run's Job is deleted (foreground) by the
  -- reconciler; until it is seen gone the run keeps its status and says why it is ending
  UPDATE mlplat.lab_runs x
  SET status_reason = 'run deadline exceeded: its Job is being deleted; FAILED RUN_DEADLINE_EXCEEDED once it is gone'
  WHERE mlplat.lab_run_is_running(x.status) AND x.run_deadline_at <= pg_catalog.now()
    AND x.status_reason IS DISTINCT FROM
        'run deadline exceeded: its Job is being deleted; FAILED RUN_DEADLINE_EXCEEDED once it is gone';
  -- what the reconciler must look at (committed before any request is sent)
  FOR r IN SELECT * FROM mlplat.lab_runs x
           WHERE mlplat.lab_run_is_running(x.status)
              OR (x.status = 'CANCEL_REQUESTED' AND x.dispatched_at IS NOT NULL)
              OR (x.status = 'RETRY_WAIT' AND x.job_name IS NOT NULL)
              OR EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.lab_run_id = x.id)
           ORDER BY x.id LOOP
    SELECT p.name INTO proj FROM mlplat.projects p WHERE p.id = r.project_id;
    RETURN NEXT (r.id, proj, mlplat._project_namespace(proj), r.purpose, r.status, r.attempt, r.job_name,
      pg_catalog.format('lab-%s-input', r.id), r.row_version,
      CASE WHEN r.status = 'DISPATCHED' THEN mlplat._render_lab_job(r, proj, inst, p_bucket)::text END,
      CASE WHEN r.status = 'DISPATCHED' THEN mlplat._render_lab_secret(r, proj, inst)::text END,
      pg_catalog.format('s3://%s/%s/lab/%s/%s/output.json', p_bucket, inst, r.id, r.attempt),
      (r.limits->>'max_output_bytes')::int, r.run_deadline_at <= pg_catalog.now(),
      NOT mlplat.lab_run_is_active(r.status), r.id = ANY (now_dispatched), r.traceparent,
      r.job_created_at IS NOT NULL, coalesce(r.status_reason LIKE 'blocked: %', false))::mlplat.lab_run_claim;
  END LOOP;
END $$;

-- Write-back when a LIST showed the run's Job absent (after a foreground delete, or gone on its
-- own): a cancelled run is acknowledged CANCELLED; a finished run's lease is released.  Only
-- then are the node and the GPUs free.  Compare-and-swap on row_version; false when it lost.
CREATE FUNCTION mlplat._lab_runs_job_gone(p_lab_run_id bigint, p_row_version bigint, p_epoch bigint,
                                          p_controller text, p_observation jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.lab_runs;
BEGIN
  SELECT * INTO r FROM mlplat.lab_runs x WHERE x.id = p_lab_run_id AND x.row_version = p_row_version FOR UPDATE;
  -- a Job that vanished under a run still in flight is JOB_DISAPPEARED: the full write-back's
  -- decision (retry or fail), not this one's
  IF r.id IS NULL OR r.status NOT IN ('CANCEL_REQUESTED', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'RETRY_WAIT') THEN
    RETURN false;
  END IF;
  IF r.status = 'RETRY_WAIT' THEN
    -- the failed attempt's Job is gone: the next attempt may be dispatched; the lease stays
    UPDATE mlplat.lab_runs x SET job_name = NULL, row_version = x.row_version + 1, epoch = p_epoch,
           updated_at = pg_catalog.now()
    WHERE x.id = r.id;
    RETURN true;
  END IF;
  IF r.status = 'CANCEL_REQUESTED' THEN
    PERFORM mlplat._lab_finish(r, 'CANCELLED', NULL, p_epoch, p_controller, p_observation);
    -- the run's own Job never existed: a look-alike under its name was left untouched, and
    -- the reason says which (issue 18, finding 5)
    IF p_observation ? 'conflict' THEN
      UPDATE mlplat.lab_runs x SET status_reason = p_observation->>'conflict' WHERE x.id = r.id;
    END IF;
  END IF;
  DELETE FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id;
  RETURN true;
END $$;

-- Write-back of what the reconciler observed of the Job of the run's current attempt (CAS on
-- row_version; false when it lost).  p_event:
--   'STARTED'   the Job is active                     DISPATCHED -> RUNNING
--   'COMPLETED' the Job is Complete; p_output is the output object read with a bounded GET
--               (NULL: missing -> FAILED OUTPUT_MISSING; above max_output_bytes ->
--               FAILED OUTPUT_TOO_LARGE), else SUCCEEDED with its digest
--   'FAILED'    BackoffLimitExceeded / PodFailurePolicy: RETRY_WAIT when an attempt is left and
--               it fits before the run deadline (backoff min(2^(attempt-1), 30) s), else
--               FAILED WORKER_FAILED
--   'DEADLINE'  DeadlineExceeded: FAILED EXECUTION_DEADLINE_EXCEEDED, never retried
--   'CREATED'   the answer to the attempt's Job create was heard (2xx, or a 409 adopted), or
--               the Job was seen: job_created_at set (a blocked reason cleared); status unchanged
--   'BLOCKED'   a request the run needs was refused or could not be made (p_observation
--               {"blocked": "<why>"}, e.g. Secrets forbidden in the namespace): status_reason
--               'blocked: <why>'; status unchanged, nothing half-made
--   'REFUSED'   the create of the run's Secret or Job was refused for good (a 4xx that the
--               same deterministic render can never get past: 400, 422, ...; not 401/403, an
--               access an operator can grant, which is BLOCKED): a DISPATCHED run is FAILED
--               WORKER_REFUSED, p_observation->>'refused' in status_reason; its Secret, if
--               made, goes and its lease is released once its Job is seen absent, as for any
--               finished run
--   'UNBLOCKED' the pass was no longer blocked: a 'blocked: ...' status_reason cleared
--   'DISAPPEARED' the Job of a RUNNING run, or of a DISPATCHED run whose create was answered
--               (job_created_at), is absent and nobody here deleted it:
--               JOB_DISAPPEARED, retriable as FAILED is (RETRY_WAIT with nothing left to
--               delete), else FAILED JOB_DISAPPEARED
--   'RUN_DEADLINE' past run_deadline_at the Job was foreground-deleted and is now absent:
--               FAILED RUN_DEADLINE_EXCEEDED
-- A finished run keeps its lease until the next pass has deleted its Secret and seen its Job
-- gone (_lab_runs_job_gone), whichever way it finished.
-- A CANCEL_REQUESTED run whose Job had finished ends as the Job did (the output wins over a
-- late cancel).  Otherwise the lease stays until the Job is seen gone (_lab_runs_job_gone).
--   'CONFLICT'  an object under the run's Job or Secret name is not this run's (labels or
--               content id): nothing was adopted or touched; the run keeps its status and
--               p_observation->>'conflict' says why in status_reason
CREATE FUNCTION mlplat._lab_runs_observed(p_lab_run_id bigint, p_row_version bigint, p_epoch bigint,
                                          p_controller text, p_event text, p_observation jsonb, p_output bytea DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.lab_runs;
  backoff int;
  reason text;
  created timestamptz;
BEGIN
  SELECT * INTO r FROM mlplat.lab_runs x WHERE x.id = p_lab_run_id AND x.row_version = p_row_version FOR UPDATE;
  IF r.id IS NULL OR NOT (mlplat.lab_run_is_running(r.status) OR r.status = 'CANCEL_REQUESTED') THEN
    RETURN false;
  END IF;
  IF p_event IN ('CREATED', 'BLOCKED', 'UNBLOCKED') THEN
    -- no status change: whether the attempt's Job was made, and what the run waits for
    reason := CASE WHEN p_event = 'BLOCKED' THEN 'blocked: ' || (p_observation->>'blocked')
                   WHEN r.status_reason LIKE 'blocked: %' THEN NULL ELSE r.status_reason END;
    created := CASE WHEN p_event = 'CREATED' AND r.status = 'DISPATCHED'
                    THEN coalesce(r.job_created_at, pg_catalog.now()) ELSE r.job_created_at END;
    IF reason IS DISTINCT FROM r.status_reason OR created IS DISTINCT FROM r.job_created_at THEN
      UPDATE mlplat.lab_runs x SET job_created_at = created, status_reason = reason, row_version = x.row_version + 1,
             epoch = p_epoch, updated_at = pg_catalog.now()
      WHERE x.id = r.id;
    END IF;
  ELSIF p_event = 'STARTED' THEN
    IF r.status = 'DISPATCHED' THEN
      UPDATE mlplat.lab_runs x SET status = 'RUNNING', started_at = pg_catalog.now(), status_reason = NULL,
             row_version = x.row_version + 1, epoch = p_epoch, updated_at = pg_catalog.now()
      WHERE x.id = r.id;
      PERFORM mlplat._lab_transition(r, 'RUNNING', NULL, NULL, p_observation, p_epoch, p_controller);
    END IF;
  ELSIF p_event = 'COMPLETED' THEN
    IF p_output IS NULL THEN
      PERFORM mlplat._lab_finish(r, 'FAILED', 'OUTPUT_MISSING', p_epoch, p_controller, p_observation);
    ELSIF pg_catalog.length(p_output) > (r.limits->>'max_output_bytes')::int THEN
      PERFORM mlplat._lab_finish(r, 'FAILED', 'OUTPUT_TOO_LARGE', p_epoch, p_controller, p_observation);
    ELSE
      INSERT INTO mlplat.lab_run_payloads (lab_run_id, direction, content, sha256, bytes)
      VALUES (r.id, 'output', p_output, pg_catalog.encode(pg_catalog.sha256(p_output), 'hex'), pg_catalog.length(p_output));
      UPDATE mlplat.lab_runs x SET output_digest = pg_catalog.encode(pg_catalog.sha256(p_output), 'hex'),
             output_bytes = pg_catalog.length(p_output)
      WHERE x.id = r.id;
      PERFORM mlplat._lab_finish(r, 'SUCCEEDED', NULL, p_epoch, p_controller, p_observation);
    END IF;
  ELSIF p_event = 'OUTPUT_TOO_LARGE' THEN
    -- the bounded GET stopped at max_output_bytes + 1: the object is larger than allowed
    PERFORM mlplat._lab_finish(r, 'FAILED', 'OUTPUT_TOO_LARGE', p_epoch, p_controller, p_observation);
  ELSIF p_event = 'DEADLINE' THEN
    PERFORM mlplat._lab_finish(r, 'FAILED', 'EXECUTION_DEADLINE_EXCEEDED', p_epoch, p_controller, p_observation);
  ELSIF p_event = 'RUN_DEADLINE' THEN
    IF r.status = 'CANCEL_REQUESTED' THEN
      RETURN false;   -- a cancel's Job seen gone is acknowledged by _lab_runs_job_gone
    END IF;
    PERFORM mlplat._lab_finish(r, 'FAILED', 'RUN_DEADLINE_EXCEEDED', p_epoch, p_controller, p_observation);
  ELSIF p_event IN ('DISAPPEARED', 'FAILED') THEN
    IF p_event = 'DISAPPEARED' AND r.status = 'CANCEL_REQUESTED' THEN
      RETURN false;   -- a cancel's Job seen gone is acknowledged by _lab_runs_job_gone
    END IF;
    reason := CASE p_event WHEN 'DISAPPEARED' THEN 'JOB_DISAPPEARED' ELSE 'WORKER_FAILED' END;
    -- another attempt while the budget and the run's deadline leave room for it; a cancel's
    -- failed Job ends the run
    backoff := least(pg_catalog.power(2, r.attempt - 1)::int, 30);
    IF r.status <> 'CANCEL_REQUESTED' AND r.attempt < r.max_attempts
       AND pg_catalog.now() + pg_catalog.make_interval(secs => backoff + (r.limits->>'max_execution_seconds')::int)
           <= r.run_deadline_at THEN
      -- a Job that disappeared leaves nothing to delete before the next attempt: its name goes
      UPDATE mlplat.lab_runs x SET status = 'RETRY_WAIT',
             job_name = CASE WHEN p_event = 'DISAPPEARED' THEN NULL ELSE x.job_name END,
             next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => backoff),
             row_version = x.row_version + 1, epoch = p_epoch, updated_at = pg_catalog.now()
      WHERE x.id = r.id;
      PERFORM mlplat._lab_transition(r, 'RETRY_WAIT', reason, NULL, p_observation, p_epoch, p_controller);
    ELSE
      PERFORM mlplat._lab_finish(r, 'FAILED', reason, p_epoch, p_controller, p_observation);
    END IF;
  ELSIF p_event = 'REFUSED' THEN
    IF r.status <> 'DISPATCHED' THEN
      RETURN false;   -- only a dispatched run creates; a cancel's Job is looked for and deleted
    END IF;
    PERFORM mlplat._lab_finish(r, 'FAILED', 'WORKER_REFUSED', p_epoch, p_controller, p_observation);
    UPDATE mlplat.lab_runs x SET status_reason = p_observation->>'refused' WHERE x.id = r.id;
  ELSIF p_event = 'CONFLICT' THEN
    IF r.status = 'DISPATCHED' THEN
      UPDATE mlplat.lab_runs x SET status_reason = p_observation->>'conflict'
      WHERE x.id = r.id AND x.status_reason IS DISTINCT FROM p_observation->>'conflict';
    END IF;
  ELSE
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('unknown lab Job event "%s"', p_event),
      HINT = 'CREATED, BLOCKED, UNBLOCKED, STARTED, COMPLETED, OUTPUT_TOO_LARGE, FAILED, DEADLINE, DISAPPEARED, RUN_DEADLINE, REFUSED or CONFLICT.';
  END IF;
  RETURN true;
END $$;

-- The set-based write-back of a pass (the typed seam): one row per run whose Job was seen to
-- move (event as _lab_runs_observed) or seen absent (event GONE: _lab_runs_job_gone).  Fenced
-- on the leader epoch (_epoch_current, as every kind's write-back); returns the ids whose
-- compare-and-swap held.
CREATE FUNCTION mlplat._lab_runs_writeback_set(p_epoch bigint, p_rows mlplat.lab_run_writeback[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
  w mlplat.lab_run_writeback;
  ok boolean;
BEGIN
  IF NOT mlplat._epoch_current('lab_runs', p_epoch) THEN
    RETURN;
  END IF;
  FOREACH w IN ARRAY coalesce(p_rows, '{}') LOOP
    IF w.event = 'GONE' THEN
      ok := mlplat._lab_runs_job_gone(w.id, w.row_version, p_epoch, w.controller, w.observation);
    ELSE
      ok := mlplat._lab_runs_observed(w.id, w.row_version, p_epoch, w.controller, w.event, w.observation,
                                      pg_catalog.convert_to(w.output, 'UTF8'));
    END IF;
    IF ok THEN
      RETURN NEXT w.id;
    END IF;
  END LOOP;
END $$;

-- GPUs: lab runs count against the quota (45_api_views; _gpus_in_use is redefined in 12_rules).
CREATE OR REPLACE VIEW mlplat.project_status WITH (security_invoker = true) AS
SELECT p.name AS project, p.status, p.status_reason,
       (p.status IN ('PROVISIONING', 'DELETING') OR p.observed_generation < p.generation) AS in_flight,
       p.gpu_quota,
       coalesce((SELECT pg_catalog.sum(d.desired_gpus) FROM mlplat.deployments d
                 WHERE d.project_id = p.id AND d.status <> 'DELETED'), 0)
       + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro WHERE ro.project_id = p.id
                   AND mlplat.rollout_is_active(ro.status)), 0)
       + coalesce((SELECT pg_catalog.sum(u.gpus) FROM mlplat.runs u WHERE u.project_id = p.id
                   AND mlplat.run_is_active(u.status)), 0)
       + coalesce((SELECT pg_catalog.sum(k.gpus) FROM mlplat.campaign_candidates k WHERE k.project_id = p.id
                   AND mlplat.candidate_is_building(k.status)), 0)
       + coalesce((SELECT pg_catalog.sum(l.gpus) FROM mlplat.lab_runs l WHERE l.project_id = p.id
                   AND mlplat.lab_run_is_active(l.status)), 0)
       + coalesce((SELECT pg_catalog.sum(l.gpus) FROM mlplat.lab_leases ls JOIN mlplat.lab_runs l ON l.id = ls.lab_run_id
                   WHERE l.project_id = p.id AND NOT mlplat.lab_run_is_active(l.status)), 0) AS gpus_in_use,
       p.cpu_quota, p.memory_quota, p.generation, p.observed_generation,
       p.attempts, p.last_error, p.next_attempt_at, p.traceparent, p.created_at, p.updated_at
FROM mlplat.projects p;

-- Alerts on lab runs and nodes (90_alerts; no other part of this upgrade redefines the view).
CREATE OR REPLACE VIEW mlplat.alerts AS
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
  FROM pg_catalog.unnest(ARRAY['projects', 'deployments', 'runs', 'rollouts', 'model_aliases', 'lab_runs', 'campaigns', 'span_export']) AS k(kind)
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
                                       10 * pg_catalog.current_setting('mlplat.otlp_export_interval')::interval)
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'deployments', p.name, 'deployment', d.id,
       pg_catalog.format('InferenceService %s/%s terminating for %s, held by finalizer(s) %s', mlplat._project_namespace(p.name), d.name,
                         pg_catalog.date_trunc('second', pg_catalog.now() - (d.observed->'terminating'->>'since')::timestamptz),
                         coalesce((SELECT pg_catalog.string_agg(f, ', ')
                                     FROM pg_catalog.jsonb_array_elements_text(d.observed->'terminating'->'finalizers') f), '-')),
       (d.observed->'terminating'->>'since')::timestamptz
  FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
 WHERE d.status <> 'DELETED' AND pg_catalog.jsonb_typeof(d.observed->'terminating') = 'object'
   AND (d.observed->'terminating'->>'since')::timestamptz < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'projects', p.name, 'project', p.id,
       pg_catalog.format('Namespace %s terminating for %s, held by finalizer(s) %s', mlplat._project_namespace(p.name),
                         pg_catalog.date_trunc('second', pg_catalog.now() - (p.observed->'terminating'->>'since')::timestamptz),
                         coalesce((SELECT pg_catalog.string_agg(f, ', ')
                                     FROM pg_catalog.jsonb_array_elements_text(p.observed->'terminating'->'finalizers') f), '-')),
       (p.observed->'terminating'->>'since')::timestamptz
  FROM mlplat.projects p
 WHERE p.status = 'DELETING' AND pg_catalog.jsonb_typeof(p.observed->'terminating') = 'object'
   AND (p.observed->'terminating'->>'since')::timestamptz < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'campaigns', p.name, 'campaign_candidate', k.id,
       -- the age of the cancel is what the threshold measures; the age of the deletion is the
       -- first answered DELETE of the Job after it (the ledger), if the worker sent one yet
       CASE WHEN d.at IS NULL THEN
         pg_catalog.format('builder Job %s/%s not yet deleted; cancel requested %s ago (candidate %s CANCEL_REQUESTED: its GPU reservation is held)',
                           mlplat._project_namespace(p.name), coalesce(k.job_name, '-'), pg_catalog.date_trunc('second', pg_catalog.now() - t.at), k.name)
       ELSE
         pg_catalog.format('builder Job %s/%s deleted %s ago and not yet gone; cancel requested %s ago (candidate %s CANCEL_REQUESTED: its GPU reservation is held)',
                           mlplat._project_namespace(p.name), coalesce(k.job_name, '-'), pg_catalog.date_trunc('second', pg_catalog.now() - d.at),
                           pg_catalog.date_trunc('second', pg_catalog.now() - t.at), k.name)
       END,
       t.at
  FROM mlplat.campaign_candidates k JOIN mlplat.projects p ON p.id = k.project_id
  JOIN LATERAL (SELECT pg_catalog.max(x.at) AS at FROM mlplat.candidate_transitions x
                 WHERE x.candidate_id = k.id AND x.to_status = 'CANCEL_REQUESTED') t ON true
  LEFT JOIN LATERAL (SELECT pg_catalog.min(l.at) AS at FROM mlplat.reconcile_ledger l
                      WHERE l.kind = 'campaigns' AND l.entity_id = k.id AND l.action = 'DELETE' AND l.outcome = 'OK'
                        AND l.at >= t.at) d ON true
 WHERE k.status = 'CANCEL_REQUESTED'
   AND t.at < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'lab_cancel_stuck', 'warning', 'lab_runs', p.name, 'lab_run', r.id,
       pg_catalog.format('cancel requested %s ago and its Job not yet seen gone: node lease and %s GPUs held',
                         pg_catalog.date_trunc('second', pg_catalog.now() - r.cancel_requested_at), r.gpus),
       r.cancel_requested_at
  FROM mlplat.lab_runs r JOIN mlplat.projects p ON p.id = r.project_id
 WHERE r.status = 'CANCEL_REQUESTED'
   AND r.cancel_requested_at < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_cancel_alert_after', true), ''), '5min')::interval
UNION ALL
SELECT 'lab_lease_unreclaimed', 'warning', 'lab_runs', p.name, 'lab_run', r.id,
       pg_catalog.format('%s run still holds the lease of node %s', r.status, r.node_name), r.finished_at
  FROM mlplat.lab_leases l JOIN mlplat.lab_runs r ON r.id = l.lab_run_id JOIN mlplat.projects p ON p.id = r.project_id
 WHERE NOT mlplat.lab_run_is_active(r.status) AND r.finished_at < pg_catalog.now() - interval '5 minutes'
UNION ALL
SELECT 'lab_node_unobserved', 'warning', 'lab_runs', NULL, 'lab_node', n.id,
       CASE WHEN n.observed_at IS NULL THEN pg_catalog.format('lab node %s has never been observed', n.name)
            ELSE pg_catalog.format('lab node %s last observed %s ago', n.name,
                                   pg_catalog.date_trunc('second', pg_catalog.now() - n.observed_at)) END,
       n.observed_at
  FROM mlplat.lab_nodes n
 WHERE n.enabled AND (n.observed_at IS NULL OR pg_catalog.now() - n.observed_at
       > coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_node_max_age', true), ''), '60s')::interval);
COMMENT ON VIEW mlplat.alerts IS
  'Conditions an operator should look at: reconcile age, repeated failures, missing or stale leaders, write conflicts, canary rollouts, stalled span export, lab runs and nodes.';
REVOKE ALL ON mlplat.alerts FROM PUBLIC;

DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = 'mlplat'::regnamespace
             AND (p.proname LIKE '\_lab\_%' OR p.proname IN ('_authorize_member', '_render_lab_job', '_render_lab_secret')) LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$;

-- The lab_runs state machine (41_state_machines); _status_transition_check is 13_state_machines'.
-- Lab runs and probes (docs/lab.md): start_lab_run/start_lab_probe create QUEUED; the
-- reconciler's claim dispatches (lease + re-check) or fails a run that cannot wait any more;
-- its write-backs move a dispatched run as its Job is seen active, complete (a one-tick Job
-- may complete before a pass sees it active), fail or vanish; a failed attempt with budget
-- left waits in RETRY_WAIT for the next dispatch; cancel_lab_run asks for a cancel until the
-- run has finished, and only the reconciler ends it: CANCELLED once the Job is seen gone,
-- or SUCCEEDED/FAILED when the Job had already finished.
SELECT mlplat._transitions_function('lab_run', $$
  [*] --> QUEUED
  QUEUED --> DISPATCHED
  QUEUED --> FAILED
  QUEUED --> CANCEL_REQUESTED
  DISPATCHED --> RUNNING
  DISPATCHED --> SUCCEEDED
  DISPATCHED --> RETRY_WAIT
  DISPATCHED --> FAILED
  DISPATCHED --> CANCEL_REQUESTED
  RUNNING --> SUCCEEDED
  RUNNING --> RETRY_WAIT
  RUNNING --> FAILED
  RUNNING --> CANCEL_REQUESTED
  RETRY_WAIT --> DISPATCHED
  RETRY_WAIT --> FAILED
  RETRY_WAIT --> CANCEL_REQUESTED
  CANCEL_REQUESTED --> CANCELLED
  CANCEL_REQUESTED --> SUCCEEDED
  CANCEL_REQUESTED --> FAILED
  SUCCEEDED --> [*]
  FAILED --> [*]
  CANCELLED --> [*]
$$);

SELECT mlplat._state_machine('lab_runs', '_lab_run_transitions');
REVOKE ALL ON FUNCTION mlplat._lab_run_transitions() FROM PUBLIC;
