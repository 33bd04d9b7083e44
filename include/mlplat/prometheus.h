/*
 * prometheus.h — reading one answer of Prometheus's instant-query API
 * (GET /api/v1/query), pure: no PostgreSQL headers, no I/O.
 *
 * The rollouts reconciler asks for one number per query (a sum, a rate, a
 * quantile).  Anything that is not a finite number is missing evidence, never
 * zero: an error answer ({"status":"error","errorType":...,"error":...}), an
 * empty vector (no series matched, or too few samples in the range), NaN
 * (histogram_quantile over no requests) and ±Inf.  The caller turns missing
 * evidence into a HOLD; only numbers can show a regression.
 */
#ifndef MLPLAT_PROMETHEUS_H
#define MLPLAT_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>

#include "mlplat/json.h"

typedef enum MlPromOutcome
{
	ML_PROM_VALUE = 0,	/* a finite number in value */
	ML_PROM_EMPTY,		/* success, but no sample */
	ML_PROM_NOT_FINITE, /* NaN or ±Inf */
	ML_PROM_ERROR		/* an error answer, or not Prometheus's shape */
} MlPromOutcome;

typedef struct MlPromResult
{
	MlPromOutcome outcome;
	double value;
	char why[200]; /* for anything but ML_PROM_VALUE: one line */
} MlPromResult;

/*
 * Classify the body of an instant query answered with HTTP status http_status
 * (0: no response; then body may be NULL).  A vector must hold at most one
 * sample (queries aggregate with sum); scalars are accepted too.
 */
extern MlPromOutcome ml_prom_parse_instant(MlJsonArena *arena, int http_status, const char *body,
										   size_t len, MlPromResult *out);

/* The numbers asked for per KServe revision, in the order of the queries. */
typedef enum MlPromMetric
{
	ML_PROM_REQUESTS = 0, /* requests in the range */
	ML_PROM_ERRORS,		  /* 5xx answers in the range */
	ML_PROM_P95,		  /* 95th percentile latency, ms */
	ML_PROM_METRIC_COUNT
} MlPromMetric;

/*
 * Write the PromQL of one number of one revision over the last ms milliseconds
 * into out.  The namespace and the revision name come from Kubernetes objects
 * (the revision from an InferenceService's status, which anyone who can write
 * the status controls): both must be DNS-1123 labels of at most 63 characters,
 * so nothing in them can close the label matcher's string.  False (out is "")
 * when one is not, or when out is too small: the query is not asked.
 */
extern bool ml_prom_revision_query(MlPromMetric m, const char *ns, const char *revision, long long ms,
								   char *out, size_t size);

/*
 * Which serving stack's metrics the queries read (mlplat.metrics_preset):
 *   KNATIVE_OPENCENSUS  Knative <= 1.18 queue-proxy: revision_request_count,
 *                       revision_request_latencies (ms), by namespace_name and
 *                       revision_name (the default; ml_prom_revision_query)
 *   KNATIVE_OTEL        Knative >= 1.19 queue-proxy, OpenTelemetry names:
 *                       kn_serving_invocation_duration_seconds, by
 *                       k8s_namespace_name and kn_revision_name (seconds)
 *   VLLM                RawDeployment, vLLM's own metrics: completed requests and
 *                       vllm:e2e_request_latency_seconds, 5xx from its HTTP server,
 *                       by namespace and the revision's pods (pod=~"<rev>-.*")
 *   TRITON              RawDeployment, Triton's own: nv_inference_request_success /
 *                       _failure and nv_inference_request_duration_us (Triton
 *                       publishes no latency histogram by default: the latency is
 *                       the mean, not the 95th percentile), by namespace and pods
 * Every preset answers in the same units (requests, 5xx answers, ms), and its
 * error count is 0, not missing, when the revision served requests but no
 * error series exists yet (counters appear at their first increment).
 */
typedef enum MlPromPreset
{
	ML_PROM_KNATIVE_OPENCENSUS = 0,
	ML_PROM_KNATIVE_OTEL,
	ML_PROM_VLLM,
	ML_PROM_TRITON,
	ML_PROM_PRESET_COUNT
} MlPromPreset;

/* "knative-opencensus", "knative-otel", "vllm", "triton" */
extern const char *ml_prom_preset_name(MlPromPreset p);
/* false when name is none of those */
extern bool ml_prom_preset_from_name(const char *name, MlPromPreset *out);

/* ml_prom_revision_query for one preset (same checks on ns and revision). */
extern bool ml_prom_preset_query(MlPromPreset p, MlPromMetric m, const char *ns, const char *revision,
								 long long ms, char *out, size_t size);

/* "value", "empty", "not_finite", "error" */
extern const char *ml_prom_outcome_name(MlPromOutcome o);

#endif /* MLPLAT_PROMETHEUS_H */
