/*
 * worker.c — the reconciler main loop.
 *
 * Every replica of a kind runs this loop.  A replica that does not lead waits
 * in the lock manager's queue for the kind's session-level leader lock (see
 * leader_lock_tag: a tag no SQL function can produce); the one that gets it
 * bumps the kind's epoch in mlplat.leader_epochs and reconciles until it
 * exits.  Leadership needs no heartbeat: the lock dies with the session, and
 * the lock manager wakes the first waiter the moment it is released, so a
 * takeover costs a wake-up, not a polling interval.
 *
 * The loop never holds a transaction across a wait or an HTTP call.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
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
#include "mlplat/http.h"
#include "mlplat/kinds.h"
#include "mlplat/kube.h"
#include "mlplat/otlp_export.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/retention.h"
#include "mlplat/sanitizer.h"
#include "mlplat/secret_file.h"
#include "mlplat/shmem.h"
#include "mlplat/version.h"
#include "mlplat/worker.h"

/*
 * the only search_path worker SQL ever runs under (see worker_start): the path every
 * entry point pins, on which the internal helpers the worker calls rely, as they do
 * not pin it themselves
 */
#define MLPLAT_WORKER_SEARCH_PATH "pg_catalog, mlplat, pg_temp"

/* leader lock key space: (database, MLPLAT_LOCK_CLASS, kind) */
#define MLPLAT_LOCK_CLASS 0x6d6c706c /* "mlpl" */

static int my_kind;
static int my_replica;
static int64 my_epoch = 0;
/* the extension object the epoch was recorded in; re-record when it changes */
static Oid current_ext_oid = InvalidOid;
static Oid epoch_ext_oid = InvalidOid;
/* when this replica took the leader lock; 0 once its first pass has been logged */
static TimestampTz led_since = 0;
/* is the extension that carries the kind's SQL installed (MlplatKindDef.sql_extension)? */
static bool kind_sql_installed = true;

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

/*
 * The leader lock.  It must be a lock that no SQL session can take, or any
 * login could squat on it while the leader dies and stop every replica from
 * leading (an advisory lock was: pg_advisory_lock(key, kind)).
 *
 * SQL reaches the lock manager only through tags it builds itself: the
 * advisory functions make LOCKTAG_ADVISORY in its two forms (one int8 key,
 * field4 = 1; two int4 keys, field4 = 2), LOCK TABLE and DML make
 * LOCKTAG_RELATION/RELATION_EXTEND/TUPLE/PAGE, row locks and xid waits make
 * LOCKTAG_TRANSACTION/VIRTUALTRANSACTION, DDL makes LOCKTAG_OBJECT.  Nothing
 * in core makes LOCKTAG_USERLOCK: it is reserved for out-of-core code, and we
 * are that.  It lives in USER_LOCKMETHOD like the advisory locks, which
 * matters: a session lock of DEFAULT_LOCKMETHOD is released by every
 * transaction abort (ProcReleaseLocks), one of USER_LOCKMETHOD only by its
 * owner or when the session ends.  pg_locks shows it as locktype 'userlock'
 * (database, classid = MLPLAT_LOCK_CLASS, objid = kind, objsubid = 0).
 */
static void
leader_lock_tag(LOCKTAG *tag)
{
	tag->locktag_field1 = MyDatabaseId;
	tag->locktag_field2 = MLPLAT_LOCK_CLASS;
	tag->locktag_field3 = (uint32) my_kind;
	tag->locktag_field4 = 0;
	tag->locktag_type = LOCKTAG_USERLOCK;
	tag->locktag_lockmethodid = USER_LOCKMETHOD;
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
 * Do the kind's SQL types and the C tables that read and write them agree
 * (seam.h)?  If not, refuse to run: a pass would misread rows.  Said once in
 * the log when it starts (and when the reason changes), and in the health view.
 */
static bool
seams_agree(char *why, size_t whylen)
{
	static char *last_refusal = NULL;
	char *mismatch = mlplat_kind_seams_verify(my_kind);

	if (mismatch == NULL)
	{
		if (last_refusal)
		{
			ereport(LOG,
					(errmsg("mlplat %s reconciler %d: the seam types agree with the library again",
							mlplat_kind_names[my_kind], my_replica)));
			pfree(last_refusal);
			last_refusal = NULL;
		}
		return true;
	}
	snprintf(why, whylen, "refuses to run: %s", mismatch);
	if (last_refusal == NULL || strcmp(last_refusal, mismatch) != 0)
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("mlplat %s reconciler %d refuses to run: its SQL and C disagree",
						mlplat_kind_names[my_kind], my_replica),
				 errdetail("%s.", mismatch),
				 errhint("Install the library and the extension at the same version (ALTER EXTENSION mlplat UPDATE).")));
		if (last_refusal)
			pfree(last_refusal);
		last_refusal = MemoryContextStrdup(TopMemoryContext, mismatch);
	}
	return false;
}

