#!/usr/bin/env bash
# bench/campaigns/run.sh — the SQL side of optimization campaigns (issue 14), each figure
# beside its baseline measured in the same run (absolute times are noise on these machines):
#   1. _campaign_state over 64 candidates vs a plain aggregate over the same 64 rows (≤ 2x);
#   2. campaign_status over 1,000 campaigns x 16 candidates vs a plain join of the same rows (≤ 3x);
#   3. create_campaign with 64 candidates vs plain INSERTs of the same rows (≥ 0.5x the TPS):
#      into bare tables (the original baseline), and into copies of the same tables with their
#      indexes, checks and foreign keys, transitions and audit event included (like for like);
#   4. 10,000 finished campaigns: a steady claim writes nothing, and EXPLAIN of its reads;
#   5. 100 campaigns x 4 candidates built by the real reconciler against the stand-in: Job
#      creates per candidate and requests per create (bench/campaigns/jobs.sh, its own cluster).
#
#   bench/campaigns/run.sh [--seconds S] [--rounds R]
# Each pair is measured in R rounds (default 5) of S seconds each (default 2), mlplat and
# its baseline one after the other in every round; the table gives medians, and the ratio is
# the median of the per-round ratios, so a load spike moves one round, not the figure.
#
# Builds and stages mlplat, starts a private cluster, prints a Markdown table, stops it.
set -uo pipefail
SECS=2 ROUNDS=5
while [ $# -gt 0 ]; do
	case $1 in
		--seconds) SECS=$2; shift 2 ;;
		--rounds) ROUNDS=$2; shift 2 ;;
		-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
		*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/test/lib/stack.sh"
stack_init campaigns
# no worker: the figures are the SQL's own
stack_start "shared_preload_libraries = 'mlplat'" "mlplat.database = 'none'"
DB=bench
q() { $PSQL -d $DB -c "$1"; }
stack_db $DB mlplat

# tps FILE — pgbench TPS of FILE for SECS seconds, one client
tps() { "$BIN/pgbench" -n -c 1 -T "$SECS" -f "$1" $DB 2>&1 | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1; }

$PSQL -d $DB >/dev/null <<'SQL'
SET client_min_messages = warning;
SELECT mlplat.create_project('bench', 1000);
SELECT mlplat.add_artifact_location('bench', 's3://bkt/');
SELECT mlplat.register_model_version('bench', 'm', '1', 's3://bkt/m1', repeat('a', 64), 'vllm', 'safetensors');
SELECT mlplat.register_evidence_signer('evals', decode('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex'));
CREATE FUNCTION public.bench_def(n int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('base', '{"model": "m", "version": "1", "model_family": "llama"}'::jsonb,
    'output_prefix', 's3://bkt/opt/',
    'quality_gate', '{"metric": "accuracy", "max_drop": 0.01, "signers": ["evals"]}'::jsonb,
    'candidates', (SELECT jsonb_agg(jsonb_build_object('name', 'c' || i, 'kind', 'checkpoint',
        'builder', '{"image": "r.example/b@sha256:1111111111111111111111111111111111111111111111111111111111111111", "tool": "llmc", "tool_version": "0.5.1"}'::jsonb,
        'algorithm', 'gptq', 'precision', 'w4a16', 'config', jsonb_build_object('group_size', i),
        'hardware', '{"accelerator": "h100", "arch": "sm_90", "gpus": 1}'::jsonb, 'spdx', 'Apache-2.0', 'max_seconds', 600))
      FROM generate_series(1, n) i)) $$;
-- one campaign of 64 candidates, some of each status (the reconciler's edges)
SELECT mlplat.create_campaign('bench', 'c64', public.bench_def(64));
SELECT mlplat.approve_campaign('bench', 'c64', 100000000, '30 days');
UPDATE mlplat.campaign_candidates SET status = 'BUILDING' WHERE ordinal <= 40;
UPDATE mlplat.campaign_candidates SET status = 'BUILT', actual_gpu_seconds = 100 WHERE ordinal <= 30;
UPDATE mlplat.campaign_candidates SET status = 'FAILED', actual_gpu_seconds = 50 WHERE ordinal BETWEEN 31 AND 35;
-- 1,000 campaigns x 16 candidates (copies, inserted directly: the view is measured, not create)
INSERT INTO mlplat.campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                              model_family, quality_gate, output_prefix, max_parallel, created_by, db_role)
SELECT c.project_id, 'v' || g, c.definition, c.content_id, c.base_model_version_id, c.base_artifact_sha256,
       c.model_family, c.quality_gate, c.output_prefix, c.max_parallel, c.created_by, c.db_role
  FROM mlplat.campaigns c, generate_series(1, 1000) g WHERE c.name = 'c64';
-- synthetic finished rows: inserted as they are, past the state machine's triggers
SET session_replication_role = replica;
INSERT INTO mlplat.campaign_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus, reserved_gpu_seconds, status,
                                        actual_gpu_seconds)
