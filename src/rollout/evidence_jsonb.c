/*
 * evidence_jsonb.c — an evidence record's fields from its jsonb (see
 * mlplat/rollout_jsonb.h).
 *
 * Only PostgreSQL's public jsonb API is used: each object is walked once
 * with JsonbIteratorInit/Next (which point at strings in place), its member
 * count read with JsonContainerSize, numbers printed by ml_numeric_text
 * (numeric_out's text through public functions).  Nothing here reads
 * jsonb's JEntry layout or numeric's header bits.
 *
 * Why a record taken here reads exactly as its tree does (src/json/jsonb.c
 * builds the tree the text route would): an object with exactly as many
 * members as the part's key list, each a different key of that list, has
 * exactly those keys, so the tree's parts pass the key checks and its
 * lookups find the same members; strings are jsonb's decoded text, which the tree copies
 * byte for byte; numbers are numeric_out's text, as the tree's walk prints
 * them, read by the parser's own number rule (ml_json_number_view, or, for
 * a plain digit string, the exact value it would give).  Any number that is
 * not a finite double makes the tree route fail or fall back to text: we
 * decline before that matters.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/jsonb.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/rollout.h"
#include "mlplat/rollout_jsonb.h"

/* the parts of an evidence record */
enum
{
	PART_ROOT,
	PART_SCOPE,
	PART_REVISION,
	NPARTS
};

#define MAX_KEYS 10

/*
 * Each part's keys and their lengths, computed once per process, with the
 * order jsonb stores them in (shorter first, then bytewise) as a first guess
 * for each member the iterator returns: any order is accepted, the guess
 * only spares a search.
 */
typedef struct PartKeys
{
	const char *const *keys; /* NULL-terminated */
	int n;
	int len[MAX_KEYS];
	int guess[MAX_KEYS]; /* member position -> likely key index */
} PartKeys;

static PartKeys parts[NPARTS];
static bool parts_ready = false;

static bool
sorts_before(const PartKeys *k, int a, int b)
{
	return k->len[a] != k->len[b] ? k->len[a] < k->len[b]
								  : strcmp(k->keys[a], k->keys[b]) < 0;
}

static void
prepare_parts(void)
{
	const char *const *lists[NPARTS] = {
		ml_rollout_evidence_keys, ml_rollout_scope_keys, ml_rollout_revision_keys
	};

	for (int p = 0; p < NPARTS; p++)
	{
		PartKeys *k = &parts[p];

		k->keys = lists[p];
		for (k->n = 0; k->keys[k->n] != NULL; k->n++)
		{
			/* insertion sort: ten keys at most */
			int i = k->n;

			Assert(k->n < MAX_KEYS);
			k->len[k->n] = (int) strlen(k->keys[k->n]);
			Assert(k->len[k->n] <= 24); /* same_key's limit */
			while (i > 0 && sorts_before(k, k->n, k->guess[i - 1]))
			{
				k->guess[i] = k->guess[i - 1];
				i--;
			}
			k->guess[i] = k->n;
		}
	}
	parts_ready = true;
}

/*
 * key == s[0..len) for a key of len bytes (at most 24): compared a word at a
 * time, with overlapping loads that stay inside both strings, not by a call
 * to memcmp (a library call per member was 4 % of a plan's time, a byte loop
 * 3 %).
 */
static inline bool
same_key(const char *key, const char *s, int len)
{
	uint64 a,
		b,
		c,
		d;
	uint32 x,
		y;

	Assert(len <= 24);
	if (len >= 8)
	{
		int mid = len > 16 ? 8 : 0;

		memcpy(&a, key, 8);
		memcpy(&b, s, 8);
		memcpy(&c, key + len - 8, 8);
		memcpy(&d, s + len - 8, 8);
		if (a != b || c != d)
			return false;
		memcpy(&a, key + mid, 8);
		memcpy(&b, s + mid, 8);
		return a == b;
	}
	if (len >= 4)
	{
		memcpy(&x, key, 4);
		memcpy(&y, s, 4);
		if (x != y)
			return false;
		memcpy(&x, key + len - 4, 4);
		memcpy(&y, s + len - 4, 4);
		return x == y;
	}
	for (int i = 0; i < len; i++)
		if (key[i] != s[i])
			return false;
	return true;
}

