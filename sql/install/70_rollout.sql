-- 70_rollout: the rollout decision function (pure, see docs/rollouts.md) and a
-- helper that stamps a record with its own content id.

CREATE FUNCTION mlplat.plan_rollout(contract jsonb, evidence jsonb)
RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_plan_rollout';
COMMENT ON FUNCTION mlplat.plan_rollout(jsonb, jsonb) IS
  'Validate a rollout contract and an evidence record, then decide exactly one transition: ADVANCE, HOLD or ROLLBACK (see docs/rollouts.md).';

CREATE FUNCTION mlplat.with_content_id(record jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
BEGIN
	IF pg_catalog.jsonb_typeof(record) <> 'object' THEN
		RAISE EXCEPTION 'with_content_id: record must be a JSON object, not %',
			pg_catalog.jsonb_typeof(record)
			USING ERRCODE = '22023',
			      DETAIL = 'Only an object can carry a content_id member.',
			      HINT = 'Pass the contract or evidence object itself.';
	END IF;
	RETURN record || pg_catalog.jsonb_build_object('content_id',
		mlplat.content_id(record, 'content_id'));
END
$$;
COMMENT ON FUNCTION mlplat.with_content_id(jsonb) IS
  'record with content_id set to the content id of record without its content_id member.';
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
