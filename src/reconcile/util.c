/*
 * util.c — helpers shared by the reconciler passes.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/kinds.h"
#include "mlplat/http.h"
#include "mlplat/kube.h"
#include "mlplat/reconcile_util.h"

bool
mlplat_cluster_ready(MlplatPass *pass, const char **why)
{
	MlplatKubeConfigState st = mlplat_kube_config_refresh(why);

	if (st == MLPLAT_KUBE_READY)
		return true;
	if (st == MLPLAT_KUBE_NOT_CONFIGURED)
		snprintf(pass->status, sizeof(pass->status),
				 "idle: no Kubernetes cluster configured (set mlplat.kube_url)");
	else
		snprintf(pass->status, sizeof(pass->status), "idle: Kubernetes configuration unusable: %s",
				 *why ? *why : "unknown reason");
	return false;
}

/*
 * Plans of the statements mlplat_sql_bool runs, kept for the life of the
 * process: a write-back runs the same few statements once per entity, and
 * parsing and planning each call cost more than running it.  The plan cache
 * re-plans a kept plan when what it depends on changes (an ALTER, a DROP and
 * CREATE EXTENSION), so a kept plan never goes stale.
 */
typedef struct KeptPlan
{
	struct KeptPlan *next;
	char	   *sql;
	int			nargs;
	Oid		   *types;
	SPIPlanPtr	plan;
} KeptPlan;

static KeptPlan *kept_plans = NULL;

static SPIPlanPtr
kept_plan(const char *sql, int nargs, Oid *types)
{
	KeptPlan   *k;
	SPIPlanPtr	plan;

	for (k = kept_plans; k != NULL; k = k->next)
		if (k->nargs == nargs && strcmp(k->sql, sql) == 0 &&
			(nargs == 0 || memcmp(k->types, types, sizeof(Oid) * nargs) == 0))
			return k->plan;
	plan = SPI_prepare(sql, nargs, types);
	if (plan == NULL)
		elog(ERROR, "mlplat: could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "mlplat: could not keep the plan of \"%s\"", sql);
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptPlan));
	k->sql = MemoryContextStrdup(TopMemoryContext, sql);
	k->nargs = nargs;
	k->types = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * Max(nargs, 1));
	if (nargs > 0)
		memcpy(k->types, types, sizeof(Oid) * nargs);
	k->plan = plan;
	k->next = kept_plans;
	kept_plans = k;
	return plan;
}

bool
mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute_plan(kept_plan(sql, nargs, types), values, nulls, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "mlplat: \"%s\" returned no row", sql);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return !isnull && DatumGetBool(d);
}

char *
mlplat_instance_id(void)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *v;

	if (SPI_execute("SELECT mlplat._instance_id()", true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mlplat: no installation row");
	v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (v == NULL)
		elog(ERROR, "mlplat: installation has no instance id");
	return MemoryContextStrdup(caller, v);
}

void
mlplat_ledger_append(MlplatPass *pass, const char *entity, int64 entity_id,
					 const char *project, const char *action, const char *outcome,
					 const char *desired_digest, const char *observed_digest,
					 int http_status, const char *error, const char *trace_id, const char *note)
{
	Oid			types[14] = {TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	INT4OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		v[14];
	char		n[14];

	memset(n, ' ', sizeof(n));
#define TXT(i, s) do { if (s) v[i] = CStringGetTextDatum(s); else { v[i] = (Datum) 0; n[i] = 'n'; } } while (0)
	v[0] = CStringGetTextDatum(mlplat_kind_names[pass->kind]);
	TXT(1, entity);
	v[2] = Int64GetDatum(entity_id);
	if (entity_id == 0)
		n[2] = 'n';
	TXT(3, project);
	TXT(4, action);
	TXT(5, outcome);
	TXT(6, desired_digest);
	TXT(7, observed_digest);
	v[8] = Int32GetDatum(http_status);
	if (http_status == 0)
		n[8] = 'n';
	TXT(9, error);
	v[10] = Int64GetDatum(pass->epoch);
	TXT(11, pass->controller);
	TXT(12, trace_id);
	TXT(13, note);
#undef TXT
	(void) mlplat_sql_bool("SELECT mlplat._ledger_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
						   " CASE WHEN $14 IS NULL THEN NULL ELSE pg_catalog.jsonb_build_object('note', $14) END)",
						   14, types, v, n);
}

#define LIST_PAGE 500

char *
mlplat_kube_list_all(MlJsonArena *arena, const MlplatKubeResource *res, const char *selector,
					 List **items, int *lists)
{
	char	   *cont = NULL;
	List	   *got = NIL;

	for (;;)
	{
		MlplatHttpBatch *b = mlplat_http_batch_create(CurrentMemoryContext);
		MlplatHttpRequest *r = mlplat_kube_list(b, res, NULL, selector, LIST_PAGE, cont);
		MlplatKubeResult kr;
		MlJsonValue *page;
		MlJsonError err;
		const MlJsonValue *arr;

		mlplat_http_batch_run(b);
		(*lists)++;
		mlplat_kube_parse_response(r, &kr);
		if (kr.outcome == MLPLAT_KUBE_EXPIRED)
		{
			/* the continue token expired: the list must start over */
			got = NIL;
			cont = NULL;
			continue;
		}
		if (kr.outcome != MLPLAT_KUBE_OK)
			return psprintf("cannot list %s: %s", res->plural, kr.message ? kr.message : "unknown error");
		page = ml_json_parse(arena, r->resp_body, r->resp_len, NULL, &err);
		if (page == NULL)
			return psprintf("%s list is not JSON: %s", res->plural, err.message);
		arr = ml_json_object_get(page, "items");
		if (arr == NULL || arr->type != ML_JSON_ARRAY)
			return psprintf("%s list has no items array", res->plural);
		for (size_t i = 0; i < arr->u.array.count; i++)
			got = lappend(got, arr->u.array.items[i]);
		cont = mlplat_kube_list_continue(kr.body);
		if (cont == NULL || cont[0] == '\0')
			break;
	}
	*items = list_concat(*items, got);
	return NULL;
}

const char *
mlplat_json_text(const MlJsonValue *obj, const char *a, const char *b, const char *c)
{
	const MlJsonValue *v = ml_json_object_get(obj, a);

	if (v && b)
		v = ml_json_object_get(v, b);
	if (v && c)
		v = ml_json_object_get(v, c);
	return (v && v->type == ML_JSON_STRING) ? v->u.string.str : NULL;
}

bool
mlplat_json_int(const MlJsonValue *obj, const char *a, const char *b, int64 *out)
{
	const MlJsonValue *v = ml_json_object_get(ml_json_object_get(obj, a), b);

	if (v == NULL || v->type != ML_JSON_NUMBER || !v->u.number.is_integer)
		return false;
	*out = (int64) v->u.number.value;
	return true;
}
