/*
 * quota_slot.c — the slots of a project's GPU quota (mlplat._lab_reserve_gpus).
 *
 * A lab run or probe reserving GPUs in a project with room to spare holds one of the
 * project's few slots until its transaction ends, instead of the project's row exclusively:
 * such reservations then wait neither for each other nor for each other's commit.  Holding a
 * slot is what lets one count them: every reservation that a quota sum cannot see yet holds
 * another slot, so there are fewer of them than slots (the bound is argued beside
 * _lab_reserve_gpus).  A slot holds at most one reservation: asked again by a transaction
 * that holds it already, it is not given twice.
 *
 * Every exact reservation (the project's row FOR NO KEY UPDATE, _lock_project_row 'reserve')
 * then takes all the slots, waiting for their holders, before its quota sum: so a slot
 * holder's sum, whose snapshot is taken after its slot, either sees an exact reservation
 * committed or runs before that reservation's own sum, which then counts it.  This replaces
 * the slot holders' row lock FOR SHARE: no multixact on the project's row, no dirtied tuple,
 * and a slot, unlike a row lock, can be given back, so a slot holder whose sum finds too
 * little room goes the exact way without a savepoint.
 *
 * A slot is a transaction lock of the lock manager's user method tagged LOCKTAG_USERLOCK,
 * which no SQL statement can build (worker.c says why): no login can squat on a project's
 * slots.  It goes at commit or abort (ProcReleaseLocks), and with a rolled-back
 * subtransaction that took it.  The fast way never waits for one: a reservation that finds
 * every slot taken uses the exact way.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"

/* slot key space: (database, MLPLAT_SLOT_CLASS, project id's low 32 bits, slot) */
#define MLPLAT_SLOT_CLASS 0x6d6c7173 /* "mlqs" */
/* every slot a fast reservation may hold: the exact way takes all of them */
#define MLPLAT_MAX_SLOTS 8

PG_FUNCTION_INFO_V1(mlplat_try_quota_slot);
PG_FUNCTION_INFO_V1(mlplat_release_quota_slot);
PG_FUNCTION_INFO_V1(mlplat_take_quota_slots);
PG_FUNCTION_INFO_V1(mlplat_held_quota_slot);

static void
slot_tag(LOCKTAG *tag, int64 project, int slot)
{
	tag->locktag_field1 = MyDatabaseId;
	tag->locktag_field2 = MLPLAT_SLOT_CLASS;
	tag->locktag_field3 = (uint32) project;
	tag->locktag_field4 = (uint16) slot;
	tag->locktag_type = LOCKTAG_USERLOCK;
	tag->locktag_lockmethodid = USER_LOCKMETHOD;
}

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

		slot_tag(&tag, project, slot);
		got = LockAcquire(&tag, ExclusiveLock, false, true);
		if (got == LOCKACQUIRE_OK)
			PG_RETURN_INT32(slot);
		if (got == LOCKACQUIRE_ALREADY_HELD || got == LOCKACQUIRE_ALREADY_CLEAR)
			/* ours already, for an earlier reservation: undo the count, try the next */
			LockRelease(&tag, ExclusiveLock, false);
	}
	PG_RETURN_INT32(-1);
}

/*
 * mlplat._lab_quota_slot_release(project bigint, slot int): give back the slot this
 * transaction took for a reservation whose sum found too little room, before it waits for the
 * exact way (which waits for every slot: holding one would deadlock two of them)
 */
Datum
mlplat_release_quota_slot(PG_FUNCTION_ARGS)
{
	int64 project = PG_GETARG_INT64(0);
	int32 slot = PG_GETARG_INT32(1);
	LOCKTAG tag;

	if (slot < 0 || slot >= MLPLAT_MAX_SLOTS)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("a quota slot is numbered 0 to %d", MLPLAT_MAX_SLOTS - 1)));
	slot_tag(&tag, project, slot);
	if (!LockRelease(&tag, ExclusiveLock, false))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("quota slot %d of project %lld is not held", slot, (long long) project),
						errdetail("Only a slot this transaction took for a reservation can be given back."),
						errhint("This is a bug in mlplat; report it.")));
	PG_RETURN_VOID();
}

/*
 * mlplat._quota_slots_take(project bigint, wait boolean) -> boolean: every slot of the
 * project, for an exact reservation.  Without wait, takes what is free and says whether that
 * was all of them; with wait, waits for each holder (lock_timeout and the deadlock detector
 * apply, as to any lock).  Slots this transaction holds already stay held.
 */
Datum
mlplat_take_quota_slots(PG_FUNCTION_ARGS)
{
	int64 project = PG_GETARG_INT64(0);
	bool wait = PG_GETARG_BOOL(1);
	bool all = true;

	for (int slot = 0; slot < MLPLAT_MAX_SLOTS; slot++)
	{
		LOCKTAG tag;

		slot_tag(&tag, project, slot);
		if (LockAcquire(&tag, ExclusiveLock, false, !wait) == LOCKACQUIRE_NOT_AVAIL)
			all = false;
	}
	PG_RETURN_BOOL(all);
}

/*
 * mlplat._lab_quota_slot_held(project bigint) -> int: the lowest slot of the project this
 * transaction holds, or -1.  The GPU counter (mlplat.lab_gpus) writes a slot holder's
 * change into that slot's row, which only its holder writes: starts side by side never
 * wait for each other's counter row.
 */
Datum
mlplat_held_quota_slot(PG_FUNCTION_ARGS)
{
	int64 project = PG_GETARG_INT64(0);

	for (int slot = 0; slot < MLPLAT_MAX_SLOTS; slot++)
	{
		LOCKTAG tag;

		slot_tag(&tag, project, slot);
		if (LockHeldByMe(&tag, ExclusiveLock))
			PG_RETURN_INT32(slot);
	}
	PG_RETURN_INT32(-1);
}
