/*
 * rollout_decide_sql.c — the SQL face of the rollouts reconciler's pure
 * decision (mlplat/rollout_decide.h).  The pass calls ml_rollout_pass_decide
 * itself (rollouts.c); SQL calls the rest:
 *
 *   mlplat._rollout_want_percent(status, requested_action, fraction) → int
 *       (the claim)
 *   mlplat._rollout_decide(the row's and the observation's fields) → the step
 *       (the tests: sql/rollout_reconcile.sql drives a pass with it)
 *   mlplat._rollout_pass_plan(contract, fraction, replicas, observation, ...)
 *       (the tests: a due decision's evidence, plan and status, as the pass
 *       makes them with ml_rollout_pass_plan, mlplat/rollout_pass_plan.h)
 *
 * Only conversions here: every rule is in rollout_decide.c and pass_plan.c.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include <math.h>

#include "mlplat/json_jsonb.h"
#include "mlplat/rollout_decide.h"
#include "mlplat/rollout_pass_plan.h"
#include "mlplat/states.h"

PG_FUNCTION_INFO_V1(mlplat_rollout_want_percent);
PG_FUNCTION_INFO_V1(mlplat_rollout_decide);
PG_FUNCTION_INFO_V1(mlplat_rollout_pass_plan);

#define TEXT_ARG(n) (PG_ARGISNULL(n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n)))

/* The rollout status argument n (NULL: none, which no active rollout has) */
static MlplatRolloutStatus
status_arg(FunctionCallInfo fcinfo, int n)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("mlplat: a rollout decision needs a status")));
	return (MlplatRolloutStatus) mlplat_status_parse(MLPLAT_MACHINE_ROLLOUT, TEXT_ARG(n));
}

/* numeric argument n as its decimal text (NULL stays NULL) */
static const char *
numeric_text_arg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : DatumGetCString(DirectFunctionCall1(numeric_out, PG_GETARG_DATUM(n)));
}

/* A one-dimensional array argument's elements (none for NULL) */
static int
array_arg(FunctionCallInfo fcinfo, int n, Oid elem, Datum **values, bool **nulls)
{
	int16 len;
	bool byval;
	char align;
	int count = 0;

	*values = NULL;
	*nulls = NULL;
	if (PG_ARGISNULL(n))
		return 0;
	get_typlenbyvalalign(elem, &len, &byval, &align);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(n), elem, len, byval, align, values, nulls, &count);
	return count;
}

static Datum
text_or_null(const char *s, bool *isnull)
{
	*isnull = s == NULL;
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

static Datum
result_tuple(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc td;

	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("mlplat: a record result is needed here")));
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), values, nulls));
}

/* mlplat._rollout_want_percent(status text, requested_action text, fraction numeric) → int */
Datum
mlplat_rollout_want_percent(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ml_rollout_want_percent(status_arg(fcinfo, 0), ml_rollout_request_of(TEXT_ARG(1)),
											numeric_text_arg(fcinfo, 2), NULL));
}

/*
 * mlplat._rollout_decide(status, requested_action, fraction, target_kn, previous_kn,
 *   window_started, decide_at_ms, window_seconds, observed_at_ms, settled,
 *   latest_created_kn, rolledout_kn, traffic_revisions text[], traffic_percents int[],
 *   has_metrics) → (want_percent, target_kn, previous_kn, target_percent,
 *   previous_percent, step, close_kn, close_status, status_reason, clear_window,
 *   window_start_ms, decide_at_ms)
 */
Datum
mlplat_rollout_decide(PG_FUNCTION_ARGS)
{
	MlRolloutPassIn in;
	MlRolloutPassDecision d;
	Datum *revs,
		*pcts;
	bool *rev_nulls,
		*pct_nulls;
	int nrevs = array_arg(fcinfo, 12, TEXTOID, &revs, &rev_nulls);
	int npcts = array_arg(fcinfo, 13, INT4OID, &pcts, &pct_nulls);
	MlRolloutTraffic *traffic = palloc0(sizeof(MlRolloutTraffic) * (nrevs + 1));
	Datum values[12];
	bool nulls[12];

	memset(&in, 0, sizeof(in));
	in.status = status_arg(fcinfo, 0);
	in.request = ml_rollout_request_of(TEXT_ARG(1));
	in.fraction = numeric_text_arg(fcinfo, 2);
	in.target_kn = TEXT_ARG(3);
	in.previous_kn = TEXT_ARG(4);
	in.window_started = !PG_ARGISNULL(5) && PG_GETARG_BOOL(5);
	in.has_decide_at = !PG_ARGISNULL(6);
	in.decide_at_ms = in.has_decide_at ? PG_GETARG_INT64(6) : 0;
	in.window_seconds = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7);
	in.observed_at_ms = PG_ARGISNULL(8) ? 0 : PG_GETARG_INT64(8);
	in.settled = !PG_ARGISNULL(9) && PG_GETARG_BOOL(9);
	in.latest_created_kn = TEXT_ARG(10);
	in.rolledout_kn = TEXT_ARG(11);
	/* an entry without a revision matches none; one without a percent counts 0 */
	for (int i = 0; i < nrevs; i++)
	{
		traffic[i].revision = rev_nulls[i] ? NULL : TextDatumGetCString(revs[i]);
		traffic[i].percent = i < npcts && !pct_nulls[i] ? DatumGetInt32(pcts[i]) : 0;
	}
	in.traffic = traffic;
	in.ntraffic = nrevs;
	in.has_metrics = !PG_ARGISNULL(14) && PG_GETARG_BOOL(14);

	ml_rollout_pass_decide(&in, &d);

	memset(nulls, false, sizeof(nulls));
	values[0] = Int32GetDatum(d.want_percent);
	values[1] = text_or_null(d.target_kn, &nulls[1]);
	values[2] = text_or_null(d.previous_kn, &nulls[2]);
	values[3] = Int32GetDatum(d.target_percent);
	values[4] = Int32GetDatum(d.previous_percent);
	values[5] = CStringGetTextDatum(ml_rollout_step_name(d.step));
	values[6] = text_or_null(d.close_kn, &nulls[6]);
	values[7] = text_or_null(d.step == ML_ROLLOUT_STEP_CLOSE ? mlplat_status_name(MLPLAT_MACHINE_ROLLOUT, d.close_status)
															 : NULL,
							 &nulls[7]);
	values[8] = text_or_null(d.status_reason[0] ? d.status_reason : NULL, &nulls[8]);
	values[9] = BoolGetDatum(d.clear_window);
	values[10] = Int64GetDatum(d.window_start_ms);
	nulls[10] = !d.start_window;
	values[11] = Int64GetDatum(d.decide_at_ms);
	nulls[11] = !d.start_window;
	PG_RETURN_DATUM(result_tuple(fcinfo, values, nulls));
}

