#!/usr/bin/env bash
# test/tools/test.sh — the manifest validator's own test (TAP): valid objects pass, and
# each way a structural CRD would prune or refuse a field is reported, with its path.
# Needs no cluster.
set -u
shopt -s lastpipe	# check runs at the end of a pipeline and counts the tests
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/tap.sh"
V=$HERE/validate-manifest
T=$(mktemp -d /tmp/mlplat-validate.XXXXXX)
trap 'rm -rf "$T"' EXIT

isvc() {	# isvc JSON-FRAGMENT-FOR-THE-MODEL — an InferenceService as mlplat renders one
	cat <<J
{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService",
 "metadata":{"name":"iris","namespace":"mlp-a","labels":{"app.kubernetes.io/managed-by":"mlplat"},
             "annotations":{"serving.kserve.io/deploymentMode":"Serverless"}},
 "spec":{"predictor":{"minReplicas":1,"maxReplicas":2,
   "model":{"modelFormat":{"name":"sklearn"},"storageUri":"s3://models/iris/1"$1}}}}
J
}
# check NAME EXPECTED-EXIT OUTPUT-REGEX DESCRIPTION < document
check() {
	cat >"$T/$1"
	out=$("$V" "$T/$1" 2>&1)
	rc=$?
	if [ "$rc" = "$2" ] && echo "$out" | grep -qE -- "$3"; then tap_ok 0 "$4"
	else tap_ok 1 "$4"; echo "#   exit $rc (wanted $2), output:"; echo "$out" | sed 's/^/#   | /' | head -10; fi
}

isvc '' | check ok.json 0 '^.*ok.json#0 InferenceService/iris: valid$' "a rendered InferenceService is valid"
isvc ',"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"ports":[{"containerPort":8080,"protocol":"TCP"}]' |
	check ok2.json 0 ': valid$' "resources and ports are declared fields"
isvc ',"colour":"blue"' | check unknown.json 1 '\.spec\.predictor\.model\.colour: unknown field' \
	"an undeclared field is an error, with its path (the API server would prune it)"
isvc ',"modelFormat":{"name":"sklearn","flavour":1}' | check unknown2.json 1 'modelFormat\.flavour: unknown field' \
	"an undeclared field one level deeper too"
isvc ',"runtimeVersion":1.5' | check type.json 1 'runtimeVersion: number where the schema wants string' \
	"a number where a string goes"
isvc ',"env":[{"value":"x"}]' | check required.json 1 "env\\[0\\]: required field 'name' is missing" \
	"a missing required field"
isvc ',"storageUri":null' | check null.json 1 'storageUri: null where the schema does not allow it' \
	"null in a field that is not nullable"
isvc ',"ports":[{"containerPort":99999999999}]' | check int32.json 1 'out of the int32 range' \
	"an int32 out of range"
isvc ',"resources":{"limits":{"cpu":1.5,"memory":{"x":1}}}' | check intorstr.json 1 'limits\.memory: object where an integer or a string goes' \
	"int-or-string takes a number (cpu 1.5) and refuses an object"
isvc ',"env":[{"name":"A","value":"1"},{"name":"A","value":"2"}]' | check dupmap.json 1 'env\[1\]: duplicate key \["A"\]' \
	"a duplicate key in a map list"
sed 's/"labels"/"lables"/' <(isvc '') | check meta.json 1 '\.metadata\.lables: unknown ObjectMeta field' \
	"an unknown metadata field"
sed 's/"Serverless"/true/' <(isvc '') | check annot.json 1 'metadata\.annotations: must map strings to strings' \
	"annotation values are strings"
sed 's/InferenceService/InferenceServise/' <(isvc '') | check kind.json 1 'no schema for serving\.kserve\.io/v1beta1 InferenceServise' \
	"a kind without a schema is an error, not a pass"
check wf.yaml 0 'Workflow/train: valid' "a YAML Workflow with a script template is valid" <<'Y'
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: train, namespace: mlp-a}
spec:
  entrypoint: main
  templates:
  - name: main
    script: {image: python:3.11, command: [python], source: "print(1)"}
---
Y
check wf2.yaml 1 'archive\.none\.x: unknown field' "an object the schema leaves empty ({}) takes no fields" <<'Y'
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: train}
spec:
  entrypoint: main
  arguments: {artifacts: [{name: a, archive: {none: {x: 1}}}]}
  templates: [{name: main, container: {image: busybox}}]
Y
{ isvc ''; echo '---'; isvc ',"x":1'; } | sed '1!{/^---$/!b};' >"$T/multi.yaml"
"$V" - <"$T/multi.yaml" >"$T/multi.out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -c ': valid$' "$T/multi.out" | grep -qx 1 && grep -q '^-#1 InferenceService/iris: \.spec\.predictor\.model\.x: unknown field' "$T/multi.out"
tap_ok $? "several documents on stdin: one line each, exit 1 when any is invalid"
"$V" >/dev/null 2>&1
tap_is "$?" 2 "no argument: usage, exit 2"
tap_done
