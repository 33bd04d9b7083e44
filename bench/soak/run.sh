#!/usr/bin/env bash
# bench/soak/run.sh — a bounded soak of mlplat under faults, with the real
# workers against the stand-in cluster, then a check that nothing committed was
# lost or duplicated.  Prints a table; exits non-zero if any check fails.
#
#   bench/soak/run.sh                    10 minutes of load and faults
#   SOAK_SECONDS=120 bench/soak/run.sh   the CI mode (test/e2e/soak.sh)
#   SOAK_PEERS=real bench/soak/run.sh    against the real peers (test/real/): the real
#                                        kube-apiserver behind test/real/faultproxy.py,
#                                        the KServe/Argo imitation, moto for S3; CI runs
#                                        it short (test/real/e2e/soak.sh)
#
# Settings (environment): SOAK_SECONDS (600), SOAK_CLIENTS (4), SOAK_RATE
# (calls per second per client, 1), SOAK_CONVERGE_MAX (seconds to wait for
# convergence after the last fault, 180), SOAK_STEADY (seconds of steady state
# after convergence in which worker memory must stay flat, 60), SOAK_SEED (7:
# the stand-in's fault draws and the clients' choices), SOAK_HOLD_KILL_S
# (seconds between two leaders stopped mid-write, 15; 0: none), SOAK_KEEP=1
# keeps the work directory.
#
# Load: SOAK_CLIENTS copies of driver.sh create projects, register and stage
# model versions, deploy, redeploy and undeploy, start and cancel runs, each
# call with an idempotency key and retried with it after a lost answer.
# Faults, all through the run: the stand-in (or, with SOAK_PEERS=real, the fault
# proxy in front of the real API server) answers 429 + Retry-After to 1% of
# requests and 5xx to 10%, drops the connection after applying 2% of writes and
# delays 2% of requests by 1.5 s; the leader of every kind is terminated every
# 20 s; every SOAK_HOLD_KILL_S the stand-in holds the next Workflow create,
# InferenceService apply or Namespace apply (in turn; alternately before and
# after applying it), the leader
# that sent it is terminated while it waits, and the request is let go a second
# later: the interleaving "external write made, write-back lost" of issue 22,
# on purpose rather than by chance; a worker is killed with kill -9 at 30% and
# 70% of the run (the postmaster restarts every backend); the server is stopped
# in immediate mode and started again at 45% and 85%.  Then check.py.
#
# Builds and stages mlplat into a private cluster of its own (kill -9 and
# restarts must not touch anyone else's), unless run from the test suite, which
# passes its staged binaries in MLPLAT_TEST_BIN.
set -uo pipefail
DURATION=${SOAK_SECONDS:-600}
CLIENTS=${SOAK_CLIENTS:-4}
CONVERGE_MAX=${SOAK_CONVERGE_MAX:-180}
STEADY=${SOAK_STEADY:-60}
PEERS=${SOAK_PEERS:-standin}
case "${1:-}" in -h|--help) sed -n '2,35p' "$0"; exit 0 ;; esac
SRC=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$SRC/bench/soak
. "$SRC/test/lib/stack.sh"
case $PEERS in
	standin) ;;
	real) . "$SRC/test/lib/real.sh" ;;
	*) echo "SOAK_PEERS is standin or real, not $PEERS" >&2; exit 2 ;;
