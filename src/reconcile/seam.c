/*
 * seam.c — the typed seam between a kind's SQL and its C pass (seam.h).
 *
 * Written once for every kind: resolving a composite type's attributes by
 * name, checking them against the C table, reading claim rows into structs
 * and building the write-back array.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "mlplat/ledger.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

/* a text[] as a List of palloc'd strings (NULL elements stay NULL) */
static List *
text_array_list(Datum d)
{
	ArrayType *a = DatumGetArrayTypeP(d);
	Datum *elems;
	bool *nulls;
	int n;
	List *out = NIL;

	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		out = lappend(out, nulls[i] ? NULL : TextDatumGetCString(elems[i]));
	return out;
}

static Oid
seam_sql_type(MlplatSeamType t)
{
	switch (t)
	{
		case MLPLAT_SEAM_INT8:
			return INT8OID;
		case MLPLAT_SEAM_INT4:
			return INT4OID;
		case MLPLAT_SEAM_BOOL:
			return BOOLOID;
		case MLPLAT_SEAM_TEXT:
		case MLPLAT_SEAM_STATUS:
			return TEXTOID;
		case MLPLAT_SEAM_JSONB:
			return JSONBOID;
		case MLPLAT_SEAM_TIMESTAMPTZ:
			return TIMESTAMPTZOID;
		case MLPLAT_SEAM_TEXT_ARRAY:
			return TEXTARRAYOID;
		case MLPLAT_SEAM_INT8_ARRAY:
			return INT8ARRAYOID;
		case MLPLAT_SEAM_NUMERIC:
			return NUMERICOID;
	}
	return InvalidOid;
}

/* The type's oid, or InvalidOid when mlplat or the type is not there. */
static Oid
seam_type_oid(const MlplatSeam *s)
{
	Oid nsp = get_namespace_oid("mlplat", true);

	if (!OidIsValid(nsp))
		return InvalidOid;
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(s->type_name), ObjectIdGetDatum(nsp));
}

/*
 * Compare the C table with the type's descriptor; NULL when they agree.  Every
 * field must name a live attribute of its SQL type, and every live attribute
 * must have a field: an attribute C does not know would be silently NULL in a
 * write-back, or silently ignored in a claim.
 */
static char *
seam_mismatch(const MlplatSeam *s, TupleDesc td, AttrNumber *attnum)
{
	int live = 0;

	for (int a = 0; a < td->natts; a++)
		if (!TupleDescAttr(td, a)->attisdropped)
			live++;
	for (int i = 0; i < s->nfields; i++)
	{
		const MlplatSeamField *f = &s->fields[i];
		Oid want = seam_sql_type(f->type);

		attnum[i] = InvalidAttrNumber;
		for (int a = 0; a < td->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(td, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), f->attname) == 0)
			{
				if (att->atttypid != want)
					return psprintf("attribute \"%s\" is of type %s in SQL, the library reads it as %s",
									f->attname, format_type_be(att->atttypid), format_type_be(want));
				attnum[i] = att->attnum;
				break;
			}
		}
		if (attnum[i] == InvalidAttrNumber)
			return psprintf("the library expects an attribute \"%s\" (%s) that the type does not have",
							f->attname, format_type_be(want));
	}
	if (live != s->nfields)
	{
		for (int a = 0; a < td->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(td, a);
			bool known = att->attisdropped;

			for (int i = 0; i < s->nfields && !known; i++)
				known = attnum[i] == att->attnum;
			if (!known)
				return psprintf("the type has an attribute \"%s\" (%s) that the library does not know",
								NameStr(att->attname), format_type_be(att->atttypid));
		}
	}
	return NULL;
}

char *
mlplat_seam_verify(MlplatSeam *s)
{
	Oid typoid = seam_type_oid(s);
	TypeCacheEntry *tc;
	AttrNumber *attnum;
	char *why;
	MemoryContext old;

	if (!OidIsValid(typoid))
		return psprintf("type mlplat.%s does not exist", s->type_name);
	tc = lookup_type_cache(typoid, TYPECACHE_TUPDESC);
	if (tc->tupDesc == NULL)
		return psprintf("type mlplat.%s is not a composite type", s->type_name);
	if (typoid == s->typoid && tc->tupDesc_identifier == s->tupdesc_id && s->tupdesc != NULL)
		return NULL; /* checked before, unchanged since */

	attnum = palloc(sizeof(AttrNumber) * Max(s->nfields, 1));
	why = seam_mismatch(s, tc->tupDesc, attnum);
	if (why != NULL)
	{
		s->typoid = InvalidOid;
		return why;
	}
	/* a type that changed and agrees: plans made before the change may not fit it (sql.c) */
	mlplat_sql_forget_plans();
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (s->tupdesc)
		FreeTupleDesc(s->tupdesc);
	if (s->attnum)
		pfree(s->attnum);
	s->tupdesc = CreateTupleDescCopy(tc->tupDesc);
	s->attnum = palloc(sizeof(AttrNumber) * Max(s->nfields, 1));
	memcpy(s->attnum, attnum, sizeof(AttrNumber) * s->nfields);
	MemoryContextSwitchTo(old);
	s->typoid = typoid;
	s->tupdesc_id = tc->tupDesc_identifier;
	return NULL;
}

