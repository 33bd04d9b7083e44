/*
 * http.h — the concurrent HTTP client (libcurl multi) used by the reconcilers.
 *
 * A pass builds a batch of requests, runs it (all requests concurrently, at
 * most mlplat.http_max_concurrency at a time), and reads the results.  Nothing
 * is retried here: reconcilers persist per-entity backoff (see backoff.h).
 *
 *     MlplatHttpBatch *b = mlplat_http_batch_create(pass_cxt);
 *     MlplatHttpRequest *r = mlplat_http_batch_add(b, "GET", url);
 *     mlplat_http_request_add_header(r, "Accept", "application/json");
 *     mlplat_http_batch_run(b);        -- no transaction may be open; nothing when b is empty
 *     if (r->failed) ... r->error ... else ... r->status, r->body ...
 *     mlplat_http_batch_free(b);       -- or just reset pass_cxt
 *
 * Waiting is done on curl's sockets, curl's timer, the process latch and
 * postmaster death together (one WaitEventSet), with CHECK_FOR_INTERRUPTS() in
 * the loop: SIGTERM, query cancel and statement_timeout interrupt a batch
 * promptly; an ERROR thrown from inside the run detaches every transfer.
 *
 * Per process there is one long-lived curl multi handle (connection cache,
 * keep-alive, DNS cache) and a pool of easy handles; none of it ever lives in
 * shared memory.  Only http and https URLs are accepted, redirects are never
 * followed, TLS peers and host names are verified, response bodies are bounded.
 * Header values (Authorization!) and bodies are never logged or copied into
 * error texts.
 */
#ifndef MLPLAT_HTTP_H
#define MLPLAT_HTTP_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/memutils.h"

#define MLPLAT_HTTP_ERROR_LEN 256
/* default bound on response bodies */
#define MLPLAT_HTTP_DEFAULT_MAX_BODY (32 * 1024 * 1024)

typedef struct MlplatHttpBatch MlplatHttpBatch;

typedef struct MlplatHttpRequest
{
	/* ---- input (set by mlplat_http_batch_add and the setters; may be edited before run) */
	char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD" */
	char *url;	  /* http:// or https:// only */
	char *body;	  /* request body or NULL */
	size_t body_len;
	char *ca_file;			/* CA bundle for TLS (NULL: system default) */
	int connect_timeout_ms; /* default mlplat.http_connect_timeout */
	int timeout_ms;			/* whole transfer; default mlplat.http_timeout */
	size_t max_body;		/* response bound; default MLPLAT_HTTP_DEFAULT_MAX_BODY */
	void *user;				/* opaque, for the caller */

	/*
	 * Streaming: when sink is set, the body of a 2xx response goes to it in
	 * pieces instead of into resp_body (other answers are buffered as usual,
	 * so their error text stays readable), and max_body does not bound it.
	 * Called from inside libcurl: it must not ereport, palloc or longjmp;
	 * returning false aborts the transfer (failed, error "aborted by the
	 * receiver").
	 */
	bool (*sink)(void *arg, const char *data, size_t len);
	void *sink_arg;
	/*
	 * A started request (mlplat_http_batch_start) ended: called with sink_arg
	 * from inside the wait or run that noticed it, never from libcurl, so it
	 * may palloc and start other batches, but must not free this request's
	 * batch.  Returning true says it was dealt with (say, a stream resumed):
	 * the waiter is not woken for it.
	 */
	bool (*on_end)(void *arg, struct MlplatHttpRequest *req);

	/* ---- output (valid after mlplat_http_batch_run) */
	bool done;						   /* the request ran (false: never started) */
	bool failed;					   /* no usable response: see error */
	bool too_large;					   /* ... because the body was longer than max_body */
	int status;						   /* HTTP status received, 0 if none */
	char error[MLPLAT_HTTP_ERROR_LEN]; /* "" unless failed */
	int retry_after_s;				   /* parsed Retry-After (seconds or HTTP date), 0 if absent */
	char *content_type;				   /* response Content-Type or NULL */
	char *resp_body;				   /* NUL-terminated (the NUL is not counted) */
	size_t resp_len;
	double elapsed_ms;
	TimestampTz started_at; /* wall clock when the transfer started (trace spans) */

	/* ---- private to http.c */
	struct MlplatHttpPriv *priv;
} MlplatHttpRequest;

/* Per-process counters; the worker runtime copies them into shared memory. */
typedef struct MlplatHttpStats
{
	int64 requests;			 /* completed requests */
	int64 errors;			 /* transport failures + HTTP 5xx */
	double latency_ms_total; /* sum of elapsed_ms */
} MlplatHttpStats;

