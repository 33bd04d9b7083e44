-- A project's intent-determined objects (Namespace, ResourceQuota, LimitRange, the members'
-- RoleBindings) are rendered by the intents and stored on the project with their content id;
-- the claim hands the pass exactly those bytes (issue 19, item 3).
\set SHOW_CONTEXT never
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_mlp_owner', 'regress_mlp_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('regress_mlp_admin') ON CONFLICT DO NOTHING;
-- the stored render, the instance id and project id masked; its content id remembered
CREATE TEMP TABLE ids (step text, cid text);
GRANT ALL ON ids TO PUBLIC;
CREATE FUNCTION pg_temp.shown(p_step text) RETURNS SETOF text LANGUAGE sql AS $$
  INSERT INTO ids SELECT p_step, p.rendered_content_id FROM mlplat.projects p WHERE p.name = 'render8';
  SELECT replace(replace(e::text, i.instance_id, 'INSTANCE'), '"' || p.id || '"', '"ID"')
    FROM mlplat.projects p, mlplat.installation i, json_array_elements(p.rendered) e WHERE p.name = 'render8'
$$;

SET ROLE regress_mlp_admin;
SELECT status FROM mlplat.create_project('render8', 2, owner => 'regress_mlp_owner');
RESET ROLE;
SELECT pg_temp.shown('created');
-- the content id is the stored array's
SELECT rendered_content_id = mlplat.content_id(rendered::jsonb) AS content_id_of_rendered
  FROM mlplat.projects WHERE name = 'render8';

SET ROLE regress_mlp_owner;
SELECT status FROM mlplat.grant_role('render8', 'Dana.Q', 'viewer');
RESET ROLE;
SELECT pg_temp.shown('granted');
SET ROLE regress_mlp_owner;
SELECT status FROM mlplat.set_project_quota('render8', 3, '4', '8Gi');
RESET ROLE;
SELECT e->'spec' AS quota FROM mlplat.projects p, json_array_elements(p.rendered) e
 WHERE p.name = 'render8' AND e->>'kind' = 'ResourceQuota';
INSERT INTO ids SELECT 'quota', rendered_content_id FROM mlplat.projects WHERE name = 'render8';
SET ROLE regress_mlp_owner;
SELECT status FROM mlplat.set_project_quota('render8', 2);
SELECT status FROM mlplat.revoke_role('render8', 'Dana.Q', 'viewer');
RESET ROLE;
INSERT INTO ids SELECT 'back', rendered_content_id FROM mlplat.projects WHERE name = 'render8';
-- each change has its own content id; the same intents again, the same id
SELECT step, cid = (SELECT cid FROM ids WHERE step = 'created') AS same_as_created,
       (SELECT count(*) FROM ids j WHERE j.cid = i.cid) AS steps_with_this_id
  FROM ids i ORDER BY step;

-- the claim hands the pass the stored manifests, element by element, byte for byte
SELECT c.manifests = ARRAY(SELECT e::text FROM json_array_elements(p.rendered) e) AS claim_is_stored,
       cardinality(c.manifests) AS manifests
  FROM mlplat._projects_claim() c JOIN mlplat.projects p ON p.id = c.id WHERE p.name = 'render8';
-- a member row written around the intents (as before 0.3.0) changes nothing stored
INSERT INTO mlplat.members (project_id, principal, role, granted_by)
SELECT id, 'erin', 'viewer', 'test' FROM mlplat.projects WHERE name = 'render8';
SELECT rendered_content_id = (SELECT cid FROM ids WHERE step = 'back') AS unchanged
  FROM mlplat.projects WHERE name = 'render8';
-- ... until an intent renders again: the upgrade's fill is this call for every project
SELECT mlplat._project_render_store(id) FROM mlplat.projects WHERE name = 'render8';
SELECT e->'metadata'->>'name' AS binding FROM mlplat.projects p, json_array_elements(p.rendered) e
 WHERE p.name = 'render8' AND e->>'kind' = 'RoleBinding' ORDER BY 1;

-- each intent writes the project row once, its render in the same UPDATE as its change (the
-- row's updates in this transaction, pg_stat_xact_user_tables; a new project is its INSERT
-- and one UPDATE, the render following its owner's member row)
CREATE FUNCTION pg_temp.updates() RETURNS bigint LANGUAGE sql AS $$
  SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'mlplat.projects'::regclass
$$;
CREATE TEMP TABLE writes (n serial, step text, updates bigint);
GRANT ALL ON writes, writes_n_seq TO PUBLIC;
BEGIN;
INSERT INTO writes (step, updates) VALUES ('start', pg_temp.updates());
SET LOCAL ROLE regress_mlp_owner;
SELECT status FROM mlplat.set_project_quota('render8', 3);
INSERT INTO writes (step, updates) VALUES ('set_project_quota', pg_temp.updates());
SELECT status FROM mlplat.grant_role('render8', 'Dana.Q', 'viewer');
INSERT INTO writes (step, updates) VALUES ('grant_role', pg_temp.updates());
SELECT status FROM mlplat.revoke_role('render8', 'Dana.Q', 'viewer');
INSERT INTO writes (step, updates) VALUES ('revoke_role', pg_temp.updates());
SET LOCAL ROLE regress_mlp_admin;
SELECT status FROM mlplat.delete_project('render8');
RESET ROLE;
UPDATE mlplat.projects SET status = 'DELETED' WHERE name = 'render8';   -- as the reconciler ends it
INSERT INTO writes (step, updates) VALUES ('deleted', pg_temp.updates());
SET LOCAL ROLE regress_mlp_admin;
SELECT status FROM mlplat.create_project('render8', 1, owner => 'regress_mlp_owner');
INSERT INTO writes (step, updates) VALUES ('create_project again', pg_temp.updates());
SELECT status FROM mlplat.create_project('render8b', 1, owner => 'regress_mlp_owner');
INSERT INTO writes (step, updates) VALUES ('create_project new', pg_temp.updates());
RESET ROLE;
SELECT step, updates - lag(updates) OVER (ORDER BY n) AS project_updates FROM writes ORDER BY n;
-- the re-created project's render is its new quota's and its only member's
SELECT rendered_content_id = (SELECT r.content_id FROM mlplat._project_rendered(id, name, 1, NULL, NULL) r) AS rendered_is_new,
       (SELECT count(*) FROM json_array_elements(rendered) e WHERE e->>'kind' = 'RoleBinding') AS bindings
  FROM mlplat.projects WHERE name = 'render8';
ROLLBACK;
