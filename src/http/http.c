/*
 * http.c — libcurl multi client driven by one WaitEventSet (curl's sockets,
 * curl's timer, the process latch and postmaster death), see http.h.
 *
 * Design notes:
 * - One CURLM per process, created on first use and kept for the life of the
 *   process, so connections (keep-alive), DNS and TLS sessions are reused from
 *   pass to pass.  Easy handles are pooled (curl_easy_reset keeps their caches).
 * - curl tells us which sockets to watch through CURLMOPT_SOCKETFUNCTION and when
 *   to call it back through CURLMOPT_TIMERFUNCTION.  Those callbacks only record
 *   state (nothing in them may ereport: a longjmp through libcurl would corrupt it).
 *   The sockets go into two epoll sets of our own, kept for the life of the
 *   process: the socket callback adds, modifies and removes exactly the socket it
 *   is told about (curl takes a keep-alive connection's socket out at the end of
 *   each request and puts it back for the next).  The WaitEventSet, also kept,
 *   holds the latch, postmaster death and those epoll descriptors, readable when
 *   one of their sockets is ready.  (PostgreSQL 15 cannot remove an event from a
 *   WaitEventSet: one holding curl's sockets was rebuilt at every request's end,
 *   about 12 epoll_ctl and a new epoll set every 2.6 applies.)
 * - One epoll set holds the sockets of background requests (a watch), the other
 *   every other socket.  A ready background socket is read until it is empty
 *   (at most BG_DRAIN_MAX reads, BG_BUFFER_SIZE each), not once a wake: a watch's
 *   events come one by one as the applies change the objects.
 * - The loop calls CHECK_FOR_INTERRUPTS(); an ERROR thrown there (query cancel,
 *   statement_timeout) detaches every transfer in PG_CATCH before re-throwing, so
 *   no curl callback can later write into memory the caller has reset.  A FATAL
 *   (SIGTERM via die()) exits the process; the OS reclaims curl's sockets.
 * - A latch set while we wait (e.g. a wake-on-commit for the worker) is consumed
 *   to keep waiting, and set again when the batch ends so the caller sees it.
 */
#include "postgres.h"

#include <errno.h>
#include <time.h>
#include <sys/epoll.h>
#include <curl/curl.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "mlplat/guc.h"
#include "mlplat/http.h"

typedef struct MlplatHttpPriv
{
	MlplatHttpBatch *batch;
	MlplatHttpRequest *req;
	List *header_lines;		  /* "Name: value" strings, in the batch context */
	List *keep_names;		  /* response headers to keep */
	List *keep_values;		  /* their values (NULL: absent), after the run */
	bool sink_aborted;		  /* the sink returned false */
	CURL *easy;				  /* while attached to the multi handle */
	struct curl_slist *slist; /* malloc'd by libcurl while attached */
	size_t cap;				  /* allocated size of req->resp_body */
	bool too_big;
	bool oom;
	double started_ms;
	char errbuf[CURL_ERROR_SIZE];
} MlplatHttpPriv;

struct MlplatHttpBatch
{
	MemoryContext cxt; /* private child of the caller's context */
	MlplatHttpRequest **reqs;
	int n;
	int cap;
	bool allow_xact;
	bool running;
	bool first_only; /* return at the first completion or wake-up */
	bool background; /* started by mlplat_http_batch_start: runs while others wait */
	/* mlplat_http_batch_run_each: called every each_every completions, slots refilled */
	MlplatHttpEach each;
	void *each_arg;
	int each_every;
	MemoryContextCallback cleanup;
};

/* ---- process-wide state (never in shared memory) */

typedef struct SockWatch
{
	curl_socket_t fd;
	int what; /* CURL_POLL_IN / OUT / INOUT */
	int ep;	  /* the epoll set it is in: fg_ep or bg_ep */
} SockWatch;

static CURLM *http_multi = NULL;
static CURL **easy_pool = NULL;
static int easy_pool_n = 0;
static int easy_pool_cap = 0;

static SockWatch *socks = NULL;
static int nsocks = 0;
static int socks_cap = 0;
/* the epoll sets of curl's sockets: background requests' (a watch) and the others' */
static int fg_ep = -1;
static int bg_ep = -1;

static bool timer_armed = false;
static double timer_deadline_ms = 0;

/* latch, postmaster death, fg_ep and bg_ep (kept for the process) */
static WaitEventSet *http_wes = NULL;
static bool http_latch_seen = false;

