#!/usr/bin/env bash
# Worker memory stays flat: drive thousands of deployments passes (each one
# claims, LISTs the stand-in, parses and compares) by committing wake-ups as
# fast as the leader can take them, and compare the leader's private RSS
# after a warm-up with its RSS at the end.  PASSES=10000 for the full figure.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_own_cluster memory
SD=$WORK/standin
PASSES=${PASSES:-2000}
e2e_standin
kube POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mlp-mem"}}' >/dev/null
P=$(free_port)
cluster_start "$WORK/data" "$P" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" \
	"mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" "${STANDIN_S3_CONF[@]}" || exit 1
export PGHOST=$WORK PGPORT=$P
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'mem')
q mlplat "CREATE EXTENSION mlplat" >/dev/null
# No resync for an hour: whatever converges below was woken by its commit.
q mlplat "ALTER SYSTEM SET mlplat.resync_interval = '1h'" >/dev/null && q mlplat "SELECT pg_reload_conf()" >/dev/null
sleep 1
$PSQL -d mlplat -c "SELECT mlplat.create_project('mem', 0)" \
	-c "SELECT mlplat.add_artifact_location('mem', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('mem', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('mem', 'm', '1', 'CANDIDATE')" \
	-c "SELECT count(mlplat.deploy('mem', 'd' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, 20) i" >/dev/null
wait_for mlplat "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'mem' AND d.status = 'READY'" 20 30
tap_ok $? "with resync every hour, 20 deployments still converge: their commits woke the reconcilers"

pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")
rss() { awk '/^RssAnon/ {print $2}' "/proc/$pid/status"; }
passes() { q mlplat "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"; }
# wake the leader over and over; each commit sets its latch
drive() {   # drive N: until the leader has done N more passes (bounded: 10 min)
	local target=$(($(passes) + $1)) deadline=$((SECONDS + 600))
	while [ "$(passes)" -lt "$target" ] && ((SECONDS < deadline)); do
		# a DO block is its own transaction, so each COMMIT inside really commits
		q mlplat "DO \$\$ BEGIN FOR i IN 1..500 LOOP PERFORM mlplat._wake_on_commit('deployments'); COMMIT; PERFORM pg_sleep(0.002); END LOOP; END \$\$" >/dev/null || return 1
	done
}
drive 300
p0=$(passes); r0=$(rss)
drive "$PASSES"
p1=$(passes); r1=$(rss)
growth=$((r1 - r0))
echo "# leader pid $pid: RssAnon ${r0} kB after $p0 passes, ${r1} kB after $p1 passes (+${growth} kB over $((p1 - p0)) passes)"
tap_ok $(( p1 - p0 < PASSES )) "the leader ran $((p1 - p0)) passes"
tap_ok $(( growth > 1024 )) "private memory stayed flat: +${growth} kB (limit 1024 kB) over $((p1 - p0)) passes"
tap_is "$(q mlplat "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments'")" 20 "those passes wrote nothing beyond the 20 applies"
tap_done
