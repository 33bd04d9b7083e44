# test/lib/cluster.sh — a private PostgreSQL 15 with mlplat, for tests, the
# demo and the benchmarks.  Source it, then:
#
#   cluster_init WORKDIR            # sets WORK STAGE BIN PGXS_DIR
#   cluster_build [make args...]    # build SRC (or BUILD) and install into $STAGE
#   cluster_start DATADIR PORT [postgresql.conf lines...]
#   cluster_stop_all                # immediate stop of everything started
#   on_exit 'COMMAND'               # run COMMAND when the script exits (last registered first)
#
# PostgreSQL refuses to run as root, so servers run as $RUNAS (postgres).
# PostgreSQL is relocatable: binaries copied under $STAGE find the share and
# lib directories next to them, so a DESTDIR install there is a private
# installation that needs no root and collides with nothing.

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
RUNAS=${RUNAS:-postgres}
CLUSTER_DIRS=()

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u "$RUNAS" -- "$@"; else "$@"; fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cluster_init() {
	WORK=$1
	mkdir -p "$WORK"
	chmod 755 "$WORK"
	STAGE=$WORK/stage
	BIN=$STAGE$($PG_CONFIG --bindir)
	PGXS_DIR=$STAGE$($PG_CONFIG --pkglibdir)/pgxs
	BUILD=${BUILD:-$SRC}
}

# cluster_build [make variable assignments...] — output in $WORK/build.log
cluster_build() {
	local pglib pgshare
	pglib=$($PG_CONFIG --pkglibdir)
	pgshare=$($PG_CONFIG --sharedir)
	make -C "$BUILD" -s PG_CONFIG="$PG_CONFIG" "$@" >"$WORK/build.log" 2>&1 || return 1
	mkdir -p "$STAGE/usr/lib/postgresql" "$STAGE/usr/share/postgresql"
	cp -a "$(dirname "$pglib")" "$STAGE/usr/lib/postgresql/"
	cp -a "$pgshare" "$STAGE/usr/share/postgresql/"
	make -C "$BUILD" -s install DESTDIR="$STAGE" PG_CONFIG="$PG_CONFIG" "$@" >>"$WORK/build.log" 2>&1 || return 1
	chown -R "$RUNAS" "$WORK" 2>/dev/null || true
}

# cluster_start DATADIR PORT [extra postgresql.conf lines...]; log in DATADIR.log
cluster_start() {
	local d=$1 p=$2 l
	shift 2
	as_pg "$BIN/initdb" -D "$d" -A trust -U postgres --no-sync >/dev/null || return 1
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $p"
		echo "unix_socket_directories = '$WORK'"
		echo "fsync = off"
		echo "max_worker_processes = 40"
		echo "log_line_prefix = '%m [%p] %b '"
		for l in "$@"; do echo "$l"; done
	} >>"$d/postgresql.conf"
	CLUSTER_DIRS+=("$d")
	as_pg "$BIN/pg_ctl" -D "$d" -l "$d.log" -w -t 60 start >/dev/null
}

cluster_stop_all() {
	local d
	for d in "${CLUSTER_DIRS[@]}"; do
		[ -f "$d/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1
	done
	CLUSTER_DIRS=()
}

# on_exit 'COMMAND' — one EXIT trap for every script that sources this: each cleanup is
# registered where its resource is made and they run in reverse order, so a script never
# replaces (and loses) another part's trap.  Scripts call on_exit, never trap ... EXIT.
ON_EXIT=()
on_exit() {
	ON_EXIT+=("$1")
	trap on_exit_run EXIT
}
on_exit_run() {
	local i
	for ((i = ${#ON_EXIT[@]} - 1; i >= 0; i--)); do eval "${ON_EXIT[i]}"; done
	ON_EXIT=()
}

# The settings every mlplat cluster here runs with.
MLPLAT_CONF=(
	"shared_preload_libraries = 'mlplat, pg_cron'"
	"cron.database_name = 'mlplat'"
	"mlplat.database = 'mlplat'"
)
# MLPLAT_EXTRA_CONF: one more setting for every cluster, to run whole suites under it
# (MLPLAT_EXTRA_CONF="mlplat.deployments_watch = on" test/run.sh scripts); a script's own
# settings come later and win
# (an if, not [ ] &&: the last command's status is what sourcing this file returns, and a
# false test there ends a caller under set -e, every bench script)
if [ -n "${MLPLAT_EXTRA_CONF:-}" ]; then MLPLAT_CONF+=("$MLPLAT_EXTRA_CONF"); fi