/*
 * Is the extension installed here, at the library's version?  Checked every
 * loop so CREATE/DROP/ALTER EXTENSION take effect without a restart.
 */
static bool
extension_ready(char *why, size_t whylen)
{
	char *installed;
	bool ok;
	MemoryContext caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	installed = mlplat_installed_version();
	current_ext_oid = get_extension_oid("mlplat", true);
	ok = installed != NULL && strcmp(installed, MLPLAT_VERSION) == 0;
	kind_sql_installed = mlplat_kind_def(my_kind)->sql_extension == NULL ||
						 OidIsValid(get_extension_oid(mlplat_kind_def(my_kind)->sql_extension, true));
	if (!ok)
		snprintf(why, whylen, installed ? "extension is version %s, library %s: run ALTER EXTENSION mlplat UPDATE" : "extension mlplat is not installed in this database",
				 installed ? installed : "", MLPLAT_VERSION);
	else if (kind_sql_installed)
		ok = seams_agree(why, whylen);
	CommitTransactionCommand();
	/* a commit leaves us in TopMemoryContext: never let a pass allocate there */
	MemoryContextSwitchTo(caller);
	return ok;
}

static void record_epoch(void);

/*
 * The optional second fence: a Kubernetes Lease per kind, held by this
 * database cluster's leader.  The advisory lock picks one leader among our replicas; the
 * Lease keeps two database clusters (say, an old primary that still runs
 * after a failover) from both driving one Kubernetes cluster.
 */
/*
 * A holder "mlplat-<sysid>-tl<N>" with our system identifier and a lower
 * timeline is our own former primary: after a promotion it must stop at once,
 * not keep driving the cluster until its lease runs out.
 */
static bool
older_timeline_of_us(const char *holder, const char *identity)
{
	unsigned long long hsys,
		msys;
	unsigned htl,
		mtl;

	if (sscanf(holder, "mlplat-%llu-tl%u", &hsys, &htl) != 2 ||
		sscanf(identity, "mlplat-%llu-tl%u", &msys, &mtl) != 2)
		return false;
	return hsys == msys && htl < mtl;
}

static bool
lease_held(char *why, size_t whylen)
{
	static MlplatLeaseObservation obs;
	char name[64];
	char identity[128];
	char *detail = NULL;
	MlplatLeaseResult r;

	snprintf(name, sizeof(name), "mlplat-%s", mlplat_kind_names[my_kind]);
	for (char *c = name; *c; c++)
		if (*c == '_')
			*c = '-';
	/*
	 * One identity per database cluster and timeline: every replica of this
	 * cluster renews the same lease (a takeover here waits for nothing), while
	 * a promoted standby (same system identifier, next timeline) and its old
	 * primary are told apart.
	 */
	snprintf(identity, sizeof(identity), "mlplat-" UINT64_FORMAT "-tl%u",
			 GetSystemIdentifier(), (unsigned) GetWALInsertionTimeLine());
	r = mlplat_kube_lease_acquire_preempting(&obs, mlplat_lease_namespace, name, identity,
											 mlplat_lease_duration_s, older_timeline_of_us, &detail);
	if (r == MLPLAT_LEASE_HELD)
		return true;
	/* "auto" fences only when there is a cluster to drive */
	if (r == MLPLAT_LEASE_NO_CLUSTER && mlplat_lease_fence == MLPLAT_LEASE_FENCE_AUTO)
		return true;
	snprintf(why, whylen, "fenced: Lease %s/%s %s%s%s", mlplat_lease_namespace, name,
			 mlplat_lease_result_name(r), detail ? ": " : "", detail ? detail : "");
	return false;
}

