#!/usr/bin/env bash
# test/style/run.sh — house style of the C tree, as TAP.
#   1. every .c/.h file (tracked, or new and not ignored) is as clang-format-14 formats it (.clang-format);
#   2. every ereport(ERROR|FATAL|PANIC) names an errcode (a SQLSTATE a client
#      can act on; elog stays for "cannot happen" internal errors);
#   3. no empty comment block;
#   4. one set-up for scripts and benchmarks: every test/e2e script starts from
#      test/lib/e2e.sh and sets no EXIT trap of its own (on_exit), and no bench
#      script builds or starts a cluster but through test/lib/stack.sh;
#   5. one JSON model (docs/reconcilers.md): no code reads PostgreSQL's private
#      on-disk formats (jsonb's JEntry and JB_/JBE_ layout macros, numeric's
#      header, getJsonbOffset/Length), and no code parses JSON with
#      PostgreSQL's parser (pg_parse_json, makeJsonLexContext*): remote bodies
#      go through our strict parser, jsonb through its public iterator;
#   6. every cast in SQL the C code runs names its schema (::pg_catalog.jsonb,
#      not ::jsonb): workers pin search_path, and a qualified cast does not
#      depend on that pin (issue 18, finding 8);
#   7. every test script asserts the outcome of its waits, and compares command
#      outputs ("nothing changed") with tap_same, never tap_is
#      (test/style/shell_checks.py);
#   8. probes are made through the API in the tests and benches (issue 15, acceptance 15):
#      no INSERT, UPDATE or DELETE of mlplat.lab_probes in sql/*.sql, test/ or bench/ but
#      one whose comment, within the three lines above it, says why it is written by hand.
# Each check is first run on a planted bad file and must fail there, so a
# check that can no longer fail is caught too.  Needs no cluster.
set -u
cd "$(dirname "$0")/../.."
. test/lib/tap.sh
T=$(mktemp -d /tmp/mlplat-style.XXXXXX)
trap 'rm -rf "$T"' EXIT
CF=${CLANG_FORMAT:-clang-format-14}

# check_format FILE... — lists the files clang-format would change
check_format() {
	local f bad=0
	for f in "$@"; do
		"$CF" --style=file:"$PWD/.clang-format" --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "# not formatted: $f (clang-format-14 -i $f)"; bad=1; }
	done
	return $bad
}
# check_errcode FILE... — lists each ereport(ERROR|FATAL|PANIC, ...) without errcode(
check_errcode() {
	python3 - "$@" <<'PY'
import re, sys
bad = 0
for f in sys.argv[1:]:
    s = open(f, encoding="utf-8").read()
    for m in re.finditer(r"\bereport\s*\(\s*(ERROR|FATAL|PANIC)\b", s):
        k, depth = s.index("(", m.start()) + 1, 1
        start = k
        while depth and k < len(s):
            depth += {"(": 1, ")": -1}.get(s[k], 0)
            k += 1
        if "errcode(" not in s[start:k]:
            bad += 1
            print("# no errcode: %s:%d" % (f, s.count("\n", 0, m.start()) + 1))
sys.exit(1 if bad else 0)
PY
}
# check_comments FILE... — lists empty comment blocks
check_comments() {
	python3 - "$@" <<'PY'
import re, sys
bad = 0
for f in sys.argv[1:]:
    s = open(f, encoding="utf-8").read()
    for m in re.finditer(r"/\*[\s*]*\*/", s):
        bad += 1
        print("# empty comment: %s:%d" % (f, s.count("\n", 0, m.start()) + 1))
sys.exit(1 if bad else 0)
PY
}
# check_json_model FILE... — lists code (comments aside) that reads PostgreSQL's private
# formats or parses JSON with its parser
check_json_model() {
	python3 - "$@" <<'PY'
import re, sys
bad = 0
rule = re.compile(r"\b(JEntry|JBE_\w+|JB_\w+|getJsonbOffset|getJsonbLength|NUMERIC_(?:SIGN|DSCALE|WEIGHT|NDIGITS|DIGITS|HEADER|IS_SHORT|SHORT|NEG|POS|NAN|PINF|NINF|SPECIAL|IS_SPECIAL|FLAGBITS)\w*|pg_parse_json\w*|makeJsonLexContext\w*)\b")
for f in sys.argv[1:]:
    s = open(f, encoding="utf-8").read()
    # blank out comments, keeping line numbers
    s = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), s, flags=re.S)
    s = re.sub(r"//[^\n]*", "", s)
    for m in rule.finditer(s):
        bad += 1
        print("# PostgreSQL internals (%s): %s:%d" % (m.group(1), f, s.count("\n", 0, m.start()) + 1))
