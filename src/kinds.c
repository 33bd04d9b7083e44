/*
 * kinds.c — names of the reconciler kinds.
 */
#include "postgres.h"

#include "mlplat/kinds.h"

const char *const mlplat_kind_names[MLPLAT_NUM_KINDS] = {
	"projects", "deployments", "runs", "rollouts", "model_aliases", "lab_runs", "campaigns"
};

int
mlplat_kind_from_name(const char *name)
{
	for (int k = 0; k < MLPLAT_NUM_KINDS; k++)
		if (strcmp(name, mlplat_kind_names[k]) == 0)
			return k;
	return -1;
}
