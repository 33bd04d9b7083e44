/*
 * states.h — each kind's statuses, once, for C.
 *
 * A kind's state machine is one SQL function, mlplat._<machine>_transitions()
 * (sql/install/41_state_machines.sql), enforced by a trigger.  C names the
 * same statuses here, one X-macro list per machine, so that a decision
 * compares enums and a misspelt status is a compile error, not a row the
 * trigger refuses at write-back.  Texts exist only at the SQL seam: a seam
 * attribute whose SQL type is followed by the comment STATUS <machine>
 * (seam.h: MLPLAT_SEAM_STATUS) is read into the enum, an unknown text being an ERROR
 * that names machine and value, and written back as its name.  At start each
 * worker checks that the list of every machine its seams carry is exactly the
 * set of statuses its transitions function names (mlplat_states_verify), and
 * refuses to run if not.
 */
#ifndef MLPLAT_STATES_H
#define MLPLAT_STATES_H

/* X(MACHINE, STATUS) for each status, in the order of the SQL function */
#define MLPLAT_PROJECT_STATES(X) \
	X(PROJECT, PROVISIONING) \
	X(PROJECT, READY) \
	X(PROJECT, FAILED) \
	X(PROJECT, DELETING) \
	X(PROJECT, DELETED)
#define MLPLAT_ROLLOUT_STATES(X) \
	X(ROLLOUT, PROGRESSING) \
	X(ROLLOUT, HOLDING) \
	X(ROLLOUT, AT_CEILING) \
	X(ROLLOUT, ROLLING_BACK) \
	X(ROLLOUT, PROMOTED) \
	X(ROLLOUT, ROLLED_BACK) \
	X(ROLLOUT, ABORTED) \
	X(ROLLOUT, FAILED)
#define MLPLAT_RUN_STATES(X) \
	X(RUN, PENDING) \
	X(RUN, SUBMITTED) \
	X(RUN, RUNNING) \
	X(RUN, CANCEL_REQUESTED) \
	X(RUN, SUCCEEDED) \
	X(RUN, FAILED) \
	X(RUN, CANCELLED)
#define MLPLAT_DEPLOYMENT_STATES(X) \
	X(DEPLOYMENT, PENDING) \
	X(DEPLOYMENT, DEPLOYING) \
	X(DEPLOYMENT, READY) \
	X(DEPLOYMENT, FAILED) \
	X(DEPLOYMENT, DRIFTED) \
	X(DEPLOYMENT, DELETING) \
	X(DEPLOYMENT, DELETED)
#define MLPLAT_MODEL_ALIAS_STATES(X) \
	X(MODEL_ALIAS, PENDING) \
	X(MODEL_ALIAS, SYNCED) \
	X(MODEL_ALIAS, FAILED)
#define MLPLAT_LAB_RUN_STATES(X) \
	X(LAB_RUN, QUEUED) \
	X(LAB_RUN, DISPATCHED) \
	X(LAB_RUN, RUNNING) \
	X(LAB_RUN, RETRY_WAIT) \
	X(LAB_RUN, CANCEL_REQUESTED) \
	X(LAB_RUN, SUCCEEDED) \
	X(LAB_RUN, FAILED) \
	X(LAB_RUN, CANCELLED)
#define MLPLAT_CAMPAIGN_CANDIDATE_STATES(X) \
	X(CAMPAIGN_CANDIDATE, PLANNED) \
	X(CAMPAIGN_CANDIDATE, BUILDING) \
	X(CAMPAIGN_CANDIDATE, CANCEL_REQUESTED) \
	X(CAMPAIGN_CANDIDATE, BUILT) \
	X(CAMPAIGN_CANDIDATE, FAILED) \
	X(CAMPAIGN_CANDIDATE, CANCELLED) \
	X(CAMPAIGN_CANDIDATE, NOT_RUN)
