#!/usr/bin/env bash
# Retention runs whether pg_cron does or not (issue 18, finding 11).  With pg_cron's
# mlplat-retention job active the projects leader leaves the purge to it (it would run
# twice); with the job gone, the leader purges every mlplat.retention_interval.  Before
# the fix nothing purged anything in a database without the job.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
DB=mlplat
CMD='DO $x$ BEGIN IF pg_catalog.to_regproc('"'"'mlplat.run_retention'"'"') IS NOT NULL THEN PERFORM mlplat.run_retention(); END IF; END $x$'

cleanup() {
	q $DB "DELETE FROM mlplat.reconcile_ledger WHERE controller = 'retention-e2e'" >/dev/null 2>&1
	$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.retention_interval" -c "SELECT pg_reload_conf()" >/dev/null
	# put pg_cron's job back as CREATE EXTENSION made it
	q $DB "SELECT count(*) FROM cron.job WHERE jobname = 'mlplat-retention'" | grep -qx 0 &&
		q $DB "SELECT cron.schedule('mlplat-retention', '17 * * * *', \$c\$$CMD\$c\$)" >/dev/null
}
on_exit cleanup

tap_is "$(q $DB "SELECT count(*) FROM cron.job WHERE jobname = 'mlplat-retention' AND active")" 1 \
	"pg_cron schedules mlplat-retention in this database"
wait_for $DB "SELECT last_run_at IS NOT NULL FROM mlplat.retention_state" t 60
tap_ok $? "the retention job has run once since the extension was created"

# --- with pg_cron's job active, the leader does not run it again, however short the interval
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.retention_interval = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
before=$(q $DB "SELECT last_run_at FROM mlplat.retention_state")
sleep 6
tap_same "$before" "$(q $DB "SELECT last_run_at FROM mlplat.retention_state")" \
	"with pg_cron's job active and a 1 s interval, the leader does not run it a second time"

# --- the job gone (a database without pg_cron's job): the leader purges
q $DB "SELECT cron.unschedule('mlplat-retention')" >/dev/null
tap_is "$(q $DB "SELECT count(*) FROM cron.job WHERE jobname = 'mlplat-retention'")" 0 "pg_cron's job is unscheduled"
q $DB "INSERT INTO mlplat.reconcile_ledger (at, kind, entity, action, outcome, epoch, controller)
       VALUES (now() - interval '400 days', 'projects', 'project', 'APPLY', 'OK', 0, 'retention-e2e'),
              (now(), 'projects', 'project', 'APPLY', 'OK', 0, 'retention-e2e')" >/dev/null
t0=$(q $DB "SELECT clock_timestamp()")
wait_for $DB "SELECT last_run_at > '$t0' AND last_run_by = 'leader projects' FROM mlplat.retention_state" t 60
rc=$?
tap_ok $rc "without the job the projects leader runs the purge"
[ $rc = 0 ] || q $DB "SELECT last_run_at, last_run_by FROM mlplat.retention_state" | sed 's/^/# state: /'
tap_is "$(q $DB "SELECT string_agg(CASE WHEN at < now() - interval '1 day' THEN 'old' ELSE 'new' END, ',') FROM mlplat.reconcile_ledger WHERE controller = 'retention-e2e'")" new \
	"... the ledger row past mlplat.ledger_retention is gone, the recent one stays"
tap_is "$(q $DB "SELECT last_result->>'reconcile_ledger' >= '1' FROM mlplat.retention_state")" t \
	"... and retention_state records what it deleted"
grep -q 'mlplat projects leader ran the retention job' "$MLPLAT_TEST_WORK/server.log"
tap_ok $? "... and the server log says the leader ran it"
n1=$(q $DB "SELECT last_run_at FROM mlplat.retention_state")
wait_for $DB "SELECT last_run_at > '$n1' FROM mlplat.retention_state" t 30
tap_ok $? "... and again after mlplat.retention_interval (1 s here)"
on_exit_run   # the cleanup now, and not again at exit
tap_same "$CMD" "$(q $DB "SELECT command FROM cron.job WHERE jobname = 'mlplat-retention' AND active")" \
	"pg_cron's job is back as CREATE EXTENSION made it"
tap_done
