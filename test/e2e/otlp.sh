#!/usr/bin/env bash
# OTLP as the specification says (issue 17 item 7, issue 18 finding 7), against a
# strict receiver (test/lib/otlp_receiver.py) that checks every request:
#   400 drops the batch and counts it, never sending it again; a partial success's
#   rejected spans are counted, not resent; 429/502/503/504 are retried with the
#   same spans, after the server's Retry-After; collector credentials come from
#   mlplat.otlp_headers_file (superuser-only, re-read when it changes, nothing sent
#   while it is unreadable) instead of the URL; a success leaves span status UNSET.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
DB=mlplat
R=$WORK/otlp-receiver
mkdir -p "$R"
chown "$RUNAS" "$R" 2>/dev/null
timeout 900 python3 "$SRC/test/lib/otlp_receiver.py" "$R/port" >"$R/log" 2>&1 &
echo $! >"$R/pid"
for _ in $(seq 1 100); do [ -s "$R/port" ] && break; sleep 0.1; done
RURL=http://127.0.0.1:$(cat "$R/port")
cleanup() {
	$PSQL -d $DB -c "ALTER SYSTEM RESET mlplat.otlp_endpoint" -c "ALTER SYSTEM RESET mlplat.otlp_headers_file" \
		-c "ALTER SYSTEM RESET mlplat.otlp_export_interval" -c "ALTER SYSTEM RESET mlplat.otlp_batch_size" \
		-c "SELECT pg_reload_conf()" >/dev/null
	kill "$(cat "$R/pid")" 2>/dev/null
}
on_exit cleanup
curl -sf "$RURL/admin/requests" >/dev/null
tap_ok $? "strict OTLP receiver listening on loopback"

radmin() { curl -sf -X POST --data "$2" "$RURL/admin/$1" >/dev/null; }
# rq PYTHON-EXPR — evaluate over the receiver's request list `r`
rq() { curl -sf "$RURL/admin/requests" | python3 -c "import json,sys; r=json.load(sys.stdin)['items']; print($1)"; }
sql() { q $DB "$1"; }
status_col() { sql "SELECT coalesce($1, 0) FROM mlplat.span_export_status"; }
headers_file() {	# write the file as a rotation does: a new file moved into place
	printf '# collector credentials\nAuthorization: Bearer %s\nX-Scope-OrgID: tenant-a\n' "$1" >"$R/headers.new"
	chown "$RUNAS" "$R/headers.new" 2>/dev/null
	chmod 600 "$R/headers.new"
	mv "$R/headers.new" "$R/headers"
}
# N API spans committed together (so they can share a batch)
spans() { sql "SELECT count(mlplat.create_project('$1-' || i, 1, NULL, NULL)) FROM generate_series(1, $2) i" >/dev/null; }
drain() { wait_for $DB "SELECT spans_waiting FROM mlplat.span_export_status" 0 "${1:-40}"; }

# --- the setting is a credential's place: superuser-only, like the endpoint
sql "DROP ROLE IF EXISTS otlp_tenant; CREATE ROLE otlp_tenant LOGIN" >/dev/null
out=$($PSQL -d $DB -U otlp_tenant -c "SHOW mlplat.otlp_headers_file" 2>&1)
echo "$out" | grep -q "permission denied\|must be superuser\|privileges of"
tap_ok $? "mlplat.otlp_headers_file is hidden from ordinary roles"

radmin require '{"authorization": ["Bearer tok-1"], "x-scope-orgid": ["tenant-a"]}'
headers_file tok-1
radmin script '[{"status": 400, "body": {"code": 3, "message": "planted bad payload"}}]'
drop0=$(status_col batches_dropped); sdrop0=$(status_col spans_dropped); fail0=$(status_col batches_failed)
spans otlp-a 6
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_endpoint = '$RURL'" -c "ALTER SYSTEM SET mlplat.otlp_headers_file = '$R/headers'" \
	-c "ALTER SYSTEM SET mlplat.otlp_export_interval = '200ms'" -c "ALTER SYSTEM SET mlplat.otlp_batch_size = 5" \
	-c "SELECT pg_reload_conf()" >/dev/null
drain
tap_ok $? "every waiting span leaves the queue"

# --- 400: dropped, counted, never sent again
tap_is "$(rq 'r[0]["status"]')" 400 "the first batch is answered 400"
tap_is "$(rq 'sum(1 for x in r[1:] for s in x["spans"] if s in set(r[0]["spans"]))')" 0 \
	"none of its spans is ever sent again"
n400=$(rq 'len(r[0]["spans"])')
tap_is "$(($(status_col batches_dropped) - drop0)) $(($(status_col spans_dropped) - sdrop0))" "1 $n400" \
	"span_export_status counts 1 dropped batch and its $n400 spans"
