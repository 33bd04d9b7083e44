/*
 * observe.c — how a pass observes Kubernetes (observe.h): is a cluster there,
 * LIST a kind's objects, read fields of what was observed.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "mlplat/canonical.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/observe.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"

bool
mlplat_cluster_ready(MlplatPass *pass, const char **why)
{
	MlplatKubeConfigState st = mlplat_kube_config_refresh(why);

	if (st == MLPLAT_KUBE_READY)
		return true;
	if (st == MLPLAT_KUBE_NOT_CONFIGURED)
		snprintf(pass->status, sizeof(pass->status),
				 "idle: no Kubernetes cluster configured (set mlplat.kube_url)");
	else
		snprintf(pass->status, sizeof(pass->status), "idle: Kubernetes configuration unusable: %s",
				 *why ? *why : "unknown reason");
	return false;
}

#define LIST_PAGE 500
/* restarts after an expired continue token, in one LIST, before the pass gives up */
#define LIST_MAX_RESTARTS 5

/*
 * Wait before restarting a LIST whose continue token expired: at once the
 * first time (a token can expire once in a slow pass), then 100 ms doubling to
 * 2 s, so a server that expires every token is not hammered with full LISTs.
 * Only the timeout and postmaster death end the wait (a commit wake must not
 * cut it short, nor be consumed by it); SIGTERM is answered right after.
 */
static void
list_restart_backoff(int restarts)
{
	if (restarts > 1)
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(2000L, 100L << Min(restarts - 2, 5)), PG_WAIT_EXTENSION);
	CHECK_FOR_INTERRUPTS();
}

/*
 * One LIST in progress, driven a page at a time by list_run: its next page is
 * added to a batch (list_ask), and read once the batch ran (list_read).
 */
typedef struct ListRun
{
	MlJsonArena *into; /* the caller's arena (every item kept whole), or NULL */
	const MlplatKubeResource *res;
	const char *ns;
	const char *selector;
	MlplatListEach each;
	void *arg;
	char **list_rv;
	char *cont;			  /* the next page's continue token, NULL: the first page */
	char *rv;			  /* the resourceVersion of the latest page */
	int pages;			  /* requests made, restarts included */
	int restarts;		  /* after an expired continue token, in a row */
	MlplatHttpRequest *r; /* the page asked for this round, NULL: none */
	bool done;
	char *why; /* done: NULL, or why the kind could not be observed */
} ListRun;

static void
list_end(ListRun *l, char *why)
{
	l->why = why;
	l->done = true;
}

/* Ask for l's next page in b, or end l when it has made all the requests it may. */
static void
list_ask(ListRun *l, MlplatHttpBatch *b)
{
	l->r = NULL;
	if (l->pages >= mlplat_list_max_pages)
		list_end(l, psprintf("LIST of %s stopped after %d pages (mlplat.list_max_pages)", l->res->plural, l->pages));
	else
		l->r = mlplat_kube_list(b, l->res, l->ns, l->selector, LIST_PAGE, l->cont);
}

/*
 * Pages are bounded three ways (issue 18, finding 12): at most
 * mlplat.list_max_pages requests per LIST (a server whose continue chain never
 * ends cannot keep a pass busy forever), at most LIST_MAX_RESTARTS restarts
 * after 410 Gone, with a backoff, and the pass's memory: a page whose parse
 * would take the pass past mlplat.pass_memory_limit stops the LIST with a
 * message (the parse tree is about as large as the text).  What counts is
 * what the pass holds — its own context (mlplat_pass_memory_context), where
 * the pages of the round and what is kept of the items live (the answers of
 * the LISTs that ran alongside, not read yet, count too) — not the worker's
 * whole TopMemoryContext, whose caches a long-lived worker builds up over
 * time and which no pass can give back.  Each page is parsed in a context of
 * its own, freed with the page's text once its items were handed to each: its
 * parse tree too unless into (an arena of the caller's: every item kept
 * whole) holds it.
 */
