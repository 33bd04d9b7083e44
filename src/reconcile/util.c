/*
 * util.c — helpers shared by the reconciler passes.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "mlplat/guc.h"
#include "mlplat/kinds.h"
#include "mlplat/http.h"
#include "mlplat/kube.h"
#include "mlplat/reconcile_util.h"

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

/* the running pass's own context (set by the worker), see reconcile_util.h */
MemoryContext mlplat_pass_memory_context = NULL;

/*
 * Plans of the statements mlplat_sql_bool runs, kept for the life of the
 * process: a write-back runs the same few statements once per entity, and
 * parsing and planning each call cost more than running it.  The plan cache
 * re-plans a kept plan when what it depends on changes (an ALTER, a DROP and
 * CREATE EXTENSION), so a kept plan never goes stale.
 */
typedef struct KeptPlan
{
	struct KeptPlan *next;
	char *sql;
	int nargs;
	Oid *types;
	SPIPlanPtr plan;
} KeptPlan;

static KeptPlan *kept_plans = NULL;

static SPIPlanPtr
kept_plan(const char *sql, int nargs, Oid *types)
{
	KeptPlan *k;
	SPIPlanPtr plan;

	for (k = kept_plans; k != NULL; k = k->next)
		if (k->nargs == nargs && strcmp(k->sql, sql) == 0 &&
			(nargs == 0 || memcmp(k->types, types, sizeof(Oid) * nargs) == 0))
			return k->plan;
	plan = SPI_prepare(sql, nargs, types);
	if (plan == NULL)
		elog(ERROR, "mlplat: could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "mlplat: could not keep the plan of \"%s\"", sql);
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptPlan));
	k->sql = MemoryContextStrdup(TopMemoryContext, sql);
	k->nargs = nargs;
	k->types = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * Max(nargs, 1));
	if (nargs > 0)
		memcpy(k->types, types, sizeof(Oid) * nargs);
	k->plan = plan;
	k->next = kept_plans;
	kept_plans = k;
	return plan;
}

int
mlplat_sql_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	return SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 0);
}

bool
mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	bool isnull;
	Datum d;

	if (SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "mlplat: \"%s\" returned no row", sql);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return !isnull && DatumGetBool(d);
}

