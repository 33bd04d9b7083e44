/*
 * states.c — the names of each kind's statuses (states.h), and reading one.
 */
#include "postgres.h"

#include "mlplat/states.h"

#define MLPLAT_STATE_NAME_(M, s) #s,
static const char *const project_names[] = { MLPLAT_PROJECT_STATES(MLPLAT_STATE_NAME_) };
static const char *const rollout_names[] = { MLPLAT_ROLLOUT_STATES(MLPLAT_STATE_NAME_) };
static const char *const run_names[] = { MLPLAT_RUN_STATES(MLPLAT_STATE_NAME_) };
static const char *const deployment_names[] = { MLPLAT_DEPLOYMENT_STATES(MLPLAT_STATE_NAME_) };
static const char *const model_alias_names[] = { MLPLAT_MODEL_ALIAS_STATES(MLPLAT_STATE_NAME_) };
static const char *const lab_run_names[] = { MLPLAT_LAB_RUN_STATES(MLPLAT_STATE_NAME_) };
static const char *const campaign_candidate_names[] = { MLPLAT_CAMPAIGN_CANDIDATE_STATES(MLPLAT_STATE_NAME_) };
static const char *const echo_names[] = { MLPLAT_ECHO_STATES(MLPLAT_STATE_NAME_) };
#undef MLPLAT_STATE_NAME_

typedef struct MachineNames
{
	const char *machine;
	const char *const *names;
	int n;
} MachineNames;

static const MachineNames machines[MLPLAT_NUM_MACHINES] = {
#define MLPLAT_MACHINE_ROW_(M, m) [MLPLAT_MACHINE_##M] = { #m, m##_names, lengthof(m##_names) },
	MLPLAT_MACHINES(MLPLAT_MACHINE_ROW_)
#undef MLPLAT_MACHINE_ROW_
};

const char *
mlplat_machine_name(MlplatMachine m)
{
	Assert(m >= 0 && m < MLPLAT_NUM_MACHINES);
	return machines[m].machine;
}

int
mlplat_machine_nstatuses(MlplatMachine m)
{
	Assert(m >= 0 && m < MLPLAT_NUM_MACHINES);
	return machines[m].n;
}

const char *
mlplat_status_name(MlplatMachine m, int s)
{
	Assert(m >= 0 && m < MLPLAT_NUM_MACHINES);
	if (s == MLPLAT_NO_STATUS)
		return NULL;
	if (s < 0 || s >= machines[m].n)
		elog(ERROR, "mlplat: %d is no %s status", s, machines[m].machine);
	return machines[m].names[s];
}

int
mlplat_status_find(MlplatMachine m, const char *text)
{
	Assert(m >= 0 && m < MLPLAT_NUM_MACHINES);
	for (int s = 0; s < machines[m].n; s++)
		if (strcmp(machines[m].names[s], text) == 0)
			return s;
	return MLPLAT_NO_STATUS;
}

int
mlplat_status_parse(MlplatMachine m, const char *text)
{
	int s = mlplat_status_find(m, text);

	if (s != MLPLAT_NO_STATUS)
		return s;
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("mlplat: the %s status \"%s\" is not one this library knows", machines[m].machine, text),
			 errdetail("The statuses of a %s are those of mlplat._%s_transitions(); the library's list "
					   "(include/mlplat/states.h) must name the same.",
					   machines[m].machine, machines[m].machine),
			 errhint("Install the library and the extension at the same version (ALTER EXTENSION mlplat UPDATE).")));
	pg_unreachable();
}
