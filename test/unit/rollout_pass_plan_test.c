/*
 * rollout_pass_plan_test.c — unit test of a due rollout decision as the
 * pass makes it (src/rollout/pass_plan.c; TAP, no PostgreSQL): the evidence
 * text (members, number texts as SQL printed them: times trimmed, p95 as
 * observed, the fraction as claimed), its content id, plan_rollout's
 * transition on it, the status after it, and the refusals.  That the text
 * is the jsonb SQL built before is checked against the old SQL builder in
 * regress rollout_reconcile.
 *
 * Usage: rollout_pass_plan_test [number of tests before these [seed-dir...]]
 * Each seed directory is replayed through fuzz/fuzz_rollout_pass_plan.c's
 * property.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "mlplat/rollout_pass_plan.h"
#include "unit_tap.h"

/* fuzz/fuzz_rollout_pass_plan.c's property */
const char *mlfuzz_check_rollout_pass_plan(const uint8_t *data, size_t size);

#define DIGEST "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
#define SCOPE "{\"project\":\"fraud\",\"deployment\":\"scorer\",\"target_revision\":\"r18\"," \
			  "\"previous_revision\":\"r17\",\"model_digest\":\"" DIGEST "\",\"config_digest\":\"" DIGEST "\"}"

static const char *contract_text =
	"{\"scope\":" SCOPE ",\"policy\":{\"steps\":[0.05,0.2,0.5,1],\"ceiling_fraction\":1,"
	"\"min_samples\":500,\"window_seconds\":300,\"max_error_rate\":0.01,\"max_p95_ms\":250,"
	"\"max_error_rate_increase\":0.005,\"max_p95_increase_ratio\":1.25,\"health_max_age_seconds\":60,"
	"\"surge_replicas\":0,\"rollback_headroom_replicas\":0,\"capacity_quota_replicas\":12}}";

static const char *obs_text =
	"{\"observed_at\":1764410400.500,\"settled\":true,\"ready\":true,\"latest_ready_kn\":\"s-2\","
	"\"load\":\"UpToDate\",\"traffic\":[{\"revision\":\"s-2\",\"percent\":20},{\"revision\":\"s-1\",\"percent\":80}],"
	"\"metrics\":{\"window_start\":1764410100.5,\"window_seconds\":300.000,"
	"\"target\":{\"requests\":1200,\"errors\":2,\"p95_ms\":180.000},"
	"\"previous\":{\"requests\":4800,\"errors\":9,\"p95_ms\":170.250},\"gaps\":[]}}";

static const char *want_evidence =
	"{\"contract_content_id\":\"%s\",\"scope\":{\"config_digest\":\"" DIGEST "\",\"deployment\":\"scorer\","
	"\"model_digest\":\"" DIGEST "\",\"previous_revision\":\"r17\",\"project\":\"fraud\",\"target_revision\":\"r18\"},"
	"\"observed_at\":1764410400.5,\"current_fraction\":0.20,\"window_start\":1764410100.5,\"window_seconds\":300,"
	"\"target\":{\"desired_replicas\":4,\"ready_replicas\":4,\"load_attempts\":1,\"load_successes\":1,"
	"\"health_observed_at\":1764410400.5,\"requests\":1200,\"errors\":2,\"p95_ms\":180.000},"
	"\"previous\":{\"desired_replicas\":3,\"ready_replicas\":3,\"load_attempts\":1,\"load_successes\":1,"
	"\"health_observed_at\":1764410400.5,\"requests\":4800,\"errors\":9,\"p95_ms\":170.250},"
	"\"desired_capacity\":7,\"content_id\":\"%s\"}";

static const MlJsonValue *
parse(MlJsonArena *a, const char *s)
{
	MlJsonError err;
	const MlJsonValue *v = ml_json_parse(a, s, strlen(s), NULL, &err);

	if (v == NULL)
	{
		fprintf(stderr, "test bug: %s\n", err.message);
		exit(2);
	}
	return v;
}

/* the contract with its content id */
static const MlJsonValue *
contract(MlJsonArena *a, char id[ML_CONTENT_ID_LEN + 1])
{
	MlJsonError err;
	char *text = ml_json_arena_alloc(a, strlen(contract_text) + 100);

	if (!ml_json_content_id(a, parse(a, contract_text), id, &err))
		exit(2);
	strcpy(text, contract_text);
	sprintf(text + strlen(text) - 1, ",\"content_id\":\"%s\"}", id);
	return parse(a, text);
}

static MlRolloutPassPlanIn
base(const MlJsonValue *c, MlJsonArena *a)
{
	MlRolloutPassPlanIn in = {
		.contract = c,
		.fraction = "0.20",
		.target_replicas = 4,
		.previous_replicas = 3,
		.observation = parse(a, obs_text),
		.target_kn = "s-2",
		.previous_kn = "s-1",
		.window_seconds = 300,
		.observed_at_ms = 1764410400500LL,
	};

	return in;
}

