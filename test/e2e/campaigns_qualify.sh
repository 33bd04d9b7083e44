#!/usr/bin/env bash
# Qualification of an optimized artifact (issue 14, scenario 11; docs/campaigns.md).
# The RFC 8032 section 7.1 test-1 key is registered as evidence signer; statements are signed
# here with openssl over mlplat.canonical_json(statement).  Only a good statement bound to the
# exact campaign, candidate, artifact digest and a revision that serves that artifact, with a
# passing score, qualifies; every other one is refused with its rule and writes nothing.  No
# model stage, deployment revision, rollout or route generation moves.  Actual evidence is
# accepted only for a revision that serves the artifact.  (The BUILT write-back is done here
# as the reconciler would do it: that reconciler is not built yet.)  Runs in a database of its
# own: no reconciler acts on it.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
DB=h14_qualify
T=$(mktemp -d "$MLPLAT_TEST_WORK/qualify.XXXXXX")
cleanup() { $PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1; rm -rf "$T"; }
on_exit cleanup
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
q $DB "CREATE EXTENSION mlplat" >/dev/null
tap_ok $? "a database of its own with mlplat"

# the RFC 8032 test-1 secret key as PKCS#8 (the fixed prefix of an Ed25519 private key)
printf '302e020100300506032b657004220420%s' 9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60 |
	xxd -r -p >"$T/key.der"
pub=$(openssl pkey -inform DER -in "$T/key.der" -pubout -outform DER | tail -c 32 | xxd -p -c 64)
tap_is "$pub" d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a "openssl derives the RFC 8032 test-1 public key"

out=$($PSQL -d $DB 2>&1 <<SQL
SET client_min_messages = warning;
SELECT status FROM mlplat.register_evidence_signer('evals', decode('$pub', 'hex'));
SELECT status FROM mlplat.register_evidence_signer('other', decode('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'));
SELECT status FROM mlplat.create_project('q', 8);
SELECT status FROM mlplat.add_artifact_location('q', 's3://bkt/');
SELECT status FROM mlplat.register_model_version('q', 'llm', '1', 's3://bkt/llm/1', repeat('a', 64), 'vllm', 'safetensors');
SELECT status FROM mlplat.create_campaign('q', 'c', '{"base": {"model": "llm", "version": "1", "model_family": "llama"},
  "output_prefix": "s3://bkt/opt/", "quality_gate": {"metric": "accuracy", "max_drop": 0.01, "signers": ["evals"]},
  "candidates": [
    {"name": "w4a16", "kind": "checkpoint", "builder": {"image": "r.example/llmc@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llm-compressor", "tool_version": "0.5.1"},
     "algorithm": "gptq", "precision": "w4a16", "config": {"group_size": 128}, "hardware": {"accelerator": "h100", "arch": "sm_90", "gpus": 1},
     "spdx": "Apache-2.0", "max_seconds": 600},
    {"name": "fp8", "kind": "checkpoint", "builder": {"image": "r.example/llmc@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llm-compressor", "tool_version": "0.5.1"},
     "algorithm": "fp8-dynamic", "precision": "fp8", "config": {}, "hardware": {"accelerator": "h100", "arch": "sm_90", "gpus": 1},
     "spdx": "Apache-2.0", "max_seconds": 600}]}');
SELECT status FROM mlplat.approve_campaign('q', 'c', 1200, '1 hour');
-- the reconciler's BUILT write-back for candidate 1, as it would write it
UPDATE mlplat.campaign_candidates SET status = 'BUILDING', job_name = 'opt-c-1' WHERE ordinal = 1;
UPDATE mlplat.campaign_candidates SET status = 'BUILT', actual_gpu_seconds = 300, evidence_version = evidence_version + 1 WHERE ordinal = 1;
INSERT INTO mlplat.optimized_artifacts (project_id, campaign_id, candidate_id, kind, base_model_version_id, base_artifact_sha256,
  tool, tool_version, builder_image, builder_image_digest, algorithm, precision, config, config_content_id, hardware, spdx,
  output_uri, output_sha256, output_bytes, attestation, attestation_sha256, verified_by, content_id)
SELECT k.project_id, k.campaign_id, k.id, 'checkpoint', c.base_model_version_id, c.base_artifact_sha256, 'llm-compressor', '0.5.1',
       k.plan #>> '{builder,image}', 'sha256:' || repeat('1', 64), 'gptq', 'w4a16', k.plan->'config', mlplat.content_id(k.plan->'config'),
       k.plan->'hardware', 'Apache-2.0', 's3://bkt/opt/q/c/1/artifact', repeat('e', 64), 123, '{}', repeat('f', 64),
       'x-amz-checksum-sha256', repeat('d', 64)
  FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id WHERE k.ordinal = 1;
-- the artifact served by a revision (registered as a model version, deployed); the base by another
SELECT status FROM mlplat.register_model_version('q', 'llm', '2', 's3://bkt/opt/q/c/1/artifact', repeat('e', 64), 'vllm', 'safetensors');
SELECT status FROM mlplat.set_model_stage('q', 'llm', '2', 'CANDIDATE');
SELECT status FROM mlplat.set_model_stage('q', 'llm', '1', 'CHAMPION');
SELECT status FROM mlplat.deploy('q', 'opt', 'llm', '2', 'vllm');
SELECT status FROM mlplat.deploy('q', 'base', 'llm', '1', 'vllm');
SQL
)
tap_ok $? "campaign, a BUILT candidate with its artifact, a revision serving it and one serving the base"
[ $? = 0 ] || echo "$out" | sed 's/^/# /'

