/*
 * kinds.h — the reconciler kinds.  One background-worker set per kind; each
 * kind has its own leader, epoch, wake latch and leader-lock key.
 */
#ifndef MLPLAT_KINDS_H
#define MLPLAT_KINDS_H

typedef enum MlplatKind
{
	MLPLAT_KIND_PROJECTS = 0,
	MLPLAT_KIND_DEPLOYMENTS,
	MLPLAT_KIND_RUNS,
	MLPLAT_KIND_ROLLOUTS,
	MLPLAT_KIND_MODEL_ALIASES,
	MLPLAT_KIND_LAB_RUNS,
	MLPLAT_KIND_CAMPAIGNS,
	MLPLAT_NUM_KINDS
} MlplatKind;

/* Stable names used in SQL, leader-lock keys and bgworker names. */
extern const char *const mlplat_kind_names[MLPLAT_NUM_KINDS];

/* -1 when the name is not a kind */
extern int mlplat_kind_from_name(const char *name);

#endif /* MLPLAT_KINDS_H */
