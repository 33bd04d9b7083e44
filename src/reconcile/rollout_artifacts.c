/*
 * rollout_artifacts.c — the rollouts pass's artifact gate (see
 * rollout_artifacts.h).  Issue: a rollout applies its target revision to the
 * InferenceService, and that first apply must not happen before the target's
 * artifact is found in the object store with its registered SHA-256 — the
 * same promise the deployments reconciler keeps for a deployment's first
 * apply, made with the same module (artifact.c: store checksum, digest cache
 * by URI + ETag, or a bounded download).
 *
 * The state is on the rollout row (rollouts.artifact_verified_at, set once),
 * so a verified target is not checked again on later steps or by a new
 * leader; only due rollouts are looked at, so a RETRY/WAIT backs off through
 * the row's next_attempt_at like any other error of the pass.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/artifact.h"
#include "mlplat/ledger.h"
#include "mlplat/reconcile.h"
#include "mlplat/rollout_artifacts.h"
#include "mlplat/seam.h"

typedef struct Gate
{
	int64 rollout_id;
	int64 row_version;
	int attempts;
	const char *project;
	MlplatArtifactCheck *check; /* set when the target is not verified yet */
	bool held;
} Gate;

static const char *const verdict_names[] = { "UNDECIDED", "OK", "FAILED", "RETRY", "WAIT" };

/* The seam (seam.h): the claim's rows, the verdicts and their answers, read and built by name */
typedef struct PendingRow
{
	MLPLAT_SEAM_MEMBERS(rollout_artifact_claim)
} PendingRow;

MLPLAT_SEAM_GLOBAL(mlplat_rollout_artifact_claim_seam, rollout_artifact_claim, PendingRow);

MLPLAT_SEAM_ROW_GLOBAL(mlplat_rollout_artifact_verdict_seam, rollout_artifact_verdict, VerdictRow);

List *
mlplat_rollout_artifacts_add(List *gate, int64 rollout_id, int64 row_version, int attempts, const char *project)
{
	Gate *g = palloc0(sizeof(Gate));

	g->rollout_id = rollout_id;
	g->row_version = row_version;
	g->attempts = attempts;
	g->project = project;
	return lappend(gate, g);
}

static Gate *
find(List *gate, int64 id)
{
	ListCell *lc;

	foreach (lc, gate)
		if (((Gate *) lfirst(lc))->rollout_id == id)
			return lfirst(lc);
	return NULL;
}

void
mlplat_rollout_artifacts_begin(List *gate, MlplatHttpBatch *batch)
{
	MemoryContext cxt = CurrentMemoryContext;
	int n = list_length(gate);
	Datum *ids;
	List *checks = NIL;
	List *rows;
	ListCell *lc;
	int i = 0;

	if (n == 0)
		return;
	ids = palloc(sizeof(Datum) * n);
	foreach (lc, gate)
		ids[i++] = Int64GetDatum(((Gate *) lfirst(lc))->rollout_id);
	mlplat_txn_begin();
	MemoryContextSwitchTo(cxt);
	rows = mlplat_seam_claim(&mlplat_rollout_artifact_claim_seam, cxt,
							 "SELECT c FROM mlplat._rollout_artifacts_pending($1) c", 1, (Oid[]){ INT8ARRAYOID },
							 (Datum[]){ PointerGetDatum(construct_array(ids, n, INT8OID, 8, FLOAT8PASSBYVAL,
																		TYPALIGN_DOUBLE)) },
							 sizeof(PendingRow));
	MemoryContextSwitchTo(cxt);
	foreach (lc, rows)
	{
		PendingRow *row = lfirst(lc);
		Gate *g = find(gate, row->id);

		if (g == NULL)
			continue;
		/* held until the verdict says OK */
		g->held = true;
		g->check = mlplat_artifact_check_new(row->deployment_id, row->target_revision, g->attempts);
		checks = lappend(checks, g->check);
	}
	mlplat_txn_commit();
	MemoryContextSwitchTo(cxt);
	/* its own short claim; the HEADs go out with the pass's GETs */
	mlplat_artifact_begin(checks, batch);
}

void
mlplat_rollout_artifacts_finish(MlplatPass *pass, List *gate)
{
	MemoryContext cxt = CurrentMemoryContext;
	List *checks = NIL;
	List *answers;
	ListCell *lc;
	MlplatLedgerBatch *ledger;

	foreach (lc, gate)
		if (((Gate *) lfirst(lc))->check)
			checks = lappend(checks, ((Gate *) lfirst(lc))->check);
	if (checks == NIL)
		return;
	mlplat_artifact_finish(pass, checks);

	mlplat_txn_begin();
	ledger = mlplat_ledger_batch_new();
	{
		MlplatSeamArray *rows = mlplat_seam_array_new(&mlplat_rollout_artifact_verdict_seam);

		foreach (lc, gate)
		{
			Gate *g = lfirst(lc);
			MlplatArtifactCheck *c = g->check;

			if (c == NULL)
				continue;
			{
				VerdictRow v = {
					.id = g->rollout_id,
					.row_version = g->row_version,
					.verdict = verdict_names[c->verdict],
					.reason = c->reason ? c->reason : "artifact check undecided",
					.retry_ms = c->retry_ms >= 0 ? c->retry_ms : 1000,
				};

				mlplat_seam_array_add(rows, &v);
			}
		}
		answers = mlplat_rollout_writeback(rows, "SELECT r FROM mlplat._rollout_artifact_verdicts($1, $2) r",
										   pass->epoch, cxt);
	}
	foreach (lc, gate)
	{
		Gate *g = lfirst(lc);
		MlplatArtifactCheck *c = g->check;
		const char *res;

		if (c == NULL)
			continue;
		res = mlplat_rollout_result_of(answers, g->rollout_id);
		/* OK and still ours: the pass goes on to apply the target */
		g->held = !(c->verdict == MLPLAT_ARTIFACT_OK && res && strcmp(res, "OK") == 0);
		/* a ledger row per finding (not for waiting on configuration), as for deployments */
		if (c->verdict != MLPLAT_ARTIFACT_WAIT && res && strcmp(res, "LOST") != 0)
			mlplat_ledger_batch_add(ledger, "rollout", g->rollout_id, g->project, "VERIFY",
									c->verdict == MLPLAT_ARTIFACT_OK	   ? "OK"
									: c->verdict == MLPLAT_ARTIFACT_FAILED ? "FAILED"
																		   : "RETRY",
									c->want_sha256, c->got_sha256, c->http_status,
									c->verdict == MLPLAT_ARTIFACT_OK ? NULL : c->detail, NULL, c->uri);
	}
	(void) mlplat_ledger_batch_flush(pass, ledger);
	mlplat_txn_commit();
	MemoryContextSwitchTo(cxt);
}

bool
mlplat_rollout_artifacts_held(List *gate, int64 rollout_id)
{
	Gate *g = find(gate, rollout_id);

	return g != NULL && g->held;
}
