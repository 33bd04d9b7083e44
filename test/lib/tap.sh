# test/lib/tap.sh — tiny TAP helpers for shell test scripts.
#
# Scripts run under test/run.sh get MLPLAT_TEST_CLUSTER=1 and PGHOST/PGPORT/
# PGUSER pointing at its running cluster, MLPLAT_TEST_BIN (the private
# PostgreSQL binaries) and MLPLAT_TEST_WORK (a scratch directory).

TAP_N=0
TAP_FAILED=0

# ok CONDITION_EXIT_CODE DESCRIPTION
tap_ok() {
	TAP_N=$((TAP_N + 1))
	if [ "$1" = 0 ]; then
		echo "ok $TAP_N - $2"
	else
		echo "not ok $TAP_N - $2"
		TAP_FAILED=$((TAP_FAILED + 1))
	fi
}

# tap_todo CONDITION_EXIT_CODE DESCRIPTION WHY — an expected failure (TAP's TODO):
# a known gap, named by WHY (for example "issue 17 item 3"), that stays visible
# in the output without failing the run; test/run.sh does not count
# "not ok ... # TODO" lines as failures.
tap_todo() {
	TAP_N=$((TAP_N + 1))
	if [ "$1" = 0 ]; then
		echo "ok $TAP_N - $2 # TODO $3 (passes now: remove the mark)"
	else
		echo "not ok $TAP_N - $2 # TODO $3"
	fi
}

# is GOT EXPECTED DESCRIPTION
tap_is() {
	if [ "$1" = "$2" ]; then tap_ok 0 "$3"; else tap_ok 1 "$3"; echo "#   got: '$1'"; echo "#   expected: '$2'"; fi
}

tap_done() {
	echo "1..$TAP_N"
	[ "$TAP_FAILED" = 0 ]
}

tap_require_cluster() {
	if [ -z "${MLPLAT_TEST_CLUSTER:-}" ]; then
		echo "1..0 # SKIP needs a cluster: run through test/run.sh"
		exit 0
	fi
	PSQL="$MLPLAT_TEST_BIN/psql -qXAt -v ON_ERROR_STOP=1"
}

# q DB SQL — one value, errors to stderr
q() { $PSQL -d "$1" -c "$2"; }

# check JSON PYTHON-EXPR — exit 0 only when the body parses and the expression (o = the
# parsed body) is True; else the body, cut at 800 characters, as a TAP comment
check() {
	python3 -c '
import json, sys
o = json.loads(sys.argv[2])
sys.exit(0 if eval("(" + sys.argv[1] + ")", {"o": o}) is True else 1)' "$2" "$1" 2>/dev/null && return 0
	echo "# body: ${1:0:800}" | tr '\n' ' '
	echo
	return 1
}

# wait_says SECONDS EXPECTED CMD... — poll until CMD prints EXPECTED (every WAIT_EVERY
# seconds, 0.1 unless set); after SECONDS, say what it printed last: the one poll loop of
# the scripts' waits
wait_says() {
	local secs=$1 want=$2 deadline=$((SECONDS + $1)) got
	shift 2
	while :; do
		got=$("$@")
		[ "$got" = "$want" ] && return 0
		((SECONDS >= deadline)) && { echo "# waited $secs s; last value '$got', wanted '$want'"; return 1; }
		sleep "${WAIT_EVERY:-0.1}"
	done
}

# wait_for DB SQL EXPECTED SECONDS — poll until the query returns EXPECTED
wait_for() { wait_says "$4" "$3" q_quiet "$1" "$2"; }
# q_quiet DB SQL — q without its errors (a wait polls through them)
q_quiet() { $PSQL -d "$1" -c "$2" 2>/dev/null; }

# tap_binary NAME CMD... — run a C test binary that prints TAP (its plan last) and
# renumber its results into this script's.  One more result fails when the binary
# did not finish the way a passing or failing run does: a sanitizer report, a signal,
# an exit status other than 0 (or 1 after a failed test), no plan, or a plan that is
# not the number of results it printed.  So a binary that aborts half way fails
# here and names itself, instead of just printing fewer "ok" lines.
tap_binary() {
	local name=$1 out rc line plan= results nok why=
	shift
	out=$(mktemp)
	"$@" >"$out" 2>&1
	rc=$?
	local re_result='^(not )?ok( +[0-9]+)? *(- )?(.*)$' re_plan='^1\.\.([0-9]+)'
	while IFS= read -r line; do
		if [[ $line =~ $re_result ]]; then
			tap_ok "$([ -n "${BASH_REMATCH[1]}" ] && echo 1 || echo 0)" "$name: ${BASH_REMATCH[4]}"
		elif [[ $line =~ $re_plan ]]; then
			plan=${BASH_REMATCH[1]}
			echo "# $name: plan 1..$plan"
		else
			echo "# $line"
		fi
	done <"$out"
	results=$(grep -cE '^(not )?ok( |$)' "$out")
	nok=$(grep -cE '^not ok( |$)' "$out")
	grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$out" && why="a sanitizer report"
	if [ "$rc" -gt 128 ]; then why="${why:+$why, }killed by signal $((rc - 128))"
	elif [ "$rc" != 0 ] && ! { [ "$rc" = 1 ] && [ "$nok" -gt 0 ]; }; then why="${why:+$why, }exit status $rc"
	fi
	if [ -z "$plan" ]; then why="${why:+$why, }no plan"
	elif [ "$plan" != "$results" ]; then why="${why:+$why, }plan 1..$plan but $results results"
	fi
	rm -f "$out"
	if [ -n "$why" ]; then
		tap_ok 1 "$name ran to its end ($why after $results results)"
		return 1
	fi
	tap_ok 0 "$name ran to its end ($results results, exit status $rc)"
	[ "$rc" = 0 ]
}

