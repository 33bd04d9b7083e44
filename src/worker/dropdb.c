/*
 * dropdb.c — keep the workers from blocking DROP DATABASE.
 *
 * Reconcilers stay connected to mlplat.database, and PostgreSQL refuses to
 * drop a database that has connections (it only terminates autovacuum).  A
 * ProcessUtility hook, present in every backend because the library is
 * preloaded, sees DROP DATABASE of our database first: it raises a flag that
 * keeps restarting workers from connecting, terminates the connected ones,
 * waits briefly for them to go, and then lets the drop proceed.  A CREATE
 * DATABASE of the same name lowers the "dropped" flag again, so the workers
 * come back without a server restart.
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

#include "mlplat/guc.h"
#include "mlplat/shmem.h"
#include "mlplat/worker.h"

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* Wait at most this long for the workers to disconnect before dropping. */
#define MLPLAT_DROPDB_WAIT_MS 5000

static int
connected_workers(void)
{
	int n = 0;

	SpinLockAcquire(&mlplat_shared->mutex);
	for (int k = 0; k < mlplat_num_kinds; k++)
		for (int r = 0; r < MLPLAT_MAX_REPLICAS; r++)
			if (mlplat_shared->kinds[k].replicas[r].pid != 0)
				n++;
	SpinLockRelease(&mlplat_shared->mutex);
	return n;
}

static void
terminate_workers(void)
{
	int pids[MLPLAT_MAX_KINDS * MLPLAT_MAX_REPLICAS];
	int n = 0;

	SpinLockAcquire(&mlplat_shared->mutex);
	for (int k = 0; k < mlplat_num_kinds; k++)
		for (int r = 0; r < MLPLAT_MAX_REPLICAS; r++)
			if (mlplat_shared->kinds[k].replicas[r].pid != 0)
				pids[n++] = mlplat_shared->kinds[k].replicas[r].pid;
	SpinLockRelease(&mlplat_shared->mutex);

	for (int i = 0; i < n; i++)
		(void) kill(pids[i], SIGTERM);
}

static void
set_drop_flags(bool in_progress, bool dropped)
{
	SpinLockAcquire(&mlplat_shared->mutex);
	mlplat_shared->db_drop_in_progress = in_progress;
	mlplat_shared->db_dropped = dropped;
	SpinLockRelease(&mlplat_shared->mutex);
}

static void
mlplat_utility_hook(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node *stmt = pstmt->utilityStmt;
	volatile bool dropping_ours = false;

	if (mlplat_shared != NULL && mlplat_database != NULL)
	{
		if (IsA(stmt, DropdbStmt) &&
			strcmp(((DropdbStmt *) stmt)->dbname, mlplat_database) == 0)
			dropping_ours = true;
		else if (IsA(stmt, CreatedbStmt) &&
				 strcmp(((CreatedbStmt *) stmt)->dbname, mlplat_database) == 0)
			set_drop_flags(false, false);
	}

	if (dropping_ours)
	{
		set_drop_flags(true, false);
		terminate_workers();
		for (int waited = 0; connected_workers() > 0 && waited < MLPLAT_DROPDB_WAIT_MS; waited += 10)
		{
			CHECK_FOR_INTERRUPTS();
			pg_usleep(10 * 1000L);
		}
	}

	PG_TRY();
	{
		if (prev_utility_hook)
			prev_utility_hook(pstmt, queryString, readOnlyTree, context, params,
							  queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		/* the drop failed (or was cancelled): let the workers reconnect */
		if (dropping_ours)
			set_drop_flags(false, false);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* DROP DATABASE cannot run in a transaction block, so success is final */
	if (dropping_ours)
		set_drop_flags(false, true);
}

void
mlplat_install_utility_hook(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = mlplat_utility_hook;
}

bool
mlplat_database_unavailable(void)
{
	bool result;

	SpinLockAcquire(&mlplat_shared->mutex);
	result = mlplat_shared->db_drop_in_progress || mlplat_shared->db_dropped;
	SpinLockRelease(&mlplat_shared->mutex);
	return result;
}
