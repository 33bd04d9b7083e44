#!/usr/bin/env bash
# The reconcilers do not trust the database's search_path (issue 18, finding 8).
# A database-level search_path puts a hostile schema ahead of pg_catalog; that
# schema shadows the types worker SQL casts to (jsonb, text) and common
# functions and operators, each recording a call in a side-effect table.  The
# workers are restarted so they connect under that setting; they still
# converge a project and its model aliases, and nothing in the hostile schema
# is ever called.  Before the fix the project write-back's "$7::jsonb" became
# the hostile domain and the side-effect table filled up.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/registry.sh"
SD=$WORK/standin-search-path
DB=mlplat
# This script's own sessions must not call the hostile objects either: they pin
# their path as every client should (the side-effect table counts any caller).
export PGOPTIONS="-c search_path=pg_catalog,public"

cleanup() {
	q $DB "ALTER DATABASE $DB RESET search_path" >/dev/null
	q $DB "DROP SCHEMA IF EXISTS evil CASCADE" >/dev/null 2>&1
	registry_disconnect
}
e2e_standin $DB
on_exit cleanup
registry_connect

$PSQL -d $DB >/dev/null <<'SQL'
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS evil CASCADE;
CREATE SCHEMA evil;
CREATE TABLE evil.called (what text, pid int, app text);
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT INSERT ON evil.called TO PUBLIC;
-- every hostile object calls this: one row per call, with who called
CREATE FUNCTION evil.hit(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evil.called VALUES (what, pg_catalog.pg_backend_pid(), pg_catalog.current_setting('application_name'));
    RETURN true;
END $$;
-- types worker SQL casts to: a domain passes for its base type, its check runs the hit
CREATE DOMAIN evil.jsonb AS pg_catalog.jsonb CHECK (evil.hit('jsonb cast'));
CREATE DOMAIN evil.text AS pg_catalog.text CHECK (evil.hit('text cast'));
CREATE DOMAIN evil.int8 AS pg_catalog.int8 CHECK (evil.hit('int8 cast'));
-- functions and operators a reconciler might name unqualified
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('clock_timestamp()'); RETURN pg_catalog.clock_timestamp(); END $$;
CREATE FUNCTION evil.lower(t pg_catalog.text) RETURNS pg_catalog.text LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('lower()'); RETURN pg_catalog.lower(t); END $$;
CREATE FUNCTION evil.format(f pg_catalog.text, VARIADIC a pg_catalog.text[]) RETURNS pg_catalog.text LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('format()'); RETURN f; END $$;
CREATE FUNCTION evil.cardinality(a anyarray) RETURNS int LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('cardinality()'); RETURN pg_catalog.cardinality(a); END $$;
CREATE FUNCTION evil.text_eq(a pg_catalog.text, b pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('= text'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = pg_catalog.text, RIGHTARG = pg_catalog.text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.int8_eq(a pg_catalog.int8, b pg_catalog.int8) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN PERFORM evil.hit('= int8'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = pg_catalog.int8, RIGHTARG = pg_catalog.int8, FUNCTION = evil.int8_eq);
SQL
tap_ok $? "schema evil shadows jsonb, text, int8, now(), clock_timestamp(), lower(), format(), cardinality() and ="

q $DB "ALTER DATABASE $DB SET search_path = evil, pg_catalog, mlplat, public" >/dev/null
[ "$(PGOPTIONS= q $DB "SELECT '{}'::jsonb IS NOT NULL")" = t ] &&
	[ "$(q $DB "SELECT count(*) > 0 FROM evil.called")" = t ] && q $DB "TRUNCATE evil.called" >/dev/null
tap_ok $? "the database's search_path now reaches sessions: an unpinned '{}'::jsonb calls evil"

# restart the workers: they connect again, under the hostile setting
LEADERS="SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')"
NKINDS=$(q $DB "SELECT count(DISTINCT kind) FROM mlplat.reconciler_health")
q $DB "SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity
        WHERE backend_type = 'mlplat reconciler' AND datname = '$DB'" >/dev/null
sleep 2
wait_for $DB "$LEADERS" "$NKINDS" 60
tap_ok $? "the reconcilers restarted and every kind ($NKINDS) has a leader again"
started=$(q $DB "SELECT bool_and(started_at > pg_catalog.now() - interval '2 minutes') FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')")
tap_is "$started" t "... the leaders are new processes (connected under the hostile setting)"

q $DB "SELECT mlplat.create_project('sp-evil', 2, '4', '8Gi'); SELECT mlplat.add_artifact_location('sp-evil', 's3://models/')" >/dev/null
tap_ok $? "project sp-evil created"
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'sp-evil'" READY 60
rc=$?
tap_ok $rc "the project converges to READY"
if [ $rc != 0 ]; then
	q $DB "SELECT kind, role, status FROM mlplat.reconciler_health WHERE kind = 'projects'" | sed 's/^/# health: /'
	q $DB "SELECT status, status_reason, last_error FROM mlplat.projects WHERE name = 'sp-evil'" | sed 's/^/# row: /'
fi

SHA=$(printf 'sp-evil-v1' | sha256sum | cut -d' ' -f1)
q $DB "SELECT mlplat.register_model_version('sp-evil', 'm', '1', 's3://models/sp-evil/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null &&
	q $DB "SELECT mlplat.set_model_stage('sp-evil', 'm', '1', 'CANDIDATE')" >/dev/null
tap_ok $? "model version staged as CANDIDATE"
MINE="model_id IN (SELECT m.id FROM mlplat.models m JOIN mlplat.projects p ON p.id = m.project_id WHERE p.name = 'sp-evil')"
wait_for $DB "SELECT status FROM mlplat.model_aliases WHERE $MINE AND alias = 'candidate'" SYNCED 60
rc=$?
tap_ok $rc "the candidate alias is SYNCED in the registry"
if [ $rc != 0 ]; then
	q $DB "SELECT alias, status, status_reason, last_error FROM mlplat.model_aliases WHERE $MINE" | sed 's/^/# row: /'
fi

calls=$(q $DB "SELECT coalesce(string_agg(DISTINCT what || ' by ' || app, '; '), '') FROM evil.called")
rc=$?
# (empty is the answer wanted, so the query must be seen to succeed: a failed one prints nothing too)
[ "$rc" = 0 ] && [ -z "$calls" ]
tap_ok $? "nothing in schema evil was called by any worker (query exit $rc, calls '$calls')"
tap_done
