/*
 * rollout_test.c — plain-C unit test of src/rollout/plan.c (no PostgreSQL),
 * TAP output.  The exhaustive table of rules lives in the pg_regress test
 * (sql/plan_rollout.sql); this test checks what SQL cannot see: the reason
 * table's order, the output's exact canonical bytes and digest, repeated
 * calls in fresh arenas, and it replays the fuzz corpus and saved crashes
 * through the fuzz property.
 *
 * Usage: rollout_test [first-test-number [corpus-dir...]]
 * Test numbers start at first-test-number + 1 (so test/unit/run.sh can
 * append this output to another TAP stream); the plan line comes last.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"
#include "unit_tap.h"

const char *mlfuzz_check_plan_rollout(const uint8_t *data, size_t size);

/* a result named "rollout: name arg" */
static void
ok_arg(int cond, const char *name, const char *arg)
{
	char what[1024];

	snprintf(what, sizeof(what), "rollout: %s%s%s", name, arg && *arg ? " " : "", arg && *arg ? arg : "");
	ok(cond, what);
}

#define DIGEST_M "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define DIGEST_C "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
#define SCOPE "{\"project\":\"fraud\",\"deployment\":\"scorer\",\"target_revision\":\"scorer-r18\"," \
			  "\"previous_revision\":\"scorer-r17\",\"model_digest\":\"" DIGEST_M "\",\"config_digest\":\"" DIGEST_C "\"}"

static const char *base_contract =
	"{\"scope\":" SCOPE ",\"policy\":{\"steps\":[0.05,0.2,0.5,1],\"ceiling_fraction\":0.5,"
	"\"min_samples\":500,\"window_seconds\":300,\"max_error_rate\":0.01,\"max_p95_ms\":250,"
	"\"max_error_rate_increase\":0.005,\"max_p95_increase_ratio\":1.25,\"health_max_age_seconds\":60,"
	"\"surge_replicas\":1,\"rollback_headroom_replicas\":2,\"capacity_quota_replicas\":12},"
	"\"content_id\":\"x\"}";

static const char *base_evidence =
	"{\"contract_content_id\":\"x\",\"scope\":" SCOPE ",\"observed_at\":1764410400,"
	"\"current_fraction\":0.2,\"window_start\":1764410100,\"window_seconds\":300,"
	"\"target\":{\"desired_replicas\":4,\"ready_replicas\":4,\"load_attempts\":4,\"load_successes\":4,"
	"\"health_observed_at\":1764410390,\"requests\":1200,\"errors\":2,\"p95_ms\":180},"
	"\"previous\":{\"desired_replicas\":4,\"ready_replicas\":4,\"load_attempts\":4,\"load_successes\":4,"
	"\"health_observed_at\":1764410395,\"requests\":4800,\"errors\":9,\"p95_ms\":170},"
	"\"desired_capacity\":8,\"content_id\":\"x\"}";

/* s with the first occurrence of from replaced by to (malloc'ed) */
static char *
replace(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	size_t n;
	char *out;

	if (at == NULL)
	{
		fprintf(stderr, "test bug: \"%s\" not found\n", from);
		exit(2);
	}
	n = strlen(s) - strlen(from) + strlen(to);
	out = malloc(n + 1);
	memcpy(out, s, (size_t) (at - s));
	strcpy(out + (at - s), to);
	strcat(out, at + strlen(from));
	return out;
}

/* Set the member key of obj (a parsed object) to a string. */
static void
set_str(MlJsonArena *a, MlJsonValue *obj, const char *key, const char *s)
{
	for (size_t i = 0; i < obj->u.object.count; i++)
	{
		MlJsonMember *m = &obj->u.object.members[i];

		if (strcmp(m->key, key) == 0)
		{
			MlJsonValue *v = ml_json_arena_alloc(a, sizeof(MlJsonValue));

			memset(v, 0, sizeof(*v));
			v->type = ML_JSON_STRING;
			v->u.string.str = s;
			v->u.string.len = strlen(s);
			m->value = v;
		}
	}
}

