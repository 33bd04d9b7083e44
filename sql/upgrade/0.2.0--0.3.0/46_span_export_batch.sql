-- 0.2.0 -> 0.3.0: the span exporter reads its batch through the seam (seam.h):
-- _spans_export_batch returns mlplat.span_export_batch rows (a new return type: drop and create).
DROP FUNCTION mlplat._spans_export_batch(int);
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
