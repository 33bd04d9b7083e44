/*
 * campaign_plan.c — the candidate rules of an optimization campaign's definition (issue 14,
 * docs/campaigns.md "The definition"), defined once.
 *
 * create_campaign validates up to 64 candidates of about thirty checks each; in PL/pgSQL
 * that was about 20 ms of a 64-candidate create (docs/benchmarks.md).  Here the same checks,
 * in the same order, with the same wording, walk the jsonb once.  Three SQL functions expose
 * them, each returning NULL or {field, rule, hint, sqlstate} of the first problem, which
 * mlplat._bad_input raises (it owns the error's shape, as for mlplat._env_problem):
 *
 *   mlplat._campaign_plan_problem(field, plan, components) — one plan (a candidate without
 *       name and predicted, or a preset's plan);
 *   mlplat._campaign_candidates_problem(candidates, presets, components) — every candidate:
 *       a preset reference or an inline plan, its name (unique), its predictions;
 *   mlplat._prediction_problem(field, e) — one prediction or evidence measurement.
 *
 * The catalog lookups stay in SQL: presets (name -> plan) and builder components (name ->
 * {image, tool, tool_version}) are passed in as objects holding the names the definition
 * refers to, so a missing one is reported where the PL/pgSQL reported it (42704).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "mlplat/validate.h"

PG_FUNCTION_INFO_V1(mlplat_campaign_plan_problem);
PG_FUNCTION_INFO_V1(mlplat_campaign_candidates_problem);

#define MAX_CANDIDATES 64

typedef struct Problem
{
	const char *field; /* NULL: no problem */
	const char *rule;
	const char *hint;
	const char *code;
} Problem;

/* A problem found: the checks return true after setting it ("stop here"). */
static bool
bad(Problem *p, const char *field, const char *rule, const char *hint)
{
	p->field = field;
	p->rule = rule;
	p->hint = hint;
	p->code = "22023";
	return true;
}

static const char *
typeof_name(const JsonbValue *v)
{
	if (v == NULL)
		return "missing";
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "string";
		case jbvNumeric:
			return "number";
		case jbvBool:
			return "boolean";
		case jbvBinary:
			return JsonContainerIsObject(v->val.binary.data) ? "object" : "array";
		default:
			return "unknown";
	}
}

static bool
is_object(const JsonbValue *v)
{
	return v && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static bool
is_array(const JsonbValue *v)
{
	return v && v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data) &&
		   !JsonContainerIsScalar(v->val.binary.data);
}

static bool
is_string(const JsonbValue *v)
{
	return v && v->type == jbvString;
}

static JsonbValue *
get(const JsonbValue *obj, const char *key)
{
	if (!is_object(obj))
		return NULL;
	return getKeyJsonValueFromContainer(obj->val.binary.data, key, strlen(key), NULL);
}

static char *
str(const JsonbValue *v)
{
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* pg_catalog.left(s, 64) */
static char *
left64(const char *s)
{
	int n = pg_mbcharcliplen(s, strlen(s), 64);

	return pnstrdup(s, n);
}

/* jsonb ->> of a value: its string, or its JSON text; NULL for null */
static char *
text_of(const JsonbValue *v)
{
	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return str(v);
	if (v->type == jbvBinary)
		return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	if (v->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	return pstrdup(v->val.boolean ? "true" : "false");
}

static char *
join(const char *const *names, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < n; i++)
		appendStringInfo(&s, "%s%s", i ? ", " : "", names[i]);
	return s.data;
}

/* mlplat._json_closed: an object with only allowed keys (in jsonb order) and every required one. */
static bool
closed(Problem *p, const char *field, const JsonbValue *v, const char *const *allowed, int nallowed,
	   const char *const *required, int nrequired)
{
	JsonbIterator *it;
	JsonbValue k;
	JsonbIteratorToken tok;

	if (!is_object(v))
		return bad(p, field, psprintf("must be a JSON object, not %s", typeof_name(v)),
				   psprintf("Allowed keys: %s.", join(allowed, nallowed)));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		bool known = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; i < nallowed && !known; i++)
			known = strlen(allowed[i]) == (size_t) k.val.string.len &&
					memcmp(allowed[i], k.val.string.val, k.val.string.len) == 0;
		if (!known)
			return bad(p, field, psprintf("unknown key \"%s\"", left64(str(&k))),
					   psprintf("Allowed keys: %s.", join(allowed, nallowed)));
	}
	for (int i = 0; i < nrequired; i++)
		if (get(v, required[i]) == NULL)
			return bad(p, psprintf("%s.%s", field, required[i]), "is required",
					   psprintf("Required keys: %s.", join(required, nrequired)));
	return false;
}