/* All request/response memory is allocated in cxt (reset it per pass, or free the batch). */
extern MlplatHttpBatch *mlplat_http_batch_create(MemoryContext cxt);
extern MlplatHttpRequest *mlplat_http_batch_add(MlplatHttpBatch *batch,
												const char *method, const char *url);
/* "Name", "value"; the value is never logged. */
extern void mlplat_http_request_add_header(MlplatHttpRequest *req,
										   const char *name, const char *value);
extern void mlplat_http_request_set_body(MlplatHttpRequest *req, const char *content_type,
										 const char *body, size_t len);
/* Keep this response header (case-insensitive name); read it with mlplat_http_response_header. */
extern void mlplat_http_request_keep_header(MlplatHttpRequest *req, const char *name);
/* The last value of a kept response header, or NULL when absent. */
extern const char *mlplat_http_response_header(const MlplatHttpRequest *req, const char *name);
extern int mlplat_http_batch_count(const MlplatHttpBatch *batch);
extern MlplatHttpRequest *mlplat_http_batch_get(const MlplatHttpBatch *batch, int i);

/*
 * Run every request not yet done; return when all are complete.  Asserts that
 * no transaction is open (HTTP inside a transaction holds xmin and repeats calls
 * after a crash) unless the batch was created for a SQL test hook.
 */
extern void mlplat_http_batch_run(MlplatHttpBatch *batch);
/*
 * As mlplat_http_batch_run, and each(arg) is called from inside the run once
 * at least `every` of its requests completed since the last call, after the
 * freed slots were filled again (never when the batch is about to end): the
 * caller may open and commit a transaction there (write back what finished)
 * while the server works on the requests in flight.  each must not run or
 * free this batch; an ERROR from it ends the run as any other.
 */
typedef void (*MlplatHttpEach)(void *arg);
extern void mlplat_http_batch_run_each(MlplatHttpBatch *batch, int every, MlplatHttpEach each, void *arg);
extern void mlplat_http_batch_free(MlplatHttpBatch *batch);
/*
 * A done request's body, headers and answer, freed (resp_body is "" then; the
 * status, error and timing stay): a caller that has read an answer during the
 * batch's run (run_each) need not hold a chunk's worth of them until its end.
 * Nothing while the request is in flight.
 */
extern void mlplat_http_request_release(MlplatHttpRequest *req);
/*
 * Make run return as soon as one request completes or the process latch is
 * set (a wake-up, which run gives back), e.g. for a set of watches; requests
 * still running then fail with "interrupted before completion".
 */
extern void mlplat_http_batch_first_only(MlplatHttpBatch *batch);

/*
 * Start every request of batch and return at once: a long-lived stream (a
 * watch) that keeps running while the process waits (mlplat_http_wait) and
 * while other batches run.  batch must live in a context that outlives the
 * requests (deleting it detaches them); a request is done once the server or
 * the transport ended it.  Its sink is called from inside any later wait or
 * run, so it must keep its own buffer (no palloc there).
 */
extern void mlplat_http_batch_start(MlplatHttpBatch *batch);
/* Requests of started batches still running. */
extern int mlplat_http_background_count(void);
/*
 * Wait up to timeout_ms for the latch (returns true, the latch reset), while
 * driving the started requests; returns false early once one of them ended or
 * its sink called mlplat_http_wake_waiter (something worth a pass arrived).
 * Such a wake that came while no wait ran (the bytes arrived inside some
 * batch's run, during a pass) ends the next wait at once: each wake ends one
 * wait.  With none running it is WaitLatch.  Postmaster death exits.
 */
extern bool mlplat_http_wait(long timeout_ms);
/* From a sink: end the current or next mlplat_http_wait early (safe inside libcurl). */
extern void mlplat_http_wake_waiter(void);
/*
 * For a test hold inside a pass (mlplat.test_pass_hold): drive the started
 * requests for ms as a batch's run does, ending for nothing; a wake or an end
 * stays the next wait's.  Returns whether one is pending for it.
 */
extern bool mlplat_http_drive(long ms);

/* ONLY for SQL-callable test hooks: allow running inside a transaction. */
extern void mlplat_http_batch_allow_transaction(MlplatHttpBatch *batch);

extern void mlplat_http_stats_get(MlplatHttpStats *out);

/* Pure helper: true if url starts with http:// or https:// (case-insensitive). */
extern bool mlplat_http_url_allowed(const char *url);

#endif /* MLPLAT_HTTP_H */
