#!/usr/bin/env bash
# The Lease fence: two database clusters pointed at one Kubernetes cluster,
# mlplat.lease_fence on in both.  Only the Lease holder applies; the other
# says it is fenced and writes nothing; when the holder stops, the other
# takes the Lease once it expires (measured on its own clock) and converges.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster lease
SD=$WORK/standin
e2e_standin
kube POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mlplat-system"}}' >/dev/null
kube POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mlp-fx"}}' >/dev/null

FENCE=("mlplat.lease_fence = on" "mlplat.lease_duration = '3s'" "mlplat.kube_url = '$STANDIN_URL'"
	"mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" "cron.database_name = 'postgres'" "mlplat.resync_interval = '1s'"
	"${STANDIN_S3_CONF[@]}")
PA=$(free_port); PB=$(free_port)
cluster_start "$WORK/a" "$PA" "${MLPLAT_CONF[@]}" "${FENCE[@]}" && cluster_start "$WORK/b" "$PB" "${MLPLAT_CONF[@]}" "${FENCE[@]}"
tap_ok $? "two database clusters with the Lease fence on"
qa() { $PSQL -h "$WORK" -p "$PA" -d mlplat -c "$1"; }
qb() { $PSQL -h "$WORK" -p "$PB" -d mlplat -c "$1"; }
SHA=$(standin_artifact s3://models/m/1 'fx')
setup_db() {
	$PSQL -h "$WORK" -p "$1" -d postgres -c "CREATE DATABASE mlplat" >/dev/null
	$PSQL -h "$WORK" -p "$1" -d mlplat -c "CREATE EXTENSION mlplat" \
		-c "SELECT mlplat.create_project('fx', 2)" \
		-c "SELECT mlplat.add_artifact_location('fx', 's3://models/')" \
		-c "SELECT mlplat.register_model_version('fx', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('fx', 'm', '1', 'CANDIDATE')" >/dev/null
}
# B's reconcilers start (their database exists) only once A holds the Lease: which of two
# starting clusters takes a Lease first is a race, and this test is about what follows
setup_db "$PA"

qa "SELECT mlplat.deploy('fx', 'from-a', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for_a() { PGHOST=$WORK PGPORT=$PA wait_for mlplat "$1" "$2" "$3"; }
wait_for_b() { PGHOST=$WORK PGPORT=$PB wait_for mlplat "$1" "$2" "$3"; }
wait_for_a "SELECT status FROM mlplat.deployments WHERE name = 'from-a'" READY 20
tap_ok $? "cluster A takes the Lease and converges its deployment"
holder=$(kube GET /apis/coordination.k8s.io/v1/namespaces/mlplat-system/leases/mlplat-deployments | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["holderIdentity"])')
tap_ok $([ -n "$holder" ]; echo $?) "the Lease mlplat-deployments is held by A ($holder)"
setup_db "$PB"

qb "SELECT mlplat.deploy('fx', 'from-b', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for_b "SELECT (status LIKE 'fenced: Lease mlplat-system/mlplat-deployments%')::text FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'idle'" true 10
tap_ok $? "cluster B's deployments leader reports that it is fenced"
sleep 2
tap_is "$(writes_count "name=from-b")" 0 "B wrote nothing to the cluster while A holds the Lease"
tap_is "$(qb "SELECT status FROM mlplat.deployments WHERE name = 'from-b'")" DEPLOYING "B's intent waits, honestly DEPLOYING"

t0=$(date +%s%N)
as_pg "$BIN/pg_ctl" -D "$WORK/a" -m immediate stop >/dev/null
wait_for_b "SELECT status FROM mlplat.deployments WHERE name = 'from-b'" READY 30
tap_ok $? "after A stops, B takes the expired Lease and converges"
echo "# A stopped -> B's deployment READY in $((($(date +%s%N) - t0) / 1000000)) ms (lease duration 3 s)"
holder2=$(kube GET /apis/coordination.k8s.io/v1/namespaces/mlplat-system/leases/mlplat-deployments | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["holderIdentity"])')
tap_ok $([ -n "$holder2" ] && [ "$holder2" != "$holder" ]; echo $?) "the Lease changed hands ($holder2)"
n=$(writes_count "name=from-b")
tap_ok $([ "$n" -ge 1 ]; echo $?) "the write log filter does see B's writes now ($n), so the zero above was real"
tap_done
