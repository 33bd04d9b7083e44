/*
 * sql.c — SQL entry points of the pure validators that answer with a reason
 * rather than a boolean (the boolean ones live beside the JSON core).
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "mlplat/validate.h"

PG_FUNCTION_INFO_V1(mlplat_spdx_error);

/* NULL when the SPDX expression is valid, else why not */
Datum
mlplat_spdx_error(PG_FUNCTION_ARGS)
{
	text *t = PG_GETARG_TEXT_PP(0);
	const char *err = mlplat_spdx_check(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));

	if (err == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(err));
}