static void
list_read(ListRun *l, MemoryContext outer)
{
	MlplatHttpRequest *r = l->r;
	Size limit = (Size) mlplat_pass_memory_limit_kb * 1024;
	MemoryContext pass_cxt = mlplat_pass_memory_context ? mlplat_pass_memory_context : outer;
	MemoryContext page_cxt;
	MlJsonArena *arena;
	MlplatKubeResult kr;
	MlJsonValue *page;
	MlJsonError err;
	const MlJsonValue *arr = NULL;
	const char *next;
	char *why = NULL;

	l->r = NULL;
	l->pages++;
	if (!r->failed && r->resp_body != NULL && MemoryContextMemAllocated(pass_cxt, true) + r->resp_len > limit)
	{
		list_end(l, psprintf("LIST of %s: page %d (%zu kB) would exceed mlplat.pass_memory_limit (%zu kB, %zu kB in use by the pass)",
							 l->res->plural, l->pages, r->resp_len / 1024, limit / 1024,
							 MemoryContextMemAllocated(pass_cxt, true) / 1024));
		return;
	}
	page_cxt = AllocSetContextCreate(outer, "mlplat LIST page", ALLOCSET_DEFAULT_SIZES);
	arena = l->into ? l->into : mlplat_json_arena_in(page_cxt);
	ml_json_set_error(&err, ML_JSON_ERR_SYNTAX, 0, "no body");
	/* parsed once: no jsonb copy of the page */
	page = (!r->failed && r->resp_body != NULL) ? ml_json_parse(arena, r->resp_body, r->resp_len, NULL, &err)
												: NULL;
	mlplat_kube_classify(r, page != NULL, &kr);
	if (kr.outcome == MLPLAT_KUBE_EXPIRED)
	{
		/* the continue token expired: the list must start over */
		MemoryContextDelete(page_cxt);
		if (++l->restarts > LIST_MAX_RESTARTS)
		{
			list_end(l, psprintf("LIST of %s: continue token expired %d times in a row (410 Gone)",
								 l->res->plural, l->restarts));
			return;
		}
		list_restart_backoff(l->restarts);
		l->each(l->arg, NULL, NULL);
		l->cont = NULL;
		return;
	}
	if (kr.outcome != MLPLAT_KUBE_OK)
	{
		/*
		 * The reason may reach a tenant (the projects reconciler puts it in the
		 * project's last_error): a transport failure's detail, which names the
		 * API server, goes to the server log only.
		 */
		if (kr.tenant_message)
			ereport(LOG, (errmsg("mlplat: cannot list %s: %s", l->res->plural, kr.message)));
		why = psprintf("cannot list %s: %s", l->res->plural,
					   mlplat_kube_tenant_line(&kr) ? mlplat_kube_tenant_line(&kr) : "unknown error");
	}
	else if (page == NULL)
		why = psprintf("%s list is not JSON: %s", l->res->plural, err.message);
	else if ((arr = ml_json_object_get(page, "items")) == NULL || arr->type != ML_JSON_ARRAY)
		why = psprintf("%s list has no items array", l->res->plural);
	if (why)
	{
		MemoryContextDelete(page_cxt);
		list_end(l, why);
		return;
	}
	MemoryContextSwitchTo(page_cxt);
	for (size_t i = 0; i < arr->u.array.count; i++)
		l->each(l->arg, arena, arr->u.array.items[i]);
	MemoryContextSwitchTo(outer);
	/* a paged list is one snapshot: every page carries its version */
	next = mlplat_json_text(page, "metadata", "resourceVersion", NULL);
	l->rv = next ? pstrdup(next) : NULL;
	next = mlplat_json_text(page, "metadata", "continue", NULL);
	l->cont = next && next[0] != '\0' ? pstrdup(next) : NULL;
	MemoryContextDelete(page_cxt);
	/* the text is parsed: the other answers of the round need not count it */
	pfree(r->resp_body);
	r->resp_body = NULL;
	r->resp_len = 0;
	if (l->cont != NULL)
		return;
	if (l->list_rv && (l->rv == NULL || l->rv[0] == '\0'))
		why = psprintf("%s list has no resourceVersion", l->res->plural);
	else if (l->list_rv)
		*l->list_rv = l->rv;
	list_end(l, why);
}

/*
 * Drive n LISTs together: each round, one batch with the next page of every
 * LIST not done (the first pages of all of them go out at once; the pages of
 * one LIST follow each other, a continue token naming the next), then each
 * answer read in turn.  One LIST's failure ends only that one.  The round's
 * batch, with the answers' text, is freed before the next round.
 */
static void
list_run(ListRun *runs, int n)
{
	MemoryContext outer = CurrentMemoryContext;

	for (;;)
	{
		MemoryContext round = AllocSetContextCreate(outer, "mlplat LIST round", ALLOCSET_DEFAULT_SIZES);
		MlplatHttpBatch *b = mlplat_http_batch_create(round);
		int asked = 0;

		for (int i = 0; i < n; i++)
			if (!runs[i].done)
			{
				list_ask(&runs[i], b);
				asked += runs[i].r != NULL;
			}
		if (asked == 0)
		{
			MemoryContextDelete(round);
			return;
		}
		mlplat_http_batch_run(b);
		for (int i = 0; i < n; i++)
			if (runs[i].r != NULL)
				list_read(&runs[i], outer);
		MemoryContextDelete(round);
	}
}

