#!/usr/bin/env bash
# Each kind's statuses are listed once in C (include/mlplat/states.h), and a worker checks
# that list against its kind's mlplat._<machine>_transitions() before it runs: a status the
# SQL names and C does not know (a claim would fail on the first row in it), or one C knows
# and the SQL does not name (the trigger would refuse it at write-back, after the pass had
# acted), makes the workers refuse to run, saying which.  Put back, they converge.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-state-lists
DB=mlplat
ORIG_PROJECT=$(q $DB "SELECT pg_get_functiondef('mlplat._project_transitions'::regproc)")
ORIG_ALIAS=$(q $DB "SELECT pg_get_functiondef('mlplat._model_alias_transitions'::regproc)")
restore() {
	q $DB "$ORIG_PROJECT" >/dev/null 2>&1
	q $DB "$ORIG_ALIAS" >/dev/null 2>&1
}
on_exit restore
e2e_standin $DB

mark() { lines_before=$(wc -l <"$WORK/data.log"); }
# refuses KIND WHY: every replica of KIND that is not stopped refuses, its status saying WHY,
# and the server log says WHY in a DETAIL since the last mark
refuses() {
	wait_for $DB "SELECT bool_and(starts_with(status, 'refuses to run: $2'))
	              FROM mlplat.reconciler_health WHERE kind = '$1' AND role <> 'stopped'" t 30 || return 1
	tail -n +"$lines_before" "$WORK/data.log" | grep -qF "DETAIL:  $2"
}
# replace FN ROWS: FN's transitions become ROWS (a VALUES list)
replace() {
	q $DB "CREATE OR REPLACE FUNCTION mlplat.$1() RETURNS TABLE (from_status text, to_status text)
	       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS \$\$ VALUES $2 \$\$" >/dev/null
}

q $DB "SELECT mlplat.create_project('stl', 0)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'stl'" READY 20
tap_ok $? "with C and SQL agreeing, a project is reconciled to READY (its statuses read as C's enum)"

# --- a status the SQL names and C does not know
mark
replace _project_transitions "$(q $DB "SELECT string_agg(format('(%L, %L)', from_status, to_status), ', ')
                                     FROM mlplat._project_transitions()"), ('READY', 'ARCHIVED')"
refuses projects 'the project statuses do not match this library: mlplat._project_transitions() names the status "ARCHIVED", which the library does not know'
tap_ok $? "a status C does not know: the projects workers refuse to run and name it"
q $DB "SELECT mlplat.create_project('stl2', 0)" >/dev/null
sleep 3
tap_is "$(kube_code /api/v1/namespaces/mlp-stl2)/$(q $DB "SELECT status FROM mlplat.projects WHERE name = 'stl2'")" \
	404/PROVISIONING "... and send nothing: the new project's namespace is not made"
grep -q 'WARNING:  mlplat projects reconciler [0-9]* refuses to run: its SQL and C disagree' <(tail -n +"$lines_before" "$WORK/data.log")
tap_ok $? "... and say so in the server log"

# --- a status C knows and the SQL does not name
mark
replace _project_transitions "(NULL, 'PROVISIONING'), ('PROVISIONING', 'READY'), ('READY', 'FAILED'),
                              ('FAILED', 'DELETING')"
refuses projects 'the project statuses do not match this library: the library knows the project status "DELETED", which mlplat._project_transitions() does not name'
tap_ok $? "a status the SQL does not name: refused, naming it"

# --- another kind's machine: the model aliases workers
q $DB "$ORIG_PROJECT" >/dev/null
mark
replace _model_alias_transitions "(NULL, 'PENDING'), ('PENDING', 'SYNCED'), ('PENDING', 'FAILED'), ('PENDING', 'STALE')"
refuses model_aliases 'the model_alias statuses do not match this library: mlplat._model_alias_transitions() names the status "STALE", which the library does not know'
tap_ok $? "the model_aliases workers check their machine too"
q $DB "$ORIG_ALIAS" >/dev/null

# --- put back: both run again and the waiting project converges
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE status LIKE 'refuses%'" 0 30
tap_ok $? "the functions put back: no worker refuses"
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'stl2'" READY 30
tap_ok $? "... and the project that waited converges to READY"
tap_is "$(kube_code /api/v1/namespaces/mlp-stl2)" 200 "... its namespace made"

q $DB "SELECT mlplat.delete_project(p) FROM unnest(ARRAY['stl', 'stl2']) p" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.projects WHERE name IN ('stl', 'stl2') AND status <> 'DELETED'" 0 30
tap_ok $? "both projects deleted (DELETING, then DELETED, through the enum)"
tap_done
