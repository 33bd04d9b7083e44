/*
 * json_test.c — plain-C unit test of src/json (no PostgreSQL), TAP output.
 *
 * Usage: json_test [first-test-number [regressions-dir]]
 * Every file in the regressions directory (fuzz/regressions/ by default) is
 * replayed through all the fuzz properties (fuzz/props.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/spec_diff.h"
#include "mlplat/validate.h"
#include "props.h"
#include "unit_tap.h"

/* a result whose description is fmt with one string in it */
static void
ok_fmt(int cond, const char *fmt, const char *arg)
{
	char what[1024];

	snprintf(what, sizeof(what), fmt, arg);
	ok(cond, what);
}

/* ---- canonical form --------------------------------------------------- */

static const struct
{
	const char *in;
	const char *out;
} canon_cases[] = {
	/* RFC 8785 §3.2.2.3 / appendix examples */
	{ "[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]",
	  "[333333333.3333333,1e+30,4.5,0.002,1e-27]" },
	{ "{\"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\", \"literals\": [null, true, false]}",
	  "{\"literals\":[null,true,false],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}" },
	/* §3.2.3 sorting: UTF-16 code units, so U+1F600 (D83D) sorts before U+FB33 */
	{ "{\"\\u20ac\":\"Euro Sign\",\"\\r\":\"Carriage Return\",\"\\ufb33\":\"Hebrew Letter Dalet With Dagesh\","
	  "\"1\":\"One\",\"\\ud83d\\ude00\":\"Emoji: Grinning Face\",\"\\u0080\":\"Control\",\"\\u00f6\":\"Latin Small Letter O With Diaeresis\"}",
	  "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\",\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
	  "\"\xe2\x82\xac\":\"Euro Sign\",\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\",\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}" },
	{ " { \"b\" : [ 1 , 2 ] , \"a\" : { \"d\" : 1 , \"c\" : 2 } } ", "{\"a\":{\"c\":2,\"d\":1},\"b\":[1,2]}" },
	{ "1.0", "1" },
	{ "-0", "0" },
	{ "-0.0", "0" },
	{ "1e21", "1e+21" },
	{ "1e20", "100000000000000000000" },
	{ "0.1", "0.1" },
	{ "1e-7", "1e-7" },
	{ "0.000001", "0.000001" },
	{ "123456789012345678901234567890", "1.2345678901234568e+29" },
	{ "-1.5E-10", "-1.5e-10" },
	{ "100", "100" },
	{ "\"\\u007f\\u001f\\b\\f\\t\"", "\"\x7f\\u001f\\b\\f\\t\"" },
	{ "\"/\"", "\"/\"" },
	{ "[]", "[]" },
	{ "{}", "{}" },
	{ "\"\"", "\"\"" },
	{ "[{\"b\":null,\"a\":[{}]}]", "[{\"a\":[{}],\"b\":null}]" },
};

