#!/usr/bin/env bash
# scripts/demo.sh — the main job, end to end, against the stand-in cluster:
#   project -> model -> deploy -> converge -> drift -> repair -> canary -> undeploy
# It installs what it needs, builds mlplat into a private PostgreSQL under
# /tmp, starts a throwaway server (as postgres) and the stand-in cluster on
# loopback, narrates each step, and stops everything at the end.
#
#   scripts/demo.sh --real   the same story on the real peers of `test/run.sh real`:
#                            a real kube-apiserver (etcd, kube-controller-manager,
#                            RBAC on, mlplat with its own ServiceAccount), the
#                            KServe/Argo imitation, moto checking SigV4 for S3, and
#                            Prometheus scraping the imitation's serving metrics.
#                            Builds the peers first when they are not cached
#                            (test/real/build.sh; the first build takes a while).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
REAL=0
case "${1:-}" in
	--real) REAL=1 ;;
	"") ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "usage: scripts/demo.sh [--real]" >&2; exit 2 ;;
esac

bash scripts/setup.sh >/dev/null || { echo "setup failed: run bash scripts/setup.sh to see why"; exit 1; }

. test/lib/cluster.sh
cluster_init "$(mktemp -d /tmp/mlplat-demo.XXXXXX)"
. test/lib/standin.sh
. test/lib/prometheus.sh
. test/lib/real.sh
PSQL="$BIN/psql -qXAt -v ON_ERROR_STOP=1"
SD=$WORK/standin
RD=$WORK/real
PD=$WORK/prometheus
cleanup() { prometheus_stop "$PD"; if ((REAL)); then real_stop "$RD"; else standin_stop "$SD"; fi; cluster_stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
if ((REAL)); then
	# The same calls as against the stand-in, on the real peers
	PEER="the real API server"
	kube() { rk_body "$@"; }
	standin_artifact() { real_s3_put "$@"; }
	# mlplat's every external write is in its ledger; the API server keeps no write log
	writes_count() { sql -c "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action IN ('APPLY', 'REPAIR', 'DELETE')"; }
	serve() { curl -sf -X POST "$REAL_CONTROLLER/metrics/revision" -H 'Content-Type: application/json' \
		-d "{\"revision\":\"$1\",\"namespace\":\"mlp-fraud\",\"behaviour\":\"$2\",\"rps\":200,\"service\":\"scorer\"}" >/dev/null; }
	edit_isvc() { rk PATCH /apis/serving.kserve.io/v1beta1/namespaces/mlp-fraud/inferenceservices/scorer "$1" application/merge-patch+json >/dev/null; }
	isvc_writes() { echo "ledger rows $(sql -c "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action IN ('APPLY', 'REPAIR') AND entity = 'scorer-v2'"), object on the API server: HTTP $(rk GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-fraud/inferenceservices/scorer-v2 | tail -1)"; }
else
	PEER="the stand-in"
	# the stand-in serves 200 requests/s to scorer, each KServe revision its share of the split
	serve() { admin POST metrics/revision "{\"revision\":\"$1\",\"namespace\":\"mlp-fraud\",\"behaviour\":\"$2\",\"rps\":200,\"service\":\"scorer\"}" >/dev/null; }
	edit_isvc() { admin POST edit "{\"resource\":\"inferenceservices\",\"namespace\":\"mlp-fraud\",\"name\":\"scorer\",\"patch\":$1}" >/dev/null; }
	isvc_writes() { writes_count 'kind=InferenceService&name=scorer-v2'; }
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '   %s\n' "$*"; }
sql() { $PSQL -d mlplat "$@"; }
elapsed() { echo $((($(date +%s%N) - T0) / 1000000)); }

