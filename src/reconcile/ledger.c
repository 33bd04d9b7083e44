/*
 * ledger.c — the reconcile ledger rows of a pass (ledger.h), one statement
 * for a whole batch.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "mlplat/ledger.h"
#include "mlplat/reconcile_sql.h"

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

/* empty arrays, one per column: a new batch, or one whose arrays a flush consumed */
static void
ledger_batch_reset(MlplatLedgerBatch *b)
{
	for (int i = 0; i < LEDGER_COLS; i++)
		b->col[i] = initArrayResult(ledger_col_types[i], b->cxt, false);
	b->rows = 0;
}

MlplatLedgerBatch *
mlplat_ledger_batch_new(void)
{
	MlplatLedgerBatch *b = palloc0(sizeof(MlplatLedgerBatch));

	b->cxt = CurrentMemoryContext;
	ledger_batch_reset(b);
	return b;
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
	written = mlplat_sql_int4(
		"SELECT mlplat._ledger_append_set($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
		3 + LEDGER_COLS, types, v, NULL);
	ledger_batch_reset(b);
	return written;
}

void
mlplat_ledger_row_add(List **rows, int64 entity_id, const char *project, const char *action, const char *outcome,
					  int http_status, const char *error, const char *trace_id, const char *note)
{
	MlplatLedgerRow *l = palloc(sizeof(MlplatLedgerRow));

	l->entity_id = entity_id;
	l->project = project;
	l->action = action;
	l->outcome = outcome;
	l->http_status = http_status;
	l->error = error;
	l->trace_id = trace_id;
	l->note = note;
	*rows = lappend(*rows, l);
}

void
mlplat_ledger_batch_add_rows(MlplatLedgerBatch *b, const char *entity, List *rows)
{
	ListCell *lc;

	foreach (lc, rows)
	{
		MlplatLedgerRow *l = lfirst(lc);

		mlplat_ledger_batch_add(b, entity, l->entity_id, l->project, l->action, l->outcome, NULL, NULL,
								l->http_status, l->error, l->trace_id, l->note);
	}
}
