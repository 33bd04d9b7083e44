/*
 * watch_cache.c — an informer-like cache of one kind's objects, fed by a LIST
 * and then a watch kept open across passes (watch_cache.h).
 *
 * The stream's bytes arrive inside libcurl (a sink: no palloc, no ereport),
 * so they go to a malloc'd buffer, bounded by STREAM_MAX; a pass applies the
 * complete lines at its start.  The server ends a watch after WATCH_S; it is
 * started again from the last version seen (an event's or a bookmark's).
 * Version rules, as client-go's reflector: a stream whose answer began (HTTP
 * 200) and then ended, cleanly or not, resumes from the last version; ERROR
 * 410 in the stream (or a 410 answer) means that version is gone: LIST again.
 * A buffer overflow also relists: the cache cannot know what it missed.
 * A stream that ends cleanly is resumed at once, from whatever wait or batch
 * run noticed its end (stream_ended), not at the next pass: the server keeps
 * a bounded history, and a resume left to the end of a long apply batch came
 * after its version was gone (a 410 and a 5.1 s relist at 10,000).  Outside
 * a transaction an ERROR in that resume is logged and the watch left to the
 * next pass (resume): nothing there would catch it, and the worker would end.
 * The buffer gives back what a large batch of events needed once a sync
 * applied them (16 MB after 1,000 applies, kept for the life of the leader
 * before).
 *
 * The worker's own writes go in at once (mlplat_watch_cache_wrote): their
 * events arrive later, and how much later depends on the server's load.  A
 * pass reading the cache before its own apply's event came saw no object
 * and applied again (1,145 applies for 1,000 first applies with the events
 * 1.5 s late).  Each entry keeps the resourceVersion it holds, and an event
 * not newer than that is stale: skipped.  Versions are compared as numbers,
 * as client-go's mutation cache does (etcd's are); one that is not a number
 * is 0, never compared: the event then wins, as before.
 *
 * A watch refused (any other answer: 403 when the ClusterRole lacks the
 * watch verb, 5xx), or a stream that ends at once with nothing in it, is a
 * failure: its completion ends the worker's wait, so trying again at once
 * would LIST and watch at every pass, back to back.  The cache is unhealthy
 * instead (passes observe without it) and the next LIST (after a refusal;
 * an empty stream resumes from its version) and watch wait out the
 * reconcilers' backoff (backoff.h: from 1 s, its ceiling doubling up to
 * mlplat.backoff_max, jittered); a stream that delivers bytes, or stays
 * open at least WATCH_EMPTY_MS and ends with no error, clears it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/backoff.h"
#include "mlplat/canonical.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/observe.h"
#include "mlplat/sanitizer.h"
#include "mlplat/watch_cache.h"

/* how long the server keeps one watch open; the request gets WATCH_SLACK_MS more */
#define WATCH_S 300
#define WATCH_SLACK_MS 30000
/* a stream that ends sooner than this with nothing in it failed (see the header) */
#define WATCH_EMPTY_MS 1000
/* the events not yet applied; past this the stream is cut and the cache relists */
#define STREAM_MAX ((size_t) 16 * 1024 * 1024)
/* the buffer's first size, and what it shrinks back toward once applied */
#define STREAM_MIN ((size_t) 65536)
#define KEY_LEN (NAMEDATALEN * 2)

/*
 * An entry's text is malloc'd, not palloc'd: an AllocSet rounds a chunk up to
 * a power of two, which for texts of 1-2 kB wasted a third of the cache.
 */
typedef struct Entry
{
	char key[KEY_LEN]; /* "namespace/name" */
	char *text;		   /* the pruned object, canonical JSON (malloc'd) */
	size_t len;
	uint64 rv; /* its resourceVersion as a number; 0: unknown */
} Entry;

/* what malloc takes for a text of len bytes and its NUL: 16-byte steps and a header */
#define TEXT_COST(len) ((((len) + 1 + 15) & ~(size_t) 15) + 16)

