/*
 * jsonb.c — build our value tree by walking a jsonb (see mlplat/json_jsonb.h).
 *
 * Why the result equals ml_json_parse(JsonbToCString(jb)):
 *   - members come in jsonb's storage order, which is the order
 *     JsonbToCString prints them in; the key index is built by the parser's
 *     own ml_json_new_object;
 *   - strings are jsonb's decoded text; in a UTF-8 database it is valid
 *     UTF-8 without surrogates or NUL bytes (jsonb refuses \u0000), which is
 *     what the parser accepts and decodes escapes to;
 *   - numbers are printed with numeric_out exactly as JsonbToCString prints
 *     them and read by the parser's own number rule (ml_json_new_number);
 *   - depth and size stay well inside the parser's limits, else NULL.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

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

typedef struct Walk
{
	MlJsonArena *arena;
	bool give_up;
} Walk;

static MlJsonValue *container(Walk *w, const JsonbContainer *jc, int depth);

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
copy_string(Walk *w, const char *s, uint32 len)
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

/*
 * numeric_out's text of a stored numeric, written here for the common case:
 * numeric_out allocates a working copy, a digit buffer and the string for
 * every number, which was a fifth of building an evidence tree.
 *
 * The layout read is numeric's on-disk short format (utils/adt/numeric.c: a
 * 4-byte varlena header, a uint16 header word holding sign, display scale
 * and weight, then base-10000 digits), which pg_upgrade compatibility fixes.
 * The text is get_str_from_var()'s: a '-' for negatives, the integer part's
 * digit groups (the first without leading zeros, "0" when the weight is
 * negative), then, when the display scale is positive, '.' and exactly
 * dscale fraction digits (groups beyond the stored digits are zeros).
 * Returns the length, or 0 for anything else (NaN, infinities, the long
 * format, a short varlena header, text of ML_NUMERIC_TEXT_MAX bytes or more):
 * the caller then asks numeric_out.  Assert-enabled builds compare every
 * result with it.
 */
int
ml_numeric_text(Numeric num, char out[ML_NUMERIC_TEXT_MAX])
{
	const char *p = (const char *) num;
	uint16 header;
	bool negative;
	int dscale;
	int weight;
	const int16 *digits;
	int ndigits;
	char *cp = out;
	int d;

	if (VARATT_IS_SHORT(p) || VARATT_IS_EXTENDED(p))
		return 0;
	memcpy(&header, p + VARHDRSZ, sizeof(header));

	/*
	 * Only the short format: the others are NaN, the infinities and the long
	 * format, which only numbers with more than 63 fraction digits or a
	 * weight beyond 63 groups use (far longer than ML_NUMERIC_TEXT_MAX).
	 */
	if ((header & 0xC000) != 0x8000)
		return 0;
	negative = (header & 0x2000) != 0;
	dscale = (header & 0x1F80) >> 7;
	weight = (header & 0x0040) ? (int) (~0x003F | (header & 0x003F))
							   : (int) (header & 0x003F);
	digits = (const int16 *) (p + VARHDRSZ + sizeof(uint16));
	ndigits = (VARSIZE(p) - VARHDRSZ - sizeof(uint16)) / sizeof(int16);

	/* sign, integer groups, '.', fraction groups rounded up to 4 digits */
	if (1 + (weight >= 0 ? 4 * (weight + 1) : 1) + 1 + dscale + 4 >= ML_NUMERIC_TEXT_MAX)
		return 0;

	if (negative)
		*cp++ = '-';
	if (weight < 0)
	{
		d = weight + 1;
		*cp++ = '0';
	}
	else
	{
		for (d = 0; d <= weight; d++)
		{
			int dig = d < ndigits ? digits[d] : 0;

			if (d == 0)
			{
				/* the first group without leading zeros */
				char tmp[4];
				int k = 0;

				do
				{
					tmp[k++] = (char) ('0' + dig % 10);
					dig /= 10;
				} while (dig > 0);
				while (k > 0)
					*cp++ = tmp[--k];
			}
			else
			{
				cp[0] = (char) ('0' + dig / 1000);
				cp[1] = (char) ('0' + dig / 100 % 10);
				cp[2] = (char) ('0' + dig / 10 % 10);
				cp[3] = (char) ('0' + dig % 10);
				cp += 4;
			}
		}
	}
	if (dscale > 0)
	{
		char *end;

		*cp++ = '.';
		end = cp + dscale;
		for (int i = 0; i < dscale; d++, i += 4)
		{
			int dig = (d >= 0 && d < ndigits) ? digits[d] : 0;

			cp[0] = (char) ('0' + dig / 1000);
			cp[1] = (char) ('0' + dig / 100 % 10);
			cp[2] = (char) ('0' + dig / 10 % 10);
			cp[3] = (char) ('0' + dig % 10);
			cp += 4;
		}
		cp = end;
	}
	*cp = '\0';
#ifdef USE_ASSERT_CHECKING
	{
		char *text = DatumGetCString(DirectFunctionCall1(numeric_out,
														 NumericGetDatum(num)));

		Assert(strcmp(text, out) == 0);
		pfree(text);
	}
#endif
	return (int) (cp - out);
}

