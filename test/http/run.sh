#!/bin/bash
# test/http/run.sh — the HTTP client's suite (TAP on stdout, for prove).
#
# Standalone (default): builds, stages an install, starts a throwaway cluster as
# the postgres user, runs, stops it.  With MLPLAT_TEST_CLUSTER=1 it uses the
# running cluster named by PGHOST/PGPORT/PGUSER/PGDATABASE (mlplat installed).
# Always: a loopback HTTP server (server.py) and the backoff C unit test.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
W=$(mktemp -d /tmp/mlplat-http.XXXXXX)
chmod 755 "$W"
SRV_PID=
PG_STARTED=
B=

cleanup() {
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null
	if [ -n "$PG_STARTED" ]; then
		runuser -u postgres -- "$B/pg_ctl" -D "$W/data" -m fast -w stop >/dev/null 2>&1
	fi
	rm -rf "$W"
}
trap cleanup EXIT

N=0
FAILED=0
ok() {	# ok COND DESCRIPTION [DIAG]
	N=$((N + 1))
	[ -n "${MLPLAT_HTTP_TIMING:-}" ] && echo "# $(date +%T.%N | cut -c1-12)" >&2
	if [ "$1" = 1 ]; then
		echo "ok $N - $2"
	else
		FAILED=$((FAILED + 1))
		echo "not ok $N - $2"
		[ -n "${3:-}" ] && echo "$3" | sed 's/^/# /'
	fi
}
bail() { echo "Bail out! $*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---- backoff unit test (plain C, no PostgreSQL), renumbered into our plan
CC=${CC:-cc}
if $CC -Wall -Wextra -Werror -I"$ROOT/include" -o "$W/backoff_test" \
	"$ROOT/test/unit/backoff_test.c" "$ROOT/src/http/backoff.c" 2>"$W/cc.err"; then
	"$W/backoff_test" >"$W/backoff.tap" 2>&1
	rc=$?
	while IFS= read -r line; do
		case "$line" in
			"ok "*) ok 1 "backoff: ${line#* - }" ;;
			"not ok "*) ok 0 "backoff: ${line#* - }" ;;
		esac
	done <"$W/backoff.tap"
	# Its plan and exit status too: a test binary that dies half way prints fewer lines.
	n=$(grep -cE '^(not )?ok ' "$W/backoff.tap")
	plan=$(sed -n 's/^1\.\.\([0-9]*\).*/\1/p' "$W/backoff.tap")
	ok "$([ "$rc" = 0 ] && [ "$plan" = "$n" ] && echo 1)" "backoff: the unit test ran to its end (exit status $rc, plan 1..$plan, $n results)" "$(grep -vE '^(not )?ok ' "$W/backoff.tap")"
else
	ok 0 "backoff unit test builds" "$(cat "$W/cc.err")"
fi

