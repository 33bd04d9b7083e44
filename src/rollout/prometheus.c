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
	char	   *end;
	double		d;

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

bool
ml_prom_revision_query(MlPromMetric m, const char *ns, const char *revision, long long ms,
					   char *out, size_t size)
{
	char		sel[160];
	int			n;

	if (size > 0)
		out[0] = '\0';
	if (ns == NULL || revision == NULL || ms < 0 ||
		!mlplat_dns_label_is_valid(ns, strlen(ns), 63) ||
		!mlplat_dns_label_is_valid(revision, strlen(revision), 63))
		return false;
	snprintf(sel, sizeof(sel), "namespace_name=\"%s\",revision_name=\"%s\"", ns, revision);
	switch (m)
	{
		case ML_PROM_REQUESTS:
			n = snprintf(out, size, "sum(increase(revision_request_count{%s}[%lldms]))", sel, ms);
			break;
		case ML_PROM_ERRORS:
			n = snprintf(out, size, "sum(increase(revision_request_count{%s,response_code_class=\"5xx\"}[%lldms]))",
						 sel, ms);
			break;
		default:
			n = snprintf(out, size,
						 "histogram_quantile(0.95, sum by (le) (rate(revision_request_latencies_bucket{%s}[%lldms])))",
						 sel, ms);
			break;
	}
	if (n < 0 || (size_t) n >= size)
	{
		if (size > 0)
			out[0] = '\0';
		return false;
	}
	return true;
}
