/*
 * export.c — the OTLP/HTTP JSON span exporter.
 *
 * Spans wait in mlplat.spans with exported_at NULL.  A batch is read and
 * rendered by SQL (mlplat._spans_export_batch: the rendering is pure and
 * tested there), POSTed with no transaction open, and marked exported in a new
 * short transaction only after a 2xx — so a failed or timed-out request sends
 * the same spans again later (at least once: a collector that stored a batch
 * but whose answer was lost sees it twice).  The retry schedule lives in this
 * process only: a new leader simply starts sending.  The endpoint is never
 * logged (it may carry credentials in its user-info part).
 *
 * Answers are read as the OTLP/HTTP specification says: only 429, 502, 503
 * and 504 (and no answer at all) may be retried, after the server's
 * Retry-After when it gives one; every other non-2xx answer — 400 Bad Request
 * above all, a payload the collector will never take — drops the batch: it is
 * marked exported, counted as dropped, and never sent again, so one bad batch
 * cannot block the queue forever.  A 2xx with a partialSuccess counts its
 * rejected spans as dropped (the spec forbids retrying them).  Collector
 * credentials come from mlplat.otlp_headers_file (otlp_headers.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/otlp_export.h"
#include "mlplat/reconcile.h"
#include "mlplat/seam.h"
#include "mlplat/shmem.h"

/* batches per pass: a long backlog is sent over several passes, the health view updated between them */
#define MAX_BATCHES_PER_PASS 8

/* how much of a collector's message goes into last_error */
#define MESSAGE_MAX 160

static TimestampTz next_export_at = 0;
static int failures = 0;
static int drops = 0; /* batches dropped in a row (for the log) */

bool
mlplat_otlp_retryable(int status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

/*
 * From a collector's JSON answer: the Status message of an error (key
 * "message") or a partial success's errorMessage, and the partial success's
 * rejectedSpans (an int64, which proto3 JSON writes as a string).  Anything
 * that is not such JSON gives nothing.
 */
static void
read_answer(const MlplatHttpRequest *req, char **message, int64 *rejected)
{
	MlJsonArena *arena;
	MlJsonError err;
	const MlJsonValue *root;
	const MlJsonValue *ps;
	const MlJsonValue *m = NULL;
	const MlJsonValue *r;

	*message = NULL;
	*rejected = 0;
	if (req->resp_body == NULL || req->resp_len == 0)
		return;
	if ((arena = ml_json_arena_new()) == NULL)
		return;
	root = ml_json_parse(arena, req->resp_body, req->resp_len, NULL, &err);
	if (root && root->type == ML_JSON_OBJECT)
	{
		ps = ml_json_object_get(root, "partialSuccess");
		if (ps && ps->type == ML_JSON_OBJECT)
		{
			r = ml_json_object_get(ps, "rejectedSpans");
			if (r && r->type == ML_JSON_NUMBER && r->u.number.is_integer && r->u.number.value > 0)
				*rejected = (int64) r->u.number.value;
			else if (r && r->type == ML_JSON_STRING)
				*rejected = Max(0, strtoll(r->u.string.str, NULL, 10));
			m = ml_json_object_get(ps, "errorMessage");
		}
		else
			m = ml_json_object_get(root, "message");
		if (m && m->type == ML_JSON_STRING && m->u.string.len > 0)
			*message = pnstrdup(m->u.string.str, ml_utf8_clip(m->u.string.str, m->u.string.len, MESSAGE_MAX));
	}
	ml_json_arena_free(arena);
}

/*
 * Publish the outcome of one POST for mlplat.span_export_status: without it a
 * failing collector shows only in the server log.  error NULL: a success (of
 * which spans_dropped were rejected); dropped: a batch refused for good.
 */
static void
publish(int spans, const char *error, bool dropped, int64 spans_dropped)
{
	MlplatExportState *x;

	if (mlplat_shared == NULL)
		return;
	x = &mlplat_shared->export;
	SpinLockAcquire(&mlplat_shared->mutex);
	x->spans_dropped += spans_dropped;
	if (dropped)
	{
		x->batches_dropped++;
		x->last_failure = GetCurrentTimestamp();
		strlcpy(x->last_error, error, sizeof(x->last_error));
	}
	else if (error)
	{
		x->batches_failed++;
		x->last_failure = GetCurrentTimestamp();
		strlcpy(x->last_error, error, sizeof(x->last_error));
	}
	else
	{
		x->batches_sent++;
		x->spans_sent += spans;
		x->last_success = GetCurrentTimestamp();
	}
	x->consecutive_failures = failures;
	x->next_attempt = next_export_at;
	SpinLockRelease(&mlplat_shared->mutex);
}

/* The seam (seam.h): mlplat.span_export_batch read into ExportBatch */
typedef struct ExportBatch
{
	/* ids: bigint[], handed back to _spans_mark_exported; body: OTLP/HTTP JSON */
	MLPLAT_SEAM_MEMBERS(span_export_batch)
} ExportBatch;

MLPLAT_SEAM_STATIC(batch_seam, span_export_batch, ExportBatch);

MlplatSeam *const mlplat_span_export_seams[] = { &batch_seam, NULL };

/* Read one batch (its ids, its OTLP body, how many); false when nothing waits. */
static bool
read_batch(ExportBatch *out, int *count)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid type = INT4OID;
	Datum arg = Int32GetDatum(mlplat_otlp_batch_size);
	List *rows;

	mlplat_txn_begin();
	rows = mlplat_seam_claim(&batch_seam, cxt, "SELECT b FROM mlplat._spans_export_batch($1) b", 1, &type, &arg,
							 sizeof(ExportBatch));
	mlplat_txn_commit();
	MemoryContextSwitchTo(cxt);
	if (rows == NIL || ((ExportBatch *) linitial(rows))->ids == NULL)
		return false;
	*out = *(ExportBatch *) linitial(rows);
	*count = ArrayGetNItems(ARR_NDIM(out->ids), ARR_DIMS(out->ids));
	return true;
}