/* RFC 8785 appendix B: IEEE 754 bit patterns and their ECMAScript form */
static const struct
{
	uint64_t bits;
	const char *out;
} number_cases[] = {
	{ 0x0000000000000000ULL, "0" },
	{ 0x8000000000000000ULL, "0" },
	{ 0x0000000000000001ULL, "5e-324" },
	{ 0x8000000000000001ULL, "-5e-324" },
	{ 0x7fefffffffffffffULL, "1.7976931348623157e+308" },
	{ 0xffefffffffffffffULL, "-1.7976931348623157e+308" },
	{ 0x4340000000000000ULL, "9007199254740992" },
	{ 0xc340000000000000ULL, "-9007199254740992" },
	{ 0x4430000000000000ULL, "295147905179352830000" },
	{ 0x44b52d02c7e14af5ULL, "9.999999999999997e+22" },
	{ 0x44b52d02c7e14af6ULL, "1e+23" },
	{ 0x44b52d02c7e14af7ULL, "1.0000000000000001e+23" },
	{ 0x444b1ae4d6e2ef4eULL, "999999999999999700000" },
	{ 0x444b1ae4d6e2ef4fULL, "999999999999999900000" },
	{ 0x444b1ae4d6e2ef50ULL, "1e+21" },
	{ 0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7" },
	{ 0x3eb0c6f7a0b5ed8dULL, "0.000001" },
	{ 0x41b3de4355555553ULL, "333333333.3333332" },
	{ 0x41b3de4355555554ULL, "333333333.33333325" },
	{ 0x41b3de4355555555ULL, "333333333.3333333" },
	{ 0x41b3de4355555556ULL, "333333333.3333334" },
	{ 0x41b3de4355555557ULL, "333333333.33333343" },
	{ 0xbecbf647612f3696ULL, "-0.0000033333333333333333" },
	{ 0x43143ff3c1cb0959ULL, "1424953923781206.2" },
};

/* ---- strictness: input, error code, offset ----------------------------- */

static const struct
{
	const char *in;
	size_t len; /* 0: strlen */
	MlJsonErrorCode code;
	size_t offset;
} error_cases[] = {
	{ "", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "   ", 0, ML_JSON_ERR_SYNTAX, 3 },
	{ "01", 0, ML_JSON_ERR_SYNTAX, 1 },
	{ "-01", 0, ML_JSON_ERR_SYNTAX, 2 },
	{ "1.", 0, ML_JSON_ERR_SYNTAX, 2 },
	{ ".5", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "1e", 0, ML_JSON_ERR_SYNTAX, 2 },
	{ "+1", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "1 2", 0, ML_JSON_ERR_SYNTAX, 2 },
	{ "{} x", 0, ML_JSON_ERR_SYNTAX, 3 },
	{ "[1,]", 0, ML_JSON_ERR_SYNTAX, 3 },
	{ "{\"a\":1,}", 0, ML_JSON_ERR_SYNTAX, 7 },
	{ "{\"a\" 1}", 0, ML_JSON_ERR_SYNTAX, 5 },
	{ "{1:1}", 0, ML_JSON_ERR_SYNTAX, 1 },
	{ "[1 2]", 0, ML_JSON_ERR_SYNTAX, 3 },
	{ "tru", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "nul", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "NaN", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "Infinity", 0, ML_JSON_ERR_SYNTAX, 0 },
	{ "-Infinity", 0, ML_JSON_ERR_SYNTAX, 1 },
	{ "\"abc", 0, ML_JSON_ERR_SYNTAX, 4 },
	{ "\"a\tb\"", 0, ML_JSON_ERR_SYNTAX, 2 },
	{ "\"\\x\"", 0, ML_JSON_ERR_SYNTAX, 1 },
	{ "\"\\u12g4\"", 0, ML_JSON_ERR_SYNTAX, 5 },
	{ "\"\\ud800\"", 0, ML_JSON_ERR_ENCODING, 1 },
	{ "\"\\udc00\"", 0, ML_JSON_ERR_ENCODING, 1 },
	{ "\"\\ud800\\u0041\"", 0, ML_JSON_ERR_ENCODING, 1 },
	{ "\"\xc0\xaf\"", 0, ML_JSON_ERR_ENCODING, 1 },			/* overlong '/' */
	{ "\"\xed\xa0\x80\"", 0, ML_JSON_ERR_ENCODING, 1 },		/* encoded surrogate */
	{ "\"\xf4\x90\x80\x80\"", 0, ML_JSON_ERR_ENCODING, 1 }, /* > U+10FFFF */
	{ "\"\xe2\x82\"", 0, ML_JSON_ERR_ENCODING, 1 },			/* truncated */
	{ "\"\x80\"", 0, ML_JSON_ERR_ENCODING, 1 },
	{ "\xef\xbb\xbf{}", 0, ML_JSON_ERR_SYNTAX, 0 }, /* BOM */
	{ "[1]\0", 4, ML_JSON_ERR_SYNTAX, 3 },
	{ "{\"a\":1,\"a\":2}", 0, ML_JSON_ERR_VALUE, 0 },
	{ "1e400", 0, ML_JSON_ERR_VALUE, 0 },
	{ "[-1e309]", 0, ML_JSON_ERR_VALUE, 1 },
};

static void
test_canonical(void)
{
	char name[256];

	for (size_t i = 0; i < sizeof(canon_cases) / sizeof(canon_cases[0]); i++)
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;
		MlJsonValue *v = ml_json_parse(a, canon_cases[i].in, strlen(canon_cases[i].in), NULL, &err);
		char *c = v ? ml_json_canonical(a, v, NULL, &err) : NULL;

		snprintf(name, sizeof(name), "canonical %.60s", canon_cases[i].in);
		ok_fmt(c != NULL && strcmp(c, canon_cases[i].out) == 0, "%s", name);
		if (c != NULL && strcmp(c, canon_cases[i].out) != 0)
			printf("# got      %s\n# expected %s\n", c, canon_cases[i].out);
		else if (c == NULL)
			printf("# error: %s at %zu\n", err.message, err.offset);
		ml_json_arena_free(a);
	}
	for (size_t i = 0; i < sizeof(number_cases) / sizeof(number_cases[0]); i++)
	{
		double d;
		char buf[32];

		memcpy(&d, &number_cases[i].bits, sizeof(d));
		ml_json_format_number(d, buf);
		snprintf(name, sizeof(name), "number %016llx -> %s",
				 (unsigned long long) number_cases[i].bits, number_cases[i].out);
		ok_fmt(strcmp(buf, number_cases[i].out) == 0, "%s", name);
		if (strcmp(buf, number_cases[i].out) != 0)
			printf("# got %s\n", buf);
	}
	{
		char buf[32];

		ok_fmt(ml_json_format_number(NAN, buf) == 0, "%s", "NaN has no JSON form");
		ok_fmt(ml_json_format_number(INFINITY, buf) == 0, "%s", "Infinity has no JSON form");
	}
}

static void
test_errors(void)
{
	char name[256];

	for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++)
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;
		size_t len = error_cases[i].len ? error_cases[i].len : strlen(error_cases[i].in);
		MlJsonValue *v = ml_json_parse(a, error_cases[i].in, len, NULL, &err);

		snprintf(name, sizeof(name), "rejects case %zu (code %d at offset %zu)", i,
				 (int) error_cases[i].code, error_cases[i].offset);
		ok_fmt(v == NULL && err.code == error_cases[i].code && err.offset == error_cases[i].offset,
			   "%s", name);
		if (!(v == NULL && err.code == error_cases[i].code && err.offset == error_cases[i].offset))
			printf("# got %s code %d offset %zu: %s\n", v ? "success" : "error",
				   (int) err.code, err.offset, err.message);
		ml_json_arena_free(a);
	}

	/* limits */
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;
		MlJsonLimits lim = { 3, 0 };
		MlJsonLimits small = { 0, 4 };
		char deep[2000];

		ok_fmt(ml_json_parse(a, "[[[1]]]", 7, &lim, &err) != NULL, "%s", "depth 3 within a limit of 3");
		ok_fmt(ml_json_parse(a, "[[[[1]]]]", 9, &lim, &err) == NULL && err.code == ML_JSON_ERR_LIMIT &&
				   err.offset == 3,
			   "%s", "depth 4 over a limit of 3, at offset 3");
		ok_fmt(ml_json_parse(a, "[1,2]", 5, &small, &err) == NULL && err.code == ML_JSON_ERR_LIMIT,
			   "%s", "size over the byte limit");
		memset(deep, '[', sizeof(deep));
		ok_fmt(ml_json_parse(a, deep, sizeof(deep), NULL, &err) == NULL && err.code == ML_JSON_ERR_LIMIT &&
				   err.offset == ML_JSON_DEFAULT_MAX_DEPTH,
			   "%s", "2000 open brackets hit the default depth limit");
		ml_json_arena_free(a);
	}
}

