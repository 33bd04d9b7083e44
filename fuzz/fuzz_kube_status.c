/*
 * fuzz_kube_status.c — libFuzzer target for the Kubernetes response
 * classification (src/http/kube_response.c): the HTTP status, a Status body
 * and the masking of the bearer token in every message.
 *
 * Input: 2 bytes HTTP status (big-endian, mod 600), 1 byte flags (bit 0: the
 * transport failed; bit 1: take "body is JSON" from our parser, else bit 2),
 * 1 byte token length T, T bytes token, the rest is the body (also the
 * transport's error text when bit 0 is set).
 *
 * Properties: never crash; every message and reason is printable ASCII and
 * bounded; the token (8+ bytes) never appears in them; the outcome follows
 * the status as documented (EXISTS only for a Status with reason
 * AlreadyExists); OK exactly when there is no message; the same input gives
 * the same bytes; and ml_kube_sanitize agrees byte for byte with a naive
 * reference (blank, then mask every occurrence found in the original bytes,
 * also one cut off by the bound).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/json.h"
#include "mlplat/kube_response.h"
#include "props.h"

static bool
printable_line(const char *s, size_t bound)
{
	size_t n = strnlen(s, bound);

	if (n == bound)
		return false; /* no NUL inside the buffer */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] > 0x7e)
			return false;
	return true;
}

static bool
contains(const char *hay, const char *needle)
{
	return needle[0] != '\0' && strstr(hay, needle) != NULL;
}

/* the reference: a mask array over the original bytes, then blank + mask */
static const char *
check_sanitize(const char *s, size_t len, size_t max, const char *token)
{
	char out[600];
	char ref[600];
	size_t tl = strlen(token);
	size_t n = len < max ? len : max;
	size_t got;

	if (n > sizeof(out) - 4)
		return NULL;
	got = ml_kube_sanitize(s, len, max, token, out, sizeof(out));
	for (size_t i = 0; i < n; i++)
		ref[i] = ((unsigned char) s[i] >= 0x20 && (unsigned char) s[i] < 0x7f) ? s[i] : ' ';
	if (tl >= 8)
		for (size_t i = 0; i + tl <= len; i++)
			if (memcmp(s + i, token, tl) == 0)
				for (size_t j = i; j < i + tl && j < n; j++)
					ref[j] = '*';
	if (len > n)
	{
		memcpy(ref + n, "...", 3);
		n += 3;
	}
	ref[n] = '\0';
	if (got != n || strcmp(out, ref) != 0)
		return "ml_kube_sanitize disagrees with the reference";
	return NULL;
}

/* our own reading of the body: a Status object whose reason is AlreadyExists */
static bool
reference_exists(const char *body, size_t len)
{
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError err;
	const MlJsonValue *v = a ? ml_json_parse(a, body, len, NULL, &err) : NULL;
	const MlJsonValue *kind = ml_json_object_get(v, "kind");
	const MlJsonValue *reason = ml_json_object_get(v, "reason");
	bool r;

	r = kind && reason && kind->type == ML_JSON_STRING && reason->type == ML_JSON_STRING &&
		kind->u.string.len == strlen("Status") && memcmp(kind->u.string.str, "Status", 6) == 0 &&
		reason->u.string.len == strlen("AlreadyExists") &&
		memcmp(reason->u.string.str, "AlreadyExists", 13) == 0;
	ml_json_arena_free(a);
	return r;
}

static const char *
check(const uint8_t *data, size_t size)
{
	int status;
	unsigned flags;
	size_t tl;
	char token[256];
	char *body;
	size_t blen;
	bool is_json = false;
	MlKubeResponse r1;
	MlKubeResponse r2;
	const char *bad = NULL;

	if (size < 4)
		return NULL;
	status = ((data[0] << 8) | data[1]) % 600;
	flags = data[2];
	tl = data[3];
	if (tl > size - 4)
		tl = size - 4;
	memcpy(token, data + 4, tl);
	token[tl] = '\0';
	blen = size - 4 - tl;
	/* a private copy, NUL-terminated like a response body, so overreads show */
	body = malloc(blen + 1);
	memcpy(body, data + 4 + tl, blen);
	body[blen] = '\0';

	if (flags & 2)
	{
		MlJsonArena *a = ml_json_arena_new();
		MlJsonError err;

		is_json = a != NULL && ml_json_parse(a, body, blen, NULL, &err) != NULL;
		ml_json_arena_free(a);
	}
	else
		is_json = (flags & 4) != 0;

	ml_kube_classify(status, flags & 1, body, "GET", body, blen, is_json, token, &r1);
	ml_kube_classify(status, flags & 1, body, "GET", body, blen, is_json, token, &r2);

	if (memcmp(&r1, &r2, sizeof(r1)) != 0)
		bad = "the same response gave different results";
	else if (!printable_line(r1.message, sizeof(r1.message)) ||
			 !printable_line(r1.reason, sizeof(r1.reason)))
		bad = "a message or reason that is not one printable line";
	/*
	 * (a token with '*' or ' ' in it can reappear out of the masking or the
	 * blanking themselves; bearer tokens are token68, without either)
	 */
	else if (strlen(token) >= 8 && strpbrk(token, "* ") == NULL &&
			 (contains(r1.message, token) || contains(r1.reason, token)))
		bad = "the token appears in a message or reason";
	else if ((r1.outcome == MLPLAT_KUBE_OK) != (r1.message[0] == '\0'))
		bad = "OK with a message, or a failure without one";
	else if (r1.has_reason && !r1.is_status)
		bad = "a reason outside a Status";
	else if (flags & 1)
	{
		if (status == 0 ? r1.outcome != MLPLAT_KUBE_RETRY
						: r1.outcome != ((status == 429 || status >= 500) ? MLPLAT_KUBE_RETRY : MLPLAT_KUBE_FAILED))
			bad = "a failed transfer classified wrongly";
	}
	else if (status >= 200 && status < 300)
	{
		if (r1.outcome != ((!is_json && blen > 0) ? MLPLAT_KUBE_FAILED : MLPLAT_KUBE_OK))
			bad = "a 2xx classified wrongly";
	}
	else if (status == 409)
	{
		bool exists = reference_exists(body, blen);

		if (r1.outcome != (exists ? MLPLAT_KUBE_EXISTS : MLPLAT_KUBE_CONFLICT))
			bad = "a 409 classified wrongly";
	}
	else if (r1.outcome != (status == 404 ? MLPLAT_KUBE_NOT_FOUND : status == 410				   ? MLPLAT_KUBE_EXPIRED
																: (status == 429 || status >= 500) ? MLPLAT_KUBE_RETRY
																								   : MLPLAT_KUBE_FAILED))
		bad = "an error status classified wrongly";

	if (bad == NULL)
		bad = check_sanitize(body, blen, ML_KUBE_EXCERPT_MAX, token);
	if (bad == NULL)
		bad = check_sanitize(body, blen, flags >> 3, token); /* small bounds: cuts everywhere */
	free(body);
	return bad;
}

MLFUZZ_TARGET(check)
