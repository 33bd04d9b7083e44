/*
 * sql.c — mlplat.plan_rollout(contract jsonb, evidence jsonb) → jsonb.
 *
 * The only file under src/rollout that includes PostgreSQL headers: the
 * trees come straight from the jsonb (mlplat/json_jsonb.h), or, when that
 * declines, from its text (JsonbToCString) through our parser; plan.c
 * validates and decides; the plan is built as jsonb directly, the same value
 * jsonb_in would make of its canonical text.  A refusal is SQLSTATE 22023
 * naming the field path and the rule.
 *
 * Memory: each call works in a private memory context under fn_mcxt that
 * the next call resets (after an ereport, that reset or the end of the query
 * frees it).  The contract of the previous call is kept in fn_extra too: a
 * batch deciding many evidence records against one contract reads and
 * verifies the contract once.  The cache holds a copy of the contract's
 * jsonb bytes and is used only when the next contract is byte-for-byte
 * equal, so it can never change an answer.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/rollout.h"
#include "mlplat/sanitizer.h"

PG_FUNCTION_INFO_V1(mlplat_plan_rollout);

/* The contract of the previous call, in a context under fn_mcxt. */
typedef struct ContractCache
{
	MemoryContext cxt;
	Jsonb	   *bytes;			/* copy of the contract datum */
	MlRolloutContract contract; /* strings point into cxt */
} ContractCache;

/*
 * fn_extra: the contract cache and a context for the evidence of one call,
 * reset at the start of the next (creating and deleting a context per call
 * cost more than the decision itself).
 */
typedef struct PlanState
{
	ContractCache *contract;
	MemoryContext call_cxt;
	/* fractions of recent plans as numerics (a batch repeats a few steps) */
	int			nfractions;
	uint64		fraction_bits[8];
	Numeric		fraction_numeric[8];
} PlanState;

static MlJsonValue *
parse_arg(MemoryContext cxt, MlJsonArena *arena, Jsonb *jb, const char *what)
{
	StringInfoData buf;
	MlJsonValue *v;
	MlJsonError err;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	/* straight from the jsonb when that is sure to give the same tree */
	v = ml_json_from_jsonb(arena, jb);
	if (v != NULL)
	{
		MemoryContextSwitchTo(old);
		return v;
	}
	initStringInfo(&buf);
	JsonbToCString(&buf, &jb->root, VARSIZE(jb));
	MemoryContextSwitchTo(old);
	v = ml_json_parse(arena, buf.data, buf.len, NULL, &err);
	if (v == NULL)
	{
		mlplat_sanitizer_before_error();
		ereport(ERROR,
				(errcode(err.code == ML_JSON_ERR_NOMEM ? ERRCODE_OUT_OF_MEMORY
						 : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid rollout %s: %s", what, err.message),
				 errdetail("Rule %s: the problem is at byte offset %zu of the argument's JSON text.",
						   err.code == ML_JSON_ERR_VALUE ? "json_value" : "json_syntax",
						   err.offset),
				 errhint("Rollout records carry only finite numbers within IEEE 754 double range.")));
	}
	return v;
}

static void
report(MlRolloutStatus st, const MlRolloutError *err)
{
	mlplat_sanitizer_before_error();
	ereport(ERROR,
			(errcode(st == ML_ROLLOUT_NOMEM ? ERRCODE_OUT_OF_MEMORY
					 : ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rollout %s: %s", err->path, err->message),
			 errdetail("Rule %s: %s", err->rule, err->detail),
			 errhint("%s", err->hint)));
}

static const MlRolloutContract *
cached_contract(FunctionCallInfo fcinfo, PlanState *state, Jsonb *jb)
{
	ContractCache *cache = state->contract;
	MemoryContext cxt;
	MlJsonArena *arena;
	MlJsonValue *tree;
	MlRolloutContract contract;
	MlRolloutError err;
	MlRolloutStatus st;

	if (cache != NULL && VARSIZE(cache->bytes) == VARSIZE(jb) &&
		memcmp(cache->bytes, jb, VARSIZE(jb)) == 0)
		return &cache->contract;

	/* read into a fresh context; replace the cache only once it is valid */
	cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "mlplat rollout contract",
								ALLOCSET_SMALL_SIZES);
	PG_TRY();
	{
		arena = mlplat_json_arena_in(cxt);
		tree = parse_arg(cxt, arena, jb, "contract");
		st = ml_rollout_read_contract(arena, tree, &contract, &err);
		if (st != ML_ROLLOUT_OK)
			report(st, &err);
	}
	PG_CATCH();
	{
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (cache != NULL)
		MemoryContextDelete(cache->cxt);
	cache = MemoryContextAlloc(cxt, sizeof(ContractCache));
	cache->cxt = cxt;
	cache->bytes = MemoryContextAlloc(cxt, VARSIZE(jb));
	memcpy(cache->bytes, jb, VARSIZE(jb));
	cache->contract = contract;
	state->contract = cache;
	return &cache->contract;
}

/*
 * The plan as jsonb, built directly rather than by jsonb_in(plan->json):
 * the same members with the same values (numbers through numeric_in from
 * the canonical text, as jsonb_in reads them), handed to JsonbValueToJsonb
 * in jsonb's own key order (shorter keys first, then bytewise), which is
 * what jsonb_in would sort them into.  Assert-enabled builds compare the
 * result with jsonb_in's.
 */
static void
set_string(JsonbValue *v, const char *s)
{
	v->type = jbvString;
	v->val.string.val = (char *) s;
	v->val.string.len = strlen(s);
}

static void
set_number(PlanState *state, MemoryContext keep, JsonbValue *v, double d)
{
	char		text[32];
	uint64		bits;
	Numeric		n;

	/*
	 * The numeric depends only on the double (its bits, so -0 and 0 stay
	 * apart): reuse one made for an earlier plan of this query.
	 */
	memcpy(&bits, &d, sizeof(bits));
	v->type = jbvNumeric;
	for (int i = 0; i < state->nfractions; i++)
	{
		if (state->fraction_bits[i] == bits)
		{
			v->val.numeric = state->fraction_numeric[i];
			return;
		}
	}
	if (ml_json_format_number(d, text) == 0)
		elog(ERROR, "non-finite fraction in a rollout plan");	/* checked on input */
	n = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(text),
											ObjectIdGetDatum(InvalidOid),
											Int32GetDatum(-1)));
	if (state->nfractions < lengthof(state->fraction_bits))
	{
		Numeric		copy = MemoryContextAlloc(keep, VARSIZE(n));

		memcpy(copy, n, VARSIZE(n));
		state->fraction_bits[state->nfractions] = bits;
		state->fraction_numeric[state->nfractions++] = copy;
	}
	v->val.numeric = n;
}