static void
test_tree(void)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	const char *doc = "{\"z\":1,\"a\":\"x\\u0000y\",\"m\":[true,false,null],\"n\":-12.50e1,\"i\":42}";
	MlJsonValue *v = ml_json_parse(a, doc, strlen(doc), NULL, &err);
	const MlJsonValue *x;

	ok_fmt(v != NULL && v->type == ML_JSON_OBJECT && v->u.object.count == 5, "%s", "object parsed");
	ok_fmt(strcmp(v->u.object.members[0].key, "z") == 0 && strcmp(v->u.object.members[4].key, "i") == 0,
		   "%s", "members keep insertion order");
	x = ml_json_object_get(v, "a");
	ok_fmt(x && x->type == ML_JSON_STRING && x->u.string.len == 3 && memcmp(x->u.string.str, "x\0y", 3) == 0,
		   "%s", "lookup by key; \\u0000 kept with its length");
	x = ml_json_object_get(v, "n");
	ok_fmt(x && x->type == ML_JSON_NUMBER && x->u.number.value == -125.0 && !x->u.number.is_integer &&
			   strcmp(x->u.number.text, "-12.50e1") == 0,
		   "%s", "number keeps source text, value, not integer");
	x = ml_json_object_get(v, "i");
	ok_fmt(x && x->u.number.is_integer && x->u.number.value == 42, "%s", "integer literal flagged");
	ok_fmt(ml_json_object_get(v, "q") == NULL && ml_json_object_get(x, "a") == NULL, "%s",
		   "missing key and non-object give NULL");
	x = ml_json_object_get(v, "m");
	ok_fmt(x && x->type == ML_JSON_ARRAY && x->u.array.count == 3 && x->u.array.items[0]->u.boolean &&
			   x->u.array.items[2]->type == ML_JSON_NULL,
		   "%s", "array of literals");
	ml_json_arena_free(a);
}

/* ---- content ids ------------------------------------------------------ */

static void
content_id_of(const char *doc, const char *exclude, char out[ML_CONTENT_ID_LEN + 1])
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	MlJsonValue *v = ml_json_parse(a, doc, strlen(doc), NULL, &err);

	out[0] = '\0';
	if (v != NULL)
		ml_json_content_id_excluding(a, v, exclude, out, &err);
	ml_json_arena_free(a);
}

