-- Trace spans: the traceparent an intent stores, the API span, the reconciler spans'
-- insert, and the OTLP/HTTP JSON rendering the exporter sends.
\set SHOW_CONTEXT never

-- _traceparent(): a new trace, or the caller's trace with a new span id (the API span's)
RESET mlplat.traceparent;
SELECT mlplat._traceparent() ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-01$' AS new_trace_is_valid;
SELECT count(DISTINCT split_part(t, '-', 2)) AS distinct_traces, count(DISTINCT split_part(t, '-', 3)) AS distinct_spans
  FROM (SELECT mlplat._traceparent() AS t FROM generate_series(1, 50)) x;
SET mlplat.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';
SELECT substr(t, 1, 36) AS same_trace, substr(t, 53) AS same_flags,
       split_part(t, '-', 3) <> 'b7ad6b7169203331' AS new_span_id, split_part(t, '-', 3) ~ '^[0-9a-f]{16}$' AS hex
  FROM (SELECT mlplat._traceparent() AS t) x;

-- the API span: one per intent, trace and span id from the stored traceparent, the caller's span as parent
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_trace_owner') THEN CREATE ROLE regress_trace_owner; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_trace_other') THEN CREATE ROLE regress_trace_other; END IF;
END $$;
SELECT status FROM mlplat.create_project('tracer', 2, NULL, NULL, NULL, 'regress_trace_owner');
SELECT status FROM mlplat.add_artifact_location('tracer', 's3://b/m/');
SELECT status FROM mlplat.register_model_version('tracer', 'm', '1', 's3://b/m/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT status FROM mlplat.set_model_stage('tracer', 'm', '1', 'CANDIDATE');
SELECT status FROM mlplat.deploy('tracer', 'web', 'm', '1', 'kserve-sklearnserver');
SELECT s.name, s.kind, s.trace_id, s.parent_span_id, s.status, s.entity,
       s.span_id = split_part(d.traceparent, '-', 3) AS stored_parent_is_api_span,
       s.trace_id = split_part(d.traceparent, '-', 2) AS same_trace,
       s.start_time <= s.end_time AS ordered, s.attributes ? 'mlplat.request_id' AS has_request_id
  FROM mlplat.spans s JOIN mlplat.deployments d ON d.id = s.entity_id AND s.entity = 'deployment'
 WHERE s.name = 'mlplat.deploy' AND d.name = 'web' AND s.project_id = d.project_id
   AND d.project_id = (SELECT id FROM mlplat.projects WHERE name = 'tracer');
-- deploy() writes its span in the statement that writes the audit event: the same request
SELECT count(*) AS spans, bool_and((s.attributes->>'mlplat.request_id')::uuid = a.request_id) AS span_names_request,
       bool_and(s.trace_id = a.trace_id) AS span_in_audited_trace
  FROM mlplat.spans s JOIN mlplat.audit_events a ON a.entity = 'deployment' AND a.entity_id = s.entity_id
       AND a.action = 'deploy' AND a.project = 'tracer'
 WHERE s.name = 'mlplat.deploy' AND s.project_id = (SELECT id FROM mlplat.projects WHERE name = 'tracer');
-- every intent above recorded one span in the caller's trace
SELECT name, count(*) FROM mlplat.spans WHERE trace_id = '0af7651916cd43dd8448eb211c80319c' GROUP BY name ORDER BY name;
-- a replayed call records nothing; a rolled-back one leaves nothing
SELECT count(*) AS before FROM mlplat.spans \gset
BEGIN;
SELECT status FROM mlplat.deploy('tracer', 'web2', 'm', '1', 'kserve-sklearnserver');
ROLLBACK;
SELECT count(*) - :before AS spans_after_rollback FROM mlplat.spans;
RESET mlplat.traceparent;
-- without a caller trace the API span is a root
SELECT status FROM mlplat.undeploy('tracer', 'web');
SELECT parent_span_id IS NULL AS root, trace_id <> '0af7651916cd43dd8448eb211c80319c' AS new_trace
  FROM mlplat.spans WHERE name = 'mlplat.undeploy' AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'tracer');

-- reconciler spans arrive as one JSON array; start_after takes the start from an earlier span
SELECT mlplat._spans_record(jsonb_build_array(
  jsonb_build_object('trace_id', '0af7651916cd43dd8448eb211c80319c', 'span_id', '1111111111111111',
    'parent_span_id', '2222222222222222', 'name', 'deployments.apply', 'kind', 'CLIENT',
    'start_time', '2026-01-01 10:00:00.000001+00', 'end_time', '2026-01-01 10:00:00.25+00', 'status', 'OK',
    'attributes', '{"http.response.status_code": 200}'::jsonb, 'project', 'tracer', 'entity', 'deployment', 'entity_id', 1),
  jsonb_build_object('trace_id', '0af7651916cd43dd8448eb211c80319c', 'span_id', '3333333333333333',
    'parent_span_id', '2222222222222222', 'name', 'deployments.readiness_wait', 'kind', 'INTERNAL',
    'start_time', '2026-01-01 10:00:05+00', 'end_time', '2026-01-01 10:00:05+00', 'status', 'ERROR',
    'status_message', 'KServe reports not ready', 'attributes', '{}'::jsonb, 'project', 'tracer',
    'entity', 'deployment', 'entity_id', 1, 'start_after', 'deployments.apply')));
