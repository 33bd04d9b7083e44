-- mlplat API: projects, quotas, membership, identity and impersonation.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_mlp_owner', 'regress_mlp_dev', 'regress_mlp_viewer', 'regress_mlp_deployer',
                           'regress_mlp_outsider', 'regress_mlp_app', 'regress_mlp_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('regress_mlp_admin') ON CONFLICT DO NOTHING;

-- only administrators create projects
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.create_project('alpha', 4);
SET ROLE regress_mlp_admin;
SELECT :acc FROM mlplat.create_project('alpha', 4, '8', '32Gi', 'k1', 'regress_mlp_owner');
-- same key, same request: the stored result
SELECT :acc FROM mlplat.create_project('alpha', 4, '8', '32Gi', 'k1', 'regress_mlp_owner');
-- same key, different request: refused
SELECT :acc FROM mlplat.create_project('alpha', 5, '8', '32Gi', 'k1', 'regress_mlp_owner');
-- no key, same arguments: the existing project
SELECT :acc FROM mlplat.create_project('alpha', 4, '8', '32Gi');
SELECT :acc FROM mlplat.create_project('alpha', 6, '8', '32Gi');
SELECT count(*) AS projects FROM mlplat.projects WHERE name = 'alpha';
-- validation
SELECT :acc FROM mlplat.create_project('Alpha', 1);
SELECT :acc FROM mlplat.create_project(repeat('a', 60), 1);
SELECT :acc FROM mlplat.create_project('-x', 1);
SELECT :acc FROM mlplat.create_project('beta', -1);
SELECT :acc FROM mlplat.create_project('beta', 1, 'lots');
SELECT :acc FROM mlplat.create_project('beta', 1, '1', '1 Gi');
SELECT :acc FROM mlplat.create_project('beta', 1, NULL, NULL, '');
SELECT count(*) AS betas FROM mlplat.projects WHERE name = 'beta';
-- a 59-character name still fits the mlp- namespace prefix
SELECT :acc FROM mlplat.create_project(repeat('b', 59), 0);
RESET ROLE;

-- membership: owners grant, others may not
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.grant_role('alpha', 'regress_mlp_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('alpha', 'regress_mlp_dev', 'developer');
SELECT :acc FROM mlplat.grant_role('alpha', 'regress_mlp_dev', 'admin');
SELECT :acc FROM mlplat.grant_role('alpha', '', 'viewer');
SELECT principal, role, granted_by FROM mlplat.members m JOIN mlplat.projects p ON p.id = m.project_id
WHERE p.name = 'alpha' ORDER BY 1, 2;
SELECT :acc FROM mlplat.revoke_role('alpha', 'regress_mlp_owner', 'owner');
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.grant_role('alpha', 'regress_mlp_dev', 'owner');
SELECT :acc FROM mlplat.set_project_quota('alpha', 100);
-- a project that does not exist looks the same as one you may not touch
SELECT :acc FROM mlplat.set_project_quota('nosuch', 1);
SET ROLE regress_mlp_admin;
SELECT :acc FROM mlplat.set_project_quota('nosuch', 1);
RESET ROLE;

-- quotas
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '64Gi', 'q1');
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '64Gi', 'q1');
SELECT :acc FROM mlplat.set_project_quota('alpha', -1);
SELECT name, gpu_quota, cpu_quota, memory_quota, generation, row_version FROM mlplat.projects WHERE name = 'alpha';
RESET ROLE;

-- impersonation: an application role acts for a person only with the right
SET ROLE regress_mlp_app;
SET mlplat.on_behalf_of = 'regress_mlp_owner';
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '64Gi');
RESET ROLE;
INSERT INTO mlplat.impersonators (app_role) VALUES ('regress_mlp_app');
SET ROLE regress_mlp_app;
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '64Gi');
RESET mlplat.on_behalf_of;
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '64Gi');
RESET ROLE;
SELECT actor, db_role, action, project FROM mlplat.audit_events
WHERE project = 'alpha' AND action = 'set_project_quota' ORDER BY id;

-- trace context: the caller's trace is stored with the entity and the event; the parent-id
-- is the request's own API span (a child of the caller's span), so later spans hang under it
SET ROLE regress_mlp_owner;
SET mlplat.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT :acc FROM mlplat.set_project_quota('alpha', 8, '16', '32Gi');
RESET mlplat.traceparent;
RESET ROLE;
SELECT substr(traceparent, 1, 36) AS caller_trace, substr(traceparent, 53) AS caller_flags,
       split_part(traceparent, '-', 3) <> '00f067aa0ba902b7' AS own_span
FROM mlplat.projects WHERE name = 'alpha';
SELECT a.trace_id, a.traceparent = p.traceparent AS same_as_entity, s.name AS api_span, s.parent_span_id
FROM mlplat.audit_events a JOIN mlplat.projects p ON p.name = a.project
JOIN mlplat.spans s ON s.trace_id = a.trace_id AND s.span_id = split_part(a.traceparent, '-', 3)
WHERE a.project = 'alpha' ORDER BY a.id DESC LIMIT 1;
-- otherwise a fresh W3C traceparent per request
SELECT traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-01$' AS generated_ok,
       count(DISTINCT trace_id) = count(*) AS distinct_traces
FROM mlplat.audit_events WHERE project = 'alpha' AND trace_id <> '4bf92f3577b34da6a3ce929d0e0e4736'
GROUP BY 1;

-- delete: owners only; CAS; repeat is a no-op
SET ROLE regress_mlp_dev;
SELECT :acc FROM mlplat.delete_project('alpha');
SET ROLE regress_mlp_owner;
SELECT :acc FROM mlplat.delete_project('alpha');
SELECT :acc FROM mlplat.delete_project('alpha');
SELECT :acc FROM mlplat.set_project_quota('alpha', 1);
RESET ROLE;
-- re-creating a project that is still DELETING is refused; once DELETED it may be re-created
SET ROLE regress_mlp_admin;
SELECT :acc FROM mlplat.create_project('alpha', 4, '8', '32Gi');
RESET ROLE;
UPDATE mlplat.projects SET status = 'DELETED' WHERE name = 'alpha';
-- a deleted project comes back only through create_project (mlplat._project_transitions)
DO $$ BEGIN
  UPDATE mlplat.projects SET status = 'READY' WHERE name = 'alpha';
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE '%', regexp_replace(SQLERRM, 'projects [0-9]+', 'projects N');
END $$;
SET ROLE regress_mlp_admin;
SELECT :acc FROM mlplat.create_project('alpha', 2, NULL, NULL, NULL, 'regress_mlp_owner');
RESET ROLE;
SELECT name, status, gpu_quota, generation FROM mlplat.projects WHERE name = 'alpha';
-- a re-created project starts without the old members
SELECT count(*) AS members FROM mlplat.members m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'alpha';

-- every intent wrote exactly one audit event with the person and the database role
SELECT action, count(*) FROM mlplat.audit_events WHERE project = 'alpha' GROUP BY 1 ORDER BY 1;
-- rolled back intents leave nothing behind
BEGIN;
SET LOCAL ROLE regress_mlp_admin;
SELECT :acc FROM mlplat.create_project('gamma', 1);
ROLLBACK;
SELECT count(*) AS gammas FROM mlplat.projects WHERE name = 'gamma';