static void
test_content_id(void)
{
	char x[ML_CONTENT_ID_LEN + 1],
		y[ML_CONTENT_ID_LEN + 1];

	ml_sha256_hex("abc", 3, x);
	ok_fmt(strcmp(x, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "%s",
		   "SHA-256(\"abc\") (FIPS 180-2 example)");
	{
		/* a digest resumed from a saved prefix is the digest of the whole text */
		static const char text[] = "{\"contract_content_id\":\"0123456789abcdef0123456789abcdef01234567"
								   "89abcdef0123456789abcdef\",\"current_fraction\":0.05}";
		MlSha256Prefix p;
		char whole[ML_CONTENT_ID_LEN + 1],
			resumed[ML_CONTENT_ID_LEN + 1];
		char other[sizeof(text)];

		ml_sha256_hex(text, sizeof(text) - 1, whole);
		ok_fmt(ml_sha256_prefix(&p, text, 64) &&
				   ml_sha256_hex_prefixed(&p, text, sizeof(text) - 1, resumed) &&
				   strcmp(whole, resumed) == 0,
			   "%s", "SHA-256 resumed after a 64-byte prefix");
		memcpy(other, text, sizeof(text));
		other[30] = 'f';
		ml_sha256_hex(other, sizeof(other) - 1, whole);
		ok_fmt(ml_sha256_hex_prefixed(&p, other, sizeof(other) - 1, resumed) &&
				   strcmp(whole, resumed) == 0,
			   "%s", "a text without the prefix is hashed whole");
		ok_fmt(ml_sha256_hex_prefixed(&p, text, 10, resumed) && ml_sha256_hex(text, 10, whole) &&
				   strcmp(whole, resumed) == 0,
			   "%s", "a text shorter than the prefix is hashed whole");
		ok_fmt(ml_sha256_prefix(&p, text, 10) &&
				   ml_sha256_hex_prefixed(&p, text, sizeof(text) - 1, resumed) &&
				   ml_sha256_hex(text, sizeof(text) - 1, whole) && strcmp(whole, resumed) == 0,
			   "%s", "SHA-256 resumed after a prefix shorter than a block");
		ok_fmt(!ml_sha256_prefix(&p, text, 65) && p.len == 0, "%s", "a prefix over 64 bytes is refused");
	}
	content_id_of(" { } ", NULL, x);
	ok_fmt(strcmp(x, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") == 0, "%s",
		   "content id of {} is SHA-256(\"{}\")");
	content_id_of("{\"b\":1.0,\"a\":[1e2]}", NULL, x);
	content_id_of("{\"a\":[100],\"b\":1}", NULL, y);
	ok_fmt(strcmp(x, y) == 0 && strlen(x) == 64, "%s", "same meaning, same content id");
	content_id_of("{\"a\":[100],\"b\":2}", NULL, y);
	ok_fmt(strcmp(x, y) != 0, "%s", "different content, different id");
	content_id_of("{\"content_id\":\"abc\",\"a\":[100],\"b\":1}", "content_id", y);
	ok_fmt(strcmp(x, y) == 0, "%s", "content id excluding its own content_id member");
	content_id_of("{\"a\":{\"content_id\":1},\"b\":1}", "content_id", x);
	content_id_of("{\"a\":{},\"b\":1}", NULL, y);
	ok_fmt(strcmp(x, y) != 0, "%s", "only the top-level member is excluded");
}

/* ---- spec diff -------------------------------------------------------- */

static const struct
{
	const char *name;
	const char *desired;
	const char *observed;
	const char *expected;
} diff_cases[] = {
	{ "identical documents", "{\"a\":{\"b\":[1,2]}}", "{\"a\":{\"b\":[1,2]}}", "[]" },
	{ "seed: absent readinessProbe.initialDelaySeconds 0 is not drift",
	  "{\"spec\":{\"predictor\":{\"model\":{\"readinessProbe\":{\"httpGet\":{\"path\":\"/ready\"},\"initialDelaySeconds\":0}}}}}",
	  "{\"spec\":{\"predictor\":{\"model\":{\"readinessProbe\":{\"httpGet\":{\"path\":\"/ready\"}}}}}}",
	  "[]" },
	{ "seed: changed non-zero delay is drift",
	  "{\"spec\":{\"predictor\":{\"model\":{\"readinessProbe\":{\"initialDelaySeconds\":5}}}}}",
	  "{\"spec\":{\"predictor\":{\"model\":{\"readinessProbe\":{\"initialDelaySeconds\":10}}}}}",
	  "[{\"path\":\"spec.predictor.model.readinessProbe.initialDelaySeconds\",\"desired\":5,\"observed\":10}]" },
	{ "non-zero delay removed is drift",
	  "{\"readinessProbe\":{\"initialDelaySeconds\":5}}", "{\"readinessProbe\":{}}",
	  "[{\"path\":\"readinessProbe.initialDelaySeconds\",\"desired\":5}]" },
	{ "zero delay in desired vs non-zero observed is drift",
	  "{\"readinessProbe\":{\"initialDelaySeconds\":0}}", "{\"readinessProbe\":{\"initialDelaySeconds\":3}}",
	  "[{\"path\":\"readinessProbe.initialDelaySeconds\",\"desired\":0,\"observed\":3}]" },
	{ "probe defaults: periodSeconds 10, timeoutSeconds 1, successThreshold 1, failureThreshold 3",
	  "{\"livenessProbe\":{\"periodSeconds\":10,\"timeoutSeconds\":1,\"successThreshold\":1,\"failureThreshold\":3},"
	  "\"startupProbe\":{\"periodSeconds\":10.0}}",
	  "{\"livenessProbe\":{},\"startupProbe\":{}}", "[]" },
	{ "non-default period absent is drift",
	  "{\"readinessProbe\":{\"periodSeconds\":5}}", "{\"readinessProbe\":{}}",
	  "[{\"path\":\"readinessProbe.periodSeconds\",\"desired\":5}]" },
	{ "seed: absent env list equals empty env",
	  "{\"containers\":[{\"name\":\"m\",\"env\":[]}]}", "{\"containers\":[{\"name\":\"m\"}]}", "[]" },
	{ "absent map equals empty map", "{\"metadata\":{\"annotations\":{}}}", "{\"metadata\":{}}", "[]" },
	{ "null in observed is absent", "{\"args\":[]}", "{\"args\":null}", "[]" },
	{ "seed: removed secret env reference is drift",
	  "{\"env\":[{\"name\":\"TOKEN\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}},{\"name\":\"A\",\"value\":\"1\"}]}",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}",
	  "[{\"path\":\"env[name=TOKEN]\",\"desired\":{\"name\":\"TOKEN\",\"valueFrom\":{\"secretKeyRef\":{\"key\":\"k\",\"name\":\"s\"}}}}]" },
	{ "secretKeyRef removed from an env var is drift",
	  "{\"env\":[{\"name\":\"TOKEN\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}}]}",
	  "{\"env\":[{\"name\":\"TOKEN\"}]}",
	  "[{\"path\":\"env[name=TOKEN].valueFrom\",\"desired\":{\"secretKeyRef\":{\"key\":\"k\",\"name\":\"s\"}}}]" },
	{ "env compared by name, order-insensitive; extra observed vars not ours",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]}",
	  "{\"env\":[{\"name\":\"X\",\"value\":\"9\"},{\"name\":\"B\",\"value\":\"2\"},{\"name\":\"A\",\"value\":\"1\"}]}", "[]" },
	{ "env value changed",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}", "{\"env\":[{\"name\":\"A\",\"value\":\"2\"}]}",
	  "[{\"path\":\"env[name=A].value\",\"desired\":\"1\",\"observed\":\"2\"}]" },
	{ "containers by name",
	  "{\"containers\":[{\"name\":\"a\",\"image\":\"i:1\"},{\"name\":\"b\",\"image\":\"j:1\"}]}",
	  "{\"containers\":[{\"name\":\"b\",\"image\":\"j:2\"},{\"name\":\"a\",\"image\":\"i:1\"}]}",
	  "[{\"path\":\"containers[name=b].image\",\"desired\":\"j:1\",\"observed\":\"j:2\"}]" },
	{ "ports by containerPort, protocol defaults to TCP",
	  "{\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"},{\"containerPort\":9090,\"name\":\"m\"}]}",
	  "{\"ports\":[{\"containerPort\":9090,\"name\":\"metrics\"},{\"containerPort\":8080}]}",
	  "[{\"path\":\"ports[containerPort=9090].name\",\"desired\":\"m\",\"observed\":\"metrics\"}]" },
	{ "an env value \"\" that KServe's webhook dropped (omitempty) is not drift",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"\"},{\"name\":\"B\",\"value\":\"x\"}]}",
	  "{\"env\":[{\"name\":\"A\"},{\"name\":\"B\",\"value\":\"x\"}]}", "[]" },
	{ "an env value absent where one is desired is drift",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"x\"}]}", "{\"env\":[{\"name\":\"A\"}]}",
	  "[{\"path\":\"env[name=A].value\",\"desired\":\"x\"}]" },
	{ "UDP protocol absent is drift",
	  "{\"ports\":[{\"containerPort\":53,\"protocol\":\"UDP\"}]}", "{\"ports\":[{\"containerPort\":53}]}",
	  "[{\"path\":\"ports[containerPort=53].protocol\",\"desired\":\"UDP\"}]" },
	{ "quantities: \"1\" == 1 == \"1000m\", \"1Gi\" == \"1073741824\", \"500m\" == 0.5",
	  "{\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\",\"nvidia.com/gpu\":1},\"limits\":{\"cpu\":\"500m\",\"memory\":\"2G\"}}}",
	  "{\"resources\":{\"requests\":{\"cpu\":\"1000m\",\"memory\":\"1073741824\",\"nvidia.com/gpu\":\"1\"},\"limits\":{\"cpu\":0.5,\"memory\":\"2e9\"}}}",
	  "[]" },
	{ "quantities that differ",
	  "{\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}",
	  "{\"resources\":{\"limits\":{\"cpu\":\"1500m\",\"memory\":\"1G\"}}}",
	  "[{\"path\":\"resources.limits.cpu\",\"desired\":\"2\",\"observed\":\"1500m\"},"
	  "{\"path\":\"resources.limits.memory\",\"desired\":\"1Gi\",\"observed\":\"1G\"}]" },
	{ "quantity strings only compare by value under resources",
	  "{\"labels\":{\"cpu\":\"1\"}}", "{\"labels\":{\"cpu\":\"1000m\"}}",
	  "[{\"path\":\"labels.cpu\",\"desired\":\"1\",\"observed\":\"1000m\"}]" },
	{ "ResourceQuota hard GPUs", "{\"spec\":{\"hard\":{\"requests.nvidia.com/gpu\":\"4\"}}}",
	  "{\"spec\":{\"hard\":{\"requests.nvidia.com/gpu\":4}}}", "[]" },
	{ "numbers equal numerically: 1 vs 1.0 vs 1e0", "{\"replicas\":1,\"x\":[1.0]}", "{\"replicas\":1.0,\"x\":[1e0]}", "[]" },
	{ "numbers are doubles, as in the canonical form", "{\"n\":9007199254740993}", "{\"n\":9007199254740992}", "[]" },
	{ "number vs string is drift", "{\"replicas\":1}", "{\"replicas\":\"1\"}",
	  "[{\"path\":\"replicas\",\"desired\":1,\"observed\":\"1\"}]" },
	{ "fields we do not own are ignored", "{\"spec\":{\"a\":1}}",
	  "{\"spec\":{\"a\":1,\"b\":2},\"status\":{\"ready\":true}}", "[]" },
	{ "atomic list order matters", "{\"args\":[\"a\",\"b\"]}", "{\"args\":[\"b\",\"a\"]}",
	  "[{\"path\":\"args[0]\",\"desired\":\"a\",\"observed\":\"b\"},{\"path\":\"args[1]\",\"desired\":\"b\",\"observed\":\"a\"}]" },
	{ "atomic list length differs", "{\"args\":[\"a\"]}", "{\"args\":[\"a\",\"b\"]}",
	  "[{\"path\":\"args\",\"desired\":[\"a\"],\"observed\":[\"a\",\"b\"]}]" },
	{ "non-empty list absent is drift", "{\"args\":[\"a\"]}", "{}", "[{\"path\":\"args\",\"desired\":[\"a\"]}]" },
	{ "changed image and storage URI, sorted paths",
	  "{\"spec\":{\"predictor\":{\"model\":{\"storageUri\":\"s3://b/m/2\",\"image\":\"x:2\"},\"minReplicas\":2}}}",
	  "{\"spec\":{\"predictor\":{\"model\":{\"storageUri\":\"s3://b/m/1\",\"image\":\"x:1\"},\"minReplicas\":1}}}",
	  "[{\"path\":\"spec.predictor.minReplicas\",\"desired\":2,\"observed\":1},"
	  "{\"path\":\"spec.predictor.model.image\",\"desired\":\"x:2\",\"observed\":\"x:1\"},"
	  "{\"path\":\"spec.predictor.model.storageUri\",\"desired\":\"s3://b/m/2\",\"observed\":\"s3://b/m/1\"}]" },
	{ "odd keys are quoted in paths", "{\"metadata\":{\"labels\":{\"app.kubernetes.io/managed-by\":\"mlplat\"}}}",
	  "{\"metadata\":{\"labels\":{\"app.kubernetes.io/managed-by\":\"helm\"}}}",
	  "[{\"path\":\"metadata.labels[\\\"app.kubernetes.io/managed-by\\\"]\",\"desired\":\"mlplat\",\"observed\":\"helm\"}]" },
	{ "type changed object vs scalar", "{\"a\":{\"b\":1}}", "{\"a\":7}",
	  "[{\"path\":\"a\",\"desired\":{\"b\":1},\"observed\":7}]" },
	{ "desired null vs present is drift (SSA would remove it)", "{\"a\":null}", "{\"a\":1}",
	  "[{\"path\":\"a\",\"desired\":null,\"observed\":1}]" },
	{ "duplicate env names fall back to positional compare",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"A\",\"value\":\"2\"}]}",
	  "{\"env\":[{\"name\":\"A\",\"value\":\"2\"},{\"name\":\"A\",\"value\":\"1\"}]}",
	  "[{\"path\":\"env[0].value\",\"desired\":\"1\",\"observed\":\"2\"},{\"path\":\"env[1].value\",\"desired\":\"2\",\"observed\":\"1\"}]" },
	{ "root scalars", "1", "2", "[{\"path\":\"\",\"desired\":1,\"observed\":2}]" },
};

