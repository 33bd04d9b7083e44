-- 10_api_core: identity, authorization as data, idempotency, audit, trace context.
--
-- Conventions for every API function in later parts:
--   SECURITY DEFINER, SET search_path = pg_catalog, mlplat, pg_temp (an intent call, one
--   that returns mlplat.accepted, gets both from the rule in 99_entry_points.sql and does
--   not spell them), every
--   reference schema-qualified; authorize -> idempotency claim -> validate ->
--   write desired state + audit -> wake on commit -> return mlplat.accepted
--   (_api_begin, _api_claim and _api_accept below: "the API call").
-- Internal helpers (names starting with '_', the API's and the reconcilers' alike) carry no
-- SET search_path: they are not executable by PUBLIC (45_api_views.sql revokes them), so
-- they only ever run inside a caller whose path is pinned to pg_catalog, mlplat, pg_temp
-- already: an entry point (the rule in 99_entry_points.sql, or its own clause), or a
-- reconciler worker, which sets that path as an override when it connects
-- (src/worker/worker.c).  A SET clause per helper call costs a GUC save/restore and a
-- search-path recomputation, and keeps a SQL-language helper from being inlined; together
-- that tripled the cost of deploy().  What pins its own path: every SECURITY DEFINER
-- function, every trigger function (it runs on the path of whoever's statement fires it)
-- and every function an ordinary role may execute (test/pgtap/api_security.sql checks it).

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

-- Database roles allowed to act for a person via SET mlplat.on_behalf_of.  projects limits
-- the role to those projects (by name; NULL: every project).  No impersonator ever acts for
-- an administrator (_actor refuses a principal in mlplat.admins).
CREATE TABLE mlplat.impersonators (
  app_role   text PRIMARY KEY,
  granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  projects   text[]
);
COMMENT ON COLUMN mlplat.impersonators.projects IS
  'Projects (names) the role may act in on behalf of a person; NULL: every project. Administrators are never impersonated.';

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

-- What is left of a purged idempotency key (run_retention): a fingerprint of (principal,
-- action, key), so a retry that arrives after its key was purged is refused instead of doing
-- the request a second time.  Kept mlplat.idempotency_tombstone_retention days.
CREATE TABLE mlplat.idempotency_tombstones (
  fingerprint    bytea PRIMARY KEY,     -- _idem_fingerprint: 16 bytes of a SHA-256
  key_created_at timestamptz NOT NULL,  -- when the key was first used
  purged_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.idempotency_tombstones IS
  'Fingerprints of purged idempotency keys: a retry with one is refused (mlplat.idempotency_tombstone_retention days).';

-- Lengths first, so no two (principal, action, key) triples share the hashed text.
-- Inlinable, so the planner folds it into the caller's query: STABLE like convert_to(), and
-- only strict calls in the body (||, not format()), as a STRICT SQL function needs.  It was
-- IMMUTABLE over format(): never inlined, each call parsed and planned its body (a fifteenth
-- of deploy()'s time).  Same bytes as format('%s:%s|%s:%s|%s', ...) gave.
CREATE FUNCTION mlplat._idem_fingerprint(p_principal text, p_action text, p_key text) RETURNS bytea
LANGUAGE sql STABLE STRICT AS $$
  SELECT pg_catalog.substr(pg_catalog.sha256(pg_catalog.convert_to(
           pg_catalog.length(p_principal)::text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) p_principal
           OPERATOR(pg_catalog.||) '|' OPERATOR(pg_catalog.||) pg_catalog.length(p_action)::text
           OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) p_action OPERATOR(pg_catalog.||) '|'
           OPERATOR(pg_catalog.||) p_key, 'UTF8')), 1, 16)
$$;

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


SELECT mlplat._append_only('audit_events');

-- ---------------------------------------------------------------- identity

-- The database role that called us (SET ROLE honoured; current_user is the definer here).
-- An inlinable SQL function (one STABLE expression): the planner folds it into the caller's
-- expression, where a PL/pgSQL body cost an executor run per call (three per deploy()).
CREATE FUNCTION mlplat._db_role() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none'
              THEN SESSION_USER::text ELSE pg_catalog.current_setting('role') END
$$;

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
  -- acting for an administrator would make the application role one (create_project,
  -- every project): administrators act as themselves, never through an impersonator
  IF EXISTS (SELECT 1 FROM mlplat.admins a WHERE a.principal = obo) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('role "%s" may not act on behalf of an administrator', r),
      DETAIL = 'mlplat.on_behalf_of names a principal in mlplat.admins; administrators are never impersonated.',
      HINT = 'Administrators call the API as themselves, without mlplat.on_behalf_of.';
  END IF;
  RETURN obo;
END $$;

-- May the caller act in (or read) project p_project?  False only for an impersonation by a
-- role whose mlplat.impersonators.projects is set and does not name the project.
CREATE FUNCTION mlplat._impersonation_allows(p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope text[];
BEGIN
  IF coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '') = '' THEN
    RETURN true;
  END IF;
  SELECT i.projects INTO scope FROM mlplat.impersonators i WHERE i.app_role = mlplat._db_role();
  RETURN scope IS NULL OR p_project = ANY (scope);
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

-- A named thing the caller asked for is not there: 42704, the name cut to 64 characters so
-- that a long argument does not fill the message.  Every lookup by name raises it this way.
CREATE FUNCTION mlplat._no_such(p_entity text, p_name text, p_hint text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704',
    MESSAGE = pg_catalog.format('%s "%s" does not exist', p_entity, pg_catalog.left(p_name, 64)),
    HINT = p_hint;
END $$;

-- The row a lookup of one entity (by name or id, in a project) found, or 42704 when it found
-- none (p_row NULL), so every finder (_find_deployment, _find_run, _find_campaign, ...) is one
-- query and "not there" is decided here once: in _no_such's words for p_entity and p_name, or
-- in p_message where an entity words it its own way.
CREATE FUNCTION mlplat._found(p_row anyelement, p_entity text, p_name text, p_hint text, p_message text DEFAULT NULL)
RETURNS anyelement LANGUAGE plpgsql AS $$
BEGIN
  IF p_row IS NULL AND p_message IS NULL THEN
    PERFORM mlplat._no_such(p_entity, p_name, p_hint);
  ELSIF p_row IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = p_message, HINT = p_hint;
  END IF;
  RETURN p_row;
END $$;

-- The entity row p_row (as a _find_* lookup found it) locked FOR NO KEY UPDATE and read
-- again, the API's lock waits bounded first (_bound_api_waits, 30_api_deployments.sql; the
-- caller names lock_timeout in its SET clause): a reconciler's write-back in flight is waited
-- for, not failed on, and a concurrent call of the same kind finds what this one wrote.  Any
-- table with an id: the table is the row's type.
CREATE FUNCTION mlplat._lock_again(p_row anyelement) RETURNS anyelement
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._bound_api_waits();
  EXECUTE pg_catalog.format('SELECT * FROM %s x WHERE x.id = $1 FOR NO KEY UPDATE',
                            (SELECT t.typrelid::pg_catalog.regclass FROM pg_catalog.pg_type t
                              WHERE t.oid = pg_catalog.pg_typeof(p_row)))
    INTO STRICT p_row USING p_row.id;
  RETURN p_row;
END $$;

-- DNS-1123 label of at most max_len characters.
CREATE FUNCTION mlplat._check_label(field text, v text, max_len int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF v IS NULL THEN
    PERFORM mlplat._bad_input(field, 'must not be null', 'Pass a name.');
  ELSIF NOT mlplat.is_dns_label(v, max_len) THEN   -- the rule: src/validate/names.c
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

-- env: an object of string -> string, names like environment variables.  The rule is
-- src/validate/env.c's, defined once: _env_problem gives the first problem as {rule, hint},
-- _env_ok the same rule as a yes/no (deploy()'s fast path).
CREATE FUNCTION mlplat._env_problem(env jsonb) RETURNS text[]
LANGUAGE C STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_env_problem';
CREATE FUNCTION mlplat._env_ok(env jsonb) RETURNS boolean
LANGUAGE C STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_env_ok';

CREATE FUNCTION mlplat._check_env(field text, env jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  p text[] := mlplat._env_problem(env);
BEGIN
  IF p IS NOT NULL THEN
    PERFORM mlplat._bad_input(field, p[1], p[2]);
  END IF;
END $$;

-- RFC 1035 label (a DNS-1123 label starting with a letter): deployment names, which KServe
-- turns into Service names.  src/validate/names.c.
CREATE FUNCTION mlplat._is_dns1035_label(name text, max_len integer) RETURNS boolean
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_is_dns1035_label';

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
  IF pid IS NOT NULL AND (allowed OR mlplat._is_admin()) AND mlplat._impersonation_allows(p_project) THEN
    RETURN pid;
  END IF;
  IF pid IS NULL AND mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('project "%s" does not exist', p_project),
      HINT = 'Create it with mlplat.create_project().';
  END IF;
  IF pid IS NOT NULL AND (allowed OR mlplat._is_admin()) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('permission denied: %s on project "%s"', p_action, p_project),
      DETAIL = pg_catalog.format('Role "%s" may act on behalf of people only in the projects mlplat.impersonators lists for it.',
                                 mlplat._db_role()),
      HINT = 'An administrator must add the project to the role''s mlplat.impersonators.projects.';
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
  RETURN (EXISTS (
    SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
    WHERE m.project_id = p_project_id AND m.principal = mlplat._actor() AND po.action = 'view') OR mlplat._is_admin())
    AND (coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '') = ''
         OR mlplat._impersonation_allows((SELECT p.name FROM mlplat.projects p WHERE p.id = p_project_id)));
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
  first_used timestamptz;
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
    -- new here, unless retention purged it: then this retries a request that may have run
    SELECT t.key_created_at INTO first_used FROM mlplat.idempotency_tombstones t
     WHERE t.fingerprint = mlplat._idem_fingerprint(who, p_action, p_key);
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = pg_catalog.format('idempotency key expired: first used for %s on %s, it is past mlplat.idempotency_retention',
                                    p_action, pg_catalog.to_char(first_used, 'YYYY-MM-DD')),
        DETAIL = 'The request made with this key may have run; doing it again could do it twice.',
        HINT = 'If this retries that request, look up its outcome (mlplat.audit_log); otherwise use a new idempotency key.';
    END IF;
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

-- ---------------------------------------------------------------- the API call

-- What an API entry point carries from its first line to its answer, so the preamble and
-- the epilogue of the API convention (top of 14_api_core.sql) are each written once: the
-- action (the name its idempotency key and audit row go under), the project as the caller
-- named it, its id once authorized, the traceparent the intent stores, and the idempotency
-- key (NULL: none).
CREATE TYPE mlplat.api_call AS (
  action          text,
  project         text,
  pid             bigint,
  tp              text,
  idempotency_key text
);

-- The preamble: authorize first (42501/42704 before anything is read, locked or claimed),
-- then draw the intent's traceparent.  p_policy is the policy action when it is not the
-- call's own action (several calls share one permission).
CREATE FUNCTION mlplat._api_begin(p_action text, p_project text, p_key text DEFAULT NULL, p_policy text DEFAULT NULL)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(coalesce(p_policy, p_action), p_project);
BEGIN
  RETURN (p_action, p_project, pid, mlplat._traceparent(), p_key)::mlplat.api_call;
END $$;

-- The preamble of a platform call (signers, presets, components, capabilities, lab nodes: no
-- project): administrators only (_require_admin, 37_api_campaigns.sql; p_detail and p_hint:
-- the refusal's words when they are not its default ones), then the traceparent.
CREATE FUNCTION mlplat._api_platform(p_action text, p_detail text DEFAULT NULL, p_hint text DEFAULT NULL)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
BEGIN
  IF p_detail IS NULL THEN
    PERFORM mlplat._require_admin(p_action);
  ELSE
    PERFORM mlplat._require_admin(p_action, p_detail, p_hint);
  END IF;
  RETURN (p_action, NULL, NULL, mlplat._traceparent(), NULL)::mlplat.api_call;
END $$;

-- The call's idempotency claim (see _idem_claim): NULL to go on, or the stored answer.
CREATE FUNCTION mlplat._api_claim(c mlplat.api_call, p_request jsonb) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
BEGIN
  RETURN mlplat._idem_claim(c.action, c.idempotency_key, p_request);
END $$;

-- The answer to a call that found its work already done (the same request made before):
-- no audit row and no wake, but a replay of its idempotency key gives the same answer.
CREATE FUNCTION mlplat._api_keep(c mlplat.api_call, r mlplat.accepted) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._idem_store(c.action, c.idempotency_key, r);
  RETURN r;
END $$;

-- The epilogue: audit the answer r (its entity and entity id), keep it for a replay of the
-- idempotency key, wake the kind's reconciler at commit (p_wake NULL: none), answer r.
CREATE FUNCTION mlplat._api_accept(c mlplat.api_call, r mlplat.accepted, p_detail jsonb, p_wake text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._audit(c.action, c.project, c.pid, r.entity, r.entity_id, r.request_id, c.tp, p_detail);
  PERFORM mlplat._idem_store(c.action, c.idempotency_key, r);   -- nothing to keep without a key
  PERFORM mlplat._wake_on_commit(p_wake);                       -- STRICT: NULL wakes no one
  RETURN r;
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
