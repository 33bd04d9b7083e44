/*
 * span.c — trace spans: random ids, the API's traceparent, and the spans the
 * reconcilers collect during a pass and write with their write-back.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/span.h"
#include "mlplat/validate.h"

void
mlplat_trace_random_hex(char *out, int nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8 buf[32];
	bool nonzero = false;

	Assert(nbytes > 0 && nbytes <= (int) sizeof(buf));
	if (!pg_strong_random(buf, nbytes))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random trace identifier")));
	for (int i = 0; i < nbytes; i++)
		nonzero |= buf[i] != 0;
	/* W3C: an all-zero id is invalid (one chance in 2^64 at least) */
	if (!nonzero)
		buf[nbytes - 1] = 1;
	for (int i = 0; i < nbytes; i++)
	{
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 0xf];
	}
	out[2 * nbytes] = '\0';
}

/*
 * mlplat._traceparent(): the traceparent an intent stores.  The caller's trace
 * id and flags (mlplat.traceparent, validated by its check hook) or a new
 * trace, with a new span id: the id of the intent's API span.  In C because
 * every intent calls it and two gen_random_uuid() in PL/pgSQL cost more.
 */
PG_FUNCTION_INFO_V1(mlplat_new_traceparent);
Datum
mlplat_new_traceparent(PG_FUNCTION_ARGS)
{
	char tp[56];
	const char *caller = mlplat_traceparent;

	if (caller && mlplat_traceparent_is_valid(caller))
	{
		memcpy(tp, caller, 55);
		mlplat_trace_random_hex(tp + 36, 8);
		tp[52] = '-';
	}
	else
	{
		memcpy(tp, "00-", 3);
		mlplat_trace_random_hex(tp + 3, 16);
		tp[35] = '-';
		mlplat_trace_random_hex(tp + 36, 8);
		memcpy(tp + 52, "-01", 3);
	}
	tp[55] = '\0';
	PG_RETURN_TEXT_P(cstring_to_text(tp));
}

/* the first size of a span's attribute buffer (a deployment's apply span: about 110 bytes) */
#define SPAN_ATTRS_START 256

MlplatSpan *
mlplat_span_begin_at(const char *traceparent, const char *name, MlplatSpanKind kind, TimestampTz start)
{
	MlplatSpan *s;

	if (!mlplat_traceparent_is_valid(traceparent))
		return NULL;
	s = palloc0(sizeof(MlplatSpan));
	memcpy(s->trace_id, traceparent + 3, 32);
	memcpy(s->parent_id, traceparent + 36, 16);
	mlplat_trace_random_hex(s->span_id, 8);
	s->name = pstrdup(name);
	s->kind = kind;
	s->start = start;
	s->status = "UNSET";
	/*
	 * A span's attributes are a few hundred bytes, not initStringInfo's 1 kB: a
	 * pass holds three or four spans for each of its rows until its write-back
	 * (appendStringInfo enlarges the buffer when they are more)
	 */
	s->attrs.maxlen = SPAN_ATTRS_START;
	s->attrs.data = palloc(s->attrs.maxlen);
	resetStringInfo(&s->attrs);
	return s;
}

MlplatSpan *
mlplat_span_begin(const char *traceparent, const char *name, MlplatSpanKind kind)
{
	return mlplat_span_begin_at(traceparent, name, kind, GetCurrentTimestamp());
}

void
mlplat_span_set_entity(MlplatSpan *s, const char *project, const char *entity, int64 entity_id)
{
	if (s == NULL)
		return;
	s->project = project ? pstrdup(project) : NULL;
	s->entity = entity ? pstrdup(entity) : NULL;
	s->entity_id = entity_id;
}

static void
attr_key(MlplatSpan *s, const char *key)
{
	if (s->attrs.len > 0)
		appendStringInfoString(&s->attrs, ", ");
	escape_json(&s->attrs, key);
	appendStringInfoString(&s->attrs, ": ");
}

void
mlplat_span_attr_text(MlplatSpan *s, const char *key, const char *value)
{
	if (s == NULL || value == NULL)
		return;
	attr_key(s, key);
	escape_json(&s->attrs, value);
}

