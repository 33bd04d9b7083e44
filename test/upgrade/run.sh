#!/usr/bin/env bash
# Upgrade path: install the previous release, update it, and require the result
# to be indistinguishable (in every catalog detail we list) from a fresh install.
set -u
. "$(dirname "$0")/../lib/tap.sh"
tap_require_cluster

PREV=$(make -C "$SRC" -s print-PREV_VERSION)
CUR=$(make -C "$SRC" -s print-EXTVERSION)

# Every object the extension owns, described so two installs can be compared.
CATALOG_SQL=$(cat <<'SQL'
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
  SELECT 'fn ' || p.oid::regprocedure::text || ' ' || pg_get_functiondef(p.oid)
         || ' acl=' || coalesce(p.proacl::text, '') AS line
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = 'mlplat' AND p.prokind IN ('f', 'p', 'w')
  UNION ALL
  SELECT 'agg ' || p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = 'mlplat' AND p.prokind = 'a'
  UNION ALL
  SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' rls=' || c.relrowsecurity || ' acl=' || coalesce(c.relacl::text, '')
         || ' opts=' || coalesce(c.reloptions::text, '')
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'mlplat'
  UNION ALL
  SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE n.nspname = 'mlplat' AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'mlplat'::regnamespace
  UNION ALL
  SELECT 'idx ' || pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
   WHERE c.relnamespace = 'mlplat'::regnamespace
  UNION ALL
  SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid) FROM pg_class c
   WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'trg ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = 'mlplat'::regnamespace AND NOT t.tgisinternal
  UNION ALL
  SELECT 'pol ' || polrelid::regclass::text || ' ' || polname || ' ' || polcmd::text || ' '
         || coalesce(pg_get_expr(polqual, polrelid), '') || ' ' || coalesce(pg_get_expr(polwithcheck, polrelid), '')
    FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE c.relnamespace = 'mlplat'::regnamespace
  UNION ALL
  SELECT 'type ' || t.typname || ' ' || t.typtype::text FROM pg_type t
   WHERE t.typnamespace = 'mlplat'::regnamespace AND t.typtype IN ('c', 'e', 'd')
     AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
  UNION ALL
  SELECT 'comment ' || classoid::regclass::text || ' ' || coalesce(pg_describe_object(classoid, objoid, objsubid), '') || ' ' || description
    FROM pg_description WHERE objoid IN (SELECT objid FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mlplat'))
       OR objoid = 'mlplat'::regnamespace
) s;
SQL
)

for db in mlplat_upgrade_old mlplat_upgrade_new; do
	q postgres "DROP DATABASE IF EXISTS $db" >/dev/null
	q postgres "CREATE DATABASE $db" >/dev/null
done

q mlplat_upgrade_old "CREATE EXTENSION mlplat VERSION '$PREV'" >/dev/null
tap_ok $? "CREATE EXTENSION mlplat VERSION '$PREV' (the previous release)"

err=$(q mlplat_upgrade_old "SELECT * FROM mlplat.version()" 2>&1 >/dev/null)
echo "$err" | grep -q 'does not match library version' && echo "$err" | grep -q 'ALTER EXTENSION mlplat UPDATE'
tap_ok $? "version() refuses an old schema with a newer library, with a hint"