step "1. build mlplat and start PostgreSQL 15 with the reconcilers preloaded"
cluster_build || { cat "$WORK/build.log"; exit 1; }
if ((REAL)); then
	t0=$SECONDS
	test/real/build.sh | sed 's/^/   /' || { echo "the real peers did not build"; exit 1; }
	# not in a pipeline: real_kube_start sets the variables the rest needs
	real_kube_start "$RD" >"$WORK/real-start.log"
	rc=$?
	sed 's/^# real: /   /' "$WORK/real-start.log"
	((rc == 0)) && real_identity "$RD" >/dev/null && real_controller_start "$RD" && real_s3_start "$RD" ||
		{ echo "the real peers did not start (logs in $RD; KEEP=1 keeps them)"; exit 1; }
	say "real kube-apiserver $("$KUBE_APISERVER" --version | cut -d' ' -f2) (etcd, kube-controller-manager, RBAC on): $REAL_KUBE_URL"
	say "mlplat talks to it as ServiceAccount mlplat-system/mlplat (deploy/kubernetes/), never as admin"
	say "KServe/Argo imitation watching it (test/real/controller.js); S3: moto checking SigV4 at $REAL_S3"
	say "peers up in $((SECONDS - t0)) s"
	prometheus_start "$PD" "${REAL_CONTROLLER#http://}" || { echo "prometheus did not start"; exit 1; }
	PEER_CONF=("mlplat.kube_url = '$REAL_KUBE_URL'" "mlplat.kube_token_file = '$REAL_MLPLAT_TOKEN_FILE'"
		"mlplat.kube_ca_file = '$REAL_CA'" "mlplat.s3_endpoint = '$REAL_S3'" "mlplat.s3_credentials_file = '$REAL_S3_CREDENTIALS'")
else
	standin_start "$SD" || { echo "the stand-in did not start"; exit 1; }
	say "stand-in cluster (Kubernetes + KServe + Argo + MLflow + S3 on loopback): $STANDIN_URL"
	prometheus_start "$PD" "127.0.0.1:$STANDIN_PORT" || { echo "prometheus did not start"; exit 1; }
	PEER_CONF=("mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" "${STANDIN_S3_CONF[@]}")
fi
say "Prometheus $(prometheus --version 2>&1 | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p') scraping the serving metrics every second: $PROM_URL"
PORT=$(free_port)
cluster_start "$WORK/data" "$PORT" "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '2s'" \
	"${PEER_CONF[@]}" "mlplat.prometheus_url = '$PROM_URL'" ||
	{ cat "$WORK/data.log"; exit 1; }
export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres
$PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
sql -c "CREATE EXTENSION pg_cron" -c "CREATE EXTENSION mlplat" 2>/dev/null
say "$(sql -c "SELECT 'mlplat ' || extension_version || ' (library ' || library_version || ')' FROM mlplat.version()")"
sleep 1
sql -c "SELECT kind || ': ' || role || ' (' || status || ')' FROM mlplat.reconciler_health WHERE role <> 'standby' ORDER BY kind" | sed 's/^/   leader /'

step "2. a platform admin creates project 'fraud' (4 GPUs) and makes alice its deployer"
sql -c "CREATE ROLE alice LOGIN" -c "CREATE ROLE bob LOGIN"
sql -c "SELECT 'accepted: ' || entity || ' #' || entity_id || ' ' || status FROM mlplat.create_project('fraud', 4, '16', '64Gi')" | sed 's/^/   /'
sql -c "SELECT mlplat.grant_role('fraud', 'alice', 'deployer')" -c "SELECT mlplat.grant_role('fraud', 'bob', 'viewer')" >/dev/null
# artifacts may be registered only from the project's own locations
sql -c "SELECT mlplat.add_artifact_location('fraud', 's3://models/scorer/')" >/dev/null
# The projects reconciler makes the tenant: namespace, GPU quota, limits, network policy,
# one RoleBinding per member.  Waiting for READY is all it takes.
T0=$(date +%s%N)
for _ in $(seq 1 1200); do
	now=$(sql -c "SELECT status FROM mlplat.projects WHERE name = 'fraud'")
	case "$now" in READY|FAILED) break ;; esac
	sleep 0.05
done
say "project fraud: $now after $(elapsed) ms - $(sql -c "SELECT coalesce(status_reason, '') FROM mlplat.projects WHERE name = 'fraud'")"
say "on $PEER: $(kube GET "/apis/rbac.authorization.k8s.io/v1/namespaces/mlp-fraud/rolebindings" | python3 -c 'import json,sys; print(", ".join(i["metadata"]["name"] + " -> " + i["roleRef"]["name"] for i in json.load(sys.stdin)["items"]))')"

