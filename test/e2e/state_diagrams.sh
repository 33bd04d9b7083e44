#!/usr/bin/env bash
# test/e2e/state_diagrams.sh — each kind's state machine as drawn in docs/reconcilers.md is
# the one the database enforces: every "<!-- state-machine: FN -->" block there lists exactly
# the rows of mlplat.FN(), in order, and every mlplat.*_transitions() function has a block.
# Needs the test cluster (for the functions), nothing else.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
PSQL=${MLPLAT_TEST_BIN:+$MLPLAT_TEST_BIN/}psql
# STATE_DOCS: more documents that draw machines (the test kinds', test/kinds/README.md,
# when test/e2e/echoes.sh runs this with their functions installed)
DOC=$(mktemp)
cat "$SRC/docs/reconcilers.md" ${STATE_DOCS:-} >"$DOC"
on_exit 'rm -f "$DOC"'

# drawn FN [DOC] — the Mermaid lines of FN's block, trimmed
drawn() {
	awk -v fn="$1" '
		$0 == "<!-- state-machine: " fn " -->" { want = 1; next }
		want && /^```mermaid/ { inside = 1; next }
		inside && /^```/ { exit }
		inside { sub(/^[ \t]+/, ""); print }' "${2:-$DOC}"
}
# code FN — the same lines rendered from the function the trigger checks against
code() {
	echo "stateDiagram-v2"
	"$PSQL" -XAtq -c "SELECT coalesce(t.from_status, '[*]') || ' --> ' || coalesce(t.to_status, '[*]')
	                   FROM mlplat.$1() WITH ORDINALITY t(from_status, to_status, n) ORDER BY t.n"
}

fns=$("$PSQL" -XAtq -c "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace
                        AND p.proname LIKE '\_%\_transitions' ORDER BY 1")
tap_ok "$([ -n "$fns" ] && echo 0 || echo 1)" "the database has state machines to check ($(echo $fns))"
for fn in $fns; do
	d=$(drawn "$fn")
	c=$(code "$fn")
	if [ "$d" = "$c" ]; then
		tap_ok 0 "the docs draw $fn() as the database enforces it ($(($(echo "$c" | wc -l) - 1)) transitions)"
	else
		tap_ok 1 "the docs draw $fn() as the database enforces it"
		diff <(echo "$d") <(echo "$c") | sed 's/^/#   /'
		echo "#   (< drawn, > enforced; paste the enforced lines into the block)"
	fi
done
# blocks that name a function the database does not have
for fn in $(sed -n 's/^<!-- state-machine: \(.*\) -->$/\1/p' "$DOC"); do
	echo "$fns" | grep -qx "$fn"
	tap_ok $? "the drawn machine $fn() exists in the database"
done
# the comparison can fail: a drawing with one transition removed is told apart
first=$(echo "$fns" | head -1)
T=$(mktemp)
awk -v fn="$first" '$0 == "<!-- state-machine: " fn " -->" { m = 1 } m && / --> / && !done { done = 1; next } { print }' "$DOC" >"$T"
[ "$(drawn "$first" "$T")" != "$(code "$first")" ]
tap_ok $? "a drawing missing one transition of $first() does not pass"
rm -f "$T"
tap_done
