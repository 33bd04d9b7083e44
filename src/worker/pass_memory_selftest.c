/*
 * pass_memory_selftest.c — what mlplat.pass_memory_limit measures, shown in a
 * worker that holds memory of its own outside any pass.
 *
 * mlplat._pass_memory_selftest(ballast_mb) starts a dynamic background worker
 * that first allocates ballast_mb MB in its TopMemoryContext (as a long-lived
 * reconciler's caches grow), then runs what a pass runs — a pass context of
 * its own and mlplat_kube_list_all of InferenceServices against the configured
 * cluster — and reports with NOTIFY mlplat_pass_memory_selftest:
 * "listed <n> items" or "stopped: <why>", with the ballast and the pass's
 * memory.  The limit bounds the pass (its context); the ballast must not
 * count.  Superuser-only (a test hook).
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/observe.h"
#include "mlplat/pass_work.h"

PG_FUNCTION_INFO_V1(mlplat_pass_memory_selftest);
PGDLLEXPORT void mlplat_pass_memory_selftest_main(Datum arg);

Datum
mlplat_pass_memory_selftest(PG_FUNCTION_ARGS)
{
	int32 ballast_mb = PG_GETARG_INT32(0);
	BackgroundWorker w;
	BackgroundWorkerHandle *h;
	pid_t pid;
	Oid userid = GetUserId();

	if (ballast_mb < 0 || ballast_mb > 4096)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("ballast_mb must be between 0 and 4096")));
	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "mlplat");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "mlplat_pass_memory_selftest_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "mlplat pass memory self-test");
	snprintf(w.bgw_type, BGW_MAXLEN, "mlplat pass memory self-test");
	w.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	memcpy(w.bgw_extra, &userid, sizeof(Oid));
	memcpy(w.bgw_extra + sizeof(Oid), &ballast_mb, sizeof(int32));
	w.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&w, &h))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						errmsg("could not start the pass memory self-test worker"),
						errhint("Raise max_worker_processes.")));
	if (WaitForBackgroundWorkerStartup(h, &pid) != BGWH_STARTED)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("the pass memory self-test worker did not start")));
	(void) WaitForBackgroundWorkerShutdown(h);
	PG_RETURN_VOID();
}

void
mlplat_pass_memory_selftest_main(Datum arg)
{
	static const MlplatKubeResource isvcs = { "serving.kserve.io", "v1beta1", "inferenceservices", true };
	Oid userid;
	int32 ballast_mb;
	char *ballast;
	MemoryContext cxt;
	MlJsonArena *arena;
	const char *why = NULL;
	char *stopped;
	List *items = NIL;
	int lists = 0;
	char *payload;
	Size top;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&userid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	memcpy(&ballast_mb, MyBgworkerEntry->bgw_extra + sizeof(Oid), sizeof(int32));
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), userid, 0);

	/* the worker's own memory, outside every pass; touched, so it is really there */
	ballast = MemoryContextAllocHuge(TopMemoryContext, (Size) ballast_mb * 1024 * 1024 + 1);
	memset(ballast, 'b', (Size) ballast_mb * 1024 * 1024 + 1);

	/* exactly what a reconciler pass does between its transactions */
	cxt = AllocSetContextCreate(TopMemoryContext, "selftest pass", ALLOCSET_DEFAULT_SIZES);
	mlplat_pass_memory_context = cxt;
	MemoryContextSwitchTo(cxt);
	if (mlplat_kube_config_refresh(&why) != MLPLAT_KUBE_READY)
		elog(ERROR, "pass memory self-test: %s", why ? why : "no cluster configured");
	arena = mlplat_json_arena_in(cxt);
	stopped = mlplat_kube_list_all(arena, &isvcs, NULL, &items, &lists);
	top = MemoryContextMemAllocated(TopMemoryContext, true);
	payload = stopped
				  ? psprintf("stopped: %s; ballast %d MB, worker %zu kB", stopped, ballast_mb, top / 1024)
				  : psprintf("listed %d items in %d pages; ballast %d MB, worker %zu kB, pass %zu kB",
							 list_length(items), lists, ballast_mb, top / 1024,
							 MemoryContextMemAllocated(cxt, true) / 1024);

	StartTransactionCommand();
	Async_Notify("mlplat_pass_memory_selftest", payload);
	CommitTransactionCommand();
	proc_exit(0);
}
