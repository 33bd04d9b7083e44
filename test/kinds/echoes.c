/*
 * echoes.c — the test kind "echoes": a ConfigMap per row of mlplat.echoes, kept
 * in step with the row's data (test/kinds/README.md; its SQL is the extension
 * mlplat_test, test/kinds/mlplat_test--1.0.sql).  Built only by the test build
 * (make MLPLAT_TEST_KINDS=1), by docs/reconcilers.md "Adding a kind" and
 * nothing else: it proves the shape, so it uses every part a real kind does.
 *
 * One pass:
 *   1. claim (mlplat_seam_claim_pass, a short transaction): every live echo
 *      (mlplat.echo_claim), and the notes of writes whose answer no write-back
 *      recorded;
 *   2. observe: LIST the ConfigMaps with our labels;
 *   3. decide per echo (pure: echo_decide): create what is missing, apply what
 *      differs (REPAIR when it had been in step: someone changed it), delete
 *      what is being deleted; an object found where a note says a write may
 *      have landed is adopted (ledger ADOPT);
 *   4. note every write (committed), then send them in one batch; a 409 on a
 *      create is read back and adopted only when it carries our labels and the
 *      echo's id, else it is a conflict and is not touched;
 *   5. write back (mlplat.echo_writeback[], compare-and-swap on row_version and
 *      the epoch), a ledger row per write, the answered notes removed.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/json.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

static const MlplatKubeResource CONFIGMAP = { "", "v1", "configmaps", true };

#define ECHO_COMPONENT "echo"
#define ECHO_LABEL_ID "mlplat.io/echo-id"
#define FOLLOW_UP_MS 300
#define FAILED_RETRY_MS 30000

/* How a write goes out; the ledger action is decided apart (a create may be a REPAIR). */
typedef enum EchoWrite
{
	ECHO_WRITE_NONE = 0,
	ECHO_WRITE_CREATE, /* POST: the name is free as far as we know */
	ECHO_WRITE_APPLY,  /* server-side apply over our own object */
	ECHO_WRITE_DELETE
} EchoWrite;

typedef struct Echo
{
	/* claimed: the attributes of mlplat.echo_claim */
	MLPLAT_SEAM_MEMBERS(echo_claim)
	/* a write whose answer was never recorded */
	const MlplatUnanswered *note;
	/* observed */
	const MlJsonValue *obj;
	/* decided */
	EchoWrite write;
	const char *action; /* ledger action of the write */
	bool adopt;
	bool waiting;
	/* outcome */
	MlplatHttpRequest *req;
	const char *outcome;
	int http_status;
	char *error;
	int to_status; /* an MlplatEchoStatus, or MLPLAT_NO_STATUS: nothing to write back */
	char *reason;
	int32 retry_ms;
} Echo;

/* ---------------------------------------------------------------- the seam */

MLPLAT_SEAM_STATIC(claim_seam, echo_claim, Echo);
/* the write-back is the status write-back every status kind shares (seam.h) */
MLPLAT_SEAM_STATIC(writeback_seam, echo_writeback, MlplatStatusWriteback);

MlplatSeam *const mlplat_echoes_seams[] = { &claim_seam, &writeback_seam, NULL };

/* ---------------------------------------------------------------- pure decisions */

static bool
text_eq(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Does the ConfigMap's data equal the wanted object of strings, no key more or less? */
static bool
data_equal(const MlJsonValue *obj, const MlJsonValue *want)
{
	const MlJsonValue *have = ml_json_object_get(obj, "data");
	size_t nhave = (have && have->type == ML_JSON_OBJECT) ? have->u.object.count : 0;

	if (want == NULL || want->type != ML_JSON_OBJECT || nhave != want->u.object.count)
		return false;
	for (size_t i = 0; i < want->u.object.count; i++)
	{
		const MlJsonMember *m = &want->u.object.members[i];
		const MlJsonValue *v = ml_json_object_get_n(have, m->key, m->key_len);

		if (v == NULL || v->type != ML_JSON_STRING || m->value->type != ML_JSON_STRING ||
			v->u.string.len != m->value->u.string.len ||
			memcmp(v->u.string.str, m->value->u.string.str, v->u.string.len) != 0)
			return false;
	}
	return true;
}

/* Decide what one echo needs, from the claim, its note and the observed ConfigMap alone. */
static void
echo_decide(Echo *e, const MlJsonValue *want)
{
	bool in_step = e->status == MLPLAT_ECHO_SYNCED && e->observed_generation == e->generation;

	e->to_status = MLPLAT_NO_STATUS;

	/* found where a write may have landed unanswered: the write made it (unless a later
	 * leader's answered write overtook it: then the object may be that one's) */
	if (e->obj && e->note && mlplat_unanswered_seen_settles(e->note))
		e->adopt = true;

	if (e->status == MLPLAT_ECHO_DELETING)
	{
		if (e->obj)
		{
			e->write = ECHO_WRITE_DELETE;
			e->action = "DELETE";
		}
		else if (e->note && !mlplat_unanswered_settled(e->note))
			e->waiting = true; /* a create may still land: look again */
		else
		{
			e->to_status = MLPLAT_ECHO_DELETED;
			e->reason = "the ConfigMap is gone";
		}
		return;
	}
	if (e->obj && data_equal(e->obj, want))
	{
		if (!in_step)
		{
			e->to_status = MLPLAT_ECHO_SYNCED;
			e->reason = e->adopt ? "adopted: in step with its data" : "in step with its data";
		}
		return;
	}
	/* missing or different; a failed write waits for its retry time */
	if (!e->due)
		return;
	e->write = e->obj ? ECHO_WRITE_APPLY : ECHO_WRITE_CREATE;
	e->action = in_step ? "REPAIR" : e->obj ? "APPLY"
											: "CREATE";
}

/* ---------------------------------------------------------------- I/O */

static char *
render(const Echo *e, const char *instance)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
	escape_json(&s, e->name);
	appendStringInfoString(&s, ",\"namespace\":");
	escape_json(&s, e->namespace);
	appendStringInfo(&s, ",\"labels\":{\"" MLPLAT_LABEL_MANAGED_BY "\":\"" MLPLAT_MANAGED_BY "\","
						 "\"" MLPLAT_LABEL_INSTANCE "\":");
	escape_json(&s, instance);
	appendStringInfo(&s, ",\"app.kubernetes.io/component\":\"" ECHO_COMPONENT "\","
						 "\"" ECHO_LABEL_ID "\":\"" INT64_FORMAT "\"}},\"data\":%s}",
					 e->id, e->data);
	return s.data;
}

