#!/usr/bin/env bash
# bench/steady_pass/span_record.sh — what mlplat._spans_record_set (the deployments pass's span
# write, src/trace/span.c) spends its time on: the function beside copies of it with one part
# taken out each, side by side in one cluster.  A call writes a deployments pass's spans: 100
# deployments x 4 (claim, artifact_check, apply, readiness_wait with start_after
# 'deployments.apply', the attributes dep_span sets), into traces that already hold spans;
# every variant writes into a table of its own holding the same $ROWS spans, the same input
# each repetition; calls alternate (the order rotates), each timed inside the server, median
# of REPS.  Variants:
#   cur        the function as installed (attributes passed as text[] and cast, as span.c does)
#   checks     table without the three regex CHECKs on the ids (the upper bound of any check)
#   ltrim      table with the same checks spelled without a regex: octet_length(id) = 32 (16)
#              AND ltrim(id, '0123456789abcdef') = '' (as strict: every character a
#              lower-case hex digit, exactly that many)
#   collate    table with the three id columns COLLATE "C" (key comparisons by memcmp)
#   indexes    table without spans_unexported and spans_end_time
#   conflict   no ON CONFLICT DO NOTHING
#   order      no ORDER BY x.ord
#   after      no start_after subquery at all (the upper bound of any cheaper lookup)
#   join       the start_after lookup as one grouped join over the rows that name one,
#              instead of a subquery a row
#   project    no LEFT JOIN on projects
#   jsonb      the attributes passed as jsonb[] (the cast done before the timer)
#   new        the body in the file NEW_BODY names, if set (a proposed change)
#   ROWS=100000 REPS=15 bench/steady_pass/span_record.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=${ROWS:-100000}
REPS=${REPS:-15}
SIZES=100
. "$SRC/bench/steady_pass/sql_side.sh"
side_start span_record deployments
side_deployments
variants="cur checks ltrim collate indexes conflict order after join project jsonb"
Q -q -v nb="$( [ -n "${NEW_BODY:-}" ] && cat "$NEW_BODY" || true)" <<SQL >/dev/null
SET bench.new_body = :'nb';
-- the spans already there: ROWS/4 traces of 4 spans each, a trace's spans side by side (as a
-- deployments pass writes them)
CREATE TABLE public.base AS
SELECT md5('t' || t) AS trace_id, substr(md5('s' || t || '.' || k), 1, 16) AS span_id,
       substr(md5('a' || t), 1, 16) AS parent_span_id,
       (ARRAY['deployments.claim', 'deployments.artifact_check', 'deployments.apply', 'deployments.readiness_wait'])[k] AS name,
       CASE WHEN k IN (2, 3) THEN 'CLIENT' ELSE 'INTERNAL' END AS kind,
       now() - interval '1 hour' + t * interval '10 ms' + k * interval '1 ms' AS start_time,
       now() - interval '1 hour' + t * interval '10 ms' + k * interval '2 ms' AS end_time,
       jsonb_build_object('k8s.namespace.name', 'p' || (t % 10 + 1), 'mlplat.deployment', 'd' || t, 'mlplat.revision', 1) AS attributes,
       (SELECT id FROM mlplat.projects WHERE name = 'p' || (t % 10 + 1)) AS project_id, t AS entity_id
  FROM generate_series(1, $ROWS / 4) t, generate_series(1, 4) k
 ORDER BY t, k;
-- the calls' input: rep r writes 4 new spans into each of 100 of those traces
CREATE TABLE public.batch AS
SELECT r, (d - 1) * 4 + k AS ord, md5('t' || t) AS trace_id, substr(md5('n' || r || '.' || t || '.' || k), 1, 16) AS span_id,
       substr(md5('a' || t), 1, 16) AS parent_span_id,
       (ARRAY['deployments.claim', 'deployments.artifact_check', 'deployments.apply', 'deployments.readiness_wait'])[k] AS name,
       CASE WHEN k IN (2, 3) THEN 'CLIENT' ELSE 'INTERNAL' END AS kind,
       now() + k * interval '1 ms' AS start_time, now() + k * interval '2 ms' AS end_time,
       CASE WHEN k = 4 THEN 'OK' ELSE 'UNSET' END AS status,
       CASE WHEN k = 1 THEN '{}' ELSE format('{"k8s.namespace.name": "p%s", "mlplat.deployment": "d%s", "mlplat.revision": 1%s}',
              t % 10 + 1, t, CASE WHEN k = 4 THEN ', "mlplat.status": "READY"' ELSE '' END) END AS attributes,
       'p' || (t % 10 + 1) AS project, 'deployment' AS entity, t::bigint AS entity_id,
       CASE WHEN k = 4 THEN 'deployments.apply' END AS start_after
  FROM generate_series(1, $REPS) r, generate_series(1, 100) d, generate_series(1, 4) k,
       LATERAL (SELECT ((r * 7919 + d * 104729) % ($ROWS / 4)) + 1 AS t) tt;
