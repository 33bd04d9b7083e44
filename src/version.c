/*
 * version.c — mlplat.version(): the installed extension's version and the
 * loaded library's, which must agree.
 *
 * After a package upgrade the new library can be loaded by a database whose
 * extension objects are still the old version; the functions of that schema
 * may not match the C code.  We refuse to pretend, and say how to fix it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "access/table.h"
#include "access/genam.h"

#include "mlplat/version.h"

/* The extversion of the installed mlplat extension, or NULL. */
char *
mlplat_installed_version(void)
{
	Relation rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple tup;
	char *result = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("mlplat"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool isnull;
		Datum d = heap_getattr(tup, Anum_pg_extension_extversion,
							   RelationGetDescr(rel), &isnull);

		if (!isnull)
			result = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

PG_FUNCTION_INFO_V1(mlplat_version);

Datum
mlplat_version(PG_FUNCTION_ARGS)
{
	TupleDesc tupdesc;
	Datum values[2];
	bool nulls[2] = { false, false };
	char *installed = mlplat_installed_version();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mlplat.version() must return a composite type");

	if (installed == NULL || strcmp(installed, MLPLAT_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mlplat extension version %s does not match library version %s",
						installed ? installed : "(none)", MLPLAT_VERSION),
				 errdetail("The SQL objects were installed by a different release than the loaded shared library."),
				 errhint("Run ALTER EXTENSION mlplat UPDATE in this database.")));

	values[0] = CStringGetTextDatum(installed);
	values[1] = CStringGetTextDatum(MLPLAT_VERSION);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
