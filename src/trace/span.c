/*
 * span.c — trace spans: random ids, the API's traceparent, and the spans the
 * reconcilers collect during a pass and write with their write-back.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "mlplat/guc.h"
#include "mlplat/span.h"
#include "mlplat/validate.h"

void
mlplat_trace_random_hex(char *out, int nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8		buf[32];
	bool		nonzero = false;

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
	char		tp[56];
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
	initStringInfo(&s->attrs);
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
	s->status = error ? "ERROR" : "OK";
	s->message = error ? pstrdup(error) : NULL;
}

void
mlplat_span_end(MlplatSpan *s, const char *error)
{
	mlplat_span_end_at(s, GetCurrentTimestamp(), error);
}

static void
json_member(StringInfo b, const char *key, const char *value)
{
	appendStringInfo(b, ", \"%s\": ", key);
	if (value)
		escape_json(b, value);
	else
		appendStringInfoString(b, "null");
}

static const char *const kind_names[] = {"INTERNAL", "SERVER", "CLIENT"};

char *
mlplat_spans_json(List *spans, int *count)
{
	StringInfoData b;
	ListCell   *lc;

	*count = 0;
	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	foreach(lc, spans)
	{
		MlplatSpan *s = lfirst(lc);

		if (s == NULL || s->end == 0)
			continue;
		appendStringInfoString(&b, *count ? ",\n{" : "{");
		appendStringInfo(&b, "\"trace_id\": \"%s\", \"span_id\": \"%s\"", s->trace_id, s->span_id);
		json_member(&b, "parent_span_id", s->parent_id[0] ? s->parent_id : NULL);
		json_member(&b, "name", s->name);
		json_member(&b, "kind", kind_names[s->kind]);
		/* ISO 8601 with the zone: exact to the microsecond whatever the session's settings */
		json_member(&b, "start_time", timestamptz_to_str(s->start));
		json_member(&b, "end_time", timestamptz_to_str(s->end));
		json_member(&b, "status", s->status);
		json_member(&b, "status_message", s->message);
		appendStringInfo(&b, ", \"attributes\": {%s}", s->attrs.data);
		json_member(&b, "project", s->project);
		json_member(&b, "entity", s->entity);
		if (s->entity)
			appendStringInfo(&b, ", \"entity_id\": " INT64_FORMAT, s->entity_id);
		json_member(&b, "start_after", s->start_after);
		appendStringInfoChar(&b, '}');
		(*count)++;
	}
	appendStringInfoChar(&b, ']');
	return b.data;
}

int
mlplat_spans_flush(List *spans)
{
	int			n;
	char	   *json = mlplat_spans_json(spans, &n);
	Oid			type = JSONBOID;
	Datum		arg;

	if (n == 0)
		return 0;
	arg = DirectFunctionCall1(jsonb_in, CStringGetDatum(json));
	if (SPI_execute_with_args("SELECT mlplat._spans_record($1)", 1, &type, &arg, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: could not record %d spans", n);
	return n;
}
