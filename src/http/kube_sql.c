/*
 * kube_sql.c — superuser-only SQL test hooks for the Kubernetes client.
 *
 * They run in an ordinary backend inside the statement's transaction (the
 * only callers allowed to), and may point this backend at an explicit server
 * (mlplat._kube_configure) so tests never change the cluster-wide settings the
 * workers read.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "mlplat/http.h"
#include "mlplat/kube.h"
#include "kube_internal.h"

PG_FUNCTION_INFO_V1(mlplat_kube_configure_sql);
PG_FUNCTION_INFO_V1(mlplat_kube_call_sql);

static char *
opt_text(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

static const char *
config_state_name(MlplatKubeConfigState st)
{
	switch (st)
	{
		case MLPLAT_KUBE_NOT_CONFIGURED:
			return "not_configured";
		case MLPLAT_KUBE_READY:
			return "ready";
		case MLPLAT_KUBE_CONFIG_ERROR:
			return "error";
	}
	return "unknown";
}

/*
 * mlplat._kube_configure(url text, token_file text, ca_file text) RETURNS text
 * url NULL: back to the settings.  Returns the state and, if not ready, why.
 */
Datum
mlplat_kube_configure_sql(PG_FUNCTION_ARGS)
{
	const char *why;
	MlplatKubeConfigState st;

	mlplat_kube_config_override(opt_text(fcinfo, 0), opt_text(fcinfo, 1), opt_text(fcinfo, 2));
	st = mlplat_kube_config_refresh(&why);
	PG_RETURN_TEXT_P(cstring_to_text(why ? psprintf("%s: %s", config_state_name(st), why)
										 : config_state_name(st)));
}

/*
 * mlplat._kube_call(op, api_group, api_version, plural, namespace, name, body,
 *                   label_selector, lim, continue_token)
 *   RETURNS TABLE(url, outcome, status, reason, message, body, continue_token)
 * op: get | list | apply | create | replace | merge_patch | delete
 */
Datum
mlplat_kube_call_sql(PG_FUNCTION_ARGS)
{
	char *op = opt_text(fcinfo, 0);
	MlplatKubeResource res;
	char *ns = opt_text(fcinfo, 4);
	char *name = opt_text(fcinfo, 5);
	char *body = PG_ARGISNULL(6) ? NULL : JsonbToCString(NULL, &PG_GETARG_JSONB_P(6)->root, VARSIZE(PG_GETARG_JSONB_P(6)));
	const char *why;
	MlplatHttpBatch *b;
	MlplatHttpRequest *req;
	MlplatKubeResult r;
	TupleDesc tupdesc;
	Datum values[7];
	bool nulls[7] = { 0 };
	char *cont;

	if (op == NULL || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("op, api_version and plural are required")));
	res.group = opt_text(fcinfo, 1);
	res.version = opt_text(fcinfo, 2);
	res.plural = opt_text(fcinfo, 3);
	res.namespaced = (ns != NULL);

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (mlplat_kube_config_refresh(&why) != MLPLAT_KUBE_READY)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", why)));

	b = mlplat_http_batch_create(CurrentMemoryContext);
	mlplat_http_batch_allow_transaction(b);
	if (strcmp(op, "get") == 0)
		req = mlplat_kube_get(b, &res, ns, name);
	else if (strcmp(op, "list") == 0)
		req = mlplat_kube_list(b, &res, ns, opt_text(fcinfo, 7),
							   PG_ARGISNULL(8) ? 0 : PG_GETARG_INT32(8), opt_text(fcinfo, 9));
	else if (strcmp(op, "apply") == 0)
		req = mlplat_kube_apply(b, &res, ns, name, body ? body : "{}");
	else if (strcmp(op, "create") == 0)
		req = mlplat_kube_create(b, &res, ns, body ? body : "{}");
	else if (strcmp(op, "replace") == 0)
		req = mlplat_kube_replace(b, &res, ns, name, body ? body : "{}");
	else if (strcmp(op, "merge_patch") == 0)
		req = mlplat_kube_merge_patch(b, &res, ns, name, body ? body : "{}");
	else if (strcmp(op, "delete") == 0)
		req = mlplat_kube_delete(b, &res, ns, name);
	else
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("unknown op \"%s\"", op),
						errhint("Use get, list, apply, create, replace, merge_patch or delete.")));

	mlplat_http_batch_run(b);
	mlplat_kube_parse_response(req, &r);

	values[0] = CStringGetTextDatum(req->url);
	values[1] = CStringGetTextDatum(mlplat_kube_outcome_name(r.outcome));
	values[2] = Int32GetDatum(r.status);
	if (r.reason)
		values[3] = CStringGetTextDatum(r.reason);
	else
		nulls[3] = true;
	if (r.message)
		values[4] = CStringGetTextDatum(r.message);
	else
		nulls[4] = true;
	/*
	 * The body goes back to SQL as jsonb, made from its text by jsonb_in.
	 * Of what our parser accepted (r.body), jsonb_in refuses only a \u0000
	 * escape (ours refuses numbers beyond a double's range, and so never
	 * passes one beyond numeric's): such a body is returned as NULL.
	 */
	if (r.body && strstr(req->resp_body, "\\u0000") == NULL)
		values[5] = DirectFunctionCall1(jsonb_in, CStringGetDatum(req->resp_body));
	else
		nulls[5] = true;
	cont = r.body ? mlplat_kube_list_continue(r.body) : NULL;
	if (cont)
		values[6] = CStringGetTextDatum(cont);
	else
		nulls[6] = true;
	mlplat_http_batch_free(b);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