/*
 * Requests of background batches attached now, and whether one moved (ended,
 * or its sink asked for a wake) since the last wait returned.  The flag is
 * cleared only by the wait it ends: bytes a watch received while a pass's own
 * batches ran sit unread in its buffer, and the wait after that pass must not
 * sleep on them (cleared on entry, they waited up to mlplat.resync_interval).
 * Each wake ends one wait, so this cannot spin: a flag set again needs new
 * bytes or another end.
 */
static int http_background_n = 0;
static bool http_background_moved = false;
/* a started request's on_end runs now: what it starts is collected by the caller's drain */
static bool http_in_on_end = false;

static MlplatHttpStats http_stats;

#define MAX_WAIT_MS 1000 /* re-check everything at least this often */
#define EASY_POOL_MAX 1024
/* a ready background socket (a watch) is read until empty, at most this many times a wake */
#define BG_DRAIN_MAX 16
/* a background request's receive buffer (curl's default is 16 kB): the events that came in one read */
#define BG_BUFFER_SIZE (512L * 1024L)

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1000000.0;
}

/* ---- curl callbacks: record only, never ereport */

/* epoll_ctl for fd in ep; a socket closed without a REMOVE left the set by itself */
static int
ep_ctl(int ep, int op, curl_socket_t fd, int what)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	if (what & CURL_POLL_IN)
		ev.events |= EPOLLIN;
	if (what & CURL_POLL_OUT)
		ev.events |= EPOLLOUT;
	ev.data.fd = fd;
	if (epoll_ctl(ep, op, fd, &ev) == 0)
		return 0;
	if (op == EPOLL_CTL_MOD && errno == ENOENT)
		return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	if (op == EPOLL_CTL_ADD && errno == EEXIST)
		return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
	return -1;
}

/*
 * A socket's set: the background one only for a background request's socket.
 * A socket a foreground request used stays foreground until curl removes it
 * (a multiplexed connection may carry both; never throttle an apply).
 */
static int
sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	MlplatHttpPriv *priv = NULL;
	int ep;
	int i;

	for (i = 0; i < nsocks; i++)
		if (socks[i].fd == s)
			break;

	if (what == CURL_POLL_REMOVE)
	{
		if (i < nsocks)
		{
			(void) epoll_ctl(socks[i].ep, EPOLL_CTL_DEL, s, NULL);
			socks[i] = socks[nsocks - 1];
			nsocks--;
		}
		return 0;
	}

	if (easy != NULL)
		(void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &priv);
	ep = priv != NULL && priv->batch->background ? bg_ep : fg_ep;

	if (i == nsocks)
	{
		if (nsocks == socks_cap)
		{
			int ncap = socks_cap ? socks_cap * 2 : 64;
			SockWatch *n = realloc(socks, sizeof(SockWatch) * ncap);

			if (n == NULL)
				return -1; /* curl fails this transfer */
			socks = n;
			socks_cap = ncap;
		}
		if (ep_ctl(ep, EPOLL_CTL_ADD, s, what) != 0)
			return -1;
		socks[nsocks].fd = s;
		socks[nsocks].what = what;
		socks[nsocks].ep = ep;
		nsocks++;
	}
	else if (socks[i].ep == bg_ep && ep == fg_ep)
	{
		(void) epoll_ctl(bg_ep, EPOLL_CTL_DEL, s, NULL);
		socks[i].ep = fg_ep;
		socks[i].what = what;
		if (ep_ctl(fg_ep, EPOLL_CTL_ADD, s, what) != 0)
			return -1;
	}
	else if (socks[i].what != what)
	{
		socks[i].what = what;
		if (ep_ctl(socks[i].ep, EPOLL_CTL_MOD, s, what) != 0)
			return -1;
	}
	return 0;
}

