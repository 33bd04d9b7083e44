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

typedef struct Walk
{
	MlJsonArena *arena;
	JsonbIterator *it;
	bool		give_up;
} Walk;

static MlJsonValue *
new_value(Walk *w, MlJsonType type)
{
	MlJsonValue *v = ml_json_arena_alloc(w->arena, sizeof(MlJsonValue));

	if (v == NULL)
	{
		w->give_up = true;		/* the text route reports the OOM */
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
	char	   *c = ml_json_arena_alloc(w->arena, (size_t) len + 1);

	if (c == NULL)
	{
		w->give_up = true;
		return NULL;
	}
	memcpy(c, s, len);
	c[len] = '\0';
	return c;
}

static MlJsonValue *
scalar(Walk *w, JsonbValue *jv)
{
	MlJsonValue *v = NULL;

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
				const char *s = copy_string(w, jv->val.string.val, jv->val.string.len);

				if (s == NULL || (v = new_value(w, ML_JSON_STRING)) == NULL)
					return NULL;
				v->u.string.str = s;
				v->u.string.len = jv->val.string.len;
				return v;
			}
		case jbvNumeric:
			{
				char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out,
																	   NumericGetDatum(jv->val.numeric)));
				MlJsonError err;

				v = ml_json_new_number(w->arena, text, strlen(text), &err);
				pfree(text);
				if (v == NULL)
					w->give_up = true;	/* NaN, Infinity, out of double range */
				return v;
			}
		default:
			w->give_up = true;
			return NULL;
	}
}

/* the container whose BEGIN token was just read */
static MlJsonValue *
container(Walk *w, JsonbIteratorToken begin, int depth)
{
	JsonbValue	jv;
	JsonbIteratorToken tok;
	MlJsonValue **items = NULL;
	MlJsonMember *members = NULL;
	size_t		n = 0,
				cap = 0;
	const char *key = NULL;
	size_t		key_len = 0;
	MlJsonValue *v;

	if (depth >= ML_JSON_DEFAULT_MAX_DEPTH)
	{
		w->give_up = true;
		return NULL;
	}
	while ((tok = JsonbIteratorNext(&w->it, &jv, false)) != WJB_DONE)
	{
		MlJsonValue *item;

		if (tok == WJB_END_ARRAY || tok == WJB_END_OBJECT)
			break;
		if (tok == WJB_KEY)
		{
			key = copy_string(w, jv.val.string.val, jv.val.string.len);
			key_len = jv.val.string.len;
			if (key == NULL)
				return NULL;
			continue;
		}
		if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
			item = container(w, tok, depth + 1);
		else
			item = scalar(w, &jv);	/* WJB_ELEM, WJB_VALUE */
		if (item == NULL)
			return NULL;
		if (n == cap)
		{
			size_t		ncap = cap ? cap * 2 : 16;
			size_t		size = begin == WJB_BEGIN_OBJECT ? sizeof(MlJsonMember) : sizeof(MlJsonValue *);
			void	   *grown = ml_json_arena_alloc(w->arena, ncap * size);

			if (grown == NULL)
			{
				w->give_up = true;
				return NULL;
			}
			if (begin == WJB_BEGIN_OBJECT)
			{
				if (n)
					memcpy(grown, members, n * size);
				members = grown;
			}
			else
			{
				if (n)
					memcpy(grown, items, n * size);
				items = grown;
			}
			cap = ncap;
		}
		if (begin == WJB_BEGIN_OBJECT)
		{
			members[n].key = key;
			members[n].key_len = key_len;
			members[n].value = item;
		}
		else
			items[n] = item;
		n++;
	}

	if (begin == WJB_BEGIN_OBJECT)
	{
		MlJsonError err;

		v = ml_json_new_object(w->arena, members, n, &err);
		if (v == NULL)
			w->give_up = true;
		return v;
	}
	if ((v = new_value(w, ML_JSON_ARRAY)) == NULL)
		return NULL;
	v->u.array.items = items;
	v->u.array.count = n;
	return v;
}

MlJsonValue *
ml_json_from_jsonb(MlJsonArena *arena, Jsonb *jb)
{
	Walk		w;
	JsonbValue	jv;
	JsonbIteratorToken tok;
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
	w.it = JsonbIteratorInit(&jb->root);
	tok = JsonbIteratorNext(&w.it, &jv, false);
	if (tok == WJB_BEGIN_ARRAY && jv.val.array.rawScalar)
	{
		/* a scalar document is stored as a one-element pseudo array */
		tok = JsonbIteratorNext(&w.it, &jv, false);
		root = (tok == WJB_ELEM) ? scalar(&w, &jv) : NULL;
	}
	else if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
		root = container(&w, tok, 0);
	else
		root = NULL;
	return w.give_up ? NULL : root;
}
