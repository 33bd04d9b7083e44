/*
 * seam.h — the typed seam between a kind's SQL and its C pass.
 *
 * A kind's claim returns rows of a named composite type (CREATE TYPE
 * mlplat.<kind>_claim) and its write-back takes an array of another
 * (mlplat.<kind>_writeback[]).  C describes each type once, as a table of
 * fields: the attribute's name, its SQL type and where the value lives in the
 * kind's C struct.  The seam resolves the attribute numbers by name once per
 * worker (again only when the type changes), checks that names and types agree
 * with the SQL type, reads claim rows into structs and builds the write-back
 * array from structs, with binary values: never text, never by position.
 *
 * The C side is generated from the SQL side (seam_members.h): a kind's row
 * struct declares its members with MLPLAT_SEAM_MEMBERS(<type>) and its seam
 * with MLPLAT_SEAM_STATIC(var, <type>, Struct).  Adding a field is one
 * attribute in the SQL type (and the column in the function's SELECT, or its
 * use in the write-back) and the C that reads or sets it.
 */
#ifndef MLPLAT_SEAM_H
#define MLPLAT_SEAM_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "mlplat/ledger.h"
#include "mlplat/reconcile.h"
#include "mlplat/seam_members.h"
#include "mlplat/states.h"
#include "mlplat/unanswered.h"

/* How a field is kept in C; the SQL type it must have is fixed by this. */
typedef enum MlplatSeamType
{
	MLPLAT_SEAM_INT8,		 /* int64, bigint */
	MLPLAT_SEAM_INT4,		 /* int32, int */
	MLPLAT_SEAM_BOOL,		 /* bool, boolean */
	MLPLAT_SEAM_TEXT,		 /* char *, text */
	MLPLAT_SEAM_JSONB,		 /* char * (JSON text), jsonb: written only */
	MLPLAT_SEAM_TIMESTAMPTZ, /* TimestampTz, timestamptz (NULL reads as 0) */
	MLPLAT_SEAM_TEXT_ARRAY,	 /* List * of char *, text[] (NULL reads as NIL, NIL is written as NULL) */
	MLPLAT_SEAM_INT8_ARRAY,	 /* ArrayType * (a copy), bigint[] (NULL reads as NULL): read only */
	MLPLAT_SEAM_STATUS,		 /* int (a states.h enum; NULL is MLPLAT_NO_STATUS), text */
	MLPLAT_SEAM_NUMERIC		 /* char * (decimal text, exact both ways: numeric_in/out), numeric */
} MlplatSeamType;

/*
 * What SQL NULL is in C.  Default: 0, false or a NULL pointer when read; a
 * NULL pointer is written as NULL, numbers never are.  NEG: a number below 0
 * is NULL both ways (read as -1); an attribute has it when its SQL type is
 * followed by the comment NULL<0 (scripts/seam_types.awk).
 */
#define MLPLAT_SEAM_NULL_NEG 0x01

/*
 * The state machine of a STATUS attribute (states.h), kept in its flags: the
 * attribute's SQL type is followed by the comment STATUS <machine>.
 */
#define MLPLAT_SEAM_STATES(M) ((MLPLAT_MACHINE_##M + 1) << 8)
#define MLPLAT_SEAM_MACHINE(flags) ((MlplatMachine) (((flags) >> 8) - 1))

typedef struct MlplatSeamField
{
	const char *attname;
	MlplatSeamType type;
	size_t offset; /* in the kind's struct */
	int flags;
} MlplatSeamField;

/*
 * The field table of seam type type_name for struct S (whose members are
 * named as the attributes: MLPLAT_SEAM_MEMBERS), from the generated list of
 * its attributes (seam_members.h).  A member of another size than the seam
 * type's is a compile error.
 */
