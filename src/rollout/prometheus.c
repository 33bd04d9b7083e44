/*
 * prometheus.c — classify one /api/v1/query answer (see mlplat/prometheus.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/prometheus.h"
#include "mlplat/validate.h"

static MlPromOutcome
set(MlPromResult *out, MlPromOutcome o, const char *why)
{
	out->outcome = o;
	snprintf(out->why, sizeof(out->why), "%s", why);
	return o;
}

/* A sample's value: [ <time number>, "<value string>" ]. */
static MlPromOutcome
sample_value(const MlJsonValue *pair, MlPromResult *out)
{
	const MlJsonValue *v;
	char *end;
	double d;

	if (pair == NULL || pair->type != ML_JSON_ARRAY || pair->u.array.count != 2)
		return set(out, ML_PROM_ERROR, "sample is not a [time, value] pair");
	v = pair->u.array.items[1];
	if (v->type != ML_JSON_STRING || v->u.string.len == 0)
		return set(out, ML_PROM_ERROR, "sample value is not a string");
	/* Prometheus writes NaN, +Inf and -Inf as such; strtod reads all three */
	d = strtod(v->u.string.str, &end);
	if (*end != '\0')
		return set(out, ML_PROM_ERROR, "sample value is not a number");
	if (!isfinite(d))
		return set(out, ML_PROM_NOT_FINITE, isnan(d) ? "value is NaN (no requests in the range?)" : "value is infinite");
	out->value = d;
	out->outcome = ML_PROM_VALUE;
	out->why[0] = '\0';
	return ML_PROM_VALUE;
}

MlPromOutcome
ml_prom_parse_instant(MlJsonArena *arena, int http_status, const char *body, size_t len, MlPromResult *out)
{
	MlJsonValue *root;
	MlJsonError err;
	const MlJsonValue *st,
		*data,
		*rtype,
		*result;

	memset(out, 0, sizeof(*out));
	if (http_status == 0 || body == NULL)
		return set(out, ML_PROM_ERROR, "no answer from Prometheus");
	root = ml_json_parse(arena, body, len, NULL, &err);
	if (root == NULL || root->type != ML_JSON_OBJECT)
	{
		snprintf(out->why, sizeof(out->why), "HTTP %d: answer is not a JSON object", http_status);
		out->outcome = ML_PROM_ERROR;
		return ML_PROM_ERROR;
	}
	st = ml_json_object_get(root, "status");
	if (st == NULL || st->type != ML_JSON_STRING || strcmp(st->u.string.str, "success") != 0)
	{
		const MlJsonValue *et = ml_json_object_get(root, "errorType");
		const MlJsonValue *e = ml_json_object_get(root, "error");

		const char *ets = et && et->type == ML_JSON_STRING ? et->u.string.str : "error";
		const char *es = e && e->type == ML_JSON_STRING ? e->u.string.str : "no error message";

		/* cut on a character boundary: the line goes into a text column as it is */
		snprintf(out->why, sizeof(out->why), "HTTP %d: %.*s: %.*s", http_status,
				 (int) ml_utf8_clip(ets, strlen(ets), 32), ets, (int) ml_utf8_clip(es, strlen(es), 150), es);
		out->outcome = ML_PROM_ERROR;
		return ML_PROM_ERROR;
	}
	data = ml_json_object_get(root, "data");
	rtype = ml_json_object_get(data, "resultType");
	result = ml_json_object_get(data, "result");
	if (rtype == NULL || rtype->type != ML_JSON_STRING || result == NULL)
		return set(out, ML_PROM_ERROR, "success without data.resultType and data.result");
	if (strcmp(rtype->u.string.str, "scalar") == 0)
		return sample_value(result, out);
	if (strcmp(rtype->u.string.str, "vector") != 0 || result->type != ML_JSON_ARRAY)
		return set(out, ML_PROM_ERROR, "result is neither a vector nor a scalar");
	if (result->u.array.count == 0)
		return set(out, ML_PROM_EMPTY, "no sample (no series matched, or too few scrapes in the range)");
	if (result->u.array.count > 1)
		return set(out, ML_PROM_ERROR, "more than one series: the query must aggregate");
	return sample_value(ml_json_object_get(result->u.array.items[0], "value"), out);
}

const char *
ml_prom_outcome_name(MlPromOutcome o)
{
	switch (o)
	{
		case ML_PROM_VALUE:
			return "value";
		case ML_PROM_EMPTY:
			return "empty";
		case ML_PROM_NOT_FINITE:
			return "not_finite";
		case ML_PROM_ERROR:
			return "error";
	}
	return "error";
}

static const char *const PRESET_NAMES[ML_PROM_PRESET_COUNT] = {
	"knative-opencensus", "knative-otel", "vllm", "triton"
};

const char *
ml_prom_preset_name(MlPromPreset p)
{
	return (int) p >= 0 && p < ML_PROM_PRESET_COUNT ? PRESET_NAMES[p] : "knative-opencensus";
}

bool
ml_prom_preset_from_name(const char *name, MlPromPreset *out)
{
	for (int i = 0; name && i < ML_PROM_PRESET_COUNT; i++)
		if (strcmp(name, PRESET_NAMES[i]) == 0)
		{
			*out = (MlPromPreset) i;
			return true;
		}
	return false;
}

