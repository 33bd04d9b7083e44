/*
 * reconcile_sql.h — the SQL a pass runs: statements with kept plans.
 */
#ifndef MLPLAT_RECONCILE_SQL_H
#define MLPLAT_RECONCILE_SQL_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/array.h"

/*
 * Run a statement that answers one value, one row of one column of SQL type
 * type (SELECT mlplat._f(...)), with SPI (transaction open), and return it
 * (binary; *isnull when NULL).  Any other shape or type is an ERROR naming
 * it: the value is read by what it is, not by where it happens to stand.  Its
 * plan is kept for the life of the process, keyed by the text: sql must be
 * one of a fixed set of statements (a literal), never built per call.  A
 * by-reference value lives in SPI's memory: copy it before SPI_finish.
 */
extern Datum mlplat_sql_scalar(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, Oid type,
							   bool *isnull);

/* The same for a boolean (NULL is false) and an int (NULL is 0). */
extern bool mlplat_sql_bool(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);
extern int32 mlplat_sql_int4(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/* The same for a text, palloc'd in the caller's context (NULL when NULL). */
extern char *mlplat_sql_text(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/*
 * Run a statement that answers one text column, any number of rows (SELECT
 * name FROM ...), and return its values as a List of strings (NULLs left
 * out).  The List and its strings are palloc'd in the caller's context, not
 * SPI's: a list built in SPI's memory is freed by SPI_finish, and a pass that
 * read it after its claim's commit read freed memory.  Shape and type are
 * checked like mlplat_sql_scalar's; the plan is kept the same way.
 */
extern List *mlplat_sql_text_list(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/*
 * Run a statement with SPI (transaction open) and return SPI's result code;
 * the rows are in SPI_tuptable.  The plan is kept like mlplat_sql_bool's.
 */
extern int mlplat_sql_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);

/*
 * Drop every kept plan (the next run of each statement plans it again): for a
 * change the plan cache does not see, a seam type changed under a claim
 * function the planner inlined (mlplat_seam_verify calls it).
 */
extern void mlplat_sql_forget_plans(void);

/* Append a text, or NULL, to an array being built (in the state's own context). */
extern void mlplat_array_add_text(ArrayBuildState *a, const char *s);

/*
 * A List as an SQL array argument, palloc'd in the current context: text[] of
 * a List of strings in its order (a NULL string is a NULL element); int8[] of
 * a List of palloc'd int64 (wide: entity ids), or int4[] of an IntList.
 */
extern Datum mlplat_text_array(const List *strs);
extern Datum mlplat_int_array(const List *l, bool wide);

/*
 * Which of n rows does the database know?  In a short transaction of its own
 * (none may be open) runs sql with one text[] argument per column, the
 * element i of each being row i's value (cells[i * ncols + c], NULL allowed);
 * sql returns the 1-based ordinals of the rows it knows, one int a row.
 * Returns known[0..n-1], palloc'd in the caller's context.  The question is
 * the kind's (whose object is this?); asking it with arrays, in one round
 * trip, is written here once.
 */
#define MLPLAT_SQL_KNOWN_MAX_COLS 4
extern bool *mlplat_sql_known_ordinals(const char *sql, int ncols, int n, const char *const *cells);

/* mlplat.installation's instance id (transaction open); palloc'd in the caller's context. */
extern char *mlplat_instance_id(void);

#endif /* MLPLAT_RECONCILE_SQL_H */
