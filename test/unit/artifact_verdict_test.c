/*
 * artifact_verdict_test.c — unit test of ml_artifact_next (no PostgreSQL;
 * TAP): every branch from an object store's classified answer to an
 * artifact check's step, verdict and retry delay.
 */
#include <stdio.h>

#include "mlplat/artifact_verdict.h"
#include "mlplat/backoff.h"
#include "unit_tap.h"

static const char *const asks[] = { "HEAD", "hash GET", "fetch GET", "DELETE" };

static MlArtifactAnswer
answer(MlArtifactAsk ask, MlArtifactSeen seen, bool permanent, int status)
{
	MlArtifactAnswer a = { 0 };

	a.ask = ask;
	a.seen = seen;
	a.permanent = permanent;
	a.http_status = status;
	a.attempts = 2;
	a.entity_id = 42;
	a.backoff_max_ms = 300000;
	return a;
}

static int
is(MlArtifactNext n, MlArtifactStep step, MlplatArtifactVerdict verdict, int retry_ms)
{
	return n.step == step && n.verdict == verdict && n.retry_ms == retry_ms;
}

int
main(int argc, char **argv)
{
	char what[128];
	MlArtifactAnswer a;
	int64_t backoff;

	unit_tap_begin(argc, argv);

	for (int k = ML_ARTIFACT_ASK_HEAD; k <= ML_ARTIFACT_ASK_FETCH; k++)
	{
		snprintf(what, sizeof(what), "%s found: read what it says, undecided", asks[k]);
		ok(is(ml_artifact_next(&(MlArtifactAnswer){ .ask = k, .seen = ML_ARTIFACT_SEEN_FOUND, .http_status = 200 }),
			  ML_ARTIFACT_STEP_READ, MLPLAT_ARTIFACT_UNDECIDED, -1),
		   what);
		a = answer(k, ML_ARTIFACT_SEEN_GONE, false, 404);
		snprintf(what, sizeof(what), "%s gone (404): missing, failed, the slow look", asks[k]);
		ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_MISSING, MLPLAT_ARTIFACT_FAILED, 30000), what);
	}

	a = answer(ML_ARTIFACT_ASK_HEAD, ML_ARTIFACT_SEEN_ERROR, true, 403);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_ASK_GET, MLPLAT_ARTIFACT_UNDECIDED, -1),
	   "HEAD refused (403): undecided, the GET names the store's code");
	a = answer(ML_ARTIFACT_ASK_HEAD, ML_ARTIFACT_SEEN_ERROR, true, 301);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_REFUSED, MLPLAT_ARTIFACT_FAILED, 30000),
	   "HEAD answered with a redirect (301, not followed): refused, failed");
	a = answer(ML_ARTIFACT_ASK_HASH, ML_ARTIFACT_SEEN_ERROR, true, 403);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_REFUSED, MLPLAT_ARTIFACT_FAILED, 30000),
	   "hash GET refused (403): refused, failed");
	a = answer(ML_ARTIFACT_ASK_FETCH, ML_ARTIFACT_SEEN_ERROR, true, 400);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_REFUSED, MLPLAT_ARTIFACT_FAILED, 30000),
	   "fetch GET refused (400): refused, failed");

	a = answer(ML_ARTIFACT_ASK_HASH, ML_ARTIFACT_SEEN_ERROR, false, 200);
	a.too_big = true;
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_TOO_BIG, MLPLAT_ARTIFACT_FAILED, 30000),
	   "hash GET stopped by its sink (the transfer failed): too big, not a retry");
	a = answer(ML_ARTIFACT_ASK_FETCH, ML_ARTIFACT_SEEN_ERROR, false, 200);
	a.too_big = true;
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_TOO_BIG, MLPLAT_ARTIFACT_FAILED, 30000),
	   "fetch GET stopped by its sink: too big");

	for (int k = ML_ARTIFACT_ASK_HEAD; k <= ML_ARTIFACT_ASK_DELETE; k++)
	{
		a = answer(k, ML_ARTIFACT_SEEN_ERROR, false, 503);
		backoff = mlplat_backoff_delay_ms(3, 500, 300000, 0, 42u ^ 2u);
		snprintf(what, sizeof(what), "%s 503 (transient): retry after the entity's backoff", asks[k]);
		ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_RETRY, MLPLAT_ARTIFACT_RETRY, (int) backoff), what);
	}
	a = answer(ML_ARTIFACT_ASK_HEAD, ML_ARTIFACT_SEEN_ERROR, false, 0);
	a.retry_after_s = 120;
	ok(ml_artifact_next(&a).verdict == MLPLAT_ARTIFACT_RETRY && ml_artifact_next(&a).retry_ms >= 120000,
	   "a Retry-After is honoured: no retry before it");
	a = answer(ML_ARTIFACT_ASK_HEAD, ML_ARTIFACT_SEEN_ERROR, false, 0);
	a.attempts = 0;
	ok(ml_artifact_next(&a).retry_ms == 500, "the first retry of an entity with no failure waits 500 ms");

	a = answer(ML_ARTIFACT_ASK_DELETE, ML_ARTIFACT_SEEN_FOUND, false, 204);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_DONE, MLPLAT_ARTIFACT_OK, -1), "DELETE answered 2xx: done");
	a = answer(ML_ARTIFACT_ASK_DELETE, ML_ARTIFACT_SEEN_GONE, false, 404);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_DONE, MLPLAT_ARTIFACT_OK, -1), "DELETE of what is gone (404): done");
	a = answer(ML_ARTIFACT_ASK_DELETE, ML_ARTIFACT_SEEN_ERROR, true, 403);
	ok(is(ml_artifact_next(&a), ML_ARTIFACT_STEP_REFUSED, MLPLAT_ARTIFACT_FAILED, 30000), "DELETE refused: failed");

	a = answer(ML_ARTIFACT_ASK_HEAD, ML_ARTIFACT_SEEN_GONE, false, 404);
	a.backoff_max_ms = 5000;
	ok(ml_artifact_next(&a).retry_ms == 5000, "the slow look is never later than mlplat.backoff_max");
	ok(ml_artifact_slow_retry_ms(300000) == 30000 && ml_artifact_slow_retry_ms(100) == 100,
	   "the slow look: 30 s, or the backoff cap when lower");

	return unit_tap_end();
}
