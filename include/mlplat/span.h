/*
 * span.h — trace spans recorded by the reconcilers (table mlplat.spans).
 *
 * A span continues the trace stored with an entity: its trace id is the
 * traceparent's trace id and its parent is the traceparent's parent-id, which
 * the API set to the id of its own span (mlplat._traceparent), so every
 * reconciler step hangs under the API call that asked for it.  Span ids come
 * from pg_strong_random.
 *
 * Spans are built in memory during a pass (no I/O) and written in one
 * statement inside the pass's write-back transaction:
 *
 *     MlplatSpan *s = mlplat_span_begin(d->traceparent, "deployments.apply", MLPLAT_SPAN_CLIENT);
 *     mlplat_span_set_entity(s, d->project, "deployment", d->id);
 *     ... the HTTP call ...
 *     mlplat_span_attr_int(s, "http.response.status_code", status);
 *     mlplat_span_end(s, error);               -- error NULL: status left UNSET, else ERROR with the message
 *     spans = lappend(spans, s);               -- mlplat_span_begin may return NULL: see below
 *     ...
 *     mlplat_txn_begin(); ... write-back ...; mlplat_spans_flush(spans); mlplat_txn_commit();
 *
 * Every function accepts a NULL span and does nothing with it: an entity
 * without a valid traceparent simply has no spans, and callers need no ifs.
 * mlplat_spans_flush skips NULL list members too.
 */
#ifndef MLPLAT_SPAN_H
#define MLPLAT_SPAN_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

typedef enum MlplatSpanKind
{
	MLPLAT_SPAN_INTERNAL = 0, /* work inside mlplat (claim, readiness wait) */
	MLPLAT_SPAN_SERVER,		  /* an API call */
	MLPLAT_SPAN_CLIENT		  /* a request to an outside system (apply, artifact check) */
} MlplatSpanKind;

typedef struct MlplatSpan
{
	char trace_id[33];
	char span_id[17];
	char parent_id[17]; /* "" for a root span */
	const char *name;
	MlplatSpanKind kind;
	TimestampTz start;
	TimestampTz end;	  /* 0 until ended */
	const char *status;	  /* "UNSET", "OK" or "ERROR" */
	char *message;		  /* ERROR's message */
	StringInfoData attrs; /* JSON object members: "k": v, ... */
	const char *project;  /* project name: the span's readers are its members */
	const char *entity;
	int64 entity_id;
	const char *start_after; /* see mlplat_span_start_after */
} MlplatSpan;

/* A new span starting now (or at start), child of traceparent's parent-id; NULL if traceparent is not valid. */
extern MlplatSpan *mlplat_span_begin(const char *traceparent, const char *name, MlplatSpanKind kind);
extern MlplatSpan *mlplat_span_begin_at(const char *traceparent, const char *name, MlplatSpanKind kind,
										TimestampTz start);

/* Which entity the span is about (the project decides who may read it). */
extern void mlplat_span_set_entity(MlplatSpan *s, const char *project, const char *entity, int64 entity_id);

/* Attributes (OTLP semantic-convention names where one exists). */
extern void mlplat_span_attr_text(MlplatSpan *s, const char *key, const char *value);
extern void mlplat_span_attr_int(MlplatSpan *s, const char *key, int64 value);

/*
 * Start the span where the latest span named span_name of the same trace and
 * entity ended, if one is recorded (decided when written): a wait that began
 * in an earlier pass, such as readiness after an apply.
 */
extern void mlplat_span_start_after(MlplatSpan *s, const char *span_name);

/*
 * End now (or at end): error NULL leaves the status UNSET (OpenTelemetry: OK is
 * for an application that overrides a failure, instrumentation leaves success
 * unset), otherwise ERROR with that message.
 */
extern void mlplat_span_end(MlplatSpan *s, const char *error);
extern void mlplat_span_end_at(MlplatSpan *s, TimestampTz end, const char *error);

/*
 * End s, the span of one outside request (kind CLIENT), by the request's own
 * timing: it starts when the request was sent (kept as it is if it never
 * was) and lasts as long as the request took.  status: the HTTP status,
 * recorded as http.response.status_code when there was an answer (> 0).
 * s may be NULL.
 */
struct MlplatHttpRequest;
extern void mlplat_span_end_request(MlplatSpan *s, const struct MlplatHttpRequest *req, int status,
									const char *error);

/*
 * Write the spans in one statement, mlplat._spans_record_set (a transaction
 * and SPI must be open; NULL members and unended spans skipped); returns how many.
 */
extern int mlplat_spans_flush(List *spans);

/* Fill out with 2*n lower-case hex digits from pg_strong_random, never all zeros. */
extern void mlplat_trace_random_hex(char *out, int nbytes);

/* The trace id (32 hex digits) of a stored traceparent, palloc'd; NULL if it has none. */
extern char *mlplat_trace_id_of(const char *traceparent);

#endif /* MLPLAT_SPAN_H */
