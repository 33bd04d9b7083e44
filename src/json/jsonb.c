/*
 * jsonb.c — build our value tree from a jsonb (see mlplat/json_jsonb.h).
 *
 * Only PostgreSQL's public jsonb API is used: JsonbIteratorInit/Next walk
 * the containers, numeric_out prints numbers.  Nothing here reads jsonb's
 * or numeric's on-disk layout (JEntry offsets, numeric header bits): those
 * are PostgreSQL's private formats and may change in any major version.
 *
 * Why the result equals ml_json_parse(JsonbToCString(jb)):
 *   - members come in the iterator's order, jsonb's storage order, which is
 *     the order JsonbToCString prints them in; the key index is built by the
 *     parser's own ml_json_new_object;
 *   - strings are jsonb's decoded text; in a UTF-8 database it is valid
 *     UTF-8 without surrogates or NUL bytes (jsonb refuses \u0000), which is
 *     what the parser accepts and decodes escapes to;
 *   - numbers are printed with numeric_out, exactly as JsonbToCString prints
 *     them, and read by the parser's own number rule (ml_json_new_number);
 *   - depth and size stay well inside the parser's limits, else NULL.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"

static void *
arena_alloc_in(void *ctx, size_t size)
{
	return MemoryContextAllocExtended((MemoryContext) ctx, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
arena_free_in(void *ctx, void *ptr)
{
	pfree(ptr);
}

MlJsonArena *
mlplat_json_arena_in(MemoryContext cxt)
{
	MlJsonArena *arena = ml_json_arena_new_with(arena_alloc_in, arena_free_in, cxt);

	if (arena == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return arena;
}

/*
 * Numbers repeat (replica counts, epoch seconds, status codes), and printing
 * one with numeric_out costs a function call, an allocation and the digit
 * loop: a direct-mapped cache remembers the texts of recent numerics, keyed
 * by the datum's bytes (equal bytes are an equal value, whatever the format
 * inside them; only short ones are kept).  Per process, never invalidated:
 * a numeric's text never changes.
 *
 * A slot is one 64-byte cache line: the key as three zero-padded words
 * (hashed and compared as words, not by hash_bytes and memcmp), and a text
 * copied out whole, a constant size (a copy of the text's own length was a
 * third of this function's time, an inlined rep movsq).
 */
#define TEXT_CACHE_SLOTS 1024 /* a power of two */
#define TEXT_CACHE_KEY 24
#define TEXT_CACHE_TEXT 38

typedef struct TextCacheSlot
{
	uint64 key[TEXT_CACHE_KEY / 8]; /* the datum's bytes, zero-padded */
	uint8 key_len;					/* 0: empty */
	uint8 text_len;
	char text[TEXT_CACHE_TEXT]; /* NUL-terminated, zero-padded */
} TextCacheSlot;

static TextCacheSlot text_cache[TEXT_CACHE_SLOTS] pg_attribute_aligned(64);

int
ml_numeric_text(Numeric num, char out[ML_NUMERIC_TEXT_MAX])
{
	size_t key_len = VARSIZE_ANY(num);
	TextCacheSlot *slot = NULL;
	uint64 key[TEXT_CACHE_KEY / 8] = { 0, 0, 0 };
	char *text;
	size_t len;

	StaticAssertStmt(TEXT_CACHE_TEXT <= ML_NUMERIC_TEXT_MAX, "cached texts must fit out");
	StaticAssertStmt(sizeof(TextCacheSlot) == 64, "a slot is one cache line");
	if (key_len <= TEXT_CACHE_KEY)
	{
		uint64 h;

		memcpy(key, num, key_len);
		h = key[0] * UINT64CONST(0x9E3779B97F4A7C15) + key[1] * UINT64CONST(0xC2B2AE3D27D4EB4F) +
			key[2] * UINT64CONST(0x165667B19E3779F9);
		h ^= h >> 29;
		slot = &text_cache[(h * UINT64CONST(0xBF58476D1CE4E5B9)) >> 54];
		StaticAssertStmt(TEXT_CACHE_SLOTS == 1 << (64 - 54), "slot index bits");
		if (slot->key_len == key_len && slot->key[0] == key[0] && slot->key[1] == key[1] &&
			slot->key[2] == key[2])
		{
			memcpy(out, slot->text, TEXT_CACHE_TEXT);
			return slot->text_len;
		}
	}
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	len = strlen(text);
	if (len >= ML_NUMERIC_TEXT_MAX)
		len = 0;
	else
		memcpy(out, text, len + 1);
	pfree(text);
	if (slot != NULL && len > 0 && len < TEXT_CACHE_TEXT)
	{
		slot->key_len = (uint8) key_len;
		memcpy(slot->key, key, sizeof(key));
		slot->text_len = (uint8) len;
		memset(slot->text, 0, TEXT_CACHE_TEXT);
		memcpy(slot->text, out, len + 1);
	}
	return (int) len;
}

typedef struct Walk
{
	MlJsonArena *arena;
	bool give_up;
} Walk;

static MlJsonValue *container(Walk *w, JsonbContainer *jc, int depth);

static MlJsonValue *
new_value(Walk *w, MlJsonType type)
{
	MlJsonValue *v = ml_json_arena_alloc(w->arena, sizeof(MlJsonValue));

	if (v == NULL)
	{
		w->give_up = true; /* the text route reports the OOM */
		return NULL;
	}
	memset(v, 0, sizeof(*v));
	v->type = type;
	return v;
}

