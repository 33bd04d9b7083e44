/*
 * rollout.h — the rollout decision function: contract + evidence → one
 * transition (ADVANCE, HOLD or ROLLBACK), pure and deterministic.
 *
 * No PostgreSQL headers, no I/O, no clock: the evaluation time is part of
 * the evidence.  The inputs are value trees from the project's JSON parser
 * (mlplat/json.h); the output is canonical JSON (RFC 8785) built with
 * mlplat/canonical.h, so the same inputs always give the same bytes.
 *
 * Every input is validated before anything is decided; a refusal carries a
 * rule code, the path of the offending field ("evidence.target.errors"), a
 * message, a detail and a hint.  The shapes, the rules and the reason codes
 * are documented in docs/rollouts.md.
 *
 * Typical use (the SQL wrapper in src/rollout/sql.c does exactly this):
 *
 *     MlRolloutPlan plan;
 *     MlRolloutError err;
 *     if (ml_rollout_plan(arena, contract_tree, evidence_tree, &plan, &err) != ML_ROLLOUT_OK)
 *         report(err.path, err.message, ...);
 *     use(plan.json, plan.json_len);
 *
 * The steps are also callable one by one (read the contract once, then
 * decide many evidence records against it).  Trees must come from
 * ml_json_parse (object lookups use its sorted key index).
 */
#ifndef MLPLAT_ROLLOUT_H
#define MLPLAT_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"

/* A policy has at most this many traffic steps. */
#define ML_ROLLOUT_MAX_STEPS 64

typedef enum MlRolloutStatus
{
	ML_ROLLOUT_OK = 0,
	ML_ROLLOUT_INVALID,			/* input refused: see MlRolloutError */
	ML_ROLLOUT_NOMEM			/* the arena's allocator said no */
} MlRolloutStatus;

typedef struct MlRolloutError
{
	const char *rule;			/* static rule code, e.g. "boolean_count" */
	char		path[160];		/* "contract.policy.steps[2]", "evidence" */
	char		message[240];	/* what is wrong with the field */
	char		detail[400];	/* why the rule exists / the values involved */
	char		hint[240];		/* what to do about it */
} MlRolloutError;

typedef enum MlRolloutDecision
{
	ML_ROLLOUT_ADVANCE = 0,
	ML_ROLLOUT_HOLD,
	ML_ROLLOUT_ROLLBACK
} MlRolloutDecision;

/*
 * Reason codes.  The enum is in the byte order of the names so that the
 * reasons of a plan, listed in enum order, come out sorted.
 */
typedef enum MlRolloutReason
{
	ML_REASON_ALL_GATES_PASSED = 0,
	ML_REASON_AT_CEILING,
	ML_REASON_ERROR_RATE_ABOVE_MAX,
	ML_REASON_ERROR_RATE_INCREASE_ABOVE_MAX,
	ML_REASON_INSUFFICIENT_SAMPLES,
	ML_REASON_P95_ABOVE_MAX,
	ML_REASON_P95_INCREASE_ABOVE_MAX,
	ML_REASON_P95_MISSING,
	ML_REASON_PREVIOUS_NOT_WARM,
	ML_REASON_TARGET_HEALTH_MISSING,
	ML_REASON_TARGET_HEALTH_STALE,
	ML_REASON_TARGET_LOAD_INCOMPLETE,
	ML_REASON_TARGET_NOT_READY,
	ML_REASON_TRAFFIC_COMPLETE,
	ML_REASON_WINDOW_INCOMPLETE,
	ML_REASON_COUNT
} MlRolloutReason;

/* A string field: UTF-8 bytes (may contain NUL), NUL-terminated. */
typedef struct MlRolloutStr
{
	const char *str;
	size_t		len;
} MlRolloutStr;

typedef struct MlRolloutScope
{
	MlRolloutStr project;
	MlRolloutStr deployment;
	MlRolloutStr target_revision;
	MlRolloutStr previous_revision;
	MlRolloutStr model_digest;
	MlRolloutStr config_digest;
} MlRolloutScope;

