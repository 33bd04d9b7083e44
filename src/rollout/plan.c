/*
 * plan.c — the rollout decision function (see include/mlplat/rollout.h and
 * docs/rollouts.md).  Pure: no PostgreSQL, no I/O, no clock.
 *
 * Structure: the records read part by part with the field readers of
 * read.c (each validates one field and fails with the field's path and the
 * rule it breaks), from a value tree or, for evidence, from fields a caller
 * found itself; the binding checks between evidence and contract; the
 * decision; the canonical output.  Nothing is decided until both records
 * have been read completely.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"
#include "read.h"

static const char *const reason_names[ML_REASON_COUNT] = {
	"ALL_GATES_PASSED",
	"AT_CEILING",
	"ERROR_RATE_ABOVE_MAX",
	"ERROR_RATE_INCREASE_ABOVE_MAX",
	"INSUFFICIENT_SAMPLES",
	"P95_ABOVE_MAX",
	"P95_INCREASE_ABOVE_MAX",
	"P95_MISSING",
	"PREVIOUS_NOT_WARM",
	"TARGET_HEALTH_MISSING",
	"TARGET_HEALTH_STALE",
	"TARGET_LOAD_INCOMPLETE",
	"TARGET_NOT_READY",
	"TRAFFIC_COMPLETE",
	"WINDOW_INCOMPLETE",
};

const char *
ml_rollout_reason_name(int reason)
{
	if (reason < 0 || reason >= ML_REASON_COUNT)
		return NULL;
	return reason_names[reason];
}

const char *
ml_rollout_decision_name(MlRolloutDecision d)
{
	switch (d)
	{
		case ML_ROLLOUT_ADVANCE:
			return "ADVANCE";
		case ML_ROLLOUT_HOLD:
			return "HOLD";
		case ML_ROLLOUT_ROLLBACK:
			return "ROLLBACK";
	}
	return "?";
}

/* The record's content_id must be the id of the record without it. */
static bool
check_content_id(RoReader *r, const char *path, const char *claimed, const char *actual)
{
	if (strcmp(actual, claimed) != 0)
	{
		ro_error(r->err, "content_id_mismatch", path, "content_id",
				 "does not match the record's content");
		ro_detail(r->err, "The record says %s but its content (without content_id) has id %s. "
						  "A record edited after its id was computed is refused.",
				  claimed, actual);
		return false;
	}
	return true;
}

static bool
id_failed(RoReader *r, const char *path, const char *why)
{
	r->nomem = true;
	return ro_error(r->err, "nomem", path, "content_id", "could not be computed: %s", why);
}

/* The same, hashing the record's tree. */
static bool
verify_content_id(RoReader *r, MlJsonArena *arena, const MlJsonValue *record,
				  const char *path, const char *claimed)
{
	char actual[ML_CONTENT_ID_LEN + 1];
	MlJsonError jerr;

	if (!ml_json_content_id_excluding(arena, record, "content_id", actual, &jerr))
		return id_failed(r, path, jerr.message);
	return check_content_id(r, path, claimed, actual);
}

/* f[i] = obj's member keys[i], for an object that passed ro_check_keys */
static void
find_fields(const MlJsonValue *obj, const char *const *keys, const MlJsonValue **f)
{
	for (size_t i = 0; keys[i] != NULL; i++)
		f[i] = ml_json_object_get(obj, keys[i]);
}

const char *const ml_rollout_scope_keys[] = {
	"config_digest", "deployment", "model_digest", "previous_revision", "project",
	"target_revision", NULL
};

