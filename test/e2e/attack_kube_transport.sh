#!/usr/bin/env bash
# Issue 18, findings 3 and 7 for Kubernetes: when the API server cannot be reached,
# libcurl's error names its host and port ("Failed to connect to 127.0.0.1 port N").
# That line reached tenants: a project's last_error and status_reason, a rollout's
# last_error, their spans.  A tenant (a developer of the project, as its own login) now
# reads that the cluster did not answer; administrators keep the detail in the ledger
# (mlplat.admin_ledger) and the server log.
# Before: the tenant found the API server's address in projects, rollouts and spans.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
# no Lease fence: with it on, a dead API server also stops the workers once the Lease
# lapses; the leak is the same before that, only its window shorter
e2e_standin_cluster attack_kube_transport "mlplat.lease_fence = off" \
	"mlplat.backoff_max = '2s'"
tap_ok $? "cluster started"
DB=mlplat
q postgres "CREATE DATABASE mlplat" >/dev/null
q $DB "CREATE EXTENSION mlplat" >/dev/null
q $DB "CREATE ROLE kt_dev LOGIN" >/dev/null
q $DB "SELECT mlplat.create_project('kt', 4, '8', '16Gi'); SELECT mlplat.add_artifact_location('kt', 's3://models/')" >/dev/null
q $DB "SELECT mlplat.grant_role('kt', 'kt_dev', 'developer')" >/dev/null
for v in 1 2; do
	sha=$(standin_artifact "s3://models/m/$v" "m-v$v")
	q $DB "SELECT mlplat.register_model_version('kt', 'm', '$v', 's3://models/m/$v', '$sha', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('kt', 'm', '$v', 'CANDIDATE')" >/dev/null
done
q $DB "SELECT status FROM mlplat.deploy('kt', 'web', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'web'" READY 30
tap_ok $? "project kt and deployment web are READY"

# the API server goes away: nothing listens on its port any more
DEAD=$(free_port)
q $DB "ALTER SYSTEM SET mlplat.kube_url = 'http://127.0.0.1:$DEAD'" >/dev/null && q $DB "SELECT pg_reload_conf()" >/dev/null
q $DB "SELECT mlplat.create_project('kt2', 0); SELECT mlplat.grant_role('kt2', 'kt_dev', 'developer')" >/dev/null
q $DB "SELECT status FROM mlplat.start_rollout('kt', 'web', 'm', '2', '{\"steps\": [0.1, 0.5], \"ceiling\": 0.5, \"window_seconds\": 5}')" >/dev/null
# as kt_dev: the tenant's own login
tenant() { $PSQL -d $DB -U kt_dev -c "$1"; }
wait_for $DB "SELECT count(*) FROM mlplat.projects WHERE name = 'kt2' AND last_error IS NOT NULL" 1 60
rc=$?; tap_ok $rc "a project applied while the API server is gone records an error"
wait_for $DB "SELECT count(*) FROM mlplat.rollouts WHERE last_error IS NOT NULL" 1 60
rc2=$?; tap_ok $rc2 "so does the rollout that cannot read its InferenceService"
if [ $rc != 0 ] || [ $rc2 != 0 ]; then
	q $DB "SELECT name, status, last_error FROM mlplat.projects" | sed 's/^/# project: /'
	q $DB "SELECT id, status, last_error FROM mlplat.rollouts" | sed 's/^/# rollout: /'
fi
err=$(tenant "SELECT last_error FROM mlplat.projects WHERE name = 'kt2'")
case "$err" in *"the cluster did not answer (details for administrators)"*) ok=0 ;; *) ok=1 ;; esac
tap_ok $ok "the tenant reads that the cluster did not answer ($(echo "$err" | cut -c1-160))"

# the tenant searches every mlplat table and view it may read
tenant_finds() {  # marker -> relations where kt_dev finds it
	local t n found=
	for t in $(q $DB "SELECT c.oid::regclass FROM pg_class c WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind IN ('r', 'v')
	                   AND has_table_privilege('kt_dev', c.oid, 'SELECT') ORDER BY c.relname"); do
		n=$(tenant "SELECT count(*) FROM $t x WHERE strpos(x::text, '$1') > 0" 2>/dev/null)
		[ "${n:-0}" != 0 ] && found="$found$t "
	done
	echo "$found"
}
seen=$(tenant_finds 'did not answer')
case "$seen" in *mlplat.projects*) ok=0 ;; *) ok=1 ;; esac
tap_ok $ok "the tenant does read its rows' errors, so the searches below can find something ($seen)"
tap_is "$(tenant_finds ":$DEAD")" "" "the tenant finds the API server's address nowhere"
tap_is "$(tenant_finds "port $DEAD")" "" "... nor its port as libcurl writes it"
tap_is "$(tenant_finds "Failed to connect")" "" "... nor libcurl's message"
tap_ok $([ "$(q $DB "SELECT count(*) FROM mlplat.admin_ledger WHERE strpos(error, 'port $DEAD') > 0")" -gt 0 ]; echo $?) \
	"the administrator reads the transport error, with the address, in mlplat.admin_ledger"
tap_is "$(tenant "SELECT count(*) FROM mlplat.admin_ledger" 2>&1)" 0 "and the tenant reads no row of it"

# the API server is back: everything converges and the errors clear
q $DB "ALTER SYSTEM SET mlplat.kube_url = '$STANDIN_URL'" >/dev/null && q $DB "SELECT pg_reload_conf()" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'kt2'" READY 60
tap_ok $? "the API server is back: the project converges"
tap_done
