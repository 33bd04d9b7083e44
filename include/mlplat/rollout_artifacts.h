/*
 * rollout_artifacts.h — the rollouts pass's artifact gate
 * (src/reconcile/rollout_artifacts.c): before a rollout first applies its
 * target revision, the target's artifact is checked with the same module as
 * a deployment's first apply (artifact.h), its HEAD joining the pass's batch
 * of GETs.  A rollout whose artifact is not verified is held: the pass
 * applies nothing for it and does not write it back (the gate did).
 *
 *     g = mlplat_rollout_artifacts_add(g, id, row_version, attempts, project);  -- per due rollout
 *     mlplat_rollout_artifacts_begin(g, gets);    -- which are unverified; HEADs join gets
 *     mlplat_http_batch_run(gets);
 *     mlplat_rollout_artifacts_finish(pass, g);   -- verdicts written, ledger rows
 *     if (mlplat_rollout_artifacts_held(g, id)) skip it this pass
 */
#ifndef MLPLAT_ROLLOUT_ARTIFACTS_H
#define MLPLAT_ROLLOUT_ARTIFACTS_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/http.h"
#include "mlplat/reconcile.h"
#include "mlplat/seam_members.h"

extern List *mlplat_rollout_artifacts_add(List *gate, int64 rollout_id, int64 row_version, int attempts,
										  const char *project);
/* A short transaction (none may be open); the checks' HEADs are added to batch. */
extern void mlplat_rollout_artifacts_begin(List *gate, MlplatHttpBatch *batch);
/* After batch ran: decide, and write every verdict in a short transaction. */
extern void mlplat_rollout_artifacts_finish(MlplatPass *pass, List *gate);
extern bool mlplat_rollout_artifacts_held(List *gate, int64 rollout_id);

/*
 * The seams (seam.h) of the gate, in the rollouts kind's seam list: the claim's rows
 * (mlplat.rollout_artifact_claim), the verdicts written back
 * (mlplat.rollout_artifact_verdict), and the answer to each verdict or rollouts
 * write-back row (mlplat.rollout_writeback_result, rollouts.c).
 */
struct MlplatSeam;
extern struct MlplatSeam mlplat_rollout_artifact_claim_seam;
extern struct MlplatSeam mlplat_rollout_artifact_verdict_seam;
extern struct MlplatSeam mlplat_rollout_writeback_result_seam;

/* One answer of a rollouts write-back: what the SQL made of a row (APPLIED, LOST, ...). */
typedef struct MlplatRolloutResult
{
	MLPLAT_SEAM_MEMBERS(rollout_writeback_result)
} MlplatRolloutResult;

/* The answer for a rollout among answers (NULL when there is none). */
extern const char *mlplat_rollout_result_of(List *answers, int64 id);

/*
 * Run a rollouts write-back (rows: a seam array, sql: SELECT r FROM
 * mlplat._x($1, $2) r, answering with mlplat.rollout_writeback_result) and
 * return its answers, MlplatRolloutResult in cxt.  A transaction is open.
 */
struct MlplatSeamArray;
extern List *mlplat_rollout_writeback(struct MlplatSeamArray *rows, const char *sql, int64 epoch, MemoryContext cxt);

#endif /* MLPLAT_ROLLOUT_ARTIFACTS_H */
