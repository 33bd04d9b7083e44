/*
 * artifact_verdict.c — what the object store's answer means for an artifact
 * check (see include/mlplat/artifact_verdict.h).  Pure: no PostgreSQL
 * headers, no I/O, so test/unit builds it without a server.
 */
#include "mlplat/artifact_verdict.h"
#include "mlplat/backoff.h"

/* how soon to look again when the configuration is missing or a store says no */
#define SLOW_RETRY_MS 30000
/* the first retry after a transient answer, doubling up to mlplat.backoff_max */
#define RETRY_BASE_MS 500

int
ml_artifact_slow_retry_ms(int64_t backoff_max_ms)
{
	return (int) (backoff_max_ms < SLOW_RETRY_MS ? backoff_max_ms : SLOW_RETRY_MS);
}

static MlArtifactNext
next(MlArtifactStep step, MlplatArtifactVerdict verdict, int retry_ms)
{
	MlArtifactNext n;

	n.step = step;
	n.verdict = verdict;
	n.retry_ms = retry_ms;
	return n;
}

static MlArtifactNext
failed(MlArtifactStep step, const MlArtifactAnswer *a)
{
	return next(step, MLPLAT_ARTIFACT_FAILED, ml_artifact_slow_retry_ms(a->backoff_max_ms));
}

MlArtifactNext
ml_artifact_next(const MlArtifactAnswer *a)
{
	/* the check's own bound first: its sink stopped the transfer, which the store did not fail */
	if (a->too_big)
		return failed(ML_ARTIFACT_STEP_TOO_BIG, a);
	if (a->seen == ML_ARTIFACT_SEEN_ERROR && !a->permanent)
		return next(ML_ARTIFACT_STEP_RETRY, MLPLAT_ARTIFACT_RETRY,
					(int) mlplat_backoff_delay_ms(a->attempts + 1, RETRY_BASE_MS, a->backoff_max_ms,
												  a->retry_after_s,
												  (uint32_t) a->entity_id ^ (uint32_t) a->attempts));
	if (a->ask == ML_ARTIFACT_ASK_DELETE)
		return a->seen == ML_ARTIFACT_SEEN_ERROR ? failed(ML_ARTIFACT_STEP_REFUSED, a)
												 : next(ML_ARTIFACT_STEP_DONE, MLPLAT_ARTIFACT_OK, -1);
	if (a->seen == ML_ARTIFACT_SEEN_FOUND)
		return next(ML_ARTIFACT_STEP_READ, MLPLAT_ARTIFACT_UNDECIDED, -1);
	if (a->seen == ML_ARTIFACT_SEEN_GONE)
		return failed(ML_ARTIFACT_STEP_MISSING, a);
	/* refused (403: a wrong secret or a policy): the GET after a HEAD carries the store's code */
	if (a->ask == ML_ARTIFACT_ASK_HEAD && a->http_status >= 400)
		return next(ML_ARTIFACT_STEP_ASK_GET, MLPLAT_ARTIFACT_UNDECIDED, -1);
	return failed(ML_ARTIFACT_STEP_REFUSED, a);
}
