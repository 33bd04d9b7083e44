/*
 * fuzz_plan_rollout.c — libFuzzer target for the rollout decision function.
 *
 * Input: "[F]contract SEP evidence" where SEP is the first NUL byte, or the
 * first newline when there is no NUL.  A leading 'F' asks the harness to fix
 * up the content ids (contract.content_id, evidence.contract_content_id,
 * evidence.content_id) before deciding, so the fuzzer can get past the
 * content-id checks and exercise the decision itself.
 *
 * Property (mlfuzz_check_plan_rollout, also replayed by test/unit/rollout_test.c):
 * never crash; a refusal names a rule, a path and a message; a decision is
 * one of the three, its output is canonical JSON whose decision_digest is
 * the content id of the rest, the fractions are consistent with the
 * decision, and a second call gives the same bytes.
 *
 * Built with -DMLPLAT_NO_FUZZ_MAIN the file provides only the property.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"

const char *mlfuzz_check_plan_rollout(const uint8_t *data, size_t size);

/* Replace obj.key's value (if obj is an object that has key) with a string. */
static void
set_string_member(MlJsonArena *arena, MlJsonValue *obj, const char *key, const char *s)
{
	MlJsonValue *v;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return;
	for (size_t i = 0; i < obj->u.object.count; i++)
	{
		MlJsonMember *m = &obj->u.object.members[i];

		if (m->key_len == strlen(key) && memcmp(m->key, key, m->key_len) == 0)
		{
			v = ml_json_arena_alloc(arena, sizeof(MlJsonValue));
			if (v == NULL)
				return;
			memset(v, 0, sizeof(*v));
			v->type = ML_JSON_STRING;
			v->u.string.str = s;
			v->u.string.len = strlen(s);
			m->value = v;
		}
	}
}

static void
fix_ids(MlJsonArena *arena, MlJsonValue *contract, MlJsonValue *evidence)
{
	char	   *cid = ml_json_arena_alloc(arena, ML_CONTENT_ID_LEN + 1);
	char	   *eid = ml_json_arena_alloc(arena, ML_CONTENT_ID_LEN + 1);
	MlJsonError err;

	if (cid == NULL || eid == NULL)
		return;
	if (!ml_json_content_id_excluding(arena, contract, "content_id", cid, &err))
		return;
	set_string_member(arena, contract, "content_id", cid);
	set_string_member(arena, evidence, "contract_content_id", cid);
	if (!ml_json_content_id_excluding(arena, evidence, "content_id", eid, &err))
		return;
	set_string_member(arena, evidence, "content_id", eid);
}

/* One full run in a fresh arena; *out gets a malloc'ed copy of the output or NULL. */
static const char *
run_once(const char *a, size_t alen, const char *b, size_t blen, bool fix,
		 MlRolloutStatus *st_out, MlRolloutPlan *plan_out, char **out)
{
	MlJsonArena *arena = ml_json_arena_new();
	MlJsonValue *contract;
	MlJsonValue *evidence;
	MlJsonError jerr;
	MlRolloutError err;
	const char *bad = NULL;

	*out = NULL;
	*st_out = ML_ROLLOUT_INVALID;
	if (arena == NULL)
		return NULL;
	contract = ml_json_parse(arena, a, alen, NULL, &jerr);
	evidence = ml_json_parse(arena, b, blen, NULL, &jerr);
	if (contract == NULL || evidence == NULL)
	{
		ml_json_arena_free(arena);
		return NULL;			/* not JSON: the parser's own fuzzer covers that */
	}
	if (fix)
		fix_ids(arena, contract, evidence);
	memset(&err, 0, sizeof(err));
	*st_out = ml_rollout_plan(arena, contract, evidence, plan_out, &err);
	if (*st_out == ML_ROLLOUT_INVALID)
	{
		if (err.rule == NULL || err.path[0] == '\0' || err.message[0] == '\0' ||
			err.hint[0] == '\0' || err.detail[0] == '\0')
			bad = "a refusal without rule, path, message, detail or hint";
	}
	else if (*st_out == ML_ROLLOUT_OK)
	{
		*out = malloc(plan_out->json_len + 1);
		if (*out != NULL)
			memcpy(*out, plan_out->json, plan_out->json_len + 1);
		plan_out->json = NULL;
	}
	ml_json_arena_free(arena);
	return bad;
}

