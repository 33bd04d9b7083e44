/*
 * unanswered.c — the write-ahead record of external writes (see unanswered.h).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "mlplat/guc.h"
#include "mlplat/kinds.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/seam.h"
#include "mlplat/unanswered.h"

/* The seam (seam.h): mlplat.unanswered_note read into MlplatUnanswered */
MLPLAT_SEAM_GLOBAL(mlplat_unanswered_seam, unanswered_note, MlplatUnanswered);

List *
mlplat_unanswered_load(MlplatPass *pass)
{
	Oid types[1] = { TEXTOID };
	Datum v[1] = { CStringGetTextDatum(mlplat_kind_names[pass->kind]) };

	return mlplat_seam_claim(&mlplat_unanswered_seam, CurrentMemoryContext,
							 "SELECT n FROM mlplat._unanswered_of($1) n", 1, types, v, sizeof(MlplatUnanswered));
}

MlplatUnanswered *
mlplat_unanswered_find(List *notes, int64 entity_id, const char *object, const char *action)
{
	ListCell *lc;

	foreach (lc, notes)
	{
		MlplatUnanswered *u = lfirst(lc);

		if (u->entity_id == entity_id && strcmp(u->object, object) == 0 &&
			(action == NULL || strcmp(u->action, action) == 0))
			return u;
	}
	return NULL;
}

bool
mlplat_unanswered_settled(const MlplatUnanswered *u)
{
	return u->age_ms >= mlplat_unanswered_write_grace_ms;
}

/* answer: 0 a sight or the grace, 1 answered, 2 answered and the object made (see the SQL) */
static void
notes_append(MlplatWriteNotes *n, int64 entity_id, const char *object, const char *action, int answer)
{
	int64 *id = palloc(sizeof(int64));

	*id = entity_id;
	n->ids = lappend(n->ids, id);
	n->objects = lappend(n->objects, pstrdup(object));
	n->actions = lappend(n->actions, action ? pstrdup(action) : NULL);
	n->answered = lappend_int(n->answered, answer);
}

void
mlplat_write_notes_add(MlplatWriteNotes *n, int64 entity_id, const char *object, const char *action)
{
	notes_append(n, entity_id, object, action, 0);
}

void
mlplat_write_notes_answered(MlplatWriteNotes *n, int64 entity_id, const char *object, const char *action,
							bool made)
{
	notes_append(n, entity_id, object, action, made ? 2 : 1);
}

bool
mlplat_write_notes_commit(MlplatPass *pass, MlplatWriteNotes *n, const char *what)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid types[5] = { TEXTOID, INT8OID, INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID };
	Datum v[5];
	int want = list_length(n->ids);
	int got;

	if (want == 0)
		return true;
	mlplat_txn_begin();
	MemoryContextSwitchTo(caller);
	v[0] = CStringGetTextDatum(mlplat_kind_names[pass->kind]);
	v[1] = Int64GetDatum(pass->epoch);
	v[2] = mlplat_int_array(n->ids, true);
	v[3] = mlplat_text_array(n->objects);
	v[4] = mlplat_text_array(n->actions);
	got = mlplat_sql_int4("SELECT mlplat._unanswered_note($1, $2, $3, $4, $5)", 5, types, v, NULL);
	mlplat_txn_commit();
	MemoryContextSwitchTo(caller);
	if (got != want)
		snprintf(pass->status, sizeof(pass->status), "no longer the leader: %d %s not sent", want, what);
	return got == want;
}

void
mlplat_write_notes_clear(MlplatPass *pass, MlplatWriteNotes *n)
{
	Oid types[7] = { TEXTOID, INT8OID, INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, INT8OID };
	Datum v[7];

	if (n->ids == NIL)
		return;
	v[0] = CStringGetTextDatum(mlplat_kind_names[pass->kind]);
	v[1] = Int64GetDatum(pass->epoch);
	v[2] = mlplat_int_array(n->ids, true);
	v[3] = mlplat_text_array(n->objects);
	v[4] = mlplat_text_array(n->actions);
	v[5] = mlplat_int_array(n->answered, false);
	v[6] = Int64GetDatum((int64) mlplat_unanswered_write_grace_ms);
	(void) mlplat_sql_int4("SELECT mlplat._unanswered_clear($1, $2, $3, $4, $5, $6, $7)", 7, types, v, NULL);
}

char *
mlplat_object_path(const char *ns, const char *name)
{
	return psprintf("%s/%s", ns, name);
}