esac
STACK_KEEP_WORK=1   # until the run passed (SOAK_KEEP=1: always)
say() { printf '# %s %s\n' "$(date +%T)" "$*"; }
[ -n "${MLPLAT_TEST_BIN:-}" ] || say "build"
stack_init soak
SD=$WORK/standin RD=$WORK/real OUT=$WORK/out
mkdir -p "$OUT"
PIDS=()
stop_clients() {
	local p
	touch "$OUT/stop"
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	# only this script's own loops: the real peers are children too, stopped after
	((${#PIDS[@]})) && wait "${PIDS[@]}" 2>/dev/null
}
trap 'exit 130' INT TERM
DATA=$WORK/data
stack_start "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '2s'" "max_connections = 60" \
	"mlplat.leader_retry_interval = '250ms'"
export PGDATABASE=mlplat PGCONNECT_TIMEOUT=5
export PSQL
q() { $PSQL -c "$1"; }
stack_db mlplat pg_cron mlplat
if [ "$PEERS" = real ]; then
	# The real API server (as mlplat's ServiceAccount) behind the fault proxy,
	# the KServe/Argo imitation (long-* workflows run 20 s: still going when
	# the client cancels them), moto with SigV4 for the artifacts.  The proxy
	# answers the stand-in's admin calls this script makes (faults, holds, writes).
	on_exit 'real_stop "$RD"'
	t_peers=$SECONDS
	REAL_READY_MS=300 REAL_CONTROLLER_ARGS="--slow-prefix long- --slow-ms 20000"
	real_kube_start "$RD" && real_identity "$RD" >/dev/null && real_controller_start "$RD" &&
		real_s3_start "$RD" && real_proxy_start "$RD" "${SOAK_SEED:-7}" ||
		{ echo "real peers did not start" >&2; exit 1; }
	for v in 1 2; do real_s3_put "s3://models/m/$v" soak-model >/dev/null || exit 1; done
	real_connect mlplat "$REAL_PROXY_URL"
	real_s3_connect mlplat
	admin() { proxy_admin "$@"; }
	say "real peers up in $((SECONDS - t_peers)) s (API server $REAL_KUBE_URL behind the fault proxy $REAL_PROXY_URL)"
else
	STANDIN_SEED=${SOAK_SEED:-7} STANDIN_READY_MS=300 stack_standin
	# long-* runs take 150 ticks of 200 ms: still going when the client cancels them
	admin PUT config '{"argoStepMs": 200}' >/dev/null
	admin POST argo/plan '{"kind":"workflow","name":"long-","steps":{"*":{"ticks":150}}}' >/dev/null
	# the model artifacts every project deploys (driver.sh registers them with this SHA-256),
	# checked in the stand-in's object store before a first apply
	for v in 1 2; do standin_artifact "s3://models/m/$v" soak-model >/dev/null || exit 1; done
	standin_connect mlplat
fi
on_exit stop_clients   # first at exit: the clients go before the peers and the cluster
LEADERS="SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')"
for _ in $(seq 100); do [ "$(q "$LEADERS" 2>/dev/null)" = "$(mlplat_kinds_count)" ] && break; sleep 0.2; done

pg_restart_immediate() {
	as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate -t 60 stop >/dev/null 2>&1
	as_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA.log" -w -t 60 start >/dev/null 2>&1
}

# RSS of every worker every 2 s: t pid kind replica role VmRSS RssAnon (kB)
sample_rss() {
	local t pid kind rep role
	while [ ! -e "$OUT/rss.stop" ]; do
		t=$(date +%s)
		q "SELECT pid, kind, replica, role FROM mlplat.reconciler_health WHERE pid IS NOT NULL" 2>/dev/null |
			while IFS='|' read -r pid kind rep role; do
				awk -v t="$t" -v p="$pid" -v k="$kind" -v r="$rep" -v ro="$role" \
					'/^VmRSS:/ { rss = $2 } /^RssAnon:/ { anon = $2 } END { if (rss) print t, p, k, r, ro, rss, anon }' \
					"/proc/$pid/status" 2>/dev/null
			done >>"$OUT/rss"
		sleep 2
	done
}

# Every SOAK_HOLD_KILL_S: hold the next create/apply of one kind at the stand-in,
# terminate that kind's leader while the request waits, let the request go.
hold_and_kill() {
	local every=$1 i=0 kind path method phase rule held t
	while [ ! -e "$OUT/stop" ]; do
		sleep "$every"
		[ -e "$OUT/stop" ] && break
		case $((i % 3)) in
			0) kind=runs method=POST path='/workflows$' ;;
			1) kind=deployments method=PATCH path='/inferenceservices/[^/]+$' ;;
			2) kind=projects method=PATCH path='^/api/v1/namespaces/[^/]+$' ;;
		esac
		if ((i / 3 % 2 == 0)); then phase=before; else phase=after; fi
		i=$((i + 1))
		rule=$(admin POST faults "{\"method\":\"$method\",\"path\":\"$path\",\"hold\":\"$phase\",\"times\":1}" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["rules"][0]["id"])' 2>/dev/null)
		[ -n "$rule" ] || continue
		held=0
		for t in $(seq 100); do
			[ -e "$OUT/stop" ] && break
			held=$(admin GET holds | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' 2>/dev/null)
			[ "${held:-0}" -gt 0 ] && break
			sleep 0.1
		done
		if [ "${held:-0}" -gt 0 ]; then
			n=$(q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM mlplat.reconciler_health WHERE kind = '$kind' AND role IN ('leader', 'idle')" 2>/dev/null)
			event hold_kill "${n:-0}" "$kind" "$phase"
			sleep 1
		fi
		admin POST holds/release '{}' >/dev/null
		admin DELETE "faults/$rule" >/dev/null
	done
	admin POST holds/release '{}' >/dev/null
}

# --------------------------------------------------------------- the run
say "soak ($PEERS peers): $DURATION s, $CLIENTS clients at ${SOAK_RATE:-1} call/s each, seed ${SOAK_SEED:-7} (work: $WORK)"
admin PUT faults '{"rules":[
  {"status":429,"retryAfter":1,"rate":0.01},
  {"status":503,"rate":0.05},
  {"status":500,"rate":0.0527},
  {"method":"POST|PUT|PATCH|DELETE","drop":0.02},
  {"latencyMs":1500,"latencyRate":0.02}]}' >"$OUT/fault-rules.json"
