/*
 * routes_queue.c — which deployments a transaction's route publish still has to compare.
 *
 * Routes are published at commit by the deferred constraint trigger deployments_publish_routes
 * (mlplat._routes_publish), which PostgreSQL fires once per changed row: it has no deferred
 * statement-level trigger.  Each firing used to compare and write its own row (~6 statements
 * a row, 7.8% of the deployments leader's CPU while 10,000 converge).  Now an immediate row
 * trigger with the same WHEN (deployments_publish_queue) queues each such row's id here; the
 * first deferred firing takes every queued id and has mlplat._routes_publish_set publish them
 * together in a few set-based statements, and the later firings find their id taken and
 * return at once.
 *
 * Kept in backend memory, not in a setting or a table, so the session's user can neither
 * read nor write it (the functions are granted to no one; the publisher is SECURITY
 * DEFINER): no caller can make a firing skip a row it did not compare.  A firing skips its
 * row only if a firing after the row's last change took it: every change queues its row
 * again (the queue trigger fires before the publish trigger of the same row, both AFTER
 * triggers with the same WHEN).  A subtransaction that aborts un-does the firings it ran
 * (PostgreSQL fires those events again) along with their writes, so every taken id is
 * queued again.  An id too many costs a compare, never a wrong route: the publisher
 * compares each deployment as it is with its open route entry.  Everything goes with the
 * transaction: the memory is TopTransactionContext's, and the callback forgets it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

typedef struct QueuedRoute
{
	int64 id; /* hash key */
	bool taken;
} QueuedRoute;

static HTAB *queued_ids = NULL; /* every id queued this transaction, taken or not */
static int64 *pending = NULL;	/* the ids not taken yet, in queue order */
static int npending = 0;
static int pending_cap = 0;
static bool callbacks_registered = false;

static void
forget(XactEvent event, void *arg)
{
	/* the memory itself goes with TopTransactionContext */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
	{
		queued_ids = NULL;
		pending = NULL;
		npending = pending_cap = 0;
	}
}

static void
push_pending(int64 id)
{
	if (npending == pending_cap)
	{
		int cap = pending_cap == 0 ? 256 : pending_cap * 2;

		pending = pending == NULL ? MemoryContextAlloc(TopTransactionContext, cap * sizeof(int64)) : repalloc(pending, cap * sizeof(int64));
		pending_cap = cap;
	}
	pending[npending++] = id;
}

/* queued, and pending unless it already was */
static void
queue_id(int64 id)
{
	QueuedRoute *e;
	bool found;

	e = hash_search(queued_ids, &id, HASH_ENTER, &found);
	if (!found || e->taken)
	{
		e->taken = false;
		push_pending(id);
	}
}

static void
requeue_taken(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS seq;
	QueuedRoute *e;

	if (event != SUBXACT_EVENT_ABORT_SUB || queued_ids == NULL)
		return;
	hash_seq_init(&seq, queued_ids);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->taken)
		{
			e->taken = false;
			push_pending(e->id);
		}
}

static void
ensure_queue(void)
{
	HASHCTL ctl;

	if (!callbacks_registered)
	{
		RegisterXactCallback(forget, NULL);
		RegisterSubXactCallback(requeue_taken, NULL);
		callbacks_registered = true;
	}
	if (queued_ids != NULL)
		return;
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(QueuedRoute);
	ctl.hcxt = TopTransactionContext;
	queued_ids = hash_create("mlplat route queue", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* NEW.id of the AFTER UPDATE row trigger firing that called fn */
static int64
new_id(FunctionCallInfo fcinfo, const char *fn)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	int attnum;
	bool isnull;
	Datum id;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), errmsg("%s must be an AFTER UPDATE row trigger", fn)));
	attnum = SPI_fnumber(td->tg_relation->rd_att, "id");
	if (attnum <= 0 || TupleDescAttr(td->tg_relation->rd_att, attnum - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), errmsg("%s: table \"%s\" has no bigint id column", fn, RelationGetRelationName(td->tg_relation))));
	id = SPI_getbinval(td->tg_newtuple, td->tg_relation->rd_att, attnum, &isnull);
	if (isnull)
		ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION), errmsg("%s: the row's id is NULL", fn)));
	return DatumGetInt64(id);
}

/* The immediate queue trigger deployments_publish_queue: queue NEW.id */
PG_FUNCTION_INFO_V1(mlplat_route_queue_add);

Datum
mlplat_route_queue_add(PG_FUNCTION_ARGS)
{
	int64 id = new_id(fcinfo, "_route_queue_add");

	ensure_queue();
	queue_id(id);
	return PointerGetDatum(NULL);
}

/*
 * The deferred publish trigger deployments_publish_routes (mlplat._routes_publish): nothing
 * to do if a firing since this row's last change took it; else it takes every pending id
 * (this row's among them) and has mlplat._routes_publish_set compare and publish them.  In
 * C so that a later firing costs a hash lookup, not a PL/pgSQL call that switches user and
 * search_path.  _routes_publish_set is called through fmgr: SECURITY DEFINER as declared, and
 * no caller needs EXECUTE on it (it is granted to no one).
 */
PG_FUNCTION_INFO_V1(mlplat_routes_publish);

Datum
mlplat_routes_publish(PG_FUNCTION_ARGS)
{
	int64 id;
	QueuedRoute *e;
	Datum *elems;
	ArrayType *ids;
	Oid argtypes[1] = { INT8ARRAYOID };
	Oid publish;
	FmgrInfo flinfo;
	LOCAL_FCINFO(call, 1);

	id = new_id(fcinfo, "_routes_publish");
	ensure_queue();
	e = hash_search(queued_ids, &id, HASH_FIND, NULL);
	if (e != NULL && e->taken)
		return PointerGetDatum(NULL);
	/* not queued at all (the queue trigger disabled or added mid-transaction): compare it anyway */
	queue_id(id);
	elems = palloc(npending * sizeof(Datum));
	for (int i = 0; i < npending; i++)
	{
		e = hash_search(queued_ids, &pending[i], HASH_FIND, NULL);
		e->taken = true;
		elems[i] = Int64GetDatum(pending[i]);
	}
	ids = construct_array(elems, npending, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE);
	npending = 0;

	publish = LookupFuncName(list_make2(makeString("mlplat"), makeString("_routes_publish_set")), 1, argtypes, false);
	fmgr_info(publish, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, 1, InvalidOid, NULL, NULL);
	call->args[0].value = PointerGetDatum(ids);
	call->args[0].isnull = false;
	FunctionCallInvoke(call);
	return PointerGetDatum(NULL);
}
