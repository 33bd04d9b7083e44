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
 * Differential property (check_fields_route): when the evidence has the
 * evidence shape with scalar fields, reading it from its fields (the
 * one-pass route the backend takes, ml_rollout_read_evidence_fields) gives
 * exactly what reading its tree gives: the same status, the same evidence,
 * or the same refusal word for word; its content id from the fields equals
 * the tree's canonical content id whatever the values; every number read
 * again by ml_json_number_view equals the parser's.
 *
 * Built with -DMLPLAT_NO_FUZZ_MAIN the file provides only the property
 * (MLFUZZ_TARGET in props.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"
#include "props.h"

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
	char *cid = ml_json_arena_alloc(arena, ML_CONTENT_ID_LEN + 1);
	char *eid = ml_json_arena_alloc(arena, ML_CONTENT_ID_LEN + 1);
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

/*
 * The fields of evidence tree v as the backend's jsonb walk finds them: each
 * part an object with exactly its keys, every field a scalar; numbers
 * re-read by ml_json_number_view into vals, as the walk reads them.  NULL
 * when v does not have that shape (the walk declines it too).
 */
static const char *
find_part(const MlJsonValue *obj, const char *const *keys, const MlJsonValue **f,
		  MlJsonValue *vals, int first, bool *shaped)
{
	size_t n = 0;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return NULL;
	for (; keys[n] != NULL; n++)
	{
		const MlJsonValue *v = ml_json_object_get(obj, keys[n]);

		if (v == NULL)
			return NULL;
		f[first + n] = v;
		if (v->type == ML_JSON_NUMBER)
		{
			if (!ml_json_number_view(v->u.number.text, v->u.number.text_len, &vals[first + n]))
				return "ml_json_number_view refused a number the parser read";
			if (memcmp(&vals[first + n].u.number.value, &v->u.number.value, sizeof(double)) != 0 ||
				vals[first + n].u.number.is_integer != v->u.number.is_integer)
				return "ml_json_number_view and the parser read a number differently";
			f[first + n] = &vals[first + n];
		}
	}
	*shaped = n == obj->u.object.count;
	return NULL;
}

static bool
is_container(const MlJsonValue *v)
{
	return v->type == ML_JSON_ARRAY || v->type == ML_JSON_OBJECT;
}

static bool
same_str(const MlRolloutStr *a, const MlRolloutStr *b)
{
	return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static bool
same_scope(const MlRolloutScope *a, const MlRolloutScope *b)
{
	return same_str(&a->project, &b->project) && same_str(&a->deployment, &b->deployment) &&
		   same_str(&a->target_revision, &b->target_revision) &&
		   same_str(&a->previous_revision, &b->previous_revision) &&
		   same_str(&a->model_digest, &b->model_digest) &&
		   same_str(&a->config_digest, &b->config_digest);
}

/* every member but the scope's pointers, bit for bit */
static bool
same_evidence(const MlRolloutEvidence *a, const MlRolloutEvidence *b)
{
	MlRolloutEvidence x = *a;
	MlRolloutEvidence y = *b;

	if (!same_scope(&a->scope, &b->scope))
		return false;
	memset(&x.scope, 0, sizeof(x.scope));
	memset(&y.scope, 0, sizeof(y.scope));
	return memcmp(&x, &y, sizeof(x)) == 0;
}

static const char *
check_fields_route(MlJsonArena *arena, const MlJsonValue *evidence)
{
	const MlJsonValue *f[ML_EV_NFIELDS] = { 0 };
	MlJsonValue vals[ML_EV_NFIELDS];
	bool shaped[4] = { false, false, false, false };
	const char *bad;
	MlRolloutEvidence e1,
		e2;
	MlRolloutError err1,
		err2;
	MlRolloutStatus st1,
		st2;
	char tree_id[ML_CONTENT_ID_LEN + 1];
	char fields_id[ML_CONTENT_ID_LEN + 1];
	char prefixed_id[ML_CONTENT_ID_LEN + 1];
	MlSha256Prefix prefix;
	MlJsonError jerr;

	if ((bad = find_part(evidence, ml_rollout_evidence_keys, f, vals, 0, &shaped[0])) != NULL ||
		!shaped[0])
		return bad;
	if ((bad = find_part(f[ML_EV_SCOPE], ml_rollout_scope_keys, f, vals,
						 ML_EV_SCOPE_FIRST, &shaped[1])) != NULL ||
		(bad = find_part(f[ML_EV_TARGET], ml_rollout_revision_keys, f, vals,
						 ML_EV_TARGET_FIRST, &shaped[2])) != NULL ||
		(bad = find_part(f[ML_EV_PREVIOUS], ml_rollout_revision_keys, f, vals,
						 ML_EV_PREVIOUS_FIRST, &shaped[3])) != NULL)
		return bad;
	if (!shaped[1] || !shaped[2] || !shaped[3])
		return NULL;
	f[ML_EV_SCOPE] = f[ML_EV_TARGET] = f[ML_EV_PREVIOUS] = NULL;
	for (int i = 0; i < ML_EV_NFIELDS; i++)
		if (f[i] != NULL && is_container(f[i]))
			return NULL;

	/* the canonical text from the fields is the tree's, valid or not */
	if (ml_json_content_id_excluding(arena, evidence, "content_id", tree_id, &jerr) &&
		ml_rollout_evidence_fields_id(f, NULL, fields_id) && strcmp(tree_id, fields_id) != 0)
		return "the content id from the fields differs from the tree's";

	/*
	 * The backend resumes the hash from its contract's first block: one made
	 * from the record's own contract_content_id (its text's first block when
	 * that is 64 hex digits, another block otherwise) must change nothing.
	 */
	{
		char block[64];
		const MlJsonValue *cc = f[ML_EV_CONTRACT_CONTENT_ID];

		memset(block, 'x', sizeof(block));
		memcpy(block, "{\"contract_content_id\":\"", 24);
		if (cc->type == ML_JSON_STRING)
			memcpy(block + 24, cc->u.string.str, cc->u.string.len < 40 ? cc->u.string.len : 40);
		if (!ml_sha256_prefix(&prefix, block, sizeof(block)))
			return NULL;
	}
	if (ml_rollout_evidence_fields_id(f, NULL, fields_id) &&
		ml_rollout_evidence_fields_id(f, &prefix, prefixed_id) &&
		strcmp(fields_id, prefixed_id) != 0)
		return "the content id resumed from a prefix differs from the one hashed whole";

	memset(&err1, 0, sizeof(err1));
	memset(&err2, 0, sizeof(err2));
	st1 = ml_rollout_read_evidence(arena, evidence, &e1, &err1);
	st2 = ml_rollout_read_evidence_fields(f, &prefix, &e2, &err2);
	if (st1 == ML_ROLLOUT_NOMEM || st2 == ML_ROLLOUT_NOMEM)
		return NULL;
	if (st1 != st2)
		return "the fields route and the tree route disagree on validity";
	if (st1 == ML_ROLLOUT_OK && !same_evidence(&e1, &e2))
		return "the fields route read other evidence than the tree route";
	if (st1 == ML_ROLLOUT_INVALID &&
		(strcmp(err1.rule, err2.rule) != 0 || strcmp(err1.path, err2.path) != 0 ||
		 strcmp(err1.message, err2.message) != 0 || strcmp(err1.detail, err2.detail) != 0 ||
		 strcmp(err1.hint, err2.hint) != 0))
		return "the fields route refused with other words than the tree route";
	return NULL;
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
		return NULL; /* not JSON: the parser's own fuzzer covers that */
	}
	if (fix)
		fix_ids(arena, contract, evidence);
	if ((bad = check_fields_route(arena, evidence)) != NULL)
	{
		ml_json_arena_free(arena);
		return bad;
	}
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
	size_t len;
	char *canon;
	char id[ML_CONTENT_ID_LEN + 1];
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
	bool fix = false;
	const char *sep;
	size_t alen;
	MlRolloutStatus st1;
	MlRolloutStatus st2;
	MlRolloutPlan p1;
	MlRolloutPlan p2;
	char *o1;
	char *o2;
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

MLFUZZ_TARGET(mlfuzz_check_plan_rollout)