/* mlplat._json_label: a JSON string that is a DNS-1123 label of at most max_len */
static bool
label(Problem *p, const char *field, const JsonbValue *v, int max_len)
{
	if (!is_string(v))
		return bad(p, field, psprintf("must be a JSON string, not %s", typeof_name(v)),
				   "Write a lower-case name such as \"gptq\".");
	if (!mlplat_dns_label_is_valid(v->val.string.val, v->val.string.len, max_len))
		return bad(p, field, psprintf("must be a DNS-1123 label of 1 to %d characters", max_len),
				   "Use lower-case letters, digits and '-', starting and ending with a letter or digit.");
	return false;
}

static int
num_cmp(Numeric a, const char *b)
{
	Datum bd = DirectFunctionCall3(numeric_in, CStringGetDatum(b), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));

	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(a), bd));
}

/* mlplat._json_num (closed range [lo, hi]) */
static bool
num(Problem *p, const char *field, const JsonbValue *v, const char *lo, const char *hi, bool integral)
{
	if (v == NULL || v->type != jbvNumeric)
		return bad(p, field, psprintf("must be a JSON number, not %s", typeof_name(v)),
				   "Write a bare number such as 1 or 0.5.");
	if (integral)
	{
		Datum t = DirectFunctionCall2(numeric_trunc, NumericGetDatum(v->val.numeric), Int32GetDatum(0));

		if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(v->val.numeric), t)) != 0)
			return bad(p, field, "must be an integer", "Write a whole number.");
	}
	if (num_cmp(v->val.numeric, hi) > 0 || num_cmp(v->val.numeric, lo) < 0)
		return bad(p, field, psprintf("must be in [%s, %s]", lo, hi), "Pick a value inside the range.");
	return false;
}

static bool
one_of(const JsonbValue *v, const char *const *names, int n)
{
	if (!is_string(v))
		return false;
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == (size_t) v->val.string.len && memcmp(names[i], v->val.string.val, v->val.string.len) == 0)
			return true;
	return false;
}

static bool
all_digits(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return n > 0;
}

/* '^[0-9]+(\.[0-9]+){1,3}([-+][0-9A-Za-z.-]+)?$' */
static bool
exact_version(const char *s, int len)
{
	int i = 0, parts = 0;

	for (;;)
	{
		int start = i;

		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == start)
			return false;
		parts++;
		if (i < len && s[i] == '.' && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9')
		{
			i++;
			continue;
		}
		break;
	}
	if (parts < 2 || parts > 4)
		return false;
	if (i == len)
		return true;
	if (s[i] != '-' && s[i] != '+')
		return false;
	if (++i == len)
		return false;
	for (; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			  s[i] == '.' || s[i] == '-'))
			return false;
	return true;
}

