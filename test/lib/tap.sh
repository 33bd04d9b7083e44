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

# wait_for DB SQL EXPECTED SECONDS — poll until the query returns EXPECTED
wait_for() {
	local deadline=$((SECONDS + $4)) got
	while :; do
		got=$($PSQL -d "$1" -c "$2" 2>/dev/null)
		[ "$got" = "$3" ] && return 0
		((SECONDS >= deadline)) && { echo "# waited $4 s; last value '$got', wanted '$3'"; return 1; }
		sleep 0.1
	done
}
