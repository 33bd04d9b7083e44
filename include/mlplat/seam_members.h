/*
 * seam_members.h — the C members of a seam type, from its SQL definition.
 *
 * mlplat/seam_types.h is generated at build time (scripts/seam_types.awk) from
 * the CREATE TYPEs of the SQL: one list per type of its attributes, their seam
 * types and flags.  MLPLAT_SEAM_MEMBERS(<type>) declares one struct member per
 * attribute, named as the attribute, of the C type the seam reads it into:
 *
 *   typedef struct Row { MLPLAT_SEAM_MEMBERS(run_claim) char *derived; } Row;
 *
 * MLPLAT_SEAM_MEMBERS_OUT does the same for a row C builds (texts are
 * const char *).  seam.h makes the field table from the same list.
 */
#ifndef MLPLAT_SEAM_MEMBERS_H
#define MLPLAT_SEAM_MEMBERS_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "mlplat/seam_types.h"

/* the C type of each seam type (seam.h: MlplatSeamType), in a row read ... */
#define MLPLAT_SEAM_C_in_INT8 int64
#define MLPLAT_SEAM_C_in_INT4 int32
#define MLPLAT_SEAM_C_in_BOOL bool
#define MLPLAT_SEAM_C_in_TEXT char *
#define MLPLAT_SEAM_C_in_JSONB char * /* JSON text */
#define MLPLAT_SEAM_C_in_TIMESTAMPTZ TimestampTz
#define MLPLAT_SEAM_C_in_TEXT_ARRAY List * /* of char * */
#define MLPLAT_SEAM_C_in_INT8_ARRAY ArrayType *
#define MLPLAT_SEAM_C_in_STATUS int		/* a states.h enum */
#define MLPLAT_SEAM_C_in_NUMERIC char * /* decimal text */
/* ... and in a row built */
#define MLPLAT_SEAM_C_out_INT8 int64
#define MLPLAT_SEAM_C_out_INT4 int32
#define MLPLAT_SEAM_C_out_BOOL bool
#define MLPLAT_SEAM_C_out_TEXT const char *
#define MLPLAT_SEAM_C_out_JSONB const char *
#define MLPLAT_SEAM_C_out_TIMESTAMPTZ TimestampTz
#define MLPLAT_SEAM_C_out_STATUS int
#define MLPLAT_SEAM_C_out_TEXT_ARRAY List *	   /* of char *; NIL: NULL */
#define MLPLAT_SEAM_C_out_NUMERIC const char * /* decimal text */

#define MLPLAT_SEAM_MEMBER_(dir, name, type, flags) MLPLAT_SEAM_C_##dir##_##type name;
#define MLPLAT_SEAM_MEMBERS(type_name) MLPLAT_SEAM_ATTRS_##type_name(MLPLAT_SEAM_MEMBER_, in)
#define MLPLAT_SEAM_MEMBERS_OUT(type_name) MLPLAT_SEAM_ATTRS_##type_name(MLPLAT_SEAM_MEMBER_, out)

#endif /* MLPLAT_SEAM_MEMBERS_H */
