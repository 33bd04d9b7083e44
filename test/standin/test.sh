#!/bin/bash
# Fidelity tests for the stand-in cluster. Starts its own stand-in on free loopback ports,
# runs kubectl, the Kubernetes Python client and direct HTTP checks against it, always stops
# it, and prints TAP. Exit status is non-zero when any check fails.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
# The repository's own validator and the CRD schemas it carries (test/schemas/SOURCES.md).
VALIDATOR=$ROOT/test/tools/validate-manifest
SCHEMAS=$ROOT/test/schemas
TOKEN=standin-test-token
STATE=$(mktemp -d /tmp/standin-test.XXXXXX)
OUT=$STATE/results.txt
: >"$OUT"

cleanup() { "$HERE/stop.sh" --state-dir "$STATE" >/dev/null 2>&1; rm -rf "$STATE"; }
trap cleanup EXIT INT TERM

fail_setup() { echo "1..1"; echo "not ok 1 - $1"; sed 's/^/#   /' "$2" 2>/dev/null; exit 1; }

"$HERE/setup.sh" >"$STATE/setup.log" 2>&1 || fail_setup "npm ci in test/standin" "$STATE/setup.log"
[ -x "$VALIDATOR" ] && [ -f "$SCHEMAS/kserve-inferenceservice-v1beta1.json" ] ||
  { ls -l "$VALIDATOR" "$SCHEMAS" >"$STATE/v.log" 2>&1; fail_setup "find test/tools/validate-manifest and test/schemas" "$STATE/v.log"; }
# --port 0 and friends: the kernel picks free loopback ports; the stand-in reports them in ports.json.
timeout 20 "$HERE/start.sh" --state-dir "$STATE" --crd-schemas "$SCHEMAS" --port 0 --s3-port 0 --tls-port 0 --token "$TOKEN" --seed 42 \
  --ready-delay-ms 100 --argo-step-ms 50 >"$STATE/start.out" 2>&1 || fail_setup "start the stand-in" "$STATE/start.out"
port() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$STATE/ports.json" "$1"; }
PORT=$(port port); S3PORT=$(port s3Port); TLSPORT=$(port tlsPort)

export KUBECONFIG=$STATE/kubeconfig
cat >"$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster: {server: "https://127.0.0.1:$TLSPORT", certificate-authority: "$STATE/tls.crt"}
users:
- name: standin
  user: {token: "$TOKEN"}
contexts:
- name: standin
  context: {cluster: standin, user: standin}
current-context: standin
KC
export HOME=$STATE  # kubectl's discovery cache goes here, not into the caller's home

# t DESCRIPTION COMMAND...: one TAP line; the command's output becomes diagnostics on failure.
t() {
  local desc=$1; shift
  if ( "$@" ) >"$STATE/t.log" 2>&1; then echo "ok - kubectl: $desc" >>"$OUT"
  else echo "not ok - kubectl: $desc" >>"$OUT"; sed 's/^/#   /' "$STATE/t.log" | head -20 >>"$OUT"; fi
}
K() { timeout 30 kubectl --request-timeout=20s "$@"; }
jq_py() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

t "create namespaces and get them" bash -c '
  K() { timeout 30 kubectl --request-timeout=20s "$@"; }
  K create namespace mlp-kubectl && K create namespace other &&
  K label namespace mlp-kubectl team=a app.kubernetes.io/managed-by=mlplat &&
  K get namespaces | grep -q "^mlp-kubectl " && K get namespaces | grep -q "^other "'
t "get -l with equality and set-based selectors" bash -c '
  K() { timeout 30 kubectl --request-timeout=20s "$@"; }
  [ "$(K get ns -l team=a -o name)" = "namespace/mlp-kubectl" ] &&
  [ "$(K get ns -l "team notin (a)" -o name)" = "namespace/other" ] &&
  [ "$(K get ns -l "!team" -o name)" = "namespace/other" ]'
