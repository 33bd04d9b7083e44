/*
 * isvc.c — mlplat._render_isvc(): the KServe v1beta1 InferenceService of one
 * deployment revision, as jsonb.
 *
 * It was a PL/pgSQL function around one nested jsonb_build_object; rendering
 * is pure and on deploy()'s hot path, where that expression cost about as
 * much as the rest of the validation together.  This builds the same value
 * with pushJsonbValue, so the stored jsonb is the same bytes:
 *   - every argument may be NULL and renders as JSON null where
 *     jsonb_build_object would put one (namespace is NULL when the project
 *     is: 'mlp-' || NULL);
 *   - integers become numerics through numeric_in of their text, as
 *     jsonb_build_object converts them; revision and gpus are strings;
 *   - env: absent when NULL or {}; otherwise [{"name", "value"}] ordered by
 *     name in the database's default collation (ORDER BY e.key), values as
 *     jsonb_each_text gives them (a JSON null becomes null); a non-object
 *     env fails as jsonb_each_text fails;
 *   - resources: only when gpus > 0;
 *   - predictor.serviceAccountName: mlplat.predictor_service_account, read
 *     at render time (so the function is STABLE, not IMMUTABLE);
 *   - metadata.annotations."mlplat.io/content-id": the content id of the
 *     render without it (since 0.3.0; see mlplat_render_isvc).
 * The regression test renders manifests and compares them with expected
 * output; validate-manifest checks them against the CRD schema.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/varlena.h"

#include "mlplat/guc.h"
#include "mlplat/labels.h"

PG_FUNCTION_INFO_V1(mlplat_render_isvc);

/* src/json/sql.c: mlplat.content_id(jsonb) */
extern Datum mlplat_content_id(PG_FUNCTION_ARGS);


static void
push_cstr(JsonbParseState **ps, JsonbIteratorToken tok, const char *s, int len)
{
	JsonbValue v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = len;
	pushJsonbValue(ps, tok, &v);
}

static void
key(JsonbParseState **ps, const char *k)
{
	push_cstr(ps, WJB_KEY, k, strlen(k));
}

static void
push_null(JsonbParseState **ps)
{
	JsonbValue v;

	v.type = jbvNull;
	pushJsonbValue(ps, WJB_VALUE, &v);
}

/* a text argument, or null */
static void
value_text(JsonbParseState **ps, FunctionCallInfo fcinfo, int arg)
{
	text *t;

	if (PG_ARGISNULL(arg))
	{
		push_null(ps);
		return;
	}
	t = PG_GETARG_TEXT_PP(arg);
	push_cstr(ps, WJB_VALUE, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/* an integer as jsonb_build_object stores it: numeric_in of its text */
static void
value_int(JsonbParseState **ps, FunctionCallInfo fcinfo, int arg)
{
	JsonbValue v;
	char buf[16];

	if (PG_ARGISNULL(arg))
	{
		push_null(ps);
		return;
	}
	pg_ltoa(PG_GETARG_INT32(arg), buf);
	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(buf),
														ObjectIdGetDatum(InvalidOid),
														Int32GetDatum(-1)));
	pushJsonbValue(ps, WJB_VALUE, &v);
}

static void
value_const_int(JsonbParseState **ps, const char *digits)
{
	JsonbValue v;

	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(digits),
														ObjectIdGetDatum(InvalidOid),
														Int32GetDatum(-1)));
	pushJsonbValue(ps, WJB_VALUE, &v);
}

/* an integer argument as a string ("3"), or null */
static void
value_int_text(JsonbParseState **ps, FunctionCallInfo fcinfo, int arg)
{
	char buf[16];

	if (PG_ARGISNULL(arg))
	{
		push_null(ps);
		return;
	}
	pg_ltoa(PG_GETARG_INT32(arg), buf);
	/* pushJsonbValue keeps the pointer until the jsonb is built: no stack buffer */
	push_cstr(ps, WJB_VALUE, pstrdup(buf), strlen(buf));
}

typedef struct EnvVar
{
	JsonbValue name;
	JsonbValue value;
} EnvVar;

static int
env_cmp(const void *a, const void *b)
{
	const JsonbValue *x = &((const EnvVar *) a)->name;
	const JsonbValue *y = &((const EnvVar *) b)->name;

	return varstr_cmp(x->val.string.val, x->val.string.len,
					  y->val.string.val, y->val.string.len, DEFAULT_COLLATION_OID);
}

