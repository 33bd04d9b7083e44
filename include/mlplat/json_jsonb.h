/*
 * json_jsonb.h — our JSON value tree straight from a jsonb datum (backend only).
 *
 * The SQL functions used to print jsonb as text (JsonbToCString) and parse
 * that with ml_json_parse.  Walking the jsonb with its public iterator
 * (JsonbIteratorInit/Next) gives the same tree without printing and
 * re-lexing every byte.  It is a fast path only: whenever the
 * walk cannot be sure to build exactly the tree the text route builds (a
 * database encoding other than UTF-8, a document near the parser's limits, a
 * number that is not a finite double), it returns NULL and the caller takes
 * the text route, which then reports any error as it always did.
 */
#ifndef MLPLAT_JSON_JSONB_H
#define MLPLAT_JSON_JSONB_H

#include "postgres.h"

#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "mlplat/json.h"

/*
 * The tree of jb in arena, or NULL: take the text route.  Besides the arena
 * it allocates jsonb iterators and numeric_out's texts in the current memory
 * context, freed as it goes (left to the context when it gives up).
 */
extern MlJsonValue *ml_json_from_jsonb(MlJsonArena *arena, Jsonb *jb);

/*
 * numeric_out's text of num into out (NUL-terminated); returns its length,
 * or 0 when it takes ML_NUMERIC_TEXT_MAX bytes or more.  Integers that fit
 * an int32 are printed here, the rest by numeric_out, through public
 * functions only: numeric's on-disk format is PostgreSQL's to change.
 */
#define ML_NUMERIC_TEXT_MAX 64
extern int ml_numeric_text(Numeric num, char out[ML_NUMERIC_TEXT_MAX]);

/*
 * A JSON arena whose blocks are allocated in cxt: it goes away with the
 * context (a call's, a pass's), and ml_json_arena_free may free it earlier.
 * Out of memory is an ERROR, never a NULL arena.
 */
extern MlJsonArena *mlplat_json_arena_in(MemoryContext cxt);

#endif /* MLPLAT_JSON_JSONB_H */
