# test/lib/stack.sh — the one way a benchmark (bench/*/run.sh) gets a private PostgreSQL with
# mlplat and, when it needs one, the stand-in.  Set SRC (the source tree) and source this:
#
#   stack_init TAG           # fresh $WORK (/tmp/mlplat-bench-TAG.XXXXXX), build SRC (or
#                            # BUILD=dir) into it; at exit stop everything and remove $WORK
#                            # (under test/run.sh: its binaries, $WORK in its scratch dir)
#   stack_standin            # start the stand-in in $WORK/standin (STANDIN_READY_MS,
#                            # STANDIN_SEED); STANDIN_CONF: the settings that point mlplat at it
#   stack_start [LINES...]   # start the cluster with postgresql.conf LINES (pass
#                            # "${MLPLAT_CONF[@]}" and "${STANDIN_CONF[@]}" as wanted);
#                            # exports PGHOST PGPORT PGUSER, sets PORT
#   stack_db DB [EXT...]     # CREATE DATABASE DB and CREATE EXTENSION each EXT in it
#
# Each step prints what went wrong (the build or server log) and exits on failure.  PSQL is
# the private psql, unaligned and quiet; q DB SQL, wait_for and the stand-in helpers (admin,
# kube, standin_artifact, standin_connect ...) come from tap.sh and standin.sh.  The e2e
# scripts under test/run.sh get their cluster from it and start from test/lib/e2e.sh.
. "$SRC/test/lib/cluster.sh"
. "$SRC/test/lib/tap.sh"
. "$SRC/test/lib/standin.sh"

stack_init() {
	if [ -n "${MLPLAT_TEST_BIN:-}" ]; then
		# under test/run.sh (bench/soak as a test): its installation, no build of our own
		WORK=$(mktemp -d "${MLPLAT_TEST_WORK:-/tmp}/$1.XXXXXX")
		chmod 755 "$WORK"
		chown "$RUNAS" "$WORK" 2>/dev/null
		BIN=$MLPLAT_TEST_BIN
	else
		cluster_init "$(mktemp -d "/tmp/mlplat-bench-$1.XXXXXX")"
	fi
	PSQL="$BIN/psql -qXAt -v ON_ERROR_STOP=1"
	on_exit stack_remove_work
	on_exit cluster_stop_all
	[ -n "${MLPLAT_TEST_BIN:-}" ] || cluster_build || { cat "$WORK/build.log"; exit 1; }
}

# $WORK goes at exit unless STACK_KEEP_WORK is set (a script that wants the evidence of a
# failed run sets it until it knows the run passed)
stack_remove_work() {
	if [ -z "${STACK_KEEP_WORK:-}" ]; then rm -rf "$WORK"; else echo "# work directory kept: $WORK"; fi
}

stack_standin() {
	on_exit 'standin_stop "$WORK/standin"'
	standin_start "$WORK/standin" || { echo "stand-in did not start" >&2; exit 1; }
}

stack_start() {
	PORT=$(free_port)
	cluster_start "$WORK/data" "$PORT" "$@" || { cat "$WORK/data.log"; exit 1; }
	export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres
}

stack_db() {
	local db=$1 e
	shift
	$PSQL -d postgres -c "CREATE DATABASE $db" >/dev/null || exit 1
	for e in "$@"; do
		$PSQL -d "$db" -c "SET client_min_messages = error" -c "CREATE EXTENSION $e" >/dev/null || exit 1
	done
}