static void
test_spec_diff(void)
{
	char name[256];

	for (size_t i = 0; i < sizeof(diff_cases) / sizeof(diff_cases[0]); i++)
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;
		MlJsonValue *d = ml_json_parse(a, diff_cases[i].desired, strlen(diff_cases[i].desired), NULL, &err);
		MlJsonValue *o = ml_json_parse(a, diff_cases[i].observed, strlen(diff_cases[i].observed), NULL, &err);
		MlSpecDiff diff;
		char *out = NULL;

		if (d && o && ml_spec_diff(a, d, o, &diff, &err))
			out = ml_spec_diff_to_json(a, &diff, NULL, &err);
		snprintf(name, sizeof(name), "spec_diff: %s", diff_cases[i].name);
		ok_fmt(out != NULL && strcmp(out, diff_cases[i].expected) == 0, "%s", name);
		if (out == NULL)
			printf("# error: %s\n", err.message);
		else if (strcmp(out, diff_cases[i].expected) != 0)
			printf("# got      %s\n# expected %s\n", out, diff_cases[i].expected);
		ml_json_arena_free(a);
	}
}

/* 20,000 env vars, observed in reverse order: matched by key, quickly */
static void
test_large_keyed_list(void)
{
	enum
	{
		N = 20000
	};
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	char *des = malloc(N * 40 + 32);
	char *obs = malloc(N * 40 + 32);
	size_t dn = 0,
		   on = 0;
	MlJsonValue *d,
		*o;
	MlSpecDiff diff;

	dn += sprintf(des + dn, "{\"env\":[");
	on += sprintf(obs + on, "{\"env\":[");
	for (int i = 0; i < N; i++)
	{
		dn += sprintf(des + dn, "%s{\"name\":\"V%d\",\"value\":\"%d\"}", i ? "," : "", i, i);
		on += sprintf(obs + on, "%s{\"name\":\"V%d\",\"value\":\"%d\"}", i ? "," : "", N - 1 - i,
					  N - 1 - i == 777 ? -1 : N - 1 - i);
	}
	dn += sprintf(des + dn, "]}");
	on += sprintf(obs + on, "]}");
	d = ml_json_parse(a, des, dn, NULL, &err);
	o = ml_json_parse(a, obs, on, NULL, &err);
	ok_fmt(d && o && ml_spec_diff(a, d, o, &diff, &err) && diff.count == 1 &&
			   strcmp(diff.entries[0].path, "env[name=V777].value") == 0,
		   "%s",
		   "a 20,000-entry env list is matched by name (one changed value found)");
	free(des);
	free(obs);
	ml_json_arena_free(a);
}

