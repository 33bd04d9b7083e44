/*
 * isvc_owner.c — whether an InferenceService found under a deployment's name
 * is the deployment's own (see isvc_owner.h).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

#include "mlplat/isvc_owner.h"
#include "mlplat/labels.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_util.h"

const char *
mlplat_isvc_content_id(const MlJsonValue *obj)
{
	return mlplat_json_text(obj, "metadata", "annotations", MLPLAT_ANNOTATION_CONTENT_ID);
}

static bool
same_id(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

void
mlplat_isvc_judge(List *owners, const char *instance)
{
	List *ask = NIL;
	bool *known;
	int n;
	ListCell *lc;

	foreach (lc, owners)
	{
		MlplatIsvcOwner *o = lfirst(lc);
		const char *by = mlplat_json_text(o->obj, "metadata", "labels", MLPLAT_LABEL_MANAGED_BY);
		const char *inst = mlplat_json_text(o->obj, "metadata", "labels", MLPLAT_LABEL_INSTANCE);

		o->not_ours = NULL;
		if (by == NULL || strcmp(by, MLPLAT_MANAGED_BY) != 0 || inst == NULL || strcmp(inst, instance) != 0)
			o->not_ours = pstrdup("it does not carry mlplat's labels of this installation");
		else if (o->no_render || !same_id(mlplat_isvc_content_id(o->obj), o->own_content_id))
			ask = lappend(ask, o);
	}
	if (ask == NIL)
		return;

	/* another revision's id, or a forged one: the database knows the deployment's revisions */
	n = list_length(ask);
	known = palloc0(sizeof(bool) * (n + 1));
	mlplat_txn_begin();
	{
		ArrayBuildState *a[3];
		Oid types[3];
		Datum v[3];

		for (int i = 0; i < 3; i++)
		{
			a[i] = initArrayResult(TEXTOID, CurrentMemoryContext, false);
			types[i] = TEXTARRAYOID;
		}
		foreach (lc, ask)
		{
			MlplatIsvcOwner *o = lfirst(lc);

			mlplat_array_add_text(a[0], o->ns);
			mlplat_array_add_text(a[1], o->name);
			mlplat_array_add_text(a[2], mlplat_isvc_content_id(o->obj));
		}
		for (int i = 0; i < 3; i++)
			v[i] = makeArrayResult(a[i], CurrentMemoryContext);
		if (mlplat_sql_exec("SELECT * FROM mlplat._isvc_stamps_known($1, $2, $3)", 3, types, v, NULL) !=
			SPI_OK_SELECT)
			elog(ERROR, "mlplat: _isvc_stamps_known failed");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool isnull;
			int32 k = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

			if (!isnull && k >= 1 && k <= n)
				known[k] = true;
		}
	}
	mlplat_txn_commit();
	for (int i = 0; i < n; i++)
	{
		MlplatIsvcOwner *o = list_nth(ask, i);
		const char *id = mlplat_isvc_content_id(o->obj);

		if (!known[i + 1])
			o->not_ours = id ? psprintf("its content id %s is not one of the deployment's revisions", id)
							 : pstrdup("it carries no content id, and every revision of the deployment has one");
	}
}