struct MlplatWatchCache
{
	const MlplatKubeResource *res;
	MlplatWatchPrune prune;
	MemoryContext cxt; /* the entries (their texts are malloc'd) */
	HTAB *entries;
	Size text_bytes; /* what the texts take, by TEXT_COST */
	char *selector;	 /* in TopMemoryContext */
	char *url;		 /* mlplat.kube_url it was filled from, in TopMemoryContext */
	char rv[64];	 /* the last version seen; "" before the first LIST */
	bool filled;	 /* listed since the last reset */
	bool relist;	 /* the version is gone, or the stream cannot be trusted */
	/* the watch */
	MemoryContext stream_cxt;
	MlplatHttpRequest *req;
	MemoryContext ended_cxt; /* a stream resumed by stream_ended: freed at the next sync */
	int resumed;			 /* streams stream_ended resumed since the last sync */
	/* what the sink received and a sync has not applied yet (malloc'd) */
	char *buf;
	size_t len;
	size_t cap;
	bool overflow;
	bool received; /* the current stream delivered bytes */
	/* failed watches in a row, and when the next LIST and watch may be tried */
	int failures;
	TimestampTz retry_at;
};

/* ---------------------------------------------------------------- the sink */

static bool
sink(void *arg, const char *data, size_t n)
{
	MlplatWatchCache *wc = arg;
	size_t from = wc->len;

	if (wc->len + n > STREAM_MAX)
	{
		wc->overflow = true;
		return false;
	}
	if (wc->len + n > wc->cap)
	{
		size_t ncap = Max(wc->cap * 2, STREAM_MIN);
		char *nb;

		while (ncap < wc->len + n)
			ncap *= 2;
		nb = realloc(wc->buf, ncap);
		if (nb == NULL)
		{
			wc->overflow = true;
			return false;
		}
		wc->buf = nb;
		wc->cap = ncap;
	}
	memcpy(wc->buf + wc->len, data, n);
	wc->len += n;
	wc->received = true;

	/*
	 * A complete event other than a bookmark is worth a pass: end the
	 * worker's wait.  (A bookmark only moves the version on; an object whose
	 * text happens to say BOOKMARK merely waits for the next pass.)
	 */
	for (size_t i = from, start = from; i < wc->len; i++)
		if (wc->buf[i] == '\n')
		{
			/* the line's start: after the previous newline, possibly in earlier data */
			while (start > 0 && wc->buf[start - 1] != '\n')
				start--;
			if (i > start && memmem(wc->buf + start, i - start, "\"BOOKMARK\"", 10) == NULL)
			{
				mlplat_http_wake_waiter();
				break;
			}
			start = i + 1;
		}
	return true;
}

/* ---------------------------------------------------------------- entries */

