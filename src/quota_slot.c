/*
 * quota_slot.c — the slots of a project's GPU quota (mlplat._lab_reserve_gpus).
 *
 * A lab run or probe reserving GPUs in a project with room to spare holds one of the
 * project's few slots, and the project's row FOR SHARE, until its transaction ends, instead
 * of the row exclusively: such reservations then wait neither for each other nor for each
 * other's commit.  Holding a slot is what lets one count them: every reservation that a
 * quota sum cannot see yet holds another slot, so there are fewer of them than slots (the
 * bound is argued beside _lab_reserve_gpus).  A slot holds at most one reservation: asked
 * again by a transaction that holds it already, it is not given twice.
 *
 * A slot is a transaction lock of the lock manager's user method tagged LOCKTAG_USERLOCK,
 * which no SQL statement can build (worker.c says why): no login can squat on a project's
 * slots.  It goes at commit or abort (ProcReleaseLocks), and with a rolled-back
 * subtransaction that took it.  Never waits: a reservation that finds every slot taken uses
 * the exact path (the project's row exclusively).
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"

/* slot key space: (database, MLPLAT_SLOT_CLASS, project id's low 32 bits, slot) */
#define MLPLAT_SLOT_CLASS 0x6d6c7173 /* "mlqs" */
#define MLPLAT_MAX_SLOTS 64

PG_FUNCTION_INFO_V1(mlplat_try_quota_slot);

/* mlplat._try_quota_slot(project bigint, slots int) -> int: the slot taken, or -1 */
Datum
mlplat_try_quota_slot(PG_FUNCTION_ARGS)
{
	int64 project = PG_GETARG_INT64(0);
	int32 slots = PG_GETARG_INT32(1);

	if (slots < 1 || slots > MLPLAT_MAX_SLOTS)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("a project has 1 to %d quota slots", MLPLAT_MAX_SLOTS)));

	for (int i = 0; i < slots; i++)
	{
		int slot = (int) (((uint32) MyProcPid + (uint32) i) % (uint32) slots);
		LOCKTAG tag;
		LockAcquireResult got;

		tag.locktag_field1 = MyDatabaseId;
		tag.locktag_field2 = MLPLAT_SLOT_CLASS;
		tag.locktag_field3 = (uint32) project;
		tag.locktag_field4 = (uint16) slot;
		tag.locktag_type = LOCKTAG_USERLOCK;
		tag.locktag_lockmethodid = USER_LOCKMETHOD;
		got = LockAcquire(&tag, ExclusiveLock, false, true);
		if (got == LOCKACQUIRE_OK)
			PG_RETURN_INT32(slot);
		if (got == LOCKACQUIRE_ALREADY_HELD || got == LOCKACQUIRE_ALREADY_CLEAR)
			/* ours already, for an earlier reservation: undo the count, try the next */
			LockRelease(&tag, ExclusiveLock, false);
	}
	PG_RETURN_INT32(-1);
}