step "3. alice uploads the weights to S3, registers model 'scorer' v1 with their SHA-256 and marks it CANDIDATE"
SHA=$(standin_artifact s3://models/scorer/1 'scorer-weights-v1')
$PSQL -U alice -d mlplat -c "SELECT mlplat.register_model_version('fraud', 'scorer', '1', 's3://models/scorer/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
$PSQL -U alice -d mlplat -c "SELECT mlplat.set_model_stage('fraud', 'scorer', '1', 'CANDIDATE')" >/dev/null
say "model_versions: $(sql -c "SELECT string_agg(m.name || ' v' || v.version || ' ' || v.stage, ', ') FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id")"

step "4. bob (viewer) tries to deploy: refused inside the database, nothing written"
$PSQL -U bob -d mlplat -c "SELECT mlplat.deploy('fraud', 'scorer', 'scorer', '1', 'kserve-sklearnserver')" 2>&1 | sed 's/^/   /' | head -2

step "5. alice deploys it; the call returns as soon as the intent is committed"
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
T0=$(date +%s%N)
$PSQL -U alice -d mlplat -c "SET mlplat.traceparent = '$TP'" \
	-c "SELECT 'accepted: revision ' || revision || ', status ' || status || ', request ' || request_id FROM mlplat.deploy('fraud', 'scorer', 'scorer', '1', 'kserve-sklearnserver', 0, 1, 2, '{\"THRESHOLD\":\"0.7\"}')" | sed 's/^/   /'
say "returned after $(elapsed) ms"

step "6. the deployments reconciler converges the cluster (polling deployment_status)"
last=""
for _ in $(seq 1 1200); do
	now=$(sql -c "SELECT status || ' - ' || coalesce(status_reason, '') FROM mlplat.deployments WHERE name = 'scorer'")
	[ "$now" != "$last" ] && say "+$(elapsed) ms  $now" && last=$now
	case "$now" in READY*|FAILED*) break ;; esac
	sleep 0.05
done
say "endpoint: $(sql -c "SELECT endpoint FROM mlplat.deployments WHERE name = 'scorer'")"
say "audit:    $(sql -c "SELECT actor || ' ' || action || ' ' || entity || ' trace ' || trace_id FROM mlplat.audit_events WHERE action = 'deploy'")"
say "ledger:   $(sql -c "SELECT action || ' ' || outcome || ' HTTP ' || http_status || ' epoch ' || epoch || ' by ' || controller || ' trace ' || trace_id FROM mlplat.reconcile_ledger WHERE kind = 'deployments' ORDER BY id LIMIT 1")"
say "          $(sql -c "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'deployments' ORDER BY id LIMIT 1")"

step "7. KServe's defaulting is not drift: 5 s of resyncs (every 2 s) change nothing"
w0=$(writes_count)
sleep 5
say "writes to the cluster during those 5 s: $(($(writes_count) - w0)); revisions: $(sql -c "SELECT latest_revision FROM mlplat.deployments WHERE name = 'scorer'")"

step "8. someone edits the InferenceService behind mlplat's back (minReplicas 1 -> 3)"
edit_isvc '{"spec":{"predictor":{"minReplicas":3}}}'
T0=$(date +%s%N)
last=""
for _ in $(seq 1 1200); do
	now=$(sql -c "SELECT status || ' - ' || coalesce(status_reason, '') FROM mlplat.deployments WHERE name = 'scorer'")
	[ "$now" != "$last" ] && say "+$(elapsed) ms  $now" && last=$now
	case "$now" in READY*) [ "$(sql -c "SELECT count(*) FROM mlplat.reconcile_ledger WHERE action = 'REPAIR'")" -gt 0 ] && break ;; esac
	sleep 0.05
done
say "ledger:   $(sql -c "SELECT action || ' ' || outcome || ' (' || (detail->>'note') || ')' FROM mlplat.reconcile_ledger WHERE action = 'REPAIR'")"
say "cluster minReplicas is back to $(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-fraud/inferenceservices/scorer | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["minReplicas"])'); revisions still $(sql -c "SELECT latest_revision FROM mlplat.deployments WHERE name = 'scorer'")"

step "8b. v2's weights are overwritten in S3 after registration: its deployment is refused"
$PSQL -U alice -d mlplat -c "SELECT mlplat.register_model_version('fraud', 'scorer', '2', 's3://models/scorer/2', '$(printf 'scorer-weights-v2' | sha256sum | cut -d' ' -f1)', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('fraud', 'scorer', '2', 'CANDIDATE')" >/dev/null
standin_artifact s3://models/scorer/2 'tampered-weights' >/dev/null
$PSQL -U alice -d mlplat -c "SELECT mlplat.deploy('fraud', 'scorer-v2', 'scorer', '2', 'kserve-sklearnserver')" >/dev/null
for _ in $(seq 1 1200); do
	now=$(sql -c "SELECT status FROM mlplat.deployments WHERE name = 'scorer-v2'")
	[ "$now" = FAILED ] && break
	sleep 0.05
