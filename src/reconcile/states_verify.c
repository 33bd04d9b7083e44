/*
 * states_verify.c — does the library's list of a machine's statuses
 * (states.h) name exactly the statuses of its SQL function?
 *
 * A status the SQL has and C lacks would make a claim fail on the first row
 * in it; one C has and SQL lacks would be refused by the trigger at
 * write-back, after the pass had acted on the cluster.  So a worker checks
 * every machine its seams carry before it runs (registry.c), like the seam
 * types themselves.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "mlplat/states.h"

/* what last agreed, per machine: the function and the version of its catalog row */
static struct
{
	Oid fn;
	TransactionId xmin;
} agreed[MLPLAT_NUM_MACHINES];

/* the function's oid and its catalog row's xmin (CREATE OR REPLACE changes it) */
static bool
transitions_fn(MlplatMachine m, Oid *fn, TransactionId *xmin)
{
	List *name = list_make2(makeString(pstrdup("mlplat")),
							makeString(psprintf("_%s_transitions", mlplat_machine_name(m))));
	HeapTuple tup;

	*fn = LookupFuncName(name, 0, NULL, true);
	if (!OidIsValid(*fn))
		return false;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(*fn));
	if (!HeapTupleIsValid(tup))
		return false;
	*xmin = HeapTupleHeaderGetXmin(tup->t_data);
	ReleaseSysCache(tup);
	return true;
}

/* compare the statuses SQL names (in SPI_tuptable) with C's; NULL when the same */
static char *
states_mismatch(MlplatMachine m)
{
	int n = mlplat_machine_nstatuses(m);
	bool *seen = palloc0(sizeof(bool) * n);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char *text = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		int s = mlplat_status_find(m, text);

		if (s == MLPLAT_NO_STATUS)
			return psprintf("mlplat._%s_transitions() names the status \"%s\", which the library does not know",
							mlplat_machine_name(m), text);
		seen[s] = true;
	}
	for (int s = 0; s < n; s++)
		if (!seen[s])
			return psprintf("the library knows the %s status \"%s\", which mlplat._%s_transitions() does not name",
							mlplat_machine_name(m), mlplat_status_name(m, s), mlplat_machine_name(m));
	return NULL;
}

char *
mlplat_states_verify(MlplatMachine m)
{
	Oid fn;
	TransactionId xmin;
	char *why;
	char *sql;
	bool snapshot;

	if (!transitions_fn(m, &fn, &xmin))
		return psprintf("function mlplat._%s_transitions() does not exist", mlplat_machine_name(m));
	if (agreed[m].fn == fn && TransactionIdEquals(agreed[m].xmin, xmin))
		return NULL; /* checked before, unchanged since */
	sql = psprintf("SELECT DISTINCT s FROM mlplat._%s_transitions() t, "
				   "LATERAL (VALUES (t.from_status), (t.to_status)) v(s) WHERE s IS NOT NULL",
				   mlplat_machine_name(m));
	/* the worker checks between passes, where no snapshot is active */
	snapshot = !ActiveSnapshotSet();
	if (snapshot)
		PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "mlplat: SPI_connect failed");
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: \"%s\" failed", sql);
	why = states_mismatch(m);
	if (why)
		why = strcpy(SPI_palloc(strlen(why) + 1), why); /* outlives SPI_finish */
	SPI_finish();
	if (snapshot)
		PopActiveSnapshot();
	agreed[m].fn = why ? InvalidOid : fn;
	agreed[m].xmin = xmin;
	return why;
}