static Jsonb *
plan_jsonb(PlanState *state, MemoryContext keep, const MlRolloutPlan *plan)
{
	static const char *const keys[7] = {
		"reasons", "decision", "next_fraction", "decision_digest", "current_fraction",
		"contract_content_id", "evidence_content_id"
	};
	JsonbValue	reasons[ML_REASON_COUNT];
	JsonbPair	pairs[7];
	JsonbValue	obj;
	int			n = 0;

	for (int i = 0; i < ML_REASON_COUNT; i++)
		if (plan->reasons & (1u << i))
			set_string(&reasons[n++], ml_rollout_reason_name(i));
	for (int i = 0; i < 7; i++)
	{
		set_string(&pairs[i].key, keys[i]);
		pairs[i].order = i;
	}
	pairs[0].value.type = jbvArray;
	pairs[0].value.val.array.nElems = n;
	pairs[0].value.val.array.elems = reasons;
	pairs[0].value.val.array.rawScalar = false;
	set_string(&pairs[1].value, ml_rollout_decision_name(plan->decision));
	set_number(state, keep, &pairs[2].value, plan->next_fraction);
	set_string(&pairs[3].value, plan->decision_digest);
	set_number(state, keep, &pairs[4].value, plan->current_fraction);
	set_string(&pairs[5].value, plan->contract_content_id);
	set_string(&pairs[6].value, plan->evidence_content_id);
	obj.type = jbvObject;
	obj.val.object.nPairs = 7;
	obj.val.object.pairs = pairs;
	return JsonbValueToJsonb(&obj);
}

Datum
mlplat_plan_rollout(PG_FUNCTION_ARGS)
{
	Jsonb	   *contract_jb = PG_GETARG_JSONB_P(0);
	Jsonb	   *evidence_jb = PG_GETARG_JSONB_P(1);
	PlanState  *state = (PlanState *) fcinfo->flinfo->fn_extra;
	const MlRolloutContract *contract;
	MemoryContext old;
	MlJsonArena *arena;
	MlJsonValue *tree;
	MlRolloutEvidence evidence;
	MlRolloutPlan plan;
	MlRolloutError err;
	MlRolloutStatus st;
	Jsonb	   *result;
	Jsonb	   *copy;

	if (state == NULL)
	{
		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PlanState));
		state->call_cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "mlplat rollout",
												ALLOCSET_DEFAULT_SIZES);
		fcinfo->flinfo->fn_extra = state;
	}
	contract = cached_contract(fcinfo, state, contract_jb);

	/* what the previous call left (also after an error it raised) goes now */
	MemoryContextReset(state->call_cxt);
	arena = mlplat_json_arena_in(state->call_cxt);
	tree = parse_arg(state->call_cxt, arena, evidence_jb, "evidence");
	st = ml_rollout_read_evidence(arena, tree, &evidence, &err);
	if (st == ML_ROLLOUT_OK)
		st = ml_rollout_decide(arena, contract, &evidence, &plan, &err);
	if (st != ML_ROLLOUT_OK)
		report(st, &err);

	old = MemoryContextSwitchTo(state->call_cxt);
	result = plan_jsonb(state, fcinfo->flinfo->fn_mcxt, &plan);
#ifdef USE_ASSERT_CHECKING
	{
		Jsonb	   *text_route = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																	CStringGetDatum(plan.json)));

		Assert(VARSIZE(text_route) == VARSIZE(result) &&
			   memcmp(text_route, result, VARSIZE(result)) == 0);
	}
#endif
	MemoryContextSwitchTo(old);
	/* the result outlives the call context: copy it to the caller's */
	copy = palloc(VARSIZE(result));
	memcpy(copy, result, VARSIZE(result));
	PG_RETURN_JSONB_P(copy);
}
