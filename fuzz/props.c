/*
 * props.c — properties checked by the fuzz targets and the unit test.
 *
 * The reference implementations here are deliberately different from the
 * code under test (POSIX regular expressions instead of byte loops) so a
 * shared misunderstanding is less likely to hide.
 */
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/spec_diff.h"
#include "mlplat/validate.h"
#include "props.h"

const char *
mlfuzz_check_parse(const uint8_t *data, size_t size)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	MlJsonValue *v;
	MlJsonLimits small = { 8, 0 };
	const char *bad = NULL;

	if (a == NULL)
		return NULL;
	v = ml_json_parse(a, (const char *) data, size, NULL, &err);
	if (v == NULL)
	{
		if (err.code == ML_JSON_OK || err.message[0] == '\0')
			bad = "parse failed without an error code or message";
		else if (err.offset > size)
			bad = "parse error offset beyond the input";
	}
	else if (err.code != ML_JSON_OK)
		bad = "parse succeeded but left an error code";
	/* the depth limit must be an error, never a crash */
	if (bad == NULL)
	{
		MlJsonValue *w = ml_json_parse(a, (const char *) data, size, &small, &err);

		if (w != NULL && v == NULL)
			bad = "a tighter depth limit accepted what the default rejected";
	}
	ml_json_arena_free(a);
	return bad;
}

const char *
mlfuzz_check_canonical(const uint8_t *data, size_t size)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	MlJsonValue *v,
		*w;
	char *c1,
		*c2;
	size_t n1,
		n2;
	char id1[ML_CONTENT_ID_LEN + 1],
		id2[ML_CONTENT_ID_LEN + 1],
		id3[ML_CONTENT_ID_LEN + 1];
	const char *bad = NULL;

	if (a == NULL)
		return NULL;
	v = ml_json_parse(a, (const char *) data, size, NULL, &err);
	if (v == NULL)
		goto done;
	c1 = ml_json_canonical(a, v, &n1, &err);
	if (c1 == NULL)
	{
		bad = "canonical form of a parsed document failed";
		goto done;
	}
	w = ml_json_parse(a, c1, n1, NULL, &err);
	if (w == NULL)
	{
		bad = "canonical text does not parse";
		goto done;
	}
	c2 = ml_json_canonical(a, w, &n2, &err);
	if (c2 == NULL || n1 != n2 || memcmp(c1, c2, n1) != 0)
	{
		bad = "canonical form is not a fixed point";
		goto done;
	}
	if (!ml_json_content_id(a, v, id1, &err) || !ml_json_content_id(a, w, id2, &err) ||
		!ml_sha256_hex(c1, n1, id3))
	{
		bad = "content id failed";
		goto done;
	}
	if (strcmp(id1, id2) != 0 || strcmp(id1, id3) != 0)
		bad = "content id is not stable across canonicalization";
done:
	ml_json_arena_free(a);
	return bad;
}

static const char *
diff_must_be_empty(MlJsonArena *a, const MlJsonValue *x, const MlJsonValue *y, const char *what)
{
	MlSpecDiff d;
	MlJsonError err;

	if (!ml_spec_diff(a, x, y, &d, &err))
		return "spec_diff failed";
	if (d.count != 0)
		return what;
	return NULL;
}

const char *
mlfuzz_check_spec_diff(const uint8_t *data, size_t size)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	const uint8_t *sep = memchr(data, 0, size);
	size_t n1 = sep ? (size_t) (sep - data) : size;
	MlJsonValue *des,
		*obs = NULL,
		*des2;
	MlSpecDiff d;
	char *canon,
		*out;
	size_t clen,
		olen;
	const char *bad = NULL;

	if (a == NULL)
		return NULL;
	des = ml_json_parse(a, (const char *) data, n1, NULL, &err);
	if (sep)
		obs = ml_json_parse(a, (const char *) sep + 1, size - n1 - 1, NULL, &err);
	if (des == NULL)
		goto done;

	if (!ml_spec_diff(a, des, obs, &d, &err))
	{
		bad = "spec_diff failed";
		goto done;
	}
	out = ml_spec_diff_to_json(a, &d, &olen, &err);
	if (out == NULL || ml_json_parse(a, out, olen, NULL, &err) == NULL)
	{
		bad = "spec_diff output is not JSON";
		goto done;
	}
	for (size_t i = 1; i < d.count; i++)
		if (strcmp(d.entries[i - 1].path, d.entries[i].path) > 0)
		{
			bad = "spec_diff paths are not sorted";
			goto done;
		}
	if ((bad = diff_must_be_empty(a, des, des, "diff(x, x) is not empty")) != NULL)
		goto done;
	if (obs && (bad = diff_must_be_empty(a, obs, obs, "diff(y, y) is not empty")) != NULL)
		goto done;
	canon = ml_json_canonical(a, des, &clen, &err);
	if (canon == NULL || (des2 = ml_json_parse(a, canon, clen, NULL, &err)) == NULL)
	{
		bad = "canonical form of desired does not parse";
		goto done;
	}
	bad = diff_must_be_empty(a, des, des2, "diff(x, canonical(x)) is not empty");