/* a long key above many differences: refused, not 100 MB of paths */
static void
test_diff_path_limit(void)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	size_t klen = 100 * 1024;
	char *des = malloc(klen + 2000 * 16 + 64);
	size_t n = 0;
	MlJsonValue *d,
		*o;
	MlSpecDiff diff;

	des[n++] = '{';
	des[n++] = '"';
	memset(des + n, 'k', klen);
	n += klen;
	n += sprintf(des + n, "\":{");
	for (int i = 0; i < 1000; i++)
		n += sprintf(des + n, "%s\"m%d\":1", i ? "," : "", i);
	n += sprintf(des + n, "}}");
	d = ml_json_parse(a, des, n, NULL, &err);
	o = ml_json_parse(a, "{}", 2, NULL, &err);
	ok_fmt(d && o && ml_spec_diff(a, d, o, &diff, &err) && diff.count == 1, "%s",
		   "a missing object is one difference, whatever its size");
	/* observed has the same long key but none of the 1,000 members */
	{
		size_t m = 0;
		char *obs = malloc(klen + 64);

		obs[m++] = '{';
		obs[m++] = '"';
		memset(obs + m, 'k', klen);
		m += klen;
		m += sprintf(obs + m, "\":{\"other\":1}}");
		o = ml_json_parse(a, obs, m, NULL, &err);
		free(obs);
	}
	ok_fmt(d && o && !ml_spec_diff(a, d, o, &diff, &err) && err.code == ML_JSON_ERR_LIMIT, "%s",
		   "1,000 differences under a 100 kB key exceed the path limit: an error");
	free(des);
	ml_json_arena_free(a);
}

