/*
 * rollout_pass_plan.h — a due rollout decision, made once in the pass: the
 * evidence record of one observation, its content id, plan_rollout's
 * transition on it and the rollout's status after it.  Pure C: no
 * PostgreSQL headers, no I/O, no clock (the observation carries its time).
 *
 * The rollouts pass (rollouts.c) calls it when ml_rollout_pass_decide says
 * DECIDE, with the claimed contract and replica counts; the write-back row
 * carries the result and SQL only stores it (the ledger row, the status).
 * mlplat._rollout_pass_plan is its SQL face, for the regression tests.
 *
 * The evidence is written as the JSON text SQL's jsonb_build_object made of
 * the same inputs before (mlplat._rollout_evidence, up to 0.3.0): the same
 * members, and every number with the same text (the fraction as the claim
 * gives it, times with trailing zeros trimmed, p95 copied as observed), so
 * the jsonb stored and its content id are the same as then.
 */
#ifndef MLPLAT_ROLLOUT_PASS_PLAN_H
#define MLPLAT_ROLLOUT_PASS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"
#include "mlplat/rollout_decide.h"

typedef struct MlRolloutPassPlanIn
{
	const MlJsonValue *contract; /* the rollout's frozen contract (NULL: none, refused) */
	const char *fraction;		 /* the fraction it stands at, decimal text as SQL prints it; NULL: "0" */
	int64_t target_replicas;	 /* replicas each revision must keep ready (mlplat._rollout_replicas) */
	int64_t previous_replicas;
	const MlJsonValue *observation; /* the pass's observation (rollouts.c, observe_object and add_metrics) */
	const char *target_kn;			/* KServe's names of the two revisions, as the decision fixed them */
	const char *previous_kn;
	int window_seconds;		/* the policy's */
	int64_t observed_at_ms; /* the observation's time, epoch ms */
} MlRolloutPassPlanIn;

#define ML_ROLLOUT_REFUSAL_MAX 512

typedef struct MlRolloutPassPlan
{
	/* the evidence record with its content id, JSON text in the arena */
	const char *evidence;
	size_t evidence_len;
	char evidence_content_id[ML_CONTENT_ID_LEN + 1];
	/* plan_rollout refused the evidence: refusal says why (the plan and after are unset) */
	bool refused;
	char refusal[ML_ROLLOUT_REFUSAL_MAX];
	/* plan_rollout's transition: plan.json is its output */
	MlRolloutPlan plan;
	const char *decision;
	const char *reasons[ML_REASON_COUNT]; /* in byte order, as the plan lists them */
	size_t nreasons;
	char next_fraction[32]; /* as the plan writes it */
	/* the rollout after it */
	MlRolloutAfterPlan after;
} MlRolloutPassPlan;

/*
 * A request count as the evidence holds it, from a metric's value: rounded
 * to the nearest whole number, 0 at or below zero, held at INT64_MAX from
 * 2^63 up (a double beyond int64's range has no defined conversion in C, and
 * a hostile or broken Prometheus can answer 1e300).
 */
extern int64_t ml_rollout_count(double value);

/*
 * Build the evidence of in->observation, hash it, call plan_rollout's core and
 * ml_rollout_after_plan.  ML_ROLLOUT_OK also when plan_rollout refused (see
 * out->refused); ML_ROLLOUT_NOMEM when the arena said no.
 */
extern MlRolloutStatus ml_rollout_pass_plan(MlJsonArena *arena, const MlRolloutPassPlanIn *in,
											MlRolloutPassPlan *out);

#endif /* MLPLAT_ROLLOUT_PASS_PLAN_H */
