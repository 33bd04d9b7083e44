/*
 * fuzz_rollout_pass_plan.c — libFuzzer target for a due rollout decision as
 * the pass makes it (ml_rollout_pass_plan, src/rollout/pass_plan.c): the
 * evidence record, its content id, plan_rollout's transition and the status
 * after it, which the write-back row carries to SQL typed (reasons text[],
 * next_fraction numeric: src/reconcile/rollouts.c).
 *
 * Input: byte 0 the replica counts (low and high nibble), 1 the window
 * seconds, 2 flags (bit 0: keep the contract's own content_id instead of
 * recomputing it, so mutated policies are not all refused for their id;
 * bit 1: no target name; bit 2: no previous name; bit 3: no contract), then
 * up to three parts separated by NUL: the contract (JSON), the observation
 * (JSON) and the fraction as the claim gives it (used only when it is one
 * JSON number, as numeric's text always is; else none, which is "0").
 *
 * Property (mlfuzz_check_rollout_pass_plan): never crash, never out of
 * memory; a refusal says why (NUL-terminated, "invalid rollout ...") and
 * decides nothing; otherwise the evidence parses and carries the content id
 * the pass reports, which is its own; the decision is ADVANCE, HOLD or
 * ROLLBACK; the reasons are known codes, at least one, strictly in byte
 * order (the order the ledger stores them in), and exactly the plan's
 * "reasons"; next_fraction is the plan's "next_fraction" number, a number's
 * text (which numeric_in reads exactly) within [0, 1] and not above the contract's ceiling_fraction (0 on a
 * ROLLBACK, the current fraction on a HOLD, above it on an ADVANCE); the
 * status after it is one ml_rollout_after_plan gives for the decision; and
 * the same input in a fresh arena gives the same result, byte for byte.
 *
 * Built with -DMLPLAT_NO_FUZZ_MAIN the file provides only the property
 * (MLFUZZ_TARGET in props.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout_pass_plan.h"
#include "props.h"

const char *mlfuzz_check_rollout_pass_plan(const uint8_t *data, size_t size);

/* What one call gave, copied out of its arena (malloc'ed texts). */
typedef struct Result
{
	bool refused;
	char refusal[ML_ROLLOUT_REFUSAL_MAX];
	char *evidence;
	char evidence_content_id[ML_CONTENT_ID_LEN + 1];
	char *plan;
	const char *decision; /* static names */
	const char *reasons[ML_REASON_COUNT];
	size_t nreasons;
	char next_fraction[32];
	MlRolloutAfterPlan after;
	int64_t observed_at_ms; /* what the call was given */
} Result;

typedef struct Input
{
	const char *contract; /* NUL-terminated copies of the parts, or NULL */
	size_t contract_len;
	const char *obs;
	size_t obs_len;
	const char *fraction;
	uint8_t flags;
	int64_t target_replicas;
	int64_t previous_replicas;
	int window_seconds;
} Input;

static char *
dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d == NULL)
		abort();
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/*
 * The contract with its content_id member replaced by the id of the rest, as
 * a frozen contract carries it (a new object: the parsed one is left alone).
 */
static const MlJsonValue *
with_own_id(MlJsonArena *arena, const MlJsonValue *c)
{
	MlJsonMember *members;
	MlJsonValue *id;
	char *hex;
	size_t n = 0;
	MlJsonError err;

	if (c == NULL || c->type != ML_JSON_OBJECT)
		return c;
	members = ml_json_arena_alloc(arena, sizeof(MlJsonMember) * (c->u.object.count + 1));
	id = ml_json_arena_alloc(arena, sizeof(MlJsonValue));
	hex = ml_json_arena_alloc(arena, ML_CONTENT_ID_LEN + 1);
	if (members == NULL || id == NULL || hex == NULL || !ml_json_content_id_excluding(arena, c, "content_id", hex, &err))
		return c;
	for (size_t i = 0; i < c->u.object.count; i++)
		if (strcmp(c->u.object.members[i].key, "content_id") != 0)
			members[n++] = c->u.object.members[i];
	memset(id, 0, sizeof(*id));
	id->type = ML_JSON_STRING;
	id->u.string.str = hex;
	id->u.string.len = ML_CONTENT_ID_LEN;
	members[n].key = "content_id";
	members[n].key_len = strlen("content_id");
	members[n].value = id;
	n++;
	{
		MlJsonValue *fixed = ml_json_new_object(arena, members, n, &err);

		return fixed ? fixed : c;
	}
}