/* '^[^@]+@sha256:[0-9a-f]{64}$' */
static bool
digest_pinned(const char *s, int len)
{
	const char *at = memchr(s, '@', len);
	int rest;

	if (at == NULL || at == s)
		return false;
	rest = len - (int) (at - s) - 1;
	if (rest != 7 + 64 || memcmp(at + 1, "sha256:", 7) != 0)
		return false;
	for (int i = 0; i < 64; i++)
	{
		char c = at[8 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return true;
}

/* '^sm_[0-9]{2,3}[a-z]?$' */
static bool
cuda_arch(const char *s, int len)
{
	int d;

	if (len < 5 || memcmp(s, "sm_", 3) != 0)
		return false;
	d = len - 3;
	if (s[len - 1] >= 'a' && s[len - 1] <= 'z')
		d--;
	return (d == 2 || d == 3) && all_digits(s + 3, d);
}

/* mlplat._campaign_plan's checks, in its order: field is the plan's path */
static bool
plan_problem(Problem *p, const char *field, const JsonbValue *c, const JsonbValue *components)
{
	static const char *const builder_keys[] = { "image", "tool", "tool_version" };
	static const char *const component_keys[] = { "component" };
	static const char *const kinds[] = { "checkpoint", "speculator", "engine" };
	static const char *const precisions[] = { "bf16", "fp16", "fp8", "int8", "w8a8", "w4a16", "w4a8", "nvfp4" };
	static const char *const hw_keys[] = { "accelerator", "arch", "gpus", "min_gpu_memory_gib" };
	const JsonbValue *b = get(c, "builder");
	const JsonbValue *h = get(c, "hardware");
	const JsonbValue *v;
	const char *f;

	if (is_object(b) && get(b, "component"))
	{
		char *name;

		f = psprintf("%s.builder", field);
		if (closed(p, f, b, component_keys, 1, component_keys, 1))
			return true;
		name = text_of(get(b, "component"));
		b = name ? get(components, name) : NULL;
		if (b == NULL)
		{
			bad(p, psprintf("%s.builder.component", field),
				psprintf("no builder component \"%s\" is registered", name ? left64(name) : ""),
				"See mlplat.components (role builder), or give {image, tool, tool_version}.");
			p->code = "42704";
			return true;
		}
	}
	if (closed(p, psprintf("%s.builder", field), b, builder_keys, 3, builder_keys, 3))
		return true;
	v = get(b, "image");
	f = psprintf("%s.builder.image", field);
	{
		bool blank = false;

		if (is_string(v))
			for (int i = 0; i < v->val.string.len && !blank; i++)
			{
				unsigned char ch = (unsigned char) v->val.string.val[i];

				blank = ch <= ' ' || ch == 0x7f;
			}
		if (!is_string(v) || blank || pg_mbstrlen_with_len(v->val.string.val, v->val.string.len) > 512)
			return bad(p, f, "must be a container image reference of at most 512 characters without spaces",
					   "Pass e.g. \"registry.example/acme/llmc@sha256:<64 hex>\".");
		if (!digest_pinned(v->val.string.val, v->val.string.len))
		{
			const char *at = memchr(v->val.string.val, '@', v->val.string.len);
			int n = at ? (int) (at - v->val.string.val) : v->val.string.len;

			return bad(p, f, psprintf("must be pinned by digest (%.*s@sha256:<64 hex>)", n, v->val.string.val),
					   "A tag can move; the artifact's provenance names the exact image.  Resolve the tag to its digest.");
		}
	}
	if (label(p, psprintf("%s.builder.tool", field), get(b, "tool"), 63))
		return true;
	v = get(b, "tool_version");
	if (!is_string(v) || !exact_version(v->val.string.val, v->val.string.len) ||
		pg_mbstrlen_with_len(v->val.string.val, v->val.string.len) > 64)
		return bad(p, psprintf("%s.builder.tool_version", field), "must be an exact version",
				   "Write the exact release, e.g. \"0.5.1\"; ranges (>=0.5, ~0.5, 0.5.*), \"latest\" and empty are refused.");
	if (!one_of(get(c, "kind"), kinds, lengthof(kinds)))
		return bad(p, psprintf("%s.kind", field), "must be one of checkpoint, speculator, engine",
				   "checkpoint: a transformed checkpoint; speculator: a draft model; engine: a TensorRT-LLM engine.");
	if (label(p, psprintf("%s.algorithm", field), get(c, "algorithm"), 63))
		return true;
	if (!one_of(get(c, "precision"), precisions, lengthof(precisions)))
		return bad(p, psprintf("%s.precision", field), "must be one of bf16, fp16, fp8, int8, w8a8, w4a16, w4a8, nvfp4",
				   "Name the precision of the built artifact.");
	v = get(c, "config");
	if (!is_object(v) || strlen(JsonbToCString(NULL, v->val.binary.data, v->val.binary.len)) > 16384)
		return bad(p, psprintf("%s.config", field), "must be a JSON object of at most 16 kB",
				   "Pass the tool's configuration, e.g. {\"group_size\": 128}.");
	f = psprintf("%s.hardware", field);
	if (closed(p, f, h, hw_keys, 4, hw_keys, 3))
		return true;
	if (label(p, psprintf("%s.accelerator", f), get(h, "accelerator"), 63))
		return true;
	v = get(h, "arch");
	if (!is_string(v) || !cuda_arch(v->val.string.val, v->val.string.len))
		return bad(p, psprintf("%s.arch", f), "must be a CUDA architecture such as \"sm_90\" or \"sm_90a\"",
				   "Engines and kernels are built for one architecture.");
	if (num(p, psprintf("%s.gpus", f), get(h, "gpus"), "1", "8", true))
		return true;
	if (get(h, "min_gpu_memory_gib") &&
		num(p, psprintf("%s.min_gpu_memory_gib", f), get(h, "min_gpu_memory_gib"), "1", "1024", true))
		return true;
	v = get(c, "spdx");
	if (!is_string(v))
		return bad(p, psprintf("%s.spdx", field), "must be an SPDX license expression string",
				   "Write e.g. \"Apache-2.0\" or \"MIT OR Apache-2.0\".");
	{
		const char *why = mlplat_spdx_check(v->val.string.val, v->val.string.len);

		if (why)
			return bad(p, psprintf("%s.spdx", field), psprintf("is not an SPDX license expression: %s", why),
					   "Write license ids joined by AND, OR, WITH and parentheses, e.g. \"Apache-2.0 AND MIT\".");
	}
	return num(p, psprintf("%s.max_seconds", field), get(c, "max_seconds"), "60", "86400", true);
}

/* mlplat._check_prediction after its closed-object check: metric, value, estimator */
static bool
prediction_problem(Problem *p, const char *f, const JsonbValue *e)
{
	static const char *const metrics[] = { "tokens_per_s_ratio", "p50_ms_ratio", "p95_ms_ratio", "gpu_memory_ratio",
										   "quality_drop" };

	if (!one_of(get(e, "metric"), metrics, lengthof(metrics)))
		return bad(p, psprintf("%s.metric", f),
				   "must be one of tokens_per_s_ratio, p50_ms_ratio, p95_ms_ratio, gpu_memory_ratio, quality_drop",
				   "Predictions are ratios to the base model (or the expected quality drop).");
	if (num(p, psprintf("%s.value", f), get(e, "value"), "-1000000000000", "1000000000000", false))
		return true;
	return label(p, psprintf("%s.estimator", f), get(e, "estimator"), 63);
}

/* mlplat._check_predicted: at most 16 {metric, value, estimator} */
static bool
predicted_problem(Problem *p, const char *field, const JsonbValue *val)
{
	static const char *const keys[] = { "metric", "value", "estimator" };
	int n;

	if (!is_array(val) || JsonContainerSize(val->val.binary.data) > 16)
		return bad(p, field, "must be an array of at most 16 {metric, value, estimator}",
				   "Write e.g. [{\"metric\": \"tokens_per_s_ratio\", \"value\": 1.6, \"estimator\": \"roofline-v1\"}].");
	n = JsonContainerSize(val->val.binary.data);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(val->val.binary.data, i);
		const char *f = psprintf("%s[%d]", field, i + 1);

		if (closed(p, f, e, keys, 3, keys, 3) || prediction_problem(p, f, e))
			return true;
	}
	return false;
}

/* mlplat._campaign_expand's loop over the candidates (their count is checked before) */
static bool
candidates_problem(Problem *p, const JsonbValue *cands, const JsonbValue *presets, const JsonbValue *components)
{
	static const char *const preset_keys[] = { "name", "preset", "predicted" };
	static const char *const plan_keys[] = { "name", "kind", "builder", "algorithm", "precision", "config", "hardware",
											 "spdx", "max_seconds", "predicted" };
	const char *names[MAX_CANDIDATES];
	int n = is_array(cands) ? JsonContainerSize(cands->val.binary.data) : 0;

	for (int i = 0; i < n && i < MAX_CANDIDATES; i++)
	{
		JsonbValue *c = getIthJsonbValueFromContainer(cands->val.binary.data, i);
		const char *f = psprintf("definition.candidates[%d]", i + 1);
		const JsonbValue *v;
		char *name;

		if (is_object(c) && get(c, "preset"))
		{
			if (closed(p, f, c, preset_keys, 3, preset_keys, 2))
				return true;
			v = get(c, "preset");
			if (!is_string(v))
				return bad(p, psprintf("%s.preset", f), "must be a JSON string", "Name an optimization preset.");
			if (get(presets, str(v)) == NULL)
			{
				bad(p, psprintf("%s.preset", f), psprintf("no optimization preset \"%s\"", left64(str(v))),
					"See mlplat.optimization_presets.");
				p->code = "42704";
				return true;
			}
		}
		else
		{
			if (closed(p, f, c, plan_keys, 10, plan_keys, 9))
				return true;
			if (plan_problem(p, f, c, components))
				return true;
		}
		if (label(p, psprintf("%s.name", f), get(c, "name"), 20))
			return true;
		name = str(get(c, "name"));
		for (int j = 0; j < i; j++)
			if (strcmp(names[j], name) == 0)
				return bad(p, psprintf("%s.name", f), psprintf("\"%s\" is used twice", name),
						   "Candidate names are unique within a campaign.");
		names[i] = name;
		if (get(c, "predicted") && predicted_problem(p, psprintf("%s.predicted", f), get(c, "predicted")))
			return true;
	}
	return false;
}

static Datum
problem_datum(const Problem *p)
{
	Datum elems[4];

	elems[0] = CStringGetTextDatum(p->field);
	elems[1] = CStringGetTextDatum(p->rule);
	elems[2] = CStringGetTextDatum(p->hint);
	elems[3] = CStringGetTextDatum(p->code);
	return PointerGetDatum(construct_array(elems, 4, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A jsonb argument as a JsonbValue (NULL for SQL NULL) */
static JsonbValue *
arg_value(FunctionCallInfo fcinfo, int n, JsonbValue *buf)
{
	Jsonb *j;

	if (PG_ARGISNULL(n))
		return NULL;
	j = PG_GETARG_JSONB_P(n);
	if (JsonContainerIsScalar(&j->root))
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&j->root, 0);

		return v;
	}
	buf->type = jbvBinary;
	buf->val.binary.data = &j->root;
	buf->val.binary.len = VARSIZE(j) - VARHDRSZ;
	return buf;
}

Datum
mlplat_campaign_plan_problem(PG_FUNCTION_ARGS)
{
	Problem p = { 0 };
	JsonbValue b1, b2;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (!plan_problem(&p, text_to_cstring(PG_GETARG_TEXT_PP(0)), arg_value(fcinfo, 1, &b1), arg_value(fcinfo, 2, &b2)))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(problem_datum(&p));
}

Datum
mlplat_campaign_candidates_problem(PG_FUNCTION_ARGS)
{
	Problem p = { 0 };
	JsonbValue b0, b1, b2;

	if (!candidates_problem(&p, arg_value(fcinfo, 0, &b0), arg_value(fcinfo, 1, &b1), arg_value(fcinfo, 2, &b2)))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(problem_datum(&p));
}

PG_FUNCTION_INFO_V1(mlplat_prediction_problem);

/* mlplat._prediction_problem(field, e): one {metric, value, estimator} (evidence, predictions) */
Datum
mlplat_prediction_problem(PG_FUNCTION_ARGS)
{
	static const char *const keys[] = { "metric", "value", "estimator" };
	Problem p = { 0 };
	JsonbValue b1;
	const JsonbValue *e;
	const char *f;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	f = text_to_cstring(PG_GETARG_TEXT_PP(0));
	e = arg_value(fcinfo, 1, &b1);
	if (!closed(&p, f, e, keys, 3, keys, 3) && !prediction_problem(&p, f, e))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(problem_datum(&p));
}

/* ---------------------------------------------------------------- the expansion */

static void
push_key(JsonbParseState **ps, const char *k)
{
	JsonbValue v;

	v.type = jbvString;
	v.val.string.val = (char *) k;
	v.val.string.len = strlen(k);
	pushJsonbValue(ps, WJB_KEY, &v);
}

/* key: the value as it is (NULL: JSON null, as jsonb_build_object makes of a missing value) */
static void
push_member(JsonbParseState **ps, const char *k, const JsonbValue *v)
{
	JsonbValue null;

	push_key(ps, k);
	if (v == NULL)
	{
		null.type = jbvNull;
		v = &null;
	}
	pushJsonbValue(ps, WJB_VALUE, (JsonbValue *) v);
}

/* key: an integral JSON number as an integer ((x)::numeric::int) */
static void
push_int(JsonbParseState **ps, const char *k, const JsonbValue *v)
{
	JsonbValue n;
	int32 i = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));

	n.type = jbvNumeric;
	n.val.numeric = DatumGetNumeric(DirectFunctionCall1(int4_numeric, Int32GetDatum(i)));
	push_key(ps, k);
	pushJsonbValue(ps, WJB_VALUE, &n);
}

