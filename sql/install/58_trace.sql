-- 58_trace: spans of one trace, from the API call to the reconciler's last step, and
-- their export over OTLP/HTTP JSON.
--
-- An intent function records one span (SERVER, "mlplat.<action>") and stores a traceparent
-- whose parent-id is that span's id, so the reconcilers' spans (claim, apply, readiness
-- wait, ...) read from the entity become its children.  Spans are written in the same
-- transaction as what they describe: a rolled-back call or a lost write-back leaves none.
-- Writers are the API functions and the workers only; callers read the trace_spans view.

CREATE TABLE mlplat.spans (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    trace_id       text NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    span_id        text NOT NULL CHECK (span_id ~ '^[0-9a-f]{16}$'),
    parent_span_id text CHECK (parent_span_id ~ '^[0-9a-f]{16}$'),
    name           text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER')),
    start_time     timestamptz NOT NULL,
    end_time       timestamptz NOT NULL,
    status         text NOT NULL DEFAULT 'UNSET' CHECK (status IN ('UNSET', 'OK', 'ERROR')),
    status_message text,
    attributes     jsonb NOT NULL DEFAULT '{}',
    project_id     bigint,
    entity         text,
    entity_id      bigint,
    exported_at    timestamptz,
    PRIMARY KEY (trace_id, span_id)
);
-- the exporter's queue: small, because exported rows leave it
CREATE INDEX spans_unexported ON mlplat.spans (id) WHERE exported_at IS NULL;
-- run_retention deletes by end_time; rows arrive in about end_time order, so a BRIN index
-- (a few pages, next to nothing per insert) spares the hourly purge a full scan
CREATE INDEX spans_end_time ON mlplat.spans USING brin (end_time);
COMMENT ON TABLE mlplat.spans IS
  'Trace spans of the API calls and the reconcilers, kept for mlplat.span_retention days; exported over OTLP when mlplat.otlp_endpoint is set.';

SELECT mlplat._member_reads('spans');
REVOKE ALL ON mlplat.spans FROM PUBLIC;

-- What callers read: the spans of their projects (administrators: all), like the other
-- views.  A definer view over a table nobody else may read, filtered by the same
-- predicate the row-level security policies use.
CREATE VIEW mlplat.trace_spans WITH (security_barrier = true) AS
SELECT s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.start_time, s.end_time,
       s.end_time - s.start_time AS duration, s.status, s.status_message, s.attributes,
       p.name AS project, s.entity, s.entity_id, s.exported_at
  FROM mlplat.spans s
  LEFT JOIN mlplat.projects p ON p.id = s.project_id
 WHERE mlplat._can_view(s.project_id);
REVOKE ALL ON mlplat.trace_spans FROM PUBLIC;
GRANT SELECT ON mlplat.trace_spans TO PUBLIC;
COMMENT ON VIEW mlplat.trace_spans IS
  'Spans of the projects the caller may view: API calls and reconciler steps, with their trace and parent ids.';

SELECT mlplat._config_dump('spans');