SELECT span_id, name, start_time AT TIME ZONE 'UTC' AS start_utc, end_time AT TIME ZONE 'UTC' AS end_utc, status,
       project_id = (SELECT id FROM mlplat.projects WHERE name = 'tracer') AS project_resolved
  FROM mlplat.spans WHERE span_id IN ('1111111111111111', '3333333333333333') ORDER BY span_id;
-- written again (a retried write-back): nothing new
SELECT mlplat._spans_record('[{"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "1111111111111111", "name": "x", "kind": "CLIENT", "start_time": "2026-01-01T10:00:00Z", "end_time": "2026-01-01T10:00:00Z", "status": "OK"}]');
-- malformed ids are refused
\set VERBOSITY terse
SELECT mlplat._spans_record('[{"trace_id": "XYZ", "span_id": "1111111111111112", "name": "x", "kind": "CLIENT", "start_time": "2026-01-01T10:00:00Z", "end_time": "2026-01-01T10:00:00Z", "status": "OK"}]');

\set VERBOSITY default
-- OTLP rendering (pure): ids in hex, times as strings of nanoseconds, enum numbers, AnyValues
SELECT jsonb_pretty(mlplat._otlp_render(array_agg(s ORDER BY s.span_id DESC), 'inst-1', '0.2.0'))
  FROM mlplat.spans s WHERE s.span_id IN ('1111111111111111', '3333333333333333');
SELECT mlplat._otlp_value('42'), mlplat._otlp_value('-9007199254740993'), mlplat._otlp_value('1.5'),
       mlplat._otlp_value('true'), mlplat._otlp_value('"x"'), mlplat._otlp_value('{"a": 1}'), mlplat._otlp_value('1e30');
SELECT mlplat._otlp_render('{}', 'inst-1', '0.2.0');

-- the exporter's queue: oldest first, bounded, gone once marked (only by the current span_export epoch)
SELECT cardinality(ids) AS n, (body::jsonb #> '{resourceSpans,0,scopeSpans,0,spans}') = (
         SELECT jsonb_agg(mlplat._otlp_span(s) ORDER BY s.id) FROM (SELECT * FROM mlplat.spans WHERE exported_at IS NULL ORDER BY id LIMIT 3) s) AS body_matches
  FROM mlplat._spans_export_batch(3);
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('span_export', 77, 0, 0, 'regress')
  ON CONFLICT (kind) DO UPDATE SET epoch = 77;
SELECT mlplat._spans_mark_exported((SELECT ids FROM mlplat._spans_export_batch(3)), 76) AS stale_epoch_marks;
SELECT mlplat._spans_mark_exported((SELECT ids FROM mlplat._spans_export_batch(3)), 77) AS marked;
SELECT count(*) FILTER (WHERE exported_at IS NOT NULL) AS exported, count(*) FILTER (WHERE exported_at IS NULL) > 0 AS more_waiting
  FROM mlplat.spans;
SELECT count(*) AS batches_left FROM mlplat._spans_export_batch(1000) WHERE cardinality(ids) > 0;
DELETE FROM mlplat.leader_epochs WHERE kind = 'span_export' AND host = 'regress';

-- readers: members see their projects' spans through the view; nobody writes
SET ROLE regress_trace_owner;
SELECT count(*) > 0 AS owner_sees_spans, bool_and(project = 'tracer') AS only_own FROM mlplat.trace_spans;
SELECT count(*) FROM mlplat.spans;
INSERT INTO mlplat.spans (trace_id, span_id, name, kind, start_time, end_time) VALUES (repeat('a', 32), repeat('b', 16), 'x', 'SERVER', now(), now());
SELECT mlplat._spans_record('[]');
SET ROLE regress_trace_other;
SELECT count(*) AS outsider_sees FROM mlplat.trace_spans;
RESET ROLE;
-- retention removes spans older than mlplat.span_retention days (7), exported or not
UPDATE mlplat.spans SET end_time = now() - interval '6 days' WHERE span_id = '1111111111111111';
UPDATE mlplat.spans SET end_time = now() - interval '8 days' WHERE span_id = '3333333333333333';
SELECT deleted FROM mlplat.run_retention() WHERE what = 'spans';
SELECT span_id FROM mlplat.spans WHERE span_id IN ('1111111111111111', '3333333333333333');