DO \$\$
DECLARE
  body text := (SELECT prosrc FROM pg_proc WHERE oid = 'mlplat._spans_record_set'::regproc);
  args text := pg_get_function_arguments('mlplat._spans_record_set'::regproc);
  v text; b text;
BEGIN
  FOREACH v IN ARRAY string_to_array('$variants new', ' ') LOOP
    b := replace(body, 'mlplat.spans', 'public.t_' || v);
    IF v = 'conflict' THEN b := replace(b, 'ON CONFLICT DO NOTHING', '');
    ELSIF v = 'order' THEN b := replace(b, 'ORDER BY x.ord', '');
    ELSIF v = 'after' THEN
      b := regexp_replace(b, 'coalesce\(\(SELECT max.*?x\.start_time\)', 'x.start_time');
    ELSIF v = 'join' THEN
      b := regexp_replace(b, 'coalesce\(\(SELECT max.*?x\.start_time\)', 'coalesce(a.after_end, x.start_time)');
      b := replace(b, 'LEFT JOIN mlplat.projects p ON p.name = x.project', 'LEFT JOIN mlplat.projects p ON p.name = x.project
      LEFT JOIN (SELECT y.ord, max(s.end_time) AS after_end
                   FROM unnest(p_trace_id, p_start_after, p_entity_id, p_end_time) WITH ORDINALITY
                        AS y(trace_id, start_after, entity_id, end_time, ord)
                   JOIN public.t_join s ON s.trace_id = y.trace_id AND s.name = y.start_after
                                       AND s.entity_id IS NOT DISTINCT FROM y.entity_id AND s.end_time <= y.end_time
                  WHERE y.start_after IS NOT NULL
                  GROUP BY y.ord) a ON a.ord = x.ord');
    ELSIF v = 'project' THEN
      b := replace(replace(b, 'LEFT JOIN mlplat.projects p ON p.name = x.project', ''), 'p.id, x.entity', 'NULL::bigint, x.entity');
    ELSIF v = 'new' THEN
      CONTINUE WHEN current_setting('bench.new_body', true) IS NULL OR current_setting('bench.new_body', true) = '';
      b := replace(current_setting('bench.new_body'), 'mlplat.spans', 'public.t_' || v);
    END IF;
    IF v NOT IN ('cur', 'checks', 'ltrim', 'collate', 'indexes', 'jsonb', 'new') AND b = replace(body, 'mlplat.spans', 'public.t_' || v) THEN
      RAISE EXCEPTION 'variant % changed nothing: _spans_record_set is no longer as this bench expects', v;
    END IF;
    EXECUTE format('CREATE TABLE public.t_%s (LIKE mlplat.spans INCLUDING ALL)', v);
    IF v = 'collate' THEN
      ALTER TABLE public.t_collate ALTER COLUMN trace_id TYPE text COLLATE "C", ALTER COLUMN span_id TYPE text COLLATE "C",
                                   ALTER COLUMN parent_span_id TYPE text COLLATE "C";
    END IF;
    EXECUTE format('INSERT INTO public.t_%s (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, attributes, project_id, entity, entity_id) '
                   'SELECT trace_id, span_id, parent_span_id, name, kind, start_time, end_time, attributes, project_id, ''deployment'', entity_id FROM public.base', v);
    IF v = 'checks' THEN
      ALTER TABLE public.t_checks DROP CONSTRAINT spans_trace_id_check, DROP CONSTRAINT spans_span_id_check,
                                  DROP CONSTRAINT spans_parent_span_id_check;
    ELSIF v = 'ltrim' THEN
      ALTER TABLE public.t_ltrim DROP CONSTRAINT spans_trace_id_check, DROP CONSTRAINT spans_span_id_check,
                                 DROP CONSTRAINT spans_parent_span_id_check,
        ADD CHECK (octet_length(trace_id) = 32 AND ltrim(trace_id, '0123456789abcdef') = ''),
        ADD CHECK (octet_length(span_id) = 16 AND ltrim(span_id, '0123456789abcdef') = ''),
        ADD CHECK (octet_length(parent_span_id) = 16 AND ltrim(parent_span_id, '0123456789abcdef') = '');
    ELSIF v = 'indexes' THEN
      EXECUTE (SELECT string_agg(format('DROP INDEX public.%I', indexrelid::regclass::text), '; ')
                 FROM pg_index WHERE indrelid = 'public.t_indexes'::regclass AND NOT indisprimary);
    END IF;
    EXECUTE format('ANALYZE public.t_%s', v);
    EXECUTE format('CREATE FUNCTION public.f_%s(%s) RETURNS int LANGUAGE sql AS %L', v, args, b);
  END LOOP;
END \$\$;
SQL
Q -c "SELECT 'variants: ' || string_agg(proname, ' ') FROM pg_proc WHERE proname LIKE 'f\\_%'" -At
side_times <<SQL
DO \$\$
DECLARE
  v text; vs text[] := string_to_array('$variants', ' ') || CASE WHEN to_regproc('public.f_new') IS NULL THEN '{}'::text[] ELSE '{new}' END;
  rep int; i int; k int; t0 timestamptz; a jsonb[];
  c1 text[]; c2 text[]; c3 text[]; c4 text[]; c5 text[]; c6 timestamptz[]; c7 timestamptz[]; c8 text[]; c9 text[];
  c10 text[]; c11 text[]; c12 text[]; c13 bigint[]; c14 text[];
BEGIN
  FOR rep IN 1..$REPS LOOP
    SELECT array_agg(trace_id ORDER BY ord), array_agg(span_id ORDER BY ord), array_agg(parent_span_id ORDER BY ord),
           array_agg(name ORDER BY ord), array_agg(kind ORDER BY ord), array_agg(start_time ORDER BY ord),
           array_agg(end_time ORDER BY ord), array_agg(status ORDER BY ord), array_agg(NULL::text ORDER BY ord),
           array_agg(attributes ORDER BY ord), array_agg(project ORDER BY ord), array_agg(entity ORDER BY ord),
           array_agg(entity_id ORDER BY ord), array_agg(start_after ORDER BY ord)
      INTO c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14
      FROM public.batch WHERE r = rep;
    FOR i IN 0..array_length(vs, 1) - 1 LOOP
      v := vs[(i + rep) % array_length(vs, 1) + 1];
      IF v = 'jsonb' THEN
        a := c10::jsonb[];
        t0 := clock_timestamp();
        EXECUTE 'SELECT public.f_jsonb(\$1, \$2, \$3, \$4, \$5, \$6, \$7, \$8, \$9, \$10, \$11, \$12, \$13, \$14)' INTO k
          USING c1, c2, c3, c4, c5, c6, c7, c8, c9, a, c11, c12, c13, c14;
      ELSE
        t0 := clock_timestamp();
        EXECUTE format('SELECT public.f_%s(\$1, \$2, \$3, \$4, \$5, \$6, \$7, \$8, \$9, \$10::jsonb[], \$11, \$12, \$13, \$14)', v) INTO k
          USING c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14;
      END IF;
      RAISE NOTICE '% % %', 400, v, extract(epoch FROM clock_timestamp() - t0) * 1000;
      IF k <> 400 THEN RAISE EXCEPTION '% wrote % spans of 400', v, k; END IF;
    END LOOP;
  END LOOP;
END \$\$;
SQL
# the plans of the installed function's statement and of the new body, from one more call
# each (auto_explain, analyzed), when PLANS=1
if [ -n "${PLANS:-}" ]; then
	for v in cur $(Q -Atc "SELECT 'new' WHERE to_regproc('public.f_new') IS NOT NULL"); do
		Q <<SQL 2>&1 | sed -n '/Query Text/,$p' | grep -v 'Query Text' | sed "s/^/$v: /"
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off; SET client_min_messages = log;
SELECT public.f_$v(array_agg(trace_id ORDER BY ord), array_agg(span_id ORDER BY ord), array_agg(parent_span_id ORDER BY ord),
       array_agg(name ORDER BY ord), array_agg(kind ORDER BY ord), array_agg(start_time ORDER BY ord),
       array_agg(end_time ORDER BY ord), array_agg(status ORDER BY ord), array_agg(NULL::text ORDER BY ord),
       array_agg(attributes::jsonb ORDER BY ord), array_agg(project ORDER BY ord), array_agg(entity ORDER BY ord),
       array_agg(entity_id ORDER BY ord), array_agg(start_after ORDER BY ord))
  FROM (SELECT r, ord, substr(md5(span_id), 1, 16) AS span_id, trace_id, parent_span_id, name, kind, start_time, end_time, status,
               attributes, project, entity, entity_id, start_after FROM public.batch WHERE r = 1) b;
SQL
	done
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/times.txt" "$REPS" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, label, ms = line.split()
    d[label].append(float(ms))
cur = statistics.median(d["cur"])
print(f"| variant (400 spans a call) | ms a call (median of {sys.argv[2]}) | us a span | ratio to cur |")
print("| --- | ---: | ---: | ---: |")
for label in d:
    m = statistics.median(d[label])
    print(f"| {label} | {m:.3f} | {m * 1000 / 400:.1f} | {m / cur:.2f} |")
PY