done
say "scorer-v2: $now - $(sql -c "SELECT status_reason FROM mlplat.deployments WHERE name = 'scorer-v2'")"
say "InferenceService writes for scorer-v2: $(isvc_writes)"

step "9. alice rolls out v3 as a canary: 10% -> 25% -> 50% (the ceiling), each step judged on Prometheus"
SHA3=$(standin_artifact s3://models/scorer/3 'scorer-weights-v3')
$PSQL -U alice -d mlplat -c "SELECT mlplat.register_model_version('fraud', 'scorer', '3', 's3://models/scorer/3', '$SHA3', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('fraud', 'scorer', '3', 'CANDIDATE')" >/dev/null
isvc() { kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-fraud/inferenceservices/scorer; }
serve "$(isvc | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["components"]["predictor"]["latestReadyRevision"])')" healthy
for _ in $(seq 1 50); do prometheus_scraping && break; sleep 0.2; done
POLICY='{"steps": [0.1, 0.25, 0.5], "ceiling": 0.5, "window_seconds": 5, "min_samples": 50, "max_error_rate": 0.05, "max_p95_ms": 500}'
say "policy: $POLICY"
$PSQL -U alice -d mlplat -c "SELECT 'accepted: rollout #' || entity_id || ', target revision ' || revision || ', ' || status FROM mlplat.start_rollout('fraud', 'scorer', 'scorer', '3', '$POLICY')" | sed 's/^/   /'
T0=$(date +%s%N)
ro() { sql -c "SELECT $1 FROM mlplat.rollout_status WHERE deployment = 'scorer' ORDER BY rollout_id DESC LIMIT 1"; }
for _ in $(seq 1 200); do kn=$(ro "(SELECT observed->>'target_kn' FROM mlplat.rollouts WHERE id = rollout_id)"); [ -n "$kn" ] && break; sleep 0.1; done
serve "$kn" healthy
seen=0; now=""
for _ in $(seq 1 1200); do
	n=$(ro transitions)
	if [ "${n:-0}" -gt "$seen" ]; then
		sql -c "SELECT '+' || ($(date +%s%N) - $T0) / 1000000 || ' ms  ' || decision || ' ' || from_fraction || ' -> ' || to_fraction || '  ' || array_to_string(reasons, ',')
		               || coalesce('  (canary ' || (evidence->'target'->>'requests') || ' requests, ' || (evidence->'target'->>'errors') || ' errors in the window)', '')
		        FROM mlplat.rollout_transitions WHERE rollout_id = (SELECT max(id) FROM mlplat.rollouts) AND seq > $seen ORDER BY seq" | sed 's/^/   /'
		seen=$n
	fi
	now=$(ro status)
	case "$now" in AT_CEILING|ROLLED_BACK|ABORTED|FAILED) break ;; esac
	sleep 0.1
done
say "rollout: $now; KServe reports traffic $(ro "observed_traffic::text")"
$PSQL -U alice -d mlplat -c "SELECT 'promote_rollout: ' || status FROM mlplat.promote_rollout('fraud', 'scorer')" | sed 's/^/   /'
for _ in $(seq 1 300); do now=$(ro status); case "$now" in PROMOTED|FAILED|ROLLED_BACK) break ;; esac; sleep 0.1; done
say "rollout: $now after $(elapsed) ms; traffic $(ro "observed_traffic::text")"
say "stages:  $(sql -c "SELECT string_agg('v' || v.version || ' ' || v.stage, ', ' ORDER BY v.version) FROM mlplat.model_versions v JOIN mlplat.models m ON m.id = v.model_id WHERE m.name = 'scorer'")"

step "10. alice undeploys; the reconciler deletes the InferenceService and confirms it is gone"
$PSQL -U alice -d mlplat -c "SELECT 'accepted: ' || status FROM mlplat.undeploy('fraud', 'scorer')" | sed 's/^/   /'
T0=$(date +%s%N)
last=""
for _ in $(seq 1 1200); do
	now=$(sql -c "SELECT status FROM mlplat.deployments WHERE name = 'scorer'")
	[ "$now" != "$last" ] && say "+$(elapsed) ms  $now" && last=$now
	[ "$now" = DELETED ] && break
	sleep 0.05
done

step "done: every external write, in the ledger"
sql -c "SELECT to_char(at, 'HH24:MI:SS.MS') || '  ' || rpad(kind, 12) || rpad(action, 8) || rpad(outcome, 4) || ' HTTP ' || coalesce(http_status::text, '-') || '  epoch ' || epoch FROM mlplat.reconcile_ledger ORDER BY id" | sed 's/^/   /'
