/*
 * reconcile_util.h — small helpers shared by the reconciler passes.
 */
#ifndef MLPLAT_RECONCILE_UTIL_H
#define MLPLAT_RECONCILE_UTIL_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/array.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h" /* mlplat_json_arena_in */
#include "mlplat/kube.h"
#include "mlplat/reconcile.h"

/*
 * Is a Kubernetes cluster configured and usable?  When not, sets the pass
 * status to say why (shown in mlplat.reconciler_health) and returns false,
 * without logging: an unconfigured cluster is a state, not an error.
 */
extern bool mlplat_cluster_ready(MlplatPass *pass, const char **why);

/*
 * Run a one-row, one-boolean-column statement with SPI (transaction open).
 * Its plan is kept for the life of the process, keyed by the text: sql must
 * be one of a fixed set of statements (a literal), never built per call.
 */
extern bool mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/*
 * Run a statement with SPI (transaction open) and return SPI's result code;
 * the rows are in SPI_tuptable.  The plan is kept like mlplat_sql_bool's.
 */
extern int mlplat_sql_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/* Append a text, or NULL, to an array being built (in the state's own context). */
extern void mlplat_array_add_text(ArrayBuildState *a, const char *s);

/* mlplat.installation's instance id (transaction open); palloc'd in the caller's context. */
extern char *mlplat_instance_id(void);

/* The trace id (32 hex digits) of a stored traceparent, palloc'd; NULL if it has none. */
extern char *mlplat_trace_id_of(const char *traceparent);

/* Say in the pass status that n write-backs lost their compare-and-swap (n > 0). */
extern void mlplat_pass_note_lost(MlplatPass *pass, int n);

/*
 * Append a ledger row stamped with the pass's epoch and controller
 * (transaction open); note, if given, goes into detail as {"note": ...}.
 */
extern void mlplat_ledger_append(MlplatPass *pass, const char *entity, int64 entity_id,
								 const char *project, const char *action, const char *outcome,
								 const char *desired_digest, const char *observed_digest,
								 int http_status, const char *error, const char *trace_id,
								 const char *note);

/*
 * The same rows collected and written with one statement (a write-back of
 * 10,000 applies writes 10,000 rows at once).  Transaction open for all three
 * (the arrays' element types come from the catalog); the batch lives in the
 * memory context current at mlplat_ledger_batch_new.  Flushing stamps the
 * pass's epoch and controller, returns the rows written (0 when the epoch is
 * no longer current) and empties the batch.
 */
typedef struct MlplatLedgerBatch MlplatLedgerBatch;
extern MlplatLedgerBatch *mlplat_ledger_batch_new(void);
extern void mlplat_ledger_batch_add(MlplatLedgerBatch *b, const char *entity, int64 entity_id,
									const char *project, const char *action, const char *outcome,
									const char *desired_digest, const char *observed_digest,
									int http_status, const char *error, const char *trace_id,
									const char *note);
extern int mlplat_ledger_batch_flush(MlplatPass *pass, MlplatLedgerBatch *b);

/*
 * LIST every page (500 a page) of one resource across all namespaces with a
 * label selector; the parsed items are appended to *items (allocated in
 * arena) and *lists counts the requests.  A 410 Expired continue token
 * restarts the list (a few times, backing off).  Returns NULL, or why the kind
 * could not be observed (then *items holds nothing of it): also when the list
 * runs past mlplat.list_max_pages pages or a page would take the pass past
 * mlplat.pass_memory_limit.  No transaction may be open.
 */
/*
 * The context a pass allocates in, reset after every pass; the worker sets it
 * once.  mlplat.pass_memory_limit bounds what it holds (with its children),
 * not the worker's other memory.  NULL outside a worker: then the caller's
 * current context counts.
 */
extern MemoryContext mlplat_pass_memory_context;

extern char *mlplat_kube_list_all(MlJsonArena *arena, const MlplatKubeResource *res,
								  const char *selector, List **items, int *lists);

/* obj.a[.b[.c]] when it is a string, else NULL */
extern const char *mlplat_json_text(const MlJsonValue *obj, const char *a, const char *b, const char *c);
/* obj.a.b when it is an integer-valued number */
extern bool mlplat_json_int(const MlJsonValue *obj, const char *a, const char *b, int64 *out);

#endif /* MLPLAT_RECONCILE_UTIL_H */
