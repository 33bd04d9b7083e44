/*
 * retention.c — run mlplat._retention_tick from the projects leader.
 * See include/mlplat/retention.h.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "mlplat/guc.h"
#include "mlplat/kinds.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/retention.h"

/* The purge itself is hourly by default: asking more often than a minute buys nothing. */
#define RETENTION_CHECK_MAX_MS 60000

static TimestampTz last_check = 0;

void
mlplat_retention_pass(MlplatPass *pass)
{
	TimestampTz now = GetCurrentTimestamp();
	Oid types[3] = { TEXTOID, INT8OID, INT8OID };
	Datum args[3];
	char *outcome = NULL;

	/* from the last check, so a reloaded interval counts at once */
	if (last_check != 0 &&
		!TimestampDifferenceExceeds(last_check, now, Min(mlplat_retention_interval_ms, RETENTION_CHECK_MAX_MS)))
		return;
	/* before the work: a failing purge is retried at the next check, not in a loop */
	last_check = now;

	args[0] = CStringGetTextDatum(mlplat_kind_names[pass->kind]);
	args[1] = Int64GetDatum(pass->epoch);
	args[2] = Int64GetDatum((int64) mlplat_retention_interval_ms);
	mlplat_txn_begin();
	outcome = mlplat_sql_text("SELECT mlplat._retention_tick($1, $2, $3)", 3, types, args, NULL);
	if (outcome && strcmp(outcome, "ran") == 0)
		ereport(LOG,
				(errmsg("mlplat %s leader ran the retention job (pg_cron does not run it here)",
						mlplat_kind_names[pass->kind])));
	mlplat_txn_commit();
}