SELECT v.id, v.project_id, k.ordinal, k.name, k.plan, k.content_id, k.gpus, k.reserved_gpu_seconds,
       CASE WHEN k.ordinal % 4 = 0 THEN 'BUILT' WHEN k.ordinal % 4 = 1 THEN 'FAILED' ELSE 'NOT_RUN' END, 10
  FROM mlplat.campaigns v JOIN mlplat.campaigns c ON c.name = 'c64'
  JOIN mlplat.campaign_candidates k ON k.campaign_id = c.id AND k.ordinal <= 16
 WHERE v.name LIKE 'v%';
RESET session_replication_role;
-- the baseline of create_campaign: plain tables, the same rows, no triggers, no checks
CREATE TABLE public.plain_campaigns (LIKE mlplat.campaigns INCLUDING DEFAULTS INCLUDING IDENTITY);
CREATE TABLE public.plain_candidates (LIKE mlplat.campaign_candidates INCLUDING DEFAULTS INCLUDING IDENTITY);
ALTER TABLE public.plain_campaigns ADD UNIQUE (project_id, name);
ALTER TABLE public.plain_candidates ADD UNIQUE (campaign_id, ordinal), ADD UNIQUE (campaign_id, name);
-- the second, like-for-like baseline: the same rows create_campaign writes (the campaign, its
-- candidates, their first transitions, the audit event) into copies of the same tables with
-- all their indexes, checks and foreign keys (LIKE copies everything but the keys: added here
-- as the schema has them); what it leaves out is the API's work (authorization, validation,
-- expansion, content ids, the idempotency record, the span)
CREATE TABLE public.full_campaigns (LIKE mlplat.campaigns INCLUDING ALL);
CREATE TABLE public.full_candidates (LIKE mlplat.campaign_candidates INCLUDING ALL);
CREATE TABLE public.full_transitions (LIKE mlplat.candidate_transitions INCLUDING ALL);
CREATE TABLE public.full_audit (LIKE mlplat.audit_events INCLUDING ALL);
DO $$
DECLARE
  t text;
  k text;
BEGIN
  FOR t, k IN SELECT c.relname, pg_catalog.pg_get_constraintdef(x.oid)
                FROM pg_catalog.pg_constraint x JOIN pg_catalog.pg_class c ON c.oid = x.conrelid
               WHERE x.contype = 'f' AND c.relnamespace = 'mlplat'::regnamespace
                 AND c.relname IN ('campaigns', 'campaign_candidates', 'candidate_transitions', 'audit_events') LOOP
    k := replace(replace(k, 'REFERENCES mlplat.campaigns(', 'REFERENCES public.full_campaigns('),
                 'REFERENCES mlplat.campaign_candidates(', 'REFERENCES public.full_candidates(');
    EXECUTE format('ALTER TABLE public.%I ADD %s',
                   CASE t WHEN 'campaigns' THEN 'full_campaigns' WHEN 'campaign_candidates' THEN 'full_candidates'
                          WHEN 'candidate_transitions' THEN 'full_transitions' ELSE 'full_audit' END, k);
  END LOOP;
