/*
 * rollout.h — the rollout decision function: contract + evidence → one
 * transition (ADVANCE, HOLD or ROLLBACK), pure and deterministic.
 *
 * No PostgreSQL headers, no I/O, no clock: the evaluation time is part of
 * the evidence.  The inputs are value trees from the project's JSON parser
 * (mlplat/json.h), not jsonb, because this runs without a server too (the
 * libFuzzer target fuzz/fuzz_plan_rollout.c, test/unit/rollout_test.c); the
 * SQL wrapper turns its jsonb arguments into such trees through the public
 * jsonb API (src/json/jsonb.c, src/rollout/evidence_jsonb.c); the output is canonical JSON (RFC 8785) built with
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
	ML_ROLLOUT_INVALID, /* input refused: see MlRolloutError */
	ML_ROLLOUT_NOMEM	/* the arena's allocator said no */
} MlRolloutStatus;

typedef struct MlRolloutError
{
	const char *rule;  /* static rule code, e.g. "boolean_count" */
	char path[160];	   /* "contract.policy.steps[2]", "evidence" */
	char message[240]; /* what is wrong with the field */
	char detail[400];  /* why the rule exists / the values involved */
	char hint[240];	   /* what to do about it */
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

/*
 * A string field: UTF-8 bytes (may contain NUL); NUL-terminated when read
 * from a tree, not necessarily when read from fields.  Compare by len.
 */
typedef struct MlRolloutStr
{
	const char *str;
	size_t len;
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
	double steps[ML_ROLLOUT_MAX_STEPS];
	size_t nsteps;
	double ceiling_fraction;
	int64_t min_samples;
	int64_t window_seconds;
	double max_error_rate;
	double max_p95_ms;
	double max_error_rate_increase;
	double max_p95_increase_ratio;
	int64_t health_max_age_seconds;
	int64_t surge_replicas;
	int64_t rollback_headroom_replicas;
	int64_t capacity_quota_replicas;
} MlRolloutPolicy;

typedef struct MlRolloutContract
{
	MlRolloutScope scope;
	MlRolloutPolicy policy;
	char content_id[ML_CONTENT_ID_LEN + 1];
	/*
	 * The SHA-256 state after the first 64 bytes of every text hashed for
	 * this contract: the evidence's canonical text and the plan's both begin
	 * {"contract_content_id":" and 40 digits of this id.
	 */
	MlSha256Prefix id_prefix;
} MlRolloutContract;

typedef struct MlRolloutRevision
{
	int64_t desired_replicas;
	int64_t ready_replicas;
	int64_t load_attempts;
	int64_t load_successes;
	bool has_health;			   /* health_observed_at was not null */
	int64_t health_observed_at_ms; /* epoch ms */
	int64_t requests;
	int64_t errors;
	bool has_p95; /* p95_ms was not null */
	double p95_ms;
} MlRolloutRevision;

typedef struct MlRolloutEvidence
{
	char contract_content_id[ML_CONTENT_ID_LEN + 1];
	MlRolloutScope scope;
	/* evidence times are seconds with up to millisecond precision, held in ms */
	int64_t observed_at_ms;
	double current_fraction;
	int64_t window_start_ms;
	int64_t window_ms;
	MlRolloutRevision target;
	MlRolloutRevision previous;
	int64_t desired_capacity;
	char content_id[ML_CONTENT_ID_LEN + 1];
} MlRolloutEvidence;

typedef struct MlRolloutPlan
{
	MlRolloutDecision decision;
	uint32_t reasons; /* bit (1u << MlRolloutReason) per reason */
	double current_fraction;
	double next_fraction;
	char contract_content_id[ML_CONTENT_ID_LEN + 1];
	char evidence_content_id[ML_CONTENT_ID_LEN + 1];
	char decision_digest[ML_CONTENT_ID_LEN + 1];
	const char *json; /* canonical output, NUL-terminated, in arena */
	size_t json_len;
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

/*
 * Evidence read in one pass, without a value tree.
 *
 * A caller that can find an evidence record's fields itself (the backend
 * walks the jsonb) hands them over as an array indexed by the field numbers
 * below: the record's members, then the members of scope, target and
 * previous, each group in the byte order of its keys (the key lists
 * ml_rollout_evidence_keys, _scope_keys and _revision_keys, NULL-terminated).
 * The slots of the three objects themselves are not read.  The caller
 * promises the shape: every part is an object with exactly those keys.
 * Values may live anywhere (strings need not be NUL-terminated; numbers come
 * from ml_json_number_view).  Validation is the tree reader's, field for
 * field; the content id is hashed from canonical text written straight from
 * the fields.  So for the same record both readers give the same evidence
 * or the same refusal.
 */
enum
{
	ML_EV_CONTENT_ID = 0,
	ML_EV_CONTRACT_CONTENT_ID,
	ML_EV_CURRENT_FRACTION,
	ML_EV_DESIRED_CAPACITY,
	ML_EV_OBSERVED_AT,
	ML_EV_PREVIOUS,
	ML_EV_SCOPE,
	ML_EV_TARGET,
	ML_EV_WINDOW_SECONDS,
	ML_EV_WINDOW_START,
	ML_EV_NROOT, /* 10 members */

	/* + ML_SCOPE_* */
	ML_EV_SCOPE_FIRST = ML_EV_NROOT,
	/* + ML_REV_* */
	ML_EV_TARGET_FIRST = ML_EV_SCOPE_FIRST + 6,
	ML_EV_PREVIOUS_FIRST = ML_EV_TARGET_FIRST + 8,
	ML_EV_NFIELDS = ML_EV_PREVIOUS_FIRST + 8
};

enum
{
	ML_SCOPE_CONFIG_DIGEST = 0,
	ML_SCOPE_DEPLOYMENT,
	ML_SCOPE_MODEL_DIGEST,
	ML_SCOPE_PREVIOUS_REVISION,
	ML_SCOPE_PROJECT,
	ML_SCOPE_TARGET_REVISION
};

enum
{
	ML_REV_DESIRED_REPLICAS = 0,
	ML_REV_ERRORS,
	ML_REV_HEALTH_OBSERVED_AT,
	ML_REV_LOAD_ATTEMPTS,
	ML_REV_LOAD_SUCCESSES,
	ML_REV_P95_MS,
	ML_REV_READY_REPLICAS,
	ML_REV_REQUESTS
};

extern const char *const ml_rollout_evidence_keys[];
extern const char *const ml_rollout_scope_keys[];
extern const char *const ml_rollout_revision_keys[];

/*
 * ml_rollout_read_evidence for a record given as its fields (see above).
 * prefix (may be NULL): the contract's id_prefix, which spares a block of the
 * content id's hashing when the record names that contract.
 */
extern MlRolloutStatus ml_rollout_read_evidence_fields(const MlJsonValue *const fields[ML_EV_NFIELDS],
													   const MlSha256Prefix *prefix,
													   MlRolloutEvidence *out, MlRolloutError *err);

/*
 * Content id of the record given as its fields, without its content_id
 * (what ml_json_content_id_excluding gives for the record's tree).  False
 * when a field is an array or object, or text would exceed the buffer that
 * validated fields always fit in (then the caller uses the tree).
 */
extern bool ml_rollout_evidence_fields_id(const MlJsonValue *const fields[ML_EV_NFIELDS],
										  const MlSha256Prefix *prefix,
										  char out[ML_CONTENT_ID_LEN + 1]);

/* "ADVANCE", "HOLD", "ROLLBACK" */
extern const char *ml_rollout_decision_name(MlRolloutDecision d);

/* "AT_CEILING", ...; NULL when out of range */
extern const char *ml_rollout_reason_name(int reason);

#endif /* MLPLAT_ROLLOUT_H */
