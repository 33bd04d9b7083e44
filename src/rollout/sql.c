/*
 * sql.c — mlplat.plan_rollout(contract jsonb, evidence jsonb) → jsonb.
 *
 * The SQL glue (with evidence_jsonb.c, the only files under src/rollout
 * that include PostgreSQL headers): evidence is read in one pass from its
 * jsonb (mlplat/rollout_jsonb.h: fields found in place, validated, hashed
 * from canonical text written straight from them); a record that pass
 * declines, or refuses, is read again as a tree (from the jsonb, or from its
 * text through our parser), the reference route, which reports the error;
 * contracts are read as trees.  plan.c validates and
 * decides; the plan is built as jsonb directly, the same value jsonb_in
 * would make of its canonical text.  A refusal is SQLSTATE 22023 naming the
 * field path and the rule.
 *
 * Memory: each call works in a private memory context under fn_mcxt that
 * the next call resets (after an ereport, that reset or the end of the query
 * frees it).  Contracts read in this query are kept in fn_extra too (see
 * ContractCache): a batch deciding many evidence records against a few
 * contracts reads and verifies each contract once.  An entry is used only
 * for a contract byte-for-byte equal to the one it was read from, so the
 * cache can never change an answer.
 */
#include "postgres.h"

#include "common/hashfn.h"
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
#include "mlplat/rollout_jsonb.h"
#include "mlplat/sanitizer.h"

PG_FUNCTION_INFO_V1(mlplat_plan_rollout);

/*
 * Contracts read by this call site, keyed by their jsonb bytes: an open
 * addressing table of CACHE_SLOTS slots holding at most CACHE_MAX entries
 * (a few megabytes); when it is full it is emptied and starts again.  Batches
 * that interleave up to CACHE_MAX contracts read each once.
 */
#define CACHE_SLOTS 4096 /* a power of two */
#define CACHE_MAX 2048

typedef struct CachedContract
{
	uint32 hash;
	Jsonb *bytes;				/* copy of the contract datum */
	MlRolloutContract contract; /* scope strings copied beside it */
} CachedContract;

typedef struct ContractCache
{
	MemoryContext cxt; /* entries; reset when full */
	int nentries;
	CachedContract *last; /* the previous call's, checked first */
	CachedContract *slots[CACHE_SLOTS];
} ContractCache;

/*
 * fn_extra: the contract cache and a context for the evidence of one call,
 * reset at the start of the next (creating and deleting a context per call
 * cost more than the decision itself).
 */
typedef struct PlanState
{
	ContractCache cache;
	MemoryContext call_cxt;
	/* decide's arena: bump-allocated from scratch, emptied by each call */
	char *scratch;
	size_t scratch_used;
	/* fractions of recent plans as numerics (a batch repeats a few steps) */
	int nfractions;
	uint64 fraction_bits[8];
	Numeric fraction_numeric[8];
} PlanState;

/*
 * Room for decide's arena: its first block (32 kB, json.c) and the arena
 * itself.  From the call context, that block would be a malloc and a free
 * per call (a chunk over AllocSet's 8 kB limit gets a block of its own).
 */
#define SCRATCH_SIZE (40 * 1024)

