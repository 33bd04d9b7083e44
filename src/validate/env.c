/*
 * env.c — mlplat._env_ok(env jsonb): the fast yes of mlplat._check_env().
 *
 * deploy() validates its env argument on every call; the PL/pgSQL check
 * runs a query with a regular expression per variable.  This answers the
 * common case in one pass: true only when _check_env would accept env (an
 * object of at most 64 members, names matching [A-Za-z_][A-Za-z0-9_]{0,127},
 * string values of at most 4096 characters).  On false the caller runs
 * _check_env, which names the offending variable in its error, so this
 * function never decides an error message.
 */
#include "postgres.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(mlplat_env_ok);

static bool
name_ok(const char *s, int len)
{
	if (len < 1 || len > 128)
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

Datum
mlplat_env_ok(PG_FUNCTION_ARGS)
{
	Jsonb *env = PG_GETARG_JSONB_P(0);
	JsonbIterator *it;
	JsonbValue v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(env) || JB_ROOT_COUNT(env) > 64)
		PG_RETURN_BOOL(false);
	it = JsonbIteratorInit(&env->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY && !name_ok(v.val.string.val, v.val.string.len))
			PG_RETURN_BOOL(false);
		if (tok == WJB_VALUE &&
			(v.type != jbvString ||
			 (v.val.string.len > 4096 &&
			  pg_mbstrlen_with_len(v.val.string.val, v.val.string.len) > 4096)))
			PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}
