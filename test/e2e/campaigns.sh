#!/usr/bin/env bash
# Optimization campaigns with the real workers running against the stand-in (issue 14).
# Scenario 1: creating a campaign of three candidates touches nothing outside the
# database — after two full passes of every reconciler there is no Job request and no S3
# write at the stand-in, no GPU counted, and the campaign is AWAITING_APPROVAL.
# Then the campaigns reconciler builds it: scenario 5 (a candidate that cannot fit the
# spend is NOT_RUN with no Job; max_parallel 1 starts the second Job only after the first
# finished), 6 (a Job whose attestation and output match is BUILT with a verified
# artifact, its Job deleted), 7 (a failed build with partial output is BUILD_FAILED and
# its outputs deleted; the campaign PARTIALLY_SUCCEEDED), 9 (cancel mid-build: CANCELLING
# while the Job is held terminating, CANCELLED once it is gone, nothing else created),
# a Job that disappears (JOB_DISAPPEARED) and a look-alike Job (a conflict, not adopted).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-campaigns
e2e_standin mlplat
DB=mlplat
P=cmp-e2e

. "$SRC/test/lib/campaigns.sh"
cmp_project cmp-e2e-evals

gpus0=$(q $DB "SELECT gpus_in_use FROM mlplat.project_status WHERE project = '$P'")
DEF=$(cmp_def 3)
got=$(q $DB "SELECT entity || ' ' || status FROM mlplat.create_campaign('$P', 'c', '$DEF', 'k1')")
tap_is "$got" "campaign AWAITING_APPROVAL" "create_campaign with three candidates"

# two full passes of every leader after the commit: whatever a worker would do, it has done
passes() { q $DB "SELECT string_agg(kind || '=' || passes, ',' ORDER BY kind) FROM mlplat.reconciler_health WHERE role = 'leader'"; }
before=$(passes)
deadline=$((SECONDS + 120))
ok=1
while ((SECONDS < deadline)); do
	if python3 - "$before" "$(passes)" <<'PY'
import sys
b = dict(x.split("=") for x in sys.argv[1].split(",") if x)
a = dict(x.split("=") for x in sys.argv[2].split(",") if x)
sys.exit(0 if b and all(int(a.get(k, 0)) >= int(v) + 2 for k, v in b.items()) else 1)
PY
	then ok=0; break; fi
	sleep 0.5
done
tap_ok $ok "every leader ran two more passes after the create ($before -> $(passes))"