static void
entries_create(MlplatWatchCache *wc)
{
	HASHCTL ctl;

	wc->cxt = AllocSetContextCreate(TopMemoryContext, "mlplat watch cache", ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = KEY_LEN;
	ctl.entrysize = sizeof(Entry);
	ctl.hcxt = wc->cxt;
	wc->entries = hash_create("mlplat watch cache", 1024, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/* Free every text of entries and the context they live in. */
static void
entries_drop(HTAB *entries, MemoryContext cxt)
{
	HASH_SEQ_STATUS seq;
	Entry *e;

	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		free(e->text);
	MemoryContextDelete(cxt);
}

static void
ended_free(MlplatWatchCache *wc)
{
	if (wc->ended_cxt)
		MemoryContextDelete(wc->ended_cxt);
	wc->ended_cxt = NULL;
}

static void
stream_close(MlplatWatchCache *wc)
{
	ended_free(wc);
	if (wc->stream_cxt)
		MemoryContextDelete(wc->stream_cxt); /* detaches a running request */
	wc->stream_cxt = NULL;
	wc->req = NULL;
	free(wc->buf);
	wc->buf = NULL;
	wc->len = wc->cap = 0;
	wc->overflow = false;
	wc->received = false;
}

MlplatWatchCache *
mlplat_watch_cache_create(const MlplatKubeResource *res, MlplatWatchPrune prune)
{
	MlplatWatchCache *wc = MemoryContextAllocZero(TopMemoryContext, sizeof(MlplatWatchCache));

	wc->res = res;
	wc->prune = prune;
	entries_create(wc);
	return wc;
}

void
mlplat_watch_cache_reset(MlplatWatchCache *wc)
{
	stream_close(wc);
	entries_drop(wc->entries, wc->cxt);
	wc->text_bytes = 0;
	entries_create(wc);
	wc->rv[0] = '\0';
	wc->filled = false;
	wc->relist = false;
	wc->failures = 0;
	wc->retry_at = 0;
}

static bool
object_key(const MlJsonValue *obj, char key[KEY_LEN])
{
	const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
	const char *name = mlplat_json_text(obj, "metadata", "name", NULL);

	if (name == NULL || strlen(ns ? ns : "") + strlen(name) + 2 > KEY_LEN)
		return false;
	snprintf(key, KEY_LEN, "%s/%s", ns ? ns : "", name);
	return true;
}

/* The pruned text of obj, in CurrentMemoryContext; NULL: nothing to keep. */
static char *
pruned_text(MlplatWatchCache *wc, MlJsonArena *arena, const MlJsonValue *obj, size_t *len)
{
	MlJsonValue *kept = wc->prune(arena, obj);
	MlJsonError err;
	char *text;

	if (kept == NULL || (text = ml_json_canonical(arena, kept, len, &err)) == NULL)
		return NULL;
	return pnstrdup(text, *len);
}

/* obj's metadata.resourceVersion as a number; 0 when it has none or it is no number */
static uint64
object_rv(const MlJsonValue *obj)
{
	const char *rv = mlplat_json_text(obj, "metadata", "resourceVersion", NULL);
	char *end;
	uint64 n;

	if (rv == NULL || *rv < '0' || *rv > '9')
		return 0;
	errno = 0;
	n = strtou64(rv, &end, 10);
	return errno == 0 && *end == '\0' ? n : 0;
}

/* Does the entry hold a state newer than rv (an event at rv is stale)? */
static bool
entry_newer(const Entry *e, uint64 rv)
{
	return e != NULL && e->rv != 0 && rv != 0 && rv <= e->rv;
}

/* Put key's pruned text (at version rv) in the cache; true when it is new or differs from what was there. */
static bool
entry_put(MlplatWatchCache *wc, const char *key, const char *text, size_t len, uint64 rv)
{
	bool found;
	Entry *e;
	char *copy;

	e = hash_search(wc->entries, key, HASH_FIND, NULL);
	if (e)
		e->rv = rv;
	if (e && e->len == len && memcmp(e->text, text, len) == 0)
		return false;
	if ((copy = malloc(len + 1)) == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
						errdetail("The watch cache could not keep an object of %zu bytes.", len)));
	e = hash_search(wc->entries, key, HASH_ENTER, &found);
	if (found)
	{
		wc->text_bytes -= TEXT_COST(e->len);
		free(e->text);
	}
	e->text = copy;
	wc->text_bytes += TEXT_COST(len);
	memcpy(e->text, text, len);
	e->text[len] = '\0';
	e->len = len;
	e->rv = rv;
	return true;
}

static bool
entry_remove(MlplatWatchCache *wc, const char *key)
{
	Entry *e = hash_search(wc->entries, key, HASH_FIND, NULL);

	if (e == NULL)
		return false;
	wc->text_bytes -= TEXT_COST(e->len);
	free(e->text);
	(void) hash_search(wc->entries, key, HASH_REMOVE, NULL);
	return true;
}

/* ---------------------------------------------------------------- LIST and watch */

/* Each listed object's pruned text into the table being filled (an MlplatListEach). */
static void
refill_put(void *arg, MlJsonArena *arena, const MlJsonValue *obj)
{
	MlplatWatchCache *wc = arg;
	char key[KEY_LEN];
	size_t len;
	char *text;

	if (obj == NULL)
	{
		/* the LIST starts over: what its earlier pages put goes */
		entries_drop(wc->entries, wc->cxt);
		wc->text_bytes = 0;
		entries_create(wc);
	}
	else if (object_key(obj, key) && (text = pruned_text(wc, arena, obj, &len)) != NULL)
		(void) entry_put(wc, key, text, len, object_rv(obj));
}

/* The keys whose text differs between two tables, or that are in one only (palloc'd). */
static List *
entries_changed(HTAB *was, HTAB *now)
{
	HASH_SEQ_STATUS seq;
	Entry *e;
	List *changed = NIL;

	hash_seq_init(&seq, now);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		Entry *old = hash_search(was, e->key, HASH_FIND, NULL);

		if (old == NULL || old->len != e->len || memcmp(old->text, e->text, e->len) != 0)
			changed = lappend(changed, pstrdup(e->key));
	}
	hash_seq_init(&seq, was);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (hash_search(now, e->key, HASH_FIND, NULL) == NULL)
			changed = lappend(changed, pstrdup(e->key));
	return changed;
}

/* A failed refill: its table goes, the old one stays, to be listed again. */
static void
entries_restore(MlplatWatchCache *wc, MemoryContext cxt, HTAB *entries, Size text_bytes)
{
	entries_drop(wc->entries, wc->cxt);
	wc->cxt = cxt;
	wc->entries = entries;
	wc->text_bytes = text_bytes;
	wc->relist = true;
}

/*
 * LIST every object by the selector into a fresh table, page by page: each
 * page is pruned into it and freed before the next (at 30,000 objects,
 * holding every parsed page stopped the LIST on mlplat.pass_memory_limit).
 * The keys whose text differs from the old table's (or that left it) are
 * changed.  When the LIST fails, the old table stays (to be listed again).
 */
static char *
relist(MlplatWatchCache *wc, MlplatWatchSync *out)
{
	MemoryContext old_cxt = wc->cxt;
	HTAB *old_entries = wc->entries;
	Size old_bytes = wc->text_bytes;
	char *rv = NULL;
	char *why;

	stream_close(wc);
	wc->text_bytes = 0;
	entries_create(wc);
	PG_TRY();
	{
		why = mlplat_kube_list_each(wc->res, NULL, wc->selector, refill_put, wc, &out->lists, &rv);
	}
	PG_CATCH();
	{
		entries_restore(wc, old_cxt, old_entries, old_bytes);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (why == NULL && strlen(rv) >= sizeof(wc->rv))
		why = psprintf("%s list version is too long", wc->res->plural);
	if (why)
	{
		entries_restore(wc, old_cxt, old_entries, old_bytes);
		return why;
	}
	if (wc->filled)
		out->changed = list_concat(out->changed, entries_changed(old_entries, wc->entries));
	entries_drop(old_entries, old_cxt);
	strlcpy(wc->rv, rv, sizeof(wc->rv));
	out->filled = !wc->filled;
	out->relists++;
	wc->filled = true;
	wc->relist = false;
	return NULL;
}

static bool stream_ended(void *arg, MlplatHttpRequest *req);

/* Start the watch from version rv, in a stream context of its own. */
static void
watch_open(MlplatWatchCache *wc, const char *rv)
{
	MemoryContext old;
	MlplatHttpBatch *b;

	wc->stream_cxt = AllocSetContextCreate(TopMemoryContext, "mlplat watch stream", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(wc->stream_cxt);
	b = mlplat_http_batch_create(wc->stream_cxt);
	wc->req = mlplat_kube_watch_all(b, wc->res, wc->selector, rv, WATCH_S);
	wc->req->timeout_ms = WATCH_S * 1000 + WATCH_SLACK_MS;
	wc->req->sink = sink;
	wc->req->sink_arg = wc;
	wc->req->on_end = stream_ended;
	MemoryContextSwitchTo(old);
	mlplat_http_batch_start(b);
}

static void
watch_start(MlplatWatchCache *wc, MlplatWatchSync *out)
{
	stream_close(wc);
	watch_open(wc, wc->rv);
	out->rewatches++;
}

/*
 * The version the buffer's last complete line moves the cache to, into rv
 * (the cache's own when no line is complete); false when that line is an
 * ERROR, cannot be read or has no version: the sync decides then.
 */
static bool
last_line_version(MlplatWatchCache *wc, char rv[64], size_t *complete)
{
	size_t end = wc->len;
	size_t start;
	MemoryContext tmp;
	MemoryContext old;
	const MlJsonValue *ev;
	const char *type;
	const char *v;
	MlJsonError err;
	bool ok;

	while (end > 0 && wc->buf[end - 1] != '\n')
		end--; /* an incomplete last line: the resumed stream sends it again */
	*complete = end;
	while (end > 0 && wc->buf[end - 1] == '\n')
		end--;
	if (end == 0)
	{
		strlcpy(rv, wc->rv, 64);
		return true;
	}
	for (start = end; start > 0 && wc->buf[start - 1] != '\n'; start--)
		;
	tmp = AllocSetContextCreate(CurrentMemoryContext, "mlplat watch end", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(tmp);
	ev = ml_json_parse(mlplat_json_arena_in(tmp), wc->buf + start, end - start, NULL, &err);
	type = ev ? mlplat_json_text(ev, "type", NULL, NULL) : NULL;
	v = ev ? mlplat_json_text(ml_json_object_get(ev, "object"), "metadata", "resourceVersion", NULL) : NULL;
	ok = type != NULL && strcmp(type, "ERROR") != 0 && v != NULL && strlen(v) < 64;
	if (ok)
		strlcpy(rv, v, 64);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmp);
	return ok;
}

/*
 * Open the watch again from rv, for stream_ended; false when that raised an
 * ERROR.  The hook often runs in the worker's wait, outside any pass and
 * transaction, where no handler catches an ERROR: it would end the worker
 * (exit 1, the leadership lock to a standby).  What can raise there (out of
 * memory, or a request builder's refusal, e.g. the configuration check that
 * stream_ended makes first) holds no lock, buffer or file, only the memory of
 * the stream being made.  So, as PostgreSQL's own processes recover from an
 * ERROR outside a transaction (the checkpointer, the autovacuum launcher:
 * release what the failed code held, flush the error state, go on), the
 * half-made stream is freed and the ERROR logged as a WARNING with its
 * errcode; the worker's wait then ends and the next pass's sync opens the
 * watch from the cache's version.  Inside a transaction (the hook run by a
 * batch of a pass that has one open) the ERROR goes on to the pass's handler,
 * which aborts the transaction.
 */
static bool
resume(MlplatWatchCache *wc, const char *rv)
{
	MemoryContext caller = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		if (mlplat_test_watch_resume_error)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Raised by mlplat.test_watch_resume_error, for tests.")));
		watch_open(wc, rv);
	}
	PG_CATCH();
	{
		ErrorData *edata;

		mlplat_sanitizer_after_catch();
		/* out of the stream's context (watch_open may have raised in it) before freeing it */
		MemoryContextSwitchTo(caller);
		if (wc->stream_cxt)
			MemoryContextDelete(wc->stream_cxt); /* detaches a request it started */
		wc->stream_cxt = NULL;
		wc->req = NULL;
		if (IsTransactionState())
			PG_RE_THROW();
		edata = CopyErrorData();
		FlushErrorState();
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("mlplat: the watch of %s was not resumed: %s", wc->res->plural, edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("The next pass opens it again.")));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	if (ok)
		wc->resumed++;
	return ok;
}

/*
 * The stream ended (an on_end: inside whatever wait or batch run noticed it,
 * often a pass's applies).  An answer that began is resumed here and now,
 * from the version of the last complete line received (the lines not yet
 * applied stay in the buffer, ahead of the new stream's); anything else (a
 * refusal, 410, a stream that ended at once with nothing in it, an overflow,
 * an ERROR line) is the next sync's to judge, and the worker's wait ends.
 */
static bool
stream_ended(void *arg, MlplatHttpRequest *req)
{
	MlplatWatchCache *wc = arg;
	char rv[64];
	size_t complete;

	/*
	 * Not resumed without a usable configuration for the server it watched
	 * (a reload that cleared or changed mlplat.kube_url, a token file the
	 * last refresh refused): the request would be refused with an ERROR, or
	 * go to another server.  The token and CA files are not read here; the
	 * state of the last mlplat_kube_config_refresh (a pass's, a lease
	 * renewal's) stands.  The next pass's sync judges it (idle without a
	 * cluster, else a restart).
	 */
	if (mlplat_kube_base_url() == NULL || wc->url == NULL || strcmp(wc->url, mlplat_kube_url) != 0)
		return false;
	/* the sync's rules: an answer that began resumes, unless it ended at once, empty */
	if (req != wc->req || !wc->filled || wc->relist || wc->overflow || req->status != 200 ||
		(!wc->received && req->elapsed_ms < WATCH_EMPTY_MS) || !last_line_version(wc, rv, &complete))
		return false;
	wc->len = complete;
	ended_free(wc);
	wc->ended_cxt = wc->stream_cxt; /* this request's: not to be freed while it ends */
	wc->stream_cxt = NULL;
	wc->req = NULL;
	/* a stream that ran (bytes, or open long enough) ends the failures in a row */
	wc->failures = 0;
	wc->received = false;
	return resume(wc, rv);
}

/* After a sync applied the lines: give back a buffer that a large batch of events grew. */
static void
buffer_shrink(MlplatWatchCache *wc)
{
	size_t ncap = STREAM_MIN;
	char *nb;

	if (wc->cap <= STREAM_MIN || wc->len >= wc->cap / 4)
		return;
	if (wc->len == 0)
	{
		free(wc->buf);
		wc->buf = NULL;
		wc->cap = 0;
		return;
	}
	while (ncap < wc->len * 2)
		ncap *= 2;
	if ((nb = realloc(wc->buf, ncap)) != NULL)
	{
		wc->buf = nb;
		wc->cap = ncap;
	}
}

/*
 * Apply the complete event lines received.  Returns false when the stream
 * said the version is gone (ERROR 410) or sent what cannot be read: relist.
 */
static bool
apply_events(MlplatWatchCache *wc, MlplatWatchSync *out, MemoryContext caller)
{
	size_t start = 0;
	bool ok = true;

	for (size_t i = 0; i < wc->len && ok; i++)
	{
		MemoryContext tmp;
		MemoryContext old;
		MlJsonArena *arena;
		const MlJsonValue *ev;
		const MlJsonValue *obj;
		const char *type;
		const char *rv;
		MlJsonError err;
		char key[KEY_LEN];

		if (wc->buf[i] != '\n')
			continue;
		if (i == start)
		{
			start = i + 1;
			continue;
		}
		tmp = AllocSetContextCreate(CurrentMemoryContext, "mlplat watch event", ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(tmp);
		arena = mlplat_json_arena_in(tmp);
		ev = ml_json_parse(arena, wc->buf + start, i - start, NULL, &err);
		type = ev ? mlplat_json_text(ev, "type", NULL, NULL) : NULL;
		obj = ev ? ml_json_object_get(ev, "object") : NULL;
		rv = obj ? mlplat_json_text(obj, "metadata", "resourceVersion", NULL) : NULL;
		if (type == NULL || obj == NULL)
		{
			ereport(LOG, (errmsg("mlplat: watch of %s sent an event that cannot be read (%s); listing again",
								 wc->res->plural, ev ? "no type or object" : err.message)));
			ok = false;
		}
		else if (strcmp(type, "ERROR") == 0)
		{
			const MlJsonValue *c = ml_json_object_get(obj, "code");
			int64 code = c && c->type == ML_JSON_NUMBER ? (int64) c->u.number.value : 0;

			ereport(LOG, (errmsg("mlplat: watch of %s ended with an error (%lld): %s; listing again",
								 wc->res->plural, (long long) code,
								 ml_json_object_get(obj, "message") && ml_json_object_get(obj, "message")->type == ML_JSON_STRING
									 ? ml_json_object_get(obj, "message")->u.string.str
									 : "no message")));
			ok = false;
		}
		else if (strcmp(type, "BOOKMARK") != 0 && object_key(obj, key))
		{
			bool moved;
			uint64 ev_rv = object_rv(obj);

			out->events++;
			if (entry_newer(hash_search(wc->entries, key, HASH_FIND, NULL), ev_rv))
				moved = false; /* older than what our own write's answer put here */
			else if (strcmp(type, "DELETED") == 0)
				moved = entry_remove(wc, key);
			else
			{
				size_t len;
				char *text = pruned_text(wc, arena, obj, &len);

				moved = text ? entry_put(wc, key, text, len, ev_rv) : entry_remove(wc, key);
			}
			if (moved)
			{
				MemoryContextSwitchTo(caller);
				out->changed = lappend(out->changed, pstrdup(key));
				MemoryContextSwitchTo(tmp);
			}
		}
		if (ok && rv && strlen(rv) < sizeof(wc->rv))
			strlcpy(wc->rv, rv, sizeof(wc->rv));
		MemoryContextSwitchTo(old);
		MemoryContextDelete(tmp);
		start = i + 1;
	}
	/* keep the incomplete last line for the next sync */
	if (ok)
	{
		memmove(wc->buf, wc->buf + start, wc->len - start);
		wc->len -= start;
	}
	return ok;
}

char *
mlplat_watch_cache_sync(MlplatWatchCache *wc, const char *selector, MlplatWatchSync *out)
{
	MemoryContext caller = CurrentMemoryContext;
	char *why;

	memset(out, 0, sizeof(*out));
	ended_free(wc);
	out->rewatches = wc->resumed;
	wc->resumed = 0;
	/*
	 * Another API server (mlplat.kube_url reloaded) has other objects and its
	 * own versions: a version of the old one may be ahead of everything the
	 * new one will send, and the watch would wait for it with no error.
	 */
	if (wc->selector == NULL || strcmp(wc->selector, selector) != 0 || strcmp(wc->url, mlplat_kube_url) != 0)
	{
		mlplat_watch_cache_reset(wc);
		if (wc->selector)
			pfree(wc->selector);
		if (wc->url)
			pfree(wc->url);
		wc->selector = MemoryContextStrdup(TopMemoryContext, selector);
		wc->url = MemoryContextStrdup(TopMemoryContext, mlplat_kube_url);
	}
	if (wc->retry_at != 0 && GetCurrentTimestamp() < wc->retry_at)
	{
		out->retry_ms = Max(1L, (long) TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wc->retry_at));
		return psprintf("the watch of %s failed %d times in a row; tried again in %ld ms", wc->res->plural,
						wc->failures, (long) ((wc->retry_at - GetCurrentTimestamp()) / 1000));
	}
	if (wc->received)
		wc->failures = 0;
	if (wc->filled && !wc->relist && wc->buf)
	{
		wc->relist = !apply_events(wc, out, caller);
		if (!wc->relist)
			buffer_shrink(wc);
	}
	if (wc->filled && !wc->relist && wc->req && wc->req->done)
	{
		MlplatHttpRequest *r = wc->req;

		if (wc->overflow || r->status == 410)
		{
			ereport(LOG, (errmsg("mlplat: watch of %s ended (%s); listing again", wc->res->plural,
								 wc->overflow ? "too many events not yet applied" : "HTTP 410")));
			wc->relist = true;
		}
		else if (r->status != 200 || (!wc->received && r->elapsed_ms < WATCH_EMPTY_MS))
		{
			int ms;

			wc->failures++;
			ms = (int) mlplat_backoff_delay_ms(wc->failures, 1000, mlplat_backoff_max_ms, 0, (uint64) MyProcPid);
			why = psprintf("the watch of %s failed (%s); listing and watching again in %d ms", wc->res->plural,
						   r->status == 200 ? psprintf("the stream ended at once, empty%s%s", r->error[0] ? ": " : "", r->error)
						   : r->status		? psprintf("HTTP %d", r->status)
						   : r->error[0]	? r->error
											: "no answer",
						   ms);
			stream_close(wc);
			list_free(out->changed);
			out->changed = NIL;
			/* an answer that began is resumed from the last version; another, relisted */
			wc->relist = r->status != 200;
			wc->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
			out->retry_ms = Max(1, ms);
			return why;
		}
		else
		{
			/*
			 * The answer had begun: resume from the last version.  A stream
			 * that stayed open, even with nothing in it (a server that sends
			 * no bookmarks, a quiet selector), was no failure: the count in a
			 * row ends here, or the backoff after a refusal hours later would
			 * start from the ceiling this one reached.
			 */
			wc->failures = 0;
			stream_close(wc);
		}
	}
	wc->retry_at = 0;
	if (!wc->filled || wc->relist)
	{
		list_free(out->changed);
		out->changed = NIL;
		if ((why = relist(wc, out)) != NULL)
			return why;
	}
	if (wc->req == NULL)
		watch_start(wc, out);
	return NULL;
}

void
mlplat_watch_cache_wrote(MlplatWatchCache *wc, const char *body, size_t body_len)
{
	MemoryContext tmp;
	MemoryContext old;
	MlJsonArena *arena;
	const MlJsonValue *obj;
	MlJsonError err;
	char key[KEY_LEN];
	uint64 rv;
	size_t len;
	char *text;

	if (!wc->filled || wc->relist || body == NULL)
		return; /* an empty cache, or one about to be listed again: the LIST will hold it */
	tmp = AllocSetContextCreate(CurrentMemoryContext, "mlplat watch write", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(tmp);
	arena = mlplat_json_arena_in(tmp);
	obj = ml_json_parse(arena, body, body_len, NULL, &err);
	/* only a newer state than the one held: the watch may have delivered a later one already */
	if (obj && object_key(obj, key) && (rv = object_rv(obj)) != 0 &&
		!entry_newer(hash_search(wc->entries, key, HASH_FIND, NULL), rv) &&
		(text = pruned_text(wc, arena, obj, &len)) != NULL)
		(void) entry_put(wc, key, text, len, rv);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmp);
}

/* ---------------------------------------------------------------- reading */

static Entry *
entry_find(MlplatWatchCache *wc, const char *ns, const char *name)
{
	char key[KEY_LEN];

	if (name == NULL || strlen(ns ? ns : "") + strlen(name) + 2 > KEY_LEN)
		return NULL;
	snprintf(key, KEY_LEN, "%s/%s", ns ? ns : "", name);
	return hash_search(wc->entries, key, HASH_FIND, NULL);
}

const MlJsonValue *
mlplat_watch_cache_get(MlplatWatchCache *wc, MlJsonArena *arena, const char *ns, const char *name)
{
	Entry *e = entry_find(wc, ns, name);
	MlJsonError err;

	return e ? ml_json_parse(arena, e->text, e->len, NULL, &err) : NULL;
}

bool
mlplat_watch_cache_has(MlplatWatchCache *wc, const char *ns, const char *name)
{
	return entry_find(wc, ns, name) != NULL;
}

List *
mlplat_watch_cache_keys(MlplatWatchCache *wc)
{
	HASH_SEQ_STATUS seq;
	Entry *e;
	List *out = NIL;

	hash_seq_init(&seq, wc->entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		out = lappend(out, pstrdup(e->key));
	return out;
}

void
mlplat_watch_cache_size(MlplatWatchCache *wc, long *objects, Size *bytes)
{
	*objects = hash_get_num_entries(wc->entries);
	*bytes = MemoryContextMemAllocated(wc->cxt, true) + wc->text_bytes + wc->cap +
			 (wc->stream_cxt ? MemoryContextMemAllocated(wc->stream_cxt, true) : 0);
}

MlJsonValue *
mlplat_json_pick(MlJsonArena *arena, const MlJsonValue *obj, const char *const *keys, int n)
{
	MlJsonMember *m;
	int k = 0;
	MlJsonError err;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return NULL;
	m = ml_json_arena_alloc(arena, sizeof(MlJsonMember) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		const MlJsonValue *v = ml_json_object_get(obj, keys[i]);

		if (v == NULL)
			continue;
		m[k].key = keys[i];
		m[k].key_len = strlen(keys[i]);
		m[k].value = (MlJsonValue *) v;
		k++;
	}
	return ml_json_new_object(arena, m, k, &err);
}