void
mlplat_seam_check(MlplatSeam *s)
{
	char *why = mlplat_seam_verify(s);

	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("mlplat reconciler refuses to run: type mlplat.%s does not match this library",
						s->type_name),
				 errdetail("%s.", why),
				 errhint("Install the library and the extension at the same version (ALTER EXTENSION mlplat UPDATE).")));
}

void
mlplat_seam_read(MlplatSeam *s, Datum composite, void *out)
{
	HeapTupleHeader th = DatumGetHeapTupleHeader(composite);
	HeapTupleData tuple;

	if (HeapTupleHeaderGetTypeId(th) != s->typoid)
		elog(ERROR, "mlplat: a row of type %u where mlplat.%s (%u) was expected",
			 HeapTupleHeaderGetTypeId(th), s->type_name, s->typoid);
	tuple.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = th;
	for (int i = 0; i < s->nfields; i++)
	{
		const MlplatSeamField *f = &s->fields[i];
		char *p = (char *) out + f->offset;
		bool isnull;
		Datum v = heap_getattr(&tuple, s->attnum[i], s->tupdesc, &isnull);
		bool neg = (f->flags & MLPLAT_SEAM_NULL_NEG) != 0;

		switch (f->type)
		{
			case MLPLAT_SEAM_INT8:
				*(int64 *) p = isnull ? (neg ? -1 : 0) : DatumGetInt64(v);
				break;
			case MLPLAT_SEAM_INT4:
				*(int32 *) p = isnull ? (neg ? -1 : 0) : DatumGetInt32(v);
				break;
			case MLPLAT_SEAM_BOOL:
				*(bool *) p = !isnull && DatumGetBool(v);
				break;
			case MLPLAT_SEAM_TEXT:
				*(char **) p = isnull ? NULL : TextDatumGetCString(v);
				break;
			case MLPLAT_SEAM_STATUS:
				*(int *) p = isnull ? MLPLAT_NO_STATUS
									: mlplat_status_parse(MLPLAT_SEAM_MACHINE(f->flags), TextDatumGetCString(v));
				break;
			case MLPLAT_SEAM_TIMESTAMPTZ:
				*(TimestampTz *) p = isnull ? 0 : DatumGetTimestampTz(v);
				break;
			case MLPLAT_SEAM_TEXT_ARRAY:
				*(List **) p = isnull ? NIL : text_array_list(v);
				break;
			case MLPLAT_SEAM_INT8_ARRAY:
				*(ArrayType **) p = isnull ? NULL : DatumGetArrayTypePCopy(v);
				break;
			case MLPLAT_SEAM_NUMERIC:
				*(char **) p = isnull ? NULL : DatumGetCString(DirectFunctionCall1(numeric_out, v));
				break;
			case MLPLAT_SEAM_JSONB:
				if (isnull)
					*(char **) p = NULL;
				else
				{
					Jsonb *jb = DatumGetJsonbP(v);

					*(char **) p = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
				}
				break;
		}
	}
}

List *
mlplat_seam_claim(MlplatSeam *s, MemoryContext cxt, const char *sql, int nargs, Oid *types,
				  Datum *values, size_t size)
{
	MemoryContext caller = CurrentMemoryContext;
	List *rows = NIL;

	mlplat_seam_check(s);
	if (mlplat_sql_exec(sql, nargs, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: claim \"%s\" failed", sql);
	if (SPI_tuptable->tupdesc->natts != 1 || SPI_gettypeid(SPI_tuptable->tupdesc, 1) != s->typoid)
		elog(ERROR, "mlplat: claim \"%s\" must return one column of type mlplat.%s", sql, s->type_name);
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		void *row;

		if (isnull)
			continue;
		row = palloc0(size);
		mlplat_seam_read(s, d, row);
		rows = lappend(rows, row);
	}
	MemoryContextSwitchTo(caller);
	return rows;
}