#define MLPLAT_SEAM_ENTRY_(S, name, type, flags) \
	{ #name, MLPLAT_SEAM_##type, \
	  offsetof(S, name) + 0 * sizeof(char[sizeof(((S *) 0)->name) == sizeof(MLPLAT_SEAM_C_in_##type) ? 1 : -1]), \
	  flags },
#define MLPLAT_SEAM_FIELDS(type_name, S) \
	{ \
		MLPLAT_SEAM_ATTRS_##type_name(MLPLAT_SEAM_ENTRY_, S) \
	}

/*
 * Define the MlplatSeam var (and its table var_fields) of seam type type_name
 * read into or built from struct S: static to the file, or global (declared
 * extern in a header).
 */
#define MLPLAT_SEAM_STATIC(var, type_name, S) \
	static const MlplatSeamField var##_fields[] = MLPLAT_SEAM_FIELDS(type_name, S); \
	static MlplatSeam var = { #type_name, var##_fields, lengthof(var##_fields), sizeof(S) }
#define MLPLAT_SEAM_GLOBAL(var, type_name, S) \
	static const MlplatSeamField var##_fields[] = MLPLAT_SEAM_FIELDS(type_name, S); \
	MlplatSeam var = { #type_name, var##_fields, lengthof(var##_fields), sizeof(S) }

/*
 * A row C builds and nothing else: the struct S has exactly the members of
 * type_name (MLPLAT_SEAM_MEMBERS_OUT), and var is its seam.
 */
#define MLPLAT_SEAM_ROW_STATIC(var, type_name, S) \
	typedef struct S \
	{ \
		MLPLAT_SEAM_MEMBERS_OUT(type_name) \
	} S; \
	MLPLAT_SEAM_STATIC(var, type_name, S)
#define MLPLAT_SEAM_ROW_GLOBAL(var, type_name, S) \
	typedef struct S \
	{ \
		MLPLAT_SEAM_MEMBERS_OUT(type_name) \
	} S; \
	MLPLAT_SEAM_GLOBAL(var, type_name, S)

/*
 * One composite type of the seam.  Declare it static in the kind's file with
 * type_name, fields and nfields; the rest is filled by the seam.
 */
typedef struct MlplatSeam
{
	const char *type_name; /* in schema mlplat, e.g. "deployment_claim" */
	const MlplatSeamField *fields;
	int nfields;
	size_t size; /* of the C struct */
	/* resolved (process lifetime, TopMemoryContext) */
	Oid typoid;
	uint64 tupdesc_id;	/* the type cache's identifier of the checked shape */
	TupleDesc tupdesc;	/* a copy of the type's descriptor */
	AttrNumber *attnum; /* attnum[i]: the attribute of fields[i] */
} MlplatSeam;

/*
 * The write-back row of kinds whose write-back is a status and what was
 * observed (mlplat.project_writeback, mlplat.model_alias_writeback): one C
 * struct for all of them, each kind's table made from its own type (which must
 * have the same attributes).  A negative number is NULL: observed_generation
 * < 0 keeps the stored one, retry_ms < 0 schedules no retry; observed NULL
 * keeps the stored observation.
 */
typedef struct MlplatStatusWriteback
{
	MLPLAT_SEAM_MEMBERS_OUT(project_writeback)
} MlplatStatusWriteback;

/*
 * Resolve and check the seam against the installed type (transaction open).
 * Cheap when nothing changed (two cache lookups).  Returns NULL, or a
 * palloc'd sentence saying how the library and the SQL type disagree.
 */
extern char *mlplat_seam_verify(MlplatSeam *s);

/* The same, raising an ERROR (with errdetail and errhint) when they disagree. */
extern void mlplat_seam_check(MlplatSeam *s);

/*
 * Run a claim (transaction open): sql must return one column of the seam's
 * type (SELECT c FROM mlplat._x_claim(...) c).  Returns a List of structs of
 * size bytes each, allocated in cxt (the pass's context: it outlives the
 * transaction), texts included.
 */
extern List *mlplat_seam_claim(MlplatSeam *s, MemoryContext cxt, const char *sql, int nargs,
							   Oid *types, Datum *values, size_t size);

/*
 * The claim step of a pass, in one short transaction of its own (none may be
 * open): this installation's id, the rows of the kind's claim (sql, nargs,
 * types, values and size as for mlplat_seam_claim) and, when with_notes, the
 * kind's unanswered write notes (unanswered.h).  All of it is allocated in
 * the caller's context (the pass's: it outlives the transaction), and the
 * caller is back in that context on return.  What a kind derives from its
 * rows (attaching notes, defaults) it does after, with no transaction open.
 * limit > 0 bounds the rows (mlplat.pass_row_limit; the kind's SQL should
 * bound its own choice of rows too, so it computes no more than it returns):
 * a claim that comes back with limit rows sets full and pass->claim_full, and
 * the worker starts the next pass at once instead of waiting the interval.
 * 0: every row the claim returns.
 */
typedef struct MlplatClaim
{
	List *rows;		   /* structs of size bytes */
	char *instance;	   /* mlplat.installation's instance id */
	List *notes;	   /* MlplatUnanswered, when asked for; else NIL */
	TimestampTz start; /* when the claim transaction began ... */
	TimestampTz end;   /* ... and when it committed (claim spans) */
	bool full;		   /* limit rows came back: there may be more */
} MlplatClaim;

extern void mlplat_seam_claim_pass(MlplatPass *pass, MlplatSeam *s, const char *sql, int nargs, Oid *types,
								   Datum *values, size_t size, bool with_notes, int limit, MlplatClaim *out);

/*
 * What a kind must do in its claim's transaction besides the claim, so that
 * the claim and it see one another: before the claim (evidence the claim
 * reads, recorded first: the lab's observed Nodes) and after the notes (what
 * the pass reads later with no transaction open: the lab's project namespaces
 * on a resync).  Either may be NULL; both run in the pass's context, after
 * the instance id is read.
 */
typedef void (*MlplatClaimStep)(MlplatPass *pass, void *arg);
typedef struct MlplatClaimSteps
{
	MlplatClaimStep before;
	MlplatClaimStep after;
	void *arg;
} MlplatClaimSteps;

/* mlplat_seam_claim_pass with the kind's steps in the same transaction (steps NULL: none). */
extern void mlplat_seam_claim_pass_with(MlplatPass *pass, MlplatSeam *s, const char *sql, int nargs, Oid *types,
										Datum *values, size_t size, bool with_notes, int limit,
										const MlplatClaimSteps *steps, MlplatClaim *out);

/* Fill one struct from one composite datum of the seam's type. */
extern void mlplat_seam_read(MlplatSeam *s, Datum composite, void *out);

/* A write-back array being built (transaction open, caller's context). */
typedef struct MlplatSeamArray
{
	MlplatSeam *seam;
	ArrayBuildState *state;
	MemoryContext row_cxt; /* what building one element takes, reset after each */
	int count;
	int64 returned_sum; /* after the write-back: the sum of its second column, if any */
} MlplatSeamArray;

extern MlplatSeamArray *mlplat_seam_array_new(MlplatSeam *s);
extern void mlplat_seam_array_add(MlplatSeamArray *a, const void *row);
extern Datum mlplat_seam_array_datum(MlplatSeamArray *a);

/*
 * The set-based write-back of a pass (transaction open): runs sql with $1 the
 * epoch and $2 the array; sql returns the ids (bigint) of the rows written,
 * and may return a second, integer column (say, child rows written): its sum
 * is left in a->returned_sum.
 * Returns them sorted (for mlplat_seam_written), *n their number.  Nothing is
 * run when the array is empty.
 */
extern int64 *mlplat_seam_writeback(MlplatSeamArray *a, const char *sql, int64 epoch, uint64 *n);
extern bool mlplat_seam_written(const int64 *ids, uint64 n, int64 id);

/*
 * The head every kind's write-back starts with (no transaction open): begin
 * the write-back's transaction and return an empty array of rows of seam s,
 * with *ledger an empty ledger batch for the pass's ledger rows, both in the
 * transaction's memory (they are built inside it: their element types come
 * from the catalog).  mlplat_seam_writeback_end is its tail.
 */
extern MlplatSeamArray *mlplat_seam_writeback_begin(MlplatSeam *s, MlplatLedgerBatch **ledger);

/*
 * The tail every kind's write-back ends with (transaction open): write the
 * pass's ledger rows (ledger may be NULL), remove the write-ahead notes the
 * pass heard answered (settled may be NULL), record the pass's spans, commit,
 * return to pass_cxt, and say in the pass status how many write-backs lost
 * their compare-and-swap.  Written once so that no kind forgets a step or
 * orders them differently.
 */
extern void mlplat_seam_writeback_end(MlplatPass *pass, MlplatLedgerBatch *ledger, MlplatWriteNotes *settled,
									  List *spans, MemoryContext pass_cxt, int lost);

/*
 * A pass's write-back, written once for every kind (no transaction open at
 * mlplat_writeback_begin; all of it in the write-back's transaction):
 *
 *   MlplatWriteback wb;
 *   mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
 *   mlplat_writeback_rows(&wb, entities, row_fn, "SELECT * FROM mlplat._x_writeback_set($1, $2)", done_fn);
 *   ... ledger rows of what is not an entity (orphans) ...
 *   mlplat_writeback_end(&wb);
 *
 * row_fn fills the (zeroed) write-back row of an entity and returns true, or
 * returns false when the entity has none; the row's id and row_version (the
 * compare-and-swap) are then taken from the entity's claimed row, by the claim
 * seam's table.  After the write-back ran, done_fn (may be NULL) hears of each
 * entity that had a row, in the list's order, whether its row was written
 * (held: its compare-and-swap held); a row that was not is counted for the pass
 * status.  Both add to wb->ledger, wb->settled and wb->spans, which
 * mlplat_writeback_end writes; spans that belong to the row's state (recorded
 * only if the row was written) row_fn puts in wb->row_spans instead.
 */
typedef struct MlplatWriteback
{
	MlplatPass *pass;
	MemoryContext pass_cxt; /* where the caller is after mlplat_writeback_end */
	MlplatSeamArray *rows;
	const MlplatSeam *claim;
	MlplatLedgerBatch *ledger; /* the pass's ledger rows */
	MlplatWriteNotes settled;  /* write-ahead notes heard answered */
	List *spans;			   /* the pass's spans */
	List *row_spans;		   /* row_fn may set: the row's spans, recorded only if it is written */
	int lost;				   /* rows that lost their compare-and-swap */
} MlplatWriteback;

typedef bool (*MlplatWritebackRowFn)(MlplatWriteback *wb, void *entity, void *row);
typedef void (*MlplatWritebackDoneFn)(MlplatWriteback *wb, void *entity, bool held);

extern void mlplat_writeback_begin(MlplatWriteback *wb, MlplatPass *pass, MlplatSeam *rows, MlplatSeam *claim);
extern void mlplat_writeback_rows(MlplatWriteback *wb, List *entities, MlplatWritebackRowFn row_fn, const char *sql,
								  MlplatWritebackDoneFn done_fn);
extern void mlplat_writeback_end(MlplatWriteback *wb);

/*
 * In a row or done function: settle the write-ahead notes of one entity's
 * object (object: its namespace/name, or the label the kind noted it by):
 * every note of it when all (it was found, or it is past waiting for), else
 * those of the one write whose answer was heard (answered_action; NULL: none).
 */
/*
 * The ledger row of an orphan's teardown (an object with this installation's
 * labels that no live entity owns): entity as the ledger names the kind,
 * entity_id 0 when no row is known, outcome OK, RETRY, FAILED or CONFLICT
 * (found but not provably ours: reported, not deleted).
 */
extern void mlplat_writeback_orphan(MlplatWriteback *wb, const char *entity, int64 entity_id, const char *project,
									const char *outcome, int http_status, const char *error, const char *object);

/*
 * Notes an observation settles (a sight of the object, or the grace): all of the
 * object's, or those of one noted action.  An answer settles only its own leader's
 * notes: mlplat_write_notes_answered (unanswered.h).
 */
extern void mlplat_writeback_settle(MlplatWriteback *wb, int64 entity_id, const char *object, bool all,
									const char *answered_action);

/*
 * A write-back whose function answers each row with a row of another seam type
 * (say, what it decided): runs sql with $1 the epoch and $2 the array; sql must
 * return one column of result's type (SELECT r FROM mlplat._x_writeback_set($1, $2) r).
 * Returns the answers as structs of size bytes in cxt; NIL when the array is empty.
 */
extern List *mlplat_seam_writeback_rows(MlplatSeamArray *a, const char *sql, int64 epoch, MlplatSeam *result,
										MemoryContext cxt, size_t size);

#endif /* MLPLAT_SEAM_H */