typedef struct MlRolloutPolicy
{
	double		steps[ML_ROLLOUT_MAX_STEPS];
	size_t		nsteps;
	double		ceiling_fraction;
	int64_t		min_samples;
	int64_t		window_seconds;
	double		max_error_rate;
	double		max_p95_ms;
	double		max_error_rate_increase;
	double		max_p95_increase_ratio;
	int64_t		health_max_age_seconds;
	int64_t		surge_replicas;
	int64_t		rollback_headroom_replicas;
	int64_t		capacity_quota_replicas;
} MlRolloutPolicy;

typedef struct MlRolloutContract
{
	MlRolloutScope scope;
	MlRolloutPolicy policy;
	char		content_id[ML_CONTENT_ID_LEN + 1];
} MlRolloutContract;

typedef struct MlRolloutRevision
{
	int64_t		desired_replicas;
	int64_t		ready_replicas;
	int64_t		load_attempts;
	int64_t		load_successes;
	bool		has_health;		/* health_observed_at was not null */
	int64_t		health_observed_at_ms;	/* epoch ms */
	int64_t		requests;
	int64_t		errors;
	bool		has_p95;		/* p95_ms was not null */
	double		p95_ms;
} MlRolloutRevision;

typedef struct MlRolloutEvidence
{
	char		contract_content_id[ML_CONTENT_ID_LEN + 1];
	MlRolloutScope scope;
	/* evidence times are seconds with up to millisecond precision, held in ms */
	int64_t		observed_at_ms;
	double		current_fraction;
	int64_t		window_start_ms;
	int64_t		window_ms;
	MlRolloutRevision target;
	MlRolloutRevision previous;
	int64_t		desired_capacity;
	char		content_id[ML_CONTENT_ID_LEN + 1];
} MlRolloutEvidence;

typedef struct MlRolloutPlan
{
	MlRolloutDecision decision;
	uint32_t	reasons;		/* bit (1u << MlRolloutReason) per reason */
	double		current_fraction;
	double		next_fraction;
	char		contract_content_id[ML_CONTENT_ID_LEN + 1];
	char		evidence_content_id[ML_CONTENT_ID_LEN + 1];
	char		decision_digest[ML_CONTENT_ID_LEN + 1];
	const char *json;			/* canonical output, NUL-terminated, in arena */
	size_t		json_len;
} MlRolloutPlan;

/*
 * Validate a contract tree and read it into *out (strings point into the
 * tree, so keep the tree's arena alive as long as *out).  Checks the shape,
 * every range and the contract's own content_id.
 */
extern MlRolloutStatus ml_rollout_read_contract(MlJsonArena *arena, const MlJsonValue *v,
												MlRolloutContract *out, MlRolloutError *err);

/* The same for an evidence record (shape, ranges, internal consistency, content_id). */
extern MlRolloutStatus ml_rollout_read_evidence(MlJsonArena *arena, const MlJsonValue *v,
												MlRolloutEvidence *out, MlRolloutError *err);

/*
 * Check that evidence belongs to contract (contract id, scope, capacity,
 * ceiling), then decide exactly one transition and write the output JSON
 * into arena.
 */
extern MlRolloutStatus ml_rollout_decide(MlJsonArena *arena, const MlRolloutContract *contract,
										 const MlRolloutEvidence *evidence,
										 MlRolloutPlan *plan, MlRolloutError *err);

/* read_contract + read_evidence + decide. */
extern MlRolloutStatus ml_rollout_plan(MlJsonArena *arena, const MlJsonValue *contract,
									   const MlJsonValue *evidence,
									   MlRolloutPlan *plan, MlRolloutError *err);

/* "ADVANCE", "HOLD", "ROLLBACK" */
extern const char *ml_rollout_decision_name(MlRolloutDecision d);

/* "AT_CEILING", ...; NULL when out of range */
extern const char *ml_rollout_reason_name(int reason);

#endif							/* MLPLAT_ROLLOUT_H */