/* Is an object found under an echo's name this installation's, made for this echo? */
static bool
ours(const MlJsonValue *obj, const char *instance, int64 id)
{
	return mlplat_labelled_ours(obj, instance, NULL) &&
		   text_eq(mlplat_json_text(obj, "metadata", "labels", ECHO_LABEL_ID), psprintf(INT64_FORMAT, id));
}

static List *
claim(MlplatPassWork *w)
{
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(w->pass, &claim_seam, "SELECT c FROM mlplat._echoes_claim() c", 0, NULL, NULL, sizeof(Echo),
						   true, 0, &c);
	mlplat_pass_work_claimed(w, c.instance, ECHO_COMPONENT);
	foreach (lc, c.rows)
	{
		Echo *e = lfirst(lc);

		e->note = mlplat_unanswered_find(c.notes, e->id, mlplat_object_path(e->namespace, e->name), NULL);
		e->retry_ms = -1;
	}
	return c.rows;
}

/* After a 409 on a create: read what holds the name; true when it is ours to adopt. */
static bool
conflict_is_ours(MlJsonArena *arena, Echo *e, const char *instance)
{
	MlplatHttpBatch *b = mlplat_http_batch_create(CurrentMemoryContext);
	MlplatObservedObject holder;

	mlplat_observe_get(&holder, b, &CONFIGMAP, e->namespace, e->name);
	mlplat_http_batch_run(b);
	mlplat_observe_got(&holder, arena);
	return holder.state == MLPLAT_OBSERVED_FOUND && ours(holder.obj, instance, e->id);
}

/* What the answer to an echo's write means for the row. */
static void
settle(MlJsonArena *arena, Echo *e, const char *instance)
{
	MlplatKubeResult res;

	mlplat_kube_parse_response(e->req, &res);
	e->http_status = res.status;
	if (res.outcome == MLPLAT_KUBE_OK || (res.outcome == MLPLAT_KUBE_NOT_FOUND && e->write == ECHO_WRITE_DELETE))
	{
		e->outcome = "OK";
		e->to_status = e->write == ECHO_WRITE_DELETE ? MLPLAT_ECHO_DELETED : MLPLAT_ECHO_SYNCED;
		e->reason = e->write == ECHO_WRITE_DELETE ? "the ConfigMap is gone" : "in step with its data";
		return;
	}
	if (res.outcome == MLPLAT_KUBE_EXISTS && e->write == ECHO_WRITE_CREATE)
	{
		e->action = "ADOPT";
		if (conflict_is_ours(arena, e, instance))
		{
			/* a write of ours that landed unrecorded: compared on the next pass */
			e->outcome = "OK";
			e->adopt = false; /* this row is the adoption */
			return;
		}
		e->outcome = "CONFLICT";
		e->error = psprintf("configmap %s/%s exists but is not this echo's; not adopted, not touched", e->namespace,
							e->name);
		e->to_status = MLPLAT_ECHO_FAILED;
		e->reason = e->error;
		e->retry_ms = FAILED_RETRY_MS;
		return;
	}
	e->error = mlplat_kube_tenant_line(&res);
	if (res.outcome == MLPLAT_KUBE_FAILED)
	{
		e->outcome = "FAILED";
		e->to_status = e->status == MLPLAT_ECHO_DELETING ? MLPLAT_ECHO_DELETING : MLPLAT_ECHO_FAILED;
		e->retry_ms = FAILED_RETRY_MS;
	}
	else
	{
		e->outcome = "RETRY";
		e->to_status = e->status;
		e->retry_ms = (int32) mlplat_backoff_delay_ms(e->attempts + 1, 500, mlplat_backoff_max_ms,
													  res.retry_after_s, (uint64) e->id);
	}
	e->reason = e->error;
}

