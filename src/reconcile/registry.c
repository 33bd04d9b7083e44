/*
 * registry.c — which pass function reconciles which kind.
 *
 * A kind without a pass function still gets its leader; the health view
 * reports that nothing reconciles it, rather than pretending.
 */
#include "postgres.h"

#include "mlplat/reconcile.h"

MlplatPassFn
mlplat_pass_for_kind(int kind)
{
	switch ((MlplatKind) kind)
	{
		case MLPLAT_KIND_DEPLOYMENTS:
			return mlplat_deployments_pass;
		case MLPLAT_KIND_MODEL_ALIASES:
			return mlplat_model_aliases_pass;
		case MLPLAT_KIND_PROJECTS:
			return mlplat_projects_pass;
		case MLPLAT_KIND_RUNS:
			return mlplat_runs_pass;
		case MLPLAT_KIND_ROLLOUTS:
			return mlplat_rollouts_pass;
		case MLPLAT_NUM_KINDS:
			break;
	}
	return NULL;
}
