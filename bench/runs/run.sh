#!/usr/bin/env bash
# bench/runs/run.sh — submit N runs (pgbench) against the stand-in's Argo with the real
# workers and report: requests per run at the stand-in (target: 1 create + reads by LIST),
# time from the first start_run to all SUBMITTED (and to all finished), and step rows
# written per observed workflow status change.  Prints a table.
#
#   bench/runs/run.sh [--runs N] [--clients C] [--step-ms MS]
#
# Builds and stages mlplat, starts a private cluster and a stand-in, and stops both.
set -uo pipefail
RUNS=1000 CLIENTS=4 STEP_MS=100
while [ $# -gt 0 ]; do
	case $1 in
		--runs) RUNS=$2; shift 2 ;;
		--clients) CLIENTS=$2; shift 2 ;;
		--step-ms) STEP_MS=$2; shift 2 ;;
		-h|--help) sed -n '2,9p' "$0"; exit 0 ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
stack_init runs
stack_start "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '2s'" "max_connections = 60"
q() { $PSQL -d mlplat -c "$1"; }
stack_db mlplat pg_cron mlplat
stack_standin
admin PUT config "{\"argoStepMs\": $STEP_MS}" >/dev/null
q "SELECT mlplat.create_project('bench', 0)" >/dev/null
kube POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mlp-bench"}}' >/dev/null
# every workflow: one step of 3 ticks, so each goes "" -> Pending -> Running -> Succeeded
admin POST argo/plan '{"kind":"workflow","namespace":"mlp-bench","name":"*","steps":{"*":{"ticks":3}}}' >/dev/null
standin_connect mlplat
sleep 1
admin DELETE requests >/dev/null

q "CREATE SEQUENCE public.bench_seq" >/dev/null
cat >"$WORK/start.sql" <<'SQL'
SELECT mlplat.start_run('bench', 'r' || nextval('public.bench_seq'), '{"image": "python:3.12", "command": ["python", "train.py"]}');
SQL
per_client=$(((RUNS + CLIENTS - 1) / CLIENTS))
t0=$(date +%s%N)
"$BIN/pgbench" -n -c "$CLIENTS" -t "$per_client" -f "$WORK/start.sql" mlplat >"$WORK/pgbench.log" 2>&1 \
	|| { cat "$WORK/pgbench.log"; exit 1; }
t_api=$((($(date +%s%N) - t0) / 1000000))
total=$(q "SELECT count(*) FROM mlplat.runs")
t_sub=""
t_done=""
deadline=$((SECONDS + 600))
while ((SECONDS < deadline)); do
	read -r pending active <<<"$(q "SELECT count(*) FILTER (WHERE submitted_at IS NULL), count(*) FILTER (WHERE status IN ('PENDING','SUBMITTED','RUNNING'))
	                               FROM mlplat.runs" | tr '|' ' ')"
	now=$((($(date +%s%N) - t0) / 1000000))
	[ -z "$t_sub" ] && [ "$pending" = 0 ] && t_sub=$now
	[ "$active" = 0 ] && { t_done=$now; break; }
	q "SELECT status FROM mlplat.reconciler_health WHERE kind = 'runs' AND role = 'leader'" >>"$WORK/passes.log"
	sleep 0.2
done
sleep 3   # let a resync or two pass: steady state must not write

read -r creates lists others <<<"$(admin GET 'requests' | python3 -c '
import json,sys
c=l=o=0
for e in json.load(sys.stdin)["items"]:
    if "/workflows" not in e.get("path",""): continue
    if e["method"]=="POST": c+=1
    elif e["method"]=="GET" and not e.get("name"): l+=1
    else: o+=1
print(c,l,o)')"
stored=$(admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); w=w.get("writes",w); print(sum(v.get("create",0) for k,v in w.items() if k.startswith("Workflow/")))')
read -r rows changes succeeded <<<"$(q "SELECT sum(step_rows_written), sum(observed_changes), count(*) FILTER (WHERE status = 'SUCCEEDED') FROM mlplat.runs" | tr '|' ' ')"
passes=$(q "SELECT sum(passes) FROM mlplat.reconciler_health WHERE kind = 'runs'")

printf '\n%-48s %s\n' "metric" "value"
printf '%-48s %s\n' "runs started (pgbench, $CLIENTS clients)" "$total in $t_api ms ($(python3 -c "print(round($total*1000/max($t_api,1)))") runs/s)"
printf '%-48s %s\n' "time to all SUBMITTED (from first start_run)" "${t_sub:-timeout} ms"
printf '%-48s %s\n' "time to all finished" "${t_done:-timeout} ms ($succeeded SUCCEEDED)"
printf '%-48s %s\n' "workflow creates sent / stored" "$creates / $stored"
printf '%-48s %s\n' "workflow LIST requests (pages)" "$lists"
printf '%-48s %s\n' "other workflow requests (GET/PATCH/DELETE)" "$others"
printf '%-48s %s\n' "requests per run" "$(python3 -c "print(f'{($creates+$lists+$others)/$total:.3f} ({$creates/$total:.3f} create + {$lists/$total:.3f} LIST)')")"
printf '%-48s %s\n' "observed workflow status changes written" "$changes"
printf '%-48s %s\n' "step rows written" "$rows"
printf '%-48s %s\n' "step rows written per status change" "$(python3 -c "print(f'{$rows/max($changes,1):.3f}')")"
printf '%-48s %s\n' "runs reconciler passes" "$passes"
echo
echo "# the leader's pass lines seen while the runs moved:"
uniq "$WORK/passes.log" | sed 's/^/#   /' 
