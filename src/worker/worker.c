/*
 * worker.c — the reconciler main loop.
 *
 * Every replica of a kind runs this loop.  A replica that does not lead tries
 * the kind's session advisory lock every mlplat.leader_retry_interval without
 * waiting; the one that gets it bumps the kind's epoch in mlplat.leader_epochs
 * and reconciles until it exits.  Leadership needs no heartbeat: the lock
 * dies with the session, so a standby takes over within one retry interval.
 *
 * The loop never holds a transaction across a wait or (later) an HTTP call.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "mlplat/guc.h"
#include "mlplat/kinds.h"
#include "mlplat/shmem.h"
#include "mlplat/version.h"
#include "mlplat/worker.h"

/* advisory lock key space: (MLPLAT_LOCK_CLASS, kind) */
#define MLPLAT_LOCK_CLASS 0x6d6c706c	/* "mlpl" */

static int	my_kind;
static int	my_replica;
static int64 my_epoch = 0;

static MlplatReplicaState *
my_state(void)
{
	return &mlplat_shared->kinds[my_kind].replicas[my_replica];
}

static void
set_status(MlplatReplicaRole role, const char *status)
{
	SpinLockAcquire(&mlplat_shared->mutex);
	my_state()->role = role;
	my_state()->epoch = my_epoch;
	strlcpy(my_state()->status, status, MLPLAT_STATUS_LEN);
	SpinLockRelease(&mlplat_shared->mutex);
}

static void
leader_lock_tag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, MLPLAT_LOCK_CLASS, (uint32) my_kind, 2);
}

/* Drop our entry as leader when the process goes away, however it goes. */
static void
worker_on_exit(int code, Datum arg)
{
	SpinLockAcquire(&mlplat_shared->mutex);
	if (mlplat_shared->kinds[my_kind].leader_pid == MyProcPid)
	{
		mlplat_shared->kinds[my_kind].leader_pid = 0;
		mlplat_shared->kinds[my_kind].leader_latch = NULL;
	}
	my_state()->pid = 0;
	my_state()->role = MLPLAT_ROLE_STOPPED;
	SpinLockRelease(&mlplat_shared->mutex);
}

/*
 * Is the extension installed here, at the library's version?  Checked every
 * loop so CREATE/DROP/ALTER EXTENSION take effect without a restart.
 */
static bool
extension_ready(char *why, size_t whylen)
{
	char	   *installed;
	bool		ok;

	StartTransactionCommand();
	installed = mlplat_installed_version();
	ok = installed != NULL && strcmp(installed, MLPLAT_VERSION) == 0;
	if (!ok)
		snprintf(why, whylen, installed ? "extension is version %s, library %s: run ALTER EXTENSION mlplat UPDATE"
				 : "extension mlplat is not installed in this database",
				 installed ? installed : "", MLPLAT_VERSION);
	CommitTransactionCommand();
	return ok;
}

/*
 * Try the leader lock without waiting.  On success record a new epoch; the
 * epoch fences every write this leader makes afterwards.
 */
static bool
try_lead(void)
{
	LOCKTAG		tag;
	LockAcquireResult res;

	leader_lock_tag(&tag);
	StartTransactionCommand();
	res = LockAcquire(&tag, ExclusiveLock, true, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		CommitTransactionCommand();
		return false;
	}

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		Datum		args[3];
		Oid			types[3] = {TEXTOID, INT4OID, INT4OID};
		int			rc;
		bool		isnull;

		args[0] = CStringGetTextDatum(mlplat_kind_names[my_kind]);
		args[1] = Int32GetDatum(MyProcPid);
		args[2] = Int32GetDatum(my_replica);
		rc = SPI_execute_with_args("SELECT mlplat._take_leadership($1, $2, $3)",
								   3, types, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "mlplat: could not record leadership epoch");
		my_epoch = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();

	SpinLockAcquire(&mlplat_shared->mutex);
	mlplat_shared->kinds[my_kind].leader_pid = MyProcPid;
	mlplat_shared->kinds[my_kind].leader_latch = &MyProc->procLatch;
	SpinLockRelease(&mlplat_shared->mutex);

	ereport(LOG,
			(errmsg("mlplat %s reconciler %d leads with epoch " INT64_FORMAT,
					mlplat_kind_names[my_kind], my_replica, my_epoch)));
	return true;
}

void
mlplat_worker_main(Datum main_arg)
{
	int			packed = DatumGetInt32(main_arg);
	bool		leading = false;
	MemoryContext pass_context;
	char		why[MLPLAT_STATUS_LEN];

	my_kind = packed / MLPLAT_MAX_REPLICAS;
	my_replica = packed % MLPLAT_MAX_REPLICAS;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	SpinLockAcquire(&mlplat_shared->mutex);
	my_state()->pid = MyProcPid;
	my_state()->role = MLPLAT_ROLE_STARTING;
	my_state()->started_at = GetCurrentTimestamp();
	SpinLockRelease(&mlplat_shared->mutex);
	before_shmem_exit(worker_on_exit, (Datum) 0);

	BackgroundWorkerInitializeConnection(mlplat_database, NULL, 0);
	pgstat_report_appname(MyBgworkerEntry->bgw_name);

	pass_context = AllocSetContextCreate(TopMemoryContext, "mlplat pass",
										 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		timeout_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		MemoryContextReset(pass_context);
		MemoryContextSwitchTo(pass_context);

		if (RecoveryInProgress())
		{
			/* promoted replicas come here only after recovery; be safe anyway */
			set_status(MLPLAT_ROLE_STANDBY, "server is in recovery");
			timeout_ms = mlplat_leader_retry_interval_ms;
		}
		else if (!extension_ready(why, sizeof(why)))
		{
			set_status(leading ? MLPLAT_ROLE_IDLE : MLPLAT_ROLE_STANDBY, why);
			timeout_ms = 1000;
		}
		else if (!leading && !(leading = try_lead()))
		{
			set_status(MLPLAT_ROLE_STANDBY, "waiting for the leader lock");
			timeout_ms = mlplat_leader_retry_interval_ms;
		}
		else
		{
			pgstat_report_activity(STATE_RUNNING, "reconcile pass");
			set_status(MLPLAT_ROLE_LEADER, "leading");
			/* the kind's pass runs here (src/reconcile/) */
			pgstat_report_activity(STATE_IDLE, NULL);
			pgstat_report_stat(false);
			timeout_ms = mlplat_resync_interval_ms;
		}

		MemoryContextSwitchTo(TopMemoryContext);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
