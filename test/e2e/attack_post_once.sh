#!/usr/bin/env bash
# Issue 18, finding 13: a POST sent twice.  When a reused keep-alive connection
# dies before any answer, libcurl sends the request again on a new connection;
# for a POST that arrived and took effect (the stand-in's drop fault: applied,
# then the connection is cut) that is a second create.  A POST now goes on a
# fresh connection, which libcurl never retries.  Before the fix the stand-in
# logged the POST twice.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$MLPLAT_TEST_WORK/standin-post-once
e2e_standin

# posts PATH — how many POSTs to PATH the stand-in saw (answered or dropped)
posts() {
	admin GET requests | python3 -c '
import json, sys
print(sum(1 for e in json.load(sys.stdin)["items"] if e["method"] == "POST" and e["path"].split("?")[0] == sys.argv[1]))' "$1"
}

# One session: a GET opens a keep-alive connection, then a POST that is cut
# after it took effect.  (OTLP's path needs no token, so _http_probe can reach it.)
admin DELETE requests >/dev/null
admin POST faults '{"method": "POST", "path": "^/v1/traces$", "drop": true, "times": 1}' >/dev/null
out=$(q mlplat "SELECT status FROM mlplat._http_probe(ARRAY['$STANDIN_URL/healthz']);
                SELECT status || ' ' || coalesce(error, '-') FROM mlplat._http_probe(ARRAY['$STANDIN_URL/v1/traces'], 'POST');
                SELECT status FROM mlplat._http_probe(ARRAY['$STANDIN_URL/healthz'])" 2>&1 | tr '\n' '|')
echo "# probes (GET, POST, GET): $out"
tap_is "$(posts /v1/traces)" 1 "the POST cut after it took effect reached the peer once"
case "$(echo "$out" | cut -d'|' -f2)" in 0\ *) r=0 ;; *) r=1 ;; esac
tap_ok $r "... and the caller was told it failed (no answer), not handed a second attempt's answer"

# The same with a GET: idempotent requests still share connections (and libcurl may resend them).
admin DELETE requests >/dev/null
q mlplat "SELECT status FROM mlplat._http_probe(ARRAY['$STANDIN_URL/healthz']);
          SELECT status FROM mlplat._http_probe(ARRAY['$STANDIN_URL/healthz'])" >/dev/null
tap_is "$(admin GET requests | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" 2 "(two GETs, logged twice: the log counts every request)"
tap_done
