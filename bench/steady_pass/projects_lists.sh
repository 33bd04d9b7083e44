#!/usr/bin/env bash
# bench/steady_pass/projects_lists.sh — the wall time of a projects pass at N projects when
# the API server answers each LIST DELAY ms late (the stand-in's latency fault on the seven
# collections a pass LISTs, as a remote API server would be slower than a loopback one): the
# build at OLD (default main: its LISTs one after another) beside this tree's, in one cluster
# with the same projects, the library swapped and the server restarted between them, the
# two alternating RUNS times per N.  Each run times PASSES full passes (mlplat.resync_interval
# RESYNC ms, so every pass claims every project and LISTs every kind) after the first one
# following the restart, from reconciler_health.last_pass_duration.  Both builds must have the
# same SQL (only the library is swapped).
#   OLD=main SIZES="50 200" DELAY=100 RUNS=5 PASSES=3 bench/steady_pass/projects_lists.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OLD=${OLD:-main}
SIZES=${SIZES:-"50 200"}
DELAY=${DELAY:-100}
RUNS=${RUNS:-5}
PASSES=${PASSES:-3}
RESYNC=${RESYNC:-1500}
. "$SRC/test/lib/stack.sh"
stack_init projects_lists
LIB=$STAGE$($PG_CONFIG --pkglibdir)/mlplat.so
cp "$LIB" "$WORK/new.so"
mkdir "$WORK/old"
git -C "$SRC" archive "$OLD" | tar -x -C "$WORK/old"
make -C "$WORK/old" -s PG_CONFIG="$PG_CONFIG" -j2 >"$WORK/old.log" 2>&1 || { cat "$WORK/old.log"; exit 1; }
cp "$WORK/old/mlplat.so" "$WORK/old.so"
STANDIN_READY_MS=50 stack_standin
stack_start "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '${RESYNC}ms'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat

health() { q mlplat "SELECT $1 FROM mlplat.reconciler_health WHERE kind = 'projects' AND role = 'leader'"; }
# use BUILD: its library in place, the server restarted, until the projects leader has passed once
use() {
	# immediate: a fast stop waits for the workers' passes (DELAY ms a LIST) to end; the
	# library is replaced only once no process maps it
	as_pg "$BIN/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null
	cp "$WORK/$1.so" "$LIB"
	chown "$RUNAS" "$LIB" 2>/dev/null || true
	as_pg "$BIN/pg_ctl" -D "$WORK/data" -l "$WORK/data.log" -w -t 60 start >/dev/null
	wait_for mlplat "SELECT coalesce(max(passes), 0) >= 1 FROM mlplat.reconciler_health WHERE kind = 'projects' AND role = 'leader'" t 60 ||
		{ echo "no projects leader with the $1 build" >&2; exit 1; }
}
# pass_times N BUILD: PASSES passes' durations in ms, one line "N BUILD MS" each
pass_times() {
	local p0 p i=0
	p0=$(health passes)
	while ((i < PASSES)); do
		p=$(health passes)
		if ((p > p0)); then
			echo "$1 $2 $(health "extract(epoch FROM last_pass_duration) * 1000")"
			p0=$p
			i=$((i + 1))
		fi
		sleep 0.05
	done
}

: >"$WORK/times.txt"
have=0
for n in $SIZES; do
	admin DELETE faults >/dev/null
	use new
	q mlplat "SELECT mlplat.create_project('p' || g, 1, '1', '1Gi', owner => 'alice') FROM generate_series($have + 1, $n) g" >/dev/null
	have=$n
	wait_for mlplat "SELECT count(*) FILTER (WHERE status = 'READY') FROM mlplat.projects" "$n" 600 ||
		{ echo "the projects did not all converge" >&2; exit 1; }
	admin POST faults "{\"method\":\"GET\",\"path\":\"^/(api/v1|apis/[^/]+/v1)/(namespaces|resourcequotas|limitranges|networkpolicies|rolebindings|serviceaccounts|roles)\$\",\"latencyMs\":$DELAY}" >/dev/null
	for ((r = 1; r <= RUNS; r++)); do
		# the order alternates run by run, so neither build always goes first
		if ((r % 2)); then order="old new"; else order="new old"; fi
		for b in $order; do
			use "$b"
			pass_times "$n" "$b" >>"$WORK/times.txt"
		done
	done
done
echo "projects pass wall time, LISTs answered $DELAY ms late; $RUNS runs x $PASSES passes per build; load: $(uptime | sed 's/.*load/load/')"
python3 "$SRC/bench/steady_pass/side_by_side.py" "$WORK/times.txt" "$((RUNS * PASSES))" old new \
	"projects" "LISTs in turn ($OLD), ms" "LISTs at once, ms"