void
mlplat_span_attr_int(MlplatSpan *s, const char *key, int64 value)
{
	if (s == NULL)
		return;
	attr_key(s, key);
	appendStringInfo(&s->attrs, INT64_FORMAT, value);
}

void
mlplat_span_start_after(MlplatSpan *s, const char *span_name)
{
	if (s != NULL)
		s->start_after = pstrdup(span_name);
}

void
mlplat_span_end_at(MlplatSpan *s, TimestampTz end, const char *error)
{
	if (s == NULL)
		return;
	s->end = Max(end, s->start);
	s->status = error ? "ERROR" : "UNSET";
	s->message = error ? pstrdup(error) : NULL;
}

void
mlplat_span_end(MlplatSpan *s, const char *error)
{
	mlplat_span_end_at(s, GetCurrentTimestamp(), error);
}

void
mlplat_span_end_request(MlplatSpan *s, const MlplatHttpRequest *req, int status, const char *error)
{
	if (s == NULL)
		return;
	if (req->started_at != 0)
		s->start = req->started_at;
	if (status > 0)
		mlplat_span_attr_int(s, "http.response.status_code", status);
	mlplat_span_end_at(s, s->start + (TimestampTz) (req->elapsed_ms * 1000.0), error);
}

static const char *const kind_names[] = { "INTERNAL", "SERVER", "CLIENT" };

/* the columns of mlplat._spans_record_set, one array each */
#define SPAN_COLS 14
static const Oid span_col_types[SPAN_COLS] = { TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
											   TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID };

int
mlplat_spans_flush(List *spans)
{
	ArrayBuildState *col[SPAN_COLS];
	Oid types[SPAN_COLS];
	Datum v[SPAN_COLS];
	ListCell *lc;
	int n = 0;

	for (int i = 0; i < SPAN_COLS; i++)
		col[i] = initArrayResult(span_col_types[i], CurrentMemoryContext, false);
	foreach (lc, spans)
	{
		MlplatSpan *s = lfirst(lc);

		if (s == NULL || s->end == 0)
			continue;
		mlplat_array_add_text(col[0], s->trace_id);
		mlplat_array_add_text(col[1], s->span_id);
		mlplat_array_add_text(col[2], s->parent_id[0] ? s->parent_id : NULL);
		mlplat_array_add_text(col[3], s->name);
		mlplat_array_add_text(col[4], kind_names[s->kind]);
		accumArrayResult(col[5], TimestampTzGetDatum(s->start), false, TIMESTAMPTZOID, col[5]->mcontext);
		accumArrayResult(col[6], TimestampTzGetDatum(s->end), false, TIMESTAMPTZOID, col[6]->mcontext);
		mlplat_array_add_text(col[7], s->status);
		mlplat_array_add_text(col[8], s->message);
		mlplat_array_add_text(col[9], psprintf("{%s}", s->attrs.data));
		mlplat_array_add_text(col[10], s->project);
		mlplat_array_add_text(col[11], s->entity);
		accumArrayResult(col[12], Int64GetDatum(s->entity_id), s->entity == NULL, INT8OID, col[12]->mcontext);
		mlplat_array_add_text(col[13], s->start_after);
		n++;
	}
	if (n == 0)
		return 0;
	for (int i = 0; i < SPAN_COLS; i++)
	{
		types[i] = get_array_type(span_col_types[i]);
		v[i] = makeArrayResult(col[i], CurrentMemoryContext);
	}
	/* attributes go as text: each is a small JSON object, cast element by element */
	if (SPI_execute_with_args("SELECT mlplat._spans_record_set($1, $2, $3, $4, $5, $6, $7, $8, $9,"
							  " $10::pg_catalog.jsonb[], $11, $12, $13, $14)",
							  SPAN_COLS, types, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: could not record %d spans", n);
	return n;
}

char *
mlplat_trace_id_of(const char *traceparent)
{
	return (traceparent && strlen(traceparent) == 55) ? pnstrdup(traceparent + 3, 32) : NULL;
}
