/*
 * http_selftest.c — prove the client in the setting it is built for: a
 * background worker with NO transaction open (the run refuses otherwise),
 * parsing a Kubernetes answer into jsonb outside any transaction.
 *
 * mlplat._http_worker_selftest(base_url) starts a dynamic background worker
 * that GETs configmap team-a/cm-selftest from base_url, reads data.x from the
 * jsonb, and only then opens a transaction to NOTIFY mlplat_http_selftest with
 * "x=<value> outcome=<outcome> in_xact_during_http=<bool>".  Superuser-only.
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

#include "mlplat/http.h"
#include "mlplat/kube.h"
#include "kube_internal.h"

PG_FUNCTION_INFO_V1(mlplat_http_worker_selftest);
PGDLLEXPORT void mlplat_http_selftest_main(Datum arg);

Datum
mlplat_http_worker_selftest(PG_FUNCTION_ARGS)
{
	char *url = text_to_cstring(PG_GETARG_TEXT_PP(0));
	BackgroundWorker w;
	BackgroundWorkerHandle *h;
	pid_t pid;
	Oid userid = GetUserId();

	if (strlen(url) >= BGW_EXTRALEN - sizeof(Oid))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("URL too long for the self-test worker")));
	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "mlplat");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "mlplat_http_selftest_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "mlplat http self-test");
	snprintf(w.bgw_type, BGW_MAXLEN, "mlplat http self-test");
	w.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	memcpy(w.bgw_extra, &userid, sizeof(Oid));
	strlcpy(w.bgw_extra + sizeof(Oid), url, BGW_EXTRALEN - sizeof(Oid));
	w.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&w, &h))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						errmsg("could not start the HTTP self-test worker"),
						errhint("Raise max_worker_processes.")));
	if (WaitForBackgroundWorkerStartup(h, &pid) != BGWH_STARTED)
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES), errmsg("the HTTP self-test worker did not start")));
	(void) WaitForBackgroundWorkerShutdown(h);
	PG_RETURN_VOID();
}

void
mlplat_http_selftest_main(Datum arg)
{
	static const MlplatKubeResource configmaps = { "", "v1", "configmaps", true };
	Oid userid;
	char url[BGW_EXTRALEN];
	MemoryContext cxt;
	MlplatHttpBatch *b;
	MlplatHttpRequest *req;
	MlplatKubeResult res;
	const char *why;
	const char *x;
	bool in_xact;
	char *payload;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&userid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	strlcpy(url, MyBgworkerEntry->bgw_extra + sizeof(Oid), sizeof(url));
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), userid, 0);

	/* exactly what a reconciler pass does between its transactions */
	cxt = AllocSetContextCreate(TopMemoryContext, "selftest pass", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	in_xact = IsTransactionState();
	mlplat_kube_config_override(url, NULL, NULL);
	if (mlplat_kube_config_refresh(&why) != MLPLAT_KUBE_READY)
		elog(ERROR, "self-test: %s", why);
	b = mlplat_http_batch_create(cxt);
	req = mlplat_kube_get(b, &configmaps, "team-a", "cm-selftest");
	mlplat_http_batch_run(b);
	mlplat_kube_parse_response(req, &res);
	x = mlplat_json_text(res.body, "data", "x", NULL);
	payload = psprintf("x=%s outcome=%s in_xact_during_http=%s",
					   x ? x : "(none)", mlplat_kube_outcome_name(res.outcome),
					   in_xact ? "true" : "false");
	mlplat_http_batch_free(b);

	StartTransactionCommand();
	Async_Notify("mlplat_http_selftest", payload);
	CommitTransactionCommand();
	proc_exit(0);
}
