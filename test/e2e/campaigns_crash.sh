#!/usr/bin/env bash
# kill -9 of the campaigns leader while its create of a builder Job is in flight (issue 14,
# scenario 13, R16): the stand-in parks the create before applying it, the leader dies, the
# server restarts every backend, and the create is applied with nobody to read its answer.
# The restarted leader resumes from the tables alone: the write-ahead note of the create
# survived the crash, the Job is found and adopted (ledger ADOPT OK, no CREATE OK), the
# stand-in holds exactly one create, and the candidate's spend reservation is counted once.
# A crash restarts every backend, so this runs on a private cluster of its own against the
# script's stand-in (the Lease fence is off: one cluster drives this stand-in).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-campaigns-crash
e2e_standin
e2e_own_cluster campaigns-crash
PP=$(free_port)
cluster_start "$WORK/data" "$PP" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "mlplat.leader_retry_interval = '250ms'" \
	"mlplat.resync_interval = '1s'" "${STANDIN_CONF[@]}" "mlplat.lease_fence = off"
tap_ok $? "private cluster for the crash case started"
export PGHOST=$WORK PGPORT=$PP
$PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
DB=mlplat
P=cmp-crash
q $DB "CREATE EXTENSION mlplat" >/dev/null
. "$SRC/test/lib/campaigns.sh"
cmp_project cmp-crash-evals
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'" 1 60
tap_ok $? "the private cluster has a campaigns leader"
job_creates() { admin GET writes | python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], {}).get("create", 0))' "Job/$NS/opt-k-1"; }

plan opt-k-1 '{"ticks": 100000}'
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'k', '$(cmp_def 1)')" >/dev/null
admin POST faults "{\"method\": \"POST\", \"path\": \"/namespaces/$NS/jobs\$\", \"hold\": \"before\", \"times\": 1}" >/dev/null
victim=$(q $DB "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'")
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'k', 100000, '1 hour')" >/dev/null
# waiting for the park (not a sleep) keeps this deterministic however slow the leader is
parked=0
for _ in $(seq 1 600); do
	[[ "$(admin GET holds | grep -c "$NS/jobs")" -ge 1 ]] && { parked=1; break; }
	sleep 0.1
done
tap_is "$parked" 1 "the leader's create of opt-k-1 is in flight (parked at the stand-in)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'campaigns' AND object = '$NS/opt-k-1' AND action = 'CREATE'")" 1 \
	"its write-ahead note was committed before it was sent"
kill -9 "$victim"
tap_ok $? "kill -9 of the campaigns leader (pid $victim) with its create in flight"
# a create by the restarted leader before the parked one is applied is refused (503); then
# the parked one is applied, and nobody reads its answer
admin POST faults "{\"method\": \"POST\", \"path\": \"/namespaces/$NS/jobs\$\", \"status\": 503}" >/dev/null
admin POST holds/release '{}' >/dev/null
for _ in $(seq 1 100); do [[ "$(job_creates)" -ge 1 ]] && break; sleep 0.1; done
admin DELETE faults >/dev/null
tap_is "$(job_creates)" 1 "the create was applied at the stand-in"
wait_for $DB "SELECT k.observed->>'job_created' FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'k'" true 90
tap_ok $? "after the crash restart the candidate knows its Job"
tap_is "$(q $DB "SELECT string_agg(action || ':' || outcome, ' ' ORDER BY id) FROM mlplat.reconcile_ledger WHERE kind = 'campaigns' AND outcome = 'OK'")" \
	"ADOPT:OK" "the restarted leader adopted it; no leader read a successful create"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'campaigns'")" 0 "the note is settled"
tap_is "$(q $DB "SELECT k.status || ' ' || (SELECT spend_committed_gpu_seconds FROM mlplat.campaign_status WHERE campaign = 'k')
                  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'k'")" \
	"BUILDING 600" "the candidate builds, its reservation counted once"
grep -q 'all server processes terminated; reinitializing' "$WORK/data.log"
tap_ok $? "the server really did restart every backend"
tap_is "$(q $DB "SELECT status FROM mlplat.cancel_campaign('$P', 'k')")" CANCELLING "cancel it"
wait_for $DB "SELECT mlplat.campaign_state('$P', 'k')" CANCELLED 90
tap_ok $? "CANCELLED once its Job is gone"
tap_is "$(job_creates) $(kube_code "/apis/batch/v1/namespaces/$NS/jobs/opt-k-1")" "1 404" "one create in all; the Job is gone"
tap_done
