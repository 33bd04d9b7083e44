#!/usr/bin/env bash
# test/selftest/run.sh — the test runner's own test.  Deliberately broken scripts
# and binaries go through the same code test/run.sh judges every suite with
# (tap_judge in test/lib/judge.sh, tap_binary and tap_same in test/lib/tap.sh),
# and each must fail the way it should, naming why; a well-behaved script must
# pass.  Needs no cluster; test/run.sh runs it first (suite "selftest").
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/tap.sh"
. "$SRC/test/lib/judge.sh"
T=$(mktemp -d /tmp/mlplat-selftest.XXXXXX)
trap 'rm -rf "$T"' EXIT

# judge NAME TIMEOUT — run $T/NAME.sh as test/run.sh runs a script and judge it.
judge() {
	local rc
	# (in a subshell: bash would report the killed case's "Killed" on our stderr)
	rc=$( (timeout "${2:-30}" bash "$T/$1.sh" >"$T/$1.out" 2>&1; echo $?) 2>/dev/null)
	tap_judge "$T/$1.out" "$rc"
}
# expect NAME PASS SKIP FAIL WHY-REGEX DESCRIPTION — the judge's verdict on $T/NAME.sh.
expect() {
	judge "$1" "${7:-30}"
	if [ "$J_PASS $J_SKIP $J_FAIL" = "$2 $3 $4" ] && [[ $J_WHY =~ $5 ]]; then
		tap_ok 0 "$6"
	else
		tap_ok 1 "$6"
		echo "#   got pass=$J_PASS skip=$J_SKIP fail=$J_FAIL why='$J_WHY'"
		echo "#   wanted pass=$2 skip=$3 fail=$4 why=~/$5/"
		sed 's/^/#   | /' "$T/$1.out" | head -20
	fi
}
script() { cat >"$T/$1.sh"; }

# ---- the control: a script that does everything right passes, and only passes
script good <<'S'
echo "ok 1 - one"; echo "ok 2 - two"; echo "1..2"
S
expect good 2 0 0 '^$' "a script with a matching plan, all ok and exit 0 passes"

# ---- 1. exit codes and plans
script exits_nonzero <<'S'
echo "ok 1 - one"; echo "ok 2 - two"; echo "1..2"; exit 3
S
expect exits_nonzero 2 0 1 'exit status 3' "all ok but exit status 3: fails, naming the exit status"

script short_plan <<'S'
echo "1..5"; echo "ok 1 - one"; echo "ok 2 - two"; echo "ok 3 - three"
S
expect short_plan 3 0 1 'plan 1\.\.5 but 3 results' "a plan of 5 with 3 results (the script stopped early): fails"

script long_plan <<'S'
echo "ok 1"; echo "ok 2"; echo "ok 3"; echo "1..2"
S
expect long_plan 3 0 1 'plan 1\.\.2 but 3 results' "more results than the plan: fails"

script no_plan <<'S'
echo "ok 1 - one"; echo "ok 2 - two"
S
expect no_plan 2 0 1 'no plan' "results but no plan: fails"

script two_plans <<'S'
echo "1..1"; echo "ok 1"; echo "1..1"
S
expect two_plans 1 0 1 '2 plans' "two plans: fails"

script empty_plan <<'S'
echo "1..0"
S
expect empty_plan 0 0 1 'without a SKIP reason' "an empty plan with no reason: fails"

script killed <<'S'
echo "ok 1 - one"; echo "1..1"; kill -9 $$
S
expect killed 1 0 1 'killed by signal 9' "all ok, then killed: fails, naming the signal"

script hangs <<'S'
echo "ok 1 - one"; echo "1..1"; sleep 60
S
expect hangs 1 0 1 'timed out' "all ok, then hangs past its timeout: fails as timed out" 2

script bails <<'S'
echo "1..2"; echo "ok 1"; echo "Bail out! the server did not start"; echo "ok 2"
S
expect bails 2 0 1 'bailed out' "a bail-out: fails"

script not_ok <<'S'
echo "ok 1"; echo "not ok 2 - broken"; echo "1..2"; exit 1
S
expect not_ok 1 0 2 '1 not ok; exit status 1' "a not ok: one failure for it, one for the exit status"