aid=$(q $DB "SELECT id FROM mlplat.optimized_artifacts")
ccid=$(q $DB "SELECT content_id FROM mlplat.campaigns")
dig_opt=$(q $DB "SELECT r.spec_digest FROM mlplat.deployment_revisions r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'opt'")
dig_base=$(q $DB "SELECT r.spec_digest FROM mlplat.deployment_revisions r JOIN mlplat.deployments d ON d.id = r.deployment_id WHERE d.name = 'base'")
# what a qualification must never move: stages, deployment revisions, rollouts, routes, aliases
serving_state() {
	q $DB "SELECT string_agg(x, ';' ORDER BY x) FROM (
	  SELECT 'v' || version || '=' || stage AS x FROM mlplat.model_versions
	  UNION ALL SELECT 'd' || name || '=' || desired_revision || '/' || latest_revision FROM mlplat.deployments
	  UNION ALL SELECT 'rollouts=' || count(*) FROM mlplat.rollouts
	  UNION ALL SELECT 'routes=' || count(*) FROM mlplat.route_generations
	  UNION ALL SELECT 'aliases=' || string_agg(alias || ':' || coalesce(version_id::text, '-') || ':' || generation, ',' ORDER BY alias) FROM mlplat.model_aliases) s"
}
before=$(serving_state)

# statement JSON with one field replaced: stmt KEY=JSONVALUE...
stmt() {
	local s
	s=$(printf '{"type": "mlplat.io/quality-evidence/v1", "project": "q", "campaign": "c", "campaign_content_id": "%s", "candidate": "w4a16", "artifact_sha256": "%s", "revision": {"deployment": "opt", "revision": 1, "spec_digest": "%s"}, "metric": "accuracy", "baseline_score": 0.812, "candidate_score": 0.809, "dataset_sha256": "%s", "evaluated_at": 1764410400}' \
		"$ccid" "$(printf 'e%.0s' $(seq 64))" "$dig_opt" "$(printf 'c%.0s' $(seq 64))")
	local kv
	for kv in "$@"; do
		s=$(q $DB "SELECT jsonb_set('$s'::jsonb, '{${kv%%=*}}', '${kv#*=}'::jsonb)")
	done
	echo "$s"
}
# evidence STATEMENT [SIGNER] — the signed evidence document
evidence() {
	local canon sig
	canon=$(q $DB "SELECT mlplat.canonical_json('$1'::jsonb)")
	printf '%s' "$canon" >"$T/msg"
	sig=$(openssl pkeyutl -sign -inkey "$T/key.der" -keyform DER -rawin -in "$T/msg" | base64 -w0)
	printf '{"statement": %s, "signer": "%s", "signature": "%s"}' "$1" "${2:-evals}" "$sig"
}
# refused EVIDENCE SQLSTATE-AND-RULE-REGEX DESCRIPTION — refused as expected, nothing written
refused() {
	local err n
	err=$($PSQL -d $DB -v VERBOSITY=verbose -c "SELECT status FROM mlplat.qualify_artifact('q', $aid, '$1'::jsonb)" 2>&1 >/dev/null)
	n=$(q $DB "SELECT count(*) FROM mlplat.artifact_qualifications")
	if echo "$err" | tr "\n" " " | grep -Eq "$2" && [ "$n" = 0 ]; then tap_ok 0 "$3"; else
		tap_ok 1 "$3"
		echo "$err" | sed 's/^/#   /'
		echo "#   qualifications: $n"
	fi
}

good=$(evidence "$(stmt)")
refused "$(evidence "$(stmt candidate='"fp8"')")" 'ERROR:  55000: .*DETAIL:  Rule BINDING_MISMATCH: statement.candidate' \
	"another candidate: BINDING_MISMATCH, nothing written"
refused "$(evidence "$(stmt artifact_sha256="\"$(printf 'b%.0s' $(seq 64))\"")")" 'Rule BINDING_MISMATCH: statement.artifact_sha256' \
	"another artifact digest: BINDING_MISMATCH"
refused "$(evidence "$(stmt campaign_content_id="\"$(printf '0%.0s' $(seq 64))\"")")" 'Rule BINDING_MISMATCH: statement.campaign_content_id' \
	"another campaign content id: BINDING_MISMATCH"
refused "$(evidence "$(stmt revision="{\"deployment\": \"base\", \"revision\": 1, \"spec_digest\": \"$dig_base\"}")")" \
	'55000: evidence does not match: revision.*Rule BINDING_MISMATCH: revision 1 of "base" serves' \
	"a revision that serves the base model, not the artifact: BINDING_MISMATCH"
