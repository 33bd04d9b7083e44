/*
 * wake.c — wake a kind's reconciler when, and only when, the intent commits.
 *
 * API functions call mlplat._wake_on_commit(kind).  We remember the kinds in a
 * per-backend bitmask and set the leaders' latches from a transaction
 * callback at COMMIT; an abort clears the mask, so a rolled-back intent wakes
 * nothing.  Waking before commit would send the reconciler to read a row it
 * cannot see yet.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "mlplat/kinds.h"
#include "mlplat/shmem.h"

static uint32 pending_wakes = 0;
static bool callback_registered = false;

static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int k = 0; k < mlplat_num_kinds; k++)
				if (pending_wakes & (1u << k))
					mlplat_wake_kind(k);
			pending_wakes = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending_wakes = 0;
			break;
		default:
			break;
	}
}

PG_FUNCTION_INFO_V1(mlplat_wake_on_commit);

Datum
mlplat_wake_on_commit(PG_FUNCTION_ARGS)
{
	char *kind_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int kind = mlplat_kind_from_name(kind_name);

	if (kind < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown reconciler kind \"%s\"", kind_name),
				 errhint("Kinds are projects, deployments, runs, rollouts, model_aliases and lab_runs.")));

	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
	pending_wakes |= (1u << kind);
	PG_RETURN_VOID();
}
