/*
 * kube_response.c — classify a Kubernetes API answer; see
 * include/mlplat/kube_response.h.
 *
 * Pure C (no PostgreSQL headers) so fuzz/fuzz_kube_status.c reaches exactly
 * the code the workers run.  Everything copied from a response into a message
 * goes through ml_kube_sanitize(): the API server is trusted to answer, not to
 * write our log lines, and a server that echoes the Authorization header must
 * not put the token into them either.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mlplat/json.h"
#include "mlplat/kube_response.h"

/* Tokens shorter than this are not masked: it would garble ordinary words. */
#define TOKEN_MASK_MIN 8

size_t
ml_kube_sanitize(const char *s, size_t len, size_t max, const char *token,
				 char *out, size_t outsize)
{
	size_t n;
	size_t tl = token ? strlen(token) : 0;

	if (outsize == 0)
		return 0;
	if (s == NULL)
		len = 0;
	n = len < max ? len : max;
	if (n > outsize - 1)
		n = outsize - 1;
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		out[i] = (c < 0x20 || c == 0x7f || c >= 0x80) ? ' ' : (char) c;
	}

	/*
	 * Mask on the original bytes, before blanking (a token with a byte we blank
	 * would no longer match) and before cutting (a token straddling the cut
	 * must not leave its first bytes behind).
	 */
	if (tl >= TOKEN_MASK_MIN)
		for (size_t i = 0; i < n && len - i >= tl; i++)
			if (memcmp(s + i, token, tl) == 0)
				memset(out + i, '*', i + tl <= n ? tl : n - i);
	if (len > n && n + 3 < outsize)
	{
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return n;
}

/* snprintf into out, never failing: a cut line is still a line */
static void line(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
line(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void) vsnprintf(out, size, fmt, ap);
	va_end(ap);
}

/* A string member of a Status object, or NULL */
static const MlJsonValue *
status_string(const MlJsonValue *status, const char *key)
{
	const MlJsonValue *v = ml_json_object_get(status, key);

	return (v != NULL && v->type == ML_JSON_STRING) ? v : NULL;
}

/*
 * Both entry points.  parsed: the caller parsed the body with our parser
 * and root is its tree (NULL: not JSON); else an error body is parsed here.
 */
static void
classify(int status, bool failed, const char *error, const char *method,
		 const char *body, size_t len, bool body_is_json, bool parsed, const MlJsonValue *root,
		 const char *token, MlKubeResponse *out)
{
	char what[ML_KUBE_STATUS_MESSAGE_MAX + 4];
	bool exists = false;

	memset(out, 0, sizeof(*out));
	if (body == NULL)
		len = 0;

	if (failed)
	{
		ml_kube_sanitize(error, error ? strlen(error) : 0, ML_KUBE_STATUS_MESSAGE_MAX, token,
						 what, sizeof(what));
		if (status == 0)
		{
			out->outcome = MLPLAT_KUBE_RETRY;
			line(out->message, sizeof(out->message), "Kubernetes API %s request failed: %s",
				 method ? method : "request", what);
		}
		else
		{
			/* a status arrived, but the body did not (too large, cut off) */
			out->outcome = (status == 429 || status >= 500) ? MLPLAT_KUBE_RETRY : MLPLAT_KUBE_FAILED;
			line(out->message, sizeof(out->message),
				 "Kubernetes API returned HTTP %d but the response failed: %s", status, what);
		}
		return;
	}

	if (status >= 200 && status < 300)
	{
		if (!body_is_json && len > 0)
		{
			out->outcome = MLPLAT_KUBE_FAILED;
			ml_kube_sanitize(body, len, ML_KUBE_EXCERPT_MAX, token, what, sizeof(what));
			line(out->message, sizeof(out->message),
				 "Kubernetes API returned HTTP %d with a body that is not JSON: %s", status, what);
		}
		else
			out->outcome = MLPLAT_KUBE_OK;
		return;
	}

	/* An error: a Status object says why.  Error bodies are small. */
	if (len > 0)
	{
		MlJsonArena *arena = NULL;
		MlJsonError err;
		const MlJsonValue *kind;

		if (!parsed && (arena = ml_json_arena_new()) != NULL)
			root = ml_json_parse(arena, body, len, NULL, &err);
		kind = root ? status_string(root, "kind") : NULL;
		if (kind != NULL && kind->u.string.len == 6 && memcmp(kind->u.string.str, "Status", 6) == 0)
		{
			const MlJsonValue *reason = status_string(root, "reason");
			const MlJsonValue *msg = status_string(root, "message");

			out->is_status = true;
			if (reason != NULL)
			{
				out->has_reason = true;
				/* compared as sent: a reason with a NUL in it is not "AlreadyExists" */
				exists = reason->u.string.len == 13 &&
						 memcmp(reason->u.string.str, "AlreadyExists", 13) == 0;
				ml_kube_sanitize(reason->u.string.str, reason->u.string.len, ML_KUBE_REASON_MAX,
								 token, out->reason, sizeof(out->reason));
			}
			if (msg != NULL)
				ml_kube_sanitize(msg->u.string.str, msg->u.string.len, ML_KUBE_STATUS_MESSAGE_MAX,
								 token, what, sizeof(what));
			line(out->message, sizeof(out->message), "Kubernetes API %d %s: %s", status,
				 out->has_reason ? out->reason : "(no reason)", msg ? what : "(no message)");
		}
		if (arena != NULL)
			ml_json_arena_free(arena);
	}
	if (!out->is_status)
	{
		if (len > 0)
			ml_kube_sanitize(body, len, ML_KUBE_EXCERPT_MAX, token, what, sizeof(what));
		line(out->message, sizeof(out->message), "Kubernetes API returned HTTP %d: %s", status,
			 len > 0 ? what : "(empty body)");
	}

	if (status == 404)
		out->outcome = MLPLAT_KUBE_NOT_FOUND;
	else if (status == 409)
		out->outcome = exists ? MLPLAT_KUBE_EXISTS : MLPLAT_KUBE_CONFLICT;
	else if (status == 410)
		out->outcome = MLPLAT_KUBE_EXPIRED;
	else if (status == 429 || status >= 500)
		out->outcome = MLPLAT_KUBE_RETRY;
	else
		out->outcome = MLPLAT_KUBE_FAILED;
}

void
ml_kube_classify(int status, bool failed, const char *error, const char *method,
				 const char *body, size_t len, bool body_is_json,
				 const char *token, MlKubeResponse *out)
{
	classify(status, failed, error, method, body, len, body_is_json, false, NULL, token, out);
}

void
ml_kube_classify_tree(int status, bool failed, const char *error, const char *method,
					  const char *body, size_t len, const MlJsonValue *root,
					  const char *token, MlKubeResponse *out)
{
	classify(status, failed, error, method, body, len, root != NULL, true, root, token, out);
}

const char *
ml_kube_outcome_name(MlplatKubeOutcome outcome)
{
	switch (outcome)
	{
		case MLPLAT_KUBE_OK:
			return "ok";
		case MLPLAT_KUBE_NOT_FOUND:
			return "not_found";
		case MLPLAT_KUBE_EXISTS:
			return "exists";
		case MLPLAT_KUBE_CONFLICT:
			return "conflict";
		case MLPLAT_KUBE_EXPIRED:
			return "expired";
		case MLPLAT_KUBE_RETRY:
			return "retry";
		case MLPLAT_KUBE_FAILED:
			return "failed";
	}
	return "unknown";
}