/* One call in a fresh arena; false when it said out of memory. */
static bool
run_once(const Input *in, Result *r, double *ceiling)
{
	MlJsonArena *arena = ml_json_arena_new();
	MlJsonError jerr;
	const MlJsonValue *contract = NULL;
	const MlJsonValue *obs = NULL;
	const MlJsonValue *at;
	const MlJsonValue *cf;
	MlRolloutPassPlanIn pin;
	MlRolloutPassPlan out;
	MlRolloutStatus st;

	if (arena == NULL)
		abort();
	memset(r, 0, sizeof(*r));
	if (in->contract && !(in->flags & 8))
		contract = ml_json_parse(arena, in->contract, in->contract_len, NULL, &jerr);
	if (contract && !(in->flags & 1))
		contract = with_own_id(arena, contract);
	if (in->obs)
		obs = ml_json_parse(arena, in->obs, in->obs_len, NULL, &jerr);
	at = ml_json_object_get(obs, "observed_at");
	memset(&pin, 0, sizeof(pin));
	pin.contract = contract;
	pin.fraction = in->fraction;
	pin.target_replicas = in->target_replicas;
	pin.previous_replicas = in->previous_replicas;
	pin.observation = obs;
	pin.target_kn = (in->flags & 2) ? NULL : "scorer-predictor-00002";
	pin.previous_kn = (in->flags & 4) ? NULL : "scorer-predictor-00001";
	pin.window_seconds = in->window_seconds;
	/* as the pass has it (the SQL face too): the observation's seconds in ms */
	if (at && at->type == ML_JSON_NUMBER && fabs(at->u.number.value) < 1e15)
		pin.observed_at_ms = (int64_t) llround(at->u.number.value * 1000);

	st = ml_rollout_pass_plan(arena, &pin, &out);
	r->observed_at_ms = pin.observed_at_ms;
	cf = ml_json_object_get(ml_json_object_get(contract, "policy"), "ceiling_fraction");
	*ceiling = cf && cf->type == ML_JSON_NUMBER ? cf->u.number.value : NAN;
	if (st == ML_ROLLOUT_OK)
	{
		r->refused = out.refused;
		memcpy(r->refusal, out.refusal, sizeof(r->refusal));
		r->evidence = out.evidence ? dup_n(out.evidence, out.evidence_len) : NULL;
		memcpy(r->evidence_content_id, out.evidence_content_id, sizeof(r->evidence_content_id));
		r->plan = !out.refused && out.plan.json ? dup_n(out.plan.json, out.plan.json_len) : NULL;
		r->decision = out.decision;
		memcpy(r->reasons, out.reasons, sizeof(r->reasons));
		r->nreasons = out.nreasons;
		memcpy(r->next_fraction, out.next_fraction, sizeof(r->next_fraction));
		r->after = out.after;
	}
	ml_json_arena_free(arena);
	return st == ML_ROLLOUT_OK;
}

static void
result_free(Result *r)
{
	free(r->evidence);
	free(r->plan);
}

