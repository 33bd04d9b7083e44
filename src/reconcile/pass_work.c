/*
 * pass_work.c — the parts of a pass every kind has (pass_work.h).
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "mlplat/labels.h"
#include "mlplat/observe.h"
#include "mlplat/pass_work.h"

/* the running pass's own context (set by the worker), see pass_work.h */
MemoryContext mlplat_pass_memory_context = NULL;

void
mlplat_pass_work_begin(MlplatPassWork *w, MlplatPass *pass)
{
	memset(w, 0, sizeof(*w));
	w->pass = pass;
	w->cxt = CurrentMemoryContext;
	w->arena = mlplat_json_arena_in(w->cxt);
	w->batch = mlplat_http_batch_create(w->cxt);
}

void
mlplat_pass_work_claimed(MlplatPassWork *w, char *instance, const char *component)
{
	MemoryContextSwitchTo(w->cxt);
	w->instance = instance;
	w->selector = mlplat_managed_selector(instance);
	if (component)
		w->selector = psprintf("%s," MLPLAT_LABEL_COMPONENT "=%s", w->selector, component);
}

List *
mlplat_pass_work_list(MlplatPassWork *w, const MlplatKubeResource *res, const char *selector)
{
	List *items = NIL;
	char *why = mlplat_kube_list_all(w->arena, res, selector ? selector : w->selector, &items, &w->lists);

	if (why)
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE), errmsg("%s", why)));
	return items;
}

void
mlplat_pass_work_follow_up(MlplatPassWork *w, List *rows, MlplatFollowUpAsk ask, MlplatFollowUpAnswer answer)
{
	MlplatHttpBatch *batch = mlplat_http_batch_create(CurrentMemoryContext);
	List *asked = NIL; /* each row's read or NULL, in the order of rows */
	ListCell *lr;
	ListCell *lq;

	foreach (lr, rows)
		asked = lappend(asked, ask(w, lfirst(lr), batch));
	if (mlplat_http_batch_count(batch) == 0)
		return;
	mlplat_http_batch_run(batch);
	forboth (lr, rows, lq, asked)
	{
		MlplatObservedObject *seen = lfirst(lq);

		if (seen == NULL)
			continue;
		mlplat_observe_got(seen, w->arena);
		answer(w, lfirst(lr), seen);
	}
}

bool
mlplat_pass_work_notes_commit(MlplatPassWork *w, const char *what)
{
	return mlplat_write_notes_commit(w->pass, &w->sending, what);
}

static bool warned_cut = false;

void
mlplat_pass_work_status(MlplatPassWork *w, const char *tail, const char *head_fmt, ...)
{
	StringInfoData s;
	va_list ap;

	if (w->pass->status[0] != '\0')
		return;
	initStringInfo(&s);
	for (;;)
	{
		int needed;

		va_start(ap, head_fmt);
		needed = appendStringInfoVA(&s, head_fmt, ap);
		va_end(ap);
		if (needed == 0)
			break;
		enlargeStringInfo(&s, needed);
	}
	/* counted when a request is batched, before its answer: "sent", not "done" */
	appendStringInfo(&s, ", %d applies, %d deletes, %d other writes sent, %d orphans, %d LIST requests%s", w->creates,
					 w->deletes, w->writes, list_length(w->orphans), w->lists, tail ? tail : "");
	if (strlcpy(w->pass->status, s.data, sizeof(w->pass->status)) >= sizeof(w->pass->status) && !warned_cut)
	{
		/* once per process: the tail that readers look for is what gets cut */
		ereport(LOG, (errmsg("mlplat: a status line of %d bytes was cut to %zu", s.len, sizeof(w->pass->status) - 1),
					  errdetail("The line began: %.60s", s.data)));
		warned_cut = true;
	}
	pfree(s.data);
}

void
mlplat_pass_note_lost(MlplatPass *pass, int n)
{
	/* an intent or another leader got there first: the next pass re-reads */
	if (n > 0)
		snprintf(pass->status, sizeof(pass->status), "%d write-back(s) lost a compare-and-swap; re-reading", n);
}

void
mlplat_pass_wake_within(MlplatPass *pass, int ms)
{
	if (pass->next_pass_ms <= 0 || ms < pass->next_pass_ms)
		pass->next_pass_ms = Max(ms, 50);
}
