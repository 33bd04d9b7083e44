# test/lib/standin.sh — start the stand-in cluster for a test and point the
# cluster's reconcilers at it.  Source after tap.sh/cluster.sh; needs WORK.
#
#   standin_start DIR         # sets STANDIN_PORT STANDIN_S3 STANDIN_ADMIN STANDIN_TOKEN_FILE STANDIN_S3_CONF
#                             # and STANDIN_CONF (the cluster settings that point mlplat at it)
#   standin_stop DIR
#   standin_connect DB        # ALTER SYSTEM mlplat.kube_url/kube_token_file/s3_* + reload
#   standin_artifact URI CONTENT [JSON]  # store s3://bucket/key in the stand-in's S3
#   admin METHOD PATH [JSON]  # call the stand-in's admin API

standin_start() {
	local dir=$1
	mkdir -p "$dir"
	"$SRC/test/standin/setup.sh" >/dev/null || return 1   # npm ci once; quick afterwards
	STANDIN_TOKEN=standin-token-$RANDOM$RANDOM
	STANDIN_TOKEN_FILE=$dir/token
	printf '%s' "$STANDIN_TOKEN" >"$STANDIN_TOKEN_FILE"
	chmod 644 "$STANDIN_TOKEN_FILE"
	# s3rver's account; the stand-in's S3 front checks the SigV4 signatures made with it
	STANDIN_S3_CREDENTIALS=$dir/s3-credentials
	printf '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' >"$STANDIN_S3_CREDENTIALS"
	chmod 644 "$STANDIN_S3_CREDENTIALS"
	# STANDIN_TLS=1: the same routes over HTTPS too (STANDIN_TLS_URL, its certificate STANDIN_TLS_CERT)
	"$SRC/test/standin/start.sh" --state-dir "$dir" --port 0 --s3-port 0 --token "$STANDIN_TOKEN" \
		--seed "${STANDIN_SEED:-7}" --ready-delay-ms "${STANDIN_READY_MS:-300}" ${STANDIN_TLS:+--tls-port 0} >/dev/null || return 1
	if [ -n "${STANDIN_TLS:-}" ]; then
		STANDIN_TLS_URL=https://127.0.0.1:$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tlsPort"])' "$dir/ports.json")
		STANDIN_TLS_CERT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tlsCert"])' "$dir/ports.json")
	fi
	STANDIN_PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$dir/ports.json")
	STANDIN_S3=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["s3Port"])' "$dir/ports.json")
	STANDIN_URL=http://127.0.0.1:$STANDIN_PORT
	STANDIN_ADMIN=$STANDIN_URL/_standin
	# settings for a cluster started with cluster_start: the object store and its key
	# mlplat's own store credentials, and those KServe's storage initializer finds on the
	# predictor ServiceAccount (a Secret's name; the stand-in checks only that one is listed)
	STANDIN_S3_CONF=("mlplat.s3_endpoint = 'http://127.0.0.1:$STANDIN_S3'"
		"mlplat.s3_credentials_file = '$STANDIN_S3_CREDENTIALS'"
		"mlplat.predictor_s3_secret = 'standin-s3'"
		"mlplat.predictor_s3_endpoint = 'http://127.0.0.1:$STANDIN_S3'")
	# everything a cluster started after the stand-in needs to use it (Kubernetes and S3)
	STANDIN_CONF=("mlplat.kube_url = '$STANDIN_URL'" "mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'"
		"${STANDIN_S3_CONF[@]}")
}

standin_stop() {
	"$SRC/test/standin/stop.sh" --state-dir "$1" >/dev/null 2>&1
}

standin_connect() {
	$PSQL -d "$1" -c "ALTER SYSTEM SET mlplat.kube_url = '$STANDIN_URL'" \
		-c "ALTER SYSTEM SET mlplat.kube_token_file = '$STANDIN_TOKEN_FILE'" \
		-c "ALTER SYSTEM SET mlplat.s3_endpoint = 'http://127.0.0.1:$STANDIN_S3'" \
		-c "ALTER SYSTEM SET mlplat.s3_credentials_file = '$STANDIN_S3_CREDENTIALS'" \
		-c "ALTER SYSTEM SET mlplat.predictor_s3_secret = 'standin-s3'" \
		-c "ALTER SYSTEM SET mlplat.predictor_s3_endpoint = 'http://127.0.0.1:$STANDIN_S3'" -c "SELECT pg_reload_conf()" >/dev/null
}

standin_disconnect() {
	$PSQL -d "$1" -c "ALTER SYSTEM RESET mlplat.kube_url" -c "ALTER SYSTEM RESET mlplat.kube_token_file" \
		-c "ALTER SYSTEM RESET mlplat.s3_endpoint" -c "ALTER SYSTEM RESET mlplat.s3_credentials_file" \
		-c "ALTER SYSTEM RESET mlplat.predictor_s3_secret" -c "ALTER SYSTEM RESET mlplat.predictor_s3_endpoint" \
		-c "SELECT pg_reload_conf()" >/dev/null
}

# standin_artifact s3://bucket/key CONTENT [EXTRA_JSON_FIELDS] — upload; prints the SHA-256.
# CONTENT "-" reads it from stdin (for large objects).
standin_artifact() {
	python3 -c '
import hashlib, json, sys, urllib.request
uri, content, extra, admin = sys.argv[1:5]
if content == "-":
    content = sys.stdin.read()
bucket, key = uri[len("s3://"):].split("/", 1)
body = {"bucket": bucket, "key": key, "content": content}
if extra:
    body.update(json.loads(extra))
req = urllib.request.Request(admin + "/s3/object", json.dumps(body).encode(), {"Content-Type": "application/json"})
out = json.load(urllib.request.urlopen(req))
assert out["sha256"] == hashlib.sha256(content.encode()).hexdigest()
print(out["sha256"])
' "$1" "$2" "${3:-}" "$STANDIN_ADMIN"
}

admin() {
	curl -s -X "$1" "$STANDIN_ADMIN/$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
}

# writes_count [QUERY] — how many write requests the stand-in has logged (fails loudly);
# the reconcilers' own Lease renewals (the fence, on by default) are not counted
writes_count() {
	admin GET "requests${1:+?$1}" | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("write") and e.get("kind") != "Lease"))'
}

# kube METHOD PATH [JSON] — the Kubernetes API with the token
kube() {
	curl -s -X "$1" -H "Authorization: Bearer $STANDIN_TOKEN" "$STANDIN_URL$2" \
		${3:+-H 'Content-Type: application/json' -d "$3"}
}

# kube_code PATH — the HTTP status the stand-in's Kubernetes API answers a GET of PATH with
# (404 once an object is gone): an assertion about the cluster read from the cluster.
kube_code() {
	curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $STANDIN_TOKEN" "$STANDIN_URL$1"
}

# wait_kube_gone PATH SECONDS — poll until a GET of PATH is 404; say what it was otherwise
wait_kube_gone() {
	local deadline=$((SECONDS + $2)) code
	while :; do
		code=$(kube_code "$1")
		[ "$code" = 404 ] && return 0
		((SECONDS >= deadline)) && { echo "# waited $2 s; GET $1 still answers $code"; return 1; }
		sleep 0.1
	done
}