script sanitizer <<'S'
echo "ok 1"; echo "1..1"; echo "==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x1" >&2
S
expect sanitizer 1 0 1 'sanitizer report' "a sanitizer report in the output: fails even with all ok and exit 0"

tap_judge "$T/no-such-output" 0
[ "$J_FAIL" = 1 ] && [ "$J_PASS" = 0 ] && [[ $J_WHY == "no output to judge"* ]]
tap_ok $? "a script whose output is gone fails (and the judge itself survives it)"

# ---- a crashing C unit binary: test/unit/run.sh runs every binary through tap_binary
cat >"$T/crash.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
	char *p = malloc(4);
	printf("ok 1 - before the crash\nok 2 - still fine\n");
	fflush(stdout);
	if (argc > 1 && strcmp(argv[1], "segv") == 0)
		*(volatile int *) 0 = 1;	/* no sanitizer: the kernel kills it */
	free(p);
	p[0] = 'x';				/* ASan: heap-use-after-free, then exit */
	printf("ok 3 - never printed\n1..3\n");
	return 0;
}
C
cc=${CC:-cc}
if $cc -g -fsanitize=address,undefined -fno-sanitize-recover=all -o "$T/crash_asan" "$T/crash.c" 2>"$T/cc.log" &&
	$cc -g -o "$T/crash_plain" "$T/crash.c" 2>>"$T/cc.log"; then
	script unit_asan <<S
. "$SRC/test/lib/tap.sh"
tap_binary crash "$T/crash_asan"
tap_done
S
	expect unit_asan 2 0 3 'exit status 1; sanitizer report' "a unit binary that aborts under ASan after 2 ok: its run fails (and the script exits non-zero)"
	grep -qE '^not ok [0-9]+ - crash ran to its end \(a sanitizer report, exit status 1, no plan after 2 results\)' "$T/unit_asan.out"
	tap_ok $? "tap_binary names the binary and why: sanitizer report, exit status, no plan"
	script unit_segv <<S
. "$SRC/test/lib/tap.sh"
tap_binary crash "$T/crash_plain" segv
tap_done
S
	expect unit_segv 2 0 2 'exit status 1' "a unit binary killed by SIGSEGV after 2 ok: fails"
	grep -qE '^not ok [0-9]+ - crash ran to its end \(killed by signal 11, no plan after 2 results\)' "$T/unit_segv.out"
	tap_ok $? "tap_binary names the signal"
else
	tap_ok 1 "build the crashing test binaries"; sed 's/^/# /' "$T/cc.log"
	tap_ok 1 "(skipped: no binary)"; tap_ok 1 "(skipped: no binary)"; tap_ok 1 "(skipped: no binary)"
fi

# ---- 4. a comparison of two empty results is not "nothing changed"
script empty_vs_empty <<S
. "$SRC/test/lib/tap.sh"
before=\$(false); after=\$(false)
tap_same "\$before" "\$after" "nothing changed"
tap_done
S
expect empty_vs_empty 0 0 2 '1 not ok; exit status 1' "tap_same on two empty sides fails"
script same_nonempty <<S
. "$SRC/test/lib/tap.sh"
tap_same "a|1" "a|1" "nothing changed"
tap_same "a|1" "a|2" "something changed"
tap_done
S
expect same_nonempty 1 0 2 '1 not ok' "tap_same passes on equal non-empty sides, fails on different ones"

# ---- 2. one part of the stand-in's check (test/standin/test.sh): a part that exits non-zero
# with all its results, or prints fewer than it declared, adds a failing result
: >"$T/parts"
tap_part "$T/parts" "exits 1" 2 bash -c 'echo "ok - a"; echo "ok - b"; exit 1'
tap_part "$T/parts" "short" 3 bash -c 'echo "ok - c"; echo "ok - d"'
tap_part "$T/parts" "times out" 1 timeout 1 bash -c 'echo "ok - e"; sleep 10'
tap_part "$T/parts" "good" 1 bash -c 'echo "ok - f"'
[ "$(grep -c '^not ok - ' "$T/parts")" = 3 ] &&
	grep -qx 'not ok - exits 1 ran to its end: exit status 1, 2 of its 2 results' "$T/parts" &&
	grep -qx 'not ok - short ran to its end: exit status 0, 2 of its 3 results' "$T/parts" &&
	grep -qx 'not ok - times out ran to its end: exit status 124 (timed out), 1 of its 1 results' "$T/parts" &&
	grep -qx 'ok - good ran to its end (1 results, exit status 0)' "$T/parts"
