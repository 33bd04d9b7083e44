# test/lib/real.sh — start the real peers (test/real/) for a test and point a
# cluster's reconcilers at them.  Source after tap.sh/cluster.sh; needs SRC.  A script of
# test/real/e2e starts, as test/e2e's do, from e2e.sh:
#
#   set -u
#   . "$(dirname "$0")/../../lib/e2e.sh"
#   . "$SRC/test/lib/real.sh"
#   real_preamble NAME [DB]     # RD=$WORK/real-NAME (the peers' directory), DB; at exit the
#                               # peers stopped and DB's kube/S3 settings reset
#   real_stack_up [s3] [controller]  # the API server with mlplat's identity, and the S3 server
#                               # and the KServe/Argo/Job imitation if named (S3 first, so
#                               # Jobs write to it); DB connected to them; one TAP result
#   real_reset_at_exit SETTING...  # ALTER SYSTEM RESET each SETTING in DB at exit
#   kget PATH                   # rk_body GET PATH
#   until_check SECONDS PATH EXPR  # poll the object at PATH until check (tap.sh) finds EXPR
#
#   real_paths                  # KUBE_APISERVER ETCD ... from test/real/build.sh --paths
#   real_kube_start DIR         # etcd + kube-apiserver + kube-controller-manager + CRDs;
#                               # sets REAL_KUBE_URL REAL_CA REAL_ADMIN_TOKEN
#   real_identity DIR           # deploy/kubernetes/ applied; REAL_MLPLAT_TOKEN_FILE holds
#                               # the mlplat ServiceAccount's token (never an admin token)
#   real_controller_start DIR   # the KServe/Knative/Argo/Job imitation (test/real/controller.js),
#                               # with KServe's defaulting webhook registered (test/real/webhook.js);
#                               # after real_s3_start, Jobs' workers write to that S3 server
#   real_connect DB [URL]       # ALTER SYSTEM mlplat.kube_url (URL, default the API server)/
#                               # kube_token_file/kube_ca_file + reload
#   real_proxy_start DIR [SEED] # the fault proxy (test/real/faultproxy.py) in front of the API
#                               # server; sets REAL_PROXY_URL REAL_PROXY_ADMIN
#   proxy_admin METHOD PATH [JSON]  # its admin API (faults, holds, writes, requests)
#   real_s3_start DIR           # moto with SigV4 checking; sets REAL_S3 REAL_S3_CREDENTIALS
#   real_s3_put s3://B/K CONTENT  # upload with a SHA-256 checksum; prints the hex digest
#   real_s3_connect DB          # ALTER SYSTEM mlplat.s3_endpoint/s3_credentials_file + reload
#   real_mlflow_start DIR [basic-auth]  # mlflow server, backend store a database of this
#                               # test's PostgreSQL cluster; sets REAL_MLFLOW
#   real_stop DIR               # stop everything started in DIR
#   real_role_take RESOURCE VERB...  # take VERBs from mlplat-controller's rule for RESOURCE
#                               # (as admin); REAL_ROLE_CODE: the PUT's status code
#   real_role_give_back         # put mlplat-controller's rules back as they were (REAL_ROLE_CODE)
#   rk METHOD PATH [JSON [CONTENT-TYPE]]  # the real API server as admin; prints the body,
#                               # then the status code on the last line
#
# Everything listens on 127.0.0.1 only. Timings go to stdout as "# real: ...".

real_paths() {
	eval "$("$SRC/test/real/build.sh" --paths)"
}

# _real_bg DIR NAME CMD... — start CMD in the background, log DIR/NAME.log, pid DIR/NAME.pid
_real_bg() {
	local dir=$1 name=$2
	shift 2
	# its own process group, so stopping it also stops the workers it forks
	setsid "$@" >"$dir/$name.log" 2>&1 &
	echo $! >"$dir/$name.pid"
}

# _real_wait SECONDS CMD... — until CMD succeeds
_real_wait() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS >= deadline)) && return 1
		sleep 0.2
	done
}