static void
list_init(ListRun *l, MlJsonArena *into, const MlplatKubeResource *res, const char *ns, const char *selector,
		  MlplatListEach each, void *arg, char **list_rv)
{
	*l = (ListRun){ .into = into, .res = res, .ns = ns, .selector = selector, .each = each, .arg = arg, .list_rv = list_rv };
}

/* One LIST alone (list_run of one), its requests counted in *lists. */
static char *
list_pages(MlJsonArena *into, const MlplatKubeResource *res, const char *ns, const char *selector,
		   MlplatListEach each, void *arg, int *lists, char **list_rv)
{
	ListRun l;

	list_init(&l, into, res, ns, selector, each, arg, list_rv);
	list_run(&l, 1);
	*lists += l.pages;
	return l.why;
}

char *
mlplat_kube_list_each(const MlplatKubeResource *res, const char *ns, const char *selector, MlplatListEach each,
					  void *arg, int *lists, char **list_rv)
{
	return list_pages(NULL, res, ns, selector, each, arg, lists, list_rv);
}

/* What a LIST keeps, and where (mlplat_kube_list_kept, mlplat_kube_list_all_in) */
typedef struct Kept
{
	MlplatListKeep keep; /* NULL: each item whole, as parsed into arena */
	void *keep_arg;
	MemoryContext cxt; /* the list, and the kept copies */
	MlJsonArena *arena;
	List *items;
} Kept;

static void
keep_item(void *arg, MlJsonArena *page, const MlJsonValue *item)
{
	Kept *k = arg;
	MemoryContext was;
	MlJsonValue *kept;
	MlJsonError err;
	char *text;
	size_t len;

	if (item == NULL)
	{
		/* started over: a whole item's tree stays in the caller's arena, a copy goes */
		if (k->keep)
		{
			MemoryContextReset(k->cxt);
			k->arena = mlplat_json_arena_in(k->cxt);
		}
		k->items = NIL;
		return;
	}
	if (k->keep == NULL)
		kept = (MlJsonValue *) item;
	else if ((kept = k->keep(k->keep_arg, page, item)) == NULL)
		return;
	/* the copy: canonical text of the projection, parsed again into the kept arena */
	else if ((text = ml_json_canonical(page, kept, &len, &err)) == NULL ||
			 (kept = ml_json_parse(k->arena, text, len, NULL, &err)) == NULL)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("mlplat: cannot keep a listed object: %s", err.message)));
	was = MemoryContextSwitchTo(k->cxt);
	k->items = lappend(k->items, kept);
	MemoryContextSwitchTo(was);
}

char *
mlplat_kube_list_kept(const MlplatKubeResource *res, const char *ns, const char *selector, MlplatListKeep keep,
					  void *arg, List **items, int *lists)
{
	Kept k;
	char *why;

	k.keep = keep;
	k.keep_arg = arg;
	k.cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat LIST kept", ALLOCSET_DEFAULT_SIZES);
	k.arena = mlplat_json_arena_in(k.cxt);
	k.items = NIL;
	why = list_pages(NULL, res, ns, selector, keep_item, &k, lists, NULL);
	if (why)
		MemoryContextDelete(k.cxt);
	else
		*items = list_concat(*items, k.items);
	return why;
}

char *
mlplat_kube_list_all(MlJsonArena *arena, const MlplatKubeResource *res, const char *selector,
					 List **items, int *lists)
{
	return mlplat_kube_list_all_in(arena, res, NULL, selector, items, lists);
}

/*
 * n LISTs at once (list_run), res[i]'s items kept whole in arena and appended
 * to items[i] when why[i] is NULL.
 */
static void
list_all(MlJsonArena *arena, const MlplatKubeResource *res, int n, const char *ns, const char *selector,
		 List **items, char **why, int *lists)
{
	ListRun *runs = palloc(sizeof(ListRun) * n);
	Kept *k = palloc(sizeof(Kept) * n);

	for (int i = 0; i < n; i++)
	{
		k[i].keep = NULL;
		k[i].keep_arg = NULL;
		k[i].cxt = CurrentMemoryContext;
		k[i].arena = arena;
		k[i].items = NIL;
		list_init(&runs[i], arena, &res[i], ns, selector, keep_item, &k[i], NULL);
	}
	list_run(runs, n);
	for (int i = 0; i < n; i++)
	{
		*lists += runs[i].pages;
		why[i] = runs[i].why;
		if (why[i] == NULL)
			items[i] = list_concat(items[i], k[i].items);
	}
	pfree(runs);
	pfree(k);
}

