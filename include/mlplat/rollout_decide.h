/*
 * rollout_decide.h — what one observation of a rollout's InferenceService
 * means for the rollout, decided in pure C: no PostgreSQL headers, no SPI,
 * no I/O, no clock (the observation carries its time).  The rollouts pass
 * (rollouts.c) decides on the claimed row and its observation; the
 * write-back applies the decision; plan_rollout (rollout.h) makes the one
 * transition a due decision asks for, on the evidence record the pass builds
 * (rollout_pass_plan.h, which calls ml_rollout_after_plan too).
 *
 * Two steps, because plan_rollout sits between them:
 *
 *   ml_rollout_pass_decide(in, &d)   the claimed rollout and one observation →
 *                               KServe's names for our two revisions, the
 *                               traffic each has, and one step: wait for
 *                               KServe, close (the final route is proven),
 *                               note a reason, start a window, not yet due,
 *                               or decide (call plan_rollout);
 *   ml_rollout_after_plan(...)  plan_rollout's decision and reasons → the
 *                               rollout's new status, its status_reason and
 *                               when to look again after a hold.
 *
 * The rules are those of docs/rollouts.md ("The reconciler"); every text a
 * step writes (status_reason) is built here, so the SQL that applies a
 * decision only stores it.
 */
#ifndef MLPLAT_ROLLOUT_DECIDE_H
#define MLPLAT_ROLLOUT_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlplat/states.h"

/* What a user asked of an active rollout (rollouts.requested_action). */
typedef enum MlRolloutRequest
{
	ML_ROLLOUT_REQUEST_NONE = 0,
	ML_ROLLOUT_REQUEST_PROMOTE,
	ML_ROLLOUT_REQUEST_ABORT
} MlRolloutRequest;

/* One entry of the traffic KServe reports: a revision name and its percent. */
typedef struct MlRolloutTraffic
{
	const char *revision;
	int percent;
} MlRolloutTraffic;

typedef struct MlRolloutPassIn
{
	/* the claimed rollout */
	MlplatRolloutStatus status;
	MlRolloutRequest request;
	const char *fraction;	 /* the fraction it stands at, as decimal text ("0", "0.05"); NULL: 0 */
	const char *target_kn;	 /* KServe's name of the target revision, once fixed; NULL: not yet */
	const char *previous_kn; /* ... of the previous revision */
	bool window_started;	 /* window_start is set */
	bool has_decide_at;		 /* decide_at is set ... */
	int64_t decide_at_ms;	 /* ... to this (epoch ms) */
	int window_seconds;		 /* the policy's */
	/* one observation (the pass's, of an object carrying the wanted setting) */
	int64_t observed_at_ms;
	bool settled; /* KServe's status describes the wanted setting */
	const char *latest_created_kn;
	const char *rolledout_kn;
	const MlRolloutTraffic *traffic;
	size_t ntraffic;
	bool has_metrics; /* the request metrics of a window were gathered */
} MlRolloutPassIn;

typedef enum MlRolloutStep
{
	ML_ROLLOUT_STEP_WAIT = 0, /* KServe has not caught up with what we applied yet */
	ML_ROLLOUT_STEP_CLOSE,	  /* the final route is proven: close on close_kn with close_status */
	ML_ROLLOUT_STEP_REASON,	  /* nothing to decide: store status_reason (and clear the window if asked) */
	ML_ROLLOUT_STEP_START,	  /* a window starts: store window start, decide_at, status_reason */
	ML_ROLLOUT_STEP_NOT_DUE,  /* a window runs; no decision due yet */
	ML_ROLLOUT_STEP_DECIDE	  /* call plan_rollout on the evidence of this observation */
} MlRolloutStep;

#define ML_ROLLOUT_REASON_MAX 1024

typedef struct MlRolloutPassDecision
{
	int want_percent;	   /* canaryTrafficPercent the object must carry (-1: none) */
	bool fraction_zero;	   /* the rollout stands at 0% */
	const char *target_kn; /* KServe's names for our revisions (into the input), NULL: unknown */
	const char *previous_kn;
	int target_percent; /* traffic observed on each */
	int previous_percent;
	MlRolloutStep step;
	/* CLOSE */
	const char *close_kn;
	MlplatRolloutStatus close_status; /* PROMOTED, ROLLED_BACK or ABORTED */
	/* REASON, START */
	bool clear_window; /* REASON: the window in progress no longer describes the traffic */
	char status_reason[ML_ROLLOUT_REASON_MAX];
	/* START (and DECIDE after a START at 0%) */
	bool start_window;
	int64_t window_start_ms;
	int64_t decide_at_ms;
} MlRolloutPassDecision;

/*
 * canaryTrafficPercent for a rollout: 0 while rolling back, -1 (no canary
 * setting) once promotion is asked for, else the fraction in percent,
 * rounded half away from zero as SQL's numeric round does.  *zero (when not
 * NULL) says whether the fraction is 0.  A fraction that is no decimal
 * number in [0, 1] counts as 0.
 */
extern int ml_rollout_want_percent(MlplatRolloutStatus status, MlRolloutRequest request, const char *fraction,
								   bool *zero);

/* Decide what the observation in `in` means; fills *d.  Never fails. */
extern void ml_rollout_pass_decide(const MlRolloutPassIn *in, MlRolloutPassDecision *d);

/* What plan_rollout decided: its decision and reasons (in the order they are to be shown). */
typedef struct MlRolloutAfterPlan
{
	MlplatRolloutStatus status; /* PROGRESSING, ROLLING_BACK, AT_CEILING or HOLDING */
	bool keep_window;			/* HOLD: the window goes on, decided again at decide_at_ms */
	int64_t decide_at_ms;
	char status_reason[ML_ROLLOUT_REASON_MAX];
} MlRolloutAfterPlan;

/*
 * The rollout after plan_rollout's decision ("ADVANCE", "HOLD", "ROLLBACK")
 * with `reasons`, observed at observed_at_ms: after a hold it is looked at
 * again a fifth of a window later (1 s to 60 s), at the ceiling once per
 * window.  False (and *a untouched) for a decision that is none of the three.
 */
extern bool ml_rollout_after_plan(const char *decision, const char *const *reasons, size_t nreasons,
								  int window_seconds, int64_t observed_at_ms, MlRolloutAfterPlan *a);

/* The step's name as the write-back row carries it: "WAIT", "CLOSE", "REASON", "START", "NOT_DUE", "DECIDE" */
extern const char *ml_rollout_step_name(MlRolloutStep step);

/* "PROMOTE" / "ABORT" / anything else as an MlRolloutRequest */
extern MlRolloutRequest ml_rollout_request_of(const char *requested_action);

#endif /* MLPLAT_ROLLOUT_DECIDE_H */
