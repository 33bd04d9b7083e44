#!/usr/bin/env bash
# Optimization campaigns with the real workers running against the stand-in (issue 14,
# scenario 1): creating a campaign of three candidates touches nothing outside the
# database — after two full passes of every reconciler there is no Job request and no S3
# write at the stand-in, no GPU counted, and the campaign is AWAITING_APPROVAL.  (The
# campaigns reconciler itself is not built yet: docs/campaigns.md.)
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-campaigns
e2e_standin mlplat
DB=mlplat
P=cmp-e2e

q $DB "SELECT mlplat.create_project('$P', 4)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 60
tap_ok $? "project $P is READY"
out=$($PSQL -d $DB 2>&1 <<SQL
SET client_min_messages = warning;
SELECT status FROM mlplat.add_artifact_location('$P', 's3://artifacts/');
SELECT status FROM mlplat.register_model_version('$P', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'safetensors');
SELECT status FROM mlplat.register_evidence_signer('cmp-e2e-evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SQL
)
tap_ok $? "artifact location, base model version, evidence signer"
[ $? = 0 ] || echo "$out" | sed 's/^/# /'

gpus0=$(q $DB "SELECT gpus_in_use FROM mlplat.project_status WHERE project = '$P'")
seq0=$(admin GET requests | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
cand() { printf '{"name": "%s", "kind": "checkpoint", "builder": {"image": "registry.example/acme/llmc@sha256:%s", "tool": "llm-compressor", "tool_version": "0.5.1"}, "algorithm": "gptq", "precision": "w4a16", "config": {}, "hardware": {"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}, "spdx": "Apache-2.0", "max_seconds": 600}' "$1" "$(printf '1%.0s' $(seq 64))"; }
DEF="{\"base\": {\"model\": \"llm\", \"version\": \"1\", \"model_family\": \"llama\"}, \"output_prefix\": \"s3://artifacts/opt/\",
      \"quality_gate\": {\"metric\": \"accuracy\", \"max_drop\": 0.01, \"signers\": [\"cmp-e2e-evals\"]},
      \"candidates\": [$(cand a), $(cand b), $(cand c)]}"
got=$(q $DB "SELECT entity || ' ' || status FROM mlplat.create_campaign('$P', 'c', '$DEF', 'k1')")
tap_is "$got" "campaign AWAITING_APPROVAL" "create_campaign with three candidates"

# two full passes of every leader after the commit: whatever a worker would do, it has done
passes() { q $DB "SELECT string_agg(kind || '=' || passes, ',' ORDER BY kind) FROM mlplat.reconciler_health WHERE role = 'leader'"; }
before=$(passes)
deadline=$((SECONDS + 120))
ok=1
while ((SECONDS < deadline)); do
	if python3 - "$before" "$(passes)" <<'PY'
import sys
b = dict(x.split("=") for x in sys.argv[1].split(",") if x)
a = dict(x.split("=") for x in sys.argv[2].split(",") if x)
sys.exit(0 if b and all(int(a.get(k, 0)) >= int(v) + 2 for k, v in b.items()) else 1)
PY
	then ok=0; break; fi
	sleep 0.5
done
tap_ok $ok "every leader ran two more passes after the create ($before -> $(passes))"

reqs=$(admin GET "requests?since=$seq0" | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
jobs = [e for e in items if e.get("kind") == "Job" or "/jobs" in e.get("path", "")]
s3w = [e for e in items if e.get("area") == "s3" and e.get("method") in ("PUT", "POST", "DELETE")]
print(len(jobs), len(s3w))')
tap_is "$reqs" "0 0" "no Job request and no S3 write reached the stand-in"
tap_is "$(q $DB "SELECT gpus_in_use FROM mlplat.project_status WHERE project = '$P'")" "$gpus0" "gpus_in_use unchanged"
tap_is "$(q $DB "SELECT state || ' ' || planned || ' ' || coalesce(approved_by, '-') FROM mlplat.campaign_status WHERE project = '$P'")" \
	"AWAITING_APPROVAL 3 -" "still AWAITING_APPROVAL, three candidates PLANNED, no approval"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE project = '$P' AND at > now() - interval '10 minutes' AND kind NOT IN ('projects')")" 0 \
	"no reconciler ledger row for the project beyond its provisioning"
got=$(q $DB "SELECT status || ' ' || replayed FROM mlplat.create_campaign('$P', 'c', '$DEF', 'k1')")
tap_is "$got" "AWAITING_APPROVAL true" "the same key again is replayed"
tap_done
