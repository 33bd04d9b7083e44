/*
 * artifact_verdict.h — what the object store's answer to an artifact check
 * means for the check, decided in pure C: no PostgreSQL headers, no I/O.
 *
 * artifact.c reads every answer of the store (a digest check's HEAD, the GET
 * that hashes the object, a fetch's GET, a DELETE) through observe.h, which
 * classifies it one way for every peer: found, gone (the store's 404), or an
 * error that is permanent or not, with its Retry-After.  ml_artifact_next
 * turns that classification into the check's next step and verdict; what it
 * found (a digest, a body) and the texts the tenant and the administrators
 * read stay in artifact.c.  test/unit/artifact_verdict_test.c covers every
 * branch.
 */
#ifndef MLPLAT_ARTIFACT_VERDICT_H
#define MLPLAT_ARTIFACT_VERDICT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum MlplatArtifactVerdict
{
	MLPLAT_ARTIFACT_UNDECIDED = 0,
	MLPLAT_ARTIFACT_OK,		/* the object exists and its SHA-256 is the registered one */
	MLPLAT_ARTIFACT_FAILED, /* missing, different, too large to hash, or not checkable */
	MLPLAT_ARTIFACT_RETRY,	/* transient (transport, 5xx, 429): try again after retry_ms */
	MLPLAT_ARTIFACT_WAIT	/* no usable object store configuration yet */
} MlplatArtifactVerdict;

/* What a check asked the object store. */
typedef enum MlArtifactAsk
{
	ML_ARTIFACT_ASK_HEAD,  /* a digest check's HEAD: the store's checksum, ETag and size */
	ML_ARTIFACT_ASK_HASH,  /* the GET streamed through SHA-256 when the HEAD gave no digest */
	ML_ARTIFACT_ASK_FETCH, /* a small object read whole */
	ML_ARTIFACT_ASK_DELETE /* an object deleted: gone is what was asked for */
} MlArtifactAsk;

/* The answer as observe.h classified it (MlplatObservedState without "unread"). */
typedef enum MlArtifactSeen
{
	ML_ARTIFACT_SEEN_FOUND, /* a 2xx */
	ML_ARTIFACT_SEEN_GONE,	/* the store has no such object (404) */
	ML_ARTIFACT_SEEN_ERROR	/* anything else: permanent or not */
} MlArtifactSeen;

typedef struct MlArtifactAnswer
{
	MlArtifactAsk ask;
	MlArtifactSeen seen;
	bool permanent;	   /* ERROR: a retry soon will not change it */
	bool too_big;	   /* the object ran past what the check may read (its sink refused more) */
	int http_status;   /* 0: no answer */
	int retry_after_s; /* the answer's Retry-After, 0 when none */
	/* for the backoff of a retry */
	int attempts;	   /* the entity's failed attempts so far */
	int64_t entity_id; /* spreads entities' retries (the deployment's id; 0 for a named object) */
	int64_t backoff_max_ms;
} MlArtifactAnswer;

typedef enum MlArtifactStep
{
	ML_ARTIFACT_STEP_READ,	  /* found: read what it says (the HEAD's digest, the hash, the body) */
	ML_ARTIFACT_STEP_ASK_GET, /* a HEAD refused: a HEAD has no body to name the store's error code,
								 * so the GET that follows asks again and names it */
	ML_ARTIFACT_STEP_DONE,	  /* a DELETE: the object is gone (deleted now, or before) */
	ML_ARTIFACT_STEP_MISSING, /* the store has no such object */
	ML_ARTIFACT_STEP_REFUSED, /* the store refused: any other permanent answer (a DELETE's too) */
	ML_ARTIFACT_STEP_TOO_BIG, /* larger than the check may read */
	ML_ARTIFACT_STEP_RETRY	  /* no answer, a timeout, throttling or a server's failure */
} MlArtifactStep;

typedef struct MlArtifactNext
{
	MlArtifactStep step;
	MlplatArtifactVerdict verdict; /* UNDECIDED for READ and ASK_GET: the check goes on */
	int retry_ms;				   /* RETRY: the backoff (Retry-After honoured); FAILED: the slow look; else -1 */
} MlArtifactNext;

extern MlArtifactNext ml_artifact_next(const MlArtifactAnswer *a);

/* How soon to look again after a FAILED or WAIT verdict: 30 s, or mlplat.backoff_max when lower. */
extern int ml_artifact_slow_retry_ms(int64_t backoff_max_ms);

#endif /* MLPLAT_ARTIFACT_VERDICT_H */