_real_certs() {
	local d=$1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-keyout "$d/ca.key" -out "$d/ca.crt" -subj "/CN=mlplat-test-ca" 2>/dev/null || return 1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/apiserver.key" -out "$d/apiserver.csr" -subj "/CN=kube-apiserver" 2>/dev/null || return 1
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$d/apiserver.ext"
	openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 2 -extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null || return 1
	# the webhook's serving certificate (KServe's defaulting, served by controller.js)
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/webhook.key" -out "$d/webhook.csr" -subj "/CN=kserve-webhook" 2>/dev/null || return 1
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$d/webhook.ext"
	openssl x509 -req -in "$d/webhook.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 2 -extfile "$d/webhook.ext" -out "$d/webhook.crt" 2>/dev/null || return 1
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null &&
		openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

rk() {
	curl -sS --max-time 30 --cacert "$REAL_CA" -H "Authorization: Bearer $REAL_ADMIN_TOKEN" \
		-X "$1" "$REAL_KUBE_URL$2" ${3:+-H "Content-Type: ${4:-application/json}" --data-binary "$3"} \
		-w '\n%{http_code}'
}

# rk_body METHOD PATH [JSON [CT]] — the body only
rk_body() { rk "$@" | sed '$d'; }

real_kube_start() {
	local dir=$1 t0=$SECONDS t1 etcd_port peer_port api_port
	mkdir -p "$dir"
	real_paths
	_real_certs "$dir" || { echo "# real: certificates failed"; return 1; }
	REAL_CA=$dir/ca.crt
	REAL_ADMIN_TOKEN=admin-$(openssl rand -hex 16)
	# token,user,uid,"groups": the admin (tests, the controller, the
	# controller manager) and nobody else; mlplat gets a ServiceAccount token.
	printf '%s,mlplat-test-admin,1,"system:masters"\n' "$REAL_ADMIN_TOKEN" >"$dir/tokens.csv"
	printf '%s' "$REAL_ADMIN_TOKEN" >"$dir/admin-token"
	chmod 600 "$dir/tokens.csv" "$dir/admin-token"
	etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
	REAL_KUBE_URL=https://127.0.0.1:$api_port
	_real_bg "$dir" etcd "$ETCD" -data-dir "$dir/etcd" \
		-listen-client "http://127.0.0.1:$etcd_port" -listen-peer "http://127.0.0.1:$peer_port"
	_real_wait 60 curl -sf "http://127.0.0.1:$etcd_port/health" ||
		{ echo "# real: etcd did not start"; tail -20 "$dir/etcd.log"; return 1; }
	_real_bg "$dir" kube-apiserver "$KUBE_APISERVER" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
		--tls-cert-file="$dir/apiserver.crt" --tls-private-key-file="$dir/apiserver.key" \
		--token-auth-file="$dir/tokens.csv" --anonymous-auth=false \
		--authorization-mode=RBAC \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
		--api-audiences=https://kubernetes.default.svc \
		--service-cluster-ip-range=10.96.0.0/16 \
		--endpoint-reconciler-type=none \
		--profiling=false --v=0
	_real_wait 240 curl -sf --cacert "$REAL_CA" -H "Authorization: Bearer $REAL_ADMIN_TOKEN" "$REAL_KUBE_URL/readyz" ||
		{ echo "# real: kube-apiserver not ready"; tail -30 "$dir/kube-apiserver.log"; return 1; }
	t1=$SECONDS
	cat >"$dir/kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster: {server: "$REAL_KUBE_URL", certificate-authority: "$REAL_CA"}
users:
- name: admin
  user: {token: "$REAL_ADMIN_TOKEN"}
contexts:
- name: real
  context: {cluster: real, user: admin}
current-context: real
EOK
	chmod 600 "$dir/kubeconfig"
	# Only the controllers that need no nodes.
	_real_bg "$dir" kube-controller-manager "$KUBE_CONTROLLER_MANAGER" \
		--kubeconfig="$dir/kubeconfig" --authentication-kubeconfig="$dir/kubeconfig" \
		--authorization-kubeconfig="$dir/kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
		--controllers=namespace-controller,garbage-collector-controller,resourcequota-controller,serviceaccount-controller,serviceaccount-token-controller,clusterrole-aggregation-controller,root-ca-certificate-publisher-controller \
		--service-account-private-key-file="$dir/sa.key" --root-ca-file="$REAL_CA" \
		--use-service-account-credentials=false --concurrent-namespace-syncs=2 --v=0
	python3 "$SRC/test/real/crds.py" >"$dir/crds.json" || return 1
	# one file per CRD (a schema is too large for an argument), then apply each
	python3 - "$dir/crds.json" "$dir" <<'EOP' >"$dir/crds.list" || return 1
import json, sys
for i in json.load(open(sys.argv[1]))["items"]:
    name = i["metadata"]["name"]
    with open(f"{sys.argv[2]}/crd-{name}.json", "w") as f:
        json.dump(i, f)
    print(name)
EOP
	local name code
	while read -r name; do
		code=$(rk PATCH "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name?fieldManager=mlplat-test&force=true" \
			"@$dir/crd-$name.json" application/apply-patch+yaml | tail -1)
		[[ $code =~ ^20[01]$ ]] || { echo "# real: CRD $name: HTTP $code"; return 1; }
	done <"$dir/crds.list"
	while read -r name; do
		_real_wait 240 _real_crd_established "$name" || { echo "# real: CRD $name not established"; return 1; }
		# Established, and served: the first LIST answers
		_real_wait 120 _real_crd_served "$name" || { echo "# real: CRD $name not served"; return 1; }
	done <"$dir/crds.list"
	echo "# real: kube-apiserver ready in $((t1 - t0)) s, CRDs established after $((SECONDS - t0)) s"
}

_real_crd_established() {
	rk_body GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" |
		python3 -c 'import json,sys; o=json.load(sys.stdin); sys.exit(0 if any(c["type"]=="Established" and c["status"]=="True" for c in o.get("status",{}).get("conditions",[])) else 1)'
}

_real_crd_served() {
	local plural=${1%%.*} group=${1#*.} v
	v=$(rk_body GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["versions"][0]["name"])')
	[ "$(rk GET "/apis/$group/$v/$plural?limit=1" | tail -1)" = 200 ]
}

# real_apply FILE... — server-side apply every document of the YAML files, as admin
real_apply() {
	python3 "$SRC/test/real/apply.py" --url "$REAL_KUBE_URL" --ca "$REAL_CA" --token-file "$(dirname "$REAL_CA")/admin-token" "$@"
}

real_identity() {
	local dir=$1 tok
	real_apply "$SRC"/deploy/kubernetes/*.yaml || return 1
	tok=$(rk_body POST /api/v1/namespaces/mlplat-system/serviceaccounts/mlplat/token \
		'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}' |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"])') || return 1
	REAL_MLPLAT_TOKEN_FILE=$dir/mlplat-token
	printf '%s' "$tok" >"$REAL_MLPLAT_TOKEN_FILE"
	chmod 644 "$REAL_MLPLAT_TOKEN_FILE"
}

REAL_ROLE=/apis/rbac.authorization.k8s.io/v1/clusterroles/mlplat-controller
real_role_take() {
	local res=$1
	shift
	REAL_ROLE_ORIG=$(rk_body GET $REAL_ROLE)
	REAL_ROLE_CODE=$(rk PUT $REAL_ROLE "$(python3 -c '
import json, sys
o = json.loads(sys.argv[1])
n = 0
for r in o["rules"]:
    if r.get("resources") == [sys.argv[2]]:
        r["verbs"] = [v for v in r["verbs"] if v not in sys.argv[3:]]
        n += 1
assert n == 1, f"{n} rules for {sys.argv[2]}"
print(json.dumps({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": o["metadata"]["name"], "resourceVersion": o["metadata"]["resourceVersion"]}, "rules": o["rules"]}))' "$REAL_ROLE_ORIG" "$res" "$@")" | tail -1)
}

real_role_give_back() {
	[ -n "${REAL_ROLE_ORIG:-}" ] || return 0
	REAL_ROLE_CODE=$(rk PUT $REAL_ROLE "$(python3 -c '
import json, sys
o = json.loads(sys.argv[1])
print(json.dumps({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": o["metadata"]["name"]}, "rules": o["rules"]}))' "$REAL_ROLE_ORIG")" | tail -1)
	REAL_ROLE_ORIG=
}

# mk METHOD PATH [JSON [CT]] — the API server as mlplat's ServiceAccount
mk() {
	curl -sS --max-time 30 --cacert "$REAL_CA" -H "Authorization: Bearer $(cat "$REAL_MLPLAT_TOKEN_FILE")" \
		-X "$1" "$REAL_KUBE_URL$2" ${3:+-H "Content-Type: ${4:-application/json}" --data-binary "$3"} \
		-w '\n%{http_code}'
}

real_controller_start() {
	local dir=$1
	# REAL_CONTROLLER_ARGS: more options (e.g. --slow-prefix long- --slow-ms 20000)
	# shellcheck disable=SC2086
	_real_bg "$dir" controller node "$SRC/test/real/controller.js" --url "$REAL_KUBE_URL" --ca "$REAL_CA" \
		--token-file "$dir/admin-token" --ready-delay-ms "${REAL_READY_MS:-500}" --port-file "$dir/controller.port" \
		--webhook-cert "$dir/webhook.crt" --webhook-key "$dir/webhook.key" --webhook-port-file "$dir/webhook.port" \
		${REAL_S3:+--s3-endpoint "$REAL_S3" --s3-credentials "$REAL_S3_CREDENTIALS"} ${REAL_CONTROLLER_ARGS:-}
	_real_wait 30 test -s "$dir/controller.port" || { echo "# real: controller did not start"; tail -20 "$dir/controller.log"; return 1; }
	REAL_CONTROLLER=http://127.0.0.1:$(cat "$dir/controller.port")
	_real_wait 30 test -s "$dir/webhook.port" || { echo "# real: webhook did not start"; tail -20 "$dir/controller.log"; return 1; }
	real_webhook_register "$(cat "$dir/webhook.port")"
}

# real_webhook_register PORT — KServe's MutatingWebhookConfiguration for the webhook
# controller.js serves on PORT; returns once the API server calls it (a dry-run create
# comes back defaulted)
real_webhook_register() {
	local cfg code
	cfg=$(python3 - "$1" "$REAL_CA" <<'EOP'
import base64, json, sys
print(json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "inferenceservice.serving.kserve.io"},
    "webhooks": [{"name": "inferenceservice.kserve-webhook-server.defaulter",
        "clientConfig": {"url": f"https://127.0.0.1:{sys.argv[1]}/mutate",
                         "caBundle": base64.b64encode(open(sys.argv[2], "rb").read()).decode()},
        "rules": [{"apiGroups": ["serving.kserve.io"], "apiVersions": ["v1beta1"],
                   "operations": ["CREATE", "UPDATE"], "resources": ["inferenceservices"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
        "timeoutSeconds": 10}]}))
EOP
)
	code=$(rk PATCH "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/inferenceservice.serving.kserve.io?fieldManager=mlplat-test&force=true" \
		"$cfg" application/apply-patch+yaml | tail -1)
	[[ $code =~ ^20[01]$ ]] || { echo "# real: MutatingWebhookConfiguration: HTTP $code"; return 1; }
	_real_wait 60 _real_webhook_called || { echo "# real: the API server does not call the webhook"; return 1; }
}

_real_webhook_called() {
	rk_body POST "/apis/serving.kserve.io/v1beta1/namespaces/default/inferenceservices?dryRun=All" \
		'{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService","metadata":{"name":"webhook-probe"},"spec":{"predictor":{"model":{"modelFormat":{"name":"sklearn"}}}}}' |
		python3 -c 'import json,sys; sys.exit(0 if "serving.kserve.io/deploymentMode" in json.load(sys.stdin)["metadata"].get("annotations", {}) else 1)'
}

real_proxy_start() {
	local dir=$1
	rm -f "$dir/proxy.port" "$dir/proxy-admin.port"
	_real_bg "$dir" proxy python3 "$SRC/test/real/faultproxy.py" --upstream "$REAL_KUBE_URL" --ca "$REAL_CA" \
		--cert "$dir/apiserver.crt" --key "$dir/apiserver.key" --seed "${2:-7}" --log "$dir/proxy-requests.jsonl" \
		--port-file "$dir/proxy.port" --admin-port-file "$dir/proxy-admin.port" --max-seconds 3600
	_real_wait 30 test -s "$dir/proxy.port" || { echo "# real: fault proxy did not start"; tail -20 "$dir/proxy.log"; return 1; }
	REAL_PROXY_URL=https://127.0.0.1:$(cat "$dir/proxy.port")
	REAL_PROXY_ADMIN=http://127.0.0.1:$(cat "$dir/proxy-admin.port")
}

proxy_admin() {
	curl -s --max-time 30 -X "$1" "$REAL_PROXY_ADMIN/$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
}

real_connect() {
	$PSQL -d "$1" -c "ALTER SYSTEM SET mlplat.kube_url = '${2:-$REAL_KUBE_URL}'" \
		-c "ALTER SYSTEM SET mlplat.kube_token_file = '$REAL_MLPLAT_TOKEN_FILE'" \
		-c "ALTER SYSTEM SET mlplat.kube_ca_file = '$REAL_CA'" -c "SELECT pg_reload_conf()" >/dev/null
}

real_disconnect() {
	$PSQL -d "$1" -c "ALTER SYSTEM RESET mlplat.kube_url" -c "ALTER SYSTEM RESET mlplat.kube_token_file" \
		-c "ALTER SYSTEM RESET mlplat.kube_ca_file" -c "SELECT pg_reload_conf()" >/dev/null
}

real_s3_start() {
	local dir=$1 port py
	mkdir -p "$dir"
	real_paths
	py=$(dirname "$MOTO_SERVER")/python
	port=$(free_port)
	REAL_S3=http://127.0.0.1:$port
	# authentication on after the three requests s3.py setup makes
	INITIAL_NO_AUTH_ACTION_COUNT=3 _real_bg "$dir" moto "$py" -m moto.server -H 127.0.0.1 -p "$port"
	_real_wait 60 curl -sf "$REAL_S3/moto-api/" || { echo "# real: moto did not start"; tail -20 "$dir/moto.log"; return 1; }
	REAL_S3_CREDENTIALS=$dir/s3-credentials
	"$py" "$SRC/test/real/s3.py" setup "$REAL_S3" "$REAL_S3_CREDENTIALS" || return 1
	chmod 644 "$REAL_S3_CREDENTIALS"
}

real_s3_put() {
	"$(dirname "$MOTO_SERVER")/python" "$SRC/test/real/s3.py" put "$REAL_S3" "$REAL_S3_CREDENTIALS" "$1" "$2"
}

real_s3_connect() {
	$PSQL -d "$1" -c "ALTER SYSTEM SET mlplat.s3_endpoint = '$REAL_S3'" \
		-c "ALTER SYSTEM SET mlplat.s3_credentials_file = '$REAL_S3_CREDENTIALS'" -c "SELECT pg_reload_conf()" >/dev/null
}

real_s3_disconnect() {
	$PSQL -d "$1" -c "ALTER SYSTEM RESET mlplat.s3_endpoint" -c "ALTER SYSTEM RESET mlplat.s3_credentials_file" \
		-c "SELECT pg_reload_conf()" >/dev/null
}

real_mlflow_start() {
	local dir=$1 app=${2:-} port db t0=$SECONDS
	mkdir -p "$dir"
	real_paths
	port=$(free_port)
	db=mlflow_$(basename "$dir" | tr -c 'a-z0-9\n' '_')
	$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null || return 1
	REAL_MLFLOW=http://127.0.0.1:$port
	if [ -n "$app" ]; then
		# the basic-auth app's own user store, and its first admin
		printf '[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///%s/basic_auth.db\nadmin_username = admin\nadmin_password = %s\nauthorization_function = mlflow.server.auth:authenticate_request_basic_auth\n' \
			"$dir" "${REAL_MLFLOW_ADMIN_PASSWORD:=pw-$RANDOM$RANDOM-x}" >"$dir/basic_auth.ini"
	fi
	# no background job runner: the registry REST API is what mlplat uses
	(cd "$dir" && MLFLOW_FLASK_SERVER_SECRET_KEY=$(openssl rand -hex 16) MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false MLFLOW_AUTH_CONFIG_PATH=$dir/basic_auth.ini _real_bg "$dir" mlflow "$MLFLOW" server \
		--backend-store-uri "postgresql+psycopg2://postgres@127.0.0.1:$PGPORT/$db" \
		--host 127.0.0.1 --port "$port" --workers 1 --no-serve-artifacts ${app:+--app-name "$app"})
	_real_wait 180 curl -sf "$REAL_MLFLOW/health" || { echo "# real: mlflow did not start"; tail -20 "$dir/mlflow.log"; return 1; }
	echo "# real: mlflow server ready in $((SECONDS - t0)) s"
}

real_stop() {
	local dir=$1 p n
	for n in proxy controller kube-controller-manager kube-apiserver etcd mlflow moto otlp; do
		[ -f "$dir/$n.pid" ] || continue
		p=$(cat "$dir/$n.pid")
		kill -- "-$p" 2>/dev/null
		for _ in $(seq 50); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 -- "-$p" 2>/dev/null
		rm -f "$dir/$n.pid"
	done
}

# real_preamble NAME [DB] — see the head of this file
real_preamble() {
	RD=$WORK/real-$1
	on_exit 'real_stop "$RD"'
	[ $# -lt 2 ] && return 0
	DB=$2
	on_exit 'real_disconnect "$DB"; real_s3_disconnect "$DB"'
}

real_reset_at_exit() {
	local s cmd='$PSQL -d "$DB"'
	for s; do cmd+=" -c 'ALTER SYSTEM RESET $s'"; done
	on_exit "$cmd -c 'SELECT pg_reload_conf()' >/dev/null"
}

# real_stack_up [s3] [controller] — see the head of this file
real_stack_up() {
	local t0=$SECONDS s3= controller= what="real API server with mlplat's identity" p
	for p; do
		case $p in
		s3) s3=1 what+=", S3 server" ;;
		controller) controller=1 what+=", KServe/Argo/Job imitation" ;;
		*) echo "# real_stack_up: unknown peer $p"; return 1 ;;
		esac
	done
	real_kube_start "$RD" && real_identity "$RD" >/dev/null &&
		{ [ -z "$s3" ] || real_s3_start "$RD"; } && { [ -z "$controller" ] || real_controller_start "$RD"; }
	tap_ok $? "$what up ($((SECONDS - t0)) s)"
	[ -n "${DB:-}" ] || return 0
	real_connect "$DB"
	[ -z "$s3" ] || real_s3_connect "$DB"
}

kget() { rk_body GET "$1"; }

until_check() {
	local deadline=$((SECONDS + $1))
	until check "$(kget "$2")" "$3" >/dev/null; do
		((SECONDS >= deadline)) && { check "$(kget "$2")" "$3"; return 1; }
		sleep 0.2
	done
}
