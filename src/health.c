/*
 * health.c — what the workers publish in shared memory, as SQL rows:
 * mlplat._replica_states() (one row per worker replica; the
 * mlplat.reconciler_health view joins it with the tables) and
 * mlplat._span_export_state() (the span exporter; mlplat.span_export_status).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "mlplat/guc.h"
#include "mlplat/shmem.h"

static const char *const role_names[] = {
	"stopped", "starting", "standby", "leader", "idle"
};

PG_FUNCTION_INFO_V1(mlplat_replica_states);

Datum
mlplat_replica_states(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MlplatShared snapshot;

	InitMaterializedSRF(fcinfo, 0);
	if (mlplat_shared == NULL)
		PG_RETURN_VOID(); /* not preloaded: no workers to describe */

	/* copy under the lock, format outside it */
	SpinLockAcquire(&mlplat_shared->mutex);
	memcpy(&snapshot, mlplat_shared, sizeof(snapshot));
	SpinLockRelease(&mlplat_shared->mutex);

	for (int k = 0; k < mlplat_num_kinds; k++)
	{
		for (int r = 0; r < mlplat_replicas && r < MLPLAT_MAX_REPLICAS; r++)
		{
			MlplatReplicaState *st = &snapshot.kinds[k].replicas[r];
			Datum values[14];
			bool nulls[14];

			memset(nulls, 0, sizeof(nulls));
			values[0] = CStringGetTextDatum(mlplat_kind_names[k]);
			values[1] = Int32GetDatum(r);
			values[2] = Int32GetDatum(st->pid);
			nulls[2] = st->pid == 0;
			values[3] = CStringGetTextDatum(role_names[st->role]);
			values[4] = Int64GetDatum(st->epoch);
			nulls[4] = st->epoch == 0;
			values[5] = TimestampTzGetDatum(st->started_at);
			nulls[5] = st->started_at == 0;
			values[6] = TimestampTzGetDatum(st->last_pass_start);
			nulls[6] = st->last_pass_start == 0;
			values[7] = TimestampTzGetDatum(st->last_pass_end);
			nulls[7] = st->last_pass_end == 0;
			values[8] = Int64GetDatum(st->passes);
			values[9] = Int64GetDatum(st->pass_errors);
			values[10] = Int64GetDatum(st->http_requests);
			values[11] = Int64GetDatum(st->http_errors);
			values[12] = CStringGetTextDatum(st->status);
			values[13] = Float8GetDatum(st->http_latency_ms_total);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(mlplat_span_export_state);

/* One row, or none without shared memory (library not preloaded). */
Datum
mlplat_span_export_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MlplatExportState x;
	Datum values[8];
	bool nulls[8];

	InitMaterializedSRF(fcinfo, 0);
	if (mlplat_shared == NULL)
		PG_RETURN_VOID();
	SpinLockAcquire(&mlplat_shared->mutex);
	x = mlplat_shared->export;
	SpinLockRelease(&mlplat_shared->mutex);

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int64GetDatum(x.spans_sent);
	values[1] = Int64GetDatum(x.batches_sent);
	values[2] = Int64GetDatum(x.batches_failed);
	values[3] = Int32GetDatum(x.consecutive_failures);
	values[4] = TimestampTzGetDatum(x.last_success);
	nulls[4] = x.last_success == 0;
	values[5] = TimestampTzGetDatum(x.last_failure);
	nulls[5] = x.last_failure == 0;
	values[6] = TimestampTzGetDatum(x.next_attempt);
	nulls[6] = x.next_attempt == 0 || x.consecutive_failures == 0;
	values[7] = CStringGetTextDatum(x.last_error);
	nulls[7] = x.last_error[0] == '\0';
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(mlplat_span_export_drops);

/*
 * What the collector refused for good since this server started: batches
 * dropped on a non-retryable answer, and spans in them or rejected by a
 * partial success.  One row, or none without shared memory.
 */
Datum
mlplat_span_export_drops(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum values[2];
	bool nulls[2] = { false, false };

	InitMaterializedSRF(fcinfo, 0);
	if (mlplat_shared == NULL)
		PG_RETURN_VOID();
	SpinLockAcquire(&mlplat_shared->mutex);
	values[0] = Int64GetDatum(mlplat_shared->export.batches_dropped);
	values[1] = Int64GetDatum(mlplat_shared->export.spans_dropped);
	SpinLockRelease(&mlplat_shared->mutex);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}
