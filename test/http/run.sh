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
	while IFS= read -r line; do
		case "$line" in
			"ok "*) ok 1 "backoff: ${line#* - }" ;;
			"not ok "*) ok 0 "backoff: ${line#* - }" ;;
		esac
	done < <("$W/backoff_test")
else
	ok 0 "backoff unit test builds" "$(cat "$W/cc.err")"
fi

# ---- loopback HTTP server
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
python3 "$HERE/server.py" "$W/ports" &
SRV_PID=$!
for _ in $(seq 100); do [ -f "$W/ports" ] && break; sleep 0.05; done
[ -f "$W/ports" ] || bail "test HTTP server did not start"
read -r HPORT HOLE < "$W/ports"
U="http://127.0.0.1:$HPORT"
# a port nobody listens on: bind, read the number, close
CLOSED=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')

# ---- PostgreSQL
if [ "${MLPLAT_TEST_CLUSTER:-}" != 1 ]; then
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
	mkdir -p "$W/usr/lib/postgresql" "$W/usr/share/postgresql"
	cp -a /usr/lib/postgresql/15 "$W/usr/lib/postgresql/"
	cp -a /usr/share/postgresql/15 "$W/usr/share/postgresql/"
	# SHELL=/bin/bash: dash's echo once mangled the generated script's "\echo" line;
	# drop a script generated that way so it is rebuilt.
	for f in "$ROOT"/mlplat--*.sql; do grep -q $'\033' "$f" 2>/dev/null && rm -f "$f"; done
	(cd "$ROOT" && make -s SHELL=/bin/bash >/dev/null && make -s SHELL=/bin/bash install DESTDIR="$W" >/dev/null) ||
		bail "build failed"
	chown -R postgres "$W"
	B=$W/usr/lib/postgresql/15/bin
	runuser -u postgres -- "$B/initdb" -D "$W/data" -A trust -U postgres >/dev/null || bail "initdb failed"
	runuser -u postgres -- env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY \
		"$B/pg_ctl" -D "$W/data" -l "$W/log" -w start \
		-o "-k $W -p $PORT -c listen_addresses='' -c shared_preload_libraries=mlplat" >/dev/null || bail "server did not start: $(tail -5 "$W/log")"
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
		ok "$([ $(( $3 - $1 )) -lt 2048 ] && echo 1)" "RSS flat over 10000 passes (${1} kB -> ${3} kB)"
		ok "$([ $(( $4 - $2 )) -le 2 ] && echo 1)" "no file descriptor leak over 10000 passes ($2 -> $4)"
	else
		ok 0 "leak check ran" "$r"
		ok 0 "leak check ran (fds)"
	fi
fi

# ---- backoff through SQL, and the hooks are superuser-only
r=$(q -c "select mlplat._backoff_delay_ms(0,100,10000,0,1), mlplat._backoff_delay_ms(1,100,10000,0,1), mlplat._backoff_delay_ms(3,100,10000,0,1) between 100 and 400, mlplat._backoff_delay_ms(30,100,10000,0,1) <= 10000, mlplat._backoff_delay_ms(1,100,10000,30,1)")
ok "$([ "$r" = "0|100|t|t|30000" ] && echo 1)" "_backoff_delay_ms via SQL" "$r"
r=$(q -c "select has_function_privilege('public', 'mlplat._http_probe(text[],text,int,int,int)', 'execute'), has_function_privilege('public', 'mlplat._backoff_delay_ms(int,int,int,int,int)', 'execute')")
ok "$([ "$r" = "f|f" ] && echo 1)" "test hooks are not executable by PUBLIC" "$r"

echo "1..$N"
[ "$FAILED" = 0 ]