t "apply -f (client-side): created, unchanged, configured" bash -c "
  K() { timeout 30 kubectl --request-timeout=20s \"\$@\"; }
  K apply -f '$HERE/testdata/project.yaml' | grep -c created | grep -qx 5 &&
  K apply -f '$HERE/testdata/project.yaml' | grep -c unchanged | grep -qx 5 &&
  sed 's/gpu: \"2\"/gpu: \"4\"/' '$HERE/testdata/project.yaml' | K apply -f - | grep -q 'resourcequota/mlplat-quota configured' &&
  [ \"\$(K get quota -n mlp-kubectl mlplat-quota -o jsonpath='{.spec.hard.requests\.nvidia\.com/gpu}')\" = 4 ]"
t "apply --server-side -f an InferenceService, twice" bash -c "
  K() { timeout 30 kubectl --request-timeout=20s \"\$@\"; }
  K apply --server-side -f '$HERE/testdata/isvc.yaml' | grep -q 'serverside-applied' &&
  rv1=\$(K get isvc -n mlp-kubectl iris -o jsonpath='{.metadata.resourceVersion}') &&
  K apply --server-side -f '$HERE/testdata/isvc.yaml' | grep -q 'serverside-applied'"
t "wait --for=condition=Ready on the InferenceService (watch)" K wait --for=condition=Ready -n mlp-kubectl inferenceservice/iris --timeout=15s
t "get prints the server's Table columns (STATUS, URL, READY)" bash -c '
  K() { timeout 30 kubectl --request-timeout=20s "$@"; }
  K get ns mlp-kubectl | grep -Eq "^mlp-kubectl +Active +[0-9]+s" &&
  K get isvc -n mlp-kubectl | grep -Eq "^iris +http://iris.mlp-kubectl.example.com +True +100 "'
t "get -o json on namespaces" bash -c 'timeout 30 kubectl get namespaces -o json | /usr/bin/python3 -c "
import json,sys; d=json.load(sys.stdin)
assert d[\"kind\"] == \"List\" or d[\"kind\"] == \"NamespaceList\", d[\"kind\"]
names = sorted(i[\"metadata\"][\"name\"] for i in d[\"items\"]); assert names == [\"mlp-kubectl\", \"other\"], names
assert all(i[\"kind\"] == \"Namespace\" and i[\"status\"][\"phase\"] == \"Active\" for i in d[\"items\"])"'
t "get -o json on resourcequotas" bash -c 'timeout 30 kubectl get resourcequotas -n mlp-kubectl -o json | /usr/bin/python3 -c "
import json,sys; d=json.load(sys.stdin); i=d[\"items\"][0]
assert i[\"kind\"] == \"ResourceQuota\" and i[\"spec\"][\"hard\"][\"limits.memory\"] == \"8Gi\", i"'
t "get -o json on inferenceservices (all namespaces) shows defaulting and status" bash -c 'timeout 30 kubectl get inferenceservices -A -o json | /usr/bin/python3 -c "
import json,sys; d=json.load(sys.stdin); i=d[\"items\"][0]; m=i[\"spec\"][\"predictor\"][\"model\"]
assert i[\"kind\"] == \"InferenceService\" and \"env\" not in m and m[\"readinessProbe\"] == {\"periodSeconds\": 5}, m
assert i[\"metadata\"][\"annotations\"][\"serving.kserve.io/deploymentMode\"] == \"Serverless\"
assert i[\"status\"][\"url\"] == \"http://iris.mlp-kubectl.example.com\", i[\"status\"]"'
t "delete -f removes the objects; get is then NotFound" bash -c "
  K() { timeout 30 kubectl --request-timeout=20s \"\$@\"; }
  K delete -f '$HERE/testdata/project.yaml' | grep -c deleted | grep -qx 5 &&
  ! K get quota -n mlp-kubectl mlplat-quota 2>\$HOME/err && grep -q 'NotFound\|not found' \$HOME/err"
t "delete namespace waits until its contents and itself are gone" bash -c '
  K() { timeout 30 kubectl --request-timeout=20s "$@"; }
  K delete namespace mlp-kubectl --timeout=15s && ! K get namespace mlp-kubectl 2>/dev/null &&
  [ -z "$(K get isvc -A -o name)" ]'
t "a wrong token is refused (Unauthorized)" bash -c '! timeout 30 kubectl --token=wrong get namespaces 2>$HOME/err && grep -qi "unauthorized\|provide credentials" $HOME/err'
t "kubectl copes without OpenAPI v2 (404) by using v3" bash -c '! timeout 30 kubectl get --raw /openapi/v2 2>/dev/null && timeout 30 kubectl get --raw /openapi/v3 | grep -q apis/serving.kserve.io/v1beta1'
# Leave a clean cluster for the other suites.
curl -s -X POST "http://127.0.0.1:$PORT/_standin/reset" >/dev/null

# part NAME EXPECTED COMMAND... — one part, its results into $OUT, and one more result: it
# exited 0 (not timed out, not crashed, no missing module) with all EXPECTED results
# (test/lib/tap.sh; test/selftest/run.sh breaks it on purpose)
. "$HERE/../lib/tap.sh"
part() { tap_part "$OUT" "$@"; }
# The plan is fixed by the code, not by what came out: one result per t call above, per
# @check in pyclient_check.py, per check() in fidelity.js, and one per part for its exit.
N_KUBECTL=$(grep -c '^t "' "$0")
N_PY=$(grep -c '^@check' "$HERE/pyclient_check.py")
N_FIDELITY=$(grep -c '^check(' "$HERE/fidelity.js")
PLAN=$((N_KUBECTL + N_PY + 1 + N_FIDELITY + 1))
part "the Kubernetes Python client check" "$N_PY" timeout 120 /usr/bin/python3 "$HERE/pyclient_check.py" "$KUBECONFIG"
curl -s -X POST "http://127.0.0.1:$PORT/_standin/reset" >/dev/null
part "fidelity.js" "$N_FIDELITY" timeout 300 node "$HERE/fidelity.js" --port "$PORT" --s3-port "$S3PORT" --token "$TOKEN" --validator "$VALIDATOR"

# Number the lines and print TAP.
total=$(grep -cE '^(ok|not ok) - ' "$OUT")
failed=$(grep -cE '^not ok - ' "$OUT")
echo "1..$PLAN"
awk '/^(ok|not ok) - /{n++; sub(/^ok - /, "ok " n " - "); sub(/^not ok - /, "not ok " n " - "); print; next} {print ($0 ~ /^#/ ? $0 : "# " $0)}' "$OUT"
echo "# $((total - failed)) passed, $failed failed, $total results of a plan of $PLAN"
[ "$total" -eq "$PLAN" ] && [ "$failed" -eq 0 ]