done:
	ml_json_arena_free(a);
	return bad;
}

/* compiled once per pattern (the fuzz targets call this millions of times) */
static bool
regex_match(const char *re, const char *s)
{
	static const char *cached_re[4];
	static regex_t cached[4];
	int i;

	for (i = 0; i < 4 && cached_re[i] != NULL; i++)
		if (cached_re[i] == re)
			break;
	if (i == 4)
		abort();
	if (cached_re[i] == NULL)
	{
		if (regcomp(&cached[i], re, REG_EXTENDED | REG_NOSUB) != 0)
			abort();
		cached_re[i] = re;
	}
	return regexec(&cached[i], s, 0, NULL, 0) == 0;
}

static bool
ref_dns_label(const uint8_t *s, size_t len, size_t max_len)
{
	char *z;
	bool r;

	if (len == 0 || len > max_len || memchr(s, 0, len) != NULL)
		return false;
	z = malloc(len + 1);
	memcpy(z, s, len);
	z[len] = '\0';
	r = regex_match("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", z);
	free(z);
	return r;
}

/* the DNS-1035 reference: the regular expression deploy() used before names.c had the rule */
static bool
ref_dns1035_label(const uint8_t *s, size_t len, size_t max_len)
{
	char *z;
	bool r;

	if (len == 0 || len > max_len || memchr(s, 0, len))
		return false;
	z = malloc(len + 1);
	memcpy(z, s, len);
	z[len] = '\0';
	r = regex_match("^[a-z]([-a-z0-9]*[a-z0-9])?$", z);
	free(z);
	return r;
}

static bool
ref_traceparent(const char *s)
{
	if (!regex_match("^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$", s))
		return false;
	/* all-zero trace id or parent id is invalid */
	return strncmp(s + 3, "00000000000000000000000000000000", 32) != 0 &&
		   strncmp(s + 36, "0000000000000000", 16) != 0;
}

const char *
mlfuzz_check_names(const uint8_t *data, size_t size)
{
	size_t max_len;
	char *z;
	const char *bad = NULL;

	if (size == 0)
		return NULL;
	max_len = (size_t) data[0] + 1; /* 1..256 */
	if (mlplat_dns_label_is_valid((const char *) data + 1, size - 1, max_len) !=
		ref_dns_label(data + 1, size - 1, max_len))
		return "mlplat_dns_label_is_valid disagrees with the reference";
	if (mlplat_dns_label_is_valid((const char *) data + 1, size - 1, 63) !=
		ref_dns_label(data + 1, size - 1, 63))
		return "mlplat_dns_label_is_valid(63) disagrees with the reference";
	if (mlplat_dns1035_label_is_valid((const char *) data + 1, size - 1, max_len) !=
		ref_dns1035_label(data + 1, size - 1, max_len))
		return "mlplat_dns1035_label_is_valid disagrees with the reference";

	z = malloc(size);
	memcpy(z, data + 1, size - 1);
	z[size - 1] = '\0'; /* the validator reads up to the first NUL */
	if (mlplat_traceparent_is_valid(z) != ref_traceparent(z))
		bad = "mlplat_traceparent_is_valid disagrees with the reference";
	free(z);
	return bad;
}

const char *
mlfuzz_check_spdx(const uint8_t *data, size_t size)
{
	const char *r = mlplat_spdx_check((const char *) data, size);
	char *buf;
	const char *bad = NULL;
	size_t opens = 0;

	if (r != NULL)
		return r[0] == '\0' ? "mlplat_spdx_check refused with an empty reason" : NULL;
	if (size == 0 || size > MLPLAT_SPDX_MAX_LEN)
		return "mlplat_spdx_check accepted an empty or too long expression";
	for (size_t i = 0; i < size; i++)
		opens += data[i] == '(';
	buf = malloc(size + 5);
	/* (s) is valid too, unless it gets too long or too deep */
	buf[0] = '(';
	memcpy(buf + 1, data, size);
	buf[size + 1] = ')';
	if (size + 2 <= MLPLAT_SPDX_MAX_LEN && opens < 31 && mlplat_spdx_check(buf, size + 2) != NULL)
		bad = "a valid expression is refused once wrapped in parentheses";
	/* s AND (nothing after the operator) is refused */
	memcpy(buf, data, size);
	memcpy(buf + size, " AND", 4);
	if (bad == NULL && mlplat_spdx_check(buf, size + 4) == NULL)
		bad = "an expression with a dangling AND is accepted";
	free(buf);
	return bad;
}

const char *
mlfuzz_check_all(const uint8_t *data, size_t size)
{
	const char *bad;

	if ((bad = mlfuzz_check_parse(data, size)) != NULL)
		return bad;
	if ((bad = mlfuzz_check_canonical(data, size)) != NULL)
		return bad;
	if ((bad = mlfuzz_check_spec_diff(data, size)) != NULL)
		return bad;
	if ((bad = mlfuzz_check_names(data, size)) != NULL)
		return bad;
	return mlfuzz_check_spdx(data, size);
}
