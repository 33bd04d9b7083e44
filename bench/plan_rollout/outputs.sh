#!/usr/bin/env bash
# bench/plan_rollout/outputs.sh OUTFILE [rows] — every output of plan_rollout over a
# large, fixed set of inputs, to compare two builds byte for byte.
#
# Not a test and not a timing: run it on the build before a change and on the
# build after (BUILD=dir selects another source tree to build, as in
# test/lib/stack.sh), then compare the md5 lines (and diff the OUTFILEs).
# Inputs, generated from a fixed seed so both runs see the same documents:
#   valid      the benchmark's evidence for 1000 contracts (every decision)
#   mutated    the same records with 1-3 fields replaced by hostile values
#              (booleans, strings, nulls, containers, negative, fractional,
#              huge and tiny numbers, escapes, non-ASCII), keys removed or
#              added, half of them re-stamped with a correct content id
#   policies   contracts with mutated policies against valid evidence
# Each line of OUTFILE is the plan's text, or SQLSTATE, message, detail and
# hint of the error.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(realpath -m "${1:?usage: outputs.sh OUTFILE [rows]}")
ROWS=${2:-100000}
. "$SRC/test/lib/stack.sh"
stack_init outputs
stack_start "max_parallel_workers_per_gather = 0"
export PGDATABASE=postgres
psql() { "$BIN/psql" -qX -v ON_ERROR_STOP=1 "$@"; }
psql -c "SET client_min_messages = error; CREATE EXTENSION mlplat"

