/*
 * launch.c — static registration of the reconciler workers.
 *
 * mlplat.replicas workers per kind, started once recovery has finished (the
 * workers write, so they only ever run on a primary), restarted by the
 * postmaster after a crash.  main_arg packs (kind, replica).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"

#include "mlplat/guc.h"
#include "mlplat/kinds.h"
#include "mlplat/shmem.h"
#include "mlplat/worker.h"

/* Seconds before the postmaster restarts a worker that exited with an error. */
#define MLPLAT_WORKER_RESTART_S 1

void
mlplat_register_workers(void)
{
	for (int kind = 0; kind < mlplat_num_kinds; kind++)
	{
		for (int replica = 0; replica < mlplat_replicas; replica++)
		{
			BackgroundWorker worker;

			memset(&worker, 0, sizeof(worker));
			worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
			worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
			worker.bgw_restart_time = MLPLAT_WORKER_RESTART_S;
			snprintf(worker.bgw_library_name, BGW_MAXLEN, "mlplat");
			snprintf(worker.bgw_function_name, BGW_MAXLEN, "mlplat_worker_main");
			snprintf(worker.bgw_name, BGW_MAXLEN, "mlplat %s reconciler %d",
					 mlplat_kind_names[kind], replica);
			snprintf(worker.bgw_type, BGW_MAXLEN, "mlplat reconciler");
			worker.bgw_main_arg = Int32GetDatum(kind * MLPLAT_MAX_REPLICAS + replica);
			RegisterBackgroundWorker(&worker);
		}
	}
}