typedef struct Outcome
{
	MlRolloutStatus status;
	MlRolloutPlan plan;
	MlRolloutError err;
	char json[1024];
	char cid[ML_CONTENT_ID_LEN + 1];
	char eid[ML_CONTENT_ID_LEN + 1];
} Outcome;

/* Parse, give both records correct ids (unless fix_ids is false), decide. */
static Outcome
decide(const char *contract_text, const char *evidence_text, int fix_ids)
{
	Outcome o;
	MlJsonArena *a = ml_json_arena_new();
	MlJsonError jerr;
	MlJsonValue *c = ml_json_parse(a, contract_text, strlen(contract_text), NULL, &jerr);
	MlJsonValue *e = ml_json_parse(a, evidence_text, strlen(evidence_text), NULL, &jerr);

	memset(&o, 0, sizeof(o));
	if (c == NULL || e == NULL)
	{
		fprintf(stderr, "test bug: input is not JSON: %s\n", jerr.message);
		exit(2);
	}
	if (fix_ids)
	{
		ml_json_content_id_excluding(a, c, "content_id", o.cid, &jerr);
		set_str(a, c, "content_id", o.cid);
		set_str(a, e, "contract_content_id", o.cid);
		ml_json_content_id_excluding(a, e, "content_id", o.eid, &jerr);
		set_str(a, e, "content_id", o.eid);
	}
	o.status = ml_rollout_plan(a, c, e, &o.plan, &o.err);
	if (o.status == ML_ROLLOUT_OK)
		snprintf(o.json, sizeof(o.json), "%s", o.plan.json);
	o.plan.json = NULL;
	ml_json_arena_free(a);
	return o;
}

static int
has_reason(const Outcome *o, MlRolloutReason r)
{
	return (o->plan.reasons & (1u << r)) != 0;
}

static void
test_reason_table(void)
{
	int sorted = 1;

	for (int i = 1; i < ML_REASON_COUNT; i++)
	{
		if (strcmp(ml_rollout_reason_name(i - 1), ml_rollout_reason_name(i)) >= 0)
			sorted = 0;
	}
	ok_arg(sorted, "reason codes are in byte order, so plans list them sorted", NULL);
	ok_arg(ml_rollout_reason_name(ML_REASON_COUNT) == NULL && ml_rollout_reason_name(-1) == NULL,
		   "reason names out of range are NULL", NULL);
}

static void
test_base(void)
{
	Outcome a = decide(base_contract, base_evidence, 1);
	Outcome b = decide(base_contract, base_evidence, 1);
	char expect[1024];
	char digest[ML_CONTENT_ID_LEN + 1];
	size_t n;

	ok_arg(a.status == ML_ROLLOUT_OK && a.plan.decision == ML_ROLLOUT_ADVANCE,
		   "qualified evidence advances", a.err.message);
	ok_arg(a.plan.next_fraction == 0.5 && a.plan.current_fraction == 0.2,
		   "from 0.2 to the next step 0.5", NULL);
	/* exact canonical bytes: keys sorted, no whitespace, shortest numbers */
	n = (size_t) snprintf(expect, sizeof(expect),
						  "{\"contract_content_id\":\"%s\",\"current_fraction\":0.2,"
						  "\"decision\":\"ADVANCE\",\"evidence_content_id\":\"%s\","
						  "\"next_fraction\":0.5,\"reasons\":[\"ALL_GATES_PASSED\"]}",
						  a.cid, a.eid);
	ml_sha256_hex(expect, n, digest);
	snprintf(expect, sizeof(expect),
			 "{\"contract_content_id\":\"%s\",\"current_fraction\":0.2,"
			 "\"decision\":\"ADVANCE\",\"decision_digest\":\"%s\",\"evidence_content_id\":\"%s\","
			 "\"next_fraction\":0.5,\"reasons\":[\"ALL_GATES_PASSED\"]}",
			 a.cid, digest, a.eid);
	ok_arg(strcmp(a.json, expect) == 0, "output is exactly the canonical JSON, digest over the rest", NULL);
	ok_arg(strcmp(a.json, b.json) == 0, "a second call in a fresh arena gives the same bytes", NULL);
}

