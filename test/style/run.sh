#!/usr/bin/env bash
# test/style/run.sh — house style of the C tree, as TAP.
#   1. every tracked .c/.h file is as clang-format-14 formats it (.clang-format);
#   2. every ereport(ERROR|FATAL|PANIC) names an errcode (a SQLSTATE a client
#      can act on; elog stays for "cannot happen" internal errors);
#   3. no empty comment block.
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

if ! command -v "$CF" >/dev/null; then
	echo "Bail out! $CF is not installed (scripts/setup.sh installs it)"
	exit 1
fi
mapfile -t FILES < <(git ls-files '*.c' '*.h')

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

check_format "${FILES[@]}"
tap_ok $? "every C file is formatted by .clang-format (${#FILES[@]} files)"
check_errcode "${FILES[@]}"
tap_ok $? "every ereport(ERROR|FATAL|PANIC) has an errcode"
check_comments "${FILES[@]}"
tap_ok $? "no empty comment block"
tap_done