int
main(int argc, char **argv)
{
	MlJsonArena *a = ml_json_arena_new();
	char cid[ML_CONTENT_ID_LEN + 1];
	char eid[ML_CONTENT_ID_LEN + 1];
	char want[4096];
	const MlJsonValue *c;
	MlRolloutPassPlanIn in;
	MlRolloutPassPlan out;
	MlJsonError err;

	unit_tap_begin(argc, argv);
	c = contract(a, cid);
	in = base(c, a);
	ok(ml_rollout_pass_plan(a, &in, &out) == ML_ROLLOUT_OK && !out.refused, "a due decision is planned");
	if (out.refused)
		printf("# refused: %s\n", out.refusal);
	snprintf(want, sizeof(want), want_evidence, cid, out.evidence_content_id);
	ok(out.evidence && strcmp(out.evidence, want) == 0,
	   "evidence: SQL's members; times trimmed, p95 and the fraction as given, replicas from the claim");
	if (out.evidence && strcmp(out.evidence, want) != 0)
		printf("# got  %s\n# want %s\n", out.evidence, want);
	ok(ml_json_content_id_excluding(a, parse(a, out.evidence), "content_id", eid, &err) &&
		   strcmp(eid, out.evidence_content_id) == 0,
	   "evidence: carries the content id of the rest of it");
	ok(out.plan.json && strstr(out.plan.json, out.evidence_content_id) != NULL &&
		   strcmp(out.plan.evidence_content_id, out.evidence_content_id) == 0,
	   "plan: names the evidence it was made on");
	ok(out.decision && strcmp(out.decision, "ADVANCE") == 0 && strcmp(out.next_fraction, "0.5") == 0 &&
		   out.nreasons == 1 && strcmp(out.reasons[0], "ALL_GATES_PASSED") == 0,
	   "plan: all gates passed, advance to 0.5");
	ok(out.after.status == MLPLAT_ROLLOUT_PROGRESSING && !out.after.keep_window &&
		   strncmp(out.after.status_reason, "ADVANCE", 7) == 0,
	   "after: progressing, the window closed, the reason names the decision");

	/* the target not ready (another revision ready), the previous out of the traffic, no metrics */
	in = base(c, a);
	in.observation = parse(a, "{\"observed_at\":1764410400,\"ready\":true,\"latest_ready_kn\":\"s-3\","
							  "\"load\":\"BlockedByFailedLoad\",\"traffic\":[{\"revision\":\"s-2\",\"percent\":100}]}");
	ok(ml_rollout_pass_plan(a, &in, &out) == ML_ROLLOUT_OK && !out.refused &&
		   strstr(out.evidence, "\"target\":{\"desired_replicas\":4,\"ready_replicas\":0,\"load_attempts\":1,"
								"\"load_successes\":0,\"health_observed_at\":null,\"requests\":0,\"errors\":0,"
								"\"p95_ms\":null}") != NULL &&
		   strstr(out.evidence, "\"window_start\":1764410400,\"window_seconds\":0") != NULL &&
		   strstr(out.evidence, "\"previous\":{\"desired_replicas\":3,\"ready_replicas\":0,\"load_attempts\":0") != NULL,
	   "evidence: not ready, load failed, previous gone, no metrics (the window is the observation)");
	ok(out.decision && strcmp(out.decision, "ADVANCE") != 0, "plan: not ready does not advance");

	/* more errors than requests: plan_rollout refuses, nothing is decided */
	in = base(c, a);
	in.observation = parse(a, "{\"observed_at\":1764410400,\"ready\":true,\"latest_ready_kn\":\"s-2\",\"load\":\"UpToDate\","
							  "\"traffic\":[],\"metrics\":{\"window_start\":1764410100,\"window_seconds\":300,"
							  "\"target\":{\"requests\":10,\"errors\":20},\"previous\":{},\"gaps\":[]}}");
	ok(ml_rollout_pass_plan(a, &in, &out) == ML_ROLLOUT_OK && out.refused && out.evidence != NULL &&
		   strncmp(out.refusal, "invalid rollout evidence.target", 31) == 0 && out.decision == NULL,
	   "refused: evidence plan_rollout refuses is kept, with plan_rollout's message");

	in = base(NULL, a);
	ok(ml_rollout_pass_plan(a, &in, &out) == ML_ROLLOUT_OK && out.refused &&
		   strncmp(out.refusal, "invalid rollout contract", 24) == 0,
	   "refused: no contract");

	/* another contract id in the evidence's contract: the plan refuses the pair */
	in = base(parse(a, contract_text), a);
	ok(ml_rollout_pass_plan(a, &in, &out) == ML_ROLLOUT_OK && out.refused &&
		   strstr(out.evidence, "\"contract_content_id\":null") != NULL,
	   "refused: a contract without its content id");
	ml_json_arena_free(a);

	/* a metric's value as a request count: rounded, never negative, held below 2^63 */
	ok(ml_rollout_count(199.5) == 200 && ml_rollout_count(0.4) == 0 && ml_rollout_count(0) == 0,
	   "count: rounded to the nearest whole number");
	ok(ml_rollout_count(9223372036854775808.0) == INT64_MAX && ml_rollout_count(1e300) == INT64_MAX &&
		   ml_rollout_count(HUGE_VAL) == INT64_MAX && ml_rollout_count(NAN) == INT64_MAX,
	   "count: from 2^63 up (and NaN) held at INT64_MAX, not converted");
	ok(ml_rollout_count(9223372036854774784.0) == INT64_C(9223372036854774784) && ml_rollout_count(-3) == 0,
	   "count: the largest double below 2^63 kept exactly; a negative value is 0");
	for (int i = 2; i < argc; i++)
		unit_tap_replay(argv[i], mlfuzz_check_rollout_pass_plan);
	return unit_tap_end();
}