/*
 * mlplat._campaign_plan_shape of a valid inline plan, its builder component resolved:
 * only the plan's keys, integers as integers.  Members are pushed into the open object.
 */
static void
push_plan(JsonbParseState **ps, const JsonbValue *c, const JsonbValue *components)
{
	const JsonbValue *b = get(c, "builder");
	const JsonbValue *h = get(c, "hardware");

	if (get(b, "component"))
		b = get(components, text_of(get(b, "component")));
	push_member(ps, "kind", get(c, "kind"));
	push_key(ps, "builder");
	pushJsonbValue(ps, WJB_BEGIN_OBJECT, NULL);
	push_member(ps, "image", get(b, "image"));
	push_member(ps, "tool", get(b, "tool"));
	push_member(ps, "tool_version", get(b, "tool_version"));
	pushJsonbValue(ps, WJB_END_OBJECT, NULL);
	push_member(ps, "algorithm", get(c, "algorithm"));
	push_member(ps, "precision", get(c, "precision"));
	push_member(ps, "config", get(c, "config"));
	push_key(ps, "hardware");
	pushJsonbValue(ps, WJB_BEGIN_OBJECT, NULL);
	push_member(ps, "accelerator", get(h, "accelerator"));
	push_member(ps, "arch", get(h, "arch"));
	push_int(ps, "gpus", get(h, "gpus"));
	if (get(h, "min_gpu_memory_gib"))
		push_int(ps, "min_gpu_memory_gib", get(h, "min_gpu_memory_gib"));
	pushJsonbValue(ps, WJB_END_OBJECT, NULL);
	push_member(ps, "spdx", get(c, "spdx"));
	push_int(ps, "max_seconds", get(c, "max_seconds"));
}