/* scope from its fields f[ML_SCOPE_*] */
static bool
read_scope(RoReader *r, const MlJsonValue *const *f, const char *path, MlRolloutScope *s)
{
	if (!ro_string(r, f[ML_SCOPE_PROJECT], path, "project", &s->project) ||
		!ro_string(r, f[ML_SCOPE_DEPLOYMENT], path, "deployment", &s->deployment) ||
		!ro_string(r, f[ML_SCOPE_TARGET_REVISION], path, "target_revision", &s->target_revision) ||
		!ro_string(r, f[ML_SCOPE_PREVIOUS_REVISION], path, "previous_revision",
				   &s->previous_revision) ||
		!ro_digest(r, f[ML_SCOPE_MODEL_DIGEST], path, "model_digest", &s->model_digest) ||
		!ro_digest(r, f[ML_SCOPE_CONFIG_DIGEST], path, "config_digest", &s->config_digest))
		return false;
	if (s->target_revision.len == s->previous_revision.len &&
		memcmp(s->target_revision.str, s->previous_revision.str, s->target_revision.len) == 0)
		return ro_error(r->err, "inconsistent", path, "previous_revision",
						"must differ from target_revision");
	return true;
}

/* ---- contract --------------------------------------------------------- */

static const char *const contract_keys[] = { "content_id", "policy", "scope", NULL };

static const char *const policy_keys[] = {
	"capacity_quota_replicas", "ceiling_fraction", "health_max_age_seconds",
	"max_error_rate", "max_error_rate_increase", "max_p95_increase_ratio", "max_p95_ms",
	"min_samples", "rollback_headroom_replicas", "steps", "surge_replicas",
	"window_seconds", NULL
};

/*
 * The first SHA-256 block shared by the texts hashed for this contract (see
 * MlRolloutContract): without it (libcrypto failed) every text is hashed whole.
 */
static void
set_id_prefix(MlRolloutContract *c)
{
	static const char head[] = "{\"contract_content_id\":\"";
	char block[64];

	memcpy(block, head, sizeof(head) - 1);
	memcpy(block + sizeof(head) - 1, c->content_id, sizeof(block) - (sizeof(head) - 1));
	(void) ml_sha256_prefix(&c->id_prefix, block, sizeof(block));
}

static bool
read_policy(RoReader *r, const MlJsonValue *obj, const char *path, MlRolloutPolicy *p)
{
	const MlJsonValue *steps;

	if (!ro_check_keys(r, obj, path, policy_keys))
		return false;

	steps = ml_json_object_get(obj, "steps");
	if (steps->type != ML_JSON_ARRAY)
		return ro_error(r->err, "wrong_type", path, "steps",
						"must be an array of fractions, not %s", ml_json_type_name(steps->type));
	if (steps->u.array.count == 0 || steps->u.array.count > ML_ROLLOUT_MAX_STEPS)
		return ro_error(r->err, "out_of_range", path, "steps",
						"must have between 1 and %d steps (got %zu)",
						ML_ROLLOUT_MAX_STEPS, steps->u.array.count);
	p->nsteps = steps->u.array.count;
	for (size_t i = 0; i < p->nsteps; i++)
	{
		char idx[24];
		char parent[160];

		snprintf(idx, sizeof(idx), "[%zu]", i);
		snprintf(parent, sizeof(parent), "%s.steps", path);
		if (!ro_ranged(r, steps->u.array.items[i], parent, idx, 0, true, 1,
					   "a fraction in (0, 1]", &p->steps[i]))
			return false;
		if (i > 0 && p->steps[i] <= p->steps[i - 1])
			return ro_error(r->err, "out_of_range", parent, idx,
							"must be greater than the step before it (%s <= %s); steps strictly increase",
							ro_num(p->steps[i]).s, ro_num(p->steps[i - 1]).s);
	}
	if (!ro_ranged_in(r, obj, path, "ceiling_fraction", 0, true, 1, "a fraction in (0, 1]",
					  &p->ceiling_fraction))
		return false;
	if (p->ceiling_fraction > p->steps[p->nsteps - 1])
		return ro_error(r->err, "out_of_range", path, "ceiling_fraction",
						"must not exceed the last step (%s > %s): the ceiling caps the step schedule",
						ro_num(p->ceiling_fraction).s, ro_num(p->steps[p->nsteps - 1]).s);
	if (!ro_count_in(r, obj, path, "min_samples", 1, &p->min_samples) ||
		!ro_count_in(r, obj, path, "window_seconds", 1, &p->window_seconds) ||
		!ro_ranged_in(r, obj, path, "max_error_rate", 0, false, 1, "a fraction in [0, 1]",
					  &p->max_error_rate) ||
		!ro_ranged_in(r, obj, path, "max_p95_ms", 0, true, INFINITY, "a number above 0",
					  &p->max_p95_ms) ||
		!ro_ranged_in(r, obj, path, "max_error_rate_increase", 0, false, 1, "a fraction in [0, 1]",
					  &p->max_error_rate_increase) ||
		!ro_ranged_in(r, obj, path, "max_p95_increase_ratio", 1, false, INFINITY,
					  "a ratio of at least 1", &p->max_p95_increase_ratio) ||
		!ro_count_in(r, obj, path, "health_max_age_seconds", 1, &p->health_max_age_seconds) ||
		!ro_count_in(r, obj, path, "surge_replicas", 0, &p->surge_replicas) ||
		!ro_count_in(r, obj, path, "rollback_headroom_replicas", 0, &p->rollback_headroom_replicas) ||
		!ro_count_in(r, obj, path, "capacity_quota_replicas", 1, &p->capacity_quota_replicas))
		return false;
	return true;
}

