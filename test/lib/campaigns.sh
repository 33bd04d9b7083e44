# test/lib/campaigns.sh — what the campaigns e2e scripts share (issue 14).  Source it after
# test/lib/e2e.sh with DB and P (the script's project) set; NS and seq0 are set here.
#
#   cmp_project SIGNER   # project $P READY, an artifact location, model llm/1, SIGNER as signer
#   cand NAME            # one candidate plan (1 x H100, 600 s)
#   cmp_def N [EXTRA]    # a definition of the first N of candidates a, b, c (EXTRA: python dict
#                        # merged into it, e.g. '{"max_parallel": 2}')
#   attestation CAMPAIGN ORDINAL OUTPUT_SHA256 BYTES [OVERRIDE as SQL jsonb]
#   plan JOB STEP-JSON, s3obj CAMPAIGN ORDINAL FILE CONTENT [EXTRA], cstat CAMPAIGN,
#   jobs_posted NAME-PREFIX, sha TEXT

cmp_project() {
	q $DB "SELECT mlplat.create_project('$P', 4)" >/dev/null
	wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 60
	tap_ok $? "project $P is READY"
	local out
	out=$($PSQL -d $DB 2>&1 <<SQL
SET client_min_messages = warning;
SELECT status FROM mlplat.add_artifact_location('$P', 's3://artifacts/');
SELECT status FROM mlplat.register_model_version('$P', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'safetensors');
SELECT status FROM mlplat.register_evidence_signer('$1', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SQL
)
	tap_ok $? "artifact location, base model version, evidence signer"
	[ $? = 0 ] || echo "$out" | sed 's/^/# /'
	NS=$(q $DB "SELECT mlplat._project_namespace('$P')")
	CMP_SIGNER=$1
}

cand() { printf '{"name": "%s", "kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc@sha256:%s", "tool": "llm-compressor", "tool_version": "0.5.1"}, "algorithm": "gptq", "precision": "w4a16", "config": {}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 600}' "$1" "$(printf '1%.0s' $(seq 64))"; }

cmp_def() {
	python3 -c '
import json, sys
n, extra, signer, cands = int(sys.argv[1]), json.loads(sys.argv[2] or "{}"), sys.argv[3], [json.loads(c) for c in sys.argv[4:]]
d = {"base": {"model": "llm", "version": "1", "model_family": "llama"}, "output_prefix": "s3://artifacts/opt/",
     "quality_gate": {"metric": "accuracy", "max_drop": 0.01, "signers": [signer]}, "candidates": cands[:n]}
d.update(extra)
print(json.dumps(d))' "$1" "${2:-}" "$CMP_SIGNER" "$(cand a)" "$(cand b)" "$(cand c)"
}

# attestation CAMPAIGN ORDINAL OUTPUT_SHA256 BYTES [OVERRIDE as SQL jsonb] — what an honest
# builder writes: the plan's fields (as the render hands them to it) and its output's digest;
# OVERRIDE replaces top-level fields (a dishonest or confused builder)
attestation() {
	q $DB "SELECT (jsonb_build_object('type', 'mlplat.io/build-attestation/v1', 'campaign_content_id', c.content_id,
	          'candidate', k.name, 'candidate_content_id', k.content_id,
	          'builder_image_digest', 'sha256:' || split_part(k.plan #>> '{builder,image}', '@sha256:', 2),
	          'tool', k.plan #>> '{builder,tool}', 'tool_version', k.plan #>> '{builder,tool_version}',
	          'algorithm', k.plan->>'algorithm', 'precision', k.plan->>'precision',
	          'config_content_id', mlplat.content_id(k.plan->'config'), 'base_artifact_sha256', c.base_artifact_sha256,
	          'hardware', jsonb_build_object('accelerator', k.plan #>> '{hardware,accelerator}', 'arch', k.plan #>> '{hardware,arch}'),
	          'output_uri', c.output_prefix || '$P/' || c.name || '/' || k.ordinal || '/artifact',
	          'output_sha256', '$3', 'output_bytes', $4, 'spdx', k.plan->>'spdx', 'sbom_sha256', NULL,
	          'started_at', 1764410400, 'finished_at', 1764410460) || '${5:-{\}}'::jsonb)::text
	    FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
	    JOIN mlplat.projects p ON p.id = c.project_id
	   WHERE p.name = '$P' AND c.name = '$1' AND k.ordinal = $2"
}
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
# plan JOB STEP-JSON — the stand-in's plan for one builder Job
plan() { admin POST argo/plan "{\"kind\": \"job\", \"namespace\": \"$NS\", \"name\": \"$1\", \"steps\": {\"*\": $2}}" >/dev/null; }
# s3obj CAMPAIGN ORDINAL FILE CONTENT [EXTRA] — one object of a plan's s3 list
s3obj() { python3 -c 'import json,sys; d={"bucket":"artifacts","key":"opt/%s/%s/%s/%s"%tuple(sys.argv[1:5]),"content":sys.argv[5]}; d.update(json.loads(sys.argv[6] or "{}")); print(json.dumps(d))' "$P" "$1" "$2" "$3" "$4" "${5:-}"; }
# cstat CAMPAIGN — every candidate's status[:reason_code], in ordinal order
cstat() { q $DB "SELECT string_agg(k.status || coalesce(':' || k.reason_code, ''), ' ' ORDER BY k.ordinal)
                   FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
                   JOIN mlplat.projects p ON p.id = c.project_id WHERE p.name = '$P' AND c.name = '$1'"; }
# jobs_posted NAME-PREFIX — creates of builder Jobs whose name starts so, since the script began
jobs_posted() { admin GET "requests?since=$seq0" | python3 -c '
import json, sys
print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("method") == "POST" and "/jobs" in e.get("path", "")
          and (e.get("name") or "").startswith(sys.argv[1])))' "$1"; }
seq0=$(admin GET requests | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
