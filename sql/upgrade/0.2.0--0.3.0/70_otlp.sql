-- 0.2.0 -> 0.3.0, part 70: OTLP as the specification says (see src/trace/export.c):
-- API spans leave a success UNSET, and span_export_status shows the batches and spans
-- the collector refused for good.

CREATE OR REPLACE FUNCTION mlplat._span_api(p_action text, p_traceparent text, p_project_id bigint,
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

-- Batches the collector refused for good (400 and other non-retryable answers) and the
-- spans in them or rejected by a partial success, since this server started.
CREATE FUNCTION mlplat._span_export_drops(OUT batches_dropped bigint, OUT spans_dropped bigint)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_span_export_drops';
REVOKE ALL ON FUNCTION mlplat._span_export_drops() FROM PUBLIC;

CREATE OR REPLACE VIEW mlplat.span_export_status AS
SELECT coalesce(pg_catalog.current_setting('mlplat.otlp_endpoint', true), '') <> '' AS enabled,
       w.waiting AS spans_waiting,
       pg_catalog.now() - (SELECT s.start_time FROM mlplat.spans s WHERE s.exported_at IS NULL
                            ORDER BY s.id LIMIT 1) AS oldest_waiting_age,
       x.spans_sent, x.batches_sent, x.batches_failed, x.consecutive_failures,
       x.last_success, x.last_failure, x.next_attempt, x.last_error,
       d.batches_dropped, d.spans_dropped
  FROM (SELECT pg_catalog.count(*) AS waiting FROM mlplat.spans s WHERE s.exported_at IS NULL) w
  LEFT JOIN mlplat._span_export_state() x ON true
  LEFT JOIN mlplat._span_export_drops() d ON true;
COMMENT ON VIEW mlplat.span_export_status IS
  'The OTLP span exporter: spans waiting and the oldest one''s age; POSTs sent and failed (retried) since this server started, batches and spans the collector refused for good (dropped), the last error and the next attempt.';
