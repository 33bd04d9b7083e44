/*
 * util.c — small helpers of a pass: its memory context, trace ids, the
 * status line, the drifted-paths line.  SQL, ledger and observation have files of their own.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "mlplat/reconcile_util.h"

/* the running pass's own context (set by the worker), see reconcile_util.h */
MemoryContext mlplat_pass_memory_context = NULL;

char *
mlplat_trace_id_of(const char *traceparent)
{
	return (traceparent && strlen(traceparent) == 55) ? pnstrdup(traceparent + 3, 32) : NULL;
}

void
mlplat_pass_note_lost(MlplatPass *pass, int n)
{
	/* an intent or another leader got there first: the next pass re-reads */
	if (n > 0)
		snprintf(pass->status, sizeof(pass->status), "%d write-back(s) lost a compare-and-swap; re-reading", n);
}

char *
mlplat_drift_paths_line(const MlSpecDiff *diff)
{
	StringInfoData s;

	initStringInfo(&s);
	for (size_t i = 0; i < diff->count && i < 5; i++)
		appendStringInfo(&s, "%s%s", i ? ", " : "", diff->entries[i].path);
	if (diff->count > 5)
		appendStringInfo(&s, " and %zu more", diff->count - 5);
	return s.data;
}
