# test/lib/writeback.sh — stop a reconciler's leader between an external write and its
# write-back, deterministically.  Source after tap.sh/cluster.sh/standin.sh.
#
#   hold_rule JSON            # a stand-in hold rule (see test/standin/README.md); prints its id
#   wait_held N [SECONDS]     # until N requests are parked at the stand-in
#   release_holds [drop]      # let them go (applied), or drop them (never applied)
#   workers_pause DB / workers_resume DB
#   leader_kill DB KIND       # terminate KIND's leader (workers paused: no successor acts)
#   wait_new_leader DB KIND OLD_EPOCH [SECONDS]
#   passes_after DB KIND N    # wait until KIND's leader has run N more passes
#   ledger_of DB KIND NOTE    # the ledger rows about one object: "ACTION:OUTCOME ..." in order

hold_rule() {
	admin POST faults "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rules"][0]["id"])'
}

wait_held() {
	local deadline=$((SECONDS + ${2:-20})) n
	while :; do
		n=$(admin GET holds | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
		[ "$n" = "$1" ] && return 0
		((SECONDS >= deadline)) && { echo "# waited for $1 held requests; $n held"; return 1; }
		sleep 0.1
	done
}

release_holds() {
	if [ "${1:-}" = drop ]; then admin POST holds/release '{"drop": true}'; else admin POST holds/release '{}'; fi >/dev/null
}

workers_pause() {
	q "$1" "ALTER SYSTEM SET mlplat.workers_enabled = off" >/dev/null
	q "$1" "SELECT pg_reload_conf()" >/dev/null
	# a standby reads the reload at the top of its loop, which it reaches every
	# mlplat.leader_retry_interval (250 ms) while it waits for the leader lock: after
	# this, none of them acts when it wins the lock
	sleep 2
}

workers_resume() {
	q "$1" "ALTER SYSTEM RESET mlplat.workers_enabled" >/dev/null
	q "$1" "SELECT pg_reload_conf()" >/dev/null
}

leader_kill() {
	q "$1" "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM mlplat.reconciler_health
	         WHERE kind = '$2' AND role IN ('leader', 'idle')" >/dev/null
}

wait_new_leader() {
	wait_for "$1" "SELECT epoch > $3 FROM mlplat.leader_epochs WHERE kind = '$2'" t "${4:-30}"
}

passes_after() {
	local now
	now=$(q "$1" "SELECT coalesce(max(passes), 0) FROM mlplat.reconciler_health WHERE kind = '$2' AND role = 'leader'")
	wait_for "$1" "SELECT coalesce(max(passes), 0) >= $now + $3 FROM mlplat.reconciler_health WHERE kind = '$2' AND role = 'leader'" t 30
}

ledger_of() {
	q "$1" "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger
	         WHERE kind = '$2' AND detail->>'note' = '$3'"
}
