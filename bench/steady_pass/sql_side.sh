# bench/steady_pass/sql_side.sh — sourced by the SQL side-by-side benches of this folder
# (status_writeback.sh, epoch_fence.sh, resync_write.sh, writeback_cas.sh), which time a
# function beside a copy of what it replaced, in one cluster, calls alternating, each timed
# inside the server:
#   side_start TAG KIND   a cluster of its own (stack.sh) with mlplat loaded and no workers
#                         (mlplat.database names no database), the extension, and KIND's
#                         leader epoch row made by hand: epoch 7; Q runs psql on it;
#                         max: the largest of $SIZES (the rows to make)
#   side_deployments      10 projects and \$max deployments spread over them, analyzed, and
#                         public.side_keys(n): the first n's ids, namespaces and names (arrays)
#   side_times [FILE] <<SQL
#                         runs the SQL; its NOTICE lines "N LABEL MS" go to FILE
#                         ($WORK/times.txt)
#   side_table FILE REPS BEFORE AFTER "N's column" "BEFORE's column" "AFTER's column"
#                         the load average, then side_by_side.py's table of medians
. "$SRC/test/lib/stack.sh"
Q() { $PSQL -d postgres "$@"; }
side_start() {
	local n
	max=0
	for n in ${SIZES:-}; do ((n > max)) && max=$n; done
	stack_init "$1"
	stack_start "shared_preload_libraries = 'mlplat'" "mlplat.database = 'no_such_db'"
	Q -c "CREATE EXTENSION mlplat CASCADE" \
		-c "INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('$2', 7, 1, 0, 'bench')" >/dev/null
}
side_deployments() {
	Q >/dev/null <<SQL
INSERT INTO mlplat.projects (name, gpu_quota) SELECT 'p' || g, 1 FROM generate_series(1, 10) g;
INSERT INTO mlplat.deployments (project_id, name)
SELECT p.id, 'd' || g FROM generate_series(1, $max) g JOIN mlplat.projects p ON p.name = 'p' || (g % 10 + 1);
ANALYZE mlplat.deployments, mlplat.projects;
-- the first n deployments by id: their ids, and their keys as a watch names them
CREATE FUNCTION public.side_keys(n int, OUT ids bigint[], OUT ns text[], OUT nm text[]) LANGUAGE sql AS \$\$
  SELECT array_agg(d.id ORDER BY d.id), array_agg(mlplat._project_namespace(p.name) ORDER BY d.id),
         array_agg(d.name ORDER BY d.id)
    FROM (SELECT * FROM mlplat.deployments ORDER BY id LIMIT n) d JOIN mlplat.projects p ON p.id = d.project_id \$\$;
SQL
}
side_times() { Q 2>&1 >/dev/null | sed -n 's/^NOTICE:  //p' >"${1:-$WORK/times.txt}"; }
side_table() {
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
	python3 "$SRC/bench/steady_pass/side_by_side.py" "$@"
}
