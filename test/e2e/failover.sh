#!/usr/bin/env bash
# Database failover: a streaming replica of the primary runs no reconcilers
# while in recovery; once promoted, its workers lead.  The Lease fence is on by
# default (mlplat.lease_fence = auto: a cluster is configured), so the
# promoted server (same system identifier, next timeline) displaces its old
# primary's Lease at once, and the old primary, still running, stops applying:
# an intent written to it never reaches the cluster.  Nor when the old primary
# is stopped and comes back (issue 18, finding 14: before, the fence was off
# unless configured, and the old primary's workers kept applying).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster failover
SD=$WORK/standin
e2e_standin
# no mlplat-system namespace: the default fence creates the one its Leases live in

PA=$(free_port); PB=$(free_port)
cluster_start "$WORK/a" "$PA" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.resync_interval = '1s'" \
	"mlplat.lease_duration = '30s'" \
	"mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" "${STANDIN_S3_CONF[@]}"
tap_ok $? "primary A started with the default Lease fence (lease 30 s)"
qa() { $PSQL -h "$WORK" -p "$PA" -d mlplat -c "$1"; }
qb() { $PSQL -h "$WORK" -p "$PB" -d mlplat -c "$1"; }
$PSQL -h "$WORK" -p "$PA" -d postgres -c "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'fo')
qa "CREATE EXTENSION mlplat" >/dev/null
$PSQL -h "$WORK" -p "$PA" -d mlplat -c "SELECT mlplat.create_project('fo', 0)" \
	-c "SELECT mlplat.add_artifact_location('fo', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('fo', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('fo', 'm', '1', 'CANDIDATE')" \
	-c "SELECT mlplat.deploy('fo', 'before', 'm', '1', 'kserve-sklearnserver')" >/dev/null
PGHOST=$WORK PGPORT=$PA wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'before'" READY 30
tap_ok $? "A converges a deployment while it is the primary"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-fo/inferenceservices/before)" 200 "... and the stand-in has its InferenceService"

# a streaming replica of A
as_pg "$BIN/pg_basebackup" -h "$WORK" -p "$PA" -U postgres -D "$WORK/b" -R -X stream -c fast >/dev/null 2>&1 &&
	echo "port = $PB" >>"$WORK/b/postgresql.conf" && CLUSTER_DIRS+=("$WORK/b") &&
	as_pg "$BIN/pg_ctl" -D "$WORK/b" -l "$WORK/b.log" -w start >/dev/null
tap_ok $? "standby B streams from A"
sleep 2
tap_is "$($PSQL -h "$WORK" -p "$PB" -d postgres -c "SELECT pg_is_in_recovery()::text || '/' || count(*) FROM pg_stat_activity WHERE backend_type = 'mlplat reconciler'")" "true/0" \
	"B runs no reconcilers while in recovery"

t0=$(date +%s%N)
as_pg "$BIN/pg_ctl" -D "$WORK/b" promote -w >/dev/null
PGHOST=$WORK PGPORT=$PB wait_for mlplat "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader' AND last_pass_start IS NOT NULL" 1 30
tap_ok $? "after promotion B's deployments reconciler leads and runs passes"
echo "# promotion -> B's first deployments pass: $((($(date +%s%N) - t0) / 1000000)) ms (A still running; its lease had 30 s left)"
holder=$(kube GET /apis/coordination.k8s.io/v1/namespaces/mlplat-system/leases/mlplat-deployments | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["holderIdentity"])')
case "$holder" in *-tl2) r=0 ;; *) r=1 ;; esac
tap_ok $r "B (timeline 2) took the Lease from A at once ($holder)"

qb "SELECT mlplat.deploy('fo', 'after', 'm', '1', 'kserve-sklearnserver')" >/dev/null
PGHOST=$WORK PGPORT=$PB wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'after'" READY 30
tap_ok $? "B converges a new deployment"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-fo/inferenceservices/after)" 200 "... and the stand-in has its InferenceService"

# the old primary is still up and writable (split brain): its workers must not act
qa "SELECT mlplat.deploy('fo', 'zombie', 'm', '1', 'kserve-sklearnserver')" >/dev/null
PGHOST=$WORK PGPORT=$PA wait_for mlplat "SELECT (status LIKE 'fenced:%')::text FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'idle'" true 15
tap_ok $? "A's deployments reconciler reports it is fenced"
sleep 3
tap_is "$(writes_count "name=zombie")" 0 "an intent written to the old primary never reaches the cluster"
n=$(writes_count "name=after")
tap_ok $([ "$n" -ge 1 ]; echo $?) "(the same filter sees B's writes: $n)"
tap_is "$(qa "SHOW mlplat.lease_fence")" auto "the fence was the default, auto"
tap_is "$(kube GET /api/v1/namespaces/mlplat-system | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["labels"]["app.kubernetes.io/managed-by"])')" mlplat \
	"the fence created the Lease namespace mlplat-system it found missing"

# the old primary goes down and comes back, still believing it is the primary
as_pg "$BIN/pg_ctl" -D "$WORK/a" -m immediate stop >/dev/null
as_pg "$BIN/pg_ctl" -D "$WORK/a" -l "$WORK/a.log" -w start >/dev/null
tap_ok $? "old primary A restarted after the failover (timeline $(qa "SELECT timeline_id FROM pg_control_checkpoint()"))"
qa "SELECT mlplat.deploy('fo', 'revenant', 'm', '1', 'kserve-sklearnserver')" >/dev/null
qa "SELECT mlplat.undeploy('fo', 'before')" >/dev/null
PGHOST=$WORK PGPORT=$PA wait_for mlplat "SELECT (status LIKE 'fenced:%')::text FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'idle'" true 30
tap_ok $? "the returned old primary's deployments reconciler reports it is fenced"
sleep 3
tap_is "$(writes_count "name=revenant")" 0 "an intent written to the returned old primary never reaches the cluster"
tap_is "$(writes_count "name=before&method=DELETE")" 0 "... nor does its undeploy: nothing deletes the deployment B serves"
tap_done
