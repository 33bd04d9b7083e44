/*
 * reconcile_sql.h — the SQL a pass runs: statements with kept plans.
 */
#ifndef MLPLAT_RECONCILE_SQL_H
#define MLPLAT_RECONCILE_SQL_H

#include "postgres.h"

#include "utils/array.h"

/*
 * Run a one-row, one-boolean-column statement with SPI (transaction open).
 * Its plan is kept for the life of the process, keyed by the text: sql must
 * be one of a fixed set of statements (a literal), never built per call.
 */
extern bool mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/*
 * Run a statement with SPI (transaction open) and return SPI's result code;
 * the rows are in SPI_tuptable.  The plan is kept like mlplat_sql_bool's.
 */
extern int mlplat_sql_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/* Append a text, or NULL, to an array being built (in the state's own context). */
extern void mlplat_array_add_text(ArrayBuildState *a, const char *s);

/* mlplat.installation's instance id (transaction open); palloc'd in the caller's context. */
extern char *mlplat_instance_id(void);

#endif /* MLPLAT_RECONCILE_SQL_H */