/* a NUL-terminated copy of a jsonb string in the arena */
static const char *
copy_string(Walk *w, const char *s, int len)
{
	char *c = ml_json_arena_alloc(w->arena, (size_t) len + 1);

	if (c == NULL)
	{
		w->give_up = true;
		return NULL;
	}
	memcpy(c, s, len);
	c[len] = '\0';
	return c;
}

/* one value the iterator returned (skipping nested containers: jbvBinary) */
static MlJsonValue *
value(Walk *w, const JsonbValue *jv, int depth)
{
	MlJsonValue *v;

	switch (jv->type)
	{
		case jbvNull:
			return new_value(w, ML_JSON_NULL);
		case jbvBool:
			if ((v = new_value(w, ML_JSON_BOOL)) != NULL)
				v->u.boolean = jv->val.boolean;
			return v;
		case jbvString:
		{
			const char *str = copy_string(w, jv->val.string.val, jv->val.string.len);

			if (str == NULL || (v = new_value(w, ML_JSON_STRING)) == NULL)
				return NULL;
			v->u.string.str = str;
			v->u.string.len = jv->val.string.len;
			return v;
		}
		case jbvNumeric:
		{
			char small[ML_NUMERIC_TEXT_MAX];
			int n = ml_numeric_text(jv->val.numeric, small);
			MlJsonError err;

			if (n > 0)
				v = ml_json_new_number(w->arena, small, n, &err);
			else
			{
				char *text = DatumGetCString(DirectFunctionCall1(numeric_out,
																 NumericGetDatum(jv->val.numeric)));

				v = ml_json_new_number(w->arena, text, strlen(text), &err);
				pfree(text);
			}
			if (v == NULL)
				w->give_up = true; /* NaN, Infinity, out of double range */
			return v;
		}
		case jbvBinary:
			return container(w, jv->val.binary.data, depth + 1);
		default:
			w->give_up = true;
			return NULL;
	}
}

/*
 * An object or array container, or a scalar document's pseudo array (only
 * the root can be one).  On a give-up the iterator is left to the caller's
 * memory context.
 */
static MlJsonValue *
container(Walk *w, JsonbContainer *jc, int depth)
{
	JsonbIterator *it;
	JsonbValue jv;
	JsonbIteratorToken tok;
	MlJsonValue *v;

	if (depth >= ML_JSON_DEFAULT_MAX_DEPTH)
	{
		w->give_up = true;
		return NULL;
	}
	it = JsonbIteratorInit(jc);
	tok = JsonbIteratorNext(&it, &jv, true);
	if (tok == WJB_BEGIN_OBJECT)
	{
		int n = jv.val.object.nPairs;
		MlJsonMember *members = NULL;
		MlJsonError err;
		int i = 0;

		if (n > 0 && (members = ml_json_arena_alloc(w->arena, n * sizeof(MlJsonMember))) == NULL)
		{
			w->give_up = true;
			return NULL;
		}
		while ((tok = JsonbIteratorNext(&it, &jv, true)) == WJB_KEY)
		{
			Assert(i < n);
			members[i].key_len = jv.val.string.len;
			if ((members[i].key = copy_string(w, jv.val.string.val, jv.val.string.len)) == NULL)
				return NULL;
			tok = JsonbIteratorNext(&it, &jv, true);
			Assert(tok == WJB_VALUE);
			if ((members[i].value = value(w, &jv, depth)) == NULL)
				return NULL;
			i++;
		}
		Assert(tok == WJB_END_OBJECT && i == n);
		v = ml_json_new_object(w->arena, members, n, &err);
		if (v == NULL)
			w->give_up = true;
	}
	else if (tok == WJB_BEGIN_ARRAY && jv.val.array.rawScalar)
	{
		/* a scalar document is stored as a one-element pseudo array */
		tok = JsonbIteratorNext(&it, &jv, true);
		Assert(tok == WJB_ELEM);
		v = value(w, &jv, depth);
		if (v == NULL)
			return NULL;
		tok = JsonbIteratorNext(&it, &jv, true);
		Assert(tok == WJB_END_ARRAY);
	}
	else if (tok == WJB_BEGIN_ARRAY)
	{
		int n = jv.val.array.nElems;
		MlJsonValue **items = NULL;
		int i = 0;

		if (n > 0 && (items = ml_json_arena_alloc(w->arena, n * sizeof(MlJsonValue *))) == NULL)
		{
			w->give_up = true;
			return NULL;
		}
		while ((tok = JsonbIteratorNext(&it, &jv, true)) == WJB_ELEM)
		{
			Assert(i < n);
			if ((items[i] = value(w, &jv, depth)) == NULL)
				return NULL;
			i++;
		}
		Assert(tok == WJB_END_ARRAY && i == n);
		if ((v = new_value(w, ML_JSON_ARRAY)) == NULL)
			return NULL;
		v->u.array.items = items;
		v->u.array.count = n;
	}
	else
	{
		w->give_up = true;
		return NULL;
	}
	/* past the end token: the iterator frees itself */
	tok = JsonbIteratorNext(&it, &jv, true);
	Assert(tok == WJB_DONE);
	return v;
}

MlJsonValue *
ml_json_from_jsonb(MlJsonArena *arena, Jsonb *jb)
{
	Walk w;
	MlJsonValue *root;

	/*
	 * JsonbToCString writes at most about 8 bytes per byte of jsonb (a
	 * control character becomes a 6-byte escape): stay far from the
	 * parser's size limit rather than count.
	 */
	if (GetDatabaseEncoding() != PG_UTF8 ||
		VARSIZE(jb) > ML_JSON_DEFAULT_MAX_BYTES / 8)
		return NULL;

	w.arena = arena;
	w.give_up = false;
	root = container(&w, &jb->root, 0);
	return w.give_up ? NULL : root;
}