-- The API span of an intent, called where its audit event is written (status UNSET:
-- OpenTelemetry leaves a success unset; OK is an application's override).  tp is the
-- traceparent the intent stores (its parent-id is this span's id); the caller's own span,
-- if mlplat.traceparent was set, is the parent.  Starts with the caller's statement.
CREATE FUNCTION mlplat._span_api(p_action text, p_traceparent text, p_project_id bigint,
                                 p_entity text, p_entity_id bigint, p_request_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  caller text := pg_catalog.current_setting('mlplat.traceparent', true);
BEGIN
  IF p_traceparent IS NULL OR pg_catalog.length(p_traceparent) <> 55 THEN
    RETURN;
  END IF;
  INSERT INTO mlplat.spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                            attributes, project_id, entity, entity_id)
  VALUES (pg_catalog.substr(p_traceparent, 4, 32), pg_catalog.substr(p_traceparent, 37, 16),
          CASE WHEN pg_catalog.substr(caller, 4, 32) = pg_catalog.substr(p_traceparent, 4, 32)
               THEN pg_catalog.substr(caller, 37, 16) END,
          'mlplat.' || p_action, 'SERVER', pg_catalog.statement_timestamp(), pg_catalog.clock_timestamp(), 'UNSET',
          pg_catalog.jsonb_build_object('mlplat.request_id', p_request_id), p_project_id, p_entity, p_entity_id)
  ON CONFLICT DO NOTHING;
END $$;
REVOKE ALL ON FUNCTION mlplat._span_api(text, text, bigint, text, bigint, uuid) FROM PUBLIC;

-- Spans a worker collected during a pass, in one statement (src/trace/span.c): one array per
-- column, element i of each is span i (no JSON to build and parse: a pass of 10,000 applies
-- writes 30,000 spans).  start_after names an earlier span of the same trace and entity
-- whose end is this span's start when it exists (a readiness wait starts where the apply,
-- made in an earlier pass, ended).  Returns the number of spans written.
CREATE FUNCTION mlplat._spans_record_set(
    p_trace_id text[], p_span_id text[], p_parent_span_id text[], p_name text[], p_kind text[],
    p_start_time timestamptz[], p_end_time timestamptz[], p_status text[], p_status_message text[],
    p_attributes jsonb[], p_project text[], p_entity text[], p_entity_id bigint[], p_start_after text[])
RETURNS int LANGUAGE sql AS $$
  WITH ins AS (
    INSERT INTO mlplat.spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                              status_message, attributes, project_id, entity, entity_id)
    SELECT x.trace_id, x.span_id, x.parent_span_id, x.name, x.kind,
           coalesce((SELECT max(s.end_time) FROM mlplat.spans s
                      WHERE x.start_after IS NOT NULL AND s.trace_id = x.trace_id AND s.name = x.start_after
                        AND s.entity_id IS NOT DISTINCT FROM x.entity_id AND s.end_time <= x.end_time),
                    x.start_time),
           x.end_time, x.status, pg_catalog.left(x.status_message, 2000), coalesce(x.attributes, '{}'),
           p.id, x.entity, x.entity_id
      -- multi-argument unnest is FROM-clause syntax only unqualified (search_path is pinned)
      FROM unnest(p_trace_id, p_span_id, p_parent_span_id, p_name, p_kind, p_start_time, p_end_time,
                  p_status, p_status_message, p_attributes, p_project, p_entity, p_entity_id, p_start_after)
           WITH ORDINALITY AS x(trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                                status_message, attributes, project, entity, entity_id, start_after, ord)
      LEFT JOIN mlplat.projects p ON p.name = x.project
     ORDER BY x.ord
    ON CONFLICT DO NOTHING
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;
REVOKE ALL ON FUNCTION mlplat._spans_record_set(text[], text[], text[], text[], text[], timestamptz[], timestamptz[], text[], text[], jsonb[], text[], text[], bigint[], text[]) FROM PUBLIC;

-- The same from a JSON array of {trace_id, span_id, parent_span_id, name, kind, start_time,
-- end_time, status, status_message, attributes, project, entity, entity_id, start_after}.
CREATE FUNCTION mlplat._spans_record(p_spans jsonb)
RETURNS int LANGUAGE sql AS $$
  SELECT mlplat._spans_record_set(
           pg_catalog.array_agg(x.trace_id ORDER BY x.ord), pg_catalog.array_agg(x.span_id ORDER BY x.ord),
           pg_catalog.array_agg(x.parent_span_id ORDER BY x.ord), pg_catalog.array_agg(x.name ORDER BY x.ord),
           pg_catalog.array_agg(x.kind ORDER BY x.ord), pg_catalog.array_agg(x.start_time ORDER BY x.ord),
           pg_catalog.array_agg(x.end_time ORDER BY x.ord), pg_catalog.array_agg(x.status ORDER BY x.ord),
           pg_catalog.array_agg(x.status_message ORDER BY x.ord), pg_catalog.array_agg(x.attributes ORDER BY x.ord),
           pg_catalog.array_agg(x.project ORDER BY x.ord), pg_catalog.array_agg(x.entity ORDER BY x.ord),
           pg_catalog.array_agg(x.entity_id ORDER BY x.ord), pg_catalog.array_agg(x.start_after ORDER BY x.ord))
    FROM ROWS FROM (pg_catalog.jsonb_to_recordset(p_spans)
           AS (trace_id text, span_id text, parent_span_id text, name text, kind text, start_time timestamptz,
               end_time timestamptz, status text, status_message text, attributes jsonb, project text,
               entity text, entity_id bigint, start_after text)) WITH ORDINALITY
         AS x(trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status, status_message,
              attributes, project, entity, entity_id, start_after, ord)
$$;
REVOKE ALL ON FUNCTION mlplat._spans_record(jsonb) FROM PUBLIC;

-- ---------------------------------------------------------------- OTLP/HTTP JSON rendering

-- A jsonb value as an OTLP AnyValue (int64 as a decimal string, as the JSON mapping says).
CREATE FUNCTION mlplat._otlp_value(v jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE pg_catalog.jsonb_typeof(v)
           WHEN 'boolean' THEN pg_catalog.jsonb_build_object('boolValue', v)
           WHEN 'number' THEN
             CASE WHEN (v #>> '{}')::numeric = pg_catalog.trunc((v #>> '{}')::numeric)
                       AND pg_catalog.abs((v #>> '{}')::numeric) < 9223372036854775807
                  THEN pg_catalog.jsonb_build_object('intValue', ((v #>> '{}')::numeric)::bigint::text)
                  ELSE pg_catalog.jsonb_build_object('doubleValue', v) END
           WHEN 'string' THEN pg_catalog.jsonb_build_object('stringValue', v)
           ELSE pg_catalog.jsonb_build_object('stringValue', v::text) END
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_value(jsonb) FROM PUBLIC;

-- One span in the OTLP JSON mapping: hex ids, times as decimal strings of nanoseconds
-- since the Unix epoch, kind and status code as enum numbers, attributes as key/value.
CREATE FUNCTION mlplat._otlp_span(s mlplat.spans) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'traceId', s.trace_id,
    'spanId', s.span_id,
    'parentSpanId', s.parent_span_id,
    'name', s.name,
    'kind', CASE s.kind WHEN 'INTERNAL' THEN 1 WHEN 'SERVER' THEN 2 WHEN 'CLIENT' THEN 3
                        WHEN 'PRODUCER' THEN 4 WHEN 'CONSUMER' THEN 5 ELSE 0 END,
    'startTimeUnixNano', (EXTRACT(epoch FROM s.start_time) * 1000000000)::bigint::text,
    'endTimeUnixNano', (EXTRACT(epoch FROM s.end_time) * 1000000000)::bigint::text,
    'attributes', coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                                     'key', a.key, 'value', mlplat._otlp_value(a.value)) ORDER BY a.key)
                              FROM pg_catalog.jsonb_each(s.attributes
                                     || pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                                          'mlplat.entity', s.entity, 'mlplat.entity_id', s.entity_id))) a),
                           '[]'::jsonb),
    'status', pg_catalog.jsonb_build_object(
                'code', CASE s.status WHEN 'OK' THEN 1 WHEN 'ERROR' THEN 2 ELSE 0 END,
                'message', s.status_message)))
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_span(mlplat.spans) FROM PUBLIC;

