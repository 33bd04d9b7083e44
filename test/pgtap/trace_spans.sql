-- pgTAP: who reads spans.  mlplat.spans is internal; mlplat.trace_spans shows a member the
-- spans of their projects only (the same rule as the row-level security of the other
-- tables), an administrator all of them, and nobody can write either.
BEGIN;
SELECT plan(12);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['tap_span_a', 'tap_span_b', 'tap_span_viewer', 'tap_span_outsider', 'tap_span_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
INSERT INTO mlplat.admins (principal) VALUES ('tap_span_admin');
DO $$ DECLARE p text; BEGIN
  PERFORM mlplat.create_project('spa', 1, NULL, NULL, NULL, 'tap_span_a');
  PERFORM mlplat.create_project('spb', 1, NULL, NULL, NULL, 'tap_span_b');
  PERFORM mlplat.add_artifact_location('spa', 's3://b/');
  PERFORM mlplat.add_artifact_location('spb', 's3://b/');
  PERFORM mlplat.grant_role('spa', 'tap_span_viewer', 'viewer');
  FOREACH p IN ARRAY ARRAY['spa', 'spb'] LOOP
    PERFORM mlplat.register_model_version(p, 'm', '1', 's3://b/m1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
    PERFORM mlplat.set_model_stage(p, 'm', '1', 'CHAMPION');
    PERFORM mlplat.deploy(p, 'web', 'm', '1', 'kserve-sklearnserver');
  END LOOP;
END $$;
-- a reconciler span without a project (an orphan's) is for administrators only
SELECT mlplat._spans_record('[{"trace_id": "0123456789abcdef0123456789abcdef", "span_id": "0123456789abcdef",
  "name": "deployments.delete", "kind": "CLIENT", "start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:00:01Z", "status": "OK"}]');

CREATE FUNCTION pg_temp.seen(r text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', r);
  SELECT string_agg(DISTINCT coalesce(project, '-'), ',' ORDER BY coalesce(project, '-')) INTO v
    FROM mlplat.trace_spans WHERE project IN ('spa', 'spb') OR project IS NULL;
  RESET ROLE;
  RETURN coalesce(v, '');
END $$;

SELECT is(pg_temp.seen('tap_span_a'), 'spa', 'an owner sees the spans of their project');
SELECT is(pg_temp.seen('tap_span_viewer'), 'spa', 'a viewer sees them too');
SELECT is(pg_temp.seen('tap_span_b'), 'spb', 'and not another project''s');
SELECT is(pg_temp.seen('tap_span_outsider'), '', 'a principal with no role sees none');
SELECT is(pg_temp.seen('tap_span_admin'), '-,spa,spb', 'an administrator sees every span, also those of no project');
SELECT ok(NOT has_table_privilege('tap_span_a', 'mlplat.spans', 'SELECT'), 'the spans table itself is not readable by callers');
SELECT ok(NOT has_table_privilege('tap_span_a', 'mlplat.spans', 'INSERT') AND NOT has_table_privilege('tap_span_a', 'mlplat.spans', 'UPDATE')
          AND NOT has_table_privilege('tap_span_a', 'mlplat.spans', 'DELETE'), 'nor writable');
SELECT ok(NOT has_table_privilege('tap_span_a', 'mlplat.trace_spans', 'INSERT, UPDATE, DELETE'), 'the view is read-only');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'mlplat.spans'::regclass), 'spans has row-level security as well');
SELECT ok((SELECT 'security_barrier=true' = ANY (reloptions) FROM pg_class WHERE oid = 'mlplat.trace_spans'::regclass),
          'the view is a security barrier (no leaky predicate runs before the filter)');
SELECT is((SELECT array_agg(f ORDER BY f) FROM unnest(ARRAY['_spans_record(jsonb)',
             '_spans_record_set(text[],text[],text[],text[],text[],timestamptz[],timestamptz[],text[],text[],jsonb[],text[],text[],bigint[],text[])',
             '_spans_mark_exported(bigint[],bigint)',
             '_spans_export_batch(integer)', '_span_api(text,text,bigint,text,bigint,uuid)', '_traceparent()']) f
           WHERE has_function_privilege('tap_span_a', 'mlplat.' || f, 'EXECUTE')), NULL,
          'callers cannot record, export or mark spans');
SELECT is(tap_api_try('tap_span_a', 'SELECT mlplat._spans_mark_exported(ARRAY[1::bigint], 1)'), '42501',
          'marking spans exported is refused to a caller');

SELECT * FROM finish();
ROLLBACK;
