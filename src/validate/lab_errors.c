/*
 * lab_errors.c — the two errors of the lab namespace, raised without caller content.
 *
 * The Model Lab contract says validation errors "omit caller-controlled input, locations and
 * messages".  The message, DETAIL and HINT are fixed texts chosen by a rule code from a closed
 * list, so no value, field name, path or index can reach them.  The server log is the other
 * way out: with log_min_error_statement at its default (error) PostgreSQL writes the
 * statement that failed under the error, and a call made with literals carries the caller's
 * inputs in that text.  errhidestmt() keeps the statement out of the log line of exactly
 * these errors (no setting is changed), and errhidecontext() keeps the PL/pgSQL call stack
 * out of it too.  Bind parameter values are not logged on error by default
 * (log_parameter_max_length_on_error = 0).
 *
 *   mlplat._lab_reject(code text)             22023 invalid lab request / Rule <code>.
 *   mlplat._lab_not_admitted(blockers text[]) 55000 lab run not admitted / Blockers: A, B
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(mlplat_lab_reject);
PG_FUNCTION_INFO_V1(mlplat_lab_not_admitted);

typedef struct LabRule
{
	const char *code;
	const char *hint;
} LabRule;

/* The closed list (docs/lab.md "Validation errors"): a code not here is a bug, not input. */
static const LabRule lab_rules[] = {
	{ "null_argument", "Pass every required argument; none may be NULL." },
	{ "bad_digest", "Pass a SHA-256 digest as 64 lower-case hexadecimal characters." },
	{ "bad_id", "Pass the positive numeric id shown by the lab views." },
	{ "bad_name", "Use a lower-case DNS name of letters, digits, '-' and '.'." },
	{ "bad_gpus", "Pass a whole number of GPUs inside the documented range." },
	{ "unknown_family", "Use one of the five capability families in docs/lab.md." },
	{ "inputs_not_array", "Pass the inputs as a JSON array of items." },
	{ "input_count", "Pass between 1 and 64 items." },
	{ "input_shape", "Each item must be an object with exactly the keys of its family." },
	{ "input_type", "Each value must have the JSON type its family defines." },
	{ "input_range", "Each value must lie inside the range its family defines." },
	{ "input_too_large", "Keep the canonical inputs at or below 65536 bytes." },
	{ "limits_shape", "Pass limits as a JSON object with only the documented keys." },
	{ "limit_type", "Write every limit as a whole JSON number." },
	{ "limit_out_of_range", "Keep every limit inside its documented range." },
	{ "concurrency_not_one", "Lab runs process one input at a time; leave concurrency at 1." },
	{ "idempotency_key_required", "Pass an idempotency key of 1 to 128 characters." },
	{ "bad_idempotency_key", "Use a new idempotency key of 1 to 128 characters for a new request." },
	{ "profile_spec", "Write the profile spec as documented in docs/lab.md." },
	{ "bad_valid_for", "Pass an interval greater than zero and at most 30 days." },
	{ "bad_max_runs", "Pass a whole number of runs from 1 to 1000." },
};

static const LabRule *
lab_rule(const char *code)
{
	for (int i = 0; i < lengthof(lab_rules); i++)
		if (strcmp(lab_rules[i].code, code) == 0)
			return &lab_rules[i];
	return NULL;
}

Datum
mlplat_lab_reject(PG_FUNCTION_ARGS)
{
	const LabRule *rule = PG_ARGISNULL(0) ? NULL : lab_rule(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	if (rule == NULL)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("mlplat._lab_reject: code not in the closed list")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid lab request"),
			 errdetail("Rule %s.", rule->code),
			 errhint("%s", rule->hint),
			 errhidestmt(true),
			 errhidecontext(true)));
	PG_RETURN_VOID();
}

/* Blocker codes are upper-case words from _lab_assess; anything else is dropped, not echoed. */
static bool
blocker_code_ok(const char *s)
{
	if (*s == '\0' || strlen(s) > 40)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || *s == '_'))
			return false;
	return true;
}

Datum
mlplat_lab_not_admitted(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	Datum *elems;
	bool *nulls;
	int n;
	int shown = 0;

	initStringInfo(&buf);
	if (!PG_ARGISNULL(0))
	{
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char *c;

			if (nulls[i])
				continue;
			c = TextDatumGetCString(elems[i]);
			if (!blocker_code_ok(c))
				continue;
			appendStringInfo(&buf, "%s%s", shown++ ? ", " : "", c);
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lab run not admitted"),
			 errdetail("Blockers: %s", buf.data),
			 errhint("Run mlplat.lab_preflight() with the same arguments; each blocker is explained in docs/lab.md."),
			 errhidestmt(true),
			 errhidecontext(true)));
	PG_RETURN_VOID();
}
