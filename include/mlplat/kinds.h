/*
 * kinds.h — the reconciler kinds.  One background-worker set per kind; each
 * kind has its own leader, epoch, wake latch and leader-lock key.
 *
 * The release kinds come first.  After them come the test kinds
 * (test/kinds/): named in every build, so shared memory has the same shape
 * whatever the build, but run only by the test build (make
 * MLPLAT_TEST_KINDS=1, what test/run.sh builds).  mlplat_num_kinds is how
 * many kinds this library runs: loops over kinds stop there.
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
	MLPLAT_KIND_SPAN_EXPORT, /* not a reconciler: sends spans to the OTLP collector */
	MLPLAT_NUM_RELEASE_KINDS,
	/* test kinds (test/kinds/) */
	MLPLAT_KIND_ECHOES = MLPLAT_NUM_RELEASE_KINDS,
	MLPLAT_MAX_KINDS
} MlplatKind;

/*
 * A worker's status line, as the health view shows it.  A pass's line carries the shared
 * counters and then the kind's tail (the watch cache's size, ", listed"); tests and benches
 * read that tail, so the line must not be cut short: mlplat_pass_work_status warns in the
 * server log when it is.
 */
#define MLPLAT_STATUS_LEN 256

/* MLPLAT_NUM_RELEASE_KINDS, or MLPLAT_MAX_KINDS in the test build */
extern const int mlplat_num_kinds;

/* Stable names used in SQL, leader-lock keys and bgworker names. */
extern const char *const mlplat_kind_names[MLPLAT_MAX_KINDS];

/* -1 when the name is not a kind this library runs */
extern int mlplat_kind_from_name(const char *name);

#endif /* MLPLAT_KINDS_H */