/* the index of key s[0..len) in the part's key list, or -1 */
static int
key_index(const PartKeys *k, int pos, const char *s, int len)
{
	int g = k->guess[pos];

	if (k->len[g] == len && same_key(k->keys[g], s, len))
		return g;
	for (int i = 0; i < k->n; i++)
		if (k->len[i] == len && same_key(k->keys[i], s, len))
			return i;
	return -1;
}

/*
 * Most evidence numbers are counts and epoch seconds: numeric_out prints
 * them as plain digit strings.  For those of at most 12 digits (below
 * 10^12) the double is exact and made here, without the parser's scan and
 * strtod; ml_json_number_view would set the same members (is_integer, as
 * the text has neither '.' nor exponent).  Anything else takes that route.
 */
static bool
small_integer(const char *text, int len, MlJsonValue *v)
{
	uint64 value = 0;

	if (len < 1 || len > 12 || (len > 1 && text[0] == '0'))
		return false;
	for (int i = 0; i < len; i++)
	{
		if (text[i] < '0' || text[i] > '9')
			return false;
		value = value * 10 + (uint64) (text[i] - '0');
	}
	memset(v, 0, sizeof(*v));
	v->type = ML_JSON_NUMBER;
	v->u.number.text = text;
	v->u.number.text_len = (size_t) len;
	v->u.number.is_integer = true;
	v->u.number.value = (double) value; /* exact: below 2^53 */
	return true;
}

/*
 * The last number read into each field, keyed by its numeric's bytes: a
 * batch of records repeats most of their numbers field by field (replica
 * counts, window times), and a value found here skips the numeric's text and
 * its reading.  Equal bytes are an equal numeric, so the text and the value
 * are the ones ml_numeric_text and the number rule would give again.  Per
 * process, a few kilobytes, never invalidated.
 *
 * The field's text is the memo's own (a record reads each field once, so it
 * stays put until the next record is read): a hit copies nothing but the
 * value's members.  Copying the 64-byte text and the 40-byte value whole was
 * two `rep movs` per number, a third of this file's samples.
 */
#define MEMO_KEY 24

typedef struct NumberMemo
{
	uint64 key[MEMO_KEY / 8]; /* the numeric's bytes, zero-padded */
	uint32 key_len;			  /* 0: empty */
	bool is_integer;
	int text_len;
	double value;
	char text[ML_NUMERIC_TEXT_MAX];
} NumberMemo;

static NumberMemo memo[ML_EV_NFIELDS];

static inline void
memo_value(MlJsonValue *v, const NumberMemo *m)
{
	v->type = ML_JSON_NUMBER;
	v->u.number.text = m->text;
	v->u.number.text_len = (size_t) m->text_len;
	v->u.number.value = m->value;
	v->u.number.is_integer = m->is_integer;
}

/* a number field: from the memo, or read and remembered; false: decline */
static bool
number(MlRolloutEvidenceFields *out, int slot, Numeric num)
{
	MlJsonValue *v = &out->values[slot];
	NumberMemo *m = &memo[slot];
	uint64 key[MEMO_KEY / 8] = { 0, 0, 0 };
	uint32 key_len = VARSIZE_ANY(num);
	int n;

	if (key_len <= MEMO_KEY)
	{
		memcpy(key, num, key_len);
		if (m->key_len == key_len && m->key[0] == key[0] && m->key[1] == key[1] &&
			m->key[2] == key[2])
		{
			memo_value(v, m);
			return true;
		}
	}
	/* the text is rewritten: the slot remembers nothing until it is read */
	m->key_len = 0;
	n = ml_numeric_text(num, m->text);
	if (n == 0)
		return false;
	if (!small_integer(m->text, n, v) && !ml_json_number_view(m->text, n, v))
		return false;
	m->text_len = n;
	m->value = v->u.number.value;
	m->is_integer = v->u.number.is_integer;
	if (key_len <= MEMO_KEY)
	{
		memcpy(m->key, key, sizeof(key));
		m->key_len = key_len;
	}
	return true;
}

