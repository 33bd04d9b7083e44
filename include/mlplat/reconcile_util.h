/*
 * reconcile_util.h — what a pass uses beside its seam: the SQL it runs
 * (reconcile_sql.h), the ledger (ledger.h), observation (observe.h), and the
 * small helpers below.
 */
#ifndef MLPLAT_RECONCILE_UTIL_H
#define MLPLAT_RECONCILE_UTIL_H

#include "postgres.h"

#include "lib/stringinfo.h"
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
 * "namespace/name", palloc'd: how write-ahead notes and ledger rows name a
 * namespaced object.  Notes are written before a send, found by a later
 * claim and removed after the answer by this text, so every kind spells it
 * with this one function.
 */
extern char *mlplat_object_path(const char *ns, const char *name);

/*
 * Append val as a JSON string, or null when it is NULL: the one spelling of
 * an optional text in the observations and outputs the kinds build.
 */
extern void mlplat_json_append_text(StringInfo s, const char *val);

/*
 * A short human line naming the drifted paths of a diff: the first five, and
 * how many more ("spec.a, spec.b and 3 more"); palloc'd.  Status reasons and
 * ledger notes of every kind that reports drift use it.
 */
extern char *mlplat_drift_paths_line(const MlSpecDiff *diff);

/* Say in the pass status that n write-backs lost their compare-and-swap (n > 0). */
extern void mlplat_pass_note_lost(MlplatPass *pass, int n);

/* Wake the next pass within ms (at least 50 ms from now), unless one comes sooner. */
extern void mlplat_pass_wake_within(MlplatPass *pass, int ms);

/* permanent failures (403, 422, ...) are retried slowly: a later grant heals them */
#define MLPLAT_PERMANENT_RETRY_MS 30000

/*
 * When to try a row's failed request again, in ms: a permanent failure after
 * MLPLAT_PERMANENT_RETRY_MS (no more than mlplat.backoff_max_ms), anything
 * else after a backoff from 500 ms by the row's attempts, never before the
 * server's Retry-After, jittered by the row's id (backoff.h).
 */
extern int mlplat_retry_ms(bool permanent, int attempts, int64 id, int retry_after_s);

/*
 * What a write the cluster did not take (res: any outcome but OK) leaves on
 * its row: the ledger outcome ("FAILED" for a permanent failure, else
 * "RETRY"), the line a tenant may read, the administrators' line when it is
 * not that one (else NULL), and when to try again (mlplat_retry_ms).
 */
extern void mlplat_write_failed(const MlplatKubeResult *res, int attempts, int64 id, const char **ledger_outcome,
								char **error, char **ledger_error, int *retry_ms);

/*
 * The context a pass allocates in, reset after every pass; the worker sets it
 * once.  mlplat.pass_memory_limit bounds what it holds (with its children),
 * not the worker's other memory.  NULL outside a worker: then the caller's
 * current context counts.
 */
extern MemoryContext mlplat_pass_memory_context;

#endif /* MLPLAT_RECONCILE_UTIL_H */
