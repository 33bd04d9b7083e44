-- 0.2.0 -> 0.3.0, part 42: per-project artifact locations; the artifact check
-- accepts no uploader-written digest (issue 18, finding 3).  register_model_version
-- (part 41) and create_project (part 99_isvc9), which call and clear the locations, are
-- redefined elsewhere.
--
-- Existing projects: every artifact a live project already registered allows its
-- bucket (authority) and first key segment (s3://bucket/segment/; s3://bucket/ for an
-- object at the bucket's top), so what a team registered before keeps working next to
-- it; a project with no artifact starts with an empty list and refuses new
-- registrations until an owner or administrator adds a location.  Each location so
-- added is an audit event (actor mlplat-upgrade) for the owners to review.

CREATE TABLE mlplat.artifact_locations (
  project_id bigint NOT NULL REFERENCES mlplat.projects (id),
  location   text NOT NULL,
  added_by   text NOT NULL,
  added_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (project_id, location)
);
CREATE INDEX artifact_locations_location ON mlplat.artifact_locations (location text_pattern_ops);
COMMENT ON TABLE mlplat.artifact_locations IS
  'Per project, the s3://bucket/prefix/ locations its model artifacts may be registered from (empty: none).';

INSERT INTO mlplat.policies (role, action) VALUES ('owner', 'set_artifact_locations');

-- s3://<bucket>/[<prefix>/]: a bucket name (1 to 63 of a-z 0-9 . -; the check itself wants S3's 3), then an optional
-- key prefix of printable characters that ends with '/', without '.' or '..' segments (a
-- path-style request would have them resolved into another bucket) or empty segments.
-- Other schemes: <scheme>://<authority>/[<prefix>/] under the same rules.
CREATE FUNCTION mlplat._check_location(field text, loc text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF loc IS NULL OR pg_catalog.length(loc) > 1024 OR loc ~ '[[:cntrl:][:space:]]'
     OR loc !~ '^(s3://[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?|(gs|pvc|hf|oci|https|http)://[^/@]+)/([^/]+/)*$'
     OR loc ~ '/\.\.?/' THEN
    PERFORM mlplat._bad_input(field,
      'must be s3://<bucket>/ or s3://<bucket>/<prefix>/ (or gs, pvc, hf, oci, http, https likewise), ending with ''/'', at most 1024 characters, without credentials, blanks, control characters, ''.'' or ''..'' segments',
      'Pass e.g. ''s3://ml-artifacts/fraud/''; every artifact under it may then be registered.');
  END IF;
END $$;

-- Refuses artifact_uri unless it lies under one of the project's locations.  Called by every
-- function that takes an artifact_uri, after its format was checked.
CREATE FUNCTION mlplat._check_artifact_location(p_project_id bigint, p_project text, p_uri text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  locs text[];
BEGIN
  -- the URI's path must not climb out of a location (s3://a/p/../../b/x is another bucket
  -- once a client resolves the dot segments)
  IF p_uri !~ '/\.\.?(/|$)' AND EXISTS (
       SELECT 1 FROM mlplat.artifact_locations l
        WHERE l.project_id = p_project_id AND pg_catalog.starts_with(p_uri, l.location)
          AND pg_catalog.length(p_uri) > pg_catalog.length(l.location)) THEN
    RETURN;
  END IF;
  SELECT pg_catalog.array_agg(l.location ORDER BY l.location) INTO locs
    FROM mlplat.artifact_locations l WHERE l.project_id = p_project_id;
  IF locs IS NULL THEN
    PERFORM mlplat._bad_input('artifact_uri',
      pg_catalog.format('project "%s" has no artifact location, so no artifact may be registered yet', p_project),
      'A project owner or an administrator adds one first: SELECT mlplat.add_artifact_location(''<project>'', ''s3://<bucket>/<prefix>/'').');
  END IF;
  PERFORM mlplat._bad_input('artifact_uri',
    pg_catalog.format('must be an object under one of the artifact locations of project "%s" (%s), without ''.'' or ''..'' segments',
                      p_project, pg_catalog.array_to_string(locs, ', ')),
    'Upload the artifact under one of those locations, or ask a project owner to add its location with mlplat.add_artifact_location().');
END $$;

-- add_artifact_location and remove_artifact_location, one call that differs by p_action:
-- one permission, set_artifact_locations, for both; the idempotency claim, then the add or
-- the remove, then the answer (the project's id, ADDED or REMOVED), audited with whether
-- anything changed.  Removing a location refuses new registrations under it; versions
-- registered before keep their artifact_uri (they are immutable) and stay deployable.
CREATE FUNCTION mlplat._set_artifact_location(p_action text, p_project text, p_location text, p_key text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin(p_action, p_project, p_key, 'set_artifact_locations');
  r mlplat.accepted := mlplat._api_claim(api, pg_catalog.jsonb_build_array(p_project, p_location));
  adding boolean := p_action = 'add_artifact_location';
  st text;
BEGIN
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  IF adding THEN
    PERFORM mlplat._check_location('location', p_location);
    SELECT p.status INTO st FROM mlplat.projects p WHERE p.id = api.pid;
    IF mlplat.project_is_deleting(st) THEN
      PERFORM mlplat._wrong_state('project', p_project, st, p_action, 'The project is being deleted.');
    END IF;
    -- Adds to the list are serialized (SHARE ROW EXCLUSIVE conflicts with itself, and callers
    -- hold no privilege to take it), so two owners cannot both claim one prefix at once.
    LOCK TABLE mlplat.artifact_locations IN SHARE ROW EXCLUSIVE MODE;
    IF NOT mlplat._is_admin() AND EXISTS (
         SELECT 1 FROM mlplat.artifact_locations l JOIN mlplat.projects p ON p.id = l.project_id
          WHERE l.project_id <> api.pid AND p.status <> 'DELETED'
            AND (pg_catalog.starts_with(l.location, p_location) OR pg_catalog.starts_with(p_location, l.location))) THEN
      RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = pg_catalog.format('permission denied: %s on project "%s"', p_action, p_project),
        DETAIL = 'The location overlaps an artifact location of another project.',
        HINT = 'Use a prefix of your own; only an administrator can let two projects share objects.';
    END IF;
    INSERT INTO mlplat.artifact_locations (project_id, location, added_by)
    VALUES (api.pid, p_location, mlplat._actor()) ON CONFLICT DO NOTHING;
  ELSE
    IF p_location IS NULL THEN
      PERFORM mlplat._bad_input('location', 'must not be null', 'Pass the location as listed in mlplat.artifact_locations.');
    END IF;
    DELETE FROM mlplat.artifact_locations l WHERE l.project_id = api.pid AND l.location = p_location;
  END IF;
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'artifact_location', api.pid, NULL, CASE WHEN adding THEN 'ADDED' ELSE 'REMOVED' END,
     false)::mlplat.accepted,
    pg_catalog.jsonb_build_object('location', p_location, 'changed', FOUND));
END $$;

CREATE FUNCTION mlplat.add_artifact_location(project text, location text, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql
RETURN mlplat._set_artifact_location('add_artifact_location', project, location, idempotency_key);

CREATE FUNCTION mlplat.remove_artifact_location(project text, location text, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql
RETURN mlplat._set_artifact_location('remove_artifact_location', project, location, idempotency_key);

CREATE VIEW mlplat.artifact_location_list WITH (security_invoker = true) AS
SELECT p.name AS project, l.location, l.added_by, l.added_at
FROM mlplat.artifact_locations l
JOIN mlplat.projects p ON p.id = l.project_id;

SELECT mlplat._member_reads('artifact_locations');
GRANT SELECT ON mlplat.artifact_locations, mlplat.artifact_location_list TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.artifact_locations', '');

REVOKE ALL ON FUNCTION mlplat._check_location(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._set_artifact_location(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._check_artifact_location(bigint, text, text) FROM PUBLIC;

WITH used AS (
  SELECT DISTINCT v.project_id,
         k.scheme || '://' || k.authority || '/'
         || CASE WHEN pg_catalog.strpos(k.key, '/') > 1 THEN pg_catalog.split_part(k.key, '/', 1) || '/' ELSE '' END AS location
    FROM mlplat.model_versions v
    JOIN mlplat.projects p ON p.id = v.project_id
    CROSS JOIN LATERAL (SELECT pg_catalog.split_part(v.artifact_uri, '://', 1) AS scheme,
                               pg_catalog.split_part(pg_catalog.split_part(v.artifact_uri, '://', 2), '/', 1) AS authority) a
    CROSS JOIN LATERAL (SELECT a.scheme, a.authority,
                               pg_catalog.substr(v.artifact_uri, pg_catalog.length(a.scheme) + pg_catalog.length(a.authority) + 5) AS key) k
   WHERE p.status <> 'DELETED'),
ins AS (
  INSERT INTO mlplat.artifact_locations (project_id, location, added_by)
  SELECT u.project_id, u.location, 'mlplat-upgrade' FROM used u
   WHERE u.location ~ '^(s3://[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?|(gs|pvc|hf|oci|https|http)://[^/@[:space:][:cntrl:]]+)/([^/[:space:][:cntrl:]]+/)?$'
     AND u.location !~ '/\.\.?/' AND pg_catalog.length(u.location) <= 1024
  ON CONFLICT DO NOTHING
  RETURNING project_id, location)
INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id, detail)
SELECT 'mlplat-upgrade', CURRENT_USER, 'add_artifact_location', p.name, i.project_id, 'artifact_location', i.project_id,
       pg_catalog.jsonb_build_object('location', i.location, 'changed', true, 'migrated', true)
  FROM ins i JOIN mlplat.projects p ON p.id = i.project_id;

-- digests taken from x-amz-meta-sha256 were the uploader's word: forget them (a cache;
-- the next check reads the store's checksum or downloads)
DELETE FROM mlplat.artifact_digests WHERE source = 'x-amz-meta-sha256';
ALTER TABLE mlplat.artifact_digests DROP CONSTRAINT artifact_digests_source_check;
ALTER TABLE mlplat.artifact_digests ADD CONSTRAINT artifact_digests_source_check
  CHECK (source IN ('download', 'x-amz-checksum-sha256'));