/* the test kind's (test/kinds/): named in every build, like the kind */
#define MLPLAT_ECHO_STATES(X) \
	X(ECHO, PENDING) \
	X(ECHO, SYNCED) \
	X(ECHO, FAILED) \
	X(ECHO, DELETING) \
	X(ECHO, DELETED)

/* X(MACHINE, machine) for each machine: machine names its SQL function */
#define MLPLAT_MACHINES(X) \
	X(PROJECT, project) \
	X(ROLLOUT, rollout) \
	X(RUN, run) \
	X(DEPLOYMENT, deployment) \
	X(MODEL_ALIAS, model_alias) \
	X(LAB_RUN, lab_run) \
	X(CAMPAIGN_CANDIDATE, campaign_candidate) \
	X(ECHO, echo)

typedef enum MlplatMachine
{
#define MLPLAT_MACHINE_ENUM_(M, m) MLPLAT_MACHINE_##M,
	MLPLAT_MACHINES(MLPLAT_MACHINE_ENUM_) MLPLAT_NUM_MACHINES
#undef MLPLAT_MACHINE_ENUM_
} MlplatMachine;

/*
 * One enum per machine: MLPLAT_<MACHINE>_<STATUS>.  -1 (MLPLAT_NO_STATUS) is
 * "none", what SQL NULL reads as and writes as.
 */
#define MLPLAT_NO_STATUS (-1)
#define MLPLAT_STATE_ENUM_(M, s) MLPLAT_##M##_##s,
typedef enum MlplatProjectStatus
{
	MLPLAT_PROJECT_STATES(MLPLAT_STATE_ENUM_)
} MlplatProjectStatus;
typedef enum MlplatRolloutStatus
{
	MLPLAT_ROLLOUT_STATES(MLPLAT_STATE_ENUM_)
} MlplatRolloutStatus;
typedef enum MlplatRunStatus
{
	MLPLAT_RUN_STATES(MLPLAT_STATE_ENUM_)
} MlplatRunStatus;
typedef enum MlplatDeploymentStatus
{
	MLPLAT_DEPLOYMENT_STATES(MLPLAT_STATE_ENUM_)
} MlplatDeploymentStatus;
typedef enum MlplatModelAliasStatus
{
	MLPLAT_MODEL_ALIAS_STATES(MLPLAT_STATE_ENUM_)
} MlplatModelAliasStatus;
typedef enum MlplatLabRunStatus
{
	MLPLAT_LAB_RUN_STATES(MLPLAT_STATE_ENUM_)
} MlplatLabRunStatus;
typedef enum MlplatCampaignCandidateStatus
{
	MLPLAT_CAMPAIGN_CANDIDATE_STATES(MLPLAT_STATE_ENUM_)
} MlplatCampaignCandidateStatus;
typedef enum MlplatEchoStatus
{
	MLPLAT_ECHO_STATES(MLPLAT_STATE_ENUM_)
} MlplatEchoStatus;
#undef MLPLAT_STATE_ENUM_

/* The name of status s of machine m (as SQL spells it), or NULL for MLPLAT_NO_STATUS. */
extern const char *mlplat_status_name(MlplatMachine m, int s);

/* The status of machine m spelt text, or MLPLAT_NO_STATUS when there is none. */
extern int mlplat_status_find(MlplatMachine m, const char *text);

/* The status of machine m spelt text; an ERROR naming machine and text when there is none. */
extern int mlplat_status_parse(MlplatMachine m, const char *text);

/* "deployment", the machine's name in its SQL function's */
extern const char *mlplat_machine_name(MlplatMachine m);

/* how many statuses machine m has: they are 0 .. that - 1 */
extern int mlplat_machine_nstatuses(MlplatMachine m);

/*
 * Compare machine m's list with the statuses its SQL function names
 * (transaction open).  NULL when they are the same set, or a palloc'd
 * sentence naming the first status only one side has.  Cheap when the
 * function did not change since it last agreed (a catalog cache lookup).
 */
extern char *mlplat_states_verify(MlplatMachine m);

#endif /* MLPLAT_STATES_H */