static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	if (timeout_ms < 0)
		timer_armed = false;
	else
	{
		timer_armed = true;
		timer_deadline_ms = now_ms() + (double) timeout_ms;
	}
	return 0;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	MlplatHttpPriv *priv = (MlplatHttpPriv *) userdata;
	MlplatHttpRequest *req = priv->req;
	size_t n = size * nmemb;

	if (n == 0)
		return 0;
	if (req->sink)
	{
		long code = 0;

		curl_easy_getinfo(priv->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200 && code < 300)
		{
			if (!req->sink(req->sink_arg, ptr, n))
			{
				priv->sink_aborted = true;
				return 0; /* CURLE_WRITE_ERROR */
			}
			return n;
		}
	}
	if (req->resp_len + n > req->max_body)
	{
		priv->too_big = true;
		return 0; /* CURLE_WRITE_ERROR */
	}
	if (req->resp_len + n + 1 > priv->cap)
	{
		size_t ncap = priv->cap ? priv->cap * 2 : 4096;
		char *nbuf;

		while (ncap < req->resp_len + n + 1)
			ncap *= 2;
		if (ncap > req->max_body + 1)
			ncap = req->max_body + 1;
		nbuf = MemoryContextAllocExtended(priv->batch->cxt, ncap,
										  MCXT_ALLOC_NO_OOM | MCXT_ALLOC_HUGE);
		if (nbuf == NULL)
		{
			priv->oom = true;
			return 0;
		}
		if (req->resp_body)
		{
			memcpy(nbuf, req->resp_body, req->resp_len);
			pfree(req->resp_body);
		}
		req->resp_body = nbuf;
		priv->cap = ncap;
	}
	memcpy(req->resp_body + req->resp_len, ptr, n);
	req->resp_len += n;
	req->resp_body[req->resp_len] = '\0';
	return n;
}

/* ---- process setup */

static void
ensure_multi(void)
{
	if (http_multi != NULL)
		return;
	if (fg_ep < 0)
		fg_ep = epoll_create1(EPOLL_CLOEXEC);
	if (bg_ep < 0)
		bg_ep = epoll_create1(EPOLL_CLOEXEC);
	if (fg_ep < 0 || bg_ep < 0)
		ereport(ERROR, (errcode(ERRCODE_SYSTEM_ERROR), errmsg("mlplat: could not create an epoll set: %m")));
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		ereport(ERROR, (errcode(ERRCODE_SYSTEM_ERROR), errmsg("mlplat: could not initialize libcurl")));
	http_multi = curl_multi_init();
	if (http_multi == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("mlplat: could not create a libcurl multi handle")));
	curl_multi_setopt(http_multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(http_multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(http_multi, CURLMOPT_MAXCONNECTS, 256L);
}

static CURL *
easy_get(void)
{
	if (easy_pool_n > 0)
		return easy_pool[--easy_pool_n];
	return curl_easy_init();
}

static void
easy_put(CURL *e)
{
	if (easy_pool_n == easy_pool_cap && easy_pool_cap < EASY_POOL_MAX)
	{
		int ncap = easy_pool_cap ? easy_pool_cap * 2 : 32;
		CURL **n = realloc(easy_pool, sizeof(CURL *) * ncap);

		if (n != NULL)
		{
			easy_pool = n;
			easy_pool_cap = ncap;
		}
	}
	if (easy_pool_n < easy_pool_cap)
	{
		curl_easy_reset(e);
		easy_pool[easy_pool_n++] = e;
	}
	else
		curl_easy_cleanup(e);
}

/* ---- batch API */

bool
mlplat_http_url_allowed(const char *url)
{
	return url != NULL &&
		   (pg_strncasecmp(url, "http://", 7) == 0 ||
			pg_strncasecmp(url, "https://", 8) == 0);
}

/* Release every libcurl resource a batch holds; idempotent. */
static void
batch_release(MlplatHttpBatch *b)
{
	int i;

	for (i = 0; i < b->n; i++)
	{
		MlplatHttpPriv *priv = b->reqs[i]->priv;

		if (priv->easy)
		{
			if (b->background)
				http_background_n--;
			curl_multi_remove_handle(http_multi, priv->easy);
			easy_put(priv->easy);
			priv->easy = NULL;
			b->reqs[i]->done = true;
			b->reqs[i]->failed = true;
			strlcpy(b->reqs[i]->error, "interrupted before completion", MLPLAT_HTTP_ERROR_LEN);
		}
		if (priv->slist)
		{
			curl_slist_free_all(priv->slist);
			priv->slist = NULL;
		}
	}
}

static void
batch_cleanup_cb(void *arg)
{
	batch_release((MlplatHttpBatch *) arg);
}

MlplatHttpBatch *
mlplat_http_batch_create(MemoryContext cxt)
{
	MemoryContext bcxt = AllocSetContextCreate(cxt, "mlplat http batch",
											   ALLOCSET_DEFAULT_SIZES);
	MlplatHttpBatch *b = MemoryContextAllocZero(bcxt, sizeof(MlplatHttpBatch));

	b->cxt = bcxt;
	b->cap = 16;
	b->reqs = MemoryContextAlloc(bcxt, sizeof(MlplatHttpRequest *) * b->cap);
	b->cleanup.func = batch_cleanup_cb;
	b->cleanup.arg = b;
	MemoryContextRegisterResetCallback(bcxt, &b->cleanup);
	return b;
}

void
mlplat_http_batch_first_only(MlplatHttpBatch *batch)
{
	batch->first_only = true;
}

void
mlplat_http_batch_allow_transaction(MlplatHttpBatch *batch)
{
	batch->allow_xact = true;
}

static bool
method_known(const char *m)
{
	static const char *const known[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE" };
	int i;

	for (i = 0; i < lengthof(known); i++)
		if (strcmp(m, known[i]) == 0)
			return true;
	return false;
}

MlplatHttpRequest *
mlplat_http_batch_add(MlplatHttpBatch *b, const char *method, const char *url)
{
	MlplatHttpRequest *req;
	MlplatHttpPriv *priv;

	if (!method_known(method))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unsupported HTTP method \"%s\"", method),
				 errhint("Use GET, HEAD, POST, PUT, PATCH or DELETE.")));
	if (b->n == b->cap)
	{
		b->cap *= 2;
		b->reqs = repalloc(b->reqs, sizeof(MlplatHttpRequest *) * b->cap);
	}
	req = MemoryContextAllocZero(b->cxt, sizeof(MlplatHttpRequest));
	priv = MemoryContextAllocZero(b->cxt, sizeof(MlplatHttpPriv));
	req->priv = priv;
	priv->batch = b;
	priv->req = req;
	req->method = MemoryContextStrdup(b->cxt, method);
	req->url = MemoryContextStrdup(b->cxt, url ? url : "");
	req->connect_timeout_ms = mlplat_http_connect_timeout_ms;
	req->timeout_ms = mlplat_http_timeout_ms;
	req->max_body = MLPLAT_HTTP_DEFAULT_MAX_BODY;
	b->reqs[b->n++] = req;
	return req;
}

