#!/usr/bin/env bash
# Issue 18, finding 12: a paginated LIST had no page cap, restarted at once on
# an expired continue token, and kept every page in pass memory.  Against a
# stand-in whose continue chain never ends, whose pages are 30 MB, or which
# expires every continue token, a pass now stops cleanly with a message in
# reconciler_health (mlplat.list_max_pages, mlplat.pass_memory_limit, 410s),
# the worker stays up and bounded, and everything converges once the remote
# behaves.  Before: the endless chain kept one pass LISTing forever.  The
# deployments reconciler LISTs its fleet on its full passes (one a second here),
# with mlplat.deployments_watch off: with it on, a full pass reads the watch cache
# and LISTs only to fill it (at a leader's start, after 410 Gone).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_standin_cluster list_bounds "mlplat.resync_interval = '1s'" \
	"mlplat.full_resync_interval = '1s'" "mlplat.list_max_pages = 20" "mlplat.backoff_max = '2s'" \
	"mlplat.deployments_watch = off" "mlplat.http_timeout = '60s'"
tap_ok $? "cluster started (mlplat.list_max_pages = 20)"
q postgres "CREATE DATABASE mlplat" >/dev/null
SHA=$(standin_artifact s3://models/m/1 'lb')
$PSQL -d mlplat -c "CREATE EXTENSION mlplat" -c "SELECT mlplat.create_project('lb', 0)" \
	-c "SELECT mlplat.add_artifact_location('lb', 's3://models/')" \
	-c "SELECT mlplat.register_model_version('lb', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" \
	-c "SELECT mlplat.set_model_stage('lb', 'm', '1', 'CANDIDATE')" \
	-c "SELECT mlplat.deploy('lb', 'web', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.deployments WHERE name = 'web'" READY 30
tap_ok $? "a deployment converges"
STATUS="SELECT status FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'"
lists() {   # LIST requests for InferenceServices the stand-in has seen
	admin GET 'requests?verb=list&kind=InferenceService' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'
}
pid=$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")

# (1) a continue chain that never ends
admin PUT config '{"listEndlessContinue": 1}' >/dev/null
wait_for mlplat "SELECT ($STATUS) LIKE '%stopped after 20 pages (mlplat.list_max_pages)%'" t 30
tap_ok $? "endless continue chain: the pass stops after 20 pages and says so ($(q mlplat "$STATUS" | cut -c1-90))"
admin DELETE requests >/dev/null
sleep 3
# chains: a LIST without a continue token starts one; none may run past 20 requests
chains=$(admin GET 'requests?verb=list&kind=InferenceService' | python3 -c '
import json, sys
n = []
for e in json.load(sys.stdin)["items"]:
    if "continue=" not in e["path"] or not n:
        n.append(0)
    n[-1] += 1
print(len(n), max(n) if n else 0)')
tap_ok $([ "${chains#* }" -le 20 ] && [ "${chains% *}" -ge 1 ]; echo $?) "... no LIST runs past 20 pages (passes started, longest chain: $chains)"
admin PUT config '{"listEndlessContinue": 0}' >/dev/null
wait_for mlplat "SELECT ($STATUS) NOT LIKE 'pass failed%'" t 30
tap_ok $? "the chain ends again: passes succeed"

# (2) every continue token expires (410 Gone): a few restarts with a backoff, then the pass gives up
admin PUT config '{"listEndlessContinue": 1, "continueTtlMs": -1}' >/dev/null
wait_for mlplat "SELECT ($STATUS) LIKE '%continue token expired 6 times in a row (410 Gone)%'" t 30
tap_ok $? "every continue token expired: the pass gives up after 5 restarts ($(q mlplat "$STATUS" | cut -c1-100))"
admin PUT config '{"listEndlessContinue": 0, "continueTtlMs": 60000}' >/dev/null
wait_for mlplat "SELECT ($STATUS) NOT LIKE 'pass failed%'" t 30
tap_ok $? "tokens last again: passes succeed"

# (3) 30 MB pages against a 24 MB pass memory limit.  Every kind's LISTs carry the padding
# (Jobs too), so the stand-in serves several 30 MB pages a second: under a loaded machine one
# took more than the default 10 s http_timeout and the self-test saw a timeout, not the limit;
# the cluster's http_timeout is 60 s for that.
q mlplat "ALTER SYSTEM SET mlplat.pass_memory_limit = '24MB'" >/dev/null && q mlplat "SELECT pg_reload_conf()" >/dev/null
admin PUT config '{"listPadBytes": 31457280}' >/dev/null
wait_for mlplat "SELECT ($STATUS) LIKE '%would exceed mlplat.pass_memory_limit%'" t 60
tap_ok $? "a 30 MB page: the pass stops before parsing it ($(q mlplat "$STATUS" | cut -c1-120))"
rss=$(awk '/^VmRSS/ {print $2}' /proc/"$pid"/status 2>/dev/null)
tap_ok $([ -n "$rss" ] && [ "$rss" -lt 200000 ]; echo $?) "... the worker (pid $pid) is still there, RSS ${rss:-?} kB"
# (4) the limit bounds the pass, not the worker: a worker holding 64 MB of its own outside
# any pass (as a long-lived worker's caches grow) LISTs a 6 MB page under the 24 MB limit;
# the 30 MB page is still refused with no ballast at all.  Before, the worker's whole
# TopMemoryContext counted: the ballast alone stopped the LIST.
selftest() {   # ballast_mb -> the self-test worker's report
	$PSQL -d mlplat -X -c "LISTEN mlplat_pass_memory_selftest" -c "SELECT mlplat._pass_memory_selftest($1)" -c "SELECT 1" 2>&1 |
		sed -n 's/.*payload "\(.*\)" received.*/\1/p'
}
r=$(selftest 0)
tap_ok $(echo "$r" | grep -q '^stopped: LIST of inferenceservices: page 1 .* would exceed mlplat.pass_memory_limit' ; echo $?) \
	"a pass with no other memory is stopped before a 30 MB page ($r)"
admin PUT config '{"listPadBytes": 6291456}' >/dev/null
r=$(selftest 64)
tap_ok $(echo "$r" | grep -q '^listed [0-9]* items in 1 pages; ballast 64 MB' ; echo $?) \
	"a worker holding 64 MB outside its pass reads a 6 MB page under the 24 MB limit ($r)"
admin PUT config '{"listPadBytes": 31457280}' >/dev/null
r=$(selftest 64)
tap_ok $(echo "$r" | grep -q '^stopped: .*would exceed mlplat.pass_memory_limit' ; echo $?) \
	"... and its pass is still stopped before a 30 MB page ($r)"
q mlplat "ALTER SYSTEM RESET mlplat.pass_memory_limit" >/dev/null && q mlplat "SELECT pg_reload_conf()" >/dev/null
wait_for mlplat "SELECT ($STATUS) NOT LIKE 'pass failed%'" t 60
tap_ok $? "under the default limit (256 MB) a 30 MB page is read: passes succeed"
admin PUT config '{"listPadBytes": 0}' >/dev/null
tap_same "$pid" "$(q mlplat "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'deployments' AND role = 'leader'")" "the same worker led throughout"
q mlplat "SELECT mlplat.deploy('lb', 'web2', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for mlplat "SELECT string_agg(status, ',' ORDER BY name) FROM mlplat.deployments" READY,READY 30
tap_ok $? "and the deployments converge"
tap_done