tap_is "$(($(status_col batches_failed) - fail0))" 0 "a 400 is not counted as a failure to retry"
ids=$(rq '",".join(r[0]["spans"])')
tap_is "$(sql "SELECT count(*) FROM mlplat.spans WHERE span_id = ANY (string_to_array('$ids', ',')) AND exported_at IS NULL")" 0 \
	"the dropped spans do not wait in the table"
sql "SELECT last_error FROM mlplat.span_export_status" | grep -q "HTTP 400: planted bad payload"
tap_ok $? "last_error has the status and the collector's message"

# --- credentials from the headers file, none in the URL; every request passed the receiver's checks
tap_is "$(rq 'sum(1 for x in r if x["headers"].get("authorization") != "Bearer tok-1" or x["headers"].get("x-scope-orgid") != "tenant-a")')" 0 \
	"every request carries the headers of mlplat.otlp_headers_file"
tap_is "$(rq 'sum(1 for x in r if x["fault"])')" 0 "the strict receiver found no fault in any request"

# --- status UNSET on success
tap_is "$(rq 'sum(1 for x in r for c in x["codes"] if c == 1)')" 0 "no exported span carries status OK"
tap_is "$(sql "SELECT count(*) FILTER (WHERE status = 'UNSET') || '/' || count(*) FROM mlplat.spans WHERE name = 'mlplat.create_project' AND attributes->>'mlplat.request_id' IS NOT NULL
	AND entity_id IN (SELECT id FROM mlplat.projects WHERE name LIKE 'otlp-a-%')")" "6/6" \
	"the API spans of successful calls are UNSET in the table"

# --- 429 (Retry-After: 3), 503, 502, 504: retried with the same spans, after Retry-After
k=$(rq 'len(r)')
radmin script '[{"status": 429, "retry_after": "3"}, {"status": 503}, {"status": 502}, {"status": 504}]'
spans otlp-b 2
drain
tap_ok $? "the spans are exported (none waiting)"
tap_is "$(rq "[x['status'] for x in r[$k:]]")" "[429, 503, 502, 504, 200]" \
	"429, 503, 502 and 504 are retried until the collector takes the batch"
tap_is "$(rq "len(set(tuple(x['spans']) for x in r[$k:]))")" 1 "every retry sends the same spans"
gap=$(rq "round(r[$k+1]['t'] - r[$k]['t'], 2)")
python3 -c "import sys; sys.exit(0 if $gap >= 2.9 else 1)"
tap_ok $? "the retry after the 429 waits for its Retry-After of 3 s (waited $gap s; backoff alone is 0.5 s)"
tap_is "$(($(status_col batches_failed) - fail0))" 4 "the four retryable answers count as failed attempts"
tap_is "$(($(status_col batches_dropped) - drop0))" 1 "and drop nothing"

# --- a partial success: the rejected spans are counted, nothing is resent
k=$(rq 'len(r)')
sdrop1=$(status_col spans_dropped)
radmin script '[{"status": 200, "body": {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "2 spans too old"}}}]'
spans otlp-c 3
drain
tap_ok $? "the spans are exported (none waiting)"
tap_is "$(($(status_col spans_dropped) - sdrop1))" 2 "a partial success counts its rejectedSpans as dropped"
tap_is "$(rq "len(r) - $k")" 1 "and is not retried"

# --- rotation: the file is re-read when it changes, without a reload
radmin require '{"authorization": ["Bearer tok-1", "Bearer tok-2"], "x-scope-orgid": ["tenant-a"]}'
headers_file tok-2
k=$(rq 'len(r)')
spans otlp-d 1
drain
tap_ok $? "the spans are exported (none waiting)"
tap_is "$(rq "[x['headers'].get('authorization') for x in r[$k:]]")" "['Bearer tok-2']" \
	"after the file is replaced the next export carries the new token"
radmin require '{"authorization": ["Bearer tok-2"], "x-scope-orgid": ["tenant-a"]}'

# --- an unreadable headers file: nothing is sent without the credentials
k=$(rq 'len(r)')
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_headers_file = '$R/absent'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
spans otlp-e 1
wait_for $DB "SELECT last_error LIKE '%OTLP headers file%' FROM mlplat.span_export_status" t 20
tap_ok $? "a missing headers file shows in span_export_status.last_error"
tap_is "$(rq "len(r) - $k")" 0 "and no request goes out without its credentials"
$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.otlp_headers_file = '$R/headers'" -c "SELECT pg_reload_conf()" >/dev/null
drain
tap_ok $? "the waiting spans go once the file is back"
tap_is "$(rq 'sum(1 for x in r if x["status"] == 401)')" 0 "the collector never had to refuse a request for missing credentials"
sql "DROP ROLE otlp_tenant" >/dev/null
tap_done