char *
mlplat_kube_list_all_in(MlJsonArena *arena, const MlplatKubeResource *res, const char *ns, const char *selector,
						List **items, int *lists)
{
	char *why;

	list_all(arena, res, 1, ns, selector, items, &why, lists);
	return why;
}

void
mlplat_kube_list_all_kinds(MlJsonArena *arena, const MlplatKubeResource *res, int n, const char *selector,
						   List **items, char **why, int *lists)
{
	list_all(arena, res, n, NULL, selector, items, why, lists);
}

bool
mlplat_labelled_ours(const MlJsonValue *obj, const char *instance, const char *component)
{
	const char *by = mlplat_json_text(obj, "metadata", "labels", MLPLAT_LABEL_MANAGED_BY);
	const char *in = mlplat_json_text(obj, "metadata", "labels", MLPLAT_LABEL_INSTANCE);

	return by && in && instance && strcmp(by, MLPLAT_MANAGED_BY) == 0 && strcmp(in, instance) == 0 &&
		   (component == NULL ||
			mlplat_str_same(mlplat_json_text(obj, "metadata", "labels", MLPLAT_LABEL_COMPONENT), component));
}

const char *
mlplat_object_content_id(const MlJsonValue *obj)
{
	return mlplat_json_text(obj, "metadata", "annotations", MLPLAT_ANNOTATION_CONTENT_ID);
}

/*
 * One GET per name, all in one batch.  What a LIST by our selector would show
 * of those names, and nothing more: an object without our labels is left out
 * as the LIST would leave it out, so a pass decides the same either way.  Any
 * answer but the object or 404 makes the whole observation fail: an object
 * that could not be read is not an object that is gone.
 */
char *
mlplat_kube_get_each(MlJsonArena *arena, const MlplatKubeResource *res, const char *instance,
					 List *ns_names, List **items, int *requests)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat GET each", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	MlplatHttpBatch *b = mlplat_http_batch_create(cxt);
	MlplatObservedObject *seen = palloc0(sizeof(MlplatObservedObject) * (list_length(ns_names) / 2 + 1));
	int n = 0;
	List *got = NIL;
	char *why = NULL;
	ListCell *lc;

	for (lc = list_head(ns_names); lc != NULL && lnext(ns_names, lc) != NULL; lc = lnext(ns_names, lnext(ns_names, lc)))
		mlplat_observe_get(&seen[n++], b, res, lfirst(lc), lfirst(lnext(ns_names, lc)));
	MemoryContextSwitchTo(old);
	mlplat_http_batch_run(b);
	*requests += mlplat_http_batch_count(b);
	for (int i = 0; i < n && why == NULL; i++)
	{
		MlplatObservedObject *o = &seen[i];

		mlplat_observe_got(o, arena);
		if (o->state == MLPLAT_OBSERVED_GONE)
			continue;
		if (o->state != MLPLAT_OBSERVED_FOUND)
		{
			if (o->res.tenant_message)
				ereport(LOG, (errmsg("mlplat: cannot get %s: %s", res->plural, o->res.message)));
			why = psprintf("cannot get %s: %s", res->plural, o->error);
		}
		else if (mlplat_labelled_ours(o->obj, instance, NULL))
			got = lappend(got, (void *) o->obj);
	}
	MemoryContextDelete(cxt);
	if (why == NULL)
		*items = list_concat(*items, got);
	return why;
}

bool
mlplat_object_terminating(const MlJsonValue *obj, const char **since, char **finalizers, char **json)
{
	/* metadata.finalizers, and a Namespace's spec.finalizers ("kubernetes") */
	const MlJsonValue *lists[2] = { ml_json_object_get(ml_json_object_get(obj, "metadata"), "finalizers"),
									ml_json_object_get(ml_json_object_get(obj, "spec"), "finalizers") };
	StringInfoData names;
	StringInfoData j;

	*since = mlplat_json_text(obj, "metadata", "deletionTimestamp", NULL);
	if (*since == NULL)
		return false;
	initStringInfo(&names);
	initStringInfo(&j);
	appendStringInfoString(&j, "{\"since\": ");
	escape_json(&j, *since);
	appendStringInfoString(&j, ", \"finalizers\": [");
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; lists[l] && lists[l]->type == ML_JSON_ARRAY && i < lists[l]->u.array.count; i++)
		{
			const MlJsonValue *f = lists[l]->u.array.items[i];

			if (f->type != ML_JSON_STRING)
				continue;
			appendStringInfo(&names, "%s%s", names.len ? ", " : "", f->u.string.str);
			if (j.data[j.len - 1] != '[')
				appendStringInfoString(&j, ", ");
			escape_json(&j, f->u.string.str);
		}
	appendStringInfoString(&j, "]}");
	*finalizers = names.data;
	*json = j.data;
	return true;
}

