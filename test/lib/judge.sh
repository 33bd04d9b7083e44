# test/lib/judge.sh — how test/run.sh judges a script that prints TAP.
#
# tap_judge FILE RC reads a script's whole output (stdout and stderr) and its
# exit status and sets
#   J_PASS  results "ok" (not skipped)
#   J_SKIP  results "ok ... # SKIP", or 1 for a script that skipped itself ("1..0 # SKIP")
#   J_FAIL  results "not ok", plus one for each thing below that went wrong
#   J_TODO  results "not ok ... # TODO" (a known gap, tap_todo): neither a pass nor a failure
#   J_WHY   what went wrong, for the runner's FAILED line ("" when nothing)
# A script fails when it exits non-zero (a timeout and a signal are named), prints no
# plan or more than one, runs a different number of tests than its plan says, bails
# out, or prints a sanitizer report.  A script that printed only "ok" lines and then
# died is therefore a failure, not a pass.
#
# test/selftest/run.sh feeds deliberately broken scripts through this function.

tap_judge() {
	local file=$1 rc=$2 counts plans planned results skipall
	J_WHY=
	# No output at all (the file is gone, say): a failure, never an unjudged pass.
	if [ ! -r "$file" ]; then
		J_PASS=0 J_SKIP=0 J_TODO=0 J_FAIL=1 J_WHY="no output to judge (exit status $rc)"
		return 0
	fi
	# One awk pass: results, skips, failures, plan lines, the planned count, bail-outs.
	counts=$(awk '
		/^ok([ \t]|$)/ { r++; if (tolower($0) ~ /#[ \t]*skip/) s++; else p++; next }
		/^not ok([ \t]|$)/ { r++; if (tolower($0) ~ /#[ \t]*todo/) t++; else f++; next }
		/^1\.\.[0-9]+/ { np++; n = substr($0, 4) + 0; if (tolower($0) ~ /#[ \t]*skip/) sa = 1; next }
		/^Bail out!/ { b++ }
		/ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/ { san++ }
		END { printf "%d %d %d %d %d %d %d %d %d\n", p, s, f, r, np, n, b, san, t }' "$file")
	set -- $counts 0 0 0 0 0 0 0 0 0
	J_PASS=$1 J_SKIP=$2 J_FAIL=$3 results=$4 plans=$5 planned=$6 J_TODO=$9
	local bail=$7 san=$8
	skipall=0
	if ((plans == 1 && planned == 0 && results == 0)) && grep -qiE '^1\.\.0[ \t]*#[ \t]*skip' "$file"; then
		skipall=1
		J_SKIP=1
	fi
	_j_bad() { J_FAIL=$((J_FAIL + 1)); J_WHY="${J_WHY:+$J_WHY; }$1"; }
	if ((rc == 124)); then _j_bad "timed out"
	elif ((rc > 128)); then _j_bad "killed by signal $((rc - 128))"
	elif ((rc != 0)); then _j_bad "exit status $rc"
	fi
	if ((plans == 0)); then _j_bad "no plan"
	elif ((plans > 1)); then _j_bad "$plans plans"
	elif ((planned != results)); then _j_bad "plan 1..$planned but $results results"
	elif ((planned == 0 && !skipall)); then _j_bad "plan 1..0 without a SKIP reason"
	fi
	((bail)) && _j_bad "bailed out"
	((san)) && _j_bad "sanitizer report in its output"
	if ((J_FAIL > 0)) && [ -z "$J_WHY" ]; then J_WHY="$J_FAIL not ok"
	elif ((J_FAIL > 0)); then
		local nok=$(grep -E '^not ok([ \t]|$)' "$file" | grep -civE '#[[:space:]]*todo')
		((nok)) && J_WHY="$nok not ok; $J_WHY"
	fi
	unset -f _j_bad
	return 0
}

# tap_allowed_skips FILE MODE SCRIPT [KIND] — how many skips (KIND skip, the default) or
# TODOs (KIND todo) FILE (test/expected-skips) allows SCRIPT in MODE (normal or sanitize);
# a line without a reason allows none.
tap_allowed_skips() {
	awk -v m="$2" -v s="$3" -v k="${4:-skip}" '
		/^[ \t]*(#|$)/ { next }
		$1 == m && $2 == s && $3 == k && NF >= 5 { n = $4 }
		END { print n + 0 }' "$1" 2>/dev/null || echo 0
}

# tap_prove_counts FILE — the results of pg_prove --verbose's output in FILE, per test file:
# prints "FILE SKIPS TODOS" for every test file with a skip ("ok ... # SKIP") or a TODO
# ("not ok ... # TODO", or "ok ... # TODO", passing unexpectedly), so test/run.sh counts
# pgTAP's skip() and todo() apart from passes, as it does for the TAP scripts.
tap_prove_counts() {
	awk '
		/^[^ \t#].*\.sql \.\.+/ { f = $1; next }
		/^(not )?ok [0-9]+/ {
			l = tolower($0)
			if (l ~ /#[ \t]*todo/) t[f]++
			else if (l ~ /^ok/ && l ~ /#[ \t]*skip/) s[f]++
			seen[f] = 1
		}
		END { for (f in seen) if (s[f] + t[f]) printf "%s %d %d\n", f, s[f], t[f] }' "$1" | sort
}
