# test/lib/standin.sh — start the stand-in cluster for a test and point the
# cluster's reconcilers at it.  Source after tap.sh/cluster.sh; needs WORK.
#
#   standin_start DIR         # sets STANDIN_PORT STANDIN_S3 STANDIN_ADMIN STANDIN_TOKEN_FILE
#   standin_stop DIR
#   standin_connect DB        # ALTER SYSTEM mlplat.kube_url/kube_token_file + reload
#   admin METHOD PATH [JSON]  # call the stand-in's admin API

standin_start() {
	local dir=$1
	mkdir -p "$dir"
	"$SRC/test/standin/setup.sh" >/dev/null || return 1   # npm ci once; quick afterwards
	STANDIN_TOKEN=standin-token-$RANDOM$RANDOM
	STANDIN_TOKEN_FILE=$dir/token
	printf '%s' "$STANDIN_TOKEN" >"$STANDIN_TOKEN_FILE"
	chmod 644 "$STANDIN_TOKEN_FILE"
	"$SRC/test/standin/start.sh" --state-dir "$dir" --port 0 --s3-port 0 --token "$STANDIN_TOKEN" \
		--seed 7 --ready-delay-ms "${STANDIN_READY_MS:-300}" >/dev/null || return 1
	STANDIN_PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$dir/ports.json")
	STANDIN_S3=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["s3Port"])' "$dir/ports.json")
	STANDIN_URL=http://127.0.0.1:$STANDIN_PORT
	STANDIN_ADMIN=$STANDIN_URL/_standin
}

standin_stop() {
	"$SRC/test/standin/stop.sh" --state-dir "$1" >/dev/null 2>&1
}

standin_connect() {
	$PSQL -d "$1" -c "ALTER SYSTEM SET mlplat.kube_url = '$STANDIN_URL'" \
		-c "ALTER SYSTEM SET mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" -c "SELECT pg_reload_conf()" >/dev/null
}

standin_disconnect() {
	$PSQL -d "$1" -c "ALTER SYSTEM RESET mlplat.kube_url" -c "ALTER SYSTEM RESET mlplat.kube_token_file" \
		-c "SELECT pg_reload_conf()" >/dev/null
}

admin() {
	curl -s -X "$1" "$STANDIN_ADMIN/$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
}

# writes_count [QUERY] — how many write requests the stand-in has logged (fails loudly)
writes_count() {
	admin GET "requests${1:+?$1}" | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("write")))'
}

# kube METHOD PATH [JSON] — the Kubernetes API with the token
kube() {
	curl -s -X "$1" -H "Authorization: Bearer $STANDIN_TOKEN" "$STANDIN_URL$2" \
		${3:+-H 'Content-Type: application/json' -d "$3"}
}