/* jsonb argument n as our parser's tree, read from its text (NULL stays NULL) */
static const MlJsonValue *
jsonb_tree_arg(FunctionCallInfo fcinfo, int n, MlJsonArena *arena)
{
	Jsonb *jb;
	StringInfoData buf;
	MlJsonError err;
	const MlJsonValue *v;

	if (PG_ARGISNULL(n))
		return NULL;
	jb = PG_GETARG_JSONB_P(n);
	initStringInfo(&buf);
	JsonbToCString(&buf, &jb->root, VARSIZE(jb));
	v = ml_json_parse(arena, buf.data, buf.len, NULL, &err);
	if (v == NULL)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("mlplat: %s", err.message)));
	return v;
}

/*
 * mlplat._rollout_pass_plan(contract jsonb, fraction numeric, target_replicas int,
 *   previous_replicas int, observation jsonb, target_kn text, previous_kn text,
 *   window_seconds int) → (evidence, plan, decision, reasons, next_fraction, plan_status,
 *   plan_reason, keep_window, recheck_at_ms, refused): the DECIDE step's fields of
 *   the write-back row, as the pass fills them (src/rollout/pass_plan.c).
 */
Datum
mlplat_rollout_pass_plan(PG_FUNCTION_ARGS)
{
	MlJsonArena *arena = mlplat_json_arena_in(CurrentMemoryContext);
	const MlJsonValue *obs = jsonb_tree_arg(fcinfo, 4, arena);
	const MlJsonValue *at = ml_json_object_get(obs, "observed_at");
	MlRolloutPassPlanIn in = {
		.contract = jsonb_tree_arg(fcinfo, 0, arena),
		/* the numeric's own decimal text, as the pass reads the claim's (seam.c) */
		.fraction = PG_ARGISNULL(1) ? NULL : DatumGetCString(DirectFunctionCall1(numeric_out, PG_GETARG_DATUM(1))),
		.target_replicas = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2),
		.previous_replicas = PG_ARGISNULL(3) ? 0 : PG_GETARG_INT32(3),
		.observation = obs,
		.target_kn = TEXT_ARG(5),
		.previous_kn = TEXT_ARG(6),
		.window_seconds = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7),
		/* as the pass has it: the observation's seconds in ms */
		.observed_at_ms = at && at->type == ML_JSON_NUMBER ? (int64) llround(at->u.number.value * 1000) : 0,
	};
	MlRolloutPassPlan out;
	Datum values[10];
	bool nulls[10];
	Datum reasons[ML_REASON_COUNT];

	if (ml_rollout_pass_plan(arena, &in, &out) != ML_ROLLOUT_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	memset(nulls, true, sizeof(nulls));
	if (out.evidence)
	{
		values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(out.evidence));
		nulls[0] = false;
	}
	if (out.refused)
	{
		values[9] = CStringGetTextDatum(out.refusal);
		nulls[9] = false;
		PG_RETURN_DATUM(result_tuple(fcinfo, values, nulls));
	}
	memset(nulls, false, sizeof(nulls));
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(out.plan.json));
	values[2] = CStringGetTextDatum(out.decision);
	/* as the write-back row carries them (rollouts.c): the plan's order, the plan's decimal text */
	for (size_t i = 0; i < out.nreasons; i++)
		reasons[i] = CStringGetTextDatum(out.reasons[i]);
	values[3] = PointerGetDatum(construct_array(reasons, (int) out.nreasons, TEXTOID, -1, false, TYPALIGN_INT));
	nulls[3] = out.nreasons == 0; /* no reasons: NULL, as the write-back row has it */
	values[4] = DirectFunctionCall3(numeric_in, CStringGetDatum(out.next_fraction), ObjectIdGetDatum(InvalidOid),
									Int32GetDatum(-1));
	values[5] = CStringGetTextDatum(mlplat_status_name(MLPLAT_MACHINE_ROLLOUT, out.after.status));
	values[6] = CStringGetTextDatum(out.after.status_reason);
	values[7] = BoolGetDatum(out.after.keep_window);
	values[8] = Int64GetDatum(out.after.decide_at_ms);
	nulls[8] = !out.after.keep_window;
	nulls[9] = true;
	PG_RETURN_DATUM(result_tuple(fcinfo, values, nulls));
}