END $$;
CREATE SEQUENCE public.bench_seq;
CREATE TABLE public.bench_64 AS SELECT public.bench_def(64) AS d;
ANALYZE;
SQL
cid=$(q "SELECT id FROM mlplat.campaigns WHERE name = 'c64'")

cat >"$WORK/state.sql" <<SQL
SELECT mlplat._campaign_state($cid);
SQL
cat >"$WORK/agg.sql" <<SQL
SELECT bool_or(status IN ('BUILDING', 'CANCEL_REQUESTED')), bool_or(status = 'PLANNED'), bool_and(status = 'BUILT'),
       bool_or(status = 'BUILT') FROM mlplat.campaign_candidates WHERE campaign_id = $cid;
SQL
cat >"$WORK/view.sql" <<'SQL'
SELECT count(*), sum(built) FROM mlplat.campaign_status;
SQL
cat >"$WORK/join.sql" <<'SQL'
SELECT count(*), sum(b) FROM (SELECT c.id, count(*) FILTER (WHERE k.status = 'BUILT') AS b
  FROM mlplat.campaigns c JOIN mlplat.campaign_candidates k ON k.campaign_id = c.id GROUP BY c.id) s;
SQL
cat >"$WORK/create.sql" <<'SQL'
SELECT mlplat.create_campaign('bench', 'n' || nextval('public.bench_seq'), (SELECT d FROM public.bench_64));
SQL
cat >"$WORK/insert.sql" <<'SQL'
WITH c AS (
  INSERT INTO public.plain_campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                                      model_family, quality_gate, output_prefix, max_parallel, created_by, db_role)
  SELECT 1, 'n' || nextval('public.bench_seq'), d, md5(d::text), 1, repeat('a', 64), 'llama', d->'quality_gate',
         d->>'output_prefix', 1, current_user, current_user FROM public.bench_64
  RETURNING id, definition)
INSERT INTO public.plain_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus, reserved_gpu_seconds)
SELECT c.id, 1, e.o, e.v->>'name', e.v - 'name', md5(e.v::text), 1, 600
  FROM c, jsonb_array_elements(c.definition->'candidates') WITH ORDINALITY AS e(v, o);
SQL
cat >"$WORK/insert_full.sql" <<'SQL'
WITH c AS (
  INSERT INTO public.full_campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                                     model_family, quality_gate, output_prefix, max_parallel, created_by, db_role)
  SELECT 1, 'n' || nextval('public.bench_seq'), d, md5(d::text), 1, repeat('a', 64), 'llama', d->'quality_gate',
         d->>'output_prefix', 1, current_user, current_user FROM public.bench_64
  RETURNING id, project_id, definition
), k AS (
  INSERT INTO public.full_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus, reserved_gpu_seconds)
  SELECT c.id, c.project_id, e.o, e.v->>'name', e.v - 'name', md5(e.v::text), 1, 600
    FROM c, jsonb_array_elements(c.definition->'candidates') WITH ORDINALITY AS e(v, o)
  RETURNING id, project_id
), t AS (
  INSERT INTO public.full_transitions (candidate_id, project_id, seq, to_status, actor)
  SELECT k.id, k.project_id, 1, 'PLANNED', current_user FROM k
)
INSERT INTO public.full_audit (actor, db_role, action, project, project_id, entity, entity_id, detail)
SELECT current_user, current_user, 'create_campaign', 'bench', c.project_id, 'campaign', c.id, '{"candidates": 64}' FROM c;
SQL
# its tables start empty, mlplat's do not: a first session plans its key checks on empty
# tables (sequential scans that grow with every create); 50 creates' rows and statistics first
"$BIN/pgbench" -n -c 1 -t 50 -f "$WORK/insert_full.sql" $DB >/dev/null 2>&1
q "ANALYZE public.full_campaigns, public.full_candidates, public.full_transitions, public.full_audit" >/dev/null