-- An ExportTraceServiceRequest for a batch of spans (in the given order), from one
-- resource: service.name mlplat, service.instance.id the installation's instance id.
CREATE FUNCTION mlplat._otlp_render(p_spans mlplat.spans[], p_instance text, p_version text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT pg_catalog.jsonb_build_object('resourceSpans', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
    'resource', pg_catalog.jsonb_build_object('attributes', pg_catalog.jsonb_build_array(
        pg_catalog.jsonb_build_object('key', 'service.name', 'value', pg_catalog.jsonb_build_object('stringValue', 'mlplat')),
        pg_catalog.jsonb_build_object('key', 'service.instance.id', 'value', pg_catalog.jsonb_build_object('stringValue', p_instance)))),
    'scopeSpans', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
        'scope', pg_catalog.jsonb_build_object('name', 'mlplat', 'version', p_version),
        'spans', coalesce((SELECT pg_catalog.jsonb_agg(mlplat._otlp_span(p_spans[i]) ORDER BY i)
                             FROM pg_catalog.generate_subscripts(p_spans, 1) AS i), '[]'::jsonb))))))
$$;
REVOKE ALL ON FUNCTION mlplat._otlp_render(mlplat.spans[], text, text) FROM PUBLIC;

-- ---------------------------------------------------------------- export (src/trace/export.c)