/* The members of a jsonb object, pushed into the open object. */
static void
push_members(JsonbParseState **ps, const JsonbValue *obj)
{
	JsonbIterator *it = JsonbIteratorInit(obj->val.binary.data);
	JsonbValue v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_KEY || tok == WJB_VALUE)
			pushJsonbValue(ps, tok, &v);
}

PG_FUNCTION_INFO_V1(mlplat_campaign_candidates_expand);

/*
 * mlplat._campaign_candidates_expand(candidates, presets, components): the stored form of
 * candidates that _campaign_candidates_problem accepted — each {name} with its preset's
 * plan or its own plan shaped (builder component resolved), and its predictions.  Called
 * only after the check, so nothing here is validated again.
 */
Datum
mlplat_campaign_candidates_expand(PG_FUNCTION_ARGS)
{
	JsonbValue b0, b1, b2;
	const JsonbValue *cands = arg_value(fcinfo, 0, &b0);
	const JsonbValue *presets = arg_value(fcinfo, 1, &b1);
	const JsonbValue *components = arg_value(fcinfo, 2, &b2);
	JsonbParseState *ps = NULL;
	JsonbValue *res;
	int n;

	if (!is_array(cands))
		PG_RETURN_NULL();
	n = JsonContainerSize(cands->val.binary.data);
	pushJsonbValue(&ps, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *c = getIthJsonbValueFromContainer(cands->val.binary.data, i);
		const JsonbValue *preset = get(c, "preset");

		pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
		push_member(&ps, "name", get(c, "name"));
		if (preset)
			push_members(&ps, get(presets, str(preset)));
		else
			push_plan(&ps, c, components);
		if (get(c, "predicted"))
			push_member(&ps, "predicted", get(c, "predicted"));
		pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	}
	res = pushJsonbValue(&ps, WJB_END_ARRAY, NULL);
	PG_RETURN_JSONB_P(JsonbValueToJsonb(res));
}