# pair A B — "median-TPS-of-A median-TPS-of-B median-of(B/A)" over ROUNDS interleaved rounds
pair() {
	local r a b out=""
	for ((r = 0; r < ROUNDS; r++)); do
		a=$(tps "$1"); b=$(tps "$2")
		out="$out $a:$b"
	done
	python3 -c '
import statistics, sys
ps = [tuple(float(x or 0) for x in p.split(":")) for p in sys.argv[1:]]
a = statistics.median(p[0] for p in ps); b = statistics.median(p[1] for p in ps)
r = statistics.median(p[1] / p[0] for p in ps if p[0] > 0)
print(f"{a:.0f} {b:.0f} {r:.2f}")' $out
}
read -r t_state t_agg r_state <<<"$(pair "$WORK/state.sql" "$WORK/agg.sql")"
read -r t_view t_join r_view <<<"$(pair "$WORK/view.sql" "$WORK/join.sql")"
read -r t_create t_insert r_insert <<<"$(pair "$WORK/create.sql" "$WORK/insert.sql")"
r_create=$(python3 -c "import sys; print(f'{1 / float(sys.argv[1]):.2f}' if float(sys.argv[1]) else 'n/a')" "$r_insert")
read -r t_create2 t_full r_full <<<"$(pair "$WORK/create.sql" "$WORK/insert_full.sql")"
r_create_full=$(python3 -c "import sys; print(f'{1 / float(sys.argv[1]):.2f}' if float(sys.argv[1]) else 'n/a')" "$r_full")

# 4. 10,000 finished campaigns (4 candidates each, cleaned up): a steady claim writes nothing
$PSQL -d $DB >/dev/null <<'SQL'
INSERT INTO mlplat.campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                              model_family, quality_gate, output_prefix, max_parallel, created_by, db_role)
SELECT c.project_id, 'f' || g, c.definition, c.content_id, c.base_model_version_id, c.base_artifact_sha256,
       c.model_family, c.quality_gate, c.output_prefix, c.max_parallel, c.created_by, c.db_role
  FROM mlplat.campaigns c, generate_series(1, 10000) g WHERE c.name = 'c64';
INSERT INTO mlplat.campaign_approvals (campaign_id, project_id, approved_by, db_role, max_spend_gpu_seconds, valid_for, expires_at, request_hash)
SELECT v.id, v.project_id, 'bench', 'bench', 10000, '1 day', now() + interval '1 day', 'x' FROM mlplat.campaigns v WHERE v.name LIKE 'f%';
-- synthetic finished rows: inserted as they are, past the state machine's triggers
SET session_replication_role = replica;
INSERT INTO mlplat.campaign_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus, reserved_gpu_seconds, status,
                                        actual_gpu_seconds, job_name, cleanup_done_at)
SELECT v.id, v.project_id, k.ordinal, k.name, k.plan, k.content_id, k.gpus, k.reserved_gpu_seconds, 'BUILT', 10,
       'opt-' || v.name || '-' || k.ordinal, now()
  FROM mlplat.campaigns v JOIN mlplat.campaigns c ON c.name = 'c64'
  JOIN mlplat.campaign_candidates k ON k.campaign_id = c.id AND k.ordinal <= 4
 WHERE v.name LIKE 'f%';