static MlRolloutStatus
status_of(const RoReader *r)
{
	return r->nomem ? ML_ROLLOUT_NOMEM : ML_ROLLOUT_INVALID;
}

MlRolloutStatus
ml_rollout_read_contract(MlJsonArena *arena, const MlJsonValue *v,
						 MlRolloutContract *out, MlRolloutError *err)
{
	RoReader r = { err, false };
	const MlJsonValue *scope;
	const MlJsonValue *sf[6];

	memset(out, 0, sizeof(*out));
	if (!ro_check_keys(&r, v, "contract", contract_keys))
		return status_of(&r);
	scope = ml_json_object_get(v, "scope");
	if (!ro_check_keys(&r, scope, "contract.scope", ml_rollout_scope_keys))
		return status_of(&r);
	find_fields(scope, ml_rollout_scope_keys, sf);
	if (!read_scope(&r, sf, "contract.scope", &out->scope) ||
		!read_policy(&r, ml_json_object_get(v, "policy"), "contract.policy", &out->policy) ||
		!ro_content_id(&r, ml_json_object_get(v, "content_id"), "contract", "content_id",
					   out->content_id) ||
		!verify_content_id(&r, arena, v, "contract", out->content_id))
		return status_of(&r);
	set_id_prefix(out);
	return ML_ROLLOUT_OK;
}

/* ---- evidence --------------------------------------------------------- */

const char *const ml_rollout_evidence_keys[] = {
	"content_id", "contract_content_id", "current_fraction", "desired_capacity",
	"observed_at", "previous", "scope", "target", "window_seconds", "window_start", NULL
};

const char *const ml_rollout_revision_keys[] = {
	"desired_replicas", "errors", "health_observed_at", "load_attempts", "load_successes",
	"p95_ms", "ready_replicas", "requests", NULL
};

