/*
 * txn.c — the short transactions of a pass (reconcile.h): claim and write-back
 * each run in one, with a snapshot and SPI, and none is held across I/O.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "mlplat/reconcile.h"

static MemoryContext txn_caller_cxt = NULL;

void
mlplat_txn_begin(void)
{
	txn_caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("mlplat reconciler cannot write: the server is in recovery")));
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
}

void
mlplat_txn_commit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (txn_caller_cxt)
		MemoryContextSwitchTo(txn_caller_cxt);
}
