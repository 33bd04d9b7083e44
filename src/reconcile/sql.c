/*
 * sql.c — the SQL a pass runs (reconcile_sql.h): statements with kept plans,
 * the installation's instance id, text arrays, known ordinals.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"

/*
 * Plans of the statements mlplat_sql_bool runs, kept for the life of the
 * process: a write-back runs the same few statements once per entity, and
 * parsing and planning each call cost more than running it.  The plan cache
 * re-plans a kept plan when what it depends on changes (an ALTER, a DROP and
 * CREATE EXTENSION) — but for one thing: a SQL function that declares no SET
 * clause is inlined, and its plan then does not depend on the composite type it
 * returns, so an ALTER TYPE of a seam type (an attribute added, then dropped)
 * left "SELECT c FROM mlplat._<kind>_claim() c" failing every pass with "table
 * row type and query-specified row type do not match" until the worker ended.
 * The seam check sees every change of a seam type (seam.c) and forgets the
 * kept plans then.
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

void
mlplat_sql_forget_plans(void)
{
	while (kept_plans != NULL)
	{
		KeptPlan *k = kept_plans;

		kept_plans = k->next;
		SPI_freeplan(k->plan);
		pfree(k->sql);
		pfree(k->types);
		pfree(k);
	}
}

int
mlplat_sql_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	return SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 0);
}

Datum
mlplat_sql_scalar(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, Oid type, bool *isnull)
{
	TupleDesc td;

	if (SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 2) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "mlplat: \"%s\" returned %llu rows, not one", sql, (unsigned long long) SPI_processed);
	td = SPI_tuptable->tupdesc;
	if (td->natts != 1 || SPI_gettypeid(td, 1) != type)
		elog(ERROR, "mlplat: \"%s\" must answer one value of type %s, not %d columns (the first of type %s)", sql,
			 format_type_be(type), td->natts, format_type_be(SPI_gettypeid(td, 1)));
	return SPI_getbinval(SPI_tuptable->vals[0], td, 1, isnull);
}

bool
mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	bool isnull;
	Datum d = mlplat_sql_scalar(sql, nargs, types, values, nulls, BOOLOID, &isnull);

	return !isnull && DatumGetBool(d);
}

int32
mlplat_sql_int4(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	bool isnull;
	Datum d = mlplat_sql_scalar(sql, nargs, types, values, nulls, INT4OID, &isnull);

	return isnull ? 0 : DatumGetInt32(d);
}

char *
mlplat_sql_text(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	MemoryContext caller = CurrentMemoryContext;
	bool isnull;
	Datum d = mlplat_sql_scalar(sql, nargs, types, values, nulls, TEXTOID, &isnull);
	char *v;
	MemoryContext old;

	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(caller);
	v = TextDatumGetCString(d);
	MemoryContextSwitchTo(old);
	return v;
}

List *
mlplat_sql_text_list(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	MemoryContext caller = CurrentMemoryContext;
	List *out = NIL;
	TupleDesc td;
	MemoryContext old;

	if (SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: \"%s\" failed", sql);
	td = SPI_tuptable->tupdesc;
	if (td->natts != 1 || SPI_gettypeid(td, 1) != TEXTOID)
		elog(ERROR, "mlplat: \"%s\" must answer one column of type text, not %d columns (the first of type %s)", sql,
			 td->natts, format_type_be(SPI_gettypeid(td, 1)));
	old = MemoryContextSwitchTo(caller);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[i], td, 1, &isnull);

		if (!isnull)
			out = lappend(out, TextDatumGetCString(d));
	}
	MemoryContextSwitchTo(old);
	return out;
}

char *
mlplat_instance_id(void)
{
	char *v = mlplat_sql_text("SELECT mlplat._instance_id()", 0, NULL, NULL, NULL);

	if (v == NULL)
		elog(ERROR, "mlplat: installation has no instance id");
	return v;
}

void
mlplat_array_add_text(ArrayBuildState *a, const char *s)
{
	accumArrayResult(a, s ? CStringGetTextDatum(s) : (Datum) 0, s == NULL, TEXTOID, a->mcontext);
}

Datum
mlplat_text_array(const List *strs)
{
	int n = list_length(strs);
	Datum *d = palloc(sizeof(Datum) * Max(n, 1));
	bool *nulls = palloc(sizeof(bool) * Max(n, 1));
	int dims[1] = { n };
	int lbs[1] = { 1 };
	int i = 0;
	ListCell *lc;

	foreach (lc, strs)
	{
		nulls[i] = lfirst(lc) == NULL;
		d[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum((const char *) lfirst(lc));
		i++;
	}
	return PointerGetDatum(construct_md_array(d, nulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
}

Datum
mlplat_int_array(const List *l, bool wide)
{
	Datum *d = palloc(sizeof(Datum) * Max(list_length(l), 1));
	int i = 0;
	ListCell *lc;

	foreach (lc, l)
		d[i++] = wide ? Int64GetDatum(*(int64 *) lfirst(lc)) : Int32GetDatum(lfirst_int(lc));
	if (wide)
		return PointerGetDatum(construct_array(d, i, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	return PointerGetDatum(construct_array(d, i, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

bool *
mlplat_sql_known_ordinals(const char *sql, int ncols, int n, const char *const *cells)
{
	MemoryContext caller = CurrentMemoryContext;
	bool *known = palloc0(sizeof(bool) * Max(n, 1));
	Oid types[MLPLAT_SQL_KNOWN_MAX_COLS];
	Datum v[MLPLAT_SQL_KNOWN_MAX_COLS];

	if (ncols < 1 || ncols > MLPLAT_SQL_KNOWN_MAX_COLS)
		elog(ERROR, "mlplat: %d columns asked of \"%s\"", ncols, sql);
	if (n == 0)
		return known;
	mlplat_txn_begin();
	for (int c = 0; c < ncols; c++)
	{
		ArrayBuildState *a = initArrayResult(TEXTOID, CurrentMemoryContext, false);

		for (int i = 0; i < n; i++)
			mlplat_array_add_text(a, cells[i * ncols + c]);
		types[c] = TEXTARRAYOID;
		v[c] = makeArrayResult(a, CurrentMemoryContext);
	}
	if (mlplat_sql_exec(sql, ncols, types, v, NULL) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: \"%s\" failed", sql);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool isnull;
		int32 k = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));

		if (!isnull && k >= 1 && k <= n)
			known[k - 1] = true;
	}
	mlplat_txn_commit();
	MemoryContextSwitchTo(caller);
	return known;
}