static void *
scratch_alloc(void *ctx, size_t size)
{
	PlanState *state = (PlanState *) ctx;
	size_t need = MAXALIGN(size);

	if (SCRATCH_SIZE - state->scratch_used >= need)
	{
		void *p = state->scratch + state->scratch_used;

		state->scratch_used += need;
		return p;
	}
	return MemoryContextAllocExtended(state->call_cxt, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
scratch_free(void *ctx, void *ptr)
{
	PlanState *state = (PlanState *) ctx;

	/* scratch is emptied as a whole; the rest goes with the call context */
	if ((char *) ptr < state->scratch || (char *) ptr >= state->scratch + SCRATCH_SIZE)
		pfree(ptr);
}

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

static bool
same_bytes(const CachedContract *c, Jsonb *jb)
{
	return VARSIZE(c->bytes) == VARSIZE(jb) && memcmp(c->bytes, jb, VARSIZE(jb)) == 0;
}

/* a copy of s in cxt (names are at most 253 bytes; NUL-terminated like the tree's) */
static void
copy_str(MemoryContext cxt, MlRolloutStr *s)
{
	char *c = MemoryContextAlloc(cxt, s->len + 1);

	memcpy(c, s->str, s->len);
	c[s->len] = '\0';
	s->str = c;
}

/*
 * The contract in jb, read and verified once per distinct contract: a
 * refusal is reported from here (and nothing is cached).  The tree is read
 * in call_cxt, which the caller has just reset; what is kept is copied out.
 */
static const MlRolloutContract *
cached_contract(PlanState *state, Jsonb *jb)
{
	ContractCache *cache = &state->cache;
	CachedContract *c;
	MlJsonArena *arena;
	MlJsonValue *tree;
	MlRolloutContract contract;
	MlRolloutError err;
	MlRolloutStatus st;
	uint32 hash;
	uint32 tail;
	uint32 i;

	if (cache->last != NULL && same_bytes(cache->last, jb))
		return &cache->last->contract;
	/*
	 * Hash the datum's last bytes only: a contract's members are stored
	 * shortest key first, so it ends with its content id, which differs
	 * between any two contracts that matter.  Equality is still decided on
	 * every byte.
	 */
	tail = Min(VARSIZE(jb), 64);
	hash = hash_bytes((const unsigned char *) jb + VARSIZE(jb) - tail, (int) tail);
	for (i = hash & (CACHE_SLOTS - 1); (c = cache->slots[i]) != NULL; i = (i + 1) & (CACHE_SLOTS - 1))
	{
		if (c->hash == hash && same_bytes(c, jb))
		{
			cache->last = c;
			return &c->contract;
		}
	}

	if (cache->nentries >= CACHE_MAX)
	{
		MemoryContextReset(cache->cxt);
		memset(cache->slots, 0, sizeof(cache->slots));
		cache->nentries = 0;
		cache->last = NULL;
		i = hash & (CACHE_SLOTS - 1);
	}
	arena = mlplat_json_arena_in(state->call_cxt);
	tree = parse_arg(state->call_cxt, arena, jb, "contract");
	st = ml_rollout_read_contract(arena, tree, &contract, &err);
	if (st != ML_ROLLOUT_OK)
		report(st, &err);
	c = MemoryContextAlloc(cache->cxt, sizeof(CachedContract));
	c->contract = contract;
	c->hash = hash;
	c->bytes = MemoryContextAlloc(cache->cxt, VARSIZE(jb));
	memcpy(c->bytes, jb, VARSIZE(jb));
	copy_str(cache->cxt, &c->contract.scope.project);
	copy_str(cache->cxt, &c->contract.scope.deployment);
	copy_str(cache->cxt, &c->contract.scope.target_revision);
	copy_str(cache->cxt, &c->contract.scope.previous_revision);
	copy_str(cache->cxt, &c->contract.scope.model_digest);
	copy_str(cache->cxt, &c->contract.scope.config_digest);
	cache->slots[i] = c;
	cache->nentries++;
	cache->last = c;
	return &c->contract;
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
set_string_len(JsonbValue *v, const char *s, int len)
{
	v->type = jbvString;
	v->val.string.val = (char *) s;
	v->val.string.len = len;
}

static void
set_string(JsonbValue *v, const char *s)
{
	set_string_len(v, s, strlen(s));
}

static void
set_number(PlanState *state, MemoryContext keep, JsonbValue *v, double d)
{
	char text[32];
	uint64 bits;
	Numeric n;

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
		elog(ERROR, "non-finite fraction in a rollout plan"); /* checked on input */
	n = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(text),
											ObjectIdGetDatum(InvalidOid),
											Int32GetDatum(-1)));
	if (state->nfractions < lengthof(state->fraction_bits))
	{
		Numeric copy = MemoryContextAlloc(keep, VARSIZE(n));

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
	static const int key_lens[7] = { 7, 8, 13, 15, 16, 19, 19 };
	JsonbValue reasons[ML_REASON_COUNT];
	JsonbPair pairs[7];
	JsonbValue obj;
	int n = 0;

	for (int i = 0; i < ML_REASON_COUNT; i++)
		if (plan->reasons & (1u << i))
			set_string(&reasons[n++], ml_rollout_reason_name(i));
	for (int i = 0; i < 7; i++)
	{
		set_string_len(&pairs[i].key, keys[i], key_lens[i]);
		pairs[i].order = i;
	}
	pairs[0].value.type = jbvArray;
	pairs[0].value.val.array.nElems = n;
	pairs[0].value.val.array.elems = reasons;
	pairs[0].value.val.array.rawScalar = false;
	set_string(&pairs[1].value, ml_rollout_decision_name(plan->decision));
	set_number(state, keep, &pairs[2].value, plan->next_fraction);
	set_string_len(&pairs[3].value, plan->decision_digest, ML_CONTENT_ID_LEN);
	set_number(state, keep, &pairs[4].value, plan->current_fraction);
	set_string_len(&pairs[5].value, plan->contract_content_id, ML_CONTENT_ID_LEN);
	set_string_len(&pairs[6].value, plan->evidence_content_id, ML_CONTENT_ID_LEN);
	obj.type = jbvObject;
	obj.val.object.nPairs = 7;
	obj.val.object.pairs = pairs;
	return JsonbValueToJsonb(&obj);
}

/*
 * The evidence in jb: one pass when it can, else (and to report errors) the
 * tree.  The contract's id_prefix spares a block of the content id's hashing.
 */
static void
read_evidence(PlanState *state, const MlRolloutContract *contract, Jsonb *jb,
			  MlRolloutEvidence *evidence)
{
	MlRolloutEvidenceFields fields;
	MlJsonArena *arena;
	MlJsonValue *tree;
	MlRolloutError err;
	MlRolloutStatus st;

	if (ml_rollout_evidence_from_jsonb(jb, &fields) &&
		ml_rollout_read_evidence_fields(fields.fields, &contract->id_prefix, evidence, &err) ==
			ML_ROLLOUT_OK)
		return;
	arena = mlplat_json_arena_in(state->call_cxt);
	tree = parse_arg(state->call_cxt, arena, jb, "evidence");
	st = ml_rollout_read_evidence(arena, tree, evidence, &err);
	if (st != ML_ROLLOUT_OK)
		report(st, &err);
}

Datum
mlplat_plan_rollout(PG_FUNCTION_ARGS)
{
	Jsonb *contract_jb = PG_GETARG_JSONB_P(0);
	Jsonb *evidence_jb = PG_GETARG_JSONB_P(1);
	PlanState *state = (PlanState *) fcinfo->flinfo->fn_extra;
	const MlRolloutContract *contract;
	MemoryContext old;
	MlJsonArena *arena;
	MlRolloutEvidence evidence;
	MlRolloutPlan plan;
	MlRolloutError err;
	MlRolloutStatus st;
	Jsonb *result;
	Jsonb *copy;

	if (state == NULL)
	{
		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PlanState));
		state->call_cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "mlplat rollout",
												ALLOCSET_DEFAULT_SIZES);
		state->cache.cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt,
												 "mlplat rollout contracts",
												 ALLOCSET_DEFAULT_SIZES);
		state->scratch = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, SCRATCH_SIZE);
		fcinfo->flinfo->fn_extra = state;
	}

	/* what the previous call left (also after an error it raised) goes now */
	MemoryContextReset(state->call_cxt);
	state->scratch_used = 0;
	contract = cached_contract(state, contract_jb);
	read_evidence(state, contract, evidence_jb, &evidence);
	arena = ml_json_arena_new_with(scratch_alloc, scratch_free, state);
	if (arena == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	st = ml_rollout_decide(arena, contract, &evidence, &plan, &err);
	if (st != ML_ROLLOUT_OK)
		report(st, &err);

	old = MemoryContextSwitchTo(state->call_cxt);
	result = plan_jsonb(state, fcinfo->flinfo->fn_mcxt, &plan);
#ifdef USE_ASSERT_CHECKING
	{
		Jsonb *text_route = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
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