/* a revision from its fields f[ML_REV_*] */
static bool
read_revision(RoReader *r, const MlJsonValue *const *f, const char *path, int64_t observed_at_ms,
			  MlRolloutRevision *rev)
{
	const MlJsonValue *p95 = f[ML_REV_P95_MS];

	if (!ro_count(r, f[ML_REV_DESIRED_REPLICAS], path, "desired_replicas", 0,
				  &rev->desired_replicas) ||
		!ro_count(r, f[ML_REV_READY_REPLICAS], path, "ready_replicas", 0, &rev->ready_replicas) ||
		!ro_count(r, f[ML_REV_LOAD_ATTEMPTS], path, "load_attempts", 0, &rev->load_attempts) ||
		!ro_count(r, f[ML_REV_LOAD_SUCCESSES], path, "load_successes", 0, &rev->load_successes) ||
		!ro_ms_or_null(r, f[ML_REV_HEALTH_OBSERVED_AT], path, "health_observed_at",
					   &rev->has_health, &rev->health_observed_at_ms) ||
		!ro_count(r, f[ML_REV_REQUESTS], path, "requests", 0, &rev->requests) ||
		!ro_count(r, f[ML_REV_ERRORS], path, "errors", 0, &rev->errors))
		return false;
	rev->has_p95 = p95->type != ML_JSON_NULL;
	rev->p95_ms = 0;
	if (rev->has_p95 &&
		!ro_ranged(r, p95, path, "p95_ms", 0, false, INFINITY,
				   "a non-negative number of milliseconds or null", &rev->p95_ms))
		return false;

	if (rev->ready_replicas > rev->desired_replicas)
		return ro_error(r->err, "inconsistent", path, "ready_replicas",
						"must not exceed desired_replicas (%lld > %lld)",
						(long long) rev->ready_replicas, (long long) rev->desired_replicas);
	if (rev->load_successes > rev->load_attempts)
		return ro_error(r->err, "inconsistent", path, "load_successes",
						"must not exceed load_attempts (%lld > %lld)",
						(long long) rev->load_successes, (long long) rev->load_attempts);
	if (rev->errors > rev->requests)
		return ro_error(r->err, "inconsistent", path, "errors",
						"must not exceed requests (%lld > %lld)",
						(long long) rev->errors, (long long) rev->requests);
	if (rev->has_health && rev->health_observed_at_ms > observed_at_ms)
		return ro_error(r->err, "inconsistent", path, "health_observed_at",
						"must not be later than the evidence's observed_at (%s > %s)",
						ro_secs(rev->health_observed_at_ms).s, ro_secs(observed_at_ms).s);
	return true;
}

/*
 * Check the shape of one part of an evidence tree (the record itself when
 * key is NULL, else its member key) and find its fields: done part by part,
 * where the reading below reaches the part, so that the first error found
 * is the one the rules list first.
 */
static bool
open_part(RoReader *r, const MlJsonValue *tree, const char *key, const char *path,
		  const char *const *keys, const MlJsonValue **f)
{
	const MlJsonValue *obj = key ? ml_json_object_get(tree, key) : tree;

	if (!ro_check_keys(r, obj, path, keys))
		return false;
	find_fields(obj, keys, f);
	return true;
}

/*
 * Read and check every field but the content id against the content.  With
 * a tree, its parts are opened on the way (f is filled from it); without,
 * f already holds every field.
 */
