/*
 * labels.c — the namespace name and the ownership labels (labels.h), for C
 * and for SQL.
 *
 * SQL renders some manifests (the Workflow of a run) and claims return each
 * object's namespace; C renders others (the InferenceService, the project's
 * objects) and builds the LIST selector.  Both ask here, so a project's
 * namespace or mlplat's labels cannot drift apart between the two.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "mlplat/labels.h"

PG_FUNCTION_INFO_V1(mlplat_sql_project_namespace);
PG_FUNCTION_INFO_V1(mlplat_sql_managed_by_label);

char *
mlplat_project_namespace(const char *project, int len)
{
	return psprintf("%s%.*s", MLPLAT_NAMESPACE_PREFIX, len, project);
}

char *
mlplat_managed_selector(const char *instance)
{
	return psprintf("%s=%s,%s=%s", MLPLAT_LABEL_MANAGED_BY, MLPLAT_MANAGED_BY,
					MLPLAT_LABEL_INSTANCE, instance);
}

/* mlplat._project_namespace(project text) -> text */
Datum
mlplat_sql_project_namespace(PG_FUNCTION_ARGS)
{
	text *p = PG_GETARG_TEXT_PP(0);

	PG_RETURN_TEXT_P(cstring_to_text(mlplat_project_namespace(VARDATA_ANY(p), VARSIZE_ANY_EXHDR(p))));
}

/* mlplat._managed_by_label() -> jsonb {"app.kubernetes.io/managed-by": "mlplat"} */
Datum
mlplat_sql_managed_by_label(PG_FUNCTION_ARGS)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(MLPLAT_MANAGED_BY_JSON));
}
