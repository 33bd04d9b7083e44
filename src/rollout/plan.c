/*
 * plan.c — the rollout decision function (see include/mlplat/rollout.h and
 * docs/rollouts.md).  Pure: no PostgreSQL, no I/O, no clock.
 *
 * Structure: readers that validate one field at a time and fail with the
 * field's path and the rule it breaks; the binding checks between evidence
 * and contract; the decision; the canonical output.  Nothing is decided
 * until both records have been read completely.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"

/* Counts must be exact in a double (I-JSON, RFC 7493 §2.2). */
#define MAX_COUNT 9007199254740991.0

static const char *const reason_names[ML_REASON_COUNT] = {
	"ALL_GATES_PASSED",
	"AT_CEILING",
	"ERROR_RATE_ABOVE_MAX",
	"ERROR_RATE_INCREASE_ABOVE_MAX",
	"INSUFFICIENT_SAMPLES",
	"P95_ABOVE_MAX",
	"P95_INCREASE_ABOVE_MAX",
	"P95_MISSING",
	"PREVIOUS_NOT_WARM",
	"TARGET_HEALTH_MISSING",
	"TARGET_HEALTH_STALE",
	"TARGET_LOAD_INCOMPLETE",
	"TARGET_NOT_READY",
	"TRAFFIC_COMPLETE",
	"WINDOW_INCOMPLETE",
};

const char *
ml_rollout_reason_name(int reason)
{
	if (reason < 0 || reason >= ML_REASON_COUNT)
		return NULL;
	return reason_names[reason];
}

const char *
ml_rollout_decision_name(MlRolloutDecision d)
{
	switch (d)
	{
		case ML_ROLLOUT_ADVANCE:
			return "ADVANCE";
		case ML_ROLLOUT_HOLD:
			return "HOLD";
		case ML_ROLLOUT_ROLLBACK:
			return "ROLLBACK";
	}
	return "?";
}

/* ---- errors ----------------------------------------------------------- */

/* Default detail and hint per rule; callers may overwrite the detail. */
static const struct
{
	const char *rule;
	const char *detail;
	const char *hint;
}			rules[] = {
	{"not_object", "Contracts, evidence records and their parts are JSON objects.",
	"See docs/rollouts.md for the contract and evidence shapes."},
	{"missing_key", "Every field is required; where the shape allows it, an unknown value is written as null, never left out.",
	"See docs/rollouts.md for the complete list of fields."},
	{"unknown_key", "The shapes are closed so that a misspelt or misplaced field is never silently ignored.",
	"Remove the field or fix its name; see docs/rollouts.md."},
	{"boolean_number", "true and false are not counts or numbers, even though some languages treat them as 1 and 0.",
	"Write the number itself."},
	{"string_number", "Numbers written as strings (\"5\", \"0.2\") are refused, so a field's meaning never depends on how a string happens to parse.",
	"Write the value as a JSON number."},
	{"wrong_type", "Each field has exactly one JSON type (see docs/rollouts.md).",
	"Write the field with the type the shape requires."},
	{"not_finite", "Only finite numbers can be compared and hashed canonically.",
	"Write a finite number."},
	{"negative", "Counts, times and durations cannot be negative.",
	"Write a non-negative value."},
	{"not_integer", "Counts, epoch seconds and durations are whole numbers.",
	"Write an integer (a value such as 5.0 is accepted; 5.5 is not)."},
	{"sub_millisecond", "Evidence times and durations are seconds with at most millisecond precision, so every comparison between them is exact.",
	"Round the time to whole milliseconds (at most 3 decimals)."},
	{"out_of_range", "The value is outside the range the field allows.",
	"See docs/rollouts.md for each field's range."},
	{"bad_format", "The string does not have the required form.",
	"See docs/rollouts.md for each field's form."},
	{"inconsistent", "The record contradicts itself.",
	"Fix the record where the observation was assembled; a record that contradicts itself cannot be trusted for a traffic decision."},
	{"content_id_mismatch", "A record's content_id is the content id (SHA-256 of RFC 8785 canonical JSON) of the record without its content_id member.",
	"Recompute the id from the record's final content, e.g. with mlplat.with_content_id(record)."},
	{"contract_mismatch", "Evidence is bound to exactly one contract by the contract's content id.",
	"Gather evidence for this contract, or decide with the contract the evidence was gathered for."},
	{"scope_mismatch", "Evidence must describe the same project, deployment, revisions, model and configuration as the contract.",
	"Gather evidence for this contract's scope."},
	{"overcommit", "Desired replicas of target and previous revisions plus the rollback headroom and the surge must fit in the capacity quota; surge must never consume rollback headroom.",
	"Lower the desired replicas or the surge, or raise capacity_quota_replicas in a new contract."},
	{"above_ceiling", "Traffic on the target revision already exceeds what the contract allows.",
	"Bring traffic back to at most the ceiling before deciding; this needs a person, not an automatic step."},
	{"nomem", "The allocator refused memory.", "Retry with more memory."},
};

