/*
 * lab_guard.c — what a lab start assessed stays so until it commits (mlplat._lab_admit).
 *
 * A start assesses its node, runtime profile and model version (_lab_assess) and then writes
 * its run; between the two, none of those rows may change what the assessment read (a profile
 * or node disabled, a version's stage moved).  Row locks FOR SHARE did that, but every start
 * shares the same profile and version rows: at 8 clients each lock added a member to a
 * multixact on one tuple (a new multixact, a WAL record and a dirtied page per start).
 *
 * Instead each start takes a guard per object in SHARE mode (starts never wait for each
 * other), and every writer of those rows takes the object's guard in EXCLUSIVE mode from a
 * BEFORE UPDATE/DELETE row trigger, so no writer slips past (the API, a rollout's promotion,
 * a superuser's UPDATE).  A writer waits for the starts in flight to commit (then applies: the
 * run was admitted first); a start waits for a writer in flight to commit and then assesses on
 * a snapshot taken after its guard, which sees the write.  Nothing is written to take a guard.
 *
 * Lock order: a writer's row lock (taken before its BEFORE trigger runs), then the guard; a
 * start's guard, then (at its inserts) the foreign keys' FOR KEY SHARE on the same rows, which
 * a non-key UPDATE does not block: no cycle.  Only a key change or a DELETE of a guarded row
 * blocks FOR KEY SHARE; against a start in flight that is a deadlock the deadlock detector
 * ends (an error, never a start admitted over the change).
 *
 * A guard is a transaction lock of the lock manager's user method tagged LOCKTAG_USERLOCK,
 * which no SQL statement can build (worker.c says why): no login can hold one to stall
 * starts or writers.  It goes at commit or abort.  The tag keeps an id's low 32 bits: two
 * ids that share them share a guard, which costs a needless wait, never a missed one.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"

/* guard key space: (database, MLPLAT_GUARD_CLASS, object id's low 32 bits, kind) */
#define MLPLAT_GUARD_CLASS 0x6d6c6c67 /* "mllg" */

typedef enum GuardKind
{
	GUARD_NODE = 1,
	GUARD_PROFILE = 2,
	GUARD_VERSION = 3
} GuardKind;

PG_FUNCTION_INFO_V1(mlplat_lab_guard_share);
PG_FUNCTION_INFO_V1(mlplat_lab_guard_write);

static void
guard(GuardKind kind, int64 id, LOCKMODE mode)
{
	LOCKTAG tag;

	tag.locktag_field1 = MyDatabaseId;
	tag.locktag_field2 = MLPLAT_GUARD_CLASS;
	tag.locktag_field3 = (uint32) id;
	tag.locktag_field4 = (uint16) kind;
	tag.locktag_type = LOCKTAG_USERLOCK;
	tag.locktag_lockmethodid = USER_LOCKMETHOD;
	/* waits as any lock does: lock_timeout and the deadlock detector apply */
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * mlplat._lab_guard_share(node bigint, profile bigint, version bigint): a start's guards, in
 * this order, until its transaction ends.  A NULL id guards nothing (its row is missing or
 * the start is refused anyway).
 */
Datum
mlplat_lab_guard_share(PG_FUNCTION_ARGS)
{
	static const GuardKind kinds[] = { GUARD_NODE, GUARD_PROFILE, GUARD_VERSION };

	for (int i = 0; i < lengthof(kinds); i++)
		if (!PG_ARGISNULL(i))
			guard(kinds[i], PG_GETARG_INT64(i), ShareLock);
	PG_RETURN_VOID();
}

/*
 * Trigger mlplat._lab_guard_write('node' | 'profile' | 'version'): BEFORE UPDATE OR DELETE,
 * FOR EACH ROW.  Takes the old row's guard exclusively, waiting for the starts in flight that
 * assessed it, and lets the write through unchanged.
 */
Datum
mlplat_lab_guard_write(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	GuardKind kind;
	const char *arg;
	int attnum;
	bool isnull;
	Datum id;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) || TRIGGER_FIRED_BY_INSERT(td->tg_event) || td->tg_trigger->tgnargs != 1)
		elog(ERROR, "_lab_guard_write must be a BEFORE UPDATE OR DELETE row trigger with one argument");

	arg = td->tg_trigger->tgargs[0];
	if (strcmp(arg, "node") == 0)
		kind = GUARD_NODE;
	else if (strcmp(arg, "profile") == 0)
		kind = GUARD_PROFILE;
	else if (strcmp(arg, "version") == 0)
		kind = GUARD_VERSION;
	else
		elog(ERROR, "_lab_guard_write: unknown kind \"%s\"", arg);

	attnum = SPI_fnumber(td->tg_relation->rd_att, "id");
	if (attnum <= 0)
		elog(ERROR, "_lab_guard_write: table \"%s\" has no id column", RelationGetRelationName(td->tg_relation));
	id = SPI_getbinval(td->tg_trigtuple, td->tg_relation->rd_att, attnum, &isnull);
	if (!isnull)
		guard(kind, DatumGetInt64(id), ExclusiveLock);

	return PointerGetDatum(TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple);
}
