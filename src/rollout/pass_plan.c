/*
 * pass_plan.c — a due rollout decision in the pass: the evidence record,
 * its content id, plan_rollout and the status after it (see
 * include/mlplat/rollout_pass_plan.h).  Pure C.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/rollout_pass_plan.h"

/* A growable text in the arena (sticky oom). */
typedef struct Out
{
	MlJsonArena *arena;
	char *data;
	size_t len;
	size_t cap;
	bool oom;
} Out;

static void
out_add(Out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap)
	{
		size_t cap = o->cap ? o->cap : 1024;
		char *d;

		while (o->len + n + 1 > cap)
			cap *= 2;
		d = ml_json_arena_alloc(o->arena, cap);
		if (d == NULL)
		{
			o->oom = true;
			return;
		}
		if (o->len)
			memcpy(d, o->data, o->len);
		o->data = d;
		o->cap = cap;
	}
	memcpy(o->data + o->len, s, n);
	o->len += n;
	o->data[o->len] = '\0';
}

static void
out_str(Out *o, const char *s)
{
	out_add(o, s, strlen(s));
}

static void
out_int(Out *o, int64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "%" PRId64, v);
	out_str(o, b);
}

/* v as canonical JSON (a string or the scope object: their text is the same either way); null if absent */
static void
out_value(Out *o, const MlJsonValue *v)
{
	const char *text;
	size_t len;
	MlJsonError err;

	if (v == NULL)
	{
		out_str(o, "null");
		return;
	}
	text = ml_json_canonical(o->arena, v, &len, &err);
	if (text == NULL)
		o->oom = true; /* a tree we parsed has finite numbers: only memory fails */
	else
		out_add(o, text, len);
}

static const MlJsonValue *
number_at(const MlJsonValue *obj, const char *key)
{
	const MlJsonValue *v = ml_json_object_get(obj, key);

	return v != NULL && v->type == ML_JSON_NUMBER ? v : NULL;
}

/*
 * A number's text without trailing fractional zeros, as SQL's trim_scale
 * prints it (the texts come from numeric's output or the pass's own
 * writer: plain decimals, no exponent).
 */
static void
out_trimmed(Out *o, const MlJsonValue *v)
{
	size_t n = v->u.number.text_len;
	const char *t = v->u.number.text;

	if (memchr(t, '.', n) != NULL && memchr(t, 'e', n) == NULL && memchr(t, 'E', n) == NULL)
	{
		while (n > 0 && t[n - 1] == '0')
			n--;
		if (n > 0 && t[n - 1] == '.')
			n--;
	}
	out_add(o, t, n);
}

/*
 * A whole number of the metrics (requests, errors), 0 when absent, as ::bigint
 * reads it; one beyond bigint's range (the pass never writes one, the SQL face
 * can be given one) is held at its end, not converted: that is undefined in C
 * (fuzz_rollout_pass_plan found it).
 */
static int64_t
count_at(const MlJsonValue *obj, const char *key)
{
	const MlJsonValue *v = number_at(obj, key);

	if (v == NULL)
		return 0;
	if (v->u.number.value >= 9223372036854775808.0) /* 2^63 */
		return INT64_MAX;
	if (v->u.number.value < -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t) v->u.number.value;
}

int64_t
ml_rollout_count(double value)
{
	if (!(value < 9223372036854775808.0)) /* 2^63, and NaN */
		return INT64_MAX;
	return value <= 0 ? 0 : (int64_t) llround(value);
}

static bool
str_is(const MlJsonValue *v, const char *s)
{
	return v != NULL && v->type == ML_JSON_STRING && s != NULL && strcmp(v->u.string.str, s) == 0;
}

/* One revision's part of the evidence (mlplat._rollout_evidence's target and previous). */
static void
out_revision(Out *o, int64_t replicas, bool ready, bool load_attempted, bool loaded, const MlJsonValue *at,
			 const MlJsonValue *m)
{
	const MlJsonValue *p95 = ml_json_object_get(m, "p95_ms");

	out_str(o, "{\"desired_replicas\":");
	out_int(o, replicas);
	out_str(o, ",\"ready_replicas\":");
	out_int(o, ready ? replicas : 0);
	out_str(o, ",\"load_attempts\":");
	out_int(o, load_attempted ? 1 : 0);
	out_str(o, ",\"load_successes\":");
	out_int(o, loaded ? 1 : 0);
	out_str(o, ",\"health_observed_at\":");
	if (ready && at != NULL)
		out_trimmed(o, at);
	else
		out_str(o, "null");
	out_str(o, ",\"requests\":");
	out_int(o, count_at(m, "requests"));
	out_str(o, ",\"errors\":");
	out_int(o, count_at(m, "errors"));
	/* copied as observed (the pass writes it with three decimals) */
	out_str(o, ",\"p95_ms\":");
	if (p95 != NULL && p95->type == ML_JSON_NUMBER)
		out_add(o, p95->u.number.text, p95->u.number.text_len);
	else
		out_value(o, p95 != NULL && p95->type != ML_JSON_NULL ? p95 : NULL);
	out_str(o, "}");
}

/*
 * The evidence record of the observation, without its content id, in the
 * members and number texts mlplat._rollout_evidence gave it.
 */