sys.exit(1 if bad else 0)
PY
}
# check_sql_casts FILE... — lists a cast to an unqualified type inside a C string literal
check_sql_casts() {
	python3 - "$@" <<'PY'
import re, sys
bad = 0
lit = re.compile(r'"(?:[^"\\\n]|\\.)*"')
cast = re.compile(r"::\s*([A-Za-z_]\w*)\b(?![.\w])")
for f in sys.argv[1:]:
    s = open(f, encoding="utf-8").read()
    s = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), s, flags=re.S)
    for l in lit.finditer(s):
        for m in cast.finditer(l.group(0)):
            bad += 1
            print("# unqualified cast ::%s: %s:%d" % (m.group(1), f, s.count("\n", 0, l.start()) + 1))
sys.exit(1 if bad else 0)
PY
}

# check_e2e_setup FILE... — lists e2e scripts that do not start from test/lib/e2e.sh,
# source what it loads themselves, or set an EXIT trap (which would drop on_exit's)
check_e2e_setup() {
	local f bad=0
	for f in "$@"; do
		grep -qxF '. "$(dirname "$0")/../lib/e2e.sh"' "$f" || { echo "# not from test/lib/e2e.sh: $f"; bad=1; }
		grep -nE '^[^#]*(lib/(tap|cluster|standin)\.sh|\btrap\b.*\bEXIT\b)' "$f" | sed "s|^|# own set-up: $f:|" | grep . && bad=1
	done
	return $bad
}
# check_bench_setup FILE... — lists bench scripts that make a cluster without test/lib/stack.sh
check_bench_setup() {
	grep -nE '^[^#]*\b(cluster_init|initdb)\b' "$@" | sed 's/^/# own cluster set-up: /' | grep . && return 1
	return 0
}

# check_probe_writes FILE... — lists each hand-written lab_probes row write without a comment
# "written by hand" (the justification) within the three lines above it
check_probe_writes() {
	python3 - "$@" <<'PY'
import re, sys
bad = 0
for f in sys.argv[1:]:
    lines = open(f, encoding="utf-8").read().split("\n")
    for i, l in enumerate(lines):
        if re.search(r"(?i)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+mlplat\.lab_probes\b", l) \
           and not any("written by hand" in x for x in lines[max(0, i - 3):i]):
            bad += 1
            print("# a probe written by hand (use mlplat.start_lab_probe): %s:%d" % (f, i + 1))
sys.exit(1 if bad else 0)
PY
}

if ! command -v "$CF" >/dev/null; then
	echo "Bail out! $CF is not installed (scripts/setup.sh installs it)"
	exit 1
fi
mapfile -t FILES < <(git ls-files --cached --others --exclude-standard '*.c' '*.h') # new files too: they are about to be committed

# the planted bad file: unformatted, an ereport(ERROR) without errcode, an empty comment
cat >"$T/bad.c" <<'C'
/*
 */