/*
 * The ledger rows of e's writes (the external writes happened whether or not a
 * compare-and-swap holds: recorded either way) and its write-back row, if it
 * moves.
 */
static bool
echo_row(MlplatWriteback *wb, void *entity, void *row)
{
	Echo *e = entity;
	MlplatStatusWriteback *w = row;
	char *object = mlplat_object_path(e->namespace, e->name);
	char *trace_id = mlplat_trace_id_of(e->traceparent);

	if (e->adopt)
		mlplat_ledger_batch_add(wb->ledger, "echo", e->id, NULL, "ADOPT", "OK", NULL, NULL, 0, NULL, trace_id, object);
	if (e->req)
		mlplat_ledger_batch_add(wb->ledger, "echo", e->id, NULL, e->action, e->outcome, NULL, NULL, e->http_status,
								e->error, trace_id, object);
	if (e->to_status == MLPLAT_NO_STATUS)
		return false;
	w->status = e->to_status;
	w->reason = e->reason;
	w->observed_generation = e->to_status == MLPLAT_ECHO_SYNCED ? e->generation : -1;
	w->error = e->error;
	w->retry_ms = e->retry_ms;
	return true;
}

void
mlplat_echoes_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	List *echoes;
	List *objects;
	MlplatWriteNotes settled = { 0 };
	ListCell *lc;

	/* 1. claim */
	mlplat_pass_work_begin(&w, pass);
	echoes = claim(&w);
	if (echoes == NIL)
	{
		snprintf(pass->status, sizeof(pass->status), "no echoes");
		return;
	}

	/* 2. observe */
	objects = mlplat_pass_work_list(&w, &CONFIGMAP, NULL);

	/* 3. decide, and note every write before it is sent */
	foreach (lc, echoes)
	{
		Echo *e = lfirst(lc);
		MlJsonError err;

		e->obj = mlplat_observed_find(objects, e->namespace, e->name);
		echo_decide(e, ml_json_parse(w.arena, e->data, strlen(e->data), NULL, &err));
		if (e->write != ECHO_WRITE_NONE)
			mlplat_write_notes_add(&w.sending, e->id, mlplat_object_path(e->namespace, e->name), e->action);
		if (e->waiting)
			pass->next_pass_ms = FOLLOW_UP_MS;
	}
	if (!mlplat_pass_work_notes_commit(&w, "requests"))
		return;

	/* 4. act */
	foreach (lc, echoes)
	{
		Echo *e = lfirst(lc);

		if (e->write == ECHO_WRITE_CREATE)
			e->req = mlplat_kube_create(w.batch, &CONFIGMAP, e->namespace, render(e, w.instance));
		else if (e->write == ECHO_WRITE_APPLY)
			e->req = mlplat_kube_apply(w.batch, &CONFIGMAP, e->namespace, e->name, render(e, w.instance));
		else if (e->write == ECHO_WRITE_DELETE)
			e->req = mlplat_kube_delete(w.batch, &CONFIGMAP, e->namespace, e->name);
	}
	if (mlplat_http_batch_count(w.batch) > 0)
		mlplat_http_batch_run(w.batch);
	foreach (lc, echoes)
	{
		Echo *e = lfirst(lc);
		char *object = mlplat_object_path(e->namespace, e->name);

		if (e->req)
		{
			w.writes++;
			settle(w.arena, e, w.instance);
			/* answered (not a 5xx or a lost connection): this leader's write did or did not land */
			if (mlplat_write_answered(e->http_status))
				mlplat_write_notes_answered(&settled, e->id, object, NULL,
											e->write == ECHO_WRITE_APPLY && mlplat_write_made(e->http_status));
			if (strcmp(e->action, "ADOPT") == 0 && strcmp(e->outcome, "OK") == 0)
				pass->next_pass_ms = FOLLOW_UP_MS; /* compare the adopted object next */
			else if (strcmp(e->outcome, "RETRY") == 0)
				pass->next_pass_ms = pass->next_pass_ms > 0 ? Min(pass->next_pass_ms, e->retry_ms) : e->retry_ms;
		}
		else if (e->note && (e->adopt || (e->obj == NULL && e->to_status != MLPLAT_NO_STATUS) || mlplat_unanswered_settled(e->note)))
			mlplat_write_notes_add(&settled, e->id, object, NULL); /* adopted, or past its grace */
	}

	/* 5. write back (the notes heard answered above are removed with it) */
	{
		MlplatWriteback wb;

		mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
		wb.settled = settled;
		mlplat_writeback_rows(&wb, echoes, echo_row, "SELECT * FROM mlplat._echoes_writeback_set($1, $2)", NULL);
		mlplat_writeback_end(&wb);
	}
	mlplat_pass_work_status(&w, NULL, "%d echoes", list_length(echoes));
}
