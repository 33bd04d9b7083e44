/*
 * isvc_owner.c — whether an InferenceService found under a deployment's name
 * is the deployment's own (see isvc_owner.h).
 */
#include "postgres.h"

#include "mlplat/isvc_owner.h"
#include "mlplat/json.h"
#include "mlplat/labels.h"
#include "mlplat/observe.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"

void
mlplat_isvc_judge(List *owners, const char *instance)
{
	List *ask = NIL;
	const char **cells;
	bool *known;
	int n;
	int k;
	ListCell *lc;

	foreach (lc, owners)
	{
		MlplatIsvcOwner *o = lfirst(lc);

		o->not_ours = NULL;
		if (!mlplat_labelled_ours(o->obj, instance, NULL))
			o->not_ours = pstrdup("it does not carry mlplat's labels of this installation");
		else if (o->no_render || !mlplat_str_same(mlplat_object_content_id(o->obj), o->own_content_id))
			ask = lappend(ask, o);
	}
	if (ask == NIL)
		return;

	/* another revision's id, or a forged one: the database knows the deployment's revisions */
	n = list_length(ask);
	cells = palloc(sizeof(char *) * 3 * n);
	k = 0;
	foreach (lc, ask)
	{
		MlplatIsvcOwner *o = lfirst(lc);

		cells[k++] = o->ns;
		cells[k++] = o->name;
		cells[k++] = mlplat_object_content_id(o->obj);
	}
	known = mlplat_sql_known_ordinals("SELECT * FROM mlplat._isvc_stamps_known($1, $2, $3)", 3, n, cells);
	for (int i = 0; i < n; i++)
	{
		MlplatIsvcOwner *o = list_nth(ask, i);
		const char *id = mlplat_object_content_id(o->obj);

		if (!known[i])
			o->not_ours = id ? psprintf("its content id %s is not one of the deployment's revisions", id)
							 : pstrdup("it carries no content id, and every revision of the deployment has one");
	}
}