# Data the update must carry: projects with artifacts registered before artifact
# locations existed (issue 18, finding 3), and a digest cached from x-amz-meta-sha256.
q mlplat_upgrade_old "DO \$\$ BEGIN
  PERFORM mlplat.create_project('upa', 1); PERFORM mlplat.create_project('upb', 1); PERFORM mlplat.create_project('upc', 1);
  PERFORM mlplat.register_model_version('upa', 'iris', '1', 's3://models/iris/1/model.bin', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.register_model_version('upa', 'iris', '2', 's3://models/iris/2/model.bin', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.register_model_version('upa', 'top', '1', 's3://flat-bucket/model.bin', repeat('c', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.register_model_version('upb', 'm', '1', 'gs://elsewhere/m/1', repeat('d', 64), 'kserve-sklearnserver', 'sklearn');
  INSERT INTO mlplat.artifact_digests (uri, etag, sha256, source) VALUES
    ('s3://models/iris/1/model.bin', 'e1', repeat('a', 64), 'x-amz-meta-sha256'),
    ('s3://models/iris/2/model.bin', 'e2', repeat('b', 64), 'download');
  PERFORM mlplat.set_project_quota('upb', 3);
  PERFORM mlplat.set_model_stage('upb', 'm', '1', 'CANDIDATE');
  PERFORM mlplat.deploy('upb', 'g' || i, 'm', '1', 'kserve-sklearnserver', 1, 1, 1) FROM generate_series(1, 3) i;
  UPDATE mlplat.deployments SET status = 'DELETED' WHERE name = 'g3';
END \$\$" >/dev/null
tap_ok $? "0.2.0 data: three projects, s3:// and gs:// artifacts, a digest cached from x-amz-meta-sha256; three 1-GPU deployments, one DELETED"

# route history published by 0.2.0 (one generation per transaction, each the whole set): the
# update turns the sets into route entries, and route_table answers for every generation as before
for set in "status = 'READY', endpoint = 'http://g1', observed_revision = 1, ready_revision = 1 WHERE name = 'g1'" \
	"status = 'READY', endpoint = 'http://g2', observed_revision = 1, ready_revision = 1 WHERE name = 'g2'" \
	"endpoint = 'http://g1b' WHERE name = 'g1'" "status = 'FAILED' WHERE name = 'g2'" "status = 'READY' WHERE name = 'g2'"; do
	q mlplat_upgrade_old "UPDATE mlplat.deployments SET $set" >/dev/null
done
ROUTES_SQL="SELECT string_agg(g.generation || ':' || coalesce((SELECT string_agg(t.deployment || '=' || t.endpoint || '@' || t.revision, ',' ORDER BY t.deployment)
  FROM mlplat.route_table(g.generation) t), ''), ' ' ORDER BY g.generation) FROM mlplat.route_generations g"
ROUTES_OLD=$(q mlplat_upgrade_old "$ROUTES_SQL")
tap_is "$ROUTES_OLD" "1:g1=http://g1@1 2:g1=http://g1@1,g2=http://g2@1 3:g1=http://g1b@1,g2=http://g2@1 4:g1=http://g1b@1 5:g1=http://g1b@1,g2=http://g2@1" \
	"0.2.0 data: five route generations"

q mlplat_upgrade_old "ALTER EXTENSION mlplat UPDATE" >/dev/null
tap_same "$ROUTES_OLD" "$(q mlplat_upgrade_old "$ROUTES_SQL")" "after the update: route_table(as_of) of every 0.2.0 generation as before"
q mlplat_upgrade_old "UPDATE mlplat.deployments SET endpoint = 'http://g1c' WHERE name = 'g1'" >/dev/null
tap_is "$(q mlplat_upgrade_old "SELECT string_agg(generation || ':' || deployment || '=' || endpoint, ',' ORDER BY deployment) FROM mlplat.route_table()")" \
	"6:g1=http://g1c,6:g2=http://g2" \
	"after the update: a change publishes the next generation on top of the migrated entries"
tap_ok $? "ALTER EXTENSION mlplat UPDATE from $PREV to $CUR"
tap_is "$(q mlplat_upgrade_old "SELECT string_agg(project || ' ' || location || ' ' || added_by, ',' ORDER BY project, location) FROM mlplat.artifact_location_list")" \
	"upa s3://flat-bucket/ mlplat-upgrade,upa s3://models/iris/ mlplat-upgrade,upb gs://elsewhere/m/ mlplat-upgrade" \
	"the update allows each project the bucket and first key segment of the artifacts it used; no artifact: no location"
tap_is "$(q mlplat_upgrade_old "SELECT count(*) FROM mlplat.audit_events WHERE action = 'add_artifact_location' AND actor = 'mlplat-upgrade' AND (detail->>'migrated')::boolean")" 3 \
	"each location the update added is an audit event"
tap_is "$(q mlplat_upgrade_old "SELECT string_agg(source, ',') FROM mlplat.artifact_digests")" "download" \
	"the digest cached from x-amz-meta-sha256 is forgotten, the downloaded one kept"

# the quota reads the deployments' GPUs from a counter the update fills from the 0.2.0 rows:
# two of three in use, so one more GPU fits and a second one does not
tap_is "$(q mlplat_upgrade_old "SELECT (SELECT sum(gpus) FROM mlplat.deployment_gpus c JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = 'upb')
  || ' ' || mlplat._gpus_in_use(id) FROM mlplat.projects WHERE name = 'upb'")" "2 2" \
	"the update counts the GPUs of the 0.2.0 deployments that are not DELETED"
tap_is "$(q mlplat_upgrade_old "SELECT (mlplat.deploy('upb', 'g3', 'm', '1', 'kserve-sklearnserver', 1, 1, 1)).status" 2>&1)" "DEPLOYING" \
	"after the update: one more GPU fits the quota"
q mlplat_upgrade_old "SELECT mlplat.deploy('upb', 'g4', 'm', '1', 'kserve-sklearnserver', 1, 1, 1)" 2>&1 | grep -q "GPU quota of project \"upb\" exceeded: 1 requested, 3 of 3 in use"
tap_ok $? "after the update: a fourth GPU is refused (23514), counted from the filled counter"

tap_is "$(q mlplat_upgrade_old "SELECT extension_version || '/' || library_version FROM mlplat.version()")" "$CUR/$CUR" \
	"after the update, extension and library agree"

# Model Lab (issue 15) in the updated database: the rows of 0.2.0 are kept and lab data is made
# on top of them through the API
LAB=$(q mlplat_upgrade_old "DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'upg_lab_owner') THEN CREATE ROLE upg_lab_owner; END IF;
  END \$\$;
  SELECT mlplat.grant_role('upa', 'upg_lab_owner', 'owner');
  SELECT mlplat.register_lab_node('upg-gpu-1', 'a100', 8);
  SET ROLE upg_lab_owner;
  SELECT mlplat.register_lab_profile('upa', 'p', jsonb_build_object('runtime_kind', 'kserve-sklearnserver',
    'image', 'r.example/w@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'a100',
    'families', '[\"tabular_predict\"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536));
  SELECT mlplat.approve_lab('upa', v.id, v.artifact_sha256, f.id, n.id, '{tabular_predict}', '{}', 1, '1 hour')
    FROM mlplat.model_versions v, mlplat.lab_profiles f, mlplat.lab_nodes n WHERE v.artifact_uri = 's3://models/iris/1/model.bin';
  SELECT (mlplat.lab_preflight('upa', v.id, v.artifact_sha256, f.id, n.id, a.id, 'tabular_predict', '[{\"features\": [1, 2]}]')).blockers
    FROM mlplat.model_versions v, mlplat.lab_profiles f, mlplat.lab_nodes n, mlplat.lab_approvals a
   WHERE v.artifact_uri = 's3://models/iris/1/model.bin';
  RESET ROLE;
  SELECT count(*) FROM mlplat.model_versions;" 2>&1 | tail -2 | tr '\n' ' ')
tap_is "$LAB" "{CANDIDATE_NOT_ELIGIBLE,NODE_NOT_OBSERVED,PROBE_MISSING} 4 " \
	"after the update: lab node, profile and approval on a 0.2.0 model version; its preflight; the 4 versions kept"

q mlplat_upgrade_new "CREATE EXTENSION mlplat" >/dev/null
tap_ok $? "fresh CREATE EXTENSION mlplat ($CUR)"
POLICIES_SQL="SELECT string_agg(role || ':' || action, ',' ORDER BY role, action) FROM mlplat.policies"
tap_same_query mlplat_upgrade_old mlplat_upgrade_new "$POLICIES_SQL" 1 \
	"the updated policies are those of a fresh install (owners may set artifact locations)"
# the tables (and identity sequences) pg_dump keeps the rows of: marked by the same rule in both
EXTCONFIG_SQL="SELECT c::regclass::text FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'mlplat' ORDER BY 1"
tap_same_query mlplat_upgrade_old mlplat_upgrade_new "$EXTCONFIG_SQL" 30 \
	"the updated database marks the tables and sequences of a fresh install as pg_dump configuration"
# at least the functions, tables and views every release has
tap_same_query mlplat_upgrade_old mlplat_upgrade_new "$CATALOG_SQL" 100 "upgraded and fresh installs have identical catalogs"

for db in mlplat_upgrade_old mlplat_upgrade_new; do q postgres "DROP DATABASE $db" >/dev/null; done
tap_done
