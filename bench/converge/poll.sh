# bench/converge/poll.sh — sourced by run.sh and cpu.sh: wait until every deployment of a
# project is READY, as cheaply for the server as the bare client's own wait.
# Until poll8 each check was a new psql process and a new backend running count(*) of the
# project's READY rows (8-9 ms at 10,000 deployments: about 1 s of server CPU per converge,
# taken from the converge it measures on a 2-core machine).  Now one psql coprocess serves
# every check, and a check asks first whether any row of the project is still in
# deployments_changed (the partial index of the rows the reconciler acts on: EXISTS stops at
# the first) and counts the READY rows, the end condition as before, only when none is:
# a FAILED row, never in that index, still keeps the wait going as it did.

# converge_wait PROJECT N INTERVAL [HOOK]: returns once count(READY) of PROJECT >= N, checking
# every INTERVAL seconds; HOOK (a shell function) runs after each check that did not end the
# wait.  POLL_CALLS: the checks made.
converge_wait() {
	local p=$1 n=$2 every=$3 hook=${4:-} pid changing ready
	coproc POLL { $PSQL -d mlplat; }
	poll_q "SELECT id FROM mlplat.projects WHERE name = '$p'" || return 1
	pid=$REPLY
	changing="SELECT EXISTS (SELECT FROM mlplat.deployments WHERE (mlplat.deployment_is_changing(status) OR generation <> observed_generation) AND project_id = $pid AND status <> 'READY')"
	ready="SELECT count(*) FROM mlplat.deployments WHERE project_id = $pid AND status = 'READY'"
	POLL_CALLS=0
	# a sleep without a process a check: read times out on a pipe nothing writes to
	exec {POLL_SLEEP}<> <(:)
	while :; do
		POLL_CALLS=$((POLL_CALLS + 1))
		poll_q "$changing" || return 1
		if [ "$REPLY" = f ]; then
			poll_q "$ready" || return 1
			[ "$REPLY" -ge "$n" ] && break
		fi
		[ -n "$hook" ] && "$hook"
		read -rt "$every" -u "$POLL_SLEEP" _
	done
	exec {POLL_SLEEP}<&- {POLL[1]}>&-
	wait "$POLL_PID" 2>/dev/null
	return 0
}

# one statement, one line of result (in REPLY), through the coprocess: HOOK may use it too
poll_q() {
	printf '%s;\n' "$1" >&"${POLL[1]}" && IFS= read -r REPLY <&"${POLL[0]}" ||
		{ echo "converge_wait: the poll session ended" >&2; return 1; }
}
