/*
 * env.c — the env rule, defined once: what deploy() and start_run() accept as
 * a workload's environment.
 *
 * env is an object of at most 64 members, names matching
 * [A-Za-z_][A-Za-z0-9_]{0,127}, values strings of at most 4096 characters.
 * env_problem() is the only place that says so.  Two SQL functions expose it:
 *
 *   mlplat._env_problem(env) -> text[]  NULL, or {rule, hint} of the first
 *       problem (the count first, then each member in jsonb order: its name,
 *       then its value's type, then its length); mlplat._check_env raises it
 *       through mlplat._bad_input, which owns the error's wording.
 *   mlplat._env_ok(env) -> boolean  the same rule as a plain yes/no, deploy()'s
 *       fast path (no array is built when env is fine, as it nearly always is).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#define ENV_MAX_VARS 64
#define ENV_MAX_NAME 128
#define ENV_MAX_VALUE 4096

PG_FUNCTION_INFO_V1(mlplat_env_ok);
PG_FUNCTION_INFO_V1(mlplat_env_problem);

typedef struct EnvProblem
{
	const char *rule; /* NULL: env is fine */
	const char *hint;
} EnvProblem;

static bool
name_ok(const char *s, int len)
{
	if (len < 1 || len > ENV_MAX_NAME)
		return false;
	for (int i = 0; i < len; i++)
	{
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
			  (i > 0 && c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

/* The rule.  A rule that names a variable is palloc'd; the others are constants. */
static EnvProblem
env_problem(Jsonb *env)
{
	EnvProblem p = { NULL, NULL };
	JsonbIterator *it;
	JsonbValue v;
	JsonbIteratorToken tok;
	const char *key = NULL; /* the current member's name, in env */
	int keylen = 0;

	if (!JsonContainerIsObject(&env->root))
	{
		p.rule = "must be a JSON object of name -> string value";
		p.hint = "Pass e.g. '{\"LOG_LEVEL\": \"info\"}'.";
		return p;
	}
	if (JsonContainerSize(&env->root) > ENV_MAX_VARS)
	{
		p.rule = "has more than 64 variables";
		p.hint = "Keep configuration small; use a config file for more.";
		return p;
	}
	it = JsonbIteratorInit(&env->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			if (!name_ok(v.val.string.val, v.val.string.len))
			{
				p.rule = "variable names must match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters)";
				p.hint = "Rename the variable.";
				return p;
			}
			key = v.val.string.val;
			keylen = v.val.string.len;
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
			{
				p.rule = psprintf("value of %.*s must be a string", keylen, key);
				p.hint = "Quote numbers and booleans: {\"N\": \"1\"}.";
				return p;
			}
			if (v.val.string.len > ENV_MAX_VALUE &&
				pg_mbstrlen_with_len(v.val.string.val, v.val.string.len) > ENV_MAX_VALUE)
			{
				p.rule = psprintf("value of %.*s is longer than 4096 characters", keylen, key);
				p.hint = "Keep values short; mount large configuration as a file.";
				return p;
			}
		}
	}
	return p;
}

Datum
mlplat_env_ok(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(env_problem(PG_GETARG_JSONB_P(0)).rule == NULL);
}

Datum
mlplat_env_problem(PG_FUNCTION_ARGS)
{
	EnvProblem p = env_problem(PG_GETARG_JSONB_P(0));
	Datum elems[2];

	if (p.rule == NULL)
		PG_RETURN_NULL();
	elems[0] = CStringGetTextDatum(p.rule);
	elems[1] = CStringGetTextDatum(p.hint);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, 2, TEXTOID, -1, false, TYPALIGN_INT));
}