static int f(int x) { if (x) ereport(ERROR, (errmsg("no code %d", f(x)))); return 0; }
C
check_format "$T/bad.c" >/dev/null
tap_ok $((! $?)) "the format check fails on an unformatted file"
check_errcode "$T/bad.c" >/dev/null
tap_ok $((! $?)) "the errcode check fails on an ereport(ERROR) without errcode"
check_comments "$T/bad.c" >/dev/null
tap_ok $((! $?)) "the comment check fails on an empty comment block"
# planted: what src/json/jsonb.c and src/rollout/evidence_jsonb.c did before
cat >"$T/jentry.c" <<'C'
static int k(JsonbContainer *jc, int i) { JEntry e = jc->children[i]; return JBE_ISSTRING(e); }
C
cat >"$T/lexer.c" <<'C'
/* JEntry in a comment is fine */
static bool ok(char *s) { return pg_parse_json(makeJsonLexContextCstringLen(s, strlen(s), 6, true), &nullSemAction) == 0; }
C
check_json_model "$T/jentry.c" >/dev/null
tap_ok $((! $?)) "the JSON model check fails on code that walks JEntry offsets"
check_json_model "$T/lexer.c" >/dev/null
tap_ok $((! $?)) "the JSON model check fails on code that parses with pg_parse_json"
cat >"$T/cast.c" <<'C'
/* $1::jsonb in a comment is fine */
static const char *q = "SELECT mlplat.f($1::pg_catalog.text, $2::mlplat.k)";
static const char *r = "SELECT mlplat._lab_observe_nodes($1::jsonb)";
C
check_sql_casts "$T/cast.c" >/dev/null
tap_ok $((! $?)) "the SQL cast check fails on an unqualified ::jsonb in a string"

# planted scripts: the old e2e preamble with its own trap; a bench with its own initdb
printf '%s\n' 'set -u' '. "$(dirname "$0")/../lib/tap.sh"' 'tap_require_cluster' "trap 'standin_stop \$SD' EXIT" >"$T/old_e2e.sh"
printf '%s\n' 'set -u' '. "$(dirname "$0")/../lib/e2e.sh"' "trap 'rm -rf \$T' EXIT" >"$T/trap_e2e.sh"
printf '%s\n' 'W=$(mktemp -d)' '"$B/initdb" -D "$W/data"' >"$T/bench.sh"
check_e2e_setup "$T/old_e2e.sh" >/dev/null
tap_ok $((! $?)) "the e2e set-up check fails on the old preamble"
check_e2e_setup "$T/trap_e2e.sh" >/dev/null
tap_ok $((! $?)) "the e2e set-up check fails on a script's own EXIT trap"
check_bench_setup "$T/bench.sh" >/dev/null
tap_ok $((! $?)) "the bench set-up check fails on a bench that runs initdb itself"
# planted: a probe faked by hand, then the same with its justification (must pass)
printf '%s\n' 'SELECT 1;' 'BEGIN; UPDATE mlplat.lab_probes SET status = '"'FAILED'"';' >"$T/probe.sql"
printf '%s\n' '-- retention needs an age the API cannot give: written by hand' 'INSERT INTO mlplat.lab_probes VALUES (1);' >"$T/probe_ok.sql"
out=$(check_probe_writes "$T/probe.sql")
[ $? = 1 ] && [ "$out" = "# a probe written by hand (use mlplat.start_lab_probe): $T/probe.sql:2" ]
tap_ok $? "the probe check fails on a probe status written by hand, naming its line"
check_probe_writes "$T/probe_ok.sql"
tap_ok $? "the probe check passes a write whose comment says why it is by hand (the control)"

# planted scripts: a wait whose outcome is dropped, a function ending in a wait called the
# same way, and two "nothing changed" checks that pass when both sides are empty; and the
# control, every way of consuming a wait, which must pass (so the check is not just failing)
printf '%s\n' 'wait_for $DB "SELECT status FROM t" READY 30' 'tap_is "$(q $DB "SELECT 1")" 1 "then"' >"$T/wait_dropped.sh"
printf '%s\n' 'ready() {' '	wait_for $DB "SELECT' '	  status FROM t" READY 30' '}' 'ready' 'tap_ok 0 "then"' >"$T/wait_fn.sh"
printf '%s\n' 'before=$(count)' 'tap_is "$(count)" "$before" "nothing changed"' >"$T/same_var.sh"
printf '%s\n' 'tap_is "$(q a "$SQL")" "$(q b "$SQL")" "the same in both"' >"$T/same_cmd.sh"
cat >"$T/waits_ok.sh" <<'S'
ready() { wait_for $DB "SELECT 1" 1 10; }
ready
tap_ok $? "ready"
wait_for $DB "SELECT
  1" 1 10
