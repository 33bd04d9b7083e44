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
	int64 epoch;					/* leader epoch; stamped on every write-back */
	const char *controller;			/* "host:port/pid/replica", for ledger and audit */
	bool resync;					/* periodic resync due: compare everything */
	bool woken;						/* started by a committed intent, and a full pass
								 * ran within the last second: a reconciler may act
								 * on new intents only, without observing */
	long next_pass_ms;				/* > 0: run again this soon (readiness waits) */
	bool claim_full;				/* the claim came back with mlplat.pass_row_limit rows:
							 * more are waiting, the next pass starts at once */
	char status[MLPLAT_STATUS_LEN]; /* a line for the health view */
} MlplatPass;

typedef void (*MlplatPassFn)(MlplatPass *pass);

struct MlplatSeam;

/*
 * What the worker loop needs of a kind (src/reconcile/registry.c): its pass,
 * and the seam types its SQL and C must agree on (NULL-terminated), checked
 * before every pass: a worker whose library and extension disagree refuses
 * to run rather than misread a row.
 */
typedef struct MlplatKindDef
{
	MlplatPassFn pass;
	struct MlplatSeam *const *seams;
	/* passes its leader also runs, after its own or alone when only they are due (NULL-terminated) */
	const MlplatPassFn *companions;
	/*
	 * The extension that carries the kind's SQL, when it is not mlplat (a test
	 * kind's is mlplat_test).  Without it the kind's leader leads and idles:
	 * its seams are not checked and its pass does not run.
	 */
	const char *sql_extension;
	/*
	 * The pass talks to Kubernetes: it runs only while a cluster is
	 * configured and usable, else the kind idles and its status says why
	 * (mlplat_kind_pass).
	 */
	bool needs_cluster;
	/*
	 * Called while its leader leads and runs no pass (mlplat.workers_enabled
	 * off, or fenced by the Lease): give back what the kind keeps open between
	 * passes.  NULL: nothing to give back.
	 */
	void (*idle)(void);
} MlplatKindDef;

/* The definition of a kind; its pass is NULL while that kind has no reconciler. */
extern const MlplatKindDef *mlplat_kind_def(int kind);

/* The pass of the kind pass->kind, behind the checks its definition asks for. */
extern void mlplat_kind_pass(MlplatPass *pass);

/*
 * Check the kind's seam types against the installed extension (transaction
 * open).  NULL, or a palloc'd sentence naming the first disagreement.
 */
extern char *mlplat_kind_seams_verify(int kind);

/* The seams of the kinds that have one (src/reconcile/) */
extern struct MlplatSeam *const mlplat_deployments_seams[];
extern struct MlplatSeam *const mlplat_model_aliases_seams[];
extern struct MlplatSeam *const mlplat_campaigns_seams[];
extern struct MlplatSeam *const mlplat_projects_seams[];
extern struct MlplatSeam *const mlplat_runs_seams[];
extern struct MlplatSeam *const mlplat_rollouts_seams[];
extern struct MlplatSeam *const mlplat_lab_runs_seams[];
/* test kinds (test/kinds/), in the test build only */
extern struct MlplatSeam *const mlplat_echoes_seams[];

/* The passes (src/reconcile/) */
extern void mlplat_deployments_pass(MlplatPass *pass);
/* The deployments leader idles: its watch is closed and its cache forgotten (the next pass lists). */
extern void mlplat_deployments_idle(void);
extern void mlplat_model_aliases_pass(MlplatPass *pass);
extern void mlplat_campaigns_pass(MlplatPass *pass);
extern void mlplat_projects_pass(MlplatPass *pass);
extern void mlplat_rollouts_pass(MlplatPass *pass);
extern void mlplat_runs_pass(MlplatPass *pass);
extern void mlplat_lab_runs_pass(MlplatPass *pass);
extern void mlplat_echoes_pass(MlplatPass *pass);

/*
 * Short transactions for claim and write-back; begin refuses on a standby.
 * Commit returns to the memory context that was current at begin.
 */
extern void mlplat_txn_begin(void);
extern void mlplat_txn_commit(void);

#endif /* MLPLAT_RECONCILE_H */