reqs=$(admin GET "requests?since=$seq0" | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
jobs = [e for e in items if (e.get("kind") == "Job" or "/jobs" in e.get("path", "")) and e.get("method") != "GET"]
s3w = [e for e in items if e.get("area") == "s3" and e.get("method") in ("PUT", "POST", "DELETE")]
print(len(jobs), len(s3w))')
tap_is "$reqs" "0 0" "no Job request and no S3 write reached the stand-in"
tap_same "$gpus0" "$(q $DB "SELECT gpus_in_use FROM mlplat.project_status WHERE project = '$P'")" "gpus_in_use unchanged"
tap_is "$(q $DB "SELECT state || ' ' || planned || ' ' || coalesce(approved_by, '-') FROM mlplat.campaign_status WHERE project = '$P'")" \
	"AWAITING_APPROVAL 3 -" "still AWAITING_APPROVAL, three candidates PLANNED, no approval"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = '$P' AND at > now() - interval '10 minutes' AND kind NOT IN ('projects')")" 0 \
	"no reconciler ledger row for the project beyond its provisioning"
got=$(q $DB "SELECT status || ' ' || replayed FROM mlplat.create_campaign('$P', 'c', '$DEF', 'k1')")
tap_is "$got" "AWAITING_APPROVAL true" "the same key again is replayed"

# ---------------------------------------------------------------- the reconciler
S3=http://127.0.0.1:$STANDIN_S3
# --- scenarios 6 and 7 (and 5, max_parallel 1): campaign c: 1 BUILT, 2 fails with partial output, 3 BUILT
A1="weights of candidate a"; A3="weights of candidate c"
plan opt-c-1 "{\"ticks\": 3, \"s3\": [$(s3obj c 1 artifact "$A1" '{"checksum": true}'), $(s3obj c 1 attestation.json "$(attestation c 1 "$(sha "$A1")" ${#A1})")]}"
plan opt-c-2 "{\"ticks\": 2, \"failReason\": \"BackoffLimitExceeded\", \"s3\": [$(s3obj c 2 artifact partial '{"onFailure": true}')]}"
plan opt-c-3 "{\"ticks\": 2, \"s3\": [$(s3obj c 3 artifact "$A3"), $(s3obj c 3 attestation.json "$(attestation c 3 "$(sha "$A3")" ${#A3})")]}"
# the approver's session ends right after its commit: nothing depends on it
got=$(q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'c', 100000, '1 hour')")
tap_is "$got" "APPROVED" "approve_campaign (the session ends after its commit)"
wait_for $DB "SELECT mlplat.campaign_state('$P', 'c')" PARTIALLY_SUCCEEDED 180
tap_ok $? "campaign c ends PARTIALLY_SUCCEEDED ($(cstat c))"
tap_is "$(cstat c)" "BUILT FAILED:BUILD_FAILED BUILT" "candidate 1 BUILT, 2 BUILD_FAILED, 3 BUILT"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.candidate_transitions t1 JOIN mlplat.candidate_transitions t2 ON true
              JOIN mlplat.campaign_candidates k1 ON k1.id = t1.candidate_id JOIN mlplat.campaign_candidates k2 ON k2.id = t2.candidate_id
             WHERE k1.ordinal = 1 AND k2.ordinal = 2 AND k1.campaign_id = k2.campaign_id AND k1.project_id = k2.project_id
               AND t1.to_status = 'BUILT' AND t2.to_status = 'BUILDING' AND t2.at >= t1.at
               AND k1.campaign_id = (SELECT id FROM mlplat.campaigns WHERE name = 'c')")" 1 \
	"max_parallel 1: candidate 2 was admitted only after candidate 1 was BUILT"
tap_is "$(jobs_posted opt-c-1) $(jobs_posted opt-c-2) $(jobs_posted opt-c-3)" "1 1 1" "one create per builder Job"
tap_is "$(q $DB "SELECT a.output_sha256 || ' ' || a.output_bytes || ' ' || a.verified_by || ' ' || (a.attestation_sha256 ~ '^[0-9a-f]{64}$')
                 || ' ' || a.tool_version || ' ' || a.precision || ' ' || (a.builder_image_digest ~ '^sha256:1{64}$')
            FROM mlplat.optimized_artifacts a JOIN mlplat.campaign_candidates k ON k.id = a.candidate_id
            JOIN mlplat.campaigns c ON c.id = a.campaign_id WHERE c.name = 'c' AND k.ordinal = 1")" \
	"$(sha "$A1") ${#A1} x-amz-checksum-sha256 true 0.5.1 w4a16 true" "candidate 1's artifact: verified from the store's checksum, with its provenance"
tap_is "$(q $DB "SELECT a.verified_by FROM mlplat.optimized_artifacts a JOIN mlplat.campaign_candidates k ON k.id = a.candidate_id
            JOIN mlplat.campaigns c ON c.id = a.campaign_id WHERE c.name = 'c' AND k.ordinal = 3")" "download" \
	"candidate 3's artifact: no store checksum, so it was hashed on download"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.artifact_qualifications q JOIN mlplat.optimized_artifacts a ON a.id = q.artifact_id
            JOIN mlplat.campaigns c ON c.id = a.campaign_id WHERE c.name = 'c'")" 0 "no artifact is qualified by building it"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'campaigns' AND project = '$P' AND action = 'VERIFY' AND outcome = 'OK'")" 2 \
	"a VERIFY ledger row per verified output"
tap_is "$(q $DB "SELECT string_agg(s.status || ':' || (s.attributes->>'mlplat.verified_by'), ' ' ORDER BY k.ordinal)
            FROM mlplat.spans s JOIN mlplat.campaign_candidates k ON k.id = s.entity_id AND s.entity = 'campaign_candidate'
            JOIN mlplat.campaigns c ON c.id = k.campaign_id JOIN mlplat.projects p ON p.id = c.project_id
            LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
           WHERE p.name = '$P' AND c.name = 'c' AND s.name = 'campaigns.verify' AND s.status <> 'ERROR'
             AND s.trace_id = split_part(coalesce(a.traceparent, c.traceparent), '-', 2)")" \
	"UNSET:x-amz-checksum-sha256 UNSET:download" "a campaigns.verify span per verified output, under the approval's trace"
for j in 1 2 3; do
	wait_kube_gone "/apis/batch/v1/namespaces/$NS/jobs/opt-c-$j" 60
	tap_ok $? "Job opt-c-$j deleted once its candidate ended"
done
wait_for $DB "SELECT count(*) FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'c' AND k.cleanup_done_at IS NULL" 0 60
tap_ok $? "cleanup of every candidate is done"
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -I "$S3/artifacts/opt/$P/c/2/artifact")" 404 "the failed build's partial output is deleted"
tap_is "$(curl -s -o /dev/null -w '%{http_code}' -I "$S3/artifacts/opt/$P/c/1/artifact")" 200 "the built output stays"

# --- scenario 5: a candidate that cannot fit the approval's spend never gets a Job
DEF5=$(echo "$DEF" | python3 -c 'import json,sys; d=json.load(sys.stdin); d["candidates"]=d["candidates"][:1]; d["candidates"][0]["max_seconds"]=1200; print(json.dumps(d))')
q $DB "SELECT status FROM mlplat.create_campaign('$P', 's5', '$DEF5')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 's5', 1000, '1 hour')" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 's5')" FAILED 60
tap_ok $? "campaign s5 (1000 GPU-seconds for a 1 x 1200 s candidate) ends"
tap_is "$(cstat s5)" "NOT_RUN:SPEND_EXHAUSTED" "its candidate is NOT_RUN SPEND_EXHAUSTED"
tap_is "$(jobs_posted opt-s5-)" 0 "and no Job was requested for it"

# --- scenario 9: cancel mid-build; a Job held terminating keeps the candidate CANCEL_REQUESTED
DEF9=$(cmp_def 2)
plan opt-x-1 '{"ticks": 100000}'
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'x', '$DEF9')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'x', 100000, '1 hour')" >/dev/null
deadline=$((SECONDS + 90)); st=""
while ((SECONDS < deadline)); do
	st=$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-x-1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("status", {}).get("startTime", ""))' 2>/dev/null)
	[ -n "$st" ] && break
	sleep 0.2