# ---- loopback HTTP server
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
# TLS: one certificate valid for 127.0.0.1, one for another name only
for c in good:IP:127.0.0.1 wrongname:DNS:other.invalid; do
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=mlplat-test" \
		-addext "subjectAltName=${c#*:}" -keyout "$W/${c%%:*}.key" -out "$W/${c%%:*}.crt" 2>/dev/null ||
		bail "openssl could not make a test certificate"
done
chmod 644 "$W"/*.crt
python3 "$HERE/server.py" "$W/ports" "$W/good.crt" "$W/good.key" "$W/wrongname.crt" "$W/wrongname.key" &
SRV_PID=$!
for _ in $(seq 100); do [ -f "$W/ports" ] && break; sleep 0.05; done
[ -f "$W/ports" ] || bail "test HTTP server did not start"
read -r HPORT HOLE TLSPORT TLSPORT2 < "$W/ports"
U="http://127.0.0.1:$HPORT"
# a port nobody listens on: bind, read the number, close
CLOSED=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')

# ---- PostgreSQL
if [ "${MLPLAT_TEST_CLUSTER:-}" != 1 ]; then
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
	mkdir -p "$W/usr/lib/postgresql" "$W/usr/share/postgresql"
	cp -a /usr/lib/postgresql/15 "$W/usr/lib/postgresql/"
	cp -a /usr/share/postgresql/15 "$W/usr/share/postgresql/"
	(cd "$ROOT" && make -s >/dev/null && make -s install DESTDIR="$W" >/dev/null) || bail "build failed"
	chown -R postgres "$W"
	B=$W/usr/lib/postgresql/15/bin
	runuser -u postgres -- "$B/initdb" -D "$W/data" -A trust -U postgres >/dev/null || bail "initdb failed"
	runuser -u postgres -- env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY \
		"$B/pg_ctl" -D "$W/data" -l "$W/log" -w start \
		-o "-k $W -p $PORT -c listen_addresses='' -c shared_preload_libraries=mlplat -c max_worker_processes=40" >/dev/null || bail "server did not start: $(tail -5 "$W/log")"
	PG_STARTED=1
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
	out=$(psql -qX -c "create extension mlplat" 2>&1) || bail "create extension failed: $out"
fi

q() { psql -XAtq -v ON_ERROR_STOP=1 "$@" 2>&1; }

# ---- basic responses
r=$(q -c "select status, coalesce(error,'-'), body, content_type from mlplat._http_probe(array['$U/ok'])")
ok "$([ "$r" = "200|-|ok|text/plain" ] && echo 1)" "GET /ok returns 200 with body and content type" "$r"

r=$(q -c "select status, retry_after_s, coalesce(error,'-') from mlplat._http_probe(array['$U/status?code=503&retry_after=7', '$U/status?code=429&retry_after=2', '$U/status?code=404']) order by 1")
ok "$([ "$r" = "$(printf '404|0|-\n429|2|-\n503|7|-')" ] && echo 1)" "status codes and Retry-After pass through" "$r"

HTTPDATE=$(python3 -c 'import email.utils,time,urllib.parse; print(urllib.parse.quote(email.utils.formatdate(time.time()+30, usegmt=True)))')
r=$(q -c "select status, retry_after_s between 25 and 31 from mlplat._http_probe(array['$U/status?code=503&retry_after=$HTTPDATE'])")
ok "$([ "$r" = "503|t" ] && echo 1)" "Retry-After as an HTTP date becomes seconds" "$r"

r=$(q -c "select body from mlplat._http_probe(array['$U/echo'], 'POST') union all select body from mlplat._http_probe(array['$U/echo'], 'DELETE')")
ok "$([ "$r" = "$(printf 'POST len=0\nDELETE len=0')" ] && echo 1)" "methods are sent as asked" "$r"

r=$(q -c "select status, coalesce(error,'-'), body from mlplat._http_probe(array['$U/redirect'])")
ok "$([ "$r" = "302|-|moved" ] && echo 1)" "redirects are not followed" "$r"

# ---- concurrency: 50 x 200 ms must overlap (serial would take 10 s)
t0=$(now_ms)
r=$(q -c "select count(*) filter (where status = 200) from mlplat._http_probe(array(select '$U/slow?ms=200' from generate_series(1,50)))")
t=$(( $(now_ms) - t0 ))
ok "$([ "$r" = 50 ] && echo 1)" "50 concurrent /slow requests all succeed" "$r"
ok "$([ "$t" -lt 5000 ] && echo 1)" "50 x 200 ms finish concurrently (took $t ms, serial would be 10000)"
CAP=$(q -c "select current_setting('mlplat.http_max_concurrency')")
WAVES=$(( (50 + CAP - 1) / CAP ))
ok "$([ "$t" -ge $(( WAVES * 200 )) ] && echo 1)" "mlplat.http_max_concurrency = $CAP is respected: $WAVES wave(s) of 200 ms, took $t ms"

# ---- bounded bodies
r=$(q -c "select status, error from mlplat._http_probe(array['$U/big?bytes=2000000'], max_body => 1000000)")
ok "$(echo "$r" | grep -q 'exceeds the limit of 1000000 bytes' && echo 1)" "oversized body (Content-Length) fails cleanly" "$r"
r=$(q -c "select error from mlplat._http_probe(array['$U/big?bytes=3000000&stream=1'], max_body => 1000000)")
ok "$(echo "$r" | grep -q 'exceeds the limit of 1000000 bytes' && echo 1)" "oversized streamed body fails cleanly" "$r"
r=$(q -c "select status, coalesce(error,'-'), length(body) from mlplat._http_probe(array['$U/big?bytes=4000&stream=1'], max_body => 4000)")
ok "$([ "$r" = "200|-|4000" ] && echo 1)" "body exactly at the limit is accepted" "$r"

# ---- schemes
r=$(q -c "select status, error from mlplat._http_probe(array['file:///etc/passwd', 'ftp://127.0.0.1/x', 'gopher://x', '']) ")
ok "$([ "$(echo "$r" | grep -c '^0|only http:// and https:// URLs are allowed$')" = 4 ] && echo 1)" "file://, ftp:// and other schemes are refused" "$r"

# ---- transport failures
r=$(q -c "select status, error from mlplat._http_probe(array['http://127.0.0.1:$CLOSED/ok'])")
ok "$(echo "$r" | grep -q '^0|.*onnect' && echo 1)" "closed port reported as a connect failure" "$r"
r=$(q -c "select status, error, elapsed_ms < 3000 from mlplat._http_probe(array['http://127.0.0.1:$HOLE/ok'], connect_timeout_ms => 300)")
ok "$(echo "$r" | grep -qiE "^0\|.*(timed out|timeout).*\|t$" && echo 1)" "connect timeout reported promptly" "$r"
r=$(q -c "select status, error, elapsed_ms < 2000 from mlplat._http_probe(array['$U/slow?ms=3000'], timeout_ms => 300)")
ok "$(echo "$r" | grep -qi '^0|.*timed out.*|t$' && echo 1)" "total timeout reported promptly" "$r"
r=$(q -c "select status, error from mlplat._http_probe(array['$U/close'])")
ok "$(echo "$r" | grep -q '^0|.\+' && echo 1)" "dropped connection reported as a transport error" "$r"
r=$(q -c "select count(*) from mlplat._http_probe(array['$U/ok', 'http://127.0.0.1:$CLOSED/', '$U/status?code=500', 'ftp://x/']) where status = 200 and error is null")
ok "$([ "$r" = 1 ] && echo 1)" "one failure does not spoil the others in a batch" "$r"

# ---- query cancel interrupts a slow batch, and the session stays usable
t0=$(now_ms)
r=$(q -c "set statement_timeout = 500" -c "select count(*) from mlplat._http_probe(array(select '$U/slow?ms=5000' from generate_series(1,5)))")
t=$(( $(now_ms) - t0 ))
ok "$(echo "$r" | grep -q 'statement timeout' && echo 1)" "statement_timeout cancels a batch in flight" "$r"
ok "$([ "$t" -lt 2500 ] && echo 1)" "the cancel is prompt (took $t ms for 5 x 5 s requests)"
r=$(q -c "set statement_timeout = 300" -c "select 1 from mlplat._http_probe(array['$U/slow?ms=2000'])" \
	-c "reset statement_timeout" 2>&1; q -c "select status from mlplat._http_probe(array['$U/ok'])")
ok "$(echo "$r" | tail -1 | grep -qx 200 && echo 1)" "a new batch works after a cancelled one" "$r"
r=$(psql -XAtq -c "set statement_timeout = 300" -c "select 1 from mlplat._http_probe(array['$U/slow?ms=2000'])" \
	-c "reset statement_timeout" -c "select status || ':' || body from mlplat._http_probe(array['$U/ok', '$U/slow?ms=50'])" 2>&1)
ok "$(echo "$r" | tail -2 | tr '\n' ' ' | grep -q '^200:ok 200:slow $' && echo 1)" "same session: the client recovers after a cancel" "$r"

# ---- pg_terminate_backend ends a backend that waits on a batch (SIGTERM -> die)
psql -XAtq -c "select count(*) from mlplat._http_probe(array['$U/slow?ms=8000', '$U/slow?ms=8000'])" >"$W/term.out" 2>&1 &
TP=$!
for _ in $(seq 50); do
	n=$(q -c "select count(*) from pg_stat_activity where query like '%slow?ms=8000%' and pid <> pg_backend_pid()")
	[ "$n" = 1 ] && break; sleep 0.1
done
t0=$(now_ms)
q -c "select pg_terminate_backend(pid) from pg_stat_activity where query like '%slow?ms=8000%' and pid <> pg_backend_pid()" >/dev/null
wait $TP
t=$(( $(now_ms) - t0 ))
ok "$([ "$t" -lt 2000 ] && grep -q 'terminating connection' "$W/term.out" && echo 1)" "pg_terminate_backend ends a backend in a batch promptly ($t ms)" "$(cat "$W/term.out")"

# ---- no leaks: memory and file descriptors stay flat over many passes
cat > "$W/leak.sql" <<SQL
select pg_backend_pid() as pid \gset
\setenv PID :pid
do \$\$ begin for i in 1..200 loop perform mlplat._http_probe(array['$U/ok', '$U/status?code=503&retry_after=1']); end loop; end \$\$;
\! grep VmRSS /proc/\$PID/status | tr -dc 0-9; echo; ls /proc/\$PID/fd | wc -l
do \$\$ begin for i in 1..10000 loop perform mlplat._http_probe(array['$U/ok', '$U/status?code=503&retry_after=1']); end loop; end \$\$;
\! grep VmRSS /proc/\$PID/status | tr -dc 0-9; echo; ls /proc/\$PID/fd | wc -l
SQL
if [ "${MLPLAT_TEST_CLUSTER:-}" != 1 ] || [ -z "${PGHOST:-}" ] || [ "${PGHOST#/}" != "$PGHOST" ]; then
	r=$(q -f "$W/leak.sql")
	set -- $r
	if [ $# -eq 4 ]; then
		if [ "${SANITIZE:-0}" = 1 ]; then
			echo "ok $((N += 1)) # SKIP RSS under ASan (its quarantine holds freed memory)"
		else
			ok "$([ $(( $3 - $1 )) -lt 2048 ] && echo 1)" "RSS flat over 10000 passes (${1} kB -> ${3} kB)"
		fi
		ok "$([ $(( $4 - $2 )) -le 2 ] && echo 1)" "no file descriptor leak over 10000 passes ($2 -> $4)"
	else
		ok 0 "leak check ran" "$r"
		ok 0 "leak check ran (fds)"
	fi
fi

# ---- Kubernetes client against the in-memory API of server.py
TOK=$W/token
printf 'tok-A-0123456789\n' > "$TOK"; chmod 644 "$TOK"
kq() { printf '%s\n' "select mlplat._kube_configure('$U', '$TOK') as cfg \\gset" "$1" | q; }
kcall() { kq "select outcome, status, coalesce(reason,'-'), coalesce(message,'-') from mlplat._kube_call($1)"; }
last() { q -c "select body from mlplat._http_probe(array['$U/_debug/last'])"; }

r=$(q -c "select mlplat._kube_configure(null), current_setting('mlplat.kube_url')")
ok "$(echo "$r" | grep -qE '^(not_configured: no Kubernetes cluster configured.*\||ready\|.+)$' && echo 1)" "no cluster configured is a distinct state" "$r"
r=$(q -c "select mlplat._kube_configure('ftp://x/')")
ok "$([ "$r" = "error: mlplat.kube_url must be an http:// or https:// URL" ] && echo 1)" "a non-http kube URL is a configuration error" "$r"
r=$(q -c "select mlplat._kube_configure('$U', '$W/missing')")
ok "$(echo "$r" | grep -q '^error: cannot read Kubernetes token file .*No such file' && echo 1)" "an unreadable token file is a configuration error" "$r"
r=$(q -c "select mlplat._kube_configure('$U', '$TOK')")
ok "$([ "$r" = ready ] && echo 1)" "URL + token file configuration is ready" "$r"

CM='{"metadata":{"name":"cm1","labels":{"app.kubernetes.io/managed-by":"mlplat"}},"data":{"a":"1"}}'
r=$(kq "select outcome, status, url from mlplat._kube_call('create', '', 'v1', 'configmaps', 'team-a', body => '$CM')")
ok "$([ "$r" = "ok|201|$U/api/v1/namespaces/team-a/configmaps?fieldManager=mlplat" ] && echo 1)" "create (POST) a core object" "$r"
r=$(kcall "'create', '', 'v1', 'configmaps', 'team-a', body => '$CM'")
ok "$([ "$r" = 'exists|409|AlreadyExists|Kubernetes API 409 AlreadyExists: configmaps "cm1" already exists' ] && echo 1)" "409 AlreadyExists on create is the 'exists' outcome with a clear message" "$r"
r=$(kq "select outcome, resp_body->'data'->>'a', url from mlplat._kube_call('get', '', 'v1', 'configmaps', 'team-a', 'cm1')")
ok "$([ "$r" = "ok|1|$U/api/v1/namespaces/team-a/configmaps/cm1" ] && echo 1)" "get returns the object as jsonb" "$r"
# one pass builds the jsonb (src/http/kube.c): what comes back equals jsonb_in's reading of
# the same document, for escapes, non-ASCII, numbers of every shape, nesting and duplicates
ODD='{"metadata":{"name":"cm-odd"},"x":{"s":"tab\t \u00e9 \ud83d\ude00 \"q\" \\","n":[0,-0,1.50,-2e3,1E-7,12345678901234567890123,0.1],"b":[true,false,null],"e":[[],{}],"d":{"k":1,"k":2},"deep":[[[[{"a":[1,[2,[3]]]}]]]]}}'
kq "select outcome from mlplat._kube_call('create', '', 'v1', 'configmaps', 'team-a', body => '$ODD')" >/dev/null
r=$(kq "select resp_body->'x' = ('$ODD'::jsonb)->'x' from mlplat._kube_call('get', '', 'v1', 'configmaps', 'team-a', 'cm-odd')")
ok "$([ "$r" = t ] && echo 1)" "a body read in one pass equals jsonb_in's reading of it" "$r"
r=$(kcall "'get', '', 'v1', 'configmaps', 'team-a', 'nope'")
ok "$([ "$r" = 'not_found|404|NotFound|Kubernetes API 404 NotFound: configmaps "nope" not found' ] && echo 1)" "404 Status body becomes not_found with reason and message" "$r"
r=$(last)
ok "$(echo "$r" | grep -q '"authorization": "Bearer tok-A-0123456789"' && echo 1)" "the bearer token is sent" "$r"

r=$(kq "select outcome, status, url from mlplat._kube_call('apply', 'serving.kserve.io', 'v1beta1', 'inferenceservices', 'team-a', 'a b/c', '{\"apiVersion\":\"serving.kserve.io/v1beta1\",\"kind\":\"InferenceService\",\"metadata\":{\"name\":\"m1\"}}')")
ok "$([ "$r" = "ok|201|$U/apis/serving.kserve.io/v1beta1/namespaces/team-a/inferenceservices/a%20b%2Fc?fieldManager=mlplat&force=true" ] && echo 1)" "server-side apply on a group resource, name URL-encoded" "$r"
r=$(last)
ok "$(echo "$r" | grep -q '"method": "PATCH".*"content_type": "application/apply-patch+yaml"' && echo 1)" "apply is a PATCH with application/apply-patch+yaml" "$r"

# token rotation: same size, new content and mtime
sleep 0.05; printf 'tok-B-0123456789\n' > "$TOK"; touch -d '+1 sec' "$TOK"
r=$(kq "select outcome from mlplat._kube_call('get', '', 'v1', 'configmaps', 'team-a', 'cm1')"; last)
ok "$(echo "$r" | grep -q '"authorization": "Bearer tok-B-0123456789"' && echo 1)" "a rotated token file is re-read" "$r"

for i in 2 3 4 5; do
	kq "select outcome from mlplat._kube_call('create', '', 'v1', 'configmaps', 'team-b', body => '{\"metadata\":{\"name\":\"cm$i\",\"labels\":{\"app.kubernetes.io/managed-by\":\"mlplat\"}}}')" >/dev/null
done
kq "select outcome from mlplat._kube_call('create', '', 'v1', 'configmaps', 'team-b', body => '{\"metadata\":{\"name\":\"other\",\"labels\":{\"app.kubernetes.io/managed-by\":\"helm\"}}}')" >/dev/null
r=$(kq "select url, jsonb_array_length(resp_body->'items'), next_continue from mlplat._kube_call('list', '', 'v1', 'configmaps', null, label_selector => 'app.kubernetes.io/managed-by=mlplat', lim => 2)")
ok "$([ "$r" = "$U/api/v1/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmlplat&limit=2|2|c-2" ] && echo 1)" "all-namespaces LIST with an encoded label selector and limit" "$r"
r=$(kq "select string_agg(coalesce(next_continue, 'end') || ':' || jsonb_array_length(resp_body->'items'), ' ') from (select * from mlplat._kube_call('list', '', 'v1', 'configmaps', null, label_selector => 'app.kubernetes.io/managed-by=mlplat', lim => 2, continue_token => 'c-2') union all select * from mlplat._kube_call('list', '', 'v1', 'configmaps', null, label_selector => 'app.kubernetes.io/managed-by=mlplat', lim => 2, continue_token => 'c-4')) p")
ok "$([ "$r" = "c-4:2 end:1" ] && echo 1)" "pagination follows continue tokens to the last page (5 of 6 match)" "$r"
r=$(kcall "'list', '', 'v1', 'configmaps', 'team-b', lim => 2, continue_token => 'expired'")
ok "$(echo "$r" | grep -q '^expired|410|Expired|' && echo 1)" "410 on an expired continue token is the 'expired' outcome" "$r"

r=$(kcall "'replace', '', 'v1', 'configmaps', 'team-a', 'cm1', '{\"metadata\":{\"name\":\"cm1\",\"resourceVersion\":\"1\"}}'")
ok "$(echo "$r" | grep -q '^conflict|409|Conflict|Kubernetes API 409 Conflict: Operation cannot be fulfilled' && echo 1)" "PUT with a stale resourceVersion is a conflict" "$r"
r=$(kq "select outcome, resp_body->'data'->>'a', resp_body->'data'->>'b' from mlplat._kube_call('merge_patch', '', 'v1', 'configmaps', 'team-a', 'cm1', '{\"data\":{\"b\":\"2\"}}')"; last)
ok "$(echo "$r" | head -1 | grep -qx 'ok|1|2' && echo "$r" | grep -q 'merge-patch+json' && echo 1)" "merge patch" "$r"
r=$(kq "select outcome, url from mlplat._kube_call('delete', '', 'v1', 'configmaps', 'team-a', 'cm1')"; kcall "'delete', '', 'v1', 'configmaps', 'team-a', 'cm1'")
ok "$([ "$(echo "$r" | head -1)" = "ok|$U/api/v1/namespaces/team-a/configmaps/cm1?propagationPolicy=Background" ] && echo "$r" | tail -1 | grep -q '^not_found|404' && echo 1)" "delete with propagationPolicy=Background; again is not_found" "$r"
r=$(kq "select outcome, url from mlplat._kube_call('get', '', 'v1', 'namespaces', null, 'team-a')")
ok "$([ "$r" = "not_found|$U/api/v1/namespaces/team-a" ] && echo 1)" "cluster-scoped path" "$r"

r=$(kcall "'get', '', 'v1', 'echoauth', 'team-a', 'x'")
ok "$(echo "$r" | grep -q '^retry|500|-|Kubernetes API returned HTTP 500: backend error; auth was: Bearer \*\{16\}$' && echo 1)" "non-JSON error body: status + excerpt, token masked, 5xx is retry" "$r"
r=$(printf '%s\n' "select mlplat._kube_configure('http://127.0.0.1:$CLOSED', '$TOK') as cfg \\gset" "select outcome, status, message from mlplat._kube_call('get', '', 'v1', 'configmaps', 'a', 'b')" | q)
ok "$(echo "$r" | grep -q '^retry|0|Kubernetes API GET request failed: .*onnect' && echo 1)" "transport failure is retry with status 0" "$r"

# the real setting: a background worker, no transaction open, jsonb parsed outside one
kq "select outcome from mlplat._kube_call('create', '', 'v1', 'configmaps', 'team-a', body => '{\"metadata\":{\"name\":\"cm-selftest\"},\"data\":{\"x\":\"hello\"}}')" >/dev/null
r=$(q -c "listen mlplat_http_selftest" -c "select mlplat._http_worker_selftest('$U')" -c "select 1" 2>&1)
ok "$(echo "$r" | grep -q 'payload "x=hello outcome=ok in_xact_during_http=false"' && echo 1)" "in a background worker with no transaction: batch runs, jsonb parses" "$r"

# TLS: verification is on; a CA file is honoured; the host name is checked
tlsget() { printf '%s\n' "select mlplat._kube_configure('https://127.0.0.1:$1', '$TOK', $2) as cfg \\gset" "select outcome, status, coalesce(message, '-') from mlplat._kube_call('get', '', 'v1', 'configmaps', 'team-a', 'cm1')" | q; }
r=$(tlsget "$TLSPORT" null)
ok "$(echo "$r" | grep -q '^retry|0|.*SSL certificate problem' && echo 1)" "TLS: an unknown CA is refused" "$r"
r=$(tlsget "$TLSPORT" "'$W/good.crt'")
ok "$(echo "$r" | grep -q '^not_found|404|' && echo 1)" "TLS: with the CA file the request goes through" "$r"
r=$(tlsget "$TLSPORT2" "'$W/wrongname.crt'")
ok "$(echo "$r" | grep -q '^retry|0|.*\(subject name\|does not match\|no alternative\)' && echo 1)" "TLS: a certificate for another host name is refused" "$r"

# Lease fence: create, renew, another holder waits for expiry on our clock, then takes it
r=$(kq "select result || ':' || coalesce(detail, '') from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-a', 1)
union all select result || ':' || coalesce(detail, '') from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-a', 1)
union all select result || ':' || coalesce(detail, '') from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-b', 1)")
ok "$(echo "$r" | tr '\n' ' ' | grep -q '^held: held: other:lease mlplat-system/deployments is held by "replica-a"' && echo 1)" "lease: created, renewed, refused to another holder while fresh" "$r"
r=$(printf '%s\n' "select mlplat._kube_configure('$U', '$TOK') as cfg \\gset" \
	"select result from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-b', 1);" \
	"select pg_sleep(1.3);" \
	"select result from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-b', 1);" \
	"select result from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-a', 1);" | q | grep -v '^$')
ok "$(echo "$r" | tr '\n' ' ' | grep -q '^other held other $' && echo 1)" "lease: taken over only after leaseDurationSeconds on our clock" "$r"
r=$(kq "select resp_body->'spec'->>'holderIdentity', resp_body->'spec'->>'leaseTransitions', resp_body->'spec'->>'leaseDurationSeconds', resp_body->'spec'->>'renewTime' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' from mlplat._kube_call('get', 'coordination.k8s.io', 'v1', 'leases', 'mlplat-system', 'deployments')")
ok "$([ "$r" = "replica-b|1|1|t" ] && echo 1)" "lease spec: holder, transitions + 1, duration, RFC 3339 micro renewTime" "$r"
r=$(q -c "select body from mlplat._http_probe(array['$U/_debug/conflict_next_put'])"; kq "select result, detail from mlplat._kube_lease('mlplat-system', 'deployments', 'replica-b', 1)")
ok "$(echo "$r" | tail -1 | grep -q '^lost|Kubernetes API 409 Conflict' && echo 1)" "lease: a 409 on the PUT means the lease was lost" "$r"
r=$(printf '%s\n' "select mlplat._kube_configure('http://127.0.0.1:$CLOSED', '$TOK') as cfg \\gset" "select result from mlplat._kube_lease('mlplat-system', 'x', 'replica-a', 1)" | q)
ok "$([ "$r" = error ] && echo 1)" "lease: an unreachable API is an error, not a takeover" "$r"

# ---- backoff through SQL, and the hooks are superuser-only
r=$(q -c "select mlplat._backoff_delay_ms(0,100,10000,0,1), mlplat._backoff_delay_ms(1,100,10000,0,1), mlplat._backoff_delay_ms(3,100,10000,0,1) between 100 and 400, mlplat._backoff_delay_ms(30,100,10000,0,1) <= 10000, mlplat._backoff_delay_ms(1,100,10000,30,1) between 30000 and 45000")
ok "$([ "$r" = "0|100|t|t|t" ] && echo 1)" "_backoff_delay_ms via SQL" "$r"
# Finding 15: 10,000 entities told "Retry-After: 30" together come back over 15 s, not in one second
r=$(q -c "select min(d) >= 30000, max(d) <= 45000, count(distinct d / 1000), max(n) <= 2 * 10000 / 15
          from (select d, count(*) over (partition by d / 1000) n
                  from (select mlplat._backoff_delay_ms(3, 500, 300000, 30, id) d from generate_series(1, 10000) id) x) y")
ok "$([ "$r" = "t|t|15|t" ] && echo 1)" "Retry-After plus jitter: 10,000 entities spread over 15 one-second buckets, none over twice its share" "$r"
r=$(q -c "select count(*) filter (where has_function_privilege('public', p.oid, 'execute')), count(*) from pg_proc p where pronamespace = 'mlplat'::regnamespace and proname in ('_http_probe', '_backoff_delay_ms', '_kube_configure', '_kube_call', '_kube_lease', '_http_worker_selftest')")
ok "$([ "$r" = "0|6" ] && echo 1)" "the six test hooks are not executable by PUBLIC" "$r"

echo "1..$N"
[ "$FAILED" = 0 ]