const MlJsonValue *
mlplat_observed_find(List *items, const char *ns, const char *name)
{
	ListCell *lc;

	if (name == NULL)
		return NULL;
	foreach (lc, items)
	{
		const MlJsonValue *o = lfirst(lc);
		const char *ons = mlplat_json_text(o, "metadata", "namespace", NULL);
		const char *oname = mlplat_json_text(o, "metadata", "name", NULL);

		if (oname != NULL && strcmp(oname, name) == 0 &&
			(ns == NULL ? ons == NULL : ons != NULL && strcmp(ons, ns) == 0))
			return o;
	}
	return NULL;
}

void
mlplat_observe_get(MlplatObservedObject *o, MlplatHttpBatch *batch, const MlplatKubeResource *res, const char *ns,
				   const char *name)
{
	memset(o, 0, sizeof(*o));
	o->get = mlplat_kube_get(batch, res, ns, name);
}

void
mlplat_observe_peer(MlplatObservedObject *o, MlplatHttpRequest *get, const MlplatObservePeer *peer)
{
	memset(o, 0, sizeof(*o));
	o->get = get;
	o->peer = peer;
}

/* a Kubernetes answer: kube.c's classification, parsed once (the kind then reads the same tree) */
static void
kube_got(MlplatObservedObject *o, MlJsonArena *arena)
{
	mlplat_kube_parse_response_in(o->get, arena, &o->res);
	o->http_status = o->res.status;
	o->retry_after_s = o->res.retry_after_s;
	if (o->res.outcome == MLPLAT_KUBE_OK && o->res.body != NULL)
	{
		o->state = MLPLAT_OBSERVED_FOUND;
		o->obj = o->res.body;
		return;
	}
	if (o->res.outcome == MLPLAT_KUBE_NOT_FOUND)
	{
		o->state = MLPLAT_OBSERVED_GONE;
		return;
	}
	o->state = MLPLAT_OBSERVED_ERROR;
	o->error = mlplat_kube_tenant_line(&o->res) ? mlplat_kube_tenant_line(&o->res) : "no answer";
	o->permanent = o->res.outcome == MLPLAT_KUBE_FAILED;
}

/* another peer's answer: found (2xx, JSON unless the peer is raw), gone (the peer's rule), or an error like a Kubernetes one */
static void
peer_got(MlplatObservedObject *o, MlJsonArena *arena)
{
	const MlplatHttpRequest *r = o->get;
	const MlJsonValue *body = NULL;
	MlJsonError err;

	if (r->failed || !r->done)
	{
		/* no answer (a transport's text may name the peer's host: tenants read only this line) */
		o->state = MLPLAT_OBSERVED_ERROR;
		o->too_large = r->too_large;
		o->error = r->too_large ? psprintf("%s answer exceeds %zu bytes", o->peer->name, r->max_body)
								: psprintf("%s request failed: %s", o->peer->name, r->error[0] ? r->error : "not run");
		return;
	}
	o->http_status = r->status;
	o->retry_after_s = r->retry_after_s;
	if (r->resp_body != NULL && r->resp_len > 0 && !o->peer->raw)
		body = ml_json_parse(arena, r->resp_body, r->resp_len, NULL, &err);
	if (r->status >= 200 && r->status < 300 && (body != NULL || o->peer->raw))
	{
		o->state = MLPLAT_OBSERVED_FOUND;
		o->obj = body;
		return;
	}
	if (o->peer->gone(r->status, body))
	{
		o->state = MLPLAT_OBSERVED_GONE;
		return;
	}
	o->state = MLPLAT_OBSERVED_ERROR;
	if (r->status >= 200 && r->status < 300)
	{
		o->permanent = true;
		o->error = psprintf("%s answered HTTP %d with a body that is not JSON", o->peer->name, r->status);
		return;
	}
	/* as a Kubernetes answer: a timeout, throttling or a server's failure may pass; the rest is its answer */
	o->permanent = !(r->status == 408 || r->status == 429 || r->status >= 500);
	o->error = o->peer->why ? o->peer->why(r->status, body) : psprintf("%s answered HTTP %d", o->peer->name, r->status);
}

void
mlplat_observe_got(MlplatObservedObject *o, MlJsonArena *arena)
{
	if (o->peer)
		peer_got(o, arena);
	else
		kube_got(o, arena);
}
