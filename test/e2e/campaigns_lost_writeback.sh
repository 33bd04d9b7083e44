#!/usr/bin/env bash
# Issue 22, campaigns: the campaigns leader is terminated while its builder Job create is in
# flight (held at the stand-in before it is applied), then the campaign is cancelled.  The
# new leader must not conclude "cancelled before the builder Job was created" from the
# database or from a first LIST alone:
#   A  the create lands after the cancel and the new leader's first passes: the candidate
#      stays CANCEL_REQUESTED (no Job yet) until it does; then the Job is adopted and deleted
#      (ledger ADOPT, DELETE) and the candidate CANCELLED; one create, no note left;
#   B  the create never lands: CANCELLED after mlplat.unanswered_write_grace, no Job.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-campaigns-lwb
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
DB=mlplat
P=cmp-lwb
on_exit 'release_holds drop; workers_resume $DB; q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '40s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
. "$SRC/test/lib/campaigns.sh"
cmp_project cmp-lwb-evals
cid() { q $DB "SELECT k.id FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
                JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = '$1' AND k.ordinal = 1"; }
job_code() { kube_code "/apis/batch/v1/namespaces/$NS/jobs/opt-$1-1"; }
job_creates() { admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); w=w.get("writes",w); print(w.get(sys.argv[1], {}).get("create", 0))' "Job/$NS/opt-$1-1"; }
notes() { q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'campaigns' AND entity_id = $1"; }

# one case: approve a campaign whose builder Job create is held before it is applied, kill
# the leader, cancel
interrupt() {   # CAMPAIGN
	local epoch
	plan "opt-$1-1" '{"ticks": 100000}'
	q $DB "SELECT status FROM mlplat.create_campaign('$P', '$1', '$(cmp_def 1)')" >/dev/null
	hold_rule '{"method":"POST","path":"/namespaces/'"$NS"'/jobs$","hold":"before","times":1}' >/dev/null
	q $DB "SELECT status FROM mlplat.approve_campaign('$P', '$1', 100000, '1 hour')" >/dev/null
	wait_held 1 60
	tap_ok $? "$1: the leader's builder Job create is held at the stand-in before it is applied"
	epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'campaigns'")
	workers_pause $DB
	leader_kill $DB campaigns
	tap_is "$(q $DB "SELECT status FROM mlplat.cancel_campaign('$P', '$1')")" CANCELLING \
		"$1: cancel_campaign commits while no leader has written the create back"
	workers_resume $DB
	wait_new_leader $DB campaigns "$epoch" 60
	tap_ok $? "$1: a new campaigns leader took over"
}

# --- A: the create is in flight; it lands after the new leader's first passes
interrupt a
K=$(cid a)
passes_after $DB campaigns 3
tap_ok $? "A: three passes of the campaigns leader"
tap_is "$(cstat a)/$(job_code a)" CANCEL_REQUESTED/404 \
	"A: the candidate stays CANCEL_REQUESTED while its unanswered Job create may still land (no Job yet)"
release_holds
wait_for $DB "SELECT mlplat.campaign_state('$P', 'a')" CANCELLED 60
tap_ok $? "A: once the Job lands, it is adopted and deleted, and the campaign CANCELLED (candidate: $(cstat a))"
l=$(ledger_of $DB campaigns "$NS/opt-a-1")
[[ "$l" =~ ^ADOPT:OK\ DELETE:OK ]]
tap_ok $? "A: the ledger records the Job's adoption, then its delete ($l)"
tap_is "$(job_code a)/$(job_creates a)/$(notes "$K")" 404/1/0 "A: the Job is gone; it was created once; no note left"

# --- B: the create never lands: cancelled once it had the grace time to
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '3s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
interrupt b
K=$(cid b)
release_holds drop
wait_for $DB "SELECT mlplat.campaign_state('$P', 'b')" CANCELLED 60
tap_ok $? "B: a Job create that never lands: CANCELLED after the grace (candidate: $(cstat b))"
tap_is "$(job_code b)/$(job_creates b)/$(notes "$K")" 404/0/0 "B: no Job, no create, no note left"
tap_done
