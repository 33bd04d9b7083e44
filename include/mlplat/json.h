/*
 * json.h — a small, strict, I/O-free JSON parser and value tree (RFC 8259).
 *
 * Used by the SQL functions (canonical JSON, content ids, spec_diff), by the
 * reconcilers, and linked alone into the libFuzzer targets and the plain-C
 * unit test: nothing here includes PostgreSQL headers.
 *
 * Why a parser of our own rather than jsonb: the pure-C core (plan_rollout's
 * decision, canonical JSON and content ids, the Kubernetes classifier, the
 * decide functions) must run without a server, in the fuzz targets and unit
 * tests, where jsonb does not exist.  So this is the backend's one JSON model
 * too: every remote body is parsed once, here, and read through
 * ml_json_object_get and the path accessors below; jsonb arguments of SQL
 * functions become the same tree through src/json/jsonb.c (PostgreSQL's
 * public jsonb API only).  See docs/reconcilers.md, "One JSON model".
 *
 * Strict means: exactly one value with optional whitespace around it; no
 * trailing garbage; valid UTF-8 only (no overlong forms, no encoded
 * surrogates); \u escapes must pair surrogates; no leading zeros; no raw
 * control characters in strings; no duplicate object keys; numbers must be
 * finite as IEEE 754 doubles; nesting and input size are bounded.  Errors
 * carry a message and the byte offset where the problem was found; the
 * parser never aborts.
 *
 * Memory comes from an MlJsonArena: many small allocations, freed at once.
 * The default arena uses malloc; the backend supplies palloc-based callbacks
 * so an ereport() anywhere cannot leak.
 */
#ifndef MLPLAT_JSON_H
#define MLPLAT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------ */

typedef struct MlJsonArena MlJsonArena;

/* alloc returns NULL when out of memory; free may be NULL (nothing to do). */
typedef void *(*MlJsonAllocFn)(void *ctx, size_t size);
typedef void (*MlJsonFreeFn)(void *ctx, void *ptr);

/* A malloc-backed arena; NULL when out of memory. */
extern MlJsonArena *ml_json_arena_new(void);

/* An arena whose blocks come from the caller's allocator. */
extern MlJsonArena *ml_json_arena_new_with(MlJsonAllocFn alloc, MlJsonFreeFn free_fn, void *ctx);

/* Free every block and the arena itself; NULL is fine. */
extern void ml_json_arena_free(MlJsonArena *arena);

/* size bytes aligned for any scalar type; NULL when out of memory. */
extern void *ml_json_arena_alloc(MlJsonArena *arena, size_t size);

/* ---- errors ----------------------------------------------------------- */

typedef enum MlJsonErrorCode
{
	ML_JSON_OK = 0,
	ML_JSON_ERR_SYNTAX,	  /* not JSON: bad token, trailing garbage, ... */
	ML_JSON_ERR_ENCODING, /* invalid UTF-8, lone surrogate escape */
	ML_JSON_ERR_LIMIT,	  /* too deep, too large */
	ML_JSON_ERR_VALUE,	  /* JSON, but not acceptable: duplicate key,
								 * number out of double range, NaN/Infinity */
	ML_JSON_ERR_NOMEM	  /* the allocator said no */
} MlJsonErrorCode;

typedef struct MlJsonError
{
	MlJsonErrorCode code;
	size_t offset;	   /* byte offset in the input (parse errors) */
	char message[160]; /* human-readable, never echoes input text */
} MlJsonError;

/* ---- values ----------------------------------------------------------- */

typedef enum MlJsonType
{
	ML_JSON_NULL = 0,
	ML_JSON_BOOL,
	ML_JSON_NUMBER,
	ML_JSON_STRING,
	ML_JSON_ARRAY,
	ML_JSON_OBJECT
} MlJsonType;

typedef struct MlJsonValue MlJsonValue;

typedef struct MlJsonMember
{
	const char *key; /* UTF-8, NUL-terminated, may contain NUL */
	size_t key_len;
	MlJsonValue *value;
} MlJsonMember;