rc=$?
tap_ok $rc "tap_part fails a part that exits 1 with all ok, one short of its results, one timed out; passes a good one"
[ $rc = 0 ] || sed 's/^/#   | /' "$T/parts"

# the same query in two databases (test/upgrade/run.sh's policies and catalog): a query that
# fails, or answers nothing, in both must not compare equal
script same_query_fails <<S
. "$SRC/test/lib/tap.sh"
q() { false; }
tap_same_query old new "SELECT" 1 "identical"
tap_done
S
expect same_query_fails 0 0 2 '1 not ok; exit status 1' "tap_same_query fails when the query fails in both databases"
grep -q '^#   the query failed (exit status 1 in old, 1 in new)' "$T/same_query_fails.out"
tap_ok $? "... and says the query failed"
script same_query_empty <<S
. "$SRC/test/lib/tap.sh"
q() { :; }
tap_same_query old new "SELECT" 1 "identical"
q() { printf 'fn a\nfn b\n'; }
tap_same_query old new "SELECT" 3 "identical, at least 3 lines"
tap_done
S
expect same_query_empty 0 0 3 '2 not ok; exit status 1' "tap_same_query fails on two empty answers, and on answers shorter than the minimum"
script same_query <<S
. "$SRC/test/lib/tap.sh"
q() { printf 'fn a\nfn b\n'; }
tap_same_query old new "SELECT" 2 "identical"
q() { echo "fn \$1"; }
tap_same_query old new "SELECT" 1 "different"
tap_done
S
expect same_query 1 0 2 '1 not ok; exit status 1' "tap_same_query passes on equal answers, fails on different ones"

script todo <<'S'
echo "ok 1"; echo "not ok 2 - a known gap # TODO issue 9"; echo "1..2"
S
expect todo 1 0 0 '^$' "a not ok marked TODO (a known gap) is no failure"
[ "$J_TODO" = 1 ]
tap_ok $? "... and is counted as a TODO"

# ---- 8. skips are counted apart and must be written down with a reason
script skips <<'S'
echo "ok 1 - one"; echo "ok 2 # SKIP not here"; echo "ok 3 # skip nor here"; echo "1..3"
S
expect skips 1 2 0 '^$' "a result with a SKIP directive counts as a skip, not a pass"
script skip_all <<'S'
echo "1..0 # SKIP needs something"
S
expect skip_all 0 1 0 '^$' "a script that skips itself counts as one skip"
cat >"$T/expected-skips" <<'E'
# pass script what count reason
sanitize test/http/run.sh skip 1 a reason
normal test/e2e/x.sh skip 2
normal test/e2e/y.sh todo 1 issue 9: a known gap
E
[ "$(tap_allowed_skips "$T/expected-skips" sanitize test/http/run.sh)" = 1 ] &&
	[ "$(tap_allowed_skips "$T/expected-skips" normal test/http/run.sh)" = 0 ] &&
	[ "$(tap_allowed_skips "$T/expected-skips" normal test/e2e/x.sh)" = 0 ]
tap_ok $? "expected skips: allowed per pass and script, and only with a reason"
# TODOs are capped the same way: a skip allowance is no TODO allowance, and the reverse
[ "$(tap_allowed_skips "$T/expected-skips" normal test/e2e/y.sh todo)" = 1 ] &&
	[ "$(tap_allowed_skips "$T/expected-skips" normal test/e2e/y.sh)" = 0 ] &&
	[ "$(tap_allowed_skips "$T/expected-skips" sanitize test/http/run.sh todo)" = 0 ] &&
	[ "$(tap_allowed_skips "$T/expected-skips" normal test/e2e/x.sh todo)" = 0 ]