void
mlplat_http_request_add_header(MlplatHttpRequest *req, const char *name, const char *value)
{
	MlplatHttpBatch *b = req->priv->batch;
	MemoryContext old;

	/* refuse header injection; the value itself is never echoed */
	if (strpbrk(name, "\r\n:") != NULL || name[0] == '\0' || strpbrk(value, "\r\n") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid HTTP header \"%s\"", strpbrk(name, "\r\n") ? "?" : name),
				 errdetail("Header names must be non-empty without ':', and values must not contain line breaks.")));
	old = MemoryContextSwitchTo(b->cxt);
	req->priv->header_lines = lappend(req->priv->header_lines, psprintf("%s: %s", name, value));
	MemoryContextSwitchTo(old);
}

void
mlplat_http_request_set_body(MlplatHttpRequest *req, const char *content_type,
							 const char *body, size_t len)
{
	MlplatHttpBatch *b = req->priv->batch;

	req->body = MemoryContextAlloc(b->cxt, len + 1);
	if (len > 0)
		memcpy(req->body, body, len);
	req->body[len] = '\0';
	req->body_len = len;
	if (content_type)
		mlplat_http_request_add_header(req, "Content-Type", content_type);
}

void
mlplat_http_request_keep_header(MlplatHttpRequest *req, const char *name)
{
	MemoryContext old = MemoryContextSwitchTo(req->priv->batch->cxt);

	req->priv->keep_names = lappend(req->priv->keep_names, pstrdup(name));
	MemoryContextSwitchTo(old);
}

const char *
mlplat_http_response_header(const MlplatHttpRequest *req, const char *name)
{
	ListCell *ln;
	ListCell *lv;

	forboth (ln, req->priv->keep_names, lv, req->priv->keep_values)
		if (pg_strcasecmp((const char *) lfirst(ln), name) == 0)
			return (const char *) lfirst(lv);
	return NULL;
}

int
mlplat_http_batch_count(const MlplatHttpBatch *batch)
{
	return batch->n;
}

MlplatHttpRequest *
mlplat_http_batch_get(const MlplatHttpBatch *batch, int i)
{
	Assert(i >= 0 && i < batch->n);
	return batch->reqs[i];
}

