#!/usr/bin/env bash
# Attack (issue 18, finding 1): leader-lock squatting.  An unprivileged login
# takes every lock SQL lets it name that could stand for mlplat's leader lock
# (both advisory tag forms with the documented class and every kind, shared and
# exclusive, session and transaction level; LOCK TABLE on every mlplat table it
# can see, in the strongest mode it is allowed), holds them, and the leaders of
# every kind are terminated: a standby of every kind must still lead.  Before
# the fix the leader lock was pg_advisory_lock(x'6d6c706c', kind): the squatter
# held it and no replica led until the squatter's session ended.
# Own cluster: it terminates every leader.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster attack_leader
SQUAT_PID=
on_exit '[ -n "$SQUAT_PID" ] && kill "$SQUAT_PID" 2>/dev/null'
P=$(free_port)
cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'"
tap_ok $? "cluster with 2 replicas per kind started"
export PGHOST=$WORK PGPORT=$P
q postgres "CREATE DATABASE mlplat" >/dev/null
q mlplat "CREATE EXTENSION mlplat" >/dev/null
q mlplat "CREATE ROLE squatter LOGIN" >/dev/null
KINDS=$(mlplat_kinds_count)   # one leader per kind (src/kinds.c)
LEADERS="SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')"
wait_for mlplat "$LEADERS" $KINDS 30
tap_ok $? "one leader for each of the $KINDS kinds"

# The squatter's script: everything it can take, then it holds on.
{
	echo "BEGIN;"
	for k in $(seq 0 $((KINDS + 2))); do
		for f in pg_advisory_lock pg_advisory_lock_shared pg_advisory_xact_lock pg_advisory_xact_lock_shared; do
			# the two-key form (field4 = 2): the old leader lock was (x'6d6c706c', kind)
			echo "SELECT $f(x'6d6c706c'::int, $k);"
			# the one-key form (field4 = 1) of the same 64 bits, and of kind alone
			echo "SELECT $f((x'6d6c706c'::bigint << 32) | $k);"
			echo "SELECT $f($k::bigint);"
		done
		echo "SELECT pg_try_advisory_lock(x'6d6c706c'::int, $k), pg_try_advisory_lock($k, x'6d6c706c'::int);"
	done
	# the project lock keys of 0.2.0 too, for good measure
	echo "SELECT pg_advisory_lock(1836871681, 1), pg_advisory_lock(1836871682, 1);"
	# every mlplat relation it can see, in every mode LOCK TABLE allows it
	cat <<'SQL'
DO $$
DECLARE r record; m text; held int := 0;
BEGIN
  FOR r IN SELECT c.oid::regclass AS rel FROM pg_class c
           WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'v', 'p') LOOP
    FOREACH m IN ARRAY ARRAY['ACCESS EXCLUSIVE', 'EXCLUSIVE', 'SHARE ROW EXCLUSIVE', 'SHARE',
                             'SHARE UPDATE EXCLUSIVE', 'ROW EXCLUSIVE', 'ROW SHARE', 'ACCESS SHARE'] LOOP
      BEGIN
        EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE NOWAIT', r.rel, m);
        held := held + 1;
        EXIT;
      EXCEPTION WHEN insufficient_privilege OR lock_not_available OR wrong_object_type THEN NULL;
      END;
    END LOOP;
  END LOOP;
  RAISE NOTICE 'squatter holds table locks on % mlplat relations', held;
END $$;
SQL
	echo "SELECT pg_sleep(120);"
} >"$WORK/squat.sql"
chmod 644 "$WORK/squat.sql"
$MLPLAT_TEST_BIN/psql -qXAt -U squatter -d mlplat -f "$WORK/squat.sql" >"$WORK/squat.out" 2>&1 &
SQUAT_PID=$!
# In the queue for a lock the leader holds (the old leader lock), or done and holding on.
wait_for mlplat "SELECT wait_event_type = 'Lock' OR query LIKE '%pg_sleep%' FROM pg_stat_activity WHERE usename = 'squatter'" t 30
tap_ok $? "the unprivileged login is holding (or queued for) every lock it could name"

old_epochs=$(q mlplat "SELECT string_agg(kind || '=' || epoch, ',' ORDER BY kind) FROM mlplat.leader_epochs")
want=$(q mlplat "SELECT string_agg(kind || '=' || (epoch + 1), ',' ORDER BY kind) FROM mlplat.leader_epochs")
q mlplat "SELECT count(pg_terminate_backend(pid)) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')" >/dev/null
# Generous bound (the usual takeover is tens of milliseconds; bench/runtime measures it):
# a squatted lock would keep every kind leaderless for the squatter's whole session.
wait_for mlplat "SELECT string_agg(kind || '=' || epoch, ',' ORDER BY kind) FROM mlplat.leader_epochs" "$want" 20
tap_ok $? "with the squatter holding all that, every kind has a new leader (epochs $old_epochs -> $want)"
tap_is "$(q mlplat "SELECT count(*) FROM pg_stat_activity WHERE usename = 'squatter'")" 1 "... while the squatter's session is still there"
# (a test kind's leader idles, running no pass, while its SQL is not installed: test/kinds/)
wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health
                  WHERE (role = 'leader' AND last_pass_start > (SELECT max(acquired_at) FROM mlplat.leader_epochs))
                     OR (role = 'idle' AND status LIKE 'extension % (this kind''s SQL) is not installed')" $KINDS 30
tap_ok $? "... and each new leader has run a pass (or idles for want of its kind's SQL)"

# What it held throughout: the leader lock was out of its reach.
HELD="SELECT count(*) >= 48 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE a.usename = 'squatter' AND l.granted AND l.locktype = 'advisory'"
wait_for mlplat "$HELD" t 10
tap_ok $? "the unprivileged login holds 48 or more advisory locks on mlplat's keys (24 tags, shared and exclusive)"
! grep -qiE 'error|denied' "$WORK/squat.out"
tap_ok $? "... and none of its advisory calls was refused"
tap_is "$(q mlplat "SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE a.usename = 'squatter' AND l.granted AND l.locktype = 'relation'
                      AND l.relation IN (SELECT oid FROM pg_class WHERE relnamespace = 'mlplat'::regnamespace)")" t \
	"... and table locks on the mlplat relations it can see ($(grep -o 'holds table locks on [0-9]*' "$WORK/squat.out"))"

tap_is "$(q mlplat "SELECT count(*) FROM pg_locks WHERE locktype = 'userlock' AND granted
                    AND classid = x'6d6c706c'::int::oid AND database = (SELECT oid FROM pg_database WHERE datname = 'mlplat')")" \
	$KINDS "the leaders hold one userlock per kind, a tag no SQL function makes"

# The squatter cannot take over the role by name either: the epoch function is not its to call.
$MLPLAT_TEST_BIN/psql -qXAt -U squatter -d mlplat -c "SELECT mlplat._take_leadership('deployments', pg_backend_pid(), 0)" >"$WORK/take.out" 2>&1
tap_ok "$(grep -q 'permission denied' "$WORK/take.out"; echo $?)" "the squatter may not record an epoch (_take_leadership is not granted)"
tap_done
