/*
 * queries_sql.c — mlplat.evidence_queries(): the PromQL the rollouts reconciler
 * asks Prometheus for one revision, under a metrics preset.
 *
 * The same function the reconciler calls (ml_prom_preset_query), so an
 * operator can see — and run against their own Prometheus — exactly what
 * mlplat will ask before a rollout depends on it.  Pure: no I/O.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "mlplat/guc.h"
#include "mlplat/prometheus.h"

PG_FUNCTION_INFO_V1(mlplat_evidence_queries);

/* mlplat.evidence_queries(namespace, revision, window_ms, preset DEFAULT NULL) */
Datum
mlplat_evidence_queries(PG_FUNCTION_ARGS)
{
	static const char *const metric_names[ML_PROM_METRIC_COUNT] = { "requests", "errors", "p95_ms" };
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char *ns;
	char *rev;
	int64 ms;
	MlPromPreset preset = (MlPromPreset) mlplat_metrics_preset;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("namespace, revision and window must not be null")));
	ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
	rev = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ms = PG_GETARG_INT64(2);
	if (!PG_ARGISNULL(3))
	{
		char *name = text_to_cstring(PG_GETARG_TEXT_PP(3));

		if (!ml_prom_preset_from_name(name, &preset))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("unknown metrics preset \"%s\"", name),
							errhint("One of knative-opencensus, knative-otel, vllm, triton.")));
	}
	InitMaterializedSRF(fcinfo, 0);
	for (int m = 0; m < ML_PROM_METRIC_COUNT; m++)
	{
		char q[1024];
		Datum values[3];
		bool nulls[3] = { false, false, false };

		if (!ml_prom_preset_query(preset, (MlPromMetric) m, ns, rev, (long long) ms, q, sizeof(q)))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("no query for this namespace and revision"),
							errdetail("Both must be DNS labels of at most 63 characters and the window not negative.")));
		values[0] = CStringGetTextDatum(ml_prom_preset_name(preset));
		values[1] = CStringGetTextDatum(metric_names[m]);
		values[2] = CStringGetTextDatum(q);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}