static void
test_quantities(void)
{
	static const struct
	{
		const char *a;
		const char *b;
		int eq; /* 1 equal, 0 not, -1 not a quantity */
	} q[] = {
		{ "\"1\"", "\"1000m\"", 1 },
		{ "\"1Gi\"", "\"1073741824\"", 1 },
		{ "\"500m\"", "0.5", 1 },
		{ "\"1Ki\"", "\"1024\"", 1 },
		{ "\"1.5Gi\"", "\"1536Mi\"", 1 },
		{ "\"1k\"", "\"1e3\"", 1 },
		{ "\"1E\"", "\"1e18\"", 1 },
		{ "\"100u\"", "\"0.1m\"", 1 },
		{ "\"1n\"", "\"0.000000001\"", 1 },
		{ "\"0\"", "\"-0\"", 1 },
		{ "\"+2\"", "2", 1 },
		{ "\".5\"", "\"500m\"", 1 },
		{ "\"1Ei\"", "\"1152921504606846976\"", 1 },
		{ "\"1M\"", "\"1Mi\"", 0 },
		{ "\"1\"", "\"2\"", 0 },
		{ "\"-1\"", "\"1\"", 0 },
		{ "\"1Xi\"", "\"1\"", -1 },
		{ "\"abc\"", "\"1\"", -1 },
		{ "\"1e\"", "\"1\"", -1 },
		{ "true", "1", -1 },
		{ "\"\"", "\"0\"", -1 },
		{ "\"1m2\"", "\"1\"", -1 },
	};
	char name[256];

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;
		MlJsonValue *x = ml_json_parse(a, q[i].a, strlen(q[i].a), NULL, &err);
		MlJsonValue *y = ml_json_parse(a, q[i].b, strlen(q[i].b), NULL, &err);
		bool okq = false;
		bool eq = x && y && ml_quantity_equal(x, y, &okq);
		int got = !okq ? -1 : (eq ? 1 : 0);

		snprintf(name, sizeof(name), "quantity %s vs %s -> %d", q[i].a, q[i].b, q[i].eq);
		ok_fmt(got == q[i].eq, "%s", name);
		ml_json_arena_free(a);
	}
}

/* ---- name validators -------------------------------------------------- */

static void
test_names(void)
{
	ok_fmt(mlplat_dns_label_is_valid("abc-1", 5, 63), "%s", "dns label abc-1");
	ok_fmt(!mlplat_dns_label_is_valid("-abc", 4, 63), "%s", "dns label cannot start with -");
	ok_fmt(!mlplat_dns_label_is_valid("Abc", 3, 63), "%s", "dns label is lower case");
	ok_fmt(!mlplat_dns_label_is_valid("abcd", 4, 3), "%s", "dns label over max_len");
	ok_fmt(mlplat_traceparent_is_valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "%s",
		   "traceparent (W3C example)");
	ok_fmt(!mlplat_traceparent_is_valid("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "%s",
		   "traceparent with an all-zero trace id");
	ok_fmt(mlfuzz_check_names((const uint8_t *) "\x3e"
												"abc",
							  4) == NULL,
		   "%s", "names property on a sample");
}

/* ---- strings: the plain fast path -------------------------------------- */

/* what ml_json_plain_run must return: the leading bytes a string holds as they are */
static size_t
plain_run_ref(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len && (unsigned char) s[i] >= 0x20 && (unsigned char) s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
		i++;
	return i;
}

/* run s[0..len) from an exact-size copy, so a read past len is ASan's to catch */
static size_t
plain_run_exact(const char *s, size_t len)
{
	char *copy = malloc(len ? len : 1);
	size_t n;

	memcpy(copy, s, len);
	n = ml_json_plain_run(copy, len);
	free(copy);
	return n;
}

/* the decoded string of doc, or NULL (err filled) */
static char *
parse_string_doc(const char *doc, size_t len, size_t *out_len, MlJsonError *err)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonValue *v = ml_json_parse(a, doc, len, NULL, err);
	char *r = NULL;

	if (v != NULL && v->type == ML_JSON_STRING)
	{
		r = malloc(v->u.string.len + 1);
		memcpy(r, v->u.string.str, v->u.string.len + 1);
		*out_len = v->u.string.len;
	}
	ml_json_arena_free(a);
	return r;
}

