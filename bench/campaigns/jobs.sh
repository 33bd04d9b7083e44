#!/usr/bin/env bash
# bench/campaigns/jobs.sh — the Job side of optimization campaigns (issue 14): N campaigns of
# 4 candidates (max_parallel 4), approved in one commit, built by the real campaigns reconciler
# against the stand-in.  Reports the builder Job creates per candidate (target: creates =
# candidates, at most 1.05 create requests per create) and the latency from the approvals'
# commit to each Job's create at the stand-in (median, p95, max).
#
#   bench/campaigns/jobs.sh [--campaigns N] [--row]
# --row prints only the table row bench/campaigns/run.sh puts in its table.
#
# Builds and stages mlplat, starts a private cluster and a stand-in, and stops both.
set -uo pipefail
N=100 ROW=0
while [ $# -gt 0 ]; do
	case $1 in
		--campaigns) N=$2; shift 2 ;;
		--row) ROW=1; shift ;;
		-h|--help) sed -n '2,11p' "$0"; exit 0 ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
stack_init campaign-jobs
stack_start "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '2s'" "max_connections = 60"
q() { $PSQL -d mlplat -c "$1"; }
stack_db mlplat pg_cron mlplat
stack_standin
standin_connect mlplat
K=$((N * 4))
q "SELECT mlplat.create_project('bench', $K)" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'bench'" READY 120 >/dev/null \
	|| { echo "project bench never became READY" >&2; exit 1; }
NS=$(q "SELECT mlplat._project_namespace('bench')")
# every builder Job runs until the end of the benchmark
admin POST argo/plan "{\"kind\": \"job\", \"namespace\": \"$NS\", \"name\": \"*\", \"steps\": {\"*\": {\"ticks\": 100000}}}" >/dev/null
$PSQL -d mlplat >/dev/null <<SQL || exit 1
SET client_min_messages = warning;
SELECT mlplat.add_artifact_location('bench', 's3://artifacts/');
SELECT mlplat.register_model_version('bench', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'safetensors');
SELECT mlplat.register_evidence_signer('bench-evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
SELECT mlplat.create_campaign('bench', 'c' || g, jsonb_build_object(
         'base', '{"model": "llm", "version": "1", "model_family": "llama"}'::jsonb, 'output_prefix', 's3://artifacts/opt/',
         'max_parallel', 4, 'quality_gate', '{"metric": "accuracy", "max_drop": 0.01, "signers": ["bench-evals"]}'::jsonb,
         'candidates', (SELECT jsonb_agg(jsonb_build_object('name', 'k' || i, 'kind', 'checkpoint',
             'builder', jsonb_build_object('image', 'registry.example/acme/llmc@sha256:' || repeat('1', 64), 'tool', 'llmc',
                                           'tool_version', '0.5.1'),
             'algorithm', 'gptq', 'precision', 'w4a16', 'config', '{}'::jsonb,
             'hardware', '{"accelerator": "nvidia-h100", "arch": "sm_90", "gpus": 1}'::jsonb, 'spdx', 'Apache-2.0',
             'max_seconds', 600)) FROM generate_series(1, 4) i)))
  FROM generate_series(1, $N) g;
SQL
seq0=$(admin GET requests | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
t_commit=$(q "SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT count(mlplat.approve_campaign('bench', 'c' || g, 1000000, '1 day'))
                                                                     FROM generate_series(1, $N) g) x")
# the statement's clock_timestamp() is read before its commit: the commit is later, never earlier
creates() { admin GET writes | python3 -c '
import json, sys
w = json.load(sys.stdin)
print(sum(v.get("create", 0) for k, v in w.items() if k.startswith("Job/" + sys.argv[1] + "/opt-")))' "$NS"; }
deadline=$((SECONDS + 600))
while (($(creates) < K && SECONDS < deadline)); do sleep 0.2; done
# two more passes of the campaigns leader: anything a steady pass would add, it has added
p0=$(q "SELECT passes FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'")
wait_for mlplat "SELECT passes >= $p0 + 2 FROM mlplat.reconciler_health WHERE kind = 'campaigns' AND role = 'leader'" t 60 >/dev/null
row=$(admin GET "requests?since=$seq0&method=POST" | python3 -c '
import json, statistics, sys
from datetime import datetime
ns, k, t_commit, created = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
posts = [e for e in json.load(sys.stdin)["items"] if e.get("path", "").split("?")[0].endswith("/namespaces/" + ns + "/jobs")]
first = {}
for e in posts:
    if e.get("status") == 201:
        first.setdefault(e.get("name"), datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp())
lat = sorted((t - t_commit) * 1000 for t in first.values())
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
med = statistics.median(lat) if lat else float("nan")
print(f"| Job creates per candidate ({k // 4} x 4), the campaigns reconciler against the stand-in | {created} Jobs created for {k} candidates, "
      f"{len(posts)} create requests ({len(posts) / max(created, 1):.2f} per create); approvals commit -> Job create: "
      f"median {med:.0f} ms, p95 {p(0.95):.0f} ms, max {p(1.0):.0f} ms | — | — | creates = candidates, ≤ 1.05 requests per create |")
' "$NS" "$K" "$t_commit" "$(creates)")
if ((ROW)); then
	echo "$row"
else
	echo "| measure | mlplat | baseline | ratio | target |"
	echo "|---|---|---|---|---|"
	echo "$row"
	echo
	echo "Load average during the run: $(cut -d' ' -f1-3 /proc/loadavg)."
fi
