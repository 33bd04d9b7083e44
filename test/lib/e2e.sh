# test/lib/e2e.sh — the preamble of every test/e2e script, written once.  Start a script with
#
#   set -u
#   . "$(dirname "$0")/../lib/e2e.sh"
#
# It skips the script (TAP "1..0 # SKIP") unless test/run.sh runs it, loads tap.sh,
# cluster.sh and standin.sh, and sets SRC (the source tree), WORK (the run's scratch
# directory), BIN (the run's PostgreSQL binaries) and PSQL.  Then, as the script needs:
#
#   e2e_standin [DB]     # start the stand-in in $SD (set SD first; one TAP result) and, given
#                        # DB, point DB's reconcilers at it; both undone at exit
#   e2e_own_cluster NAME # WORK=$MLPLAT_TEST_WORK/NAME for clusters of the script's own
#                        # (cluster_start), all stopped at exit
#   e2e_standin_cluster NAME [SETTING...]
#                        # e2e_own_cluster NAME with its own stand-in (SD=$WORK/standin) and
#                        # one PostgreSQL cluster at $WORK/data on port $P: the test settings,
#                        # pg_cron in postgres, the stand-in's (STANDIN_CONF), then SETTINGs;
#                        # PGHOST and PGPORT point at it; cluster_start's status (a TAP result
#                        # is the script's to give)
#   on_exit 'COMMAND'    # any other cleanup, run at exit in reverse order (never trap EXIT)
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tap_require_cluster
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$SRC/test/lib/standin.sh"
WORK=$MLPLAT_TEST_WORK
BIN=$MLPLAT_TEST_BIN

e2e_standin() {
	on_exit 'standin_stop "$SD"'
	if ! standin_start "$SD"; then
		tap_ok 1 "stand-in started"
		tap_done
		exit 1
	fi
	tap_ok 0 "stand-in started on port $STANDIN_PORT (S3 on $STANDIN_S3)"
	if [ -n "${1:-}" ]; then
		standin_connect "$1"
		on_exit "standin_disconnect $1"
	fi
}

e2e_own_cluster() {
	WORK=$MLPLAT_TEST_WORK/$1
	mkdir -p "$WORK" && chown "$RUNAS" "$WORK" 2>/dev/null
	on_exit cluster_stop_all
}

e2e_standin_cluster() {
	local rc
	e2e_own_cluster "$1"
	shift
	SD=$WORK/standin
	e2e_standin
	P=$(free_port)
	cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "${STANDIN_CONF[@]}" "$@"
	rc=$?
	export PGHOST=$WORK PGPORT=$P
	return $rc
}

# e2e_watch_cluster NAME PROJECT [SETTING...] — a stand-in cluster whose deployments watch the
# stand-in ends every 2 s (passes every second), database DB=mlplat with the extension, project
# PROJECT READY and the deployments leader observing through its watch (the query WATCHING says
# whether it does): three results.
e2e_watch_cluster() {
	local name=$1 project=$2
	shift 2
	e2e_standin_cluster "$name" "mlplat.resync_interval = '1s'" "mlplat.deployments_watch = on" "$@"
	tap_ok $? "cluster started, connected to the stand-in (the deployments watch on)"
	admin PUT config '{"watchMaxS": 2}' >/dev/null
	q postgres "CREATE DATABASE mlplat" >/dev/null
	DB=mlplat
	q $DB "CREATE EXTENSION mlplat" >/dev/null
	q $DB "SELECT mlplat.create_project('$project', 0)" >/dev/null
	wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$project'" READY 30
	tap_ok $? "a project is READY"
	WATCHING="SELECT status ~ 'watch: ' FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role IN ('leader', 'idle')"
	wait_for $DB "$WATCHING" t 30
	tap_ok $? "the deployments leader observes through its watch"
}
