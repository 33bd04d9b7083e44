#!/usr/bin/env bash
# Optimization campaigns when builders, answers and time misbehave (issue 14), with the real
# workers against the stand-in:
# - scenario 8: an attestation of another base model, of another GPU architecture, or with a
#   digest its output does not have is refused (ATTESTATION_MISMATCH, OUTPUT_DIGEST_MISMATCH):
#   no optimized artifact, and the outputs are deleted like any failed build's;
# - scenario 13: a create whose answer is lost (the stand-in stores the Job and drops the
#   connection) leaves one Job, adopted through the write-ahead note (ledger CREATE RETRY,
#   then ADOPT OK); the leader's backend terminated mid-build comes back to the same Job; the
#   approval expiring mid-build deletes the Job (foreground) and the candidate is FAILED
#   APPROVAL_EXPIRED_WHILE_BUILDING (kill -9 of the server: campaigns_crash.sh);
# - scenario 15: a builder Job of ours that no candidate owns is torn down (ORPHAN_TEARDOWN);
#   two parallel candidates racing for the last budget: the second waits while the first
#   runs, and the actual spend never exceeds the approval;
# - per-candidate backoff: refused creates count attempts and defer the next request in the
#   candidate's row (attempts, next_attempt_at); a success resets them.
# Every step waits for an observable event (a row, a request or write at the stand-in).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-campaigns-faults
e2e_standin mlplat
DB=mlplat
P=cmp-flt
. "$SRC/test/lib/campaigns.sh"
cmp_project cmp-flt-evals
cid() { q $DB "SELECT k.id FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
                JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = '$1' AND k.ordinal = $2"; }
ledger() { q $DB "SELECT coalesce(string_agg(action || ':' || outcome, ' ' ORDER BY id), '') FROM mlplat.reconcile_ledger
                   WHERE kind = 'campaigns' AND entity_id = $1"; }
job_writes() { admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); print(w.get(sys.argv[1], {}).get(sys.argv[2], 0))' "Job/$NS/$1" "$2"; }
head_code() { curl -s -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$STANDIN_S3/artifacts/opt/$P/$1"; }

# ---------------------------------------------------------------- scenario 13
# The create of opt-l-1 is stored and its connection dropped, and so are libcurl's resends of it.
# The Job then runs past the approval (deadlineScale stretches activeDeadlineSeconds 100-fold, so
# only the expiry can end it): max_seconds 60 (the least a plan may ask) in a 75-second approval,
# so the build must be claimed within 15 s of the approval (it takes under 1 s) and the script
# waits no longer than the approval.  Scenario 13 starts first; while its approval runs out,
# scenarios 8 and 15 and the backoff run (their Jobs finish or are deleted on their own; nothing
# else is created while the create fault is on) and its expiry is checked at the end.
admin POST config '{"deadlineScale": 100}' >/dev/null
admin POST faults "{\"method\": \"POST\", \"path\": \"/namespaces/$NS/jobs\$\", \"drop\": 1, \"times\": 20}" >/dev/null
plan opt-l-1 '{"ticks": 100000}'
DEFL=$(cmp_def 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); d["candidates"][0]["max_seconds"]=60; print(json.dumps(d))')
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'l', '$DEFL')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'l', 100000, '75 seconds')" >/dev/null
L=$(cid l 1)
wait_for $DB "SELECT observed->>'job_created' FROM mlplat.campaign_candidates WHERE id = $L" true 60
tap_ok $? "candidate l/1's Job is known created although no create was answered"
admin DELETE faults >/dev/null
creates=$(admin GET "requests?name=opt-l-1&method=POST" | python3 -c 'import json,sys; print(" ".join(str(e["status"]) + ("/dropped" if e.get("dropped") else "") for e in json.load(sys.stdin)["items"]))')
[[ "$creates" =~ ^201/dropped(\ 409/dropped)*$ ]]
tap_ok $? "the stand-in stored the create and dropped every answer ($creates)"
tap_is "$(job_writes opt-l-1 create)" 1 "one Job created at the stand-in"
tap_is "$(ledger $L)" "CREATE:RETRY ADOPT:OK" "the ledger: the unanswered create, then the adoption of what it made"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'campaigns' AND entity_id = $L")" 0 \
	"the write-ahead note is settled by the adoption"
uid0=$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-l-1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')

# the leader's backend terminated mid-build: its successor comes back to the same Job
victim=$(q $DB "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'")
tap_is "$(q $DB "SELECT pg_terminate_backend($victim)")" t "pg_terminate_backend of the campaigns leader (pid $victim) mid-build"
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader' AND pid <> $victim AND passes >= 2" 1 90
tap_ok $? "another campaigns leader took over and ran two passes"
tap_is "$(q $DB "SELECT status || ' ' || (observed->>'job_created') FROM mlplat.campaign_candidates WHERE id = $L") $(job_writes opt-l-1 create)" \
	"BUILDING true 1" "the candidate still builds, with no second create"
tap_same "$uid0" "$(kube GET "/apis/batch/v1/namespaces/$NS/jobs/opt-l-1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')" \
	"the same Job (uid) runs"

# ---------------------------------------------------------------- scenario 8
DEF=$(cmp_def 3 '{"max_parallel": 3}')
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'm', '$DEF')" >/dev/null
O1="weights of another base"; O2="weights for sm_80"; O3="weights that are not attested"
OTHER_BASE=$(printf 'b%.0s' $(seq 64))
plan opt-m-1 "{\"ticks\": 2, \"s3\": [$(s3obj m 1 artifact "$O1" '{"checksum": true}'), $(s3obj m 1 attestation.json "$(attestation m 1 "$(sha "$O1")" ${#O1} "{\"base_artifact_sha256\": \"$OTHER_BASE\"}")")]}"
plan opt-m-2 "{\"ticks\": 2, \"s3\": [$(s3obj m 2 artifact "$O2" '{"checksum": true}'), $(s3obj m 2 attestation.json "$(attestation m 2 "$(sha "$O2")" ${#O2} '{"hardware": {"accelerator": "nvidia-h100", "arch": "sm_80"}}')")]}"
plan opt-m-3 "{\"ticks\": 2, \"s3\": [$(s3obj m 3 artifact "$O3" '{"checksum": true}'), $(s3obj m 3 attestation.json "$(attestation m 3 "$(sha "something else")" ${#O3})")]}"
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'm', 100000, '1 hour')" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 'm')" FAILED 180
tap_ok $? "campaign m ends FAILED ($(cstat m))"
tap_is "$(cstat m)" "FAILED:ATTESTATION_MISMATCH FAILED:ATTESTATION_MISMATCH FAILED:OUTPUT_DIGEST_MISMATCH" \
	"another base model and another arch: ATTESTATION_MISMATCH; a wrong output digest: OUTPUT_DIGEST_MISMATCH"
reasons=$(q $DB "SELECT string_agg(k.status_reason, ' | ' ORDER BY k.ordinal) FROM mlplat.campaign_candidates k
                  JOIN mlplat.campaigns c ON c.id = k.campaign_id JOIN mlplat.projects p ON p.id = c.project_id
                 WHERE p.name = '$P' AND c.name = 'm'")
[[ "$reasons" == *"base_artifact_sha256 is \"$OTHER_BASE\""*"hardware.arch is \"sm_80\"; the plan says \"sm_90\""*"has sha256 $(sha "$O3"); the attestation says $(sha "something else")"* ]]
tap_ok $? "each refusal names the field and both values ($reasons)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.optimized_artifacts a JOIN mlplat.campaigns c ON c.id = a.campaign_id
                  JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = 'm'")" 0 "no optimized artifact for any of them"
tap_is "$(ledger "$(cid m 3)" | grep -o 'VERIFY:[A-Z]*')" "VERIFY:FAILED" "the digest mismatch is a VERIFY FAILED ledger row"
tap_is "$(q $DB "SELECT desired_digest || ' ' || observed_digest FROM mlplat.reconcile_ledger WHERE kind = 'campaigns' AND action = 'VERIFY' AND entity_id = $(cid m 3)")" \
	"$(sha "something else") $(sha "$O3")" "... with the attested and the observed digest"
tap_is "$(q $DB "SELECT string_agg(s.status || ':' || (s.attributes->>'mlplat.reason_code'), ' ' ORDER BY s.entity_id) FROM mlplat.spans s
                 WHERE s.name = 'campaigns.verify' AND s.entity = 'campaign_candidate' AND s.entity_id IN ($(cid m 1), $(cid m 2), $(cid m 3))")" \
	"ERROR:ATTESTATION_MISMATCH ERROR:ATTESTATION_MISMATCH ERROR:OUTPUT_DIGEST_MISMATCH" "each refusal ends its campaigns.verify span in ERROR with the reason"
wait_for $DB "SELECT count(*) FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
              JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = 'm' AND k.cleanup_done_at IS NULL" 0 60
tap_ok $? "cleanup of every refused candidate is done"
tap_is "$(for o in 1 2 3; do printf '%s %s ' "$(head_code m/$o/artifact)" "$(head_code m/$o/attestation.json)"; done)" \
	"404 404 404 404 404 404 " "refused outputs and their attestations are deleted"
for o in 1 2 3; do
	wait_kube_gone "/apis/batch/v1/namespaces/$NS/jobs/opt-m-$o" 60 || { tap_ok 1 "Job opt-m-$o deleted"; continue; }
done
tap_ok 0 "every builder Job of campaign m is deleted"

# an attestation whose times cannot be a build's: not an attestation (ATTESTATION_INVALID)
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'v', '$(cmp_def 1)')" >/dev/null
O4="weights with times reversed"
plan opt-v-1 "{\"ticks\": 1, \"s3\": [$(s3obj v 1 artifact "$O4"), $(s3obj v 1 attestation.json "$(attestation v 1 "$(sha "$O4")" ${#O4} '{"started_at": 1764410460, "finished_at": 1764410400}')")]}"
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'v', 100000, '1 hour')" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 'v')" FAILED 120
tap_ok $? "campaign v FAILED"
tap_is "$(cstat v) $(q $DB "SELECT k.status_reason FROM mlplat.campaign_candidates k WHERE k.id = $(cid v 1)")" \
	"FAILED:ATTESTATION_INVALID attestation field finished_at is before started_at" "an attestation finished before it started is refused"

# ---------------------------------------------------------------- scenario 15
# an orphan: a builder Job with our labels and a campaign that does not exist
GHOST=$(q $DB "SELECT jsonb_set(jsonb_set(mlplat.render_builder_job('$P', 'm', 'a'), '{metadata,name}', '\"opt-ghost-1\"'),
                                '{metadata,labels,mlplat.io/campaign}', '\"ghost\"')")
plan opt-ghost-1 '{"ticks": 100000}'
# (the create's own answer: a GET after it races the teardown below)
tap_is "$(kube POST "/apis/batch/v1/namespaces/$NS/jobs" "$GHOST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')" \
	opt-ghost-1 "a builder Job no candidate owns was planted"
wait_kube_gone "/apis/batch/v1/namespaces/$NS/jobs/opt-ghost-1" 60
tap_ok $? "it is torn down"
wait_for $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'campaigns' AND action = 'ORPHAN_TEARDOWN' AND outcome = 'OK'
              AND project = '$P' AND detail::text LIKE '%opt-ghost-1%'" 1 30
tap_ok $? "ledger ORPHAN_TEARDOWN for it"

# the spend race: 1000 GPU-seconds for two parallel 1 x 600 s candidates — one runs, the other waits
plan opt-r-1 '{"ticks": 100000}'
plan opt-r-2 '{"ticks": 1, "failReason": "BackoffLimitExceeded"}'
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'r', '$(cmp_def 2 '{"max_parallel": 2}')')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'r', 1000, '1 hour')" >/dev/null
R1=$(cid r 1)
R2=$(cid r 2)
wait_for $DB "SELECT observed->>'job_created' FROM mlplat.campaign_candidates WHERE id = $R1" true 60
tap_ok $? "the first candidate builds"
wait_for $DB "SELECT status || ' ' || (status_reason LIKE 'waiting for spend: 600 GPU-seconds committed of 1000, 600 reserved%') FROM mlplat.campaign_candidates WHERE id = $R2" "PLANNED true" 60
tap_ok $? "the second waits for spend while the first holds its reservation"
tap_is "$(job_writes opt-r-2 create)" 0 "... with no Job"
tap_is "$(q $DB "SELECT spend_committed_gpu_seconds <= 1000 FROM mlplat.campaign_status WHERE project = '$P' AND campaign = 'r'")" t "committed spend within the approval"
# the first build's Job disappears after a few seconds: its actual spend is a few GPU-seconds,
# so the second now fits
kube DELETE "/apis/batch/v1/namespaces/$NS/jobs/opt-r-1?propagationPolicy=Background" >/dev/null
wait_for $DB "SELECT mlplat.campaign_state('$P', 'r')" FAILED 120
tap_ok $? "campaign r FAILED"
tap_is "$(cstat r)" "FAILED:JOB_DISAPPEARED FAILED:BUILD_FAILED" "the first ended, then the second ran"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.candidate_transitions b JOIN mlplat.candidate_transitions e ON e.candidate_id = $R1 AND e.to_status = 'FAILED'
                  WHERE b.candidate_id = $R2 AND b.to_status = 'BUILDING' AND b.at >= e.at")" 1 \
	"the second was admitted only after the first had ended"
tap_is "$(q $DB "SELECT sum(actual_gpu_seconds) <= 1000 AND bool_and(actual_gpu_seconds <= reserved_gpu_seconds) FROM mlplat.campaign_candidates k
                  JOIN mlplat.campaigns c ON c.id = k.campaign_id JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = 'r'")" t \
	"total actual spend within the approval"
# ---------------------------------------------------------------- per-candidate backoff
# every create of opt-b-1 is refused (503): each failure counts an attempt and defers the next
# request (mlplat_backoff_delay_ms: 0.5 s, then up to 1 s, 2 s, ...) in the candidate's row
# A refused create may still have landed (a 503 proves nothing), so the next one waits for
# mlplat.unanswered_write_grace as well (60 s by default); an operator's shortest grace leaves
# the backoff alone to space them
on_exit 'q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.unanswered_write_grace = '100ms'" >/dev/null && q $DB "SELECT pg_reload_conf()" >/dev/null
seqb=$(admin GET requests | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
admin POST faults "{\"method\": \"POST\", \"path\": \"/namespaces/$NS/jobs\$\", \"status\": 503}" >/dev/null
plan opt-b-1 '{"ticks": 100000}'
q $DB "SELECT status FROM mlplat.create_campaign('$P', 'b', '$(cmp_def 1)')" >/dev/null
q $DB "SELECT status FROM mlplat.approve_campaign('$P', 'b', 100000, '1 hour')" >/dev/null
B=$(cid b 1)
wait_for $DB "SELECT attempts >= 3 FROM mlplat.campaign_candidates WHERE id = $B" t 90
tap_ok $? "three refused creates: attempts counted in the candidate's row"
tap_is "$(q $DB "SELECT attempts >= 3 AND last_error LIKE 'retrying: %' FROM mlplat._entities WHERE kind = 'campaigns' AND entity_id = $B")" t \
	"the building candidate is among the reconciled entities, with its attempts and last error (health, alerts, metrics)"
# the creates since the fault (a refused request carries no object name: by path; nothing
# else of the project is created meanwhile)
posts() { admin GET "requests?since=$seqb&method=POST" | python3 -c '
import json, sys
from datetime import datetime
items = [e for e in json.load(sys.stdin)["items"] if e.get("path", "").split("?")[0].endswith("/namespaces/" + sys.argv[1] + "/jobs")]
print(len(items), min([1e9] + [(datetime.fromisoformat(b["time"].replace("Z", "+00:00")) - datetime.fromisoformat(a["time"].replace("Z", "+00:00"))).total_seconds() * 1000
                              for a, b in zip(items, items[1:])]))' "$NS"; }
got=$(q $DB "SELECT attempts, next_attempt_at > observed_at, status_reason LIKE 'retrying: %' FROM mlplat.campaign_candidates WHERE id = $B" | tr '|' ' ')
read -r a1 deferred retrying <<<"$got"
read -r n1 _ < <(posts)
a2=$(q $DB "SELECT attempts FROM mlplat.campaign_candidates WHERE id = $B")
tap_is "$deferred $retrying" "t t" "the next attempt is deferred past the last write-back, and the candidate says it is retrying"
# one request per counted attempt (read between two counts of attempts; the one in flight,
# at most, beside them): nothing is resent early
((n1 >= a1 && n1 <= a2 + 1))
tap_ok $? "one create per attempt ($n1 requests for $a1..$a2 attempts)"
read -r _ gap < <(posts)
python3 -c "import sys; sys.exit(0 if float('$gap') >= 450 else 1)"
tap_ok $? "no two creates closer than the first backoff step (closest: ${gap} ms)"
admin DELETE faults >/dev/null
wait_for $DB "SELECT (observed->>'job_created') || ' ' || attempts FROM mlplat.campaign_candidates WHERE id = $B" "true 0" 90
tap_ok $? "the cluster answers again: the Job is created and attempts are reset"
tap_is "$(job_writes opt-b-1 create)" 1 "one Job"
tap_is "$(q $DB "SELECT status FROM mlplat.cancel_campaign('$P', 'b')")" CANCELLING "cancel it"
wait_for $DB "SELECT mlplat.campaign_state('$P', 'b')" CANCELLED 90
tap_ok $? "CANCELLED"
q $DB "ALTER SYSTEM RESET mlplat.unanswered_write_grace" >/dev/null && q $DB "SELECT pg_reload_conf()" >/dev/null
# ---------------------------------------------------------------- scenario 13, at the expiry
# the approval expires mid-build: the Job is deleted (foreground), then the candidate ends
wait_for $DB "SELECT status || ':' || reason_code FROM mlplat.campaign_candidates WHERE id = $L" FAILED:APPROVAL_EXPIRED_WHILE_BUILDING 180
tap_ok $? "at the approval's expiry the build ends FAILED APPROVAL_EXPIRED_WHILE_BUILDING"
tap_is "$(q $DB "SELECT (SELECT expires_at FROM mlplat.campaign_approvals a JOIN mlplat.campaigns c ON c.id = a.campaign_id
                          JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = 'l') <= t.at
                  FROM mlplat.candidate_transitions t WHERE t.candidate_id = $L AND t.to_status = 'FAILED'")" t "not before the expiry"
tap_is "$(kube_code "/apis/batch/v1/namespaces/$NS/jobs/opt-l-1")" 404 "its Job is gone"
tap_is "$(admin GET "requests?name=opt-l-1&method=DELETE" | python3 -c 'import json,sys; print(sorted({e["path"].split("propagationPolicy=")[-1] for e in json.load(sys.stdin)["items"]}))')" \
	"['Foreground']" "deleted with foreground propagation (no Pod outlives it)"
tap_is "$(ledger $L)" "CREATE:RETRY ADOPT:OK DELETE:OK" "ledger: CREATE, ADOPT, DELETE"
tap_is "$(job_writes opt-l-1 create)" 1 "still one create of the Job"
tap_is "$(q $DB "SELECT actual_gpu_seconds <= reserved_gpu_seconds FROM mlplat.campaign_candidates WHERE id = $L")" t "its spend is within its reservation"
admin POST config '{"deadlineScale": 1}' >/dev/null

tap_done
