/*
 * ledger.h — rows of mlplat.reconcile_ledger, one per external write of a pass.
 */
#ifndef MLPLAT_LEDGER_H
#define MLPLAT_LEDGER_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/reconcile.h"

/*
 * The ledger rows of a pass, collected and written with one statement (a
 * write-back of 10,000 applies writes 10,000 rows at once): a kind adds a row
 * per external write while it writes back, and mlplat_seam_writeback_end
 * flushes them with the rest of the write-back.  Transaction open for all
 * three (the arrays' element types come from the catalog); the batch lives in
 * the memory context current at mlplat_ledger_batch_new.  Flushing stamps the
 * pass's epoch and controller (note, if given, goes into detail as {"note":
 * ...}), returns the rows written (0 when the epoch is no longer current) and
 * empties the batch.
 */
typedef struct MlplatLedgerBatch MlplatLedgerBatch;
extern MlplatLedgerBatch *mlplat_ledger_batch_new(void);
extern void mlplat_ledger_batch_add(MlplatLedgerBatch *b, const char *entity, int64 entity_id,
									const char *project, const char *action, const char *outcome,
									const char *desired_digest, const char *observed_digest,
									int http_status, const char *error, const char *trace_id,
									const char *note);
extern int mlplat_ledger_batch_flush(MlplatPass *pass, MlplatLedgerBatch *b);

/*
 * A ledger row known before the write-back's transaction (an answer read
 * after the pass's batch, with no transaction open): kept in the pass's
 * context by mlplat_ledger_row_add, put into the write-back's batch by
 * mlplat_ledger_batch_add_rows (entity: as the ledger names the kind).
 */
typedef struct MlplatLedgerRow
{
	int64 entity_id;
	const char *project;
	const char *action;
	const char *outcome;
	int http_status;
	const char *error;
	const char *trace_id;
	const char *note;
} MlplatLedgerRow;

extern void mlplat_ledger_row_add(List **rows, int64 entity_id, const char *project, const char *action,
								  const char *outcome, int http_status, const char *error, const char *trace_id,
								  const char *note);
extern void mlplat_ledger_batch_add_rows(MlplatLedgerBatch *b, const char *entity, List *rows);

#endif /* MLPLAT_LEDGER_H */