char *
mlplat_instance_id(void)
{
	MemoryContext caller = CurrentMemoryContext;
	char *v;

	if (SPI_execute("SELECT mlplat._instance_id()", true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mlplat: no installation row");
	v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (v == NULL)
		elog(ERROR, "mlplat: installation has no instance id");
	return MemoryContextStrdup(caller, v);
}

/*
 * Ledger rows of a pass, written with one statement: one array per column
 * (the columns of _ledger_append_set), element i of each is row i.
 */
#define LEDGER_COLS 11
static const Oid ledger_col_types[LEDGER_COLS] = { TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
												   TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID };

struct MlplatLedgerBatch
{
	MemoryContext cxt;
	int rows;
	ArrayBuildState *col[LEDGER_COLS];
};

MlplatLedgerBatch *
mlplat_ledger_batch_new(void)
{
	MlplatLedgerBatch *b = palloc0(sizeof(MlplatLedgerBatch));

	b->cxt = CurrentMemoryContext;
	for (int i = 0; i < LEDGER_COLS; i++)
		b->col[i] = initArrayResult(ledger_col_types[i], b->cxt, false);
	return b;
}

void
mlplat_array_add_text(ArrayBuildState *a, const char *s)
{
	accumArrayResult(a, s ? CStringGetTextDatum(s) : (Datum) 0, s == NULL, TEXTOID, a->mcontext);
}

void
mlplat_ledger_batch_add(MlplatLedgerBatch *b, const char *entity, int64 entity_id,
						const char *project, const char *action, const char *outcome,
						const char *desired_digest, const char *observed_digest,
						int http_status, const char *error, const char *trace_id, const char *note)
{
	MemoryContext old = MemoryContextSwitchTo(b->cxt);

	mlplat_array_add_text(b->col[0], entity);
	accumArrayResult(b->col[1], Int64GetDatum(entity_id), entity_id == 0, INT8OID, b->cxt);
	mlplat_array_add_text(b->col[2], project);
	mlplat_array_add_text(b->col[3], action);
	mlplat_array_add_text(b->col[4], outcome);
	mlplat_array_add_text(b->col[5], desired_digest);
	mlplat_array_add_text(b->col[6], observed_digest);
	accumArrayResult(b->col[7], Int32GetDatum(http_status), http_status == 0, INT4OID, b->cxt);
	mlplat_array_add_text(b->col[8], error);
	mlplat_array_add_text(b->col[9], trace_id);
	mlplat_array_add_text(b->col[10], note);
	b->rows++;
	MemoryContextSwitchTo(old);
}

int
mlplat_ledger_batch_flush(MlplatPass *pass, MlplatLedgerBatch *b)
{
	Oid types[3 + LEDGER_COLS];
	Datum v[3 + LEDGER_COLS];
	Datum d;
	bool isnull;
	int written;

	if (b->rows == 0)
		return 0;
	types[0] = TEXTOID;
	types[1] = INT8OID;
	types[2] = TEXTOID;
	v[0] = CStringGetTextDatum(mlplat_kind_names[pass->kind]);
	v[1] = Int64GetDatum(pass->epoch);
	v[2] = CStringGetTextDatum(pass->controller);
	for (int i = 0; i < LEDGER_COLS; i++)
	{
		types[3 + i] = get_array_type(ledger_col_types[i]);
		v[3 + i] = makeArrayResult(b->col[i], b->cxt);
	}
	if (mlplat_sql_exec("SELECT mlplat._ledger_append_set($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
						3 + LEDGER_COLS, types, v, NULL) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "mlplat: could not append %d ledger rows", b->rows);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	written = isnull ? 0 : DatumGetInt32(d);
	/* the arrays are consumed: the batch starts empty again */
	for (int i = 0; i < LEDGER_COLS; i++)
		b->col[i] = initArrayResult(ledger_col_types[i], b->cxt, false);
	b->rows = 0;
	return written;
}

char *
mlplat_trace_id_of(const char *traceparent)
{
	return (traceparent && strlen(traceparent) == 55) ? pnstrdup(traceparent + 3, 32) : NULL;
}

void
mlplat_pass_note_lost(MlplatPass *pass, int n)
{
	/* an intent or another leader got there first: the next pass re-reads */
	if (n > 0)
		snprintf(pass->status, sizeof(pass->status), "%d write-back(s) lost a compare-and-swap; re-reading", n);
}

void
mlplat_ledger_append(MlplatPass *pass, const char *entity, int64 entity_id,
					 const char *project, const char *action, const char *outcome,
					 const char *desired_digest, const char *observed_digest,
					 int http_status, const char *error, const char *trace_id, const char *note)
{
	MlplatLedgerBatch *b = mlplat_ledger_batch_new();

	mlplat_ledger_batch_add(b, entity, entity_id, project, action, outcome, desired_digest,
							observed_digest, http_status, error, trace_id, note);
	(void) mlplat_ledger_batch_flush(pass, b);
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
 * Pages are bounded three ways (issue 18, finding 12): at most
 * mlplat.list_max_pages requests per LIST (a server whose continue chain never
 * ends cannot keep a pass busy forever), at most LIST_MAX_RESTARTS restarts
 * after 410 Gone, with a backoff, and the pass's memory: a page whose parse
 * would take the pass past mlplat.pass_memory_limit stops the pass with a
 * message (the parse tree is about as large as the text).  What counts is
 * what the pass holds — its own context (mlplat_pass_memory_context), where
 * the page's text and the parsed items live — not the worker's whole
 * TopMemoryContext, whose caches a long-lived worker builds up over time and
 * which no pass can give back.  Each page's text lives in a context of its
 * own and is freed once parsed; only the parsed items stay, in the caller's
 * arena.
 */
char *
mlplat_kube_list_all(MlJsonArena *arena, const MlplatKubeResource *res, const char *selector,
					 List **items, int *lists)
{
	char *cont = NULL;
	List *got = NIL;
	int pages = 0;
	int restarts = 0;
	Size limit = (Size) mlplat_pass_memory_limit_kb * 1024;
	MemoryContext pass_cxt = mlplat_pass_memory_context ? mlplat_pass_memory_context : CurrentMemoryContext;

	for (;;)
	{
		MemoryContext page_cxt;
		MlplatHttpBatch *b;
		MlplatHttpRequest *r;
		MlplatKubeResult kr;
		MlJsonValue *page;
		MlJsonError err;
		const MlJsonValue *arr = NULL;
		char *why = NULL;

		if (pages >= mlplat_list_max_pages)
			return psprintf("LIST of %s stopped after %d pages (mlplat.list_max_pages)",
							res->plural, pages);
		page_cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat LIST page", ALLOCSET_DEFAULT_SIZES);
		b = mlplat_http_batch_create(page_cxt);
		r = mlplat_kube_list(b, res, NULL, selector, LIST_PAGE, cont);
		mlplat_http_batch_run(b);
		(*lists)++;
		pages++;
		if (!r->failed && r->resp_body != NULL &&
			MemoryContextMemAllocated(pass_cxt, true) + r->resp_len > limit)
		{
			why = psprintf("LIST of %s: page %d (%zu kB) would exceed mlplat.pass_memory_limit (%zu kB, %zu kB in use by the pass)",
						   res->plural, pages, r->resp_len / 1024, limit / 1024,
						   MemoryContextMemAllocated(pass_cxt, true) / 1024);
			MemoryContextDelete(page_cxt);
			return why;
		}
		ml_json_set_error(&err, ML_JSON_ERR_SYNTAX, 0, "no body");
		/* parsed once, into the tree the caller reads: no jsonb copy of the page */
		page = (!r->failed && r->resp_body != NULL)
				   ? ml_json_parse(arena, r->resp_body, r->resp_len, NULL, &err)
				   : NULL;
		mlplat_kube_classify(r, page != NULL, &kr);
		if (kr.outcome == MLPLAT_KUBE_EXPIRED)
		{
			/* the continue token expired: the list must start over */
			MemoryContextDelete(page_cxt);
			if (++restarts > LIST_MAX_RESTARTS)
				return psprintf("LIST of %s: continue token expired %d times in a row (410 Gone)",
								res->plural, restarts);
			list_restart_backoff(restarts);
			got = NIL;
			cont = NULL;
			continue;
		}
		if (kr.outcome != MLPLAT_KUBE_OK)
		{
			/*
			 * The reason may reach a tenant (the projects reconciler puts it in the
			 * project's last_error): a transport failure's detail, which names the
			 * API server, goes to the server log only.
			 */
			if (kr.tenant_message)
				ereport(LOG, (errmsg("mlplat: cannot list %s: %s", res->plural, kr.message)));
			why = psprintf("cannot list %s: %s", res->plural,
						   mlplat_kube_tenant_line(&kr) ? mlplat_kube_tenant_line(&kr) : "unknown error");
		}
		else if (page == NULL)
			why = psprintf("%s list is not JSON: %s", res->plural, err.message);
		else if ((arr = ml_json_object_get(page, "items")) == NULL || arr->type != ML_JSON_ARRAY)
			why = psprintf("%s list has no items array", res->plural);
		/* the page's text is parsed (or useless): give it back before the next one */
		MemoryContextDelete(page_cxt);
		if (why)
			return why;
		for (size_t i = 0; i < arr->u.array.count; i++)
			got = lappend(got, arr->u.array.items[i]);
		cont = (char *) mlplat_json_text(page, "metadata", "continue", NULL);
		if (cont == NULL || cont[0] == '\0')
			break;
	}
	*items = list_concat(*items, got);
	return NULL;
}

const char *
mlplat_json_text(const MlJsonValue *obj, const char *a, const char *b, const char *c)
{
	const MlJsonValue *v = ml_json_object_get(obj, a);

	if (v && b)
		v = ml_json_object_get(v, b);
	if (v && c)
		v = ml_json_object_get(v, c);
	return (v && v->type == ML_JSON_STRING) ? v->u.string.str : NULL;
}

bool
mlplat_json_int(const MlJsonValue *obj, const char *a, const char *b, int64 *out)
{
	const MlJsonValue *v = ml_json_object_get(ml_json_object_get(obj, a), b);

	if (v == NULL || v->type != ML_JSON_NUMBER || !v->u.number.is_integer)
		return false;
	*out = (int64) v->u.number.value;
	return true;
}