MlplatSeamArray *
mlplat_seam_array_new(MlplatSeam *s)
{
	MlplatSeamArray *a = palloc0(sizeof(MlplatSeamArray));

	mlplat_seam_check(s);
	a->seam = s;
	a->state = initArrayResult(s->typoid, CurrentMemoryContext, false);
	a->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat seam row", ALLOCSET_SMALL_SIZES);
	return a;
}

/* A field held by pointer (not NULL) as the SQL value of its type. */
static Datum
seam_pointer_datum(MlplatSeamType t, const void *v)
{
	switch (t)
	{
		case MLPLAT_SEAM_JSONB:
			return DirectFunctionCall1(jsonb_in, CStringGetDatum(v));
		case MLPLAT_SEAM_NUMERIC:
			/* the decimal text as numeric_in reads it: no float in between, its scale kept */
			return DirectFunctionCall3(numeric_in, CStringGetDatum(v), ObjectIdGetDatum(InvalidOid),
									   Int32GetDatum(-1));
		case MLPLAT_SEAM_TEXT_ARRAY:
			return mlplat_text_array(v);
		default:
			/* MLPLAT_SEAM_TEXT */
			return CStringGetTextDatum(v);
	}
}

void
mlplat_seam_array_add(MlplatSeamArray *a, const void *row)
{
	MlplatSeam *s = a->seam;
	TupleDesc td = s->tupdesc;
	/*
	 * The element's texts, its jsonb parse (jsonb_in's lexer and tree) and
	 * the tuple are garbage once the array holds its copy: a write-back of
	 * thousands of rows kept them all (4,000 rows: 17 MB) until its
	 * transaction ended.
	 */
	MemoryContext caller = MemoryContextSwitchTo(a->row_cxt);
	Datum *values = palloc0(sizeof(Datum) * td->natts);
	bool *nulls = palloc(sizeof(bool) * td->natts);
	HeapTuple tuple;

	memset(nulls, true, sizeof(bool) * td->natts);
	for (int i = 0; i < s->nfields; i++)
	{
		const MlplatSeamField *f = &s->fields[i];
		const char *p = (const char *) row + f->offset;
		int a_i = s->attnum[i] - 1;
		bool neg = (f->flags & MLPLAT_SEAM_NULL_NEG) != 0;

		nulls[a_i] = false;
		switch (f->type)
		{
			case MLPLAT_SEAM_INT8:
				values[a_i] = Int64GetDatum(*(const int64 *) p);
				nulls[a_i] = neg && *(const int64 *) p < 0;
				break;
			case MLPLAT_SEAM_INT4:
				values[a_i] = Int32GetDatum(*(const int32 *) p);
				nulls[a_i] = neg && *(const int32 *) p < 0;
				break;
			case MLPLAT_SEAM_BOOL:
				values[a_i] = BoolGetDatum(*(const bool *) p);
				break;
			case MLPLAT_SEAM_TIMESTAMPTZ:
				values[a_i] = TimestampTzGetDatum(*(const TimestampTz *) p);
				nulls[a_i] = *(const TimestampTz *) p == 0;
				break;
			case MLPLAT_SEAM_STATUS:
				nulls[a_i] = *(const int *) p == MLPLAT_NO_STATUS;
				if (!nulls[a_i])
					values[a_i] = CStringGetTextDatum(mlplat_status_name(MLPLAT_SEAM_MACHINE(f->flags), *(const int *) p));
				break;
			case MLPLAT_SEAM_TEXT:
			case MLPLAT_SEAM_JSONB:
			case MLPLAT_SEAM_NUMERIC:
			case MLPLAT_SEAM_TEXT_ARRAY:
				/* a NULL pointer (NIL, for a list) is SQL NULL */
				nulls[a_i] = *(const void *const *) p == NULL;
				if (!nulls[a_i])
					values[a_i] = seam_pointer_datum(f->type, *(const void *const *) p);
				break;
			case MLPLAT_SEAM_INT8_ARRAY:
				elog(ERROR, "mlplat: attribute \"%s\" of mlplat.%s is read only (a bigint[])", f->attname,
					 s->type_name);
				break;
		}
	}
	tuple = heap_form_tuple(td, values, nulls);
	accumArrayResult(a->state, HeapTupleGetDatum(tuple), false, s->typoid, a->state->mcontext);
	MemoryContextSwitchTo(caller);
	MemoryContextReset(a->row_cxt);
	a->count++;
}

