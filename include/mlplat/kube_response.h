/*
 * kube_response.h — classify a Kubernetes API answer (pure; no PostgreSQL).
 *
 * The backend client (kube.c) and the libFuzzer target fuzz/fuzz_kube_status.c
 * share this code: the HTTP status and a Status body (kind "Status", reason,
 * message) become an outcome the reconcilers act on, and one printable,
 * bounded line for logs and views in which the bearer token never appears.
 * Nothing here allocates beyond a short-lived malloc arena for parsing a
 * Status body the caller has not parsed, and nothing throws.
 */
#ifndef MLPLAT_KUBE_RESPONSE_H
#define MLPLAT_KUBE_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum MlplatKubeOutcome
{
	MLPLAT_KUBE_OK = 0,	   /* 2xx */
	MLPLAT_KUBE_NOT_FOUND, /* 404 */
	MLPLAT_KUBE_EXISTS,	   /* 409 AlreadyExists (create): adopt the object */
	MLPLAT_KUBE_CONFLICT,  /* 409 Conflict (stale resourceVersion): re-read */
	MLPLAT_KUBE_EXPIRED,   /* 410 Gone (expired continue token): restart the LIST */
	MLPLAT_KUBE_RETRY,	   /* transport failure, 429, 5xx: back off and retry */
	MLPLAT_KUBE_FAILED	   /* other 4xx (400, 401, 403, 422): permanent until fixed */
} MlplatKubeOutcome;

/* Bounds of what a response may put into a message (bytes, before "...") */
#define ML_KUBE_EXCERPT_MAX 200		   /* of a body that is not a Status */
#define ML_KUBE_STATUS_MESSAGE_MAX 512 /* of Status.message */
#define ML_KUBE_REASON_MAX 64		   /* of Status.reason (CamelCase words) */
#define ML_KUBE_LINE_MAX 1024		   /* the whole line, with its prefix */

typedef struct MlKubeResponse
{
	MlplatKubeOutcome outcome;
	bool is_status;						 /* the body is an object with kind "Status" */
	bool has_reason;					 /* ... with a string reason (in reason) */
	char reason[ML_KUBE_REASON_MAX + 1]; /* printable, token masked */
	char message[ML_KUBE_LINE_MAX];		 /* one printable line; "" when OK */
} MlKubeResponse;

/*
 * Classify a finished request.  failed/error: the transport gave up (error is
 * its text, may be NULL); status: the HTTP status (0: none); body/len: the
 * response body (may be NULL); body_is_json: whether the caller's parser
 * accepted the body (decides only whether a 2xx body is usable); token: the
 * bearer token to mask in everything copied from the response (NULL: none).
 */
extern void ml_kube_classify(int status, bool failed, const char *error, const char *method,
							 const char *body, size_t len, bool body_is_json,
							 const char *token, MlKubeResponse *out);

/*
 * The same for a body the caller has parsed with our parser (mlplat/json.h):
 * root is its tree, NULL when it is not JSON.  Nothing is parsed again.
 */
struct MlJsonValue;
extern void ml_kube_classify_tree(int status, bool failed, const char *error, const char *method,
								  const char *body, size_t len, const struct MlJsonValue *root,
								  const char *token, MlKubeResponse *out);

/*
 * Copy at most max bytes of s[0..len) into out (outsize bytes, NUL-terminated,
 * "..." appended when cut), one byte per byte: control, DEL and non-ASCII bytes
 * become spaces, and every occurrence of token (when at least 8 bytes long) in
 * the original bytes becomes '*'s, also one cut off at the end.  Returns the
 * length written.
 */
extern size_t ml_kube_sanitize(const char *s, size_t len, size_t max, const char *token,
							   char *out, size_t outsize);

extern const char *ml_kube_outcome_name(MlplatKubeOutcome outcome);

#endif /* MLPLAT_KUBE_RESPONSE_H */