void
mlplat_http_batch_free(MlplatHttpBatch *batch)
{
	/* the reset callback releases the curl resources */
	MemoryContextDelete(batch->cxt);
}

void
mlplat_http_request_release(MlplatHttpRequest *req)
{
	MlplatHttpPriv *priv = req->priv;

	if (!req->done || priv->easy != NULL)
		return;
	if (req->body)
		pfree(req->body);
	req->body = NULL;
	req->body_len = 0;
	list_free_deep(priv->header_lines);
	priv->header_lines = NIL;
	if (req->resp_body)
		pfree(req->resp_body);
	req->resp_body = MemoryContextAllocZero(priv->batch->cxt, 1);
	req->resp_len = 0;
	priv->cap = 0;
}

void
mlplat_http_stats_get(MlplatHttpStats *out)
{
	*out = http_stats;
}

/* ---- running */

static void
fail_request(MlplatHttpRequest *req, const char *msg)
{
	req->done = true;
	req->failed = true;
	strlcpy(req->error, msg, sizeof(req->error));
}

/* Configure an easy handle for req and attach it; false if it failed to start. */
static bool
start_request(MlplatHttpRequest *req)
{
	MlplatHttpPriv *priv = req->priv;
	CURL *e;
	ListCell *lc;
	CURLcode rc = CURLE_OK;

	e = easy_get();
	if (e == NULL)
	{
		fail_request(req, "could not create a libcurl handle");
		return false;
	}

	/* from here on, a failure must give the handle back */
	foreach (lc, priv->header_lines)
	{
		struct curl_slist *n = curl_slist_append(priv->slist, (char *) lfirst(lc));

		if (n == NULL)
		{
			rc = CURLE_OUT_OF_MEMORY;
			break;
		}
		priv->slist = n;
	}
	if (rc == CURLE_OK && req->body != NULL)
	{
		/* no "Expect: 100-continue" round trip */
		struct curl_slist *n = curl_slist_append(priv->slist, "Expect:");

		if (n == NULL)
			rc = CURLE_OUT_OF_MEMORY;
		else
			priv->slist = n;
	}

#define SETOPT(opt, val) \
	do \
	{ \
		if (rc == CURLE_OK) \
			rc = curl_easy_setopt(e, opt, val); \
	} while (0)
	SETOPT(CURLOPT_URL, req->url);
	SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
	SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(CURLOPT_NOSIGNAL, 1L);
	SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
	SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
	if (req->ca_file && req->ca_file[0])
		SETOPT(CURLOPT_CAINFO, req->ca_file);
	SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long) Max(req->connect_timeout_ms, 1));
	SETOPT(CURLOPT_TIMEOUT_MS, (long) Max(req->timeout_ms, 1));
	SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
	if (priv->batch->background)
		SETOPT(CURLOPT_BUFFERSIZE, BG_BUFFER_SIZE);
	if (req->sink == NULL)
		SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) req->max_body);
	SETOPT(CURLOPT_WRITEFUNCTION, write_cb);
	SETOPT(CURLOPT_WRITEDATA, priv);
	SETOPT(CURLOPT_ERRORBUFFER, priv->errbuf);
	SETOPT(CURLOPT_PRIVATE, priv);
	SETOPT(CURLOPT_USERAGENT, "mlplat/" MLPLAT_VERSION);
	SETOPT(CURLOPT_HTTPHEADER, priv->slist);

	if (strcmp(req->method, "GET") == 0)
		SETOPT(CURLOPT_HTTPGET, 1L);
	else if (strcmp(req->method, "HEAD") == 0)
		SETOPT(CURLOPT_NOBODY, 1L);
	else
	{
		if (strcmp(req->method, "POST") != 0)
			SETOPT(CURLOPT_CUSTOMREQUEST, req->method);
		if (req->body != NULL || strcmp(req->method, "POST") == 0)
		{
			SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_len);
			SETOPT(CURLOPT_POSTFIELDS, req->body ? req->body : "");
		}
	}

	/*
	 * A POST goes on a connection of its own.  When a reused connection dies
	 * before any answer arrives, libcurl sends the request again on a new one:
	 * it cannot tell "never arrived" from "arrived, answer lost", so a create
	 * could be made twice.  It does so only for a reused connection, so a fresh
	 * one is enough (and it may serve later requests).  Our other methods are
	 * idempotent: GET, HEAD, DELETE, server-side apply and merge PATCHes, and
	 * PUTs guarded by a resourceVersion.
	 */
	if (strcmp(req->method, "POST") == 0)
		SETOPT(CURLOPT_FRESH_CONNECT, 1L);