/*
 * Wait for the leader lock, at most wait_ms.  On success record a new epoch;
 * the epoch fences every write this leader makes afterwards.
 *
 * The wait is the lock manager's own (LockAcquire with dontWait = false sleeps
 * in ProcSleep): the releasing session wakes the first waiter, so the next
 * leader is chosen by the lock's queue, not by whichever replica polls first.
 * ProcSleep answers SIGTERM (die() sets the latch; its CHECK_FOR_INTERRUPTS
 * raises FATAL) and postmaster death (WL_EXIT_ON_PM_DEATH), but ignores a
 * plain latch set; so the wait is bounded by lock_timeout = wait_ms, after
 * which the loop answers config reloads, recovery and the extension's state
 * and queues again.  A released lock with nobody queued for those few
 * microseconds is taken by the next LockAcquire at once: no takeover is lost.
 *
 * The wait runs inside a transaction with no snapshot and no xid (it pins no
 * xmin horizon and holds no tuple), because only a transaction abort takes a
 * waiter off the lock queue (LockErrorCleanup) when the wait ends in an
 * ERROR (the timeout) or FATAL (SIGTERM): the session lock itself is not
 * tied to it and outlives its commit.
 */
static bool
try_lead(long wait_ms)
{
	LOCKTAG tag;
	volatile LockAcquireResult res = LOCKACQUIRE_NOT_AVAIL;
	MemoryContext caller = CurrentMemoryContext;
	int saved_lock_timeout = LockTimeout;

	leader_lock_tag(&tag);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		if (wait_ms <= 0)
			res = LockAcquire(&tag, ExclusiveLock, true, true);
		else
		{
			LockTimeout = (int) Min(wait_ms, (long) INT_MAX);
			set_status(MLPLAT_ROLE_STANDBY, "waiting for the leader lock");
			pgstat_report_activity(STATE_RUNNING, "waiting for the leader lock");
			res = LockAcquire(&tag, ExclusiveLock, true, false);
		}
		LockTimeout = saved_lock_timeout;
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData *edata;

		mlplat_sanitizer_after_catch();
		LockTimeout = saved_lock_timeout;
		MemoryContextSwitchTo(caller);
		edata = CopyErrorData();
		/* our own lock timeout, or a cancel request: both just end this wait */
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
			edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		AbortCurrentTransaction(); /* takes us off the lock's wait queue */
		res = LOCKACQUIRE_NOT_AVAIL;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (res == LOCKACQUIRE_NOT_AVAIL)
		return false;
	/*
	 * The lock is ours; the extension may have been dropped while we waited.
	 * If so, the loop records the epoch once it is back (current_ext_oid
	 * differs from epoch_ext_oid).
	 */
	{
		char why[MLPLAT_STATUS_LEN];

		if (extension_ready(why, sizeof(why)))
			record_epoch();
	}
	return true;
}

/*
 * Record a new epoch for the lock we hold.  Also needed when the extension
 * was dropped and created again under a leader: its epoch table is new.
 */
static void
record_epoch(void)
{
	MemoryContext caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		Datum args[3];
		Oid types[3] = { TEXTOID, INT4OID, INT4OID };
		int rc;
		bool isnull;

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
	MemoryContextSwitchTo(caller);
	epoch_ext_oid = current_ext_oid;

	SpinLockAcquire(&mlplat_shared->mutex);
	mlplat_shared->kinds[my_kind].leader_pid = MyProcPid;
	mlplat_shared->kinds[my_kind].leader_latch = &MyProc->procLatch;
	SpinLockRelease(&mlplat_shared->mutex);

	ereport(LOG,
			(errmsg("mlplat %s reconciler %d leads with epoch " INT64_FORMAT,
					mlplat_kind_names[my_kind], my_replica, my_epoch)));
	led_since = GetCurrentTimestamp();
}

/*
 * Wait before connecting while the database is being dropped or is gone, and
 * back off (shared by all workers) after failed connection attempts, so a
 * missing database costs a log line a minute rather than one a second.
 */
