/*
 * pass_text.c — the texts a pass writes about a row (pass_text.h).
 */
#include "postgres.h"

#include <stdarg.h>

#include "lib/stringinfo.h"
#include "utils/json.h"

#include "mlplat/pass_text.h"

void
mlplat_json_append_text(StringInfo s, const char *val)
{
	if (val)
		escape_json(s, val);
	else
		appendStringInfoString(s, "null");
}

char *
mlplat_json_object(const char *key, ...)
{
	StringInfoData s;
	va_list ap;
	bool first = true;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	va_start(ap, key);
	for (const char *k = key; k != NULL; k = va_arg(ap, const char *))
	{
		if (!first)
			appendStringInfoChar(&s, ',');
		first = false;
		escape_json(&s, k);
		appendStringInfoChar(&s, ':');
		mlplat_json_append_text(&s, va_arg(ap, const char *));
	}
	va_end(ap);
	appendStringInfoChar(&s, '}');
	return s.data;
}

char *
mlplat_drift_paths_line(const MlSpecDiff *diff)
{
	StringInfoData s;

	initStringInfo(&s);
	for (size_t i = 0; i < diff->count && i < 5; i++)
		appendStringInfo(&s, "%s%s", i ? ", " : "", diff->entries[i].path);
	if (diff->count > 5)
		appendStringInfo(&s, " and %zu more", diff->count - 5);
	return s.data;
}