struct MlJsonValue
{
	MlJsonType type;
	union
	{
		bool boolean;
		struct
		{
			const char *text; /* the source text, NUL-terminated */
			size_t text_len;
			double value;	 /* finite */
			bool is_integer; /* written without fraction or exponent */
		} number;
		struct
		{
			const char *str; /* decoded UTF-8, NUL-terminated, may contain NUL */
			size_t len;
		} string;
		struct
		{
			MlJsonValue **items;
			size_t count;
		} array;
		struct
		{
			MlJsonMember *members;		 /* insertion order */
			const MlJsonMember **by_key; /* sorted by key bytes, for lookup */
			size_t count;
		} object;
	} u;
};

typedef struct MlJsonLimits
{
	size_t max_depth; /* nesting of arrays/objects; 0 = default */
	size_t max_bytes; /* input length; 0 = default */
} MlJsonLimits;

#define ML_JSON_DEFAULT_MAX_DEPTH 256
#define ML_JSON_DEFAULT_MAX_BYTES (64 * 1024 * 1024)

/*
 * Parse text[0..len) (need not be NUL-terminated).  limits may be NULL.
 * Returns the root, or NULL with *err filled in.  The tree lives in arena.
 */
extern MlJsonValue *ml_json_parse(MlJsonArena *arena, const char *text, size_t len,
								  const MlJsonLimits *limits, MlJsonError *err);

/*
 * Building blocks for trees that come from elsewhere than JSON text (the
 * backend reads jsonb directly).  They apply the parser's own rules, so such
 * a tree is the one ml_json_parse would build from the same document.
 */

/* A number from its JSON text (number grammar only); NULL with *err if not a finite double. */
extern MlJsonValue *ml_json_new_number(MlJsonArena *arena, const char *text, size_t len,
									   MlJsonError *err);

/*
 * The same number as a value the caller owns, without an arena: text must be
 * NUL-terminated and outlive *out (out->u.number.text points at it).  False
 * when text[0..len) is not exactly one JSON number that is a finite double.
 */
extern bool ml_json_number_view(const char *text, size_t len, MlJsonValue *out);

/* An object of a copy of members[0..count) with its key index; NULL on a duplicate key or OOM. */
extern MlJsonValue *ml_json_new_object(MlJsonArena *arena, const MlJsonMember *members,
									   size_t count, MlJsonError *err);

/* Member value for key (bytes, key_len), or NULL (also when obj is no object). */
extern const MlJsonValue *ml_json_object_get_n(const MlJsonValue *obj, const char *key, size_t key_len);
extern const MlJsonValue *ml_json_object_get(const MlJsonValue *obj, const char *key);

/*
 * Path accessors (src/json/path.c): the one way reconcilers read fields of a
 * remote body, every body being parsed once, by this parser (see
 * docs/reconcilers.md, "One JSON model").  obj may be NULL or not an object.
 */
/* obj.a[.b[.c]] when it is a string (NUL-terminated), else NULL */
extern const char *mlplat_json_text(const MlJsonValue *obj, const char *a, const char *b, const char *c);
/* obj.a.b when it is an integer-valued number */
extern bool mlplat_json_int(const MlJsonValue *obj, const char *a, const char *b, int64_t *out);

/*
 * Are two texts the same, NULL being the same only as NULL?  What the path
 * accessors answer (NULL: absent) is compared with this.
 */
static inline bool
mlplat_str_same(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/*
 * The longest prefix of s[0..len) of at most max bytes that does not end inside a
 * UTF-8 sequence: where remote text (an error message) is cut to a bound, the cut
 * falls on a character boundary, so the stored line stays valid UTF-8.
 */
extern size_t ml_utf8_clip(const char *s, size_t len, size_t max);

/*
 * How many bytes from s[0] (at most len) a JSON string holds as they are:
 * printable ASCII other than '"' and '\\' (the parser's fast path).
 */
extern size_t ml_json_plain_run(const char *s, size_t len);

/* Name of a type, for messages ("object", "number", ...). */
extern const char *ml_json_type_name(MlJsonType type);

/* Fill *err (offset 0) — for callers that report their own errors. */
extern void ml_json_set_error(MlJsonError *err, MlJsonErrorCode code, size_t offset,
							  const char *message);

#endif /* MLPLAT_JSON_H */