static void
wait_until_database_may_exist(void)
{
	for (;;)
	{
		int failures;
		long delay_ms;

		CHECK_FOR_INTERRUPTS();
		SpinLockAcquire(&mlplat_shared->mutex);
		failures = mlplat_shared->connect_failures;
		SpinLockRelease(&mlplat_shared->mutex);

		if (mlplat_database_unavailable())
		{
			set_status(MLPLAT_ROLE_STARTING, "database is being dropped or was dropped; waiting for CREATE DATABASE");
			delay_ms = 1000;
		}
		else if (failures > 0)
		{
			set_status(MLPLAT_ROLE_STARTING, "could not connect to mlplat.database; backing off");
			delay_ms = Min(60000L, 1000L << Min(failures, 6));
			/* only this wait: the next attempt happens after it */
			SpinLockAcquire(&mlplat_shared->mutex);
			mlplat_shared->connect_failures = 0;
			SpinLockRelease(&mlplat_shared->mutex);
		}
		else
			return;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (failures > 0 && !mlplat_database_unavailable())
			return;
	}
}

static void
note_pass(TimestampTz start, TimestampTz end, bool failed)
{
	SpinLockAcquire(&mlplat_shared->mutex);
	my_state()->last_pass_start = start;
	my_state()->last_pass_end = end;
	my_state()->passes++;
	if (failed)
		my_state()->pass_errors++;
	SpinLockRelease(&mlplat_shared->mutex);
}

/* What one replica keeps from one turn of its loop to the next. */
typedef struct WorkerLoop
{
	bool leading;
	MemoryContext pass_context; /* reset every turn */
	char controller[128];		/* "host:port/pid/replica", for ledger and audit */
	TimestampTz last_resync;
	TimestampTz last_full_pass;
	TimestampTz kind_pass_due; /* when the kind's own pass is due (companions may run sooner) */
	int consecutive_failures;
	bool woken; /* the last wait ended on the latch: a commit woke us */
} WorkerLoop;

static bool run_pass(MlplatPassFn fn, MlplatPass *pass, MemoryContext pass_context);

static void
pass_init(MlplatPass *pass, const WorkerLoop *w)
{
	memset(pass, 0, sizeof(*pass));
	pass->kind = my_kind;
	pass->replica = my_replica;
	pass->epoch = my_epoch;
	pass->controller = w->controller;
}

/*
 * The kind's companion passes (the projects leader's: retention, one per
 * database) after the kind's pass, or alone when only
 * they are due: they must not make the kind's pass run, and LIST, once a
 * second.  Returns the wait before the loop should come back: timeout_ms, or
 * sooner if a companion asks.
 */
static long
run_companions(const MlplatPass *kind_pass, MemoryContext pass_context, long timeout_ms)
{
	const MlplatPassFn *fn = mlplat_kind_def(my_kind)->companions;
	MlplatPass cp = *kind_pass;

	cp.next_pass_ms = 0;
	for (; fn && *fn; fn++)
	{
		cp.status[0] = '\0';
		(void) run_pass(*fn, &cp, pass_context);
	}
	return (cp.next_pass_ms > 0 && cp.next_pass_ms < timeout_ms) ? cp.next_pass_ms : timeout_ms;
}

/*
 * Run one pass of this kind.  An ERROR inside a pass is reported, its
 * transaction aborted, and the loop continues: leadership is worth keeping
 * over one bad entity.  Returns false when the pass failed.
 */