bool
ml_prom_revision_query(MlPromMetric m, const char *ns, const char *revision, long long ms,
					   char *out, size_t size)
{
	return ml_prom_preset_query(ML_PROM_KNATIVE_OPENCENSUS, m, ns, revision, ms, out, size);
}

/*
 * The error count of a revision: the 5xx series' increase, or 0 when the
 * revision has request series but none of them is a 5xx one yet (a counter
 * series appears at its first increment), and empty (missing) when it has no
 * series at all.
 */
#define ERRORS_OR_ZERO(err, all) "(" err ") or (0 * " all ")"

bool
ml_prom_preset_query(MlPromPreset p, MlPromMetric m, const char *ns, const char *revision, long long ms,
					 char *out, size_t size)
{
	char sel[200];
	char all[400];
	int n = -1;

	if (size > 0)
		out[0] = '\0';
	if (ns == NULL || revision == NULL || ms < 0 || (int) p < 0 || p >= ML_PROM_PRESET_COUNT ||
		!mlplat_dns_label_is_valid(ns, strlen(ns), 63) ||
		!mlplat_dns_label_is_valid(revision, strlen(revision), 63))
		return false;
	switch (p)
	{
		case ML_PROM_KNATIVE_OPENCENSUS:
			snprintf(sel, sizeof(sel), "namespace_name=\"%s\",revision_name=\"%s\"", ns, revision);
			snprintf(all, sizeof(all), "sum(increase(revision_request_count{%s}[%lldms]))", sel, ms);
			if (m == ML_PROM_REQUESTS)
				n = snprintf(out, size, "%s", all);
			else if (m == ML_PROM_ERRORS)
				n = snprintf(out, size, ERRORS_OR_ZERO("sum(increase(revision_request_count{%s,response_code_class=\"5xx\"}[%lldms]))", "%s"),
							 sel, ms, all);
			else
				n = snprintf(out, size,
							 "histogram_quantile(0.95, sum by (le) (rate(revision_request_latencies_bucket{%s}[%lldms])))",
							 sel, ms);
			break;
		case ML_PROM_KNATIVE_OTEL:
			snprintf(sel, sizeof(sel), "k8s_namespace_name=\"%s\",kn_revision_name=\"%s\"", ns, revision);
			snprintf(all, sizeof(all), "sum(increase(kn_serving_invocation_duration_seconds_count{%s}[%lldms]))", sel, ms);
			if (m == ML_PROM_REQUESTS)
				n = snprintf(out, size, "%s", all);
			else if (m == ML_PROM_ERRORS)
				n = snprintf(out, size, ERRORS_OR_ZERO("sum(increase(kn_serving_invocation_duration_seconds_count{%s,http_response_status_code=~\"5..\"}[%lldms]))", "%s"),
							 sel, ms, all);
			else
				n = snprintf(out, size,
							 "1000 * histogram_quantile(0.95, sum by (le) (rate(kn_serving_invocation_duration_seconds_bucket{%s}[%lldms])))",
							 sel, ms);
			break;
		case ML_PROM_VLLM:
			snprintf(sel, sizeof(sel), "namespace=\"%s\",pod=~\"%s-.*\"", ns, revision);
			/* vLLM counts completed requests in its latency histogram; failed ones are its HTTP server's 5xx */
			if (m == ML_PROM_REQUESTS)
				n = snprintf(out, size,
							 "sum(increase(vllm:e2e_request_latency_seconds_count{%s}[%lldms])) + "
							 "(sum(increase(http_requests_total{%s,status=\"5xx\"}[%lldms])) or vector(0))",
							 sel, ms, sel, ms);
			else if (m == ML_PROM_ERRORS)
				n = snprintf(out, size, ERRORS_OR_ZERO("sum(increase(http_requests_total{%s,status=\"5xx\"}[%lldms]))", "sum(increase(vllm:e2e_request_latency_seconds_count{%s}[%lldms]))"),
							 sel, ms, sel, ms);
			else
				n = snprintf(out, size,
							 "1000 * histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{%s}[%lldms])))",
							 sel, ms);
			break;
		default:
			snprintf(sel, sizeof(sel), "namespace=\"%s\",pod=~\"%s-.*\"", ns, revision);
			if (m == ML_PROM_REQUESTS)
				n = snprintf(out, size,
							 "sum(increase(nv_inference_request_success{%s}[%lldms])) + "
							 "(sum(increase(nv_inference_request_failure{%s}[%lldms])) or vector(0))",
							 sel, ms, sel, ms);
			else if (m == ML_PROM_ERRORS)
				n = snprintf(out, size, ERRORS_OR_ZERO("sum(increase(nv_inference_request_failure{%s}[%lldms]))", "sum(increase(nv_inference_request_success{%s}[%lldms]))"),
							 sel, ms, sel, ms);
			else
				n = snprintf(out, size,
							 "sum(increase(nv_inference_request_duration_us{%s}[%lldms])) / "
							 "sum(increase(nv_inference_request_success{%s}[%lldms])) / 1000",
							 sel, ms, sel, ms);
			break;
	}
	(void) all;
	if (n < 0 || (size_t) n >= size)
	{
		if (size > 0)
			out[0] = '\0';
		return false;
	}
	return true;
}