static bool
read_evidence(RoReader *r, const MlJsonValue *tree, const MlJsonValue **f,
			  MlRolloutEvidence *out)
{
	MlRolloutError *err = r->err;

	memset(out, 0, sizeof(*out));
	if (tree != NULL &&
		!open_part(r, tree, NULL, "evidence", ml_rollout_evidence_keys, f))
		return false;
	if (!ro_content_id(r, f[ML_EV_CONTRACT_CONTENT_ID], "evidence", "contract_content_id",
					   out->contract_content_id))
		return false;
	if (tree != NULL &&
		!open_part(r, tree, "scope", "evidence.scope", ml_rollout_scope_keys,
				   f + ML_EV_SCOPE_FIRST))
		return false;
	if (!read_scope(r, f + ML_EV_SCOPE_FIRST, "evidence.scope", &out->scope) ||
		!ro_ms(r, f[ML_EV_OBSERVED_AT], "evidence", "observed_at", &out->observed_at_ms) ||
		!ro_ranged(r, f[ML_EV_CURRENT_FRACTION], "evidence", "current_fraction", 0, false, 1,
				   "a fraction in [0, 1]", &out->current_fraction) ||
		!ro_ms(r, f[ML_EV_WINDOW_START], "evidence", "window_start", &out->window_start_ms) ||
		!ro_ms(r, f[ML_EV_WINDOW_SECONDS], "evidence", "window_seconds", &out->window_ms))
		return false;
	if (tree != NULL &&
		!open_part(r, tree, "target", "evidence.target", ml_rollout_revision_keys,
				   f + ML_EV_TARGET_FIRST))
		return false;
	if (!read_revision(r, f + ML_EV_TARGET_FIRST, "evidence.target", out->observed_at_ms,
					   &out->target))
		return false;
	if (tree != NULL &&
		!open_part(r, tree, "previous", "evidence.previous", ml_rollout_revision_keys,
				   f + ML_EV_PREVIOUS_FIRST))
		return false;
	if (!read_revision(r, f + ML_EV_PREVIOUS_FIRST, "evidence.previous", out->observed_at_ms,
					   &out->previous) ||
		!ro_count(r, f[ML_EV_DESIRED_CAPACITY], "evidence", "desired_capacity", 0,
				  &out->desired_capacity) ||
		!ro_content_id(r, f[ML_EV_CONTENT_ID], "evidence", "content_id", out->content_id))
		return false;

	if (out->window_start_ms + out->window_ms > out->observed_at_ms)
		return ro_error(err, "inconsistent", "evidence", "window_seconds",
						"must end by observed_at (window_start %s + window_seconds %s > observed_at %s)",
						ro_secs(out->window_start_ms).s, ro_secs(out->window_ms).s,
						ro_secs(out->observed_at_ms).s);
	if (out->desired_capacity != out->target.desired_replicas + out->previous.desired_replicas)
		return ro_error(err, "inconsistent", "evidence", "desired_capacity",
						"must equal target.desired_replicas + previous.desired_replicas (%lld != %lld + %lld)",
						(long long) out->desired_capacity,
						(long long) out->target.desired_replicas,
						(long long) out->previous.desired_replicas);
	return true;
}

MlRolloutStatus
ml_rollout_read_evidence(MlJsonArena *arena, const MlJsonValue *v,
						 MlRolloutEvidence *out, MlRolloutError *err)
{
	RoReader r = { err, false };
	const MlJsonValue *f[ML_EV_NFIELDS] = { 0 };

	if (!read_evidence(&r, v, f, out) ||
		!verify_content_id(&r, arena, v, "evidence", out->content_id))
		return status_of(&r);
	return ML_ROLLOUT_OK;
}

MlRolloutStatus
ml_rollout_read_evidence_fields(const MlJsonValue *const fields[ML_EV_NFIELDS],
								const MlSha256Prefix *prefix, MlRolloutEvidence *out,
								MlRolloutError *err)
{
	RoReader r = { err, false };
	const MlJsonValue *f[ML_EV_NFIELDS];
	char actual[ML_CONTENT_ID_LEN + 1];

	memcpy(f, fields, sizeof(f));
	if (!read_evidence(&r, NULL, f, out))
		return status_of(&r);
	if (!ml_rollout_evidence_fields_id(fields, prefix, actual))
	{
		id_failed(&r, "evidence", "the fields do not make a canonical text");
		return status_of(&r);
	}
	if (!check_content_id(&r, "evidence", out->content_id, actual))
		return status_of(&r);
	return ML_ROLLOUT_OK;
}

/* ---- binding ---------------------------------------------------------- */

