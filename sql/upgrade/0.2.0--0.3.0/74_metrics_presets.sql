-- 0.2.0 -> 0.3.0, part 74: metrics presets for rollout evidence (issue 17 item 4).

-- What the rollouts reconciler asks Prometheus for one revision (src/rollout/queries_sql.c):
-- the requests, 5xx answers and p95 latency (ms) queries of a metrics preset (NULL: the
-- mlplat.metrics_preset setting), for an operator to check against their own Prometheus.
CREATE FUNCTION mlplat.evidence_queries(namespace text, revision text, window_ms bigint, preset text DEFAULT NULL,
                                        OUT preset_used text, OUT metric text, OUT query text)
RETURNS SETOF record
LANGUAGE C STABLE
AS 'MODULE_PATHNAME', 'mlplat_evidence_queries';
COMMENT ON FUNCTION mlplat.evidence_queries(text, text, bigint, text) IS
  'The PromQL of rollout evidence for one revision under a metrics preset (knative-opencensus, knative-otel, vllm, triton).';
REVOKE ALL ON FUNCTION mlplat.evidence_queries(text, text, bigint, text) FROM PUBLIC;