/* one scalar field; false: decline */
static bool
leaf(MlRolloutEvidenceFields *out, int slot, const JsonbValue *jv)
{
	MlJsonValue *v = &out->values[slot];

	out->fields[slot] = v;
	switch (jv->type)
	{
		case jbvNull:
			v->type = ML_JSON_NULL;
			return true;
		case jbvBool:
			v->type = ML_JSON_BOOL;
			v->u.boolean = jv->val.boolean;
			return true;
		case jbvString:
			v->type = ML_JSON_STRING;
			v->u.string.str = jv->val.string.val;
			v->u.string.len = jv->val.string.len;
			return true;
		case jbvNumeric:
			return number(out, slot, jv->val.numeric);
		default:
			return false; /* a container where a field belongs */
	}
}

/*
 * An object of part `part` whose fields go to out->fields[first + i]; the
 * root's three objects are read recursively into their own slots.
 */
static bool
object(MlRolloutEvidenceFields *out, JsonbContainer *jc, int part, int first)
{
	const PartKeys *k = &parts[part];
	JsonbIterator *it;
	JsonbValue jv;
	JsonbIteratorToken tok;
	uint32 seen = 0;
	int pos = 0;

	if (!JsonContainerIsObject(jc) || JsonContainerSize(jc) != (uint32) k->n)
		return false;
	/* a decline leaves the iterator to the call's memory context */
	it = JsonbIteratorInit(jc);
	tok = JsonbIteratorNext(&it, &jv, true);
	Assert(tok == WJB_BEGIN_OBJECT);
	while ((tok = JsonbIteratorNext(&it, &jv, true)) == WJB_KEY)
	{
		int i = key_index(k, pos++, jv.val.string.val, jv.val.string.len);
		int slot = first + i;

		if (i < 0 || (seen & (1U << i)) != 0)
			return false; /* another key (jsonb keeps no duplicates) */
		seen |= 1U << i;
		tok = JsonbIteratorNext(&it, &jv, true);
		Assert(tok == WJB_VALUE);
		if (part == PART_ROOT &&
			(slot == ML_EV_SCOPE || slot == ML_EV_TARGET || slot == ML_EV_PREVIOUS))
		{
			out->fields[slot] = NULL;
			if (jv.type != jbvBinary ||
				!object(out, jv.val.binary.data, slot == ML_EV_SCOPE ? PART_SCOPE : PART_REVISION,
						slot == ML_EV_SCOPE	   ? ML_EV_SCOPE_FIRST
						: slot == ML_EV_TARGET ? ML_EV_TARGET_FIRST
											   : ML_EV_PREVIOUS_FIRST))
				return false;
		}
		else if (!leaf(out, slot, &jv))
			return false;
	}
	/* past WJB_END_OBJECT the iterator has freed itself */
	Assert(tok == WJB_END_OBJECT && pos == k->n);
	return true;
}

bool
ml_rollout_evidence_from_jsonb(Jsonb *jb, MlRolloutEvidenceFields *out)
{
	/* as ml_json_from_jsonb: only where its tree is sure to be the text route's */
	if (GetDatabaseEncoding() != PG_UTF8 || VARSIZE(jb) > ML_JSON_DEFAULT_MAX_BYTES / 8 ||
		JsonContainerIsScalar(&jb->root))
		return false;
	if (!parts_ready)
		prepare_parts();
	return object(out, &jb->root, PART_ROOT, 0);
}
