/*
 * sql.c — SQL entry points for the pure JSON core and the name validators.
 *
 * The only file under src/json (with jsonb.c) that includes PostgreSQL
 * headers.  jsonb becomes our value tree, straight from the jsonb or, when
 * that declines, through JsonbToCString and our own parser (the same tree
 * either way, see mlplat/json_jsonb.h), so the canonical form and content
 * ids are exactly what the fuzzers and the unit test exercise.  Arena
 * memory comes from a private memory context: an ereport() anywhere frees
 * it with its parent.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/spec_diff.h"
#include "mlplat/validate.h"

PG_FUNCTION_INFO_V1(mlplat_canonical_json);
PG_FUNCTION_INFO_V1(mlplat_content_id);
PG_FUNCTION_INFO_V1(mlplat_content_id_excluding);
PG_FUNCTION_INFO_V1(mlplat_spec_diff);
PG_FUNCTION_INFO_V1(mlplat_is_dns_label);
PG_FUNCTION_INFO_V1(mlplat_is_dns1035_label);
PG_FUNCTION_INFO_V1(mlplat_is_traceparent);

typedef struct JsonCall
{
	MemoryContext cxt;
	MlJsonArena *arena;
} JsonCall;

static void
json_call_begin(JsonCall *c)
{
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat json",
								   ALLOCSET_DEFAULT_SIZES);
	c->arena = mlplat_json_arena_in(c->cxt);
}

static void
json_call_end(JsonCall *c)
{
	MemoryContextDelete(c->cxt); /* frees the arena too */
}

static void
report_json_error(const char *what, const MlJsonError *err)
{
	int sqlstate;

	switch (err->code)
	{
		case ML_JSON_ERR_SYNTAX:
		case ML_JSON_ERR_ENCODING:
			sqlstate = ERRCODE_INVALID_TEXT_REPRESENTATION;
			break;
		case ML_JSON_ERR_NOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("%s", err->message)));
			break;
		default:
			sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
	}
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("invalid JSON in argument \"%s\": %s", what, err->message),
			 errdetail("The problem is at byte offset %zu of the argument's JSON text.",
					   err->offset),
			 err->code == ML_JSON_ERR_LIMIT ? errhint("Documents may nest at most %d levels and be at most %d bytes.",
													  ML_JSON_DEFAULT_MAX_DEPTH, ML_JSON_DEFAULT_MAX_BYTES)
											: errhint("Canonical JSON (RFC 8785) carries only finite numbers within IEEE 754 double range.")));
}

/* jsonb → our tree, or ereport */
static MlJsonValue *
parse_jsonb(JsonCall *c, Jsonb *jb, const char *what)
{
	StringInfoData buf;
	MlJsonValue *v;
	MlJsonError err;
	MemoryContext old = MemoryContextSwitchTo(c->cxt);

	/* straight from the jsonb when that is sure to give the same tree */
	v = ml_json_from_jsonb(c->arena, jb);
	if (v != NULL)
	{
		MemoryContextSwitchTo(old);
		return v;
	}
	initStringInfo(&buf);
	JsonbToCString(&buf, &jb->root, VARSIZE(jb));
	MemoryContextSwitchTo(old);
	v = ml_json_parse(c->arena, buf.data, buf.len, NULL, &err);
	if (v == NULL)
		report_json_error(what, &err);
	return v;
}

Datum
mlplat_canonical_json(PG_FUNCTION_ARGS)
{
	Jsonb *jb = PG_GETARG_JSONB_P(0);
	JsonCall c;
	MlJsonValue *v;
	MlJsonError err;
	size_t len;
	char *out;
	text *result;

	json_call_begin(&c);
	v = parse_jsonb(&c, jb, "doc");
	out = ml_json_canonical(c.arena, v, &len, &err);
	if (out == NULL)
		report_json_error("doc", &err);
	result = cstring_to_text_with_len(out, (int) len);
	json_call_end(&c);
	PG_RETURN_TEXT_P(result);
}

static Datum
content_id_common(FunctionCallInfo fcinfo, const char *exclude_key)
{
	Jsonb *jb = PG_GETARG_JSONB_P(0);
	JsonCall c;
	MlJsonValue *v;
	MlJsonError err;
	char id[ML_CONTENT_ID_LEN + 1];

	json_call_begin(&c);
	v = parse_jsonb(&c, jb, "doc");
	if (!ml_json_content_id_excluding(c.arena, v, exclude_key, id, &err))
		report_json_error("doc", &err);
	json_call_end(&c);
	PG_RETURN_TEXT_P(cstring_to_text(id));
}

Datum
mlplat_content_id(PG_FUNCTION_ARGS)
{
	return content_id_common(fcinfo, NULL);
}

Datum
mlplat_content_id_excluding(PG_FUNCTION_ARGS)
{
	char *key = text_to_cstring(PG_GETARG_TEXT_PP(1));

	return content_id_common(fcinfo, key);
}

Datum
mlplat_spec_diff(PG_FUNCTION_ARGS)
{
	Jsonb *desired_jb = PG_GETARG_JSONB_P(0);
	Jsonb *observed_jb = PG_GETARG_JSONB_P(1);
	JsonCall c;
	MlJsonValue *desired;
	MlJsonValue *observed;
	MlSpecDiff diff;
	MlJsonError err;
	char *text_out;
	Datum result;

	json_call_begin(&c);
	desired = parse_jsonb(&c, desired_jb, "desired");
	observed = parse_jsonb(&c, observed_jb, "observed");
	if (!ml_spec_diff(c.arena, desired, observed, &diff, &err) ||
		(text_out = ml_spec_diff_to_json(c.arena, &diff, NULL, &err)) == NULL)
	{
		if (err.code == ML_JSON_ERR_NOMEM)
			report_json_error("desired", &err);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("spec_diff result is too large: %s", err.message),
				 errdetail("The paths of all differences together would exceed %d bytes.",
						   ML_SPEC_DIFF_MAX_PATH_BYTES),
				 errhint("Compare smaller parts of the documents.")));
	}
	/* jsonb_in copies into the caller's context before we drop ours */
	result = DirectFunctionCall1(jsonb_in, CStringGetDatum(text_out));
	json_call_end(&c);
	PG_RETURN_DATUM(result);
}

static void
check_max_len(int32 max_len)
{
	if (max_len < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_len must be at least 1, not %d", max_len),
				 errdetail("A DNS label has between 1 and max_len characters."),
				 errhint("Use 63 for an RFC 1123 label or 253 for a DNS subdomain's length bound.")));
}

Datum
mlplat_is_dns_label(PG_FUNCTION_ARGS)
{
	text *t = PG_GETARG_TEXT_PP(0);
	int32 max_len = PG_GETARG_INT32(1);

	check_max_len(max_len);
	PG_RETURN_BOOL(mlplat_dns_label_is_valid(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t),
											 (size_t) max_len));
}

Datum
mlplat_is_dns1035_label(PG_FUNCTION_ARGS)
{
	text *t = PG_GETARG_TEXT_PP(0);
	int32 max_len = PG_GETARG_INT32(1);

	check_max_len(max_len);
	PG_RETURN_BOOL(mlplat_dns1035_label_is_valid(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t),
												 (size_t) max_len));
}

Datum
mlplat_is_traceparent(PG_FUNCTION_ARGS)
{
	char *s = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_BOOL(mlplat_traceparent_is_valid(s));
}