/* "env": [{"name": k, "value": v}, ...] ordered by k, as the SQL version's jsonb_agg */
static void
push_env(JsonbParseState **ps, Jsonb *env)
{
	JsonbIterator *it;
	JsonbValue v;
	JsonbIteratorToken tok;
	EnvVar *vars;
	int n = 0;

	if (!JsonContainerIsObject(&env->root) || JsonContainerIsScalar(&env->root))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot call %s on a non-object", "jsonb_each_text")));
	vars = palloc(sizeof(EnvVar) * JsonContainerSize(&env->root));
	it = JsonbIteratorInit(&env->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			vars[n].name = v;
		else if (tok == WJB_VALUE)
		{
			/* jsonb_each_text: strings unquoted, null as SQL NULL, the rest as text */
			if (v.type == jbvString || v.type == jbvNull)
				vars[n].value = v;
			else
			{
				StringInfoData s;

				initStringInfo(&s);
				if (v.type == jbvBinary)
					JsonbToCString(&s, v.val.binary.data, v.val.binary.len);
				else if (v.type == jbvBool)
					appendStringInfoString(&s, v.val.boolean ? "true" : "false");
				else
					appendStringInfoString(&s, DatumGetCString(DirectFunctionCall1(numeric_out,
																				   NumericGetDatum(v.val.numeric))));
				vars[n].value.type = jbvString;
				vars[n].value.val.string.val = s.data;
				vars[n].value.val.string.len = s.len;
			}
			n++;
		}
	}
	qsort(vars, n, sizeof(EnvVar), env_cmp);

	key(ps, "env");
	pushJsonbValue(ps, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < n; i++)
	{
		pushJsonbValue(ps, WJB_BEGIN_OBJECT, NULL);
		key(ps, "name");
		pushJsonbValue(ps, WJB_VALUE, &vars[i].name);
		key(ps, "value");
		pushJsonbValue(ps, WJB_VALUE, &vars[i].value);
		pushJsonbValue(ps, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(ps, WJB_END_ARRAY, NULL);
}

/*
 * The InferenceService of the arguments; with content_id, it carries it as
 * annotation mlplat.io/content-id.
 */
static Jsonb *
render(FunctionCallInfo fcinfo, const char *content_id)
{
	JsonbParseState *ps = NULL;
	JsonbValue *res;

	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "apiVersion");
	push_cstr(&ps, WJB_VALUE, "serving.kserve.io/v1beta1", strlen("serving.kserve.io/v1beta1"));
	key(&ps, "kind");
	push_cstr(&ps, WJB_VALUE, "InferenceService", strlen("InferenceService"));

	key(&ps, "metadata");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "name");
	value_text(&ps, fcinfo, 1);
	key(&ps, "namespace");
	if (PG_ARGISNULL(0))
		push_null(&ps);
	else
	{
		text *p = PG_GETARG_TEXT_PP(0);
		char *ns = mlplat_project_namespace(VARDATA_ANY(p), VARSIZE_ANY_EXHDR(p));

		push_cstr(&ps, WJB_VALUE, ns, strlen(ns));
	}
	key(&ps, "labels");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, MLPLAT_LABEL_MANAGED_BY);
	push_cstr(&ps, WJB_VALUE, MLPLAT_MANAGED_BY, strlen(MLPLAT_MANAGED_BY));
	key(&ps, MLPLAT_LABEL_PROJECT);
	value_text(&ps, fcinfo, 0);
	key(&ps, "mlplat.io/deployment");
	value_text(&ps, fcinfo, 1);
	key(&ps, "mlplat.io/revision");
	value_int_text(&ps, fcinfo, 2);
	key(&ps, MLPLAT_LABEL_INSTANCE);
	value_text(&ps, fcinfo, 3);
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	key(&ps, "annotations");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "mlplat.io/artifact-sha256");
	value_text(&ps, fcinfo, 7);
	if (content_id)
	{
		key(&ps, MLPLAT_ANNOTATION_CONTENT_ID);
		push_cstr(&ps, WJB_VALUE, content_id, strlen(content_id));
	}
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL); /* metadata */

	key(&ps, "spec");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "predictor");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "minReplicas");
	value_int(&ps, fcinfo, 9);
	key(&ps, "maxReplicas");
	value_int(&ps, fcinfo, 10);
	/*
	 * The project's predictor identity (made by the projects reconciler with
	 * KServe's S3 annotations and credentials reference): the storage
	 * initializer fetches the model with it.  Read from the setting at render
	 * time, so the revision records the name it was deployed with.
	 */
	key(&ps, "serviceAccountName");
	push_cstr(&ps, WJB_VALUE, mlplat_predictor_service_account, strlen(mlplat_predictor_service_account));
	key(&ps, "model");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "modelFormat");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "name");
	value_text(&ps, fcinfo, 4);
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	key(&ps, "runtime");
	value_text(&ps, fcinfo, 5);
	key(&ps, "storageUri");
	value_text(&ps, fcinfo, 6);
	key(&ps, "readinessProbe");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "tcpSocket");
	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	key(&ps, "port");
	value_const_int(&ps, "8080");
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	key(&ps, "periodSeconds");
	value_const_int(&ps, "10");
	key(&ps, "failureThreshold");
	value_const_int(&ps, "3");
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL); /* readinessProbe */

	/* KServe omits empty lists and empty resources: render them absent, not empty */
	if (!PG_ARGISNULL(11))
	{
		Jsonb *env = PG_GETARG_JSONB_P(11);

		if (!(JsonContainerIsObject(&env->root) && JsonContainerSize(&env->root) == 0))
			push_env(&ps, env);
	}
	if (!PG_ARGISNULL(8) && PG_GETARG_INT32(8) > 0)
	{
		key(&ps, "resources");
		pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
		key(&ps, "limits");
		pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
		key(&ps, "nvidia.com/gpu");
		value_int_text(&ps, fcinfo, 8);
		pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
		pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL); /* model */
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL); /* predictor */
	pushJsonbValue(&ps, WJB_END_OBJECT, NULL); /* spec */
	res = pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * mlplat._render_isvc(project, deployment, revision, instance, model_format,
 *                     runtime, storage_uri, sha256, gpus, min_replicas,
 *                     max_replicas, env)
 *
 * The render carries its own content id (annotation mlplat.io/content-id: the
 * content id of the render without it), as a Workflow does: an
 * InferenceService found under a deployment's name is taken for the
 * deployment's own — re-applied, repaired, deleted — only when it carries
 * mlplat's labels and the content id of one of the deployment's revisions
 * (issue 18, finding 5).  The rollouts reconciler applies a revision's render
 * plus canaryTrafficPercent, so it stamps the revision's id too.
 */
Datum
mlplat_render_isvc(PG_FUNCTION_ARGS)
{
	Jsonb *bare = render(fcinfo, NULL);
	char *id = TextDatumGetCString(DirectFunctionCall1(mlplat_content_id, JsonbPGetDatum(bare)));

	PG_RETURN_JSONB_P(render(fcinfo, id));
}