/*
 * Child `index` of jc, whose data is base[off .. off + len).  The layout is
 * jsonb's (utils/jsonb.h), read as fillJsonbValue() reads it; walking the
 * containers directly instead of through JsonbIteratorNext saves an
 * allocation per container and a copy per token.
 */
static MlJsonValue *
child(Walk *w, const JsonbContainer *jc, int index, const char *base, uint32 off, uint32 len,
	  int depth)
{
	JEntry e = jc->children[index];
	MlJsonValue *v;

	if (JBE_ISNULL(e))
		return new_value(w, ML_JSON_NULL);
	if (JBE_ISBOOL(e))
	{
		if ((v = new_value(w, ML_JSON_BOOL)) != NULL)
			v->u.boolean = JBE_ISBOOL_TRUE(e);
		return v;
	}
	if (JBE_ISSTRING(e))
	{
		const char *str = copy_string(w, base + off, len);

		if (str == NULL || (v = new_value(w, ML_JSON_STRING)) == NULL)
			return NULL;
		v->u.string.str = str;
		v->u.string.len = len;
		return v;
	}
	if (JBE_ISNUMERIC(e))
	{
		Numeric num = (Numeric) (base + INTALIGN(off));
		char small[ML_NUMERIC_TEXT_MAX];
		int n = ml_numeric_text(num, small);
		MlJsonError err;

		if (n > 0)
			v = ml_json_new_number(w->arena, small, n, &err);
		else
		{
			char *text = DatumGetCString(DirectFunctionCall1(numeric_out,
															 NumericGetDatum(num)));

			v = ml_json_new_number(w->arena, text, strlen(text), &err);
			pfree(text);
		}
		if (v == NULL)
			w->give_up = true; /* NaN, Infinity, out of double range */
		return v;
	}
	if (JBE_ISCONTAINER(e))
		return container(w, (const JsonbContainer *) (base + INTALIGN(off)), depth + 1);
	w->give_up = true;
	return NULL;
}

/* an object or array container (not a scalar's pseudo array) */
static MlJsonValue *
container(Walk *w, const JsonbContainer *jc, int depth)
{
	uint32 n = JsonContainerSize(jc);
	uint32 off = 0;
	MlJsonValue *v;

	if (depth >= ML_JSON_DEFAULT_MAX_DEPTH)
	{
		w->give_up = true;
		return NULL;
	}
	if (JsonContainerIsObject(jc))
	{
		/* children: n keys, then their n values; data in the same order */
		const char *base = (const char *) &jc->children[2 * n];
		MlJsonMember *members = NULL;
		MlJsonError err;

		if (n > 0 && (members = ml_json_arena_alloc(w->arena, n * sizeof(MlJsonMember))) == NULL)
		{
			w->give_up = true;
			return NULL;
		}
		for (uint32 i = 0; i < n; i++)
		{
			uint32 start = off;

			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			members[i].key_len = off - start;
			if ((members[i].key = copy_string(w, base + start, off - start)) == NULL)
				return NULL;
		}
		for (uint32 i = 0; i < n; i++)
		{
			uint32 start = off;

			JBE_ADVANCE_OFFSET(off, jc->children[n + i]);
			if ((members[i].value = child(w, jc, n + i, base, start, off - start, depth)) == NULL)
				return NULL;
		}
		v = ml_json_new_object(w->arena, members, n, &err);
		if (v == NULL)
			w->give_up = true;
		return v;
	}
	else
	{
		const char *base = (const char *) &jc->children[n];
		MlJsonValue **items = NULL;

		if (n > 0 && (items = ml_json_arena_alloc(w->arena, n * sizeof(MlJsonValue *))) == NULL)
		{
			w->give_up = true;
			return NULL;
		}
		for (uint32 i = 0; i < n; i++)
		{
			uint32 start = off;

			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			if ((items[i] = child(w, jc, i, base, start, off - start, depth)) == NULL)
				return NULL;
		}
		if ((v = new_value(w, ML_JSON_ARRAY)) == NULL)
			return NULL;
		v->u.array.items = items;
		v->u.array.count = n;
		return v;
	}
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
	if (JB_ROOT_IS_SCALAR(jb))
	{
		/* a scalar document is stored as a one-element pseudo array */
		const JsonbContainer *jc = &jb->root;
		uint32 len = getJsonbLength(jc, 0);

		root = child(&w, jc, 0, (const char *) &jc->children[1], 0, len, 0);
	}
	else
		root = container(&w, &jb->root, 0);
	return w.give_up ? NULL : root;
}
