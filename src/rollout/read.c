/*
 * read.c — the rollout records' field readers and their errors (see read.h).
 * Pure: no PostgreSQL, no I/O.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "read.h"

/* Counts must be exact in a double (I-JSON, RFC 7493 §2.2). */
#define MAX_COUNT 9007199254740991.0

/* ---- errors ----------------------------------------------------------- */

/* Default detail and hint per rule; callers may overwrite the detail. */
static const struct
{
	const char *rule;
	const char *detail;
	const char *hint;
} rules[] = {
	{ "not_object", "Contracts, evidence records and their parts are JSON objects.",
	  "See docs/rollouts.md for the contract and evidence shapes." },
	{ "missing_key", "Every field is required; where the shape allows it, an unknown value is written as null, never left out.",
	  "See docs/rollouts.md for the complete list of fields." },
	{ "unknown_key", "The shapes are closed so that a misspelt or misplaced field is never silently ignored.",
	  "Remove the field or fix its name; see docs/rollouts.md." },
	{ "boolean_number", "true and false are not counts or numbers, even though some languages treat them as 1 and 0.",
	  "Write the number itself." },
	{ "string_number", "Numbers written as strings (\"5\", \"0.2\") are refused, so a field's meaning never depends on how a string happens to parse.",
	  "Write the value as a JSON number." },
	{ "wrong_type", "Each field has exactly one JSON type (see docs/rollouts.md).",
	  "Write the field with the type the shape requires." },
	{ "not_finite", "Only finite numbers can be compared and hashed canonically.",
	  "Write a finite number." },
	{ "negative", "Counts, times and durations cannot be negative.",
	  "Write a non-negative value." },
	{ "not_integer", "Counts, epoch seconds and durations are whole numbers.",
	  "Write an integer (a value such as 5.0 is accepted; 5.5 is not)." },
	{ "sub_millisecond", "Evidence times and durations are seconds with at most millisecond precision, so every comparison between them is exact.",
	  "Round the time to whole milliseconds (at most 3 decimals)." },
	{ "out_of_range", "The value is outside the range the field allows.",
	  "See docs/rollouts.md for each field's range." },
	{ "bad_format", "The string does not have the required form.",
	  "See docs/rollouts.md for each field's form." },
	{ "inconsistent", "The record contradicts itself.",
	  "Fix the record where the observation was assembled; a record that contradicts itself cannot be trusted for a traffic decision." },
	{ "content_id_mismatch", "A record's content_id is the content id (SHA-256 of RFC 8785 canonical JSON) of the record without its content_id member.",
	  "Recompute the id from the record's final content, e.g. with mlplat.with_content_id(record)." },
	{ "contract_mismatch", "Evidence is bound to exactly one contract by the contract's content id.",
	  "Gather evidence for this contract, or decide with the contract the evidence was gathered for." },
	{ "scope_mismatch", "Evidence must describe the same project, deployment, revisions, model and configuration as the contract.",
	  "Gather evidence for this contract's scope." },
	{ "overcommit", "Desired replicas of target and previous revisions plus the rollback headroom and the surge must fit in the capacity quota; surge must never consume rollback headroom.",
	  "Lower the desired replicas or the surge, or raise capacity_quota_replicas in a new contract." },
	{ "above_ceiling", "Traffic on the target revision already exceeds what the contract allows.",
	  "Bring traffic back to at most the ceiling before deciding; this needs a person, not an automatic step." },
	{ "nomem", "The allocator refused memory.", "Retry with more memory." },
};