#undef SETOPT

	priv->errbuf[0] = '\0';
	priv->started_ms = now_ms();
	req->started_at = GetCurrentTimestamp();
	if (rc == CURLE_OK && curl_multi_add_handle(http_multi, e) == CURLM_OK)
	{
		priv->easy = e;
		return true;
	}

	if (priv->slist)
	{
		curl_slist_free_all(priv->slist);
		priv->slist = NULL;
	}
	easy_put(e);
	fail_request(req, rc != CURLE_OK ? curl_easy_strerror(rc) : "could not start the transfer");
	return false;
}

/* A transfer finished: collect the result, detach and recycle the handle. */
static void
finish_request(MlplatHttpPriv *priv, CURLcode rc)
{
	MlplatHttpRequest *req = priv->req;
	CURL *e = priv->easy;
	long code = 0;
	curl_off_t retry_after = 0;
	char *ctype = NULL;

	req->done = true;
	req->elapsed_ms = now_ms() - priv->started_ms;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	req->status = (int) code;
	if (curl_easy_getinfo(e, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
		req->retry_after_s = (int) Min(retry_after, (curl_off_t) PG_INT32_MAX);
	if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype != NULL)
		req->content_type = MemoryContextStrdup(priv->batch->cxt, ctype);
	if (priv->keep_names != NIL)
	{
		MemoryContext old = MemoryContextSwitchTo(priv->batch->cxt);
		ListCell *lc;

		priv->keep_values = NIL;
		foreach (lc, priv->keep_names)
		{
			struct curl_header *h = NULL;

			/* the last value, from the final response (-1: not a redirect's) */
			if (code > 0 && curl_easy_header(e, (const char *) lfirst(lc), 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
			{
				if (h->amount > 1)
					curl_easy_header(e, (const char *) lfirst(lc), h->amount - 1, CURLH_HEADER, -1, &h);
				priv->keep_values = lappend(priv->keep_values, pstrdup(h->value));
			}
			else
				priv->keep_values = lappend(priv->keep_values, NULL);
		}
		MemoryContextSwitchTo(old);
	}

	if (rc != CURLE_OK || priv->too_big || priv->oom)
	{
		req->failed = true;
		req->too_large = priv->too_big || rc == CURLE_FILESIZE_EXCEEDED;
		if (req->too_large)
			snprintf(req->error, sizeof(req->error),
					 "response body exceeds the limit of %zu bytes", req->max_body);
		else if (priv->oom)
			strlcpy(req->error, "out of memory reading the response body", sizeof(req->error));
		else if (priv->sink_aborted)
			strlcpy(req->error, "aborted by the receiver", sizeof(req->error));
		else if (priv->errbuf[0])
			strlcpy(req->error, priv->errbuf, sizeof(req->error));
		else
			strlcpy(req->error, curl_easy_strerror(rc), sizeof(req->error));
	}
	if (req->resp_body == NULL)
		req->resp_body = MemoryContextAllocZero(priv->batch->cxt, 1);

	http_stats.requests++;
	http_stats.latency_ms_total += req->elapsed_ms;
	/* a receiver that stops reading (a watch that saw its event) is no error */
	if ((req->failed && !priv->sink_aborted) || req->status >= 500)
		http_stats.errors++;

	curl_multi_remove_handle(http_multi, e);
	priv->easy = NULL;
	easy_put(e);
	if (priv->slist)
	{
		curl_slist_free_all(priv->slist);
		priv->slist = NULL;
	}
	if (priv->batch->background)
	{
		bool dealt = false;

		http_background_n--;
		if (req->on_end && !http_in_on_end)
		{
			http_in_on_end = true;
			PG_TRY();
			{
				dealt = req->on_end(req->sink_arg, req);
			}
			PG_FINALLY();
			{
				http_in_on_end = false;
			}
			PG_END_TRY();
		}
		if (!dealt)
			http_background_moved = true;
	}
}

/* Collect every finished transfer; returns how many of them were b's (b NULL: none counted). */
static int
drain_completed(MlplatHttpBatch *b)
{
	CURLMsg *msg;
	int left;
	int finished = 0;

	while ((msg = curl_multi_info_read(http_multi, &left)) != NULL)
	{
		MlplatHttpPriv *priv = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &priv);
		if (priv == NULL || priv->easy != msg->easy_handle)
			continue;
		finish_request(priv, msg->data.result);
		finished += priv->batch == b;
	}
	return finished;
}

/* The kept WaitEventSet: latch, postmaster death, fg_ep and bg_ep. */
static WaitEventSet *
wait_set(void)
{
	if (http_wes == NULL)
	{
		WaitEventSet *n = CreateWaitEventSet(TopMemoryContext, 4);

		AddWaitEventToSet(n, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		if (IsUnderPostmaster)
			AddWaitEventToSet(n, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(n, WL_SOCKET_READABLE, fg_ep, NULL, NULL);
		AddWaitEventToSet(n, WL_SOCKET_READABLE, bg_ep, NULL, NULL);
		http_wes = n;
	}
	return http_wes;
}

static void
socket_action(curl_socket_t fd, int mask)
{
	int running;

	(void) curl_multi_socket_action(http_multi, fd, mask, &running);
}

static int
cselect(uint32 events)
{
	int mask = 0;

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		mask |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		mask |= CURL_CSELECT_OUT;
	if (events & EPOLLERR)
		mask |= CURL_CSELECT_ERR;
	return mask;
}

/*
 * Let curl act on the ready sockets of ep (not waiting).  rounds > 1: read
 * again what is still ready, up to that many times (a watch whose events
 * came faster than one read took them).
 */
static void
serve_ready(int ep, int rounds)
{
	struct epoll_event evs[64];

	while (rounds-- > 0)
	{
		int n = epoll_wait(ep, evs, lengthof(evs), 0);

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			socket_action(evs[i].data.fd, cselect(evs[i].events));
	}
}

/*
 * Wait once on curl's sockets, curl's timer (or cap_ms, at most MAX_WAIT_MS),
 * the latch and postmaster death, and let curl act on what happened.  A latch
 * set is consumed and remembered in http_latch_seen.
 */
static void
wait_step(long cap_ms)
{
	WaitEvent events[4];
	int n;
	int i;
	long timeout = Min(cap_ms, (long) MAX_WAIT_MS);

	if (timer_armed)
	{
		double left = timer_deadline_ms - now_ms();

		timeout = left <= 0 ? 0 : (long) Min(left + 1, (double) timeout);
	}

	n = WaitEventSetWait(wait_set(), timeout, events, lengthof(events), PG_WAIT_EXTENSION);
	for (i = 0; i < n; i++)
	{
		WaitEvent *ev = &events[i];

		if (ev->events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			http_latch_seen = true;
			CHECK_FOR_INTERRUPTS();
		}
		else if ((ev->events & WL_SOCKET_READABLE) && ev->fd == fg_ep)
			serve_ready(fg_ep, 1);
		else if ((ev->events & WL_SOCKET_READABLE) && ev->fd == bg_ep)
			serve_ready(bg_ep, BG_DRAIN_MAX);
	}
	if (n == 0 || (timer_armed && timer_deadline_ms <= now_ms()))
	{
		timer_armed = false;
		socket_action(CURL_SOCKET_TIMEOUT, 0);
	}
}

/* The event loop proper; returns when every request of b is done. */
static void
run_loop(MlplatHttpBatch *b)
{
	int next = 0;
	int active = 0;
	int cap = Max(mlplat_http_max_concurrency, 1);
	int unreported = 0;

	for (;;)
	{
		int n;

		/*
		 * Collect what finished first, then fill the freed slots before
		 * waiting: a slot freed by the last wait would otherwise stay empty
		 * until some other socket woke us.
		 */
		n = drain_completed(b);
		active -= n;
		unreported += n;
		if (b->first_only && (n > 0 || http_latch_seen))
			break;
		while (active < cap && next < b->n)
		{
			MlplatHttpRequest *req = b->reqs[next++];

			if (req->done)
				continue;
			if (start_request(req))
				active++;
		}
		if (active == 0 && next >= b->n)
			break;
		/*
		 * The slots are full again: the caller's work on what finished (SQL)
		 * runs while the server answers the requests in flight.  Their
		 * answers wait in the sockets until the next wait_step.
		 */
		if (b->each && unreported >= b->each_every)
		{
			unreported = 0;
			b->each(b->each_arg);
		}

		CHECK_FOR_INTERRUPTS();
		wait_step(MAX_WAIT_MS);
	}
}

void
mlplat_http_batch_start(MlplatHttpBatch *b)
{
	if (b->running || b->background)
		elog(ERROR, "mlplat: HTTP batch is already running");
	ensure_multi();
	b->background = true;
	for (int i = 0; i < b->n; i++)
	{
		MlplatHttpRequest *req = b->reqs[i];

		if (req->done)
			continue;
		if (!mlplat_http_url_allowed(req->url))
			fail_request(req, "only http:// and https:// URLs are allowed");
		else if (start_request(req))
			http_background_n++;
	}
	/* let curl begin (connect, send) at once */
	socket_action(CURL_SOCKET_TIMEOUT, 0);
	/*
	 * Started from an on_end, a drain here would collect, uncounted, what
	 * the run being drained waits for; that drain collects it instead.
	 */
	if (!http_in_on_end)
		(void) drain_completed(NULL);
}

void
mlplat_http_wake_waiter(void)
{
	http_background_moved = true;
}

int
mlplat_http_background_count(void)
{
	return http_background_n;
}

bool
mlplat_http_wait(long timeout_ms)
{
	double until = now_ms() + (double) Max(timeout_ms, 0L);

	if (http_background_n == 0)
	{
		int rc;

		/* a watch that ended during the pass: the next pass restarts it, now */
		if (http_background_moved)
		{
			http_background_moved = false;
			return false;
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, Max(timeout_ms, 0L),
					   PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		return (rc & WL_LATCH_SET) != 0;
	}
	http_latch_seen = false;
	for (;;)
	{
		double left = until - now_ms();

		(void) drain_completed(NULL);
		if (http_latch_seen || http_background_moved || left <= 0)
			break;
		CHECK_FOR_INTERRUPTS();
		wait_step((long) left + 1);
	}
	http_background_moved = false; /* what ended this wait is the pass after it's to read */
	(void) drain_completed(NULL);
	return http_latch_seen;
}

bool
mlplat_http_drive(long ms)
{
	double until = now_ms() + (double) Max(ms, 0L);
	bool latch = false;
	bool moved = false;

	for (;;)
	{
		double left = until - now_ms();

		if (left <= 0)
			break;
		if (mlplat_http_wait((long) left + 1))
			latch = true;
		else if (now_ms() < until)
			moved = true; /* a wake or an end: the wait cleared it, the next one is to see it */
	}
	if (moved)
		http_background_moved = true;
	/* give back a wake-up consumed meanwhile, as a batch's run does */
	if (latch)
		SetLatch(MyLatch);
	return http_background_moved;
}

void
mlplat_http_batch_run_each(MlplatHttpBatch *b, int every, MlplatHttpEach each, void *arg)
{
	b->each = each;
	b->each_arg = arg;
	b->each_every = Max(every, 1);
	PG_TRY();
	{
		mlplat_http_batch_run(b);
	}
	PG_FINALLY();
	{
		b->each = NULL;
	}
	PG_END_TRY();
}

void
mlplat_http_batch_run(MlplatHttpBatch *b)
{
	int i;

	if (IsTransactionState() && !b->allow_xact)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("mlplat: HTTP requests must not run inside an open transaction"),
				 errdetail("Commit the claim first, call out, then write results in a new transaction.")));
	if (b->running)
		elog(ERROR, "mlplat: HTTP batch is already running");
	if (b->n == 0)
		return; /* nothing to send: no handle, no wait set */
	ensure_multi();

	/* refuse what must never reach libcurl */
	for (i = 0; i < b->n; i++)
	{
		MlplatHttpRequest *req = b->reqs[i];

		if (!req->done && !mlplat_http_url_allowed(req->url))
			fail_request(req, "only http:// and https:// URLs are allowed");
	}

	b->running = true;
	http_latch_seen = false;
	PG_TRY();
	{
		run_loop(b);
	}
	PG_CATCH();
	{
		batch_release(b);
		b->running = false;
		if (http_latch_seen)
			SetLatch(MyLatch);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* a first_only batch ends with requests still running: they fail as interrupted */
	batch_release(b);
	b->running = false;
	/* give back a wake-up we consumed while waiting */
	if (http_latch_seen)
		SetLatch(MyLatch);
}
