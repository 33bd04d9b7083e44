/*
 * unanswered.h — the write-ahead record of external writes (mlplat.unanswered_writes).
 *
 * A pass notes every write it is about to send, committed, before sending; the write-back
 * of the pass that heard the answer removes the note — its own leader's only: an earlier
 * leader's note of the same object stays (marked overtaken) until the grace, since that
 * leader's request may still be in flight and land after the answer.  A note left by a terminated leader
 * tells the next one that an object may exist (or may still appear) although nothing else
 * in the database says so: before concluding "never made" or "gone" it looks for the
 * object, adopts what it finds, and waits up to mlplat.unanswered_write_grace for what it
 * does not find yet.
 */
#ifndef MLPLAT_UNANSWERED_H
#define MLPLAT_UNANSWERED_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/reconcile.h"
#include "mlplat/seam_members.h"

/*
 * "namespace/name", palloc'd: how write-ahead notes and ledger rows name a
 * namespaced object.  Notes are written before a send, found by a later
 * claim and removed after the answer by this text, so every kind spells it
 * with this one function.
 */
extern char *mlplat_object_path(const char *ns, const char *name);

typedef struct MlplatUnanswered
{
	/* entity_id, object (namespace/name), action (the ledger action the write was to be
	 * recorded as), age_ms (since it was noted), overtaken (a later leader's write of the
	 * object was answered since): mlplat.unanswered_note */
	MLPLAT_SEAM_MEMBERS(unanswered_note)
} MlplatUnanswered;

/*
 * The notes of the pass's kind (transaction open), palloc'd in the caller's context,
 * read through the seam mlplat.unanswered_note (seam.h), which the worker of every
 * kind with seams checks before it runs.
 */
struct MlplatSeam;
extern struct MlplatSeam mlplat_unanswered_seam;

extern List *mlplat_unanswered_load(MlplatPass *pass);

/* A note of one entity's object (of that action; NULL: any), or NULL. */
extern MlplatUnanswered *mlplat_unanswered_find(List *notes, int64 entity_id, const char *object,
												const char *action);

/* Did a note's write have time enough to land (older than mlplat.unanswered_write_grace)? */
extern bool mlplat_unanswered_settled(const MlplatUnanswered *u);

/*
 * Does finding the object settle this note (and is what was found its write's, to adopt)?
 * Not while it is overtaken: the object may be the later, answered write's, and this one
 * may still land; only the grace settles it then.
 */
static inline bool
mlplat_unanswered_seen_settles(const MlplatUnanswered *u)
{
	return !u->overtaken;
}

/*
 * Writes to note, or notes to remove: collected, then written with one statement.  To
 * remove, a NULL action names every note of the object.
 */
typedef struct MlplatWriteNotes
{
	List *ids; /* int64 as a List of palloc'd int64 */
	List *objects;
	List *actions;
	List *answered; /* an IntList: 0 a sight or the grace, 1 answered, 2 answered and made */
} MlplatWriteNotes;

/*
 * A write to note; or, to remove, a note whose object was found (adopted) or whose grace
 * ended.  A sight does not remove an earlier leader's note that a later answer overtook
 * (the object seen may be the later write's); the grace removes any.
 */
extern void mlplat_write_notes_add(MlplatWriteNotes *n, int64 entity_id, const char *object,
								   const char *action);

/*
 * To remove: the notes of a write this pass sent and heard answered.  Only this leader's
 * own notes go (their epoch is the pass's): an earlier leader's write of the object may
 * still land after this answer.  made: the answer says this write made or set the object
 * (a 2xx to a create or an apply, mlplat_write_made): an earlier leader's note of it stays,
 * marked overtaken, until the grace, since the object now seen may be this write's.  A
 * refusal or a delete makes nothing, so a sight still settles (and adopts) such a note.
 */
extern void mlplat_write_notes_answered(MlplatWriteNotes *n, int64 entity_id, const char *object,
										const char *action, bool made);

/* Did the answer to a create or an apply say it made or set the object (a 2xx)? */
static inline bool
mlplat_write_made(int status)
{
	return status >= 200 && status < 300;
}

/*
 * Commit the notes in a transaction of their own (none may be open) before the requests
 * go out.  False when the pass's epoch is no longer current: the caller must send nothing;
 * the pass status then says so ("no longer the leader: 3 requests not sent", what naming
 * the requests).
 */
extern bool mlplat_write_notes_commit(MlplatPass *pass, MlplatWriteNotes *n, const char *what);

/*
 * Does an HTTP status answer a write, so that its note can go?  Any answer
 * but a 5xx (which may follow a write that landed) and no answer (status 0,
 * the request failed) does.
 */
static inline bool
mlplat_write_answered(int status)
{
	return status >= 200 && status < 500;
}

/* Remove the notes named (transaction open), in the write-back that records their outcome. */
extern void mlplat_write_notes_clear(MlplatPass *pass, MlplatWriteNotes *n);

#endif /* MLPLAT_UNANSWERED_H */