static bool
same_text(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool
same_result(const Result *a, const Result *b)
{
	if (a->refused != b->refused || strcmp(a->refusal, b->refusal) != 0 || !same_text(a->evidence, b->evidence) ||
		strcmp(a->evidence_content_id, b->evidence_content_id) != 0 || !same_text(a->plan, b->plan) ||
		!same_text(a->decision, b->decision) || a->nreasons != b->nreasons ||
		strcmp(a->next_fraction, b->next_fraction) != 0 || a->after.status != b->after.status ||
		a->after.keep_window != b->after.keep_window || a->after.decide_at_ms != b->after.decide_at_ms ||
		strcmp(a->after.status_reason, b->after.status_reason) != 0)
		return false;
	for (size_t i = 0; i < a->nreasons; i++)
		if (!same_text(a->reasons[i], b->reasons[i]))
			return false;
	return true;
}

/* obj.key when it is a string, else NULL */
static const char *
string_at(const MlJsonValue *obj, const char *key)
{
	const MlJsonValue *v = ml_json_object_get(obj, key);

	return v && v->type == ML_JSON_STRING ? v->u.string.str : NULL;
}

/* the number a JSON text holds (the plan's members, the fraction's text) */
static bool
number_of(const char *text, double *v)
{
	MlJsonValue n;

	if (text == NULL || !ml_json_number_view(text, strlen(text), &n))
		return false;
	*v = n.u.number.value;
	return true;
}

static const char *
check_plan(const Result *r, double ceiling, const Input *in)
{
	MlJsonArena *arena = ml_json_arena_new();
	MlJsonError jerr;
	const MlJsonValue *ev;
	const MlJsonValue *plan;
	const MlJsonValue *reasons;
	const MlJsonValue *next;
	const MlJsonValue *cur;
	char id[ML_CONTENT_ID_LEN + 1];
	double nf;
	const char *bad = NULL;
	MlRolloutAfterPlan after;

	if (arena == NULL)
		abort();
	ev = r->evidence ? ml_json_parse(arena, r->evidence, strlen(r->evidence), NULL, &jerr) : NULL;
	plan = r->plan ? ml_json_parse(arena, r->plan, strlen(r->plan), NULL, &jerr) : NULL;
	reasons = ml_json_object_get(plan, "reasons");
	next = ml_json_object_get(plan, "next_fraction");
	cur = ml_json_object_get(ev, "current_fraction");
	if (ev == NULL || plan == NULL)
		bad = "a decision without evidence or plan that parse";
	else if (!ml_json_content_id_excluding(arena, ev, "content_id", id, &jerr) ||
			 strcmp(id, r->evidence_content_id) != 0 ||
			 !same_text(string_at(ev, "content_id"), r->evidence_content_id))
		bad = "evidence whose content id is not its own, or not the one reported";
	else if (r->decision == NULL ||
			 (strcmp(r->decision, "ADVANCE") != 0 && strcmp(r->decision, "HOLD") != 0 &&
			  strcmp(r->decision, "ROLLBACK") != 0) ||
			 !same_text(string_at(plan, "decision"), r->decision))
		bad = "a decision that is none of the three, or not the plan's";
	else if (r->nreasons == 0 || reasons == NULL || reasons->type != ML_JSON_ARRAY ||
			 reasons->u.array.count != r->nreasons)
		bad = "no reasons, or not as many as the plan's";
	if (bad == NULL)
		for (size_t i = 0; i < r->nreasons && bad == NULL; i++)
		{
			const MlJsonValue *p = reasons->u.array.items[i];

			if (r->reasons[i] == NULL || p->type != ML_JSON_STRING || strcmp(p->u.string.str, r->reasons[i]) != 0)
				bad = "reasons that are not the plan's, in its order";
			else if (i > 0 && strcmp(r->reasons[i - 1], r->reasons[i]) >= 0)
				bad = "reasons not strictly in byte order (the ledger's order)";
		}
	if (bad == NULL)
	{
		if (!number_of(r->next_fraction, &nf) || next == NULL || next->type != ML_JSON_NUMBER ||
			nf != next->u.number.value)
			bad = "a next fraction that is not the plan's number (numeric_in reads its text)";
		else if (!(nf >= 0 && nf <= 1) || !(nf <= ceiling))
			bad = "a next fraction outside [0, 1] or above the contract's ceiling";
		else if (cur == NULL || cur->type != ML_JSON_NUMBER)
			bad = "evidence without its current fraction";
		else if (strcmp(r->decision, "ROLLBACK") == 0 ? nf != 0
				 : strcmp(r->decision, "HOLD") == 0	  ? nf != cur->u.number.value
													  : nf <= cur->u.number.value)
			bad = "a next fraction that does not follow the decision";
	}
	if (bad == NULL &&
		(!ml_rollout_after_plan(r->decision, r->reasons, r->nreasons, in->window_seconds, r->observed_at_ms, &after) ||
		 after.status != r->after.status || after.keep_window != r->after.keep_window ||
		 (after.keep_window && after.decide_at_ms != r->after.decide_at_ms) || strcmp(after.status_reason, r->after.status_reason) != 0))
		bad = "a status after the plan that ml_rollout_after_plan does not give for its decision";
	ml_json_arena_free(arena);
	return bad;
}

const char *
mlfuzz_check_rollout_pass_plan(const uint8_t *data, size_t size)
{
	Input in;
	Result r1,
		r2;
	double ceiling = NAN,
		   ceiling2;
	const char *parts[3] = { NULL, NULL, NULL };
	size_t lens[3] = { 0, 0, 0 };
	size_t np = 0;
	size_t pos = 3;
	const char *bad = NULL;
	char *copies[3] = { NULL, NULL, NULL };
	double fv;

	if (size < 3)
		return NULL;
	memset(&in, 0, sizeof(in));
	in.target_replicas = data[0] & 15;
	in.previous_replicas = data[0] >> 4;
	in.window_seconds = data[1];
	in.flags = data[2];
	while (np < 3 && pos <= size)
	{
		const uint8_t *nul = memchr(data + pos, 0, size - pos);
		size_t end = nul ? (size_t) (nul - data) : size;

		/* private NUL-terminated copies, so overreads show */
		copies[np] = dup_n((const char *) data + pos, end - pos);
		parts[np] = copies[np];
		lens[np] = end - pos;
		np++;
		pos = end + 1;
		if (nul == NULL)
			break;
	}
	in.contract = parts[0];
	in.contract_len = lens[0];
	in.obs = parts[1];
	in.obs_len = lens[1];
	/* the claim's fraction is numeric's text: one decimal number, never anything else */
	if (parts[2] && number_of(parts[2], &fv) && !strchr(parts[2], 'e') && !strchr(parts[2], 'E'))
		in.fraction = parts[2];

	if (!run_once(&in, &r1, &ceiling))
		bad = "out of memory";
	else if (!run_once(&in, &r2, &ceiling2))
		bad = "out of memory the second time";
	else
	{
		if (!same_result(&r1, &r2))
			bad = "the same input planned differently";
		else if (r1.refused)
		{
			if (memchr(r1.refusal, '\0', sizeof(r1.refusal)) == NULL || strncmp(r1.refusal, "invalid rollout ", 16) != 0)
				bad = "a refusal that does not say why";
			else if (r1.decision != NULL || r1.nreasons != 0 || r1.plan != NULL)
				bad = "a refusal that decided something";
		}
		else
			bad = check_plan(&r1, ceiling, &in);
		result_free(&r2);
	}
	result_free(&r1);
	for (int i = 0; i < 3; i++)
		free(copies[i]);
	return bad;
}

MLFUZZ_TARGET(mlfuzz_check_rollout_pass_plan)