/* Fill *err; always returns false so callers can write "return ro_error(...)". */
bool
ro_error(MlRolloutError *err, const char *rule, const char *parent, const char *key,
		 const char *fmt, ...)
{
	va_list ap;

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

void
ro_detail(MlRolloutError *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

NumText
ro_num(double d)
{
	NumText t;

	if (ml_json_format_number(d, t.s) == 0)
		snprintf(t.s, sizeof(t.s), "non-finite");
	return t;
}

/* ---- field readers ---------------------------------------------------- */

/*
 * obj must be an object whose keys are exactly `keys` (NULL-terminated):
 * unknown keys are refused first (in key order, so the error is stable),
 * then missing ones (in the order of `keys`).
 */
bool
ro_check_keys(RoReader *r, const MlJsonValue *obj, const char *path, const char *const *keys)
{
	size_t n = 0;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return ro_error(r->err, "not_object", path, NULL, "must be an object, not %s",
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
		bool known = false;

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
			char shown[64];
			size_t n = m->key_len < sizeof(shown) - 1 ? m->key_len : sizeof(shown) - 1;

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
			return ro_error(r->err, "unknown_key", path, NULL,
							"has an unknown field \"%s\"", shown);
		}
	}
	for (const char *const *k = keys; *k != NULL; k++)
	{
		if (ml_json_object_get(obj, *k) == NULL)
			return ro_error(r->err, "missing_key", path, *k, "is missing");
	}
	return true;
}

/* A number field; type rules shared by counts, fractions and thresholds. */
bool
ro_number(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
		  const char *what, double *out)
{
	if (v->type == ML_JSON_BOOL)
		return ro_error(r->err, "boolean_number", parent, key,
						"must be %s, not a boolean", what);
	if (v->type == ML_JSON_STRING)
		return ro_error(r->err, "string_number", parent, key,
						"must be %s, not a string (even one that looks like a number)", what);
	if (v->type != ML_JSON_NUMBER)
		return ro_error(r->err, "wrong_type", parent, key,
						"must be %s, not %s", what, ml_json_type_name(v->type));
	/* the parser refuses NaN and Infinity; guard anyway */
	if (!isfinite(v->u.number.value))
		return ro_error(r->err, "not_finite", parent, key, "must be a finite number");
	*out = v->u.number.value;
	return true;
}

/* A non-negative integer (count, epoch seconds, duration) within [min, 2^53). */
bool
ro_count(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
		 int64_t min, int64_t *out)
{
	double d;

	if (!ro_number(r, v, parent, key, "a count (a non-negative integer)", &d))
		return false;
	if (d < 0)
		return ro_error(r->err, "negative", parent, key,
						"must not be negative (got %s)", ro_num(d).s);
	if (d != floor(d))
		return ro_error(r->err, "not_integer", parent, key,
						"must be an integer (got %s)", ro_num(d).s);
	if (d > MAX_COUNT)
		return ro_error(r->err, "out_of_range", parent, key,
						"must be at most 2^53-1 (got %s)", ro_num(d).s);
	if (d < (double) min)
		return ro_error(r->err, "out_of_range", parent, key,
						"must be at least %lld (got %s)", (long long) min, ro_num(d).s);
	*out = (int64_t) d;
	return true;
}

bool
ro_count_in(RoReader *r, const MlJsonValue *obj, const char *parent, const char *key,
			int64_t min, int64_t *out)
{
	return ro_count(r, ml_json_object_get(obj, key), parent, key, min, out);
}

/* A time as the evidence writes it: seconds, the fraction in whole milliseconds. */
NumText
ro_secs(int64_t ms)
{
	NumText t;
	int n = snprintf(t.s, sizeof(t.s), "%lld.%03d", (long long) (ms / 1000), (int) (ms % 1000));

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
bool
ro_ms(RoReader *r, const MlJsonValue *v, const char *parent, const char *key, int64_t *out)
{
	double d,
		ms;

	if (!ro_number(r, v, parent, key, "a number of seconds", &d))
		return false;
	if (d < 0)
		return ro_error(r->err, "negative", parent, key,
						"must not be negative (got %s)", ro_num(d).s);
	if (d > MAX_COUNT / 1000.0)
		return ro_error(r->err, "out_of_range", parent, key,
						"must be at most (2^53-1)/1000 seconds (got %s)", ro_num(d).s);
	ms = d * 1000.0;
	/* a whole number of milliseconds (most are) passes without the libm calls */
	if (ms != (double) (int64_t) ms &&
		fabs(ms - nearbyint(ms)) > 4.0 * (nextafter(ms, INFINITY) - ms) + 1e-9)
		return ro_error(r->err, "sub_millisecond", parent, key,
						"must be seconds in whole milliseconds, at most 3 decimals (got %s)", ro_num(d).s);
	*out = (int64_t) llround(ms);
	return true;
}

/* An evidence time or null. */
bool
ro_ms_or_null(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
			  bool *present, int64_t *out)
{
	*present = v->type != ML_JSON_NULL;
	*out = 0;
	if (!*present)
		return true;
	return ro_ms(r, v, parent, key, out);
}

/*
 * A number within [lo, hi] (hi may be INFINITY); lo_open makes the lower
 * bound exclusive.
 */
bool
ro_ranged(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
		  double lo, bool lo_open, double hi, const char *range_text, double *out)
{
	double d;

	if (!ro_number(r, v, parent, key, "a number", &d))
		return false;
	if (d < lo || (lo_open && d == lo) || d > hi)
		return ro_error(r->err, "out_of_range", parent, key,
						"must be %s (got %s)", range_text, ro_num(d).s);
	*out = d;
	return true;
}

bool
ro_ranged_in(RoReader *r, const MlJsonValue *obj, const char *parent, const char *key,
			 double lo, bool lo_open, double hi, const char *range_text, double *out)
{
	return ro_ranged(r, ml_json_object_get(obj, key), parent, key,
					 lo, lo_open, hi, range_text, out);
}

bool
ro_string(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
		  MlRolloutStr *out)
{
	if (v->type != ML_JSON_STRING)
		return ro_error(r->err, "wrong_type", parent, key,
						"must be a string, not %s", ml_json_type_name(v->type));
	if (v->u.string.len == 0)
		return ro_error(r->err, "out_of_range", parent, key, "must not be empty");
	if (v->u.string.len > 253 || memchr(v->u.string.str, '\0', v->u.string.len) != NULL)
		return ro_error(r->err, "bad_format", parent, key,
						"must be at most 253 bytes without NUL characters");
	out->str = v->u.string.str;
	out->len = v->u.string.len;
	return true;
}

/* every byte one of 0-9a-f; without an early exit, so the compiler can vectorize it */
static bool
is_lower_hex(const char *s, size_t len)
{
	unsigned bad = 0;

	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		bad |= (unsigned) ((unsigned char) (c - '0') > 9) &
			   (unsigned) ((unsigned char) (c - 'a') > 5);
	}
	return bad == 0;
}

/* "sha256:" followed by 64 lower-case hex digits */
bool
ro_digest(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
		  MlRolloutStr *out)
{
	if (!ro_string(r, v, parent, key, out))
		return false;
	if (out->len != 7 + ML_CONTENT_ID_LEN || memcmp(out->str, "sha256:", 7) != 0 ||
		!is_lower_hex(out->str + 7, ML_CONTENT_ID_LEN))
		return ro_error(r->err, "bad_format", parent, key,
						"must be \"sha256:\" followed by 64 lower-case hex digits");
	return true;
}

/* a content id: 64 lower-case hex digits */
bool
ro_content_id(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
			  char out[ML_CONTENT_ID_LEN + 1])
{
	if (v->type != ML_JSON_STRING)
		return ro_error(r->err, "wrong_type", parent, key,
						"must be a string, not %s", ml_json_type_name(v->type));
	if (v->u.string.len != ML_CONTENT_ID_LEN || !is_lower_hex(v->u.string.str, v->u.string.len))
		return ro_error(r->err, "bad_format", parent, key,
						"must be a content id: 64 lower-case hex digits");
	memcpy(out, v->u.string.str, ML_CONTENT_ID_LEN);
	out[ML_CONTENT_ID_LEN] = '\0';
	return true;
}