RESET session_replication_role;
-- the other campaigns finish too, so only the 10,000 finished ones (and nothing active) remain
UPDATE mlplat.campaign_candidates SET status = 'FAILED', actual_gpu_seconds = 1 WHERE status = 'BUILDING';
UPDATE mlplat.campaign_candidates SET status = 'NOT_RUN', actual_gpu_seconds = 0 WHERE status = 'PLANNED';
UPDATE mlplat.campaign_candidates SET cleanup_done_at = now() WHERE cleanup_done_at IS NULL;
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('campaigns', 1, 0, 0, 'bench');
VACUUM ANALYZE mlplat.campaign_candidates;
VACUUM ANALYZE mlplat.campaigns;
SQL
finished=$(q "SELECT count(*) FROM mlplat.campaigns c WHERE mlplat._campaign_state(c.id) IN ('SUCCEEDED', 'PARTIALLY_SUCCEEDED', 'FAILED', 'EXPIRED', 'CANCELLED')")
w0=$(q "SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relname IN ('campaign_candidates') AND schemaname = 'mlplat'")
rows=$(q "SELECT count(*) FROM mlplat._campaigns_claim(1, 'bench')")
sleep 1
w1=$(q "SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relname IN ('campaign_candidates') AND schemaname = 'mlplat'")
t0=$(date +%s%N); q "SELECT count(*) FROM mlplat._campaigns_claim(1, 'bench')" >/dev/null; t_claim=$((($(date +%s%N) - t0) / 1000000))
plan_admit=$(q "EXPLAIN (COSTS OFF) SELECT DISTINCT k2.campaign_id FROM mlplat.campaign_candidates k2 WHERE k2.status = 'PLANNED'" | tr '\n' ' ' | sed 's/  */ /g')
plan_claim=$(q "EXPLAIN (COSTS OFF) SELECT k.id FROM mlplat.campaign_candidates k WHERE k.status IN ('BUILDING', 'CANCEL_REQUESTED')
   OR (k.cleanup_done_at IS NULL AND k.job_name IS NOT NULL AND k.status IN ('BUILT', 'FAILED', 'CANCELLED', 'NOT_RUN'))" | tr '\n' ' ' | sed 's/  */ /g')
load=$(cut -d' ' -f1-3 /proc/loadavg)
# 5. its own cluster, with the workers and the stand-in
jobs_row=$(bash "$SRC/bench/campaigns/jobs.sh" --row) || jobs_row="| Job creates per candidate (100 x 4) | bench/campaigns/jobs.sh failed | — | — | creates = candidates, ≤ 1.05 requests per create |"

echo "## Optimization campaigns (issue 14) — \`bench/campaigns/run.sh\` (${ROUNDS} rounds of ${SECS} s per measurement, one client)"
echo
echo "| measure | mlplat (median) | baseline, same run (median) | ratio (median of rounds) | target |"
echo "|---|---|---|---|---|"
echo "| \`_campaign_state\`, 64 candidates | ${t_state} calls/s | plain aggregate of the 64 rows: ${t_agg}/s | ${r_state}x the time | ≤ 2x |"
echo "| \`campaign_status\`, 1,000 campaigns x 16 candidates | ${t_view} scans/s | plain join + group of the same rows: ${t_join}/s | ${r_view}x the time | ≤ 3x |"
echo "| \`create_campaign\`, 64 candidates | ${t_create} TPS | plain INSERTs of the same rows: ${t_insert} TPS | ${r_create}x the TPS | ≥ 0.5x |"
echo "| \`create_campaign\`, 64 candidates, against the like-for-like baseline | ${t_create2} TPS | the same rows (campaign, candidates, transitions, audit event) into copies of the tables with their indexes, checks and foreign keys: ${t_full} TPS | ${r_create_full}x the TPS | ≥ 0.5x |"
echo "| steady claim, ${finished} finished campaigns | $((w1 - w0)) rows written, ${rows} rows handed out, ${t_claim} ms | — | — | writes nothing; index scans only |"
echo "$jobs_row"
echo
echo "EXPLAIN, admission's read: \`${plan_admit}\`"
echo
echo "EXPLAIN, claim's read: \`${plan_claim}\`"
echo
echo "Load average during the run: ${load}."