static bool
set_error(MlRolloutError *err, const char *rule, const char *parent, const char *key,
		  const char *fmt,...) __attribute__((format(printf, 5, 6)));

/* Fill *err; always returns false so callers can write "return set_error(...)". */
static bool
set_error(MlRolloutError *err, const char *rule, const char *parent, const char *key,
		  const char *fmt,...)
{
	va_list		ap;

	err->rule = rule;
	if (key != NULL && key[0] == '[')
		snprintf(err->path, sizeof(err->path), "%s%s", parent, key);
	else if (key != NULL)
		snprintf(err->path, sizeof(err->path), "%s.%s", parent, key);
	else
		snprintf(err->path, sizeof(err->path), "%s", parent);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	err->detail[0] = '\0';
	err->hint[0] = '\0';
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
	{
		if (strcmp(rules[i].rule, rule) == 0)
		{
			snprintf(err->detail, sizeof(err->detail), "%s", rules[i].detail);
			snprintf(err->hint, sizeof(err->hint), "%s", rules[i].hint);
			break;
		}
	}
	return false;
}

static void
set_detail(MlRolloutError *err, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static void
set_detail(MlRolloutError *err, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

/* A number as canonical JSON writes it (for messages). */
typedef struct NumText
{
	char		s[32];
} NumText;

static NumText
num(double d)
{
	NumText		t;

	if (ml_json_format_number(d, t.s) == 0)
		snprintf(t.s, sizeof(t.s), "non-finite");
	return t;
}

/* ---- field readers ---------------------------------------------------- */

typedef struct Reader
{
	MlRolloutError *err;
	bool		nomem;
} Reader;

/*
 * obj must be an object whose keys are exactly `keys` (NULL-terminated):
 * unknown keys are refused first (in key order, so the error is stable),
 * then missing ones (in the order of `keys`).
 */
static bool
check_keys(Reader *r, const MlJsonValue *obj, const char *path, const char *const *keys)
{
	size_t		n = 0;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return set_error(r->err, "not_object", path, NULL, "must be an object, not %s",
						 obj ? ml_json_type_name(obj->type) : "absent");

	/*
	 * The usual case, in one pass: the key index (in byte order) is exactly
	 * `keys` (listed in byte order).  Anything else is sorted out below.
	 */
	for (; keys[n] != NULL && n < obj->u.object.count; n++)
	{
		const MlJsonMember *m = obj->u.object.by_key[n];

		if (m->key_len != strlen(keys[n]) || memcmp(m->key, keys[n], m->key_len) != 0)
			break;
	}
	if (keys[n] == NULL && n == obj->u.object.count)
		return true;

	for (size_t i = 0; i < obj->u.object.count; i++)
	{
		const MlJsonMember *m = obj->u.object.by_key[i];
		bool		known = false;

		for (const char *const *k = keys; *k != NULL; k++)
		{
			if (strlen(*k) == m->key_len && memcmp(*k, m->key, m->key_len) == 0)
			{
				known = true;
				break;
			}
		}
		if (!known)
		{
			char		shown[64];
			size_t		n = m->key_len < sizeof(shown) - 1 ? m->key_len : sizeof(shown) - 1;

			/*
			 * show at most 63 bytes of the key; controls and non-ASCII bytes
			 * as '?', so a cut never leaves broken UTF-8 in the message
			 */
			for (size_t j = 0; j < n; j++)
			{
				unsigned char ch = (unsigned char) m->key[j];

				shown[j] = (ch < 0x20 || ch >= 0x7f) ? '?' : (char) ch;
			}
			shown[n] = '\0';
			return set_error(r->err, "unknown_key", path, NULL,
							 "has an unknown field \"%s\"", shown);
		}
	}
	for (const char *const *k = keys; *k != NULL; k++)
	{
		if (ml_json_object_get(obj, *k) == NULL)
			return set_error(r->err, "missing_key", path, *k, "is missing");
	}
	return true;
}

/* A number field; type rules shared by counts, fractions and thresholds. */
static bool
read_number(Reader *r, const MlJsonValue *v, const char *parent, const char *key,
			const char *what, double *out)
{
	if (v->type == ML_JSON_BOOL)
		return set_error(r->err, "boolean_number", parent, key,
						 "must be %s, not a boolean", what);
	if (v->type == ML_JSON_STRING)
		return set_error(r->err, "string_number", parent, key,
						 "must be %s, not a string (even one that looks like a number)", what);
	if (v->type != ML_JSON_NUMBER)
		return set_error(r->err, "wrong_type", parent, key,
						 "must be %s, not %s", what, ml_json_type_name(v->type));
	/* the parser refuses NaN and Infinity; guard anyway */
	if (!isfinite(v->u.number.value))
		return set_error(r->err, "not_finite", parent, key, "must be a finite number");
	*out = v->u.number.value;
	return true;
}

/* A non-negative integer (count, epoch seconds, duration) within [min, 2^53). */
static bool
read_count_value(Reader *r, const MlJsonValue *v, const char *parent, const char *key,
				 int64_t min, int64_t *out)
{
	double		d;

	if (!read_number(r, v, parent, key, "a count (a non-negative integer)", &d))
		return false;
	if (d < 0)
		return set_error(r->err, "negative", parent, key,
						 "must not be negative (got %s)", num(d).s);
	if (d != floor(d))
		return set_error(r->err, "not_integer", parent, key,
						 "must be an integer (got %s)", num(d).s);
	if (d > MAX_COUNT)
		return set_error(r->err, "out_of_range", parent, key,
						 "must be at most 2^53-1 (got %s)", num(d).s);
	if (d < (double) min)
		return set_error(r->err, "out_of_range", parent, key,
						 "must be at least %lld (got %s)", (long long) min, num(d).s);
	*out = (int64_t) d;
	return true;
}

static bool
read_count(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
		   int64_t min, int64_t *out)
{
	return read_count_value(r, ml_json_object_get(obj, key), parent, key, min, out);
}

/* A time as the evidence writes it: seconds, the fraction in whole milliseconds. */
static NumText
secs(int64_t ms)
{
	NumText		t;
	int			n = snprintf(t.s, sizeof(t.s), "%lld.%03d", (long long) (ms / 1000), (int) (ms % 1000));

	while (t.s[n - 1] == '0')
		t.s[--n] = '\0';
	if (t.s[n - 1] == '.')
		t.s[n - 1] = '\0';
	return t;
}

/*
 * An evidence time (epoch seconds) or duration (seconds): a non-negative
 * number with at most millisecond precision, held as integer milliseconds so
 * every comparison stays exact.  Sub-second times let a window start when the
 * new split is observed instead of at the next whole second.  "Whole
 * milliseconds" is judged within a few units in the last place of the double
 * the JSON number parsed to, which is all the precision the number has.
 */
static bool
read_ms_value(Reader *r, const MlJsonValue *v, const char *parent, const char *key, int64_t *out)
{
	double		d,
				ms;

	if (!read_number(r, v, parent, key, "a number of seconds", &d))
		return false;
	if (d < 0)
		return set_error(r->err, "negative", parent, key,
						 "must not be negative (got %s)", num(d).s);
	if (d > MAX_COUNT / 1000.0)
		return set_error(r->err, "out_of_range", parent, key,
						 "must be at most (2^53-1)/1000 seconds (got %s)", num(d).s);
	ms = d * 1000.0;
	if (fabs(ms - nearbyint(ms)) > 4.0 * (nextafter(ms, INFINITY) - ms) + 1e-9)
		return set_error(r->err, "sub_millisecond", parent, key,
						 "must be seconds in whole milliseconds, at most 3 decimals (got %s)", num(d).s);
	*out = (int64_t) llround(ms);
	return true;
}

static bool
read_ms(Reader *r, const MlJsonValue *obj, const char *parent, const char *key, int64_t *out)
{
	return read_ms_value(r, ml_json_object_get(obj, key), parent, key, out);
}

/* An evidence time or null. */
static bool
read_ms_or_null(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
				bool *present, int64_t *out)
{
	const MlJsonValue *v = ml_json_object_get(obj, key);

	*present = v->type != ML_JSON_NULL;
	*out = 0;
	if (!*present)
		return true;
	return read_ms_value(r, v, parent, key, out);
}

/*
 * A number within [lo, hi] (hi may be INFINITY); lo_open makes the lower
 * bound exclusive.
 */
static bool
read_ranged_value(Reader *r, const MlJsonValue *v, const char *parent, const char *key,
				  double lo, bool lo_open, double hi, const char *range_text, double *out)
{
	double		d;

	if (!read_number(r, v, parent, key, "a number", &d))
		return false;
	if (d < lo || (lo_open && d == lo) || d > hi)
		return set_error(r->err, "out_of_range", parent, key,
						 "must be %s (got %s)", range_text, num(d).s);
	*out = d;
	return true;
}

static bool
read_ranged(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
			double lo, bool lo_open, double hi, const char *range_text, double *out)
{
	return read_ranged_value(r, ml_json_object_get(obj, key), parent, key,
							 lo, lo_open, hi, range_text, out);
}

static bool
read_string(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
			MlRolloutStr *out)
{
	const MlJsonValue *v = ml_json_object_get(obj, key);

	if (v->type != ML_JSON_STRING)
		return set_error(r->err, "wrong_type", parent, key,
						 "must be a string, not %s", ml_json_type_name(v->type));
	if (v->u.string.len == 0)
		return set_error(r->err, "out_of_range", parent, key, "must not be empty");
	if (v->u.string.len > 253 || memchr(v->u.string.str, '\0', v->u.string.len) != NULL)
		return set_error(r->err, "bad_format", parent, key,
						 "must be at most 253 bytes without NUL characters");
	out->str = v->u.string.str;
	out->len = v->u.string.len;
	return true;
}

static bool
is_lower_hex(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

/* "sha256:" followed by 64 lower-case hex digits */
static bool
read_digest(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
			MlRolloutStr *out)
{
	if (!read_string(r, obj, parent, key, out))
		return false;
	if (out->len != 7 + ML_CONTENT_ID_LEN || memcmp(out->str, "sha256:", 7) != 0 ||
		!is_lower_hex(out->str + 7, ML_CONTENT_ID_LEN))
		return set_error(r->err, "bad_format", parent, key,
						 "must be \"sha256:\" followed by 64 lower-case hex digits");
	return true;
}

/* a content id: 64 lower-case hex digits */
static bool
read_content_id(Reader *r, const MlJsonValue *obj, const char *parent, const char *key,
				char out[ML_CONTENT_ID_LEN + 1])
{
	const MlJsonValue *v = ml_json_object_get(obj, key);

	if (v->type != ML_JSON_STRING)
		return set_error(r->err, "wrong_type", parent, key,
						 "must be a string, not %s", ml_json_type_name(v->type));
	if (v->u.string.len != ML_CONTENT_ID_LEN || !is_lower_hex(v->u.string.str, v->u.string.len))
		return set_error(r->err, "bad_format", parent, key,
						 "must be a content id: 64 lower-case hex digits");
	memcpy(out, v->u.string.str, ML_CONTENT_ID_LEN);
	out[ML_CONTENT_ID_LEN] = '\0';
	return true;
}

/* The record's content_id must be the id of the record without it. */
static bool
verify_content_id(Reader *r, MlJsonArena *arena, const MlJsonValue *record,
				  const char *path, const char *claimed)
{
	char		actual[ML_CONTENT_ID_LEN + 1];
	MlJsonError jerr;

	if (!ml_json_content_id_excluding(arena, record, "content_id", actual, &jerr))
	{
		r->nomem = true;
		return set_error(r->err, "nomem", path, "content_id", "could not be computed: %s",
						 jerr.message);
	}
	if (strcmp(actual, claimed) != 0)
	{
		set_error(r->err, "content_id_mismatch", path, "content_id",
				  "does not match the record's content");
		set_detail(r->err, "The record says %s but its content (without content_id) has id %s. "
				   "A record edited after its id was computed is refused.",
				   claimed, actual);
		return false;
	}
	return true;
}

static const char *const scope_keys[] = {
	"config_digest", "deployment", "model_digest", "previous_revision", "project",
	"target_revision", NULL
};

static bool
read_scope(Reader *r, const MlJsonValue *obj, const char *path, MlRolloutScope *s)
{
	if (!check_keys(r, obj, path, scope_keys))
		return false;
	if (!read_string(r, obj, path, "project", &s->project) ||
		!read_string(r, obj, path, "deployment", &s->deployment) ||
		!read_string(r, obj, path, "target_revision", &s->target_revision) ||
		!read_string(r, obj, path, "previous_revision", &s->previous_revision) ||
		!read_digest(r, obj, path, "model_digest", &s->model_digest) ||
		!read_digest(r, obj, path, "config_digest", &s->config_digest))
		return false;
	if (s->target_revision.len == s->previous_revision.len &&
		memcmp(s->target_revision.str, s->previous_revision.str, s->target_revision.len) == 0)
		return set_error(r->err, "inconsistent", path, "previous_revision",
						 "must differ from target_revision");
	return true;
}

/* ---- contract --------------------------------------------------------- */

static const char *const contract_keys[] = {"content_id", "policy", "scope", NULL};

static const char *const policy_keys[] = {
	"capacity_quota_replicas", "ceiling_fraction", "health_max_age_seconds",
	"max_error_rate", "max_error_rate_increase", "max_p95_increase_ratio", "max_p95_ms",
	"min_samples", "rollback_headroom_replicas", "steps", "surge_replicas",
	"window_seconds", NULL
};

static bool
read_policy(Reader *r, const MlJsonValue *obj, const char *path, MlRolloutPolicy *p)
{
	const MlJsonValue *steps;

	if (!check_keys(r, obj, path, policy_keys))
		return false;

	steps = ml_json_object_get(obj, "steps");
	if (steps->type != ML_JSON_ARRAY)
		return set_error(r->err, "wrong_type", path, "steps",
						 "must be an array of fractions, not %s", ml_json_type_name(steps->type));
	if (steps->u.array.count == 0 || steps->u.array.count > ML_ROLLOUT_MAX_STEPS)
		return set_error(r->err, "out_of_range", path, "steps",
						 "must have between 1 and %d steps (got %zu)",
						 ML_ROLLOUT_MAX_STEPS, steps->u.array.count);
	p->nsteps = steps->u.array.count;
	for (size_t i = 0; i < p->nsteps; i++)
	{
		char		idx[24];
		char		parent[160];

		snprintf(idx, sizeof(idx), "[%zu]", i);
		snprintf(parent, sizeof(parent), "%s.steps", path);
		if (!read_ranged_value(r, steps->u.array.items[i], parent, idx, 0, true, 1,
							   "a fraction in (0, 1]", &p->steps[i]))
			return false;
		if (i > 0 && p->steps[i] <= p->steps[i - 1])
			return set_error(r->err, "out_of_range", parent, idx,
							 "must be greater than the step before it (%s <= %s); steps strictly increase",
							 num(p->steps[i]).s, num(p->steps[i - 1]).s);
	}
	if (!read_ranged(r, obj, path, "ceiling_fraction", 0, true, 1, "a fraction in (0, 1]",
					 &p->ceiling_fraction))
		return false;
	if (p->ceiling_fraction > p->steps[p->nsteps - 1])
		return set_error(r->err, "out_of_range", path, "ceiling_fraction",
						 "must not exceed the last step (%s > %s): the ceiling caps the step schedule",
						 num(p->ceiling_fraction).s, num(p->steps[p->nsteps - 1]).s);
	if (!read_count(r, obj, path, "min_samples", 1, &p->min_samples) ||
		!read_count(r, obj, path, "window_seconds", 1, &p->window_seconds) ||
		!read_ranged(r, obj, path, "max_error_rate", 0, false, 1, "a fraction in [0, 1]",
					 &p->max_error_rate) ||
		!read_ranged(r, obj, path, "max_p95_ms", 0, true, INFINITY, "a number above 0",
					 &p->max_p95_ms) ||
		!read_ranged(r, obj, path, "max_error_rate_increase", 0, false, 1, "a fraction in [0, 1]",
					 &p->max_error_rate_increase) ||
		!read_ranged(r, obj, path, "max_p95_increase_ratio", 1, false, INFINITY,
					 "a ratio of at least 1", &p->max_p95_increase_ratio) ||
		!read_count(r, obj, path, "health_max_age_seconds", 1, &p->health_max_age_seconds) ||
		!read_count(r, obj, path, "surge_replicas", 0, &p->surge_replicas) ||
		!read_count(r, obj, path, "rollback_headroom_replicas", 0, &p->rollback_headroom_replicas) ||
		!read_count(r, obj, path, "capacity_quota_replicas", 1, &p->capacity_quota_replicas))
		return false;
	return true;
}

static MlRolloutStatus
status_of(const Reader *r)
{
	return r->nomem ? ML_ROLLOUT_NOMEM : ML_ROLLOUT_INVALID;
}

MlRolloutStatus
ml_rollout_read_contract(MlJsonArena *arena, const MlJsonValue *v,
						 MlRolloutContract *out, MlRolloutError *err)
{
	Reader		r = {err, false};

	memset(out, 0, sizeof(*out));
	if (!check_keys(&r, v, "contract", contract_keys) ||
		!read_scope(&r, ml_json_object_get(v, "scope"), "contract.scope", &out->scope) ||
		!read_policy(&r, ml_json_object_get(v, "policy"), "contract.policy", &out->policy) ||
		!read_content_id(&r, v, "contract", "content_id", out->content_id) ||
		!verify_content_id(&r, arena, v, "contract", out->content_id))
		return status_of(&r);
	return ML_ROLLOUT_OK;
}

/* ---- evidence --------------------------------------------------------- */

static const char *const evidence_keys[] = {
	"content_id", "contract_content_id", "current_fraction", "desired_capacity",
	"observed_at", "previous", "scope", "target", "window_seconds", "window_start", NULL
};

static const char *const revision_keys[] = {
	"desired_replicas", "errors", "health_observed_at", "load_attempts", "load_successes",
	"p95_ms", "ready_replicas", "requests", NULL
};

static bool
read_revision(Reader *r, const MlJsonValue *obj, const char *path, int64_t observed_at_ms,
			  MlRolloutRevision *rev)
{
	const MlJsonValue *p95;

	if (!check_keys(r, obj, path, revision_keys))
		return false;
	if (!read_count(r, obj, path, "desired_replicas", 0, &rev->desired_replicas) ||
		!read_count(r, obj, path, "ready_replicas", 0, &rev->ready_replicas) ||
		!read_count(r, obj, path, "load_attempts", 0, &rev->load_attempts) ||
		!read_count(r, obj, path, "load_successes", 0, &rev->load_successes) ||
		!read_ms_or_null(r, obj, path, "health_observed_at", &rev->has_health,
						 &rev->health_observed_at_ms) ||
		!read_count(r, obj, path, "requests", 0, &rev->requests) ||
		!read_count(r, obj, path, "errors", 0, &rev->errors))
		return false;
	p95 = ml_json_object_get(obj, "p95_ms");
	rev->has_p95 = p95->type != ML_JSON_NULL;
	rev->p95_ms = 0;
	if (rev->has_p95 &&
		!read_ranged_value(r, p95, path, "p95_ms", 0, false, INFINITY,
						   "a non-negative number of milliseconds or null", &rev->p95_ms))
		return false;

	if (rev->ready_replicas > rev->desired_replicas)
		return set_error(r->err, "inconsistent", path, "ready_replicas",
						 "must not exceed desired_replicas (%lld > %lld)",
						 (long long) rev->ready_replicas, (long long) rev->desired_replicas);
	if (rev->load_successes > rev->load_attempts)
		return set_error(r->err, "inconsistent", path, "load_successes",
						 "must not exceed load_attempts (%lld > %lld)",
						 (long long) rev->load_successes, (long long) rev->load_attempts);
	if (rev->errors > rev->requests)
		return set_error(r->err, "inconsistent", path, "errors",
						 "must not exceed requests (%lld > %lld)",
						 (long long) rev->errors, (long long) rev->requests);
	if (rev->has_health && rev->health_observed_at_ms > observed_at_ms)
		return set_error(r->err, "inconsistent", path, "health_observed_at",
						 "must not be later than the evidence's observed_at (%s > %s)",
						 secs(rev->health_observed_at_ms).s, secs(observed_at_ms).s);
	return true;
}

MlRolloutStatus
ml_rollout_read_evidence(MlJsonArena *arena, const MlJsonValue *v,
						 MlRolloutEvidence *out, MlRolloutError *err)
{
	Reader		r = {err, false};

	memset(out, 0, sizeof(*out));
	if (!check_keys(&r, v, "evidence", evidence_keys) ||
		!read_content_id(&r, v, "evidence", "contract_content_id", out->contract_content_id) ||
		!read_scope(&r, ml_json_object_get(v, "scope"), "evidence.scope", &out->scope) ||
		!read_ms(&r, v, "evidence", "observed_at", &out->observed_at_ms) ||
		!read_ranged(&r, v, "evidence", "current_fraction", 0, false, 1,
					 "a fraction in [0, 1]", &out->current_fraction) ||
		!read_ms(&r, v, "evidence", "window_start", &out->window_start_ms) ||
		!read_ms(&r, v, "evidence", "window_seconds", &out->window_ms) ||
		!read_revision(&r, ml_json_object_get(v, "target"), "evidence.target",
					   out->observed_at_ms, &out->target) ||
		!read_revision(&r, ml_json_object_get(v, "previous"), "evidence.previous",
					   out->observed_at_ms, &out->previous) ||
		!read_count(&r, v, "evidence", "desired_capacity", 0, &out->desired_capacity) ||
		!read_content_id(&r, v, "evidence", "content_id", out->content_id))
		return status_of(&r);

	if (out->window_start_ms + out->window_ms > out->observed_at_ms)
		return set_error(err, "inconsistent", "evidence", "window_seconds",
						 "must end by observed_at (window_start %s + window_seconds %s > observed_at %s)",
						 secs(out->window_start_ms).s, secs(out->window_ms).s,
						 secs(out->observed_at_ms).s), ML_ROLLOUT_INVALID;
	if (out->desired_capacity != out->target.desired_replicas + out->previous.desired_replicas)
		return set_error(err, "inconsistent", "evidence", "desired_capacity",
						 "must equal target.desired_replicas + previous.desired_replicas (%lld != %lld + %lld)",
						 (long long) out->desired_capacity,
						 (long long) out->target.desired_replicas,
						 (long long) out->previous.desired_replicas), ML_ROLLOUT_INVALID;
	if (!verify_content_id(&r, arena, v, "evidence", out->content_id))
		return status_of(&r);
	return ML_ROLLOUT_OK;
}

/* ---- binding ---------------------------------------------------------- */

static bool
str_eq(const MlRolloutStr *a, const MlRolloutStr *b)
{
	return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static bool
check_binding(const MlRolloutContract *c, const MlRolloutEvidence *e, MlRolloutError *err)
{
	static const char *const names[] = {
		"project", "deployment", "target_revision", "previous_revision",
		"model_digest", "config_digest"
	};
	const MlRolloutStr *cs[6] = {
		&c->scope.project, &c->scope.deployment, &c->scope.target_revision,
		&c->scope.previous_revision, &c->scope.model_digest, &c->scope.config_digest
	};
	const MlRolloutStr *es[6] = {
		&e->scope.project, &e->scope.deployment, &e->scope.target_revision,
		&e->scope.previous_revision, &e->scope.model_digest, &e->scope.config_digest
	};
	const MlRolloutPolicy *p = &c->policy;
	int64_t		need;

	if (strcmp(c->content_id, e->contract_content_id) != 0)
	{
		set_error(err, "contract_mismatch", "evidence", "contract_content_id",
				  "names another contract");
		set_detail(err, "The evidence was gathered for contract %s; this contract is %s.",
				   e->contract_content_id, c->content_id);
		return false;
	}
	for (int i = 0; i < 6; i++)
	{
		if (!str_eq(cs[i], es[i]))
		{
			set_error(err, "scope_mismatch", "evidence.scope", names[i],
					  "differs from contract.scope.%s", names[i]);
			return false;
		}
	}
	need = e->target.desired_replicas + e->previous.desired_replicas +
		p->rollback_headroom_replicas + p->surge_replicas;
	if (need > p->capacity_quota_replicas)
	{
		set_error(err, "overcommit", "evidence", "desired_capacity",
				  "overcommits the capacity quota: %lld desired + %lld rollback headroom + %lld surge = %lld > %lld",
				  (long long) e->desired_capacity, (long long) p->rollback_headroom_replicas,
				  (long long) p->surge_replicas, (long long) need,
				  (long long) p->capacity_quota_replicas);
		return false;
	}
	if (e->current_fraction > p->ceiling_fraction)
	{
		set_error(err, "above_ceiling", "evidence", "current_fraction",
				  "is above the policy ceiling (%s > %s)",
				  num(e->current_fraction).s, num(p->ceiling_fraction).s);
		return false;
	}
	return true;
}

/* ---- decision --------------------------------------------------------- */

#define BIT(r) (1u << (r))

static uint32_t
regressions(const MlRolloutPolicy *p, const MlRolloutEvidence *e)
{
	const MlRolloutRevision *t = &e->target;
	const MlRolloutRevision *prev = &e->previous;
	uint32_t	found = 0;
	double		rate_t;

	/* only a complete window with enough samples demonstrates anything */
	if (e->window_ms < p->window_seconds * 1000 || t->requests < p->min_samples)
		return 0;
	rate_t = (double) t->errors / (double) t->requests;
	if (rate_t > p->max_error_rate)
		found |= BIT(ML_REASON_ERROR_RATE_ABOVE_MAX);
	if (t->has_p95 && t->p95_ms > p->max_p95_ms)
		found |= BIT(ML_REASON_P95_ABOVE_MAX);
	/* relative to the previous revision only when it has enough samples too */
	if (prev->requests >= p->min_samples)
	{
		double		rate_p = (double) prev->errors / (double) prev->requests;

		if (rate_t - rate_p > p->max_error_rate_increase)
			found |= BIT(ML_REASON_ERROR_RATE_INCREASE_ABOVE_MAX);
		if (t->has_p95 && prev->has_p95 && prev->p95_ms > 0 &&
			t->p95_ms > prev->p95_ms * p->max_p95_increase_ratio)
			found |= BIT(ML_REASON_P95_INCREASE_ABOVE_MAX);
	}
	return found;
}

static uint32_t
holds(const MlRolloutPolicy *p, const MlRolloutEvidence *e)
{
	const MlRolloutRevision *t = &e->target;
	const MlRolloutRevision *prev = &e->previous;
	uint32_t	found = 0;

	/* readiness of the target */
	if (t->desired_replicas == 0 || t->ready_replicas < t->desired_replicas)
		found |= BIT(ML_REASON_TARGET_NOT_READY);
	if (t->load_attempts == 0 || t->load_successes < t->load_attempts)
		found |= BIT(ML_REASON_TARGET_LOAD_INCOMPLETE);
	if (!t->has_health)
		found |= BIT(ML_REASON_TARGET_HEALTH_MISSING);
	else if (e->observed_at_ms - t->health_observed_at_ms > p->health_max_age_seconds * 1000)
		found |= BIT(ML_REASON_TARGET_HEALTH_STALE);
	/* the rollback route must be warm before more traffic moves */
	if (prev->desired_replicas == 0 || prev->ready_replicas < prev->desired_replicas)
		found |= BIT(ML_REASON_PREVIOUS_NOT_WARM);
	/* request evidence: only once the target carries traffic */
	if (e->current_fraction > 0)
	{
		if (e->window_ms < p->window_seconds * 1000)
			found |= BIT(ML_REASON_WINDOW_INCOMPLETE);
		if (t->requests < p->min_samples)
			found |= BIT(ML_REASON_INSUFFICIENT_SAMPLES);
		if (!t->has_p95)
			found |= BIT(ML_REASON_P95_MISSING);
	}
	/* the end of the schedule: hold for a separately authorized promotion */
	if (e->current_fraction >= p->ceiling_fraction)
		found |= p->ceiling_fraction >= 1.0 ? BIT(ML_REASON_TRAFFIC_COMPLETE)
			: BIT(ML_REASON_AT_CEILING);
	return found;
}

static double
next_step(const MlRolloutPolicy *p, double current)
{
	for (size_t i = 0; i < p->nsteps; i++)
	{
		if (p->steps[i] > current)
			return p->steps[i] < p->ceiling_fraction ? p->steps[i] : p->ceiling_fraction;
	}
	/* unreachable: current < ceiling <= last step */
	return p->ceiling_fraction;
}

/* ---- output ----------------------------------------------------------- */

static MlRolloutStatus
nomem(MlRolloutError *err, const char *what)
{
	set_error(err, "nomem", "plan", NULL, "out of memory %s", what);
	return ML_ROLLOUT_NOMEM;
}

/* Bounded text being written; every piece below is ASCII that needs no escaping. */
typedef struct OutBuf
{
	char		s[1024];
	size_t		len;
} OutBuf;

static void
out_raw(OutBuf *o, const char *s, size_t n)
{
	memcpy(o->s + o->len, s, n);
	o->len += n;
}

#define OUT_LIT(o, lit) out_raw((o), (lit), sizeof(lit) - 1)

static void
out_str(OutBuf *o, const char *s)
{
	o->s[o->len++] = '"';
	out_raw(o, s, strlen(s));
	o->s[o->len++] = '"';
}

/*
 * The output object in canonical form (RFC 8785), written directly: its
 * members in key order (ASCII keys, so byte order is UTF-16 order), strings
 * that never need escapes (ids are lower-case hex, names are upper-case
 * ASCII), numbers as the canonical writer formats them.  decision_digest is
 * the content id of the object without it, so the text is written twice: once
 * without the digest to hash, once with it.  At most 15 reasons of < 32
 * bytes, three 64-digit ids and two numbers: 1024 bytes always suffice.
 */
static MlRolloutStatus
write_output(MlJsonArena *arena, MlRolloutPlan *plan, MlRolloutError *err)
{
	OutBuf		o;
	char		cur[32],
				next[32];
	size_t		head_len;
	char	   *text;
	bool		first = true;

	if (ml_json_format_number(plan->current_fraction, cur) == 0 ||
		ml_json_format_number(plan->next_fraction, next) == 0)
		return nomem(err, "hashing the plan");	/* fractions were checked finite */

	o.len = 0;
	OUT_LIT(&o, "{\"contract_content_id\":");
	out_str(&o, plan->contract_content_id);
	OUT_LIT(&o, ",\"current_fraction\":");
	out_raw(&o, cur, strlen(cur));
	OUT_LIT(&o, ",\"decision\":");
	out_str(&o, ml_rollout_decision_name(plan->decision));
	head_len = o.len;			/* "decision_digest" goes here */
	OUT_LIT(&o, ",\"evidence_content_id\":");
	out_str(&o, plan->evidence_content_id);
	OUT_LIT(&o, ",\"next_fraction\":");
	out_raw(&o, next, strlen(next));
	OUT_LIT(&o, ",\"reasons\":[");
	for (int i = 0; i < ML_REASON_COUNT; i++)
	{
		if (plan->reasons & BIT(i))
		{
			if (!first)
				o.s[o.len++] = ',';
			first = false;
			out_str(&o, reason_names[i]);
		}
	}
	OUT_LIT(&o, "]}");

	if (!ml_sha256_hex(o.s, o.len, plan->decision_digest))
		return nomem(err, "hashing the plan");

	/* the same text with ,"decision_digest":"<64 hex>" after "decision" */
	text = ml_json_arena_alloc(arena, o.len + 21 + ML_CONTENT_ID_LEN + 1);
	if (text == NULL)
		return nomem(err, "writing the plan");
	memcpy(text, o.s, head_len);
	memcpy(text + head_len, ",\"decision_digest\":\"", 20);
	memcpy(text + head_len + 20, plan->decision_digest, ML_CONTENT_ID_LEN);
	text[head_len + 20 + ML_CONTENT_ID_LEN] = '"';
	memcpy(text + head_len + 21 + ML_CONTENT_ID_LEN, o.s + head_len, o.len - head_len);
	plan->json_len = o.len + 21 + ML_CONTENT_ID_LEN;
	text[plan->json_len] = '\0';
	plan->json = text;
	return ML_ROLLOUT_OK;
}

MlRolloutStatus
ml_rollout_decide(MlJsonArena *arena, const MlRolloutContract *contract,
				  const MlRolloutEvidence *evidence, MlRolloutPlan *plan, MlRolloutError *err)
{
	const MlRolloutPolicy *p = &contract->policy;
	uint32_t	found;

	memset(plan, 0, sizeof(*plan));
	if (!check_binding(contract, evidence, err))
		return ML_ROLLOUT_INVALID;

	plan->current_fraction = evidence->current_fraction;
	memcpy(plan->contract_content_id, contract->content_id, sizeof(plan->contract_content_id));
	memcpy(plan->evidence_content_id, evidence->content_id, sizeof(plan->evidence_content_id));

	/*
	 * Precedence: a demonstrated regression rolls back even when readiness
	 * evidence is also missing or stale — the request metrics already show
	 * users being hurt, and holding would keep them on the bad revision.
	 */
	if ((found = regressions(p, evidence)) != 0)
	{
		plan->decision = ML_ROLLOUT_ROLLBACK;
		plan->reasons = found;
		plan->next_fraction = 0;
	}
	else if ((found = holds(p, evidence)) != 0)
	{
		plan->decision = ML_ROLLOUT_HOLD;
		plan->reasons = found;
		plan->next_fraction = evidence->current_fraction;
	}
	else
	{
		plan->decision = ML_ROLLOUT_ADVANCE;
		plan->reasons = BIT(ML_REASON_ALL_GATES_PASSED);
		plan->next_fraction = next_step(p, evidence->current_fraction);
	}
	return write_output(arena, plan, err);
}

MlRolloutStatus
ml_rollout_plan(MlJsonArena *arena, const MlJsonValue *contract, const MlJsonValue *evidence,
				MlRolloutPlan *plan, MlRolloutError *err)
{
	MlRolloutContract c;
	MlRolloutEvidence e;
	MlRolloutStatus st;

	memset(plan, 0, sizeof(*plan));
	if ((st = ml_rollout_read_contract(arena, contract, &c, err)) != ML_ROLLOUT_OK)
		return st;
	if ((st = ml_rollout_read_evidence(arena, evidence, &e, err)) != ML_ROLLOUT_OK)
		return st;
	return ml_rollout_decide(arena, &c, &e, plan, err);
}
