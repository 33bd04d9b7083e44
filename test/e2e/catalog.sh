#!/usr/bin/env bash
# The capability and component catalog (issue 14, scenario 12; docs/campaigns.md).
# test/catalog/capabilities.json and components.json are registered in a database of their
# own.  Every LOCAL or REAL descriptor and every component names a regression test: that
# test must exist and pass when run through pg_regress here (a name that runs no test fails),
# and for a descriptor its expected output must compile that exact tuple; compiled here, the
# tuple gives the descriptor's own arguments.  Every UNQUALIFIED descriptor is refused by
# compile.  A planted entry naming no test is caught by the same check.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
DB=h14_catalog
T=$(mktemp -d "$MLPLAT_TEST_WORK/catalog.XXXXXX")
PG_REGRESS=$MLPLAT_TEST_BIN/../lib/pgxs/src/test/regress/pg_regress
cleanup() {
	$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "DROP DATABASE IF EXISTS ${DB}_regress" >/dev/null 2>&1
	rm -rf "$T"
}
on_exit cleanup
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
q $DB "CREATE EXTENSION mlplat" >/dev/null
caps=$(cat "$SRC/test/catalog/capabilities.json")
comps=$(cat "$SRC/test/catalog/components.json")
out=$($PSQL -d $DB -v caps="$caps" -v comps="$comps" 2>&1 <<'SQL'
SELECT count(mlplat.register_capability(d)) FROM jsonb_array_elements(:'caps'::jsonb) d;
SELECT count(mlplat.register_component(c->>'name', c->>'role', c->'spec', c->>'regression_test'))
  FROM jsonb_array_elements(:'comps'::jsonb) c;
SQL
)
tap_ok $? "the catalog registers: $(echo "$out" | tr '\n' ' ')"

# test_file SUITE:NAME — the file that is the named test, or nothing
test_file() {
	local suite=${1%%:*} name=${1#*:}
	case $suite in
		regress) [ -f "$SRC/sql/$name.sql" ] && [ -f "$SRC/expected/$name.out" ] && echo "$SRC/expected/$name.out" ;;
		e2e) [ -f "$SRC/test/e2e/$name.sh" ] && echo "$SRC/test/e2e/$name.sh" ;;
		pgtap) [ -f "$SRC/test/pgtap/$name.sql" ] && echo "$SRC/test/pgtap/$name.sql" ;;
		isolation) [ -f "$SRC/test/isolation/specs/$name.spec" ] && echo "$SRC/test/isolation/specs/$name.spec" ;;
	esac
}
# runs SUITE:NAME — run a regress test through pg_regress against this cluster; other
# suites run in their own CI suite and are only looked up here
declare -A RAN=()
runs() {
	local name=${1#*:}
	[ -n "${RAN[$1]:-}" ] && return "${RAN[$1]}"
	if [ -z "$(test_file "$1")" ]; then RAN[$1]=1; return 1; fi
	if [ "${1%%:*}" != regress ]; then RAN[$1]=0; return 0; fi
	# (with --use-existing pg_regress neither creates the database nor loads the extension)
	$PSQL -d postgres -c "DROP DATABASE IF EXISTS ${DB}_regress" -c "CREATE DATABASE ${DB}_regress" >/dev/null
	q "${DB}_regress" "CREATE EXTENSION mlplat" >/dev/null
	"$PG_REGRESS" --bindir="$MLPLAT_TEST_BIN" --host="$PGHOST" --port="$PGPORT" --user="${PGUSER:-postgres}" \
		--use-existing --inputdir="$SRC" --outputdir="$T/$name" --dbname="${DB}_regress" "$name" >"$T/$name.log" 2>&1
	RAN[$1]=$?
	if [ "${RAN[$1]}" != 0 ]; then
		sed 's/^/#   /' "$T/$name.log" | tail -5
		head -40 "$T/$name/regression.diffs" 2>/dev/null | sed 's/^/#   /'
	fi
	return "${RAN[$1]}"
}

# the check itself must fail on a name that runs no test
runs regress:no_such_test_here
tap_is $? 1 "a regression_test that names no test fails the check"

while IFS='|' read -r id rt ver fam prec acc mech qual test args; do
	tuple="$rt $ver $fam $prec $acc $mech"
	if [ "$qual" = UNQUALIFIED ]; then
		err=$($PSQL -d $DB -c "SELECT mlplat.compile_runtime_args('$rt', '$ver', '$fam', '$prec', '$acc', ARRAY['$mech'])" 2>&1 >/dev/null)
		echo "$err" | grep -q "cannot compile runtime arguments: UNQUALIFIED_CAPABILITY"
		tap_ok $? "UNQUALIFIED $tuple is refused by compile"
		continue
	fi
	runs "$test"
	tap_ok $? "$qual $tuple: its regression test $test exists and passes"
	mech_arg=$([ "$mech" = none ] && echo "'\\{\\}'" || echo "ARRAY\\['[^]]*$mech")
	grep -Eq "compile_runtime_args\('$rt', '$ver', '$fam', '$prec', '$acc', $mech_arg" "$(test_file "$test")" 2>/dev/null
	tap_ok $? "$qual $tuple: $test compiles that exact tuple"
	got=$(q $DB "SELECT (mlplat.compile_runtime_args('$rt', '$ver', '$fam', '$prec', '$acc',
	              CASE WHEN '$mech' = 'none' THEN '{}'::text[] ELSE ARRAY['$mech'] END)->'args')::text")
	tap_is "$got" "$args" "$qual $tuple compiles to the descriptor's arguments"
done < <(q $DB "SELECT id, runtime, runtime_version, model_family, precision, accelerator, mechanism, qualification,
                       coalesce(regression_test, ''), args::text FROM mlplat.capability_descriptors ORDER BY id")

while IFS='|' read -r name role test; do
	runs "$test"
	tap_ok $? "component $name ($role): its regression test $test exists and passes"
done < <(q $DB "SELECT name, role, regression_test FROM mlplat.components ORDER BY name")
tap_done
