-- 0.2.0 -> 0.3.0: span_export_status.oldest_waiting_age is the age of the oldest waiting span
-- by its start time, not of the waiting span with the lowest id.  After part 70, which also
-- redefines the view.

CREATE OR REPLACE VIEW mlplat.span_export_status AS
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
