#!/usr/bin/env bash
# The trace on a strict OTLP receiver: mlplat's span export is parsed by the
# OpenTelemetry Collector's own pdata unmarshaler (test/real/otlp/), which
# refuses what a collector refuses (a traceId that is not 32 hex digits, an
# id of the wrong length). Every batch mlplat sends for a project's trace on
# the real API server must be accepted, and arrive with the same ids,
# parents and names as mlplat.spans holds.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble trace mlplat
real_reset_at_exit mlplat.otlp_endpoint mlplat.otlp_export_interval
real_stack_up
_real_bg "$RD" otlp "$OTLP_RECEIVER" -listen 127.0.0.1:0 -port-file "$RD/otlp.port"
_real_wait 30 test -s "$RD/otlp.port"
tap_ok $? "strict OTLP receiver listening"
OTLP=http://127.0.0.1:$(cat "$RD/otlp.port")

# the receiver itself: what a collector refuses, it refuses
span='{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"TID","spanId":"0123456789abcdef","name":"x","kind":1,"startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}'
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "${span/TID/$1}" "$OTLP/v1/traces"; }
tap_is "$(post zz)" 400 'the receiver refuses traceId "zz" with 400'
tap_is "$(post 0123456789abcdef0123456789abcdef0123456789abcdef)" 400 "... and a 24-byte trace id"
tap_is "$(post 0123456789abcdef0123456789abcdeg)" 400 "... and 32 characters that are not hex"
tap_is "$(post 0123456789abcdef0123456789abcdef)" 200 "... and accepts a well-formed span"
base=$(curl -s "$OTLP/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accepted"])')

$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_endpoint = '$OTLP'" -c "ALTER SYSTEM SET mlplat.otlp_export_interval = '200ms'" \
	-c "SELECT pg_reload_conf()" >/dev/null
TRACE=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
$PSQL -d $DB -c "SET mlplat.traceparent = '00-$TRACE-$(python3 -c 'import secrets; print(secrets.token_hex(8))')-01'" \
	-c "SELECT mlplat.create_project('traced', 1, owner => 'erin')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'traced'" READY 60
tap_ok $? "project traced converges to READY on the real API server, in the caller's trace"
want=$(q $DB "SELECT count(*) FROM mlplat.spans WHERE trace_id = '$TRACE'")
deadline=$((SECONDS + 30))
got=0
while ((SECONDS < deadline)); do
	got=$(curl -s "$OTLP/received" | python3 -c "import json,sys; print(sum(1 for l in sys.stdin if json.loads(l)['traceId'] == '$TRACE'))")
	[ "$got" -ge "$want" ] && [ "$want" -gt 0 ] && break
	sleep 0.3
done
tap_ok $([ "$want" -gt 2 ] && [ "$got" = "$want" ]; echo $?) "all $want spans of the trace reached the strict receiver ($got)"
stats=$(curl -s "$OTLP/stats")
tap_is "$(echo "$stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rejected"])')" 3 \
	"no batch of mlplat's was refused (the 3 refusals are the test's own)"
echo "$stats" | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['accepted'] > $base else 1)"
tap_ok $? "mlplat's batches were accepted"
q $DB "SELECT span_id || ' ' || coalesce(parent_span_id, '') || ' ' || name FROM mlplat.spans WHERE trace_id = '$TRACE' ORDER BY 1" >"$RD/db.txt"
curl -s "$OTLP/received" | python3 -c "
import json, sys
rows = sorted(f\"{s['spanId']} {s['parentSpanId']} {s['name']}\" for s in map(json.loads, sys.stdin) if s['traceId'] == '$TRACE')
print('\n'.join(rows))" >"$RD/otlp.txt"
diff "$RD/db.txt" "$RD/otlp.txt" >"$RD/trace.diff"
tap_ok $? "the receiver holds exactly mlplat.spans' ids, parents and names for the trace"
[ -s "$RD/trace.diff" ] && sed 's/^/# /' "$RD/trace.diff" | head -20
q $DB "SELECT mlplat.delete_project('traced')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'traced'" DELETED 120
tap_ok $? "project traced deleted"
tap_done