rc=$?
if wait_p "SELECT 1" 1 10; then echo yes; fi
passes_after $DB kind 3 || echo "# stalled"
wait_kube_gone /x 10 && tap_ok 0 "gone"
until wait_note 3 5; do :; done
cat <<'E'
wait_for $DB "in a heredoc" 1 1
E
tap_same "$before" "$(count)" "nothing changed"
tap_is "$(count)" 3 "a literal"
S
shell_checks() { python3 test/style/shell_checks.py "$@"; }
out=$(shell_checks waits "$T/wait_dropped.sh")
[ $? = 1 ] && [ "$out" = "# unasserted wait (wait_for): $T/wait_dropped.sh:1" ]
tap_ok $? "the wait check fails on a wait whose outcome is dropped, naming its line"
out=$(shell_checks waits "$T/wait_fn.sh")
[ $? = 1 ] && [ "$out" = "# unasserted wait (ready): $T/wait_fn.sh:5" ]
tap_ok $? "the wait check fails on a call of a function ending in a wait, its outcome dropped"
shell_checks same "$T/same_var.sh" >/dev/null
tap_ok $((! $?)) "the comparison check fails on tap_is of a command output against a variable"
shell_checks same "$T/same_cmd.sh" >/dev/null
tap_ok $((! $?)) "the comparison check fails on tap_is of two command outputs"
shell_checks waits "$T/waits_ok.sh" && shell_checks same "$T/waits_ok.sh"
tap_ok $? "both checks pass on waits consumed every allowed way and on tap_same (the control)"

check_format "${FILES[@]}"
tap_ok $? "every C file is formatted by .clang-format (${#FILES[@]} files)"
check_errcode "${FILES[@]}"
tap_ok $? "every ereport(ERROR|FATAL|PANIC) has an errcode"
check_comments "${FILES[@]}"
tap_ok $? "no empty comment block"
check_json_model "${FILES[@]}"
tap_ok $? "no code reads PostgreSQL's private jsonb/numeric formats or parses JSON with its parser"
check_sql_casts "${FILES[@]}"
tap_ok $? "every cast in SQL run from C names its schema"
mapfile -t E2E < <(git ls-files 'test/e2e/*.sh')
check_e2e_setup "${E2E[@]}"
tap_ok $? "every e2e script starts from test/lib/e2e.sh and cleans up through on_exit (${#E2E[@]} scripts)"
mapfile -t SH < <(git ls-files 'test/*.sh')
shell_checks waits "${SH[@]}"
tap_ok $? "every wait in a test script has its outcome asserted (${#SH[@]} scripts)"
shell_checks same "${SH[@]}"
tap_ok $? "no test script compares command outputs with tap_is (tap_same fails on an empty side)"
mapfile -t BENCH < <(git ls-files 'bench/*.sh')
check_bench_setup "${BENCH[@]}"
tap_ok $? "no bench script makes a cluster but through test/lib/stack.sh (${#BENCH[@]} scripts)"
mapfile -t PROBES < <(git ls-files 'sql/*.sql' 'test/*.sql' 'test/*.sh' 'test/*.spec' 'bench/*.sh' 'bench/*.sql' | grep -v '^sql/install/\|^sql/upgrade/\|^test/style/')
check_probe_writes "${PROBES[@]}"
tap_ok $? "tests and benches make probes with start_lab_probe, never by hand (${#PROBES[@]} files)"
tap_done
