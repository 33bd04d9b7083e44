/*
 * sql.c — mlplat.plan_rollout(contract jsonb, evidence jsonb) → jsonb.
 *
 * The only file under src/rollout that includes PostgreSQL headers: jsonb
 * becomes text (JsonbToCString), our parser builds the trees, plan.c
 * validates and decides, and the canonical output goes back through
 * jsonb_in.  A refusal is SQLSTATE 22023 naming the field path and the rule.
 *
 * Memory: each call works in a private memory context that is deleted at
 * the end (an ereport frees it with its parent).  The contract of the
 * previous call is kept in fn_extra: a batch deciding many evidence records
 * against one contract reads and verifies the contract once.  The cache
 * holds a copy of the contract's jsonb bytes and is used only when the next
 * contract is byte-for-byte equal, so it can never change an answer.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "mlplat/json.h"
#include "mlplat/rollout.h"

PG_FUNCTION_INFO_V1(mlplat_plan_rollout);

static void *
mcxt_alloc(void *ctx, size_t size)
{
	return MemoryContextAllocExtended((MemoryContext) ctx, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
mcxt_free(void *ctx, void *ptr)
{
	pfree(ptr);
}

/* The contract of the previous call, in a context under fn_mcxt. */
typedef struct ContractCache
{
	MemoryContext cxt;
	Jsonb	   *bytes;			/* copy of the contract datum */
	MlRolloutContract contract; /* strings point into cxt */
} ContractCache;

static MlJsonArena *
arena_in(MemoryContext cxt)
{
	MlJsonArena *arena = ml_json_arena_new_with(mcxt_alloc, mcxt_free, cxt);

	if (arena == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return arena;
}

static MlJsonValue *
parse_arg(MemoryContext cxt, MlJsonArena *arena, Jsonb *jb, const char *what)
{
	StringInfoData buf;
	MlJsonValue *v;
	MlJsonError err;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	initStringInfo(&buf);
	JsonbToCString(&buf, &jb->root, VARSIZE(jb));
	MemoryContextSwitchTo(old);
	v = ml_json_parse(arena, buf.data, buf.len, NULL, &err);
	if (v == NULL)
		ereport(ERROR,
				(errcode(err.code == ML_JSON_ERR_NOMEM ? ERRCODE_OUT_OF_MEMORY
						 : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid rollout %s: %s", what, err.message),
				 errdetail("Rule %s: the problem is at byte offset %zu of the argument's JSON text.",
						   err.code == ML_JSON_ERR_VALUE ? "json_value" : "json_syntax",
						   err.offset),
				 errhint("Rollout records carry only finite numbers within IEEE 754 double range.")));
	return v;
}

static void
report(MlRolloutStatus st, const MlRolloutError *err)
{
	ereport(ERROR,
			(errcode(st == ML_ROLLOUT_NOMEM ? ERRCODE_OUT_OF_MEMORY
					 : ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rollout %s: %s", err->path, err->message),
			 errdetail("Rule %s: %s", err->rule, err->detail),
			 errhint("%s", err->hint)));
}

static const MlRolloutContract *
cached_contract(FunctionCallInfo fcinfo, Jsonb *jb)
{
	ContractCache *cache = (ContractCache *) fcinfo->flinfo->fn_extra;
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
		arena = arena_in(cxt);
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
	fcinfo->flinfo->fn_extra = cache;
	return &cache->contract;
}

Datum
mlplat_plan_rollout(PG_FUNCTION_ARGS)
{
	Jsonb	   *contract_jb = PG_GETARG_JSONB_P(0);
	Jsonb	   *evidence_jb = PG_GETARG_JSONB_P(1);
	const MlRolloutContract *contract;
	MemoryContext cxt;
	MlJsonArena *arena;
	MlJsonValue *tree;
	MlRolloutEvidence evidence;
	MlRolloutPlan plan;
	MlRolloutError err;
	MlRolloutStatus st;
	Datum		result;

	contract = cached_contract(fcinfo, contract_jb);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat rollout",
								ALLOCSET_DEFAULT_SIZES);
	arena = arena_in(cxt);
	tree = parse_arg(cxt, arena, evidence_jb, "evidence");
	st = ml_rollout_read_evidence(arena, tree, &evidence, &err);
	if (st == ML_ROLLOUT_OK)
		st = ml_rollout_decide(arena, contract, &evidence, &plan, &err);
	if (st != ML_ROLLOUT_OK)
		report(st, &err);
	/* jsonb_in copies into the caller's context before ours goes */
	result = DirectFunctionCall1(jsonb_in, CStringGetDatum(plan.json));
	MemoryContextDelete(cxt);
	PG_RETURN_DATUM(result);
}