done
tap_ok "$([ -n "$st" ] && echo 0 || echo 1)" "Job opt-x-1 is running"
# the builder runs as the project's runner ServiceAccount, with no token (the stand-in starts
# no pod whose ServiceAccount is missing)
tap_is "$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-x-1" | python3 -c 'import json,sys; s=json.load(sys.stdin)["spec"]["template"]["spec"]; print(s.get("serviceAccountName"), s.get("automountServiceAccountToken"))')" \
	"mlplat-runner False" "the builder Job names the runner ServiceAccount, no token mounted"
admin POST jobs/stuck "{\"namespace\": \"$NS\", \"name\": \"opt-x-1\", \"stuck\": true}" >/dev/null
tap_is "$(q $DB "SELECT status FROM mlplat.cancel_campaign('$P', 'x')")" CANCELLING "cancel_campaign mid-build: CANCELLING"
deadline=$((SECONDS + 90)); dt=""
while ((SECONDS < deadline)); do
	dt=$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-x-1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("metadata", {}).get("deletionTimestamp", ""))' 2>/dev/null)
	[ -n "$dt" ] && break
	sleep 0.2
done
tap_ok "$([ -n "$dt" ] && echo 0 || echo 1)" "the Job is being deleted (foreground)"
tap_is "$(admin GET "requests?since=$seq0&method=DELETE" | python3 -c 'import json,sys; print(sorted({e["path"].split("?")[0].rsplit("/",1)[1] + " " + e["path"].split("propagationPolicy=")[-1] for e in json.load(sys.stdin)["items"] if "opt-x-1" in e.get("path","")}))')" \
	"['opt-x-1 Foreground']" "its DELETE asked for foreground propagation"