static void
write_evidence(Out *o, const MlRolloutPassPlanIn *in)
{
	const MlJsonValue *obs = in->observation;
	const MlJsonValue *at = number_at(obs, "observed_at");
	const MlJsonValue *m = ml_json_object_get(obs, "metrics");
	const MlJsonValue *ready = ml_json_object_get(obs, "ready");
	const MlJsonValue *load = ml_json_object_get(obs, "load");
	const MlJsonValue *traffic = ml_json_object_get(obs, "traffic");
	const MlJsonValue *ws = number_at(m, "window_start");
	const MlJsonValue *wsec = number_at(m, "window_seconds");
	bool t_ready = ready != NULL && ready->type == ML_JSON_BOOL && ready->u.boolean &&
				   str_is(ml_json_object_get(obs, "latest_ready_kn"), in->target_kn);
	bool p_ready = false;
	bool attempted = str_is(load, "UpToDate") || str_is(load, "BlockedByFailedLoad");

	if (traffic != NULL && traffic->type == ML_JSON_ARRAY)
		for (size_t i = 0; i < traffic->u.array.count && !p_ready; i++)
			p_ready = str_is(ml_json_object_get(traffic->u.array.items[i], "revision"), in->previous_kn);

	out_str(o, "{\"contract_content_id\":");
	out_value(o, ml_json_object_get(in->contract, "content_id"));
	out_str(o, ",\"scope\":");
	out_value(o, ml_json_object_get(in->contract, "scope"));
	out_str(o, ",\"observed_at\":");
	if (at)
		out_trimmed(o, at);
	else
		out_str(o, "null");
	out_str(o, ",\"current_fraction\":");
	out_str(o, in->fraction ? in->fraction : "0");
	out_str(o, ",\"window_start\":");
	if (ws || at)
		out_trimmed(o, ws ? ws : at);
	else
		out_str(o, "null");
	out_str(o, ",\"window_seconds\":");
	if (wsec)
		out_trimmed(o, wsec);
	else
		out_str(o, "0");
	out_str(o, ",\"target\":");
	out_revision(o, in->target_replicas, t_ready, attempted, str_is(load, "UpToDate"), at,
				 ml_json_object_get(m, "target"));
	out_str(o, ",\"previous\":");
	out_revision(o, in->previous_replicas, p_ready, p_ready, p_ready, at, ml_json_object_get(m, "previous"));
	out_str(o, ",\"desired_capacity\":");
	out_int(o, in->target_replicas + in->previous_replicas);
	out_str(o, "}");
}

MlRolloutStatus
ml_rollout_pass_plan(MlJsonArena *arena, const MlRolloutPassPlanIn *in, MlRolloutPassPlan *out)
{
	Out o = { .arena = arena };
	MlJsonError jerr;
	MlRolloutError err;
	const MlJsonValue *record;
	MlRolloutStatus st;

	memset(out, 0, sizeof(*out));
	write_evidence(&o, in);
	if (o.oom)
		return ML_ROLLOUT_NOMEM;
	/* its content id (mlplat.with_content_id): the canonical text's, then the record carries it */
	record = ml_json_parse(arena, o.data, o.len, NULL, &jerr);
	if (record == NULL || !ml_json_content_id(arena, record, out->evidence_content_id, &jerr))
	{
		if (jerr.code == ML_JSON_ERR_NOMEM)
			return ML_ROLLOUT_NOMEM;
		out->refused = true;
		snprintf(out->refusal, sizeof(out->refusal), "invalid rollout evidence: %s", jerr.message);
		return ML_ROLLOUT_OK;
	}
	o.len--; /* the closing brace */
	out_str(&o, ",\"content_id\":\"");
	out_str(&o, out->evidence_content_id);
	out_str(&o, "\"}");
	if (o.oom)
		return ML_ROLLOUT_NOMEM;
	out->evidence = o.data;
	out->evidence_len = o.len;
	record = ml_json_parse(arena, o.data, o.len, NULL, &jerr);
	if (record == NULL)
		return ML_ROLLOUT_NOMEM; /* it parsed without the id */
	if (in->contract == NULL)
	{
		out->refused = true;
		snprintf(out->refusal, sizeof(out->refusal), "invalid rollout contract: the rollout has none");
		return ML_ROLLOUT_OK;
	}
	st = ml_rollout_plan(arena, in->contract, record, &out->plan, &err);
	if (st == ML_ROLLOUT_NOMEM)
		return st;
	if (st != ML_ROLLOUT_OK)
	{
		/* as plan_rollout's SQL error says it */
		out->refused = true;
		snprintf(out->refusal, sizeof(out->refusal), "invalid rollout %s: %s", err.path, err.message);
		return ML_ROLLOUT_OK;
	}
	out->decision = ml_rollout_decision_name(out->plan.decision);
	for (int i = 0; i < ML_REASON_COUNT; i++)
		if (out->plan.reasons & (1u << i))
			out->reasons[out->nreasons++] = ml_rollout_reason_name(i);
	if (ml_json_format_number(out->plan.next_fraction, out->next_fraction) == 0)
		return ML_ROLLOUT_NOMEM; /* validated finite: cannot happen */
	if (!ml_rollout_after_plan(out->decision, out->reasons, out->nreasons, in->window_seconds, in->observed_at_ms,
							   &out->after))
		return ML_ROLLOUT_NOMEM; /* one of the three: cannot happen */
	return ML_ROLLOUT_OK;
}