tap_ok $? "expected TODOs: allowed per pass and script, apart from skips"
# test/run.sh holds every script's and pgTAP file's skips and TODOs to those allowances
grep -q 'tap_allowed_skips "$SRC/test/expected-skips" "$mode" "$1" todo)' "$SRC/test/run.sh" &&
	[ "$(grep -c 'count_skips "' "$SRC/test/run.sh")" = 2 ]
tap_ok $? "test/run.sh caps the TODOs as it caps the skips, for TAP scripts and pgTAP files"

# ---- pgTAP's skip() and todo(): pg_prove counts them as passes, test/run.sh must not
cat >"$T/prove.out" <<'E'
/src/test/pgtap/a.sql .. 
1..4
ok 1 - fine
ok 2 # SKIP no network
ok 3 - # skip nor here
not ok 4 - a known gap # TODO issue 9
#   Failed (TODO) test 4: "a known gap"
ok
/src/test/pgtap/b.sql .. 
1..2
ok 1 - fine
ok 2 - fine # comment
ok
/src/test/pgtap/c.sql .. 
1..1
ok 1 - passes now # TODO issue 10
ok
All tests successful.
Files=3, Tests=7,  0 wallclock secs
Result: PASS
E
[ "$(tap_prove_counts "$T/prove.out" | tr '\n' ';')" = "/src/test/pgtap/a.sql 2 1;/src/test/pgtap/c.sql 0 1;" ]
tap_ok $? "pg_prove's verbose output: skips and TODOs counted per file (a: 2 skips, 1 TODO; c: 1 TODO)"

# ---- the runner uses these and nothing else to judge a TAP script
n=$(grep -c 'tap_judge "\$out" "\$rc"' "$SRC/test/run.sh")
! grep -qE "grep -c[E]* '\^ok " "$SRC/test/run.sh" && [ "$n" = 1 ]
tap_ok $? "test/run.sh judges every TAP script through tap_judge (one place, no ad hoc counting)"

# ---- the summary is the last thing test/run.sh prints on every way out (an early exit after a
# failed build or cluster start too): it is printed once, by the EXIT trap's function
fin=$(sed -n '/^finish() {/,/^}/p' "$SRC/test/run.sh")
[ "$(grep -c 'passed, \$FAIL failed' "$SRC/test/run.sh")" = 1 ] && echo "$fin" | grep -q 'passed, \$FAIL failed' &&
	echo "$fin" | tail -2 | head -1 | grep -q 'passed, \$FAIL failed' && grep -qx 'trap finish EXIT' "$SRC/test/run.sh"
tap_ok $? "test/run.sh prints 'N skipped' and 'N passed, N failed' last, from its EXIT trap only"

# ---- 9. a clone stands on its own: nothing reads a shared/ directory beside the repository
# (test/run.sh also hides one behind an empty tmpfs when it can).  Comments and the docs may
# name it; code may not.
files=$(cd "$SRC" && { git ls-files -co --exclude-standard 2>/dev/null || find . -type f -printf '%P\n'; } |
	grep -vE '(^|/)node_modules/|\.md$|^test/selftest/run\.sh$')
refs=$(cd "$SRC" && echo "$files" | xargs -r -d '\n' grep -nE "\.\./shared|/work/shared|MLPLAT_SHARED|VALIDATE_MANIFEST|'shared', *'(schemas|tools)'" 2>/dev/null |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(#|//|--|\*)' | grep -vE 'unset MLPLAT_SHARED VALIDATE_MANIFEST|# hides, never reads$')
[ -z "$refs" ] && [ -n "$files" ]
tap_ok $? "no runtime reference to ../shared in the repository ($(echo "$files" | wc -l) files read)"
[ -n "$refs" ] && echo "$refs" | sed 's/^/#   /'
[ -x "$SRC/test/tools/validate-manifest" ] && [ -s "$SRC/test/schemas/kserve-inferenceservice-v1beta1.json" ] &&
	[ -s "$SRC/test/schemas/argo-workflow-v1alpha1.json" ] && grep -q kserve-inferenceservice-v1beta1.json "$SRC/test/schemas/SOURCES.md"
tap_ok $? "the repository carries its validator and the CRD schemas, with their sources"

tap_done