static void
test_plain_strings(void)
{
	char buf[40];
	int bad = 0;
	static const struct
	{
		const char *in; /* what goes after the k plain bytes */
		const char *out;
	} tails[] = {
		{ "\\n", "\n" },
		{ "\\\"", "\"" },
		{ "\\\\", "\\" },
		{ "\\/", "/" },
		{ "\\u00e9", "\xc3\xa9" },
		{ "\xc3\xa9", "\xc3\xa9" },
		{ "\\ud83d\\ude00", "\xf0\x9f\x98\x80" },
	};

	/* one byte of every value at every position of runs up to three words long */
	for (size_t len = 0; len <= 24; len++)
		for (size_t k = 0; k < len; k++)
			for (int c = 0; c < 256; c++)
			{
				memset(buf, 'a', len);
				buf[k] = (char) c;
				if (plain_run_exact(buf, len) != plain_run_ref(buf, len))
					bad++;
			}
	ok(bad == 0, "plain run: any byte at any position of 0-24 bytes, as the bytewise rule");
	/* two bytes side by side: a borrow from the first must not hide or move the stop */
	bad = 0;
	for (size_t k = 0; k < 15; k++)
		for (int c1 = 0; c1 < 256; c1++)
			for (int c2 = 0; c2 < 256; c2++)
			{
				memset(buf, ' ', 16);
				buf[k] = (char) c1;
				buf[k + 1] = (char) c2;
				if (ml_json_plain_run(buf, 16) != plain_run_ref(buf, 16))
					bad++;
			}
	ok(bad == 0, "plain run: every pair of adjacent bytes in two words, as the bytewise rule");

	/* the parser: plain prefixes of every length before what the decoding loop handles */
	bad = 0;
	for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++)
		for (size_t k = 0; k <= 20; k++)
		{
			char doc[64];
			char want[64];
			size_t n = 0;
			size_t got_len = 0;
			MlJsonError err;
			char *got;

			doc[0] = '"';
			memset(doc + 1, 'x', k);
			snprintf(doc + 1 + k, sizeof(doc) - 1 - k, "%sbb\"", tails[t].in);
			memset(want, 'x', k);
			snprintf(want + k, sizeof(want) - k, "%sbb", tails[t].out);
			n = strlen(want);
			got = parse_string_doc(doc, strlen(doc), &got_len, &err);
			if (got == NULL || got_len != n || memcmp(got, want, n) != 0)
				bad++;
			free(got);
		}
	ok(bad == 0, "strings: escapes and UTF-8 after 0-20 plain bytes decode as before");
	/* and its errors: at the same offsets as the decoding loop gives them */
	bad = 0;
	for (size_t k = 0; k <= 20; k++)
	{
		char doc[64];
		size_t got_len;
		MlJsonError err;
		char *got;

		doc[0] = '"';
		memset(doc + 1, 'x', k);
		doc[1 + k] = '\x01';
		doc[2 + k] = '"';
		got = parse_string_doc(doc, k + 3, &got_len, &err);
		if (got != NULL || err.code != ML_JSON_ERR_SYNTAX || err.offset != k + 1)
			bad++;
		free(got);
		doc[1 + k] = '\xff';
		got = parse_string_doc(doc, k + 3, &got_len, &err);
		if (got != NULL || err.code != ML_JSON_ERR_ENCODING || err.offset != k + 1)
			bad++;
		free(got);
		/* unterminated: the text ends inside the plain run */
		got = parse_string_doc(doc, k + 1, &got_len, &err);
		if (got != NULL || err.code != ML_JSON_ERR_SYNTAX || err.offset != k + 1)
			bad++;
		free(got);
	}
	ok(bad == 0, "strings: a control byte, invalid UTF-8 or no closing quote after 0-20 plain bytes fail where they are");
}

/* ---- allocation failure ------------------------------------------------ */

typedef struct FailingAlloc
{
	int budget; /* allocations left before failing */
	int live;	/* blocks not yet freed */
} FailingAlloc;

static void *
failing_alloc(void *ctx, size_t size)
{
	FailingAlloc *f = ctx;

	if (f->budget-- <= 0)
		return NULL;
	f->live++;
	return malloc(size);
}

static void
failing_free(void *ctx, void *ptr)
{
	FailingAlloc *f = ctx;

	f->live--;
	free(ptr);
}

static void
test_out_of_memory(void)
{
	const char *doc = "{\"env\":[{\"name\":\"A\",\"value\":\"1\"}],\"r\":{\"requests\":{\"cpu\":\"1\"}},"
					  "\"big\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
	int bad = 0,
		leaks = 0,
		succeeded = 0;

	for (int budget = 0; budget < 40; budget++)
	{
		FailingAlloc f = { budget, 0 };
		MlJsonArena *a = ml_json_arena_new_with(failing_alloc, failing_free, &f);
		MlJsonError err;
		MlJsonValue *v;
		MlSpecDiff d;
		char id[ML_CONTENT_ID_LEN + 1];

		if (a == NULL)
			continue;
		v = ml_json_parse(a, doc, strlen(doc), NULL, &err);
		if (v == NULL && err.code != ML_JSON_ERR_NOMEM)
			bad++;
		if (v != NULL)
		{
			bool ok1 = ml_json_content_id(a, v, id, &err);

			if (!ok1 && err.code != ML_JSON_ERR_NOMEM)
				bad++;
			if (!ml_spec_diff(a, v, v, &d, &err) && err.code != ML_JSON_ERR_NOMEM)
				bad++;
			if (ok1)
				succeeded++;
		}
		ml_json_arena_free(a);
		if (f.live != 0)
			leaks++;
	}
	ok_fmt(bad == 0, "%s", "allocation failures surface as ML_JSON_ERR_NOMEM");
	ok_fmt(leaks == 0, "%s", "the arena frees every block through the caller's free");
	ok_fmt(succeeded > 0, "%s", "with enough memory the same calls succeed");
}

int
main(int argc, char **argv)
{
	unit_tap_begin(argc, argv);
	test_canonical();
	test_errors();
	test_tree();
	test_content_id();
	test_spec_diff();
	test_large_keyed_list();
	test_diff_path_limit();
	test_quantities();
	test_names();
	test_plain_strings();
	test_out_of_memory();
	unit_tap_replay(argc > 2 ? argv[2] : "fuzz/regressions", mlfuzz_check_all);
	return unit_tap_end();
}