static void
mark_exported(MlplatPass *pass, ArrayType *ids)
{
	Oid types[2] = { INT8ARRAYOID, INT8OID };
	Datum args[2] = { PointerGetDatum(ids), Int64GetDatum(pass->epoch) };

	mlplat_txn_begin();
	if (SPI_execute_with_args("SELECT mlplat._spans_mark_exported($1, $2)", 2, types, args, NULL, false, 1) !=
		SPI_OK_SELECT)
		elog(ERROR, "mlplat: could not mark spans exported");
	mlplat_txn_commit();
}

/* Keep the batch waiting and come back after backoff (at least retry_after_s). */
static void
retry_later(MlplatPass *pass, int count, const char *why, int retry_after_s)
{
	int64 delay;

	failures = Min(failures + 1, 30);
	delay = mlplat_backoff_delay_ms(failures, 500, mlplat_backoff_max_ms, retry_after_s, (uint64) MyProcPid);
	next_export_at = GetCurrentTimestamp() + delay * 1000;
	pass->next_pass_ms = (long) delay;
	/* why stays in the log and span_export_status: a transport error may name the endpoint */
	snprintf(pass->status, sizeof(pass->status),
			 "export failed (mlplat.span_export_status says why); %d spans wait, retry in " INT64_FORMAT " ms", count,
			 delay);
	publish(count, why, false, 0);
	ereport(failures == 1 ? LOG : DEBUG1,
			(errmsg("mlplat: span export to mlplat.otlp_endpoint failed: %s; %d spans wait, retry in " INT64_FORMAT " ms",
					why, count, delay)));
}

void
mlplat_otlp_export_pass(MlplatPass *pass)
{
	TimestampTz now = GetCurrentTimestamp();
	char *url;
	size_t len;
	int sent = 0;
	bool more = false;

	if (mlplat_otlp_endpoint == NULL || mlplat_otlp_endpoint[0] == '\0')
	{
		next_export_at = 0;
		failures = 0;
		snprintf(pass->status, sizeof(pass->status),
				 "idle: no OTLP collector configured (set mlplat.otlp_endpoint); spans are kept, not sent");
		return;
	}
	if (now < next_export_at)
	{
		pass->next_pass_ms = Max(1L, (long) ((next_export_at - now) / 1000));
		snprintf(pass->status, sizeof(pass->status), "next export in %ld ms", pass->next_pass_ms);
		return;
	}
	len = strlen(mlplat_otlp_endpoint);
	while (len > 0 && mlplat_otlp_endpoint[len - 1] == '/')
		len--;
	url = psprintf("%.*s/v1/traces", (int) len, mlplat_otlp_endpoint);

	for (int i = 0; i < MAX_BATCHES_PER_PASS; i++)
	{
		ExportBatch b;
		int count;
		MlplatHttpBatch *batch;
		MlplatHttpRequest *req;
		const char *why;
		char *message;
		int64 rejected;

		if (!read_batch(&b, &count))
			break;
		batch = mlplat_http_batch_create(CurrentMemoryContext);
		req = mlplat_http_batch_add(batch, "POST", url);
		mlplat_http_request_set_body(req, "application/json", b.body, strlen(b.body));
		if ((why = mlplat_otlp_headers_apply(req)) != NULL)
		{
			/* never send without the credentials the operator configured */
			retry_later(pass, count, why, 0);
			return;
		}
		mlplat_http_batch_run(batch);
		/* no answer, a retryable one, or no final one (1xx, an unfollowed 3xx): keep the spans */
		if (req->failed || mlplat_otlp_retryable(req->status) || req->status < 200 ||
			(req->status >= 300 && req->status < 400))
		{
			retry_later(pass, count, req->failed ? req->error : psprintf("HTTP %d", req->status),
						req->retry_after_s);
			return;
		}
		read_answer(req, &message, &rejected);
		mark_exported(pass, b.ids);
		if (failures > 0)
			ereport(LOG, (errmsg("mlplat: span export to mlplat.otlp_endpoint works again")));
		failures = 0;
		next_export_at = 0;
		if (req->status < 200 || req->status > 299)
		{
			why = message ? psprintf("HTTP %d: %s", req->status, message) : psprintf("HTTP %d", req->status);
			publish(count, why, true, count);
			/* the first of a row at LOG, the rest at DEBUG1: a collector refusing everything must not flood the log */
			ereport(drops++ == 0 ? LOG : DEBUG1,
					(errmsg("mlplat: the OTLP collector refused %d spans for good (%s); they are dropped, not sent again",
							count, why)));
			continue;
		}
		drops = 0;
		if (rejected > 0)
			ereport(LOG,
					(errmsg("mlplat: the OTLP collector rejected " INT64_FORMAT " of %d spans%s%s",
							rejected, count, message ? ": " : "", message ? message : "")));
		publish(count, NULL, false, Min(rejected, (int64) count));
		sent += count;
		more = count >= mlplat_otlp_batch_size;
		if (!more)
			break;
	}
	snprintf(pass->status, sizeof(pass->status), "%d spans exported%s", sent, more ? "; more wait" : "");
	/* a backlog left: come back at once */
	pass->next_pass_ms = more ? 1 : mlplat_otlp_export_interval_ms;
	next_export_at = GetCurrentTimestamp() + (TimestampTz) (more ? 0 : mlplat_otlp_export_interval_ms) * 1000;
	if (sent > 0)
		elog(DEBUG1, "mlplat: exported %d spans", sent);
}