sample_rss & PIDS+=($!)
for c in $(seq "$CLIENTS"); do
	bash "$HERE/driver.sh" "$c" "$OUT" & PIDS+=($!)
done
T0=$(date +%s)
echo "$T0" >"$OUT/t0"
: >"$OUT/events"
event() { printf '%s %s\n' "$(date +%s%3N)" "$*" >>"$OUT/events"; }
HOLD_KILL_S=${SOAK_HOLD_KILL_S:-15}
echo "$HOLD_KILL_S" >"$OUT/hold_kill_s"   # check.py: mid-write stops were asked for
((HOLD_KILL_S > 0)) && { hold_and_kill "$HOLD_KILL_S" & PIDS+=($!); }
kill9_at=($((DURATION * 30 / 100)) $((DURATION * 70 / 100)))
restart_at=($((DURATION * 45 / 100)) $((DURATION * 85 / 100)))
next_leader_kill=$((T0 + 20))
while :; do
	now=$(date +%s)
	el=$((now - T0))
	((el >= DURATION)) && break
	if ((${#kill9_at[@]} && el >= kill9_at[0])); then
		victim=$(q "SELECT pid FROM mlplat.reconciler_health WHERE role = 'leader' AND kind IN ('deployments', 'runs') ORDER BY random() LIMIT 1" 2>/dev/null)
		if [ -n "$victim" ]; then
			kill -9 "$victim" && { event kill9 "$victim"; say "kill -9 worker $victim"; }
			kill9_at=("${kill9_at[@]:1}")
		fi
	fi
	if ((${#restart_at[@]} && el >= restart_at[0])); then
		say "immediate stop + start"
		event restart_begin
		pg_restart_immediate
		event restart_end
		restart_at=("${restart_at[@]:1}")
	fi
	if ((now >= next_leader_kill)); then
		n=$(q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')" 2>/dev/null)
		event leader_kill "${n:-0}"
		next_leader_kill=$((next_leader_kill + 20))
	fi
	sleep 0.5
done
# load and faults stop: the clients finish the intent they are on
touch "$OUT/stop"
for p in "${PIDS[@]:1}"; do wait "$p"; done
admin DELETE faults >/dev/null
T_LAST=$(date +%s%3N)
event faults_cleared
say "load stopped; faults cleared; waiting for convergence (at most $CONVERGE_MAX s)"

# Converged: no project/deployment/run is in flight (every one READY, DELETED,
# FAILED with a reason, or a finished run) and every intent generation is observed.
INFLIGHT="SELECT (SELECT count(*) FROM mlplat.projects WHERE status NOT IN ('READY', 'DELETED') OR observed_generation <> generation)
              + (SELECT count(*) FROM mlplat.deployments WHERE status NOT IN ('READY', 'DELETED', 'FAILED') OR observed_generation <> generation)
              + (SELECT count(*) FROM mlplat.runs WHERE status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))"
converged_ms=""
deadline=$((SECONDS + CONVERGE_MAX))
while ((SECONDS < deadline)); do
	left=$(q "$INFLIGHT" 2>/dev/null)
	if [ "$left" = 0 ]; then converged_ms=$(($(date +%s%3N) - T_LAST)); break; fi
	sleep 0.5
done
echo "${converged_ms:--}" >"$OUT/converge_ms"
[ -z "$converged_ms" ] && say "not converged after $CONVERGE_MAX s: $left entities in flight"
# Steady state: no load, no faults, the same leaders resyncing every 2 s; the
# checker wants their memory flat here.
date +%s >"$OUT/steady_t"
sleep "$STEADY"
touch "$OUT/rss.stop"
wait "${PIDS[0]}"

# --------------------------------------------------------------- evidence for the checker
say "collecting evidence"
dump() { q "SELECT coalesce(json_agg(x), '[]') FROM ($1) x" >"$OUT/$2.json"; }
dump "SELECT p.id, p.name, p.status, p.status_reason, p.generation, p.observed_generation, p.gpu_quota, p.cpu_quota,
             p.memory_quota, (SELECT coalesce(json_agg(json_build_object('principal', m.principal, 'role', m.role,
                                                                          'binding', mlplat._rolebinding_name(m.role, m.principal))), '[]')
                                FROM mlplat.members m WHERE m.project_id = p.id) AS members
        FROM mlplat.projects p" projects
# the identities the projects reconciler makes or binds in every namespace, as configured
dump "SELECT current_setting('mlplat.runner_service_account') AS runner,
             current_setting('mlplat.predictor_service_account') AS predictor,
             current_setting('mlplat.controller_user') AS controller" identities
dump "SELECT d.id, p.name AS project, d.name, d.status, d.status_reason, d.desired_revision, d.observed_revision,
             d.latest_revision, d.generation, d.observed_generation, d.last_error
        FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id" deployments
dump "SELECT deployment_id, revision, model_version_id, intent, spec_digest FROM mlplat.deployment_revisions" revisions
dump "SELECT r.id, p.name AS project, r.name, r.status, r.status_reason, r.attempt FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id" runs
dump "SELECT v.id, p.name AS project, m.name AS model, v.version, v.stage FROM mlplat.model_versions v JOIN mlplat.projects p ON p.id = v.project_id JOIN mlplat.models m ON m.id = v.model_id" versions
dump "SELECT action, project, entity, entity_id, request_id, detail FROM mlplat.audit_events WHERE controller IS NULL" audit
dump "SELECT kind, entity, entity_id, project, action, outcome, http_status, detail->>'note' AS note, epoch FROM mlplat.reconcile_ledger" ledger
dump "SELECT kind, count(*) AS epochs FROM mlplat.leader_history GROUP BY kind" epochs
if [ "$PEERS" = real ]; then
	# every object of each kind, in all namespaces, as the API server has them
	while read -r r path; do rk_body GET "$path" >"$OUT/objects-$r.json"; done <<'EOL'
namespaces /api/v1/namespaces
inferenceservices /apis/serving.kserve.io/v1beta1/inferenceservices
workflows /apis/argoproj.io/v1alpha1/workflows
resourcequotas /api/v1/resourcequotas
limitranges /api/v1/limitranges
networkpolicies /apis/networking.k8s.io/v1/networkpolicies
rolebindings /apis/rbac.authorization.k8s.io/v1/rolebindings
roles /apis/rbac.authorization.k8s.io/v1/roles
serviceaccounts /api/v1/serviceaccounts
EOL
	cp "$RD/proxy-requests.jsonl" "$OUT/requests.jsonl" 2>/dev/null
else
	for r in namespaces inferenceservices workflows resourcequotas limitranges networkpolicies rolebindings roles serviceaccounts; do admin GET "objects?resource=$r" >"$OUT/objects-$r.json"; done
	cp "$SD/requests.jsonl" "$OUT/requests.jsonl" 2>/dev/null
fi
admin GET writes >"$OUT/writes.json"
admin GET faults >"$OUT/faults-final.json"
cp "$DATA.log" "$OUT/server.log"
SOAK_PEERS=$PEERS python3 "$HERE/check.py" "$OUT" "$DURATION" "$CLIENTS"
SOAK_RC=$?
[ "$SOAK_RC" = 0 ] && [ -z "${SOAK_KEEP:-}" ] && STACK_KEEP_WORK=
exit $SOAK_RC