static void
test_decisions(void)
{
	char *e;
	Outcome o;

	e = replace(base_evidence, "\"errors\":2,", "\"errors\":20,");
	o = decide(base_contract, e, 1);
	ok_arg(o.status == ML_ROLLOUT_OK && o.plan.decision == ML_ROLLOUT_ROLLBACK &&
			   has_reason(&o, ML_REASON_ERROR_RATE_ABOVE_MAX) && o.plan.next_fraction == 0,
		   "an error rate above the maximum rolls back to 0", NULL);
	free(e);

	/* regression wins over stale health */
	{
		char *tmp = replace(base_evidence, "\"errors\":2,", "\"errors\":20,");

		e = replace(tmp, "\"health_observed_at\":1764410390", "\"health_observed_at\":1764400000");
		free(tmp);
	}
	o = decide(base_contract, e, 1);
	ok_arg(o.plan.decision == ML_ROLLOUT_ROLLBACK, "a regression rolls back even with stale health", NULL);
	free(e);

	e = replace(base_evidence, "\"p95_ms\":180", "\"p95_ms\":null");
	o = decide(base_contract, e, 1);
	ok_arg(o.plan.decision == ML_ROLLOUT_HOLD && o.plan.reasons == (1u << ML_REASON_P95_MISSING) &&
			   o.plan.next_fraction == 0.2,
		   "missing p95 holds, never rolls back", NULL);
	free(e);

	e = replace(base_evidence, "\"current_fraction\":0.2", "\"current_fraction\":0.5");
	o = decide(base_contract, e, 1);
	ok_arg(o.plan.decision == ML_ROLLOUT_HOLD && o.plan.reasons == (1u << ML_REASON_AT_CEILING),
		   "at a ceiling below 1 the plan holds with AT_CEILING", NULL);
	free(e);
}

static void
test_refusals(void)
{
	char *e;
	Outcome o;

	o = decide(base_contract, base_evidence, 0);
	ok_arg(o.status == ML_ROLLOUT_INVALID && strcmp(o.err.rule, "bad_format") == 0 &&
			   strcmp(o.err.path, "contract.content_id") == 0,
		   "a placeholder content id is refused", o.err.path);

	e = replace(base_evidence, "\"requests\":1200", "\"requests\":true");
	o = decide(base_contract, e, 1);
	ok_arg(o.status == ML_ROLLOUT_INVALID && strcmp(o.err.rule, "boolean_number") == 0 &&
			   strcmp(o.err.path, "evidence.target.requests") == 0,
		   "a boolean count is refused", o.err.path);
	free(e);

	e = replace(base_evidence, "\"requests\":1200", "\"requests\":\"1200\"");
	o = decide(base_contract, e, 1);
	ok_arg(o.status == ML_ROLLOUT_INVALID && strcmp(o.err.rule, "string_number") == 0,
		   "a numeric-looking string is refused", o.err.path);
	free(e);

	/*
	 * What the rollouts reconciler's write-back answers REFUSED to (no transition, the
	 * rollout's last_error, a slow retry; regress rollout_reconcile has the SQL side).
	 */
	e = replace(base_evidence, "\"requests\":1200,\"errors\":2,", "\"requests\":10,\"errors\":20,");
	o = decide(base_contract, e, 1);
	ok_arg(o.status == ML_ROLLOUT_INVALID && strcmp(o.err.path, "evidence.target.errors") == 0 &&
			   strstr(o.err.message, "must not exceed requests (20 > 10)") != NULL,
		   "more errors than requests: the plan is refused", o.err.path);
	free(e);

	e = replace(base_evidence, "\"errors\":9,", "\"errors\":9,\"extra\":1,");
	o = decide(base_contract, e, 1);
	ok_arg(o.status == ML_ROLLOUT_INVALID && strcmp(o.err.rule, "unknown_key") == 0 &&
			   strcmp(o.err.path, "evidence.previous") == 0,
		   "an unknown key is refused", o.err.path);
	free(e);
}

int
main(int argc, char **argv)
{
	unit_tap_begin(argc, argv);
	test_reason_table();
	test_base();
	test_decisions();
	test_refusals();
	for (int i = 2; i < argc; i++)
		unit_tap_replay(argv[i], mlfuzz_check_plan_rollout);
	return unit_tap_end();
}
