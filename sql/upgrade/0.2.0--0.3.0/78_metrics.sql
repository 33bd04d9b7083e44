-- 0.2.0 -> 0.3.0, part 78: the metrics functions for the Prometheus PostgreSQL exporter
-- (see sql/install/92_metrics.sql).

-- One row per reconciler replica.  Ages and durations in seconds; NULL when the
-- replica has not finished a pass yet (the exporter shows NaN).
CREATE FUNCTION mlplat.metrics_reconcilers()
RETURNS TABLE (kind text, replica text, leader int, idle int, epoch bigint, last_pass_duration_seconds float8,
                seconds_since_last_pass float8, passes bigint, pass_errors bigint, pending bigint,
                oldest_pending_age_seconds float8, errors_last_hour bigint, http_requests bigint,
                http_errors bigint, http_mean_latency_seconds numeric)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
SELECT h.kind, h.replica::text AS replica,
       (h.role = 'leader')::int AS leader,
       (h.role = 'idle')::int AS idle,
       h.epoch,
       pg_catalog.date_part('epoch', h.last_pass_duration) AS last_pass_duration_seconds,
       pg_catalog.date_part('epoch', pg_catalog.now() - h.last_pass_end) AS seconds_since_last_pass,
       h.passes, h.pass_errors, h.pending,
       coalesce(pg_catalog.date_part('epoch', h.oldest_pending_age), 0) AS oldest_pending_age_seconds,
       h.errors_last_hour, h.http_requests, h.http_errors,
       h.http_mean_latency_ms / 1000.0 AS http_mean_latency_seconds
  FROM mlplat.reconciler_health h
$$;
COMMENT ON FUNCTION mlplat.metrics_reconcilers() IS
  'Reconciler health as numbers (for the Prometheus PostgreSQL exporter): leader, pass duration and age, pending work, errors, HTTP counts.';

-- Queue depth: live entities of each kind by status, how many of them carry intent the
-- reconciler has not observed yet, and the age of the oldest change among them.
CREATE FUNCTION mlplat.metrics_queues()
RETURNS TABLE (kind text, status text, entities bigint, unobserved bigint, oldest_change_age_seconds float8)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
SELECT e.kind, e.status, pg_catalog.count(*) AS entities,
       pg_catalog.count(*) FILTER (WHERE e.generation <> e.observed_generation) AS unobserved,
       pg_catalog.date_part('epoch', pg_catalog.now() - pg_catalog.min(e.updated_at)) AS oldest_change_age_seconds
  FROM mlplat._entities e
 GROUP BY e.kind, e.status
$$;
COMMENT ON FUNCTION mlplat.metrics_queues() IS
  'Live entities per kind and status (queue depth), those with unobserved intent, and the oldest change''s age.';

-- Rows of mlplat.alerts counted per condition, severity and kind (no detail text).
CREATE FUNCTION mlplat.metrics_alerts()
RETURNS TABLE (alert text, severity text, kind text, firing bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
SELECT a.alert, a.severity, a.kind, pg_catalog.count(*) AS firing
  FROM mlplat.alerts a
 GROUP BY a.alert, a.severity, a.kind
$$;
COMMENT ON FUNCTION mlplat.metrics_alerts() IS
  'How many rows of mlplat.alerts each condition has now, per severity and kind.';

-- The span exporter: backlog, lag of the oldest waiting span, counters since start.
CREATE FUNCTION mlplat.metrics_span_export()
RETURNS TABLE (enabled int, spans_waiting bigint, lag_seconds float8, spans_sent bigint, batches_sent bigint,
                batches_failed bigint, consecutive_failures int, batches_dropped bigint, spans_dropped bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
SELECT x.enabled::int AS enabled, x.spans_waiting,
       coalesce(pg_catalog.date_part('epoch', x.oldest_waiting_age), 0) AS lag_seconds,
       coalesce(x.spans_sent, 0) AS spans_sent, coalesce(x.batches_sent, 0) AS batches_sent,
       coalesce(x.batches_failed, 0) AS batches_failed,
       coalesce(x.consecutive_failures, 0) AS consecutive_failures,
       coalesce(x.batches_dropped, 0) AS batches_dropped, coalesce(x.spans_dropped, 0) AS spans_dropped
  FROM mlplat.span_export_status x
$$;
COMMENT ON FUNCTION mlplat.metrics_span_export() IS
  'The OTLP span exporter as numbers: spans waiting, the oldest one''s wait (export lag), batches sent, failed (retried) and dropped.';

REVOKE ALL ON FUNCTION mlplat.metrics_reconcilers(), mlplat.metrics_queues(), mlplat.metrics_alerts(),
                       mlplat.metrics_span_export() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mlplat.metrics_reconcilers(), mlplat.metrics_queues(), mlplat.metrics_alerts(),
                          mlplat.metrics_span_export() TO pg_monitor;