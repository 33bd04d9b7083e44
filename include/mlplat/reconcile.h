/*
 * reconcile.h — what a reconciler kind plugs into the worker loop.
 *
 * A pass is three steps and never holds a transaction across I/O:
 *   1. claim work in a short transaction (mlplat_txn_begin/_commit) and commit;
 *   2. talk to the external systems with no transaction open;
 *   3. write results in a new short transaction, compare-and-swap on the row
 *      version and on the leader epoch (pass->epoch).
 * Anything allocated in the pass lives in CurrentMemoryContext, which the
 * loop resets after every pass.
 */
#ifndef MLPLAT_RECONCILE_H
#define MLPLAT_RECONCILE_H

#include "postgres.h"

#include "mlplat/kinds.h"

typedef struct MlplatPass
{
	int kind;
	int replica;
	int64 epoch;			/* leader epoch; stamped on every write-back */
	const char *controller; /* "host:port/pid/replica", for ledger and audit */
	bool resync;			/* periodic resync due: compare everything */
	bool woken;				/* started by a committed intent, and a full pass
								 * ran within the last second: a reconciler may act
								 * on new intents only, without observing */
	long next_pass_ms;		/* > 0: run again this soon (readiness waits) */
	char status[128];		/* a line for the health view */
} MlplatPass;

typedef void (*MlplatPassFn)(MlplatPass *pass);

/* The pass of a kind, or NULL while that kind has no reconciler. */
extern MlplatPassFn mlplat_pass_for_kind(int kind);

/* The passes (src/reconcile/) */
extern void mlplat_deployments_pass(MlplatPass *pass);
extern void mlplat_model_aliases_pass(MlplatPass *pass);
extern void mlplat_projects_pass(MlplatPass *pass);
extern void mlplat_rollouts_pass(MlplatPass *pass);
extern void mlplat_runs_pass(MlplatPass *pass);

/*
 * Short transactions for claim and write-back; begin refuses on a standby.
 * Commit returns to the memory context that was current at begin.
 */
extern void mlplat_txn_begin(void);
extern void mlplat_txn_commit(void);

#endif /* MLPLAT_RECONCILE_H */