Datum
mlplat_seam_array_datum(MlplatSeamArray *a)
{
	return makeArrayResult(a->state, CurrentMemoryContext);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64 x = *(const int64 *) a;
	int64 y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/* The arguments of a set-based write-back: $1 the epoch, $2 the array of a. */
static void
writeback_args(MlplatSeamArray *a, int64 epoch, Oid *types, Datum *values)
{
	types[0] = INT8OID;
	types[1] = get_array_type(a->seam->typoid);
	if (!OidIsValid(types[1]))
		elog(ERROR, "mlplat: type mlplat.%s has no array type", a->seam->type_name);
	values[0] = Int64GetDatum(epoch);
	values[1] = mlplat_seam_array_datum(a);
}

int64 *
mlplat_seam_writeback(MlplatSeamArray *a, const char *sql, int64 epoch, uint64 *n)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Oid types[2];
	Datum values[2];
	int64 *ids;

	*n = 0;
	if (a->count == 0)
		return NULL;
	writeback_args(a, epoch, types, values);
	if (mlplat_sql_exec(sql, 2, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: write-back \"%s\" failed", sql);
	ids = MemoryContextAlloc(out_cxt, sizeof(int64) * Max(SPI_processed, 1));
	a->returned_sum = 0;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool isnull;
		Datum v;

		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		if (SPI_tuptable->tupdesc->natts < 2)
			continue;
		v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
		if (!isnull)
			a->returned_sum += SPI_gettypeid(SPI_tuptable->tupdesc, 2) == INT8OID ? DatumGetInt64(v) : DatumGetInt32(v);
	}
	*n = SPI_processed;
	qsort(ids, *n, sizeof(int64), cmp_int64);
	MemoryContextSwitchTo(out_cxt);
	return ids;
}

bool
mlplat_seam_written(const int64 *ids, uint64 n, int64 id)
{
	return n > 0 && bsearch(&id, ids, n, sizeof(int64), cmp_int64) != NULL;
}

void
mlplat_seam_claim_pass(MlplatPass *pass, MlplatSeam *s, const char *sql, int nargs, Oid *types, Datum *values,
					   size_t size, bool with_notes, int limit, MlplatClaim *out)
{
	mlplat_seam_claim_pass_with(pass, s, sql, nargs, types, values, size, with_notes, limit, NULL, out);
}

void
mlplat_seam_claim_pass_with(MlplatPass *pass, MlplatSeam *s, const char *sql, int nargs, Oid *types, Datum *values,
							size_t size, bool with_notes, int limit, const MlplatClaimSteps *steps, MlplatClaim *out)
{
	MemoryContext pass_cxt = CurrentMemoryContext;

	memset(out, 0, sizeof(*out));
	out->start = GetCurrentTimestamp();
	mlplat_txn_begin();
	MemoryContextSwitchTo(pass_cxt);
	out->instance = mlplat_instance_id();
	if (steps && steps->before)
	{
		steps->before(pass, steps->arg);
		MemoryContextSwitchTo(pass_cxt);
	}
	/* the bound holds whatever the kind's SQL does: never more than limit rows in C */
	if (limit > 0)
		sql = psprintf("%s LIMIT %d", sql, limit);
	out->rows = mlplat_seam_claim(s, pass_cxt, sql, nargs, types, values, size);
	out->full = limit > 0 && list_length(out->rows) >= limit;
	if (out->full)
		pass->claim_full = true;
	/* SPI calls return to SPI's context; the notes must outlive the transaction */
	MemoryContextSwitchTo(pass_cxt);
	if (with_notes)
		out->notes = mlplat_unanswered_load(pass);
	if (steps && steps->after)
	{
		MemoryContextSwitchTo(pass_cxt);
		steps->after(pass, steps->arg);
	}
	mlplat_txn_commit();
	MemoryContextSwitchTo(pass_cxt);
	out->end = GetCurrentTimestamp();
}

MlplatSeamArray *
mlplat_seam_writeback_begin(MlplatSeam *s, MlplatLedgerBatch **ledger)
{
	mlplat_txn_begin();
	*ledger = mlplat_ledger_batch_new();
	return mlplat_seam_array_new(s);
}

void
mlplat_seam_writeback_end(MlplatPass *pass, MlplatLedgerBatch *ledger, MlplatWriteNotes *settled, List *spans,
						  MemoryContext pass_cxt, int lost)
{
	if (ledger)
		(void) mlplat_ledger_batch_flush(pass, ledger);
	if (settled)
		mlplat_write_notes_clear(pass, settled);
	mlplat_spans_flush(spans);
	mlplat_txn_commit();
	MemoryContextSwitchTo(pass_cxt);
	mlplat_pass_note_lost(pass, lost);
}