# tap_part FILE NAME EXPECTED COMMAND... — for a script that gathers unnumbered results
# ("ok - ..." / "not ok - ...") of several programs in FILE and numbers them at the end
# (test/standin/test.sh): run one program, its output into FILE, and add one more result
# there: it exited 0 (not timed out, not crashed, no missing module) and printed all
# EXPECTED results.  So a program that dies early cannot just leave fewer results.
tap_part() {
	local out=$1 name=$2 want=$3 before got rc
	shift 3
	before=$(grep -cE '^(ok|not ok) - ' "$out")
	"$@" >>"$out" 2>&1
	rc=$?
	got=$(($(grep -cE '^(ok|not ok) - ' "$out") - before))
	if [ "$rc" = 0 ] && [ "$got" = "$want" ]; then
		echo "ok - $name ran to its end ($got results, exit status 0)" >>"$out"
	else
		echo "not ok - $name ran to its end: exit status $rc$([ "$rc" = 124 ] && echo ' (timed out)'), $got of its $want results" >>"$out"
	fi
}

# tap_same BEFORE AFTER DESCRIPTION — a "nothing changed" check: passes only when
# both sides are equal AND not empty, so a helper that failed (and printed nothing)
# before and after cannot make it pass.
tap_same() {
	if [ -n "$1" ] && [ "$1" = "$2" ]; then
		tap_ok 0 "$3"
	else
		tap_ok 1 "$3"
		[ -n "$1" ] || echo "#   the first side is empty: nothing was compared"
		[ -n "$2" ] || echo "#   the second side is empty: nothing was compared"
		[ "$1" = "$2" ] || { echo "#   before: '$1'"; echo "#   after:  '$2'"; }
	fi
}

# tap_same_query DB1 DB2 SQL MIN_LINES DESCRIPTION — the same query gives the same answer in
# two databases (an upgraded and a fresh install, say).  Passes only when the query ran in
# both (exit status 0), answered at least MIN_LINES non-empty lines, and the answers are
# equal: two failed or empty queries compare equal, and must not pass.  Prints why, and
# the first lines of a diff, when it fails.
tap_same_query() {
	local a b rca rcb n why=
	a=$(q "$1" "$3")
	rca=$?
	b=$(q "$2" "$3")
	rcb=$?
	n=$(printf '%s\n' "$a" | grep -c .)
	if [ "$rca" != 0 ] || [ "$rcb" != 0 ]; then why="the query failed (exit status $rca in $1, $rcb in $2)"
	elif [ "$n" -lt "$4" ]; then why="$n lines in $1, fewer than $4: nothing worth comparing"
	elif [ "$a" != "$b" ]; then why="the answers differ"
	fi
	if [ -z "$why" ]; then
		tap_ok 0 "$5 ($n lines compared)"
		return 0
	fi
	tap_ok 1 "$5"
	echo "#   $why"
	[ "$a" = "$b" ] || diff -u <(printf '%s\n' "$a") <(printf '%s\n' "$b") | head -40 | sed 's/^/#   /'
	return 1
}

# mlplat_kinds_count [release|test] — how many reconciler kinds src/kinds.c names that the
# build runs (tests count one leader, or mlplat.replicas workers, per kind without
# hard-coding the number): the release kinds, and in the test build (MLPLAT_TEST_KINDS=1,
# what test/run.sh builds unless told otherwise) the test kinds after them too
mlplat_kinds_count() {
	local src=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)} build=${1:-}
	[ -n "$build" ] || build=$([ "${MLPLAT_TEST_KINDS:-0}" = 1 ] && echo test || echo release)
	sed -n '/mlplat_kind_names\[MLPLAT_MAX_KINDS\] = {/,/};/p' "$src/src/kinds.c" |
		if [ "$build" = test ]; then cat; else sed '/test kinds/,$d'; fi | grep -o '"[a-z_]*"' | wc -l
}
