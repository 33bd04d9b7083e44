/*
 * mlplat.c — library entry point.
 *
 * Settings are always defined so SET/SHOW work in any session.  Shared memory
 * and background workers exist only when the library is preloaded: loaded on
 * demand by CREATE EXTENSION or a function call, mlplat still serves its SQL
 * API, but nothing reconciles, and we say so once.  Nothing is registered
 * during pg_upgrade's binary-upgrade mode, when no worker may touch the data.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "mlplat/guc.h"
#include "mlplat/sanitizer.h"
#include "mlplat/shmem.h"
#include "mlplat/worker.h"

PG_MODULE_MAGIC;

void _PG_init(void);

void
_PG_init(void)
{
	mlplat_define_gucs();
	mlplat_sanitizer_init();

	if (!process_shared_preload_libraries_in_progress)
	{
		ereport(WARNING,
				(errmsg("mlplat is not in shared_preload_libraries: its reconcilers are not running"),
				 errdetail("The SQL API records intent, but nothing will converge the cluster to it."),
				 errhint("Add mlplat to shared_preload_libraries and restart the server.")));
		return;
	}
	if (IsBinaryUpgrade)
		return;

	mlplat_shmem_init_hooks();
	mlplat_install_utility_hook();
	mlplat_register_workers();
}