List *
mlplat_seam_writeback_rows(MlplatSeamArray *a, const char *sql, int64 epoch, MlplatSeam *result,
						   MemoryContext cxt, size_t size)
{
	Oid types[2];
	Datum values[2];

	if (a->count == 0)
		return NIL;
	writeback_args(a, epoch, types, values);
	return mlplat_seam_claim(result, cxt, sql, 2, types, values, size);
}

/* the offset of int8 attribute attname in the seam's struct */
static size_t
seam_int8_offset(const MlplatSeam *s, const char *attname)
{
	for (int i = 0; i < s->nfields; i++)
		if (strcmp(s->fields[i].attname, attname) == 0 && s->fields[i].type == MLPLAT_SEAM_INT8)
			return s->fields[i].offset;
	elog(ERROR, "mlplat: type mlplat.%s has no bigint attribute \"%s\"", s->type_name, attname);
	return 0;
}

void
mlplat_writeback_begin(MlplatWriteback *wb, MlplatPass *pass, MlplatSeam *rows, MlplatSeam *claim)
{
	memset(wb, 0, sizeof(*wb));
	wb->pass = pass;
	wb->pass_cxt = CurrentMemoryContext;
	wb->claim = claim;
	wb->rows = mlplat_seam_writeback_begin(rows, &wb->ledger);
}

void
mlplat_writeback_rows(MlplatWriteback *wb, List *entities, MlplatWritebackRowFn row_fn, const char *sql,
					  MlplatWritebackDoneFn done_fn)
{
	const MlplatSeam *s = wb->rows->seam;
	size_t id_at = seam_int8_offset(wb->claim, "id");
	size_t rv_at = seam_int8_offset(wb->claim, "row_version");
	size_t row_id_at = seam_int8_offset(s, "id");
	size_t row_rv_at = seam_int8_offset(s, "row_version");
	bool *has_row = palloc0(sizeof(bool) * Max(list_length(entities), 1));
	List **row_spans = palloc0(sizeof(List *) * Max(list_length(entities), 1));
	char *row = palloc(s->size);
	int64 *written;
	uint64 nwritten;
	ListCell *lc;
	int i = 0;

	foreach (lc, entities)
	{
		char *e = lfirst(lc);

		memset(row, 0, s->size);
		wb->row_spans = NIL;
		has_row[i] = row_fn(wb, e, row);
		if (has_row[i])
		{
			row_spans[i] = wb->row_spans;
			*(int64 *) (row + row_id_at) = *(int64 *) (e + id_at);
			*(int64 *) (row + row_rv_at) = *(int64 *) (e + rv_at);
			mlplat_seam_array_add(wb->rows, row);
		}
		i++;
	}
	written = mlplat_seam_writeback(wb->rows, sql, wb->pass->epoch, &nwritten);
	i = 0;
	foreach (lc, entities)
	{
		char *e = lfirst(lc);
		bool held;

		if (!has_row[i++])
			continue;
		held = mlplat_seam_written(written, nwritten, *(int64 *) (e + id_at));
		if (held)
			wb->spans = list_concat(wb->spans, row_spans[i - 1]);
		else
			wb->lost++; /* an intent or another leader got there first: re-read next pass */
		if (done_fn)
			done_fn(wb, e, held);
	}
	wb->row_spans = NIL;
	pfree(row);
	pfree(row_spans);
	pfree(has_row);
}

void
mlplat_writeback_orphan(MlplatWriteback *wb, const char *entity, int64 entity_id, const char *project,
						const char *outcome, int http_status, const char *error, const char *object)
{
	mlplat_ledger_batch_add(wb->ledger, entity, entity_id, project, "ORPHAN_TEARDOWN", outcome, NULL, NULL,
							http_status, error, NULL, object);
}

void
mlplat_writeback_settle(MlplatWriteback *wb, int64 entity_id, const char *object, bool all,
						const char *answered_action)
{
	if (all)
		mlplat_write_notes_add(&wb->settled, entity_id, object, NULL);
	else if (answered_action)
		mlplat_write_notes_add(&wb->settled, entity_id, object, answered_action);
}

void
mlplat_writeback_end(MlplatWriteback *wb)
{
	mlplat_seam_writeback_end(wb->pass, wb->ledger, &wb->settled, wb->spans, wb->pass_cxt, wb->lost);
}