# two more passes of the campaigns leader while the Job is held
p0=$(q $DB "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'")
wait_for $DB "SELECT passes >= $p0 + 2 FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'" t 60
tap_ok $? "two more passes of the campaigns leader while the Job is held"
tap_is "$(cstat x)" "CANCEL_REQUESTED CANCELLED:CAMPAIGN_CANCELLED" "held terminating: still CANCEL_REQUESTED; the PLANNED one CANCELLED"
wait_for $DB "SET mlplat.finalizer_alert_after = '1s'; SELECT count(*) FROM mlplat.alerts a JOIN mlplat.campaign_candidates k ON k.id = a.entity_id
              JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE a.alert = 'finalizer_stuck' AND a.kind = 'campaigns' AND c.name = 'x'
              AND a.detail LIKE 'builder Job $NS/opt-x-1 deleted % ago and not yet gone; cancel requested % ago%'" 1 30
tap_ok $? "a builder Job held terminating past mlplat.finalizer_alert_after raises finalizer_stuck"
admin POST jobs/stuck "{\"namespace\": \"$NS\", \"name\": \"opt-x-1\", \"stuck\": false}" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 'x')" CANCELLED 90
tap_ok $? "released: the campaign is CANCELLED ($(cstat x))"
tap_is "$(jobs_posted opt-x-2)" 0 "no Job for the candidate that was PLANNED"

# --- a Job that disappears outside mlplat; a look-alike under a candidate's name
plan opt-d-1 '{"ticks": 100000}'
DEFD=$(cmp_def 1)
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'd', '$DEFD')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'd', 100000, '1 hour')" >/dev/null
wait_for $DB "SELECT observed->>'job_created' FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'd'" true 90
tap_ok $? "Job opt-d-1 created and acknowledged"
kube DELETE "/apis/batch/v1/namespaces/$NS/jobs/opt-d-1?propagationPolicy=Background" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 'd')" FAILED 90
tap_ok $? "campaign d FAILED once its Job was deleted"
tap_is "$(cstat d)" "FAILED:JOB_DISAPPEARED" "a Job deleted outside mlplat: FAILED JOB_DISAPPEARED"
tap_is "$(jobs_posted opt-d-1)" 1 "and it was not resubmitted"

# planted: the right name, another image
# (without the builder component label: no LIST shows it, so only the create's 409 finds it)
kube POST "/apis/batch/v1/namespaces/$NS/jobs" "$(q $DB "SELECT jsonb_set(jsonb_set(mlplat.render_builder_job('$P', 'c', 'a') #- '{metadata,labels,app.kubernetes.io/component}', '{metadata,name}', '\"opt-e-1\"'),
   '{spec,template,spec,containers,0,image}', '\"registry.example/evil@sha256:$(printf '2%.0s' $(seq 64))\"')")" >/dev/null
plan opt-e-1 '{"ticks": 100000}'
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'e', '$DEFD')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'e', 100000, '1 hour')" >/dev/null
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'campaigns' AND project = '$P' AND action = 'ADOPT' AND outcome = 'CONFLICT'" t 90
tap_ok $? "a planted Job with another image under the name is a conflict (ledger ADOPT CONFLICT)"
tap_is "$(q $DB "SELECT k.status || ' ' || coalesce(k.observed->>'job_created', 'false') || ' ' || (k.status_reason LIKE '%not this candidate''s%') FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE c.name = 'e'")" \
	"BUILDING false true" "not adopted: the candidate says why"
tap_is "$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-e-1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]["image"].split("@")[0])')" \
	"registry.example/evil" "and not touched"
tap_is "$(q $DB "SELECT status FROM mlplat.cancel_campaign('$P', 'e')")" CANCELLING "cancel it"
wait_for $DB "SELECT mlplat.campaign_state('$P', 'e')" CANCELLED 60
tap_ok $? "cancelled: the name is held by another Job, so no Job of this candidate exists ($(cstat e))"
tap_done