static const char *
check_output(const MlRolloutPlan *plan, const char *json)
{
	MlJsonArena *arena = ml_json_arena_new();
	MlJsonValue *v;
	MlJsonError jerr;
	size_t		len;
	char	   *canon;
	char		id[ML_CONTENT_ID_LEN + 1];
	const char *bad = NULL;

	if (arena == NULL)
		return NULL;
	v = ml_json_parse(arena, json, strlen(json), NULL, &jerr);
	if (v == NULL)
		bad = "the output is not JSON";
	else if ((canon = ml_json_canonical(arena, v, &len, &jerr)) == NULL ||
			 strcmp(canon, json) != 0)
		bad = "the output is not canonical JSON";
	else if (!ml_json_content_id_excluding(arena, v, "decision_digest", id, &jerr) ||
			 strcmp(id, plan->decision_digest) != 0)
		bad = "decision_digest is not the content id of the rest of the output";
	ml_json_arena_free(arena);
	if (bad != NULL)
		return bad;

	switch (plan->decision)
	{
		case ML_ROLLOUT_ADVANCE:
			if (!(plan->next_fraction > plan->current_fraction) ||
				plan->reasons != (1u << ML_REASON_ALL_GATES_PASSED))
				return "ADVANCE without a higher fraction or with hold reasons";
			break;
		case ML_ROLLOUT_HOLD:
			if (plan->next_fraction != plan->current_fraction || plan->reasons == 0 ||
				(plan->reasons & (1u << ML_REASON_ALL_GATES_PASSED)))
				return "HOLD that moves traffic or has no reason";
			break;
		case ML_ROLLOUT_ROLLBACK:
			if (plan->next_fraction != 0 || plan->reasons == 0)
				return "ROLLBACK that keeps traffic or has no reason";
			break;
		default:
			return "a decision that is not ADVANCE, HOLD or ROLLBACK";
	}
	if (plan->next_fraction < 0 || plan->next_fraction > 1)
		return "next_fraction outside [0, 1]";
	return NULL;
}

const char *
mlfuzz_check_plan_rollout(const uint8_t *data, size_t size)
{
	const char *text = (const char *) data;
	bool		fix = false;
	const char *sep;
	size_t		alen;
	MlRolloutStatus st1;
	MlRolloutStatus st2;
	MlRolloutPlan p1;
	MlRolloutPlan p2;
	char	   *o1;
	char	   *o2;
	const char *bad;

	if (size > 0 && text[0] == 'F')
	{
		fix = true;
		text++;
		size--;
	}
	sep = memchr(text, '\0', size);
	if (sep == NULL)
		sep = memchr(text, '\n', size);
	if (sep == NULL)
		return NULL;
	alen = (size_t) (sep - text);

	bad = run_once(text, alen, sep + 1, size - alen - 1, fix, &st1, &p1, &o1);
	if (bad == NULL)
		bad = run_once(text, alen, sep + 1, size - alen - 1, fix, &st2, &p2, &o2);
	else
		o2 = NULL;
	if (bad == NULL && st1 != st2)
		bad = "two calls with the same input gave different outcomes";
	if (bad == NULL && st1 == ML_ROLLOUT_OK && o1 != NULL && o2 != NULL)
	{
		if (strcmp(o1, o2) != 0)
			bad = "two calls with the same input gave different bytes";
		else
			bad = check_output(&p1, o1);
	}
	free(o1);
	free(o2);
	return bad;
}

#ifndef MLPLAT_NO_FUZZ_MAIN
int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *bad = mlfuzz_check_plan_rollout(data, size);

	if (bad != NULL)
	{
		fprintf(stderr, "property violated: %s\n", bad);
		abort();
	}
	return 0;
}
#endif