psql -c "SET client_min_messages = error" -f "$SRC/bench/plan_rollout/contracts.sql" >/dev/null
psql -v rows="$ROWS" <<'SQL' >/dev/null
SET client_min_messages = error;
SELECT setseed(0.4242);
CREATE FUNCTION evidence_for(c jsonb, i int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT mlplat.with_content_id(jsonb_build_object(
    'contract_content_id', c->>'content_id', 'scope', c->'scope',
    'observed_at', 1764410400 + (i % 7) * 0.125, 'current_fraction', (ARRAY[0, 0.05, 0.2, 0.5, 1])[1 + i % 5],
    'window_start', 1764410100, 'window_seconds', CASE WHEN i % 23 = 0 THEN 200 ELSE 300 END,
    'target', jsonb_build_object('desired_replicas', 4, 'ready_replicas', CASE WHEN i % 17 = 0 THEN 3 ELSE 4 END,
        'load_attempts', 4, 'load_successes', CASE WHEN i % 29 = 0 THEN 3 ELSE 4 END,
        'health_observed_at', CASE WHEN i % 37 = 0 THEN NULL ELSE 1764410400 - i % 70 END,
        'requests', 300 + i % 1500, 'errors', i % 19, 'p95_ms', CASE WHEN i % 31 = 0 THEN NULL ELSE 150 + i % 120 + (i % 3) * 0.25 END),
    'previous', jsonb_build_object('desired_replicas', CASE WHEN i % 41 = 0 THEN 0 ELSE 4 END, 'ready_replicas', CASE WHEN i % 41 = 0 THEN 0 ELSE 4 - (i % 43 = 0)::int END,
        'load_attempts', 4, 'load_successes', 4, 'health_observed_at', 1764410395, 'requests', 4800 - i % 4500,
        'errors', 9, 'p95_ms', 170),
    'desired_capacity', CASE WHEN i % 41 = 0 THEN 4 ELSE 8 END))
$$;

-- hostile values for any field
CREATE TABLE vals AS SELECT row_number() OVER () AS k, v::jsonb AS v FROM unnest(ARRAY[
  'true', 'false', 'null', '"5"', '"0.2"', '""', '"x"', '[]', '{}', '[1]', '{"a":1}',
  '-1', '-0', '0', '0.0', '1', '1.0', '5.0', '0.5', '1.5', '2.5e1', '1e3', '1E-3', '0.1', '0.30000000000000004',
  '1e400', '-1e400', '1e-400', '123456789012345678901234567890', '9007199254740991', '9007199254740992',
  '9007199254740993', '1e15', '1e16', '1e21', '1e22', '0.000001', '0.0000001', '100.10', '1764410400.5',
  '1764410400.0005', '1764410400.001', '1764410399.999', '99999999999999.999', '7.000', '1.25', '12',
  '"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
  '"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
  '"9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"',
  '"quote\" back\\ nl\n tab\t ctl\u0001 del\u007f é ü € 😀 \u2028"', '"\uffff\ue000\ud83d\ude00"',
  '"bench"', '"d1"', '"d1-r1"', '"d1-r2"', '"naïve-ünïcödé-revision"'
]) v
UNION ALL SELECT 1000, to_jsonb(repeat('y', 253)) UNION ALL SELECT 1001, to_jsonb(repeat('z', 254))
UNION ALL SELECT 1002, to_jsonb(repeat('é', 130));

CREATE TABLE paths AS SELECT row_number() OVER () AS k, string_to_array(p, '.') AS p FROM unnest(ARRAY[
  'content_id', 'contract_content_id', 'current_fraction', 'desired_capacity', 'observed_at',
  'window_seconds', 'window_start', 'scope', 'target', 'previous',
  'scope.config_digest', 'scope.deployment', 'scope.model_digest', 'scope.previous_revision',
  'scope.project', 'scope.target_revision',
  'target.desired_replicas', 'target.errors', 'target.health_observed_at', 'target.load_attempts',
  'target.load_successes', 'target.p95_ms', 'target.ready_replicas', 'target.requests',
  'previous.desired_replicas', 'previous.errors', 'previous.health_observed_at', 'previous.load_attempts',
  'previous.load_successes', 'previous.p95_ms', 'previous.ready_replicas', 'previous.requests',
  'extra', 'target.Errors', 'é'
]) p;

-- plausible numbers (most pass validation, so mutated records reach the decision)
CREATE TABLE nums AS SELECT row_number() OVER () AS k, v::jsonb AS v FROM unnest(ARRAY[
  '0', '0.05', '0.2', '0.5', '1', '1.0', '2', '3', '4', '4.0', '5', '8', '9', '12', '100', '499', '500',
  '501', '1200', '4800', '0.25', '170', '180', '250', '250.0', '312.5', '1e2', '1764410100', '1764410100.000',
  '1764410340', '1764410395', '1764410399.999', '1764410400', '1764410400.25', '200', '299.999', '300',
  '300.001', '60', '1e1'
]) v;

-- a random mutation: replace (90%), delete (5%) or add an unknown key (5%)
CREATE FUNCTION mutate(doc jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  p text[] := (SELECT p FROM paths ORDER BY k OFFSET floor(random() * (SELECT count(*) FROM paths)) LIMIT 1);
  v jsonb := CASE WHEN random() < 0.5
                 THEN (SELECT v FROM nums ORDER BY k OFFSET floor(random() * (SELECT count(*) FROM nums)) LIMIT 1)
                 ELSE (SELECT v FROM vals ORDER BY k OFFSET floor(random() * (SELECT count(*) FROM vals)) LIMIT 1) END;
  r float8 := random();
BEGIN
  IF r < 0.9 THEN RETURN jsonb_set(doc, p, v, true);
  ELSIF r < 0.95 THEN RETURN doc #- p;
  ELSE RETURN jsonb_set(doc, p[1:cardinality(p) - 1] || ('k' || floor(random() * 3)), v, true);
  END IF;
EXCEPTION WHEN OTHERS THEN RETURN doc;   -- e.g. a path through a scalar
END $$;

-- the record with a correct content id, when one can be computed
CREATE FUNCTION restamp(doc jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  RETURN mlplat.with_content_id(doc);
EXCEPTION WHEN OTHERS THEN RETURN doc;
END $$;

CREATE FUNCTION outcome(c jsonb, e jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hint text;
BEGIN
  RETURN mlplat.plan_rollout(c, e)::text;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                          hint = PG_EXCEPTION_HINT;
  RETURN format('ERROR %s|%s|%s|%s', st, msg, det, hint);
END $$;

CREATE TABLE cases (id serial, class text, contract jsonb, evidence jsonb);
INSERT INTO cases (class, contract, evidence)
SELECT 'valid', c.contract, evidence_for(c.contract, i)
FROM generate_series(1, :rows) i JOIN contracts c ON c.n = 1 + i % 1000 ORDER BY i;
-- random() runs row by row in the order of the sorted rows s, whatever join the planner
-- picks, so both builds see the same inputs
INSERT INTO cases (class, contract, evidence)
SELECT 'mutated', s.contract,
       CASE WHEN random() < 0.5 THEN restamp(m) ELSE m END
FROM (SELECT i, c.contract FROM generate_series(1, :rows) i JOIN contracts c ON c.n = 1 + i % 1000
      ORDER BY i OFFSET 0) s,
     LATERAL (SELECT evidence_for(s.contract, s.i) AS e) b,
     LATERAL (SELECT CASE floor(random() * 3)
                       WHEN 0 THEN mutate(b.e)
                       WHEN 1 THEN mutate(mutate(b.e))
                       ELSE mutate(mutate(mutate(b.e))) END AS m) mm
ORDER BY s.i;
-- policies: a mutated policy (restamped) against evidence re-bound to it
INSERT INTO cases (class, contract, evidence)
SELECT 'policies', pc, restamp(jsonb_set(evidence_for(s.contract, s.i), '{contract_content_id}',
                                         coalesce(pc->'content_id', '"x"')))
FROM (SELECT i, c.contract FROM generate_series(1, :rows / 20) i JOIN contracts c ON c.n = 1 + i % 1000
      ORDER BY i OFFSET 0) s,
     LATERAL (SELECT restamp(jsonb_set(s.contract, '{policy}', jsonb_set(s.contract->'policy',
              ARRAY[(ARRAY['steps','ceiling_fraction','min_samples','window_seconds','max_error_rate',
                           'max_p95_ms','max_error_rate_increase','max_p95_increase_ratio',
                           'health_max_age_seconds','surge_replicas','rollback_headroom_replicas',
                           'capacity_quota_replicas'])[1 + floor(random() * 12)]],
              (SELECT v FROM nums ORDER BY k OFFSET floor(random() * (SELECT count(*) FROM nums)) LIMIT 1)))) AS pc) p
ORDER BY s.i;

CREATE TABLE outputs AS SELECT id, class, outcome(contract, evidence) AS o FROM cases;
SQL
psql -At -c "COPY (SELECT class || ' ' || o FROM outputs ORDER BY id) TO STDOUT" >"$OUT"
psql -At -F ' ' -c "SELECT class, count(*), count(*) FILTER (WHERE o LIKE 'ERROR%') AS errors,
                           md5(string_agg(o, E'\n' ORDER BY id)) FROM outputs GROUP BY class ORDER BY class"
psql -At -F ' ' -c "SELECT 'all', count(*), count(*) FILTER (WHERE o LIKE 'ERROR%'),
                           md5(string_agg(o, E'\n' ORDER BY id)) FROM outputs"