static bool
run_pass(MlplatPassFn fn, MlplatPass *pass, MemoryContext pass_context)
{
	volatile bool ok = true;

	PG_TRY();
	{
		fn(pass);
	}
	PG_CATCH();
	{
		ErrorData *edata;

		mlplat_sanitizer_after_catch();
		MemoryContextSwitchTo(pass_context);
		edata = CopyErrorData();
		FlushErrorState();
		if (IsTransactionState())
			AbortCurrentTransaction();
		/* SPI and snapshots are cleaned up by the abort */
		ereport(LOG,
				(errmsg("mlplat %s reconciler pass failed: %s",
						mlplat_kind_names[my_kind], edata->message)));
		snprintf(pass->status, sizeof(pass->status), "pass failed: %s", edata->message);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * Start: signals, our slot in shared memory, the connection (after any wait
 * for the database), the pinned search_path, the pass context.
 */
static void
worker_start(WorkerLoop *w, Datum main_arg)
{
	int packed = DatumGetInt32(main_arg);

	memset(w, 0, sizeof(*w));
	my_kind = packed / MLPLAT_MAX_REPLICAS;
	my_replica = packed % MLPLAT_MAX_REPLICAS;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	SpinLockAcquire(&mlplat_shared->mutex);
	memset(my_state(), 0, sizeof(MlplatReplicaState));
	my_state()->pid = MyProcPid;
	my_state()->role = MLPLAT_ROLE_STARTING;
	my_state()->started_at = GetCurrentTimestamp();
	SpinLockRelease(&mlplat_shared->mutex);
	before_shmem_exit(worker_on_exit, (Datum) 0);

	wait_until_database_may_exist();
	/* counted as failed until InitPostgres returns: a FATAL there skips the reset */
	SpinLockAcquire(&mlplat_shared->mutex);
	mlplat_shared->connect_failures++;
	SpinLockRelease(&mlplat_shared->mutex);
	BackgroundWorkerInitializeConnection(mlplat_database, NULL, 0);
	SpinLockAcquire(&mlplat_shared->mutex);
	mlplat_shared->connect_failures = 0;
	SpinLockRelease(&mlplat_shared->mutex);

	/*
	 * The connection came up with whatever search_path the database and role
	 * settings give (ALTER DATABASE/ROLE ... SET search_path), and the worker
	 * runs as the bootstrap superuser: a schema placed ahead of pg_catalog
	 * there could shadow a type, operator or function our SQL names.  Pin the
	 * path before any SPI; as an override no later SET, reload or
	 * per-database setting replaces it.  Worker SQL qualifies what it names
	 * as well; the internal helpers it calls (mlplat._*) run on this path,
	 * which is the one the entry points pin (sql/install/14_api_core.sql).
	 */
	SetConfigOption("search_path", MLPLAT_WORKER_SEARCH_PATH, PGC_SUSET, PGC_S_OVERRIDE);

	pgstat_report_appname(MyBgworkerEntry->bgw_name);
	snprintf(w->controller, sizeof(w->controller), "%s:%d/%d/%d",
			 GetConfigOption("listen_addresses", false, false), PostPortNumber,
			 MyProcPid, my_replica);
	w->pass_context = AllocSetContextCreate(TopMemoryContext, "mlplat pass", ALLOCSET_DEFAULT_SIZES);
	/* what mlplat.pass_memory_limit measures: the pass, not the worker's caches */
	mlplat_pass_memory_context = w->pass_context;
}

/*
 * Signals first: a pending SIGTERM ends us, a SIGHUP rereads the configuration.
 *
 * A standby's wait for the leader lock ends every leader_retry_interval in a
 * lock timeout, whose ERROR ProcessInterrupts raises after clearing
 * InterruptPending and before it looks at a ProcSignalBarrier.  A barrier
 * that arrives together with a timeout is left pending with nothing to say
 * so, and the next interrupt is again a lock timeout that errors first: the
 * standby would never absorb it, and DROP DATABASE (which waits for every
 * backend to absorb one) would hang.  So the flag is re-armed here, where no
 * timeout is running.
 */
static void
absorb_signals(void)
{
	if (ProcSignalBarrierPending)
		InterruptPending = true;
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* A leader that runs no pass: its kind gives back what it keeps open between passes. */
static void
kind_idle(void)
{
	const MlplatKindDef *def = mlplat_kind_def(my_kind);

	if (def->idle)
		def->idle();
}

/*
 * May this replica run its kind's pass now?  Not in recovery, without the
 * extension at our version (or with seam types that disagree), without the
 * leader lock, with workers disabled or no pass for the kind: the status says
 * why and *timeout_ms how long to wait.  Waiting for the lock is done here.
 */
static bool
may_lead(WorkerLoop *w, long *timeout_ms)
{
	char why[MLPLAT_STATUS_LEN];

	if (RecoveryInProgress())
	{
		set_status(MLPLAT_ROLE_STANDBY, "server is in recovery");
		*timeout_ms = mlplat_leader_retry_interval_ms;
	}
	else if (!extension_ready(why, sizeof(why)))
	{
		set_status(w->leading ? MLPLAT_ROLE_IDLE : MLPLAT_ROLE_STANDBY, why);
		*timeout_ms = 1000;
	}
	else if (w->leading && current_ext_oid != epoch_ext_oid)
	{
		/* the extension was re-created under us: a new epoch table */
		record_epoch();
		*timeout_ms = 0;
	}
	else if (!w->leading)
	{
		/*
		 * The wait itself was the pause: go around at once, leader or not.
		 * A reload (say, workers_enabled = off) or an extension change that
		 * came while we waited in the lock queue is applied at the top of
		 * the loop, before a first pass as leader.
		 */
		w->leading = try_lead(mlplat_leader_retry_interval_ms);
		*timeout_ms = 0;
	}
	else if (!mlplat_workers_enabled)
	{
		kind_idle();
		set_status(MLPLAT_ROLE_IDLE, "mlplat.workers_enabled is off");
		*timeout_ms = mlplat_resync_interval_ms;
	}
	else if (!kind_sql_installed)
	{
		snprintf(why, sizeof(why), "extension %s (this kind's SQL) is not installed",
				 mlplat_kind_def(my_kind)->sql_extension);
		set_status(MLPLAT_ROLE_IDLE, why);
		*timeout_ms = 1000;
	}
	else if (mlplat_kind_def(my_kind)->pass == NULL)
	{
		set_status(MLPLAT_ROLE_IDLE, "no reconciler implements this kind yet");
		*timeout_ms = mlplat_resync_interval_ms;
	}
	else
		return true;
	return false;
}

/* Does another database cluster drive this Kubernetes cluster?  Then hands off. */
static bool
fenced(long *timeout_ms)
{
	char why[MLPLAT_STATUS_LEN];

	if (mlplat_lease_fence == MLPLAT_LEASE_FENCE_OFF || lease_held(why, sizeof(why)))
		return false;
	kind_idle();
	set_status(MLPLAT_ROLE_IDLE, why);
	*timeout_ms = Max(100L, mlplat_lease_duration_s * 1000L / 3);
	return true;
}

/* Health: the pass's counters, HTTP figures and status line for mlplat.reconciler_health. */
static void
report_health(MlplatPass *pass, TimestampTz start, bool ok)
{
	MlplatHttpStats hs;
	const char *refusal = mlplat_secret_file_refusal();

	note_pass(start, GetCurrentTimestamp(), !ok);
	mlplat_http_stats_get(&hs);
	SpinLockAcquire(&mlplat_shared->mutex);
	my_state()->http_requests = hs.requests;
	my_state()->http_errors = hs.errors;
	my_state()->http_latency_ms_total = hs.latency_ms_total;
	SpinLockRelease(&mlplat_shared->mutex);
	/*
	 * A refused credential file comes first in the status, whatever the
	 * pass reported (the Kubernetes and registry passes already name it).
	 */
	if (refusal != NULL && strstr(pass->status, pnstrdup(refusal, 24)) == NULL)
	{
		char was[sizeof(pass->status)];

		strlcpy(was, pass->status, sizeof(was));
		snprintf(pass->status, sizeof(pass->status), "credential refused: %s%s%s",
				 refusal, was[0] ? "; " : "", was);
	}
	set_status(MLPLAT_ROLE_LEADER, pass->status[0] ? pass->status : "leading");
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);
}

/* How long to wait after a pass: back off after failures, else until the next resync or follow-up. */
static long
next_wait(WorkerLoop *w, const MlplatPass *pass, bool ok)
{
	long timeout_ms;

	if (!ok)
	{
		/* back off on repeated failures so a persistent error cannot spin */
		w->consecutive_failures = Min(w->consecutive_failures + 1, 12);
		return Min((long) mlplat_backoff_max_ms, 100L << w->consecutive_failures);
	}
	w->consecutive_failures = 0;
	timeout_ms = Max(0L, mlplat_resync_interval_ms -
							 (long) TimestampDifferenceMilliseconds(w->last_resync, GetCurrentTimestamp()));
	/* a reconciler waiting on the outside world asks to be back sooner */
	if (pass->next_pass_ms > 0 && pass->next_pass_ms < timeout_ms)
		timeout_ms = pass->next_pass_ms;
	/* the claim was bounded by mlplat.pass_row_limit and came back full: the next chunk now */
	if (pass->claim_full)
		timeout_ms = Min(timeout_ms, 1L);
	/* a held Lease must be renewed well within its duration */
	if (mlplat_lease_fence != MLPLAT_LEASE_FENCE_OFF)
		timeout_ms = Min(timeout_ms, Max(100L, mlplat_lease_duration_s * 1000L / 3));
	return timeout_ms;
}

/*
 * One pass of the kind as leader: claim, act and write back (the kind's pass
 * function), then health, then the companions.  Returns the wait.
 */
static long
reconcile(WorkerLoop *w)
{
	MlplatPass pass;
	TimestampTz start = GetCurrentTimestamp();
	bool ok;
	long timeout_ms;

	pass_init(&pass, w);
	pass.resync = TimestampDifferenceExceeds(w->last_resync, start, mlplat_resync_interval_ms);
	/* a commit woke us; still observe everything at least once a second */
	pass.woken = w->woken && !pass.resync && !TimestampDifferenceExceeds(w->last_full_pass, start, 1000);
	if (!pass.woken)
		w->last_full_pass = start;
	if (pass.resync)
		w->last_resync = start;

	/* the end of a takeover, as operators and bench/runtime time it */
	if (led_since != 0)
	{
		ereport(LOG,
				(errmsg("mlplat %s reconciler %d: first pass as leader (epoch " INT64_FORMAT ") %ld ms after taking the lock",
						mlplat_kind_names[my_kind], my_replica, my_epoch,
						(long) TimestampDifferenceMilliseconds(led_since, start))));
		led_since = 0;
	}
	pgstat_report_activity(STATE_RUNNING, "reconcile pass");
	SpinLockAcquire(&mlplat_shared->mutex);
	strlcpy(my_state()->status, "reconciling", MLPLAT_STATUS_LEN);
	my_state()->role = MLPLAT_ROLE_LEADER;
	my_state()->epoch = my_epoch;
	my_state()->last_pass_start = start;
	SpinLockRelease(&mlplat_shared->mutex);

	ok = run_pass(mlplat_kind_pass, &pass, w->pass_context);
	report_health(&pass, start, ok);
	timeout_ms = next_wait(w, &pass, ok);
	w->kind_pass_due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	return run_companions(&pass, w->pass_context, timeout_ms);
}

/* Only companions are due: a wake for them alone, before the kind's pass is. */
static bool
only_companions_due(const WorkerLoop *w)
{
	return mlplat_kind_def(my_kind)->companions != NULL && !w->woken &&
		   GetCurrentTimestamp() < w->kind_pass_due;
}

/*
 * Wait for a commit's wake, the timeout or postmaster death; true when woken.
 * A watch the kind's pass keeps open (watch_cache.h) is driven meanwhile; when
 * it brings an event (or ends) the wait ends early and the kind's pass is due.
 */
static bool
wait_for_work(WorkerLoop *w, long timeout_ms)
{
	bool woken = false;

	MemoryContextSwitchTo(TopMemoryContext);
	if (timeout_ms > 0)
	{
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

		woken = mlplat_http_wait(timeout_ms);
		if (!woken && GetCurrentTimestamp() < until)
			w->kind_pass_due = GetCurrentTimestamp();
	}
	ResetLatch(MyLatch);
	return woken;
}

/*
 * The loop every replica runs: wait for work, and as leader reconcile
 * (claim, act, write back), then report health.
 */
void
mlplat_worker_main(Datum main_arg)
{
	WorkerLoop w;

	worker_start(&w, main_arg);
	for (;;)
	{
		long timeout_ms;

		absorb_signals();
		MemoryContextReset(w.pass_context);
		MemoryContextSwitchTo(w.pass_context);
		if (!may_lead(&w, &timeout_ms))
			; /* not leading, or not now: the status says why */
		else if (only_companions_due(&w))
		{
			MlplatPass pass;

			pass_init(&pass, &w);
			timeout_ms = run_companions(&pass, w.pass_context,
										Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), w.kind_pass_due)));
		}
		else if (!fenced(&timeout_ms))
			timeout_ms = reconcile(&w);
		w.woken = wait_for_work(&w, timeout_ms);
	}
}
