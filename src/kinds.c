/*
 * kinds.c — names of the reconciler kinds, and how many this build runs.
 */
#include "postgres.h"

#include "mlplat/kinds.h"

const char *const mlplat_kind_names[MLPLAT_MAX_KINDS] = {
	"projects",
	"deployments",
	"runs",
	"rollouts",
	"model_aliases",
	"lab_runs",
	"campaigns",
	"span_export",
	/* test kinds: run only by the test build */
	"echoes",
};

#ifdef MLPLAT_TEST_KINDS
const int mlplat_num_kinds = MLPLAT_MAX_KINDS;
#else
const int mlplat_num_kinds = MLPLAT_NUM_RELEASE_KINDS;
#endif

int
mlplat_kind_from_name(const char *name)
{
	for (int k = 0; k < mlplat_num_kinds; k++)
		if (strcmp(name, mlplat_kind_names[k]) == 0)
			return k;
	return -1;
}
