/*
 * pass_work.h — what every kind's pass holds from its claim to its status line.
 *
 * A pass claims rows in one transaction, observes and acts with no transaction
 * open, and writes back in another; what it builds in between lives in the
 * pass's memory context.  The parts every kind needs (that context, the arena
 * of observed bodies, the installation's label selector, the batch of
 * requests with the write-ahead notes of its writes, the counters of the
 * status line) are one struct, begun once, so that a kind declares only what
 * is its own.
 */
#ifndef MLPLAT_PASS_WORK_H
#define MLPLAT_PASS_WORK_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/observe.h"
#include "mlplat/reconcile.h"
#include "mlplat/unanswered.h"

typedef struct MlplatPassWork
{
	MlplatPass *pass;
	MemoryContext cxt;		  /* the pass's: outlives the claim's and the write-back's transactions */
	MlJsonArena *arena;		  /* observed bodies, parsed once, in cxt */
	char *instance;			  /* this installation's instance id, from the claim */
	char *selector;			  /* the label selector of this installation's objects of the kind */
	MlplatHttpBatch *batch;	  /* the requests of the pass, sent together */
	MlplatWriteNotes sending; /* the write-ahead notes of the writes in batch */
	List *orphans;			  /* objects of ours that no claimed row owns */
	/* the counters of the status line (mlplat_pass_work_status) */
	int lists;	 /* LIST requests made to observe */
	int creates; /* creates and applies sent */
	int deletes; /* deletes sent */
	int writes;	 /* other writes (patches, status-only row updates) */
} MlplatPassWork;

/* Begin a pass's work in the current memory context (the pass's). */
extern void mlplat_pass_work_begin(MlplatPassWork *w, MlplatPass *pass);

/*
 * After the claim (back in w->cxt): the instance it read, and the selector of
 * this installation's objects, narrowed to one component when component is
 * not NULL (app.kubernetes.io/component).
 */
extern void mlplat_pass_work_claimed(MlplatPassWork *w, char *instance, const char *component);

/*
 * Observe: LIST every object of res by selector (NULL: w->selector) into a
 * list of parsed bodies, counted in w->lists; a failed LIST ends the pass
 * with an error (an object that could not be read is not an object that is
 * gone).
 */
extern List *mlplat_pass_work_list(MlplatPassWork *w, const MlplatKubeResource *res, const char *selector);

/*
 * A follow-up round after the pass's writes (a GET of what holds a name after a
 * 409, a completed attempt's output): ask adds at most one read for a row to the
 * round's batch (mlplat_observe_get or mlplat_observe_peer of observe.h) and
 * returns it (NULL: the row needs none); when any row asked, the batch is sent,
 * each answer is read once (mlplat_observe_got) and answer decides on what it
 * observed.  The round is written once so that a kind says only what it reads
 * and what it makes of the observation.
 */
typedef MlplatObservedObject *(*MlplatFollowUpAsk)(MlplatPassWork *w, void *row, MlplatHttpBatch *batch);
typedef void (*MlplatFollowUpAnswer)(MlplatPassWork *w, void *row, const MlplatObservedObject *seen);
extern void mlplat_pass_work_follow_up(MlplatPassWork *w, List *rows, MlplatFollowUpAsk ask,
									   MlplatFollowUpAnswer answer);

/*
 * Commit the write-ahead notes of the writes about to be sent (what names
 * them in the status line if they are not sent).  False when this replica is
 * no longer the leader: send nothing.
 */
extern bool mlplat_pass_work_notes_commit(MlplatPassWork *w, const char *what);

/*
 * The pass's status line, unless a step already said something (a lost
 * compare-and-swap, a lost leadership): the kind's head (printf format: its
 * rows), then the standard counters in one order for every kind, then tail
 * (may be NULL).
 */
extern void mlplat_pass_work_status(MlplatPassWork *w, const char *tail, const char *head_fmt, ...)
	pg_attribute_printf(3, 4);

/*
 * The context a pass allocates in, reset after every pass; the worker sets it
 * once.  mlplat.pass_memory_limit bounds what it holds (with its children),
 * not the worker's other memory.  NULL outside a worker: then the caller's
 * current context counts.
 */
extern MemoryContext mlplat_pass_memory_context;

/* Say in the pass status that n write-backs lost their compare-and-swap (n > 0). */
extern void mlplat_pass_note_lost(MlplatPass *pass, int n);

/* Wake the next pass within ms (at least 50 ms from now), unless one comes sooner. */
extern void mlplat_pass_wake_within(MlplatPass *pass, int ms);

#endif /* MLPLAT_PASS_WORK_H */