refused "$(evidence "$(stmt revision="{\"deployment\": \"opt\", \"revision\": 1, \"spec_digest\": \"$dig_base\"}")")" \
	'Rule BINDING_MISMATCH: revision 1 of "opt" has spec_digest' "another spec_digest: BINDING_MISMATCH"
refused "$(evidence "$(stmt revision="{\"deployment\": \"opt\", \"revision\": 7, \"spec_digest\": \"$dig_opt\"}")")" \
	'ERROR:  42704: revision 7 of deployment "opt" does not exist' "a revision that does not exist: 42704"
refused "$(evidence "$(stmt metric='"bleu"')")" 'Rule BINDING_MISMATCH: statement.metric' "another metric than the gate's: BINDING_MISMATCH"
refused "$(evidence "$(stmt candidate_score=0.79)")" \
	'55000: quality evidence does not pass: candidate_score 0.79 < baseline_score 0.812 − max_drop 0.01.*Rule NOT_PASSING' \
	"a score below baseline - max_drop: NOT_PASSING"
refused "$(echo "$good" | sed 's/"signer": "evals"/"signer": "nobody"/')" 'Rule SIGNER_UNKNOWN: signer "nobody" is not registered' \
	"an unknown signer: SIGNER_UNKNOWN"
refused "$(echo "$good" | sed 's/"signer": "evals"/"signer": "other"/')" 'Rule SIGNER_UNKNOWN: signer "other" is not in the quality gate' \
	"a registered signer outside the campaign's gate: SIGNER_UNKNOWN"
refused "$(evidence "$(stmt candidate_score=0.9)" | sed 's/"candidate_score": 0.9/"candidate_score": 0.95/')" \
	'Rule SIGNATURE_INVALID' "a statement changed after signing: SIGNATURE_INVALID"
bad_sig=$(echo "$good" | python3 -c 'import sys, json, base64; d = json.load(sys.stdin); s = bytearray(base64.b64decode(d["signature"])); s[0] ^= 1; d["signature"] = base64.b64encode(bytes(s)).decode(); print(json.dumps(d))')
refused "$bad_sig" 'Rule SIGNATURE_INVALID' "one bit of the signature flipped: SIGNATURE_INVALID"
refused "$(echo "$good" | sed 's/"signer"/"signer_x"/')" 'ERROR:  22023: invalid evidence: unknown key "signer_x"' "an unknown key: 22023 with the path"

got=$(q $DB "SELECT entity || ' ' || status || ' ' || replayed FROM mlplat.qualify_artifact('q', $aid, '$good'::jsonb, 'qk')")
tap_is "$got" "artifact_qualification QUALIFIED false" "the good statement qualifies the artifact"
got=$(q $DB "SELECT status || ' ' || replayed FROM mlplat.qualify_artifact('q', $aid, '$good'::jsonb, 'qk')")
tap_is "$got" "QUALIFIED true" "the same call again with its key is replayed"
other=$(evidence "$(stmt candidate_score=0.81)")
err=$($PSQL -d $DB -v VERBOSITY=verbose -c "SELECT status FROM mlplat.qualify_artifact('q', $aid, '$other'::jsonb)" 2>&1 >/dev/null)
echo "$err" | grep -q "ERROR:  42710: optimized artifact $aid is already qualified by other evidence"
tap_ok $? "other evidence for a qualified artifact: 42710"
tap_is "$(q $DB "SELECT qualified, qualified_revision, signer, candidate_score FROM mlplat.optimized_artifact_status")" \
	"t|1|evals|0.809" "optimized_artifact_status: qualified by evals at revision 1"
tap_is "$(q $DB "SELECT candidate, qualified FROM mlplat.campaign_candidate_status WHERE ordinal = 1")" "w4a16|t" \
	"campaign_candidate_status: qualified"
after=$(serving_state)
tap_same "$before" "$after" "no stage, alias, deployment revision, rollout or route generation moved"

# actual evidence: only on a revision that serves the artifact
ev=$(printf '{"metric": "tokens_per_s", "value": 910, "workload_sha256": "%s", "revision": {"deployment": "%%s", "revision": 1}, "measured_at": 1764410400}' "$(printf 'c%.0s' $(seq 64))")
got=$(q $DB "SELECT status FROM mlplat.record_candidate_evidence('q', 'c', 'w4a16', 'actual', '$(printf "$ev" opt)'::jsonb, 1)")
tap_is "$got" ACTUAL "a measurement on the revision serving the artifact is recorded"
err=$($PSQL -d $DB -v VERBOSITY=verbose -c "SELECT status FROM mlplat.record_candidate_evidence('q', 'c', 'w4a16', 'actual', '$(printf "$ev" base)'::jsonb, 2)" 2>&1 >/dev/null)
echo "$err" | grep -q 'Rule BINDING_MISMATCH: revision 1 of "base" serves'
tap_ok $? "a measurement on a revision serving the base model: BINDING_MISMATCH"
tap_is "$(q $DB "SELECT actual->'tokens_per_s'->>'value', predicted FROM mlplat.campaign_candidate_status WHERE ordinal = 1")" "910|{}" \
	"the measurement shows under actual, never under predicted"
tap_done