static bool
str_eq(const MlRolloutStr *a, const MlRolloutStr *b)
{
	return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static bool
check_binding(const MlRolloutContract *c, const MlRolloutEvidence *e, MlRolloutError *err)
{
	static const char *const names[] = {
		"project", "deployment", "target_revision", "previous_revision",
		"model_digest", "config_digest"
	};
	const MlRolloutStr *cs[6] = {
		&c->scope.project, &c->scope.deployment, &c->scope.target_revision,
		&c->scope.previous_revision, &c->scope.model_digest, &c->scope.config_digest
	};
	const MlRolloutStr *es[6] = {
		&e->scope.project, &e->scope.deployment, &e->scope.target_revision,
		&e->scope.previous_revision, &e->scope.model_digest, &e->scope.config_digest
	};
	const MlRolloutPolicy *p = &c->policy;
	int64_t need;

	if (strcmp(c->content_id, e->contract_content_id) != 0)
	{
		ro_error(err, "contract_mismatch", "evidence", "contract_content_id",
				 "names another contract");
		ro_detail(err, "The evidence was gathered for contract %s; this contract is %s.",
				  e->contract_content_id, c->content_id);
		return false;
	}
	for (int i = 0; i < 6; i++)
	{
		if (!str_eq(cs[i], es[i]))
		{
			ro_error(err, "scope_mismatch", "evidence.scope", names[i],
					 "differs from contract.scope.%s", names[i]);
			return false;
		}
	}
	need = e->target.desired_replicas + e->previous.desired_replicas +
		   p->rollback_headroom_replicas + p->surge_replicas;
	if (need > p->capacity_quota_replicas)
	{
		ro_error(err, "overcommit", "evidence", "desired_capacity",
				 "overcommits the capacity quota: %lld desired + %lld rollback headroom + %lld surge = %lld > %lld",
				 (long long) e->desired_capacity, (long long) p->rollback_headroom_replicas,
				 (long long) p->surge_replicas, (long long) need,
				 (long long) p->capacity_quota_replicas);
		return false;
	}
	if (e->current_fraction > p->ceiling_fraction)
	{
		ro_error(err, "above_ceiling", "evidence", "current_fraction",
				 "is above the policy ceiling (%s > %s)",
				 ro_num(e->current_fraction).s, ro_num(p->ceiling_fraction).s);
		return false;
	}
	return true;
}

/* ---- decision --------------------------------------------------------- */

#define BIT(r) (1u << (r))

static uint32_t
regressions(const MlRolloutPolicy *p, const MlRolloutEvidence *e)
{
	const MlRolloutRevision *t = &e->target;
	const MlRolloutRevision *prev = &e->previous;
	uint32_t found = 0;
	double rate_t;

	/* only a complete window with enough samples demonstrates anything */
	if (e->window_ms < p->window_seconds * 1000 || t->requests < p->min_samples)
		return 0;
	rate_t = (double) t->errors / (double) t->requests;
	if (rate_t > p->max_error_rate)
		found |= BIT(ML_REASON_ERROR_RATE_ABOVE_MAX);
	if (t->has_p95 && t->p95_ms > p->max_p95_ms)
		found |= BIT(ML_REASON_P95_ABOVE_MAX);
	/* relative to the previous revision only when it has enough samples too */
	if (prev->requests >= p->min_samples)
	{
		double rate_p = (double) prev->errors / (double) prev->requests;

		if (rate_t - rate_p > p->max_error_rate_increase)
			found |= BIT(ML_REASON_ERROR_RATE_INCREASE_ABOVE_MAX);
		if (t->has_p95 && prev->has_p95 && prev->p95_ms > 0 &&
			t->p95_ms > prev->p95_ms * p->max_p95_increase_ratio)
			found |= BIT(ML_REASON_P95_INCREASE_ABOVE_MAX);
	}
	return found;
}

static uint32_t
holds(const MlRolloutPolicy *p, const MlRolloutEvidence *e)
{
	const MlRolloutRevision *t = &e->target;
	const MlRolloutRevision *prev = &e->previous;
	uint32_t found = 0;

	/* readiness of the target */
	if (t->desired_replicas == 0 || t->ready_replicas < t->desired_replicas)
		found |= BIT(ML_REASON_TARGET_NOT_READY);
	if (t->load_attempts == 0 || t->load_successes < t->load_attempts)
		found |= BIT(ML_REASON_TARGET_LOAD_INCOMPLETE);
	if (!t->has_health)
		found |= BIT(ML_REASON_TARGET_HEALTH_MISSING);
	else if (e->observed_at_ms - t->health_observed_at_ms > p->health_max_age_seconds * 1000)
		found |= BIT(ML_REASON_TARGET_HEALTH_STALE);
	/* the rollback route must be warm before more traffic moves */
	if (prev->desired_replicas == 0 || prev->ready_replicas < prev->desired_replicas)
		found |= BIT(ML_REASON_PREVIOUS_NOT_WARM);
	/* request evidence: only once the target carries traffic */
	if (e->current_fraction > 0)
	{
		if (e->window_ms < p->window_seconds * 1000)
			found |= BIT(ML_REASON_WINDOW_INCOMPLETE);
		if (t->requests < p->min_samples)
			found |= BIT(ML_REASON_INSUFFICIENT_SAMPLES);
		if (!t->has_p95)
			found |= BIT(ML_REASON_P95_MISSING);
	}
	/* the end of the schedule: hold for a separately authorized promotion */
	if (e->current_fraction >= p->ceiling_fraction)
		found |= p->ceiling_fraction >= 1.0 ? BIT(ML_REASON_TRAFFIC_COMPLETE)
											: BIT(ML_REASON_AT_CEILING);
	return found;
}

static double
next_step(const MlRolloutPolicy *p, double current)
{
	for (size_t i = 0; i < p->nsteps; i++)
	{
		if (p->steps[i] > current)
			return p->steps[i] < p->ceiling_fraction ? p->steps[i] : p->ceiling_fraction;
	}
	/* unreachable: current < ceiling <= last step */
	return p->ceiling_fraction;
}

/* ---- output ----------------------------------------------------------- */

static MlRolloutStatus
nomem(MlRolloutError *err, const char *what)
{
	ro_error(err, "nomem", "plan", NULL, "out of memory %s", what);
	return ML_ROLLOUT_NOMEM;
}

/* Bounded text being written; every piece below is ASCII that needs no escaping. */
typedef struct OutBuf
{
	char s[1024];
	size_t len;
} OutBuf;

static void
out_raw(OutBuf *o, const char *s, size_t n)
{
	memcpy(o->s + o->len, s, n);
	o->len += n;
}

#define OUT_LIT(o, lit) out_raw((o), (lit), sizeof(lit) - 1)

static void
out_str(OutBuf *o, const char *s)
{
	o->s[o->len++] = '"';
	out_raw(o, s, strlen(s));
	o->s[o->len++] = '"';
}

/*
 * The output object in canonical form (RFC 8785), written directly: its
 * members in key order (ASCII keys, so byte order is UTF-16 order), strings
 * that never need escapes (ids are lower-case hex, names are upper-case
 * ASCII), numbers as the canonical writer formats them.  decision_digest is
 * the content id of the object without it, so the text is written twice: once
 * without the digest to hash, once with it.  At most 15 reasons of < 32
 * bytes, three 64-digit ids and two numbers: 1024 bytes always suffice.
 */
static MlRolloutStatus
write_output(MlJsonArena *arena, const MlSha256Prefix *prefix, MlRolloutPlan *plan,
			 MlRolloutError *err)
{
	OutBuf o;
	char cur[32],
		next[32];
	size_t head_len;
	char *text;
	bool first = true;

	if (ml_json_format_number(plan->current_fraction, cur) == 0 ||
		ml_json_format_number(plan->next_fraction, next) == 0)
		return nomem(err, "hashing the plan"); /* fractions were checked finite */

	o.len = 0;
	OUT_LIT(&o, "{\"contract_content_id\":");
	out_str(&o, plan->contract_content_id);
	OUT_LIT(&o, ",\"current_fraction\":");
	out_raw(&o, cur, strlen(cur));
	OUT_LIT(&o, ",\"decision\":");
	out_str(&o, ml_rollout_decision_name(plan->decision));
	head_len = o.len; /* "decision_digest" goes here */
	OUT_LIT(&o, ",\"evidence_content_id\":");
	out_str(&o, plan->evidence_content_id);
	OUT_LIT(&o, ",\"next_fraction\":");
	out_raw(&o, next, strlen(next));
	OUT_LIT(&o, ",\"reasons\":[");
	for (int i = 0; i < ML_REASON_COUNT; i++)
	{
		if (plan->reasons & BIT(i))
		{
			if (!first)
				o.s[o.len++] = ',';
			first = false;
			out_str(&o, reason_names[i]);
		}
	}
	OUT_LIT(&o, "]}");

	if (!ml_sha256_hex_prefixed(prefix, o.s, o.len, plan->decision_digest))
		return nomem(err, "hashing the plan");

	/* the same text with ,"decision_digest":"<64 hex>" after "decision" */
	text = ml_json_arena_alloc(arena, o.len + 21 + ML_CONTENT_ID_LEN + 1);
	if (text == NULL)
		return nomem(err, "writing the plan");
	memcpy(text, o.s, head_len);
	memcpy(text + head_len, ",\"decision_digest\":\"", 20);
	memcpy(text + head_len + 20, plan->decision_digest, ML_CONTENT_ID_LEN);
	text[head_len + 20 + ML_CONTENT_ID_LEN] = '"';
	memcpy(text + head_len + 21 + ML_CONTENT_ID_LEN, o.s + head_len, o.len - head_len);
	plan->json_len = o.len + 21 + ML_CONTENT_ID_LEN;
	text[plan->json_len] = '\0';
	plan->json = text;
	return ML_ROLLOUT_OK;
}

MlRolloutStatus
ml_rollout_decide(MlJsonArena *arena, const MlRolloutContract *contract,
				  const MlRolloutEvidence *evidence, MlRolloutPlan *plan, MlRolloutError *err)
{
	const MlRolloutPolicy *p = &contract->policy;
	uint32_t found;

	memset(plan, 0, sizeof(*plan));
	if (!check_binding(contract, evidence, err))
		return ML_ROLLOUT_INVALID;

	plan->current_fraction = evidence->current_fraction;
	memcpy(plan->contract_content_id, contract->content_id, sizeof(plan->contract_content_id));
	memcpy(plan->evidence_content_id, evidence->content_id, sizeof(plan->evidence_content_id));

	/*
	 * Precedence: a demonstrated regression rolls back even when readiness
	 * evidence is also missing or stale — the request metrics already show
	 * users being hurt, and holding would keep them on the bad revision.
	 */
	if ((found = regressions(p, evidence)) != 0)
	{
		plan->decision = ML_ROLLOUT_ROLLBACK;
		plan->reasons = found;
		plan->next_fraction = 0;
	}
	else if ((found = holds(p, evidence)) != 0)
	{
		plan->decision = ML_ROLLOUT_HOLD;
		plan->reasons = found;
		plan->next_fraction = evidence->current_fraction;
	}
	else
	{
		plan->decision = ML_ROLLOUT_ADVANCE;
		plan->reasons = BIT(ML_REASON_ALL_GATES_PASSED);
		plan->next_fraction = next_step(p, evidence->current_fraction);
	}
	return write_output(arena, &contract->id_prefix, plan, err);
}

MlRolloutStatus
ml_rollout_plan(MlJsonArena *arena, const MlJsonValue *contract, const MlJsonValue *evidence,
				MlRolloutPlan *plan, MlRolloutError *err)
{
	MlRolloutContract c;
	MlRolloutEvidence e;
	MlRolloutStatus st;

	memset(plan, 0, sizeof(*plan));
	if ((st = ml_rollout_read_contract(arena, contract, &c, err)) != ML_ROLLOUT_OK)
		return st;
	if ((st = ml_rollout_read_evidence(arena, evidence, &e, err)) != ML_ROLLOUT_OK)
		return st;
	return ml_rollout_decide(arena, &c, &e, plan, err);
}