-- The oldest unexported spans, at most p_limit, rendered; no row when there are none.
-- Read by name through the seam (seam.h, src/trace/export.c).
CREATE TYPE mlplat.span_export_batch AS (ids bigint[], body text);
CREATE FUNCTION mlplat._spans_export_batch(p_limit int)
RETURNS SETOF mlplat.span_export_batch
LANGUAGE sql STABLE AS $$
  WITH b AS (SELECT s FROM mlplat.spans s WHERE s.exported_at IS NULL ORDER BY s.id LIMIT p_limit)
  SELECT pg_catalog.array_agg((b.s).id ORDER BY (b.s).id),
         mlplat._otlp_render(pg_catalog.array_agg(b.s ORDER BY (b.s).id), mlplat._instance_id(),
                             (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'mlplat'))::text
    FROM b
  HAVING pg_catalog.count(*) > 0
$$;
REVOKE ALL ON FUNCTION mlplat._spans_export_batch(int) FROM PUBLIC;

-- After a 2xx, or an answer that drops the batch for good: mark it exported (it leaves the
-- queue), if the exporter still leads (kind 'span_export', whose
-- leader runs the export).
CREATE FUNCTION mlplat._spans_mark_exported(p_ids bigint[], p_epoch bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  UPDATE mlplat.spans s SET exported_at = pg_catalog.now()
   WHERE s.id = ANY (p_ids) AND s.exported_at IS NULL
     AND mlplat._epoch_current('span_export', p_epoch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
REVOKE ALL ON FUNCTION mlplat._spans_mark_exported(bigint[], bigint) FROM PUBLIC;

-- The span exporter as an operator sees it: what waits, from the table (true across
-- restarts and failovers), and how its POSTs went, from shared memory (since this server
-- started; the span_export leader runs the exporter).  No exporter row without preload.
CREATE FUNCTION mlplat._span_export_state(
    OUT spans_sent bigint, OUT batches_sent bigint, OUT batches_failed bigint,
    OUT consecutive_failures int, OUT last_success timestamptz, OUT last_failure timestamptz,
    OUT next_attempt timestamptz, OUT last_error text)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_span_export_state';
REVOKE ALL ON FUNCTION mlplat._span_export_state() FROM PUBLIC;

-- Batches the collector refused for good (400 and other non-retryable answers) and the
-- spans in them or rejected by a partial success, since this server started.
CREATE FUNCTION mlplat._span_export_drops(OUT batches_dropped bigint, OUT spans_dropped bigint)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_span_export_drops';
REVOKE ALL ON FUNCTION mlplat._span_export_drops() FROM PUBLIC;

CREATE VIEW mlplat.span_export_status AS
SELECT coalesce(pg_catalog.current_setting('mlplat.otlp_endpoint', true), '') <> '' AS enabled,
       w.waiting AS spans_waiting,
       pg_catalog.now() - w.oldest AS oldest_waiting_age,
       x.spans_sent, x.batches_sent, x.batches_failed, x.consecutive_failures,
       x.last_success, x.last_failure, x.next_attempt, x.last_error,
       d.batches_dropped, d.spans_dropped
  -- the oldest by its start, not the first by id: a span recorded late (or backdated) that has
  -- waited longest is the one the age is about; the count scans the same rows anyway
  FROM (SELECT pg_catalog.count(*) AS waiting, pg_catalog.min(s.start_time) AS oldest
          FROM mlplat.spans s WHERE s.exported_at IS NULL) w
  LEFT JOIN mlplat._span_export_state() x ON true
  LEFT JOIN mlplat._span_export_drops() d ON true;
COMMENT ON VIEW mlplat.span_export_status IS
  'The OTLP span exporter: spans waiting and the oldest one''s age; POSTs sent and failed (retried) since this server started, batches and spans the collector refused for good (dropped), the last error and the next attempt.';
REVOKE ALL ON mlplat.span_export_status FROM PUBLIC;
