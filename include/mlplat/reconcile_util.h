/*
 * reconcile_util.h — what a pass uses beside its seam: the SQL it runs
 * (reconcile_sql.h), the ledger (ledger.h), observation (observe.h), and the
 * small helpers below.
 */
#ifndef MLPLAT_RECONCILE_UTIL_H
#define MLPLAT_RECONCILE_UTIL_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/array.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h" /* mlplat_json_arena_in */
#include "mlplat/kube.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/spec_diff.h"

/* The trace id (32 hex digits) of a stored traceparent, palloc'd; NULL if it has none. */
extern char *mlplat_trace_id_of(const char *traceparent);

/* Are two texts the same, NULL being the same only as NULL? */
static inline bool
mlplat_str_same(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/*
 * A short human line naming the drifted paths of a diff: the first five, and
 * how many more ("spec.a, spec.b and 3 more"); palloc'd.  Status reasons and
 * ledger notes of every kind that reports drift use it.
 */
extern char *mlplat_drift_paths_line(const MlSpecDiff *diff);

/* Say in the pass status that n write-backs lost their compare-and-swap (n > 0). */
extern void mlplat_pass_note_lost(MlplatPass *pass, int n);

/*
 * The context a pass allocates in, reset after every pass; the worker sets it
 * once.  mlplat.pass_memory_limit bounds what it holds (with its children),
 * not the worker's other memory.  NULL outside a worker: then the caller's
 * current context counts.
 */
extern MemoryContext mlplat_pass_memory_context;

#endif /* MLPLAT_RECONCILE_UTIL_H */
