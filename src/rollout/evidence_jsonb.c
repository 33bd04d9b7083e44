/*
 * evidence_jsonb.c — an evidence record's fields from its jsonb (see
 * mlplat/rollout_jsonb.h).
 *
 * Why a record taken here reads exactly as its tree does (src/json/jsonb.c
 * builds the tree the text route would): the shape matches the key lists
 * exactly, so the tree's parts pass the key checks and its lookups find the
 * same members; strings are jsonb's decoded text, which the tree copies
 * byte for byte; numbers are printed as the tree's walk prints them
 * (ml_numeric_text, or decline where it would ask numeric_out) and read by
 * the parser's own number rule (ml_json_number_view).  Any number that is
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
 * The keys of each part in jsonb's storage order (shorter first, then
 * bytewise: lengthCompareJsonbStringValue), as indexes into the part's key
 * list in byte order; computed once per process from those lists.
 */
typedef struct PartOrder
{
	const char *const *keys; /* byte order, NULL-terminated */
	int n;
	int index[MAX_KEYS];  /* storage position -> key list index */
	uint32 len[MAX_KEYS]; /* strlen of keys[index[k]] */
} PartOrder;

static PartOrder orders[NPARTS];
static bool orders_ready = false;

static bool
stored_before(const char *a, const char *b)
{
	size_t la = strlen(a),
		   lb = strlen(b);

	return la != lb ? la < lb : strcmp(a, b) < 0;
}

static void
prepare_orders(void)
{
	const char *const *lists[NPARTS] = {
		ml_rollout_evidence_keys, ml_rollout_scope_keys, ml_rollout_revision_keys
	};

	for (int p = 0; p < NPARTS; p++)
	{
		PartOrder *o = &orders[p];

		o->keys = lists[p];
		for (o->n = 0; o->keys[o->n] != NULL; o->n++)
		{
			/* insertion sort: ten keys at most */
			int k = o->n;

			Assert(o->n < MAX_KEYS);
			while (k > 0 && stored_before(o->keys[o->n], o->keys[o->index[k - 1]]))
			{
				o->index[k] = o->index[k - 1];
				k--;
			}
			o->index[k] = o->n;
		}
		for (int k = 0; k < o->n; k++)
			o->len[k] = strlen(o->keys[o->index[k]]);
	}
	orders_ready = true;
}

/*
 * Most evidence numbers are counts and epoch seconds: non-negative integers
 * stored in numeric's short format without a display scale.  For those below
 * 10^12 the text is their digit groups (what ml_numeric_text writes) and the
 * double is exact, so both are made here directly instead of printing the
 * numeric and parsing the text back (ml_json_number_view would set the same
 * members: is_integer, as the text has neither '.' nor exponent).  Anything
 * else returns false and takes that general route.
 */
static bool
small_integer(Numeric num, char text[ML_NUMERIC_TEXT_MAX], MlJsonValue *v)
{
	const char *p = (const char *) num;
	uint16 header;
	int weight;
	int ndigits;
	const int16 *digits;
	uint64 value = 0;
	uint64 whole;
	char tmp[24];
	int k = 0;

	if (VARATT_IS_SHORT(p) || VARATT_IS_EXTENDED(p))
		return false;
	memcpy(&header, p + VARHDRSZ, sizeof(header));
	/* short format, positive, display scale 0, weight 0..2 (< 10^12) */
	if ((header & 0xE000) != 0x8000 || (header & 0x1F80) != 0 || (header & 0x0040) != 0)
		return false;
	weight = header & 0x003F;
	if (weight > 2)
		return false;
	ndigits = (VARSIZE(p) - VARHDRSZ - sizeof(uint16)) / sizeof(int16);
	if (ndigits > weight + 1)
		return false; /* fraction groups: not an integer */
	digits = (const int16 *) (p + VARHDRSZ + sizeof(uint16));
	if (weight > 0 && (ndigits == 0 || digits[0] == 0))
		return false; /* unnormalized: the general route decides */
	for (int d = 0; d <= weight; d++)
	{
		int dig = d < ndigits ? digits[d] : 0;

		if (dig < 0 || dig >= 10000)
			return false;
		value = value * 10000 + (uint64) dig;
	}
	whole = value;
	do
	{
		tmp[k++] = (char) ('0' + value % 10);
		value /= 10;
	} while (value > 0);
	for (int i = 0; i < k; i++)
		text[i] = tmp[k - 1 - i];
	text[k] = '\0';
	memset(v, 0, sizeof(*v));
	v->type = ML_JSON_NUMBER;
	v->u.number.text = text;
	v->u.number.text_len = (size_t) k;
	v->u.number.is_integer = true;
	v->u.number.value = (double) whole; /* exact: below 2^53 */
	return true;
}

/* one scalar field from its JEntry and data; false: decline */
static bool
leaf(MlRolloutEvidenceFields *out, int slot, JEntry e, const char *base, uint32 off,
	 uint32 len)
{
	MlJsonValue *v = &out->values[slot];

	out->fields[slot] = v;
	if (JBE_ISNULL(e))
	{
		v->type = ML_JSON_NULL;
		return true;
	}
	if (JBE_ISBOOL(e))
	{
		v->type = ML_JSON_BOOL;
		v->u.boolean = JBE_ISBOOL_TRUE(e);
		return true;
	}
	if (JBE_ISSTRING(e))
	{
		v->type = ML_JSON_STRING;
		v->u.string.str = base + off;
		v->u.string.len = len;
		return true;
	}
	if (JBE_ISNUMERIC(e))
	{
		Numeric num = (Numeric) (base + INTALIGN(off));
		int n;

		if (small_integer(num, out->numbers[slot], v))
			return true;
		n = ml_numeric_text(num, out->numbers[slot]);
		return n > 0 && ml_json_number_view(out->numbers[slot], n, v);
	}
	return false; /* a container where a field belongs */
}

/*
 * An object of part `part` whose fields go to out->fields[first + i]; the
 * root's three objects are read recursively into their own slots.
 */
static bool
object(MlRolloutEvidenceFields *out, const JsonbContainer *jc, int part, int first)
{
	const PartOrder *o = &orders[part];
	uint32 n;
	const char *base;
	uint32 off = 0;

	if (!JsonContainerIsObject(jc) || (n = JsonContainerSize(jc)) != (uint32) o->n)
		return false;
	/* children: n keys, then their n values; data in the same order */
	base = (const char *) &jc->children[2 * n];
	for (uint32 k = 0; k < n; k++)
	{
		uint32 start = off;

		JBE_ADVANCE_OFFSET(off, jc->children[k]);
		if (off - start != o->len[k] ||
			memcmp(base + start, o->keys[o->index[k]], o->len[k]) != 0)
			return false;
	}
	for (uint32 k = 0; k < n; k++)
	{
		JEntry e = jc->children[n + k];
		uint32 start = off;
		int slot = first + o->index[k];

		JBE_ADVANCE_OFFSET(off, e);
		if (part == PART_ROOT &&
			(slot == ML_EV_SCOPE || slot == ML_EV_TARGET || slot == ML_EV_PREVIOUS))
		{
			const JsonbContainer *child = (const JsonbContainer *) (base + INTALIGN(start));

			out->fields[slot] = NULL;
			if (!JBE_ISCONTAINER(e) ||
				!object(out, child, slot == ML_EV_SCOPE ? PART_SCOPE : PART_REVISION,
						slot == ML_EV_SCOPE	   ? ML_EV_SCOPE_FIRST
						: slot == ML_EV_TARGET ? ML_EV_TARGET_FIRST
											   : ML_EV_PREVIOUS_FIRST))
				return false;
		}
		else if (!leaf(out, slot, e, base, start, off - start))
			return false;
	}
	return true;
}

bool
ml_rollout_evidence_from_jsonb(Jsonb *jb, MlRolloutEvidenceFields *out)
{
	/* as ml_json_from_jsonb: only where its tree is sure to be the text route's */
	if (GetDatabaseEncoding() != PG_UTF8 || VARSIZE(jb) > ML_JSON_DEFAULT_MAX_BYTES / 8 ||
		JB_ROOT_IS_SCALAR(jb))
		return false;
	if (!orders_ready)
		prepare_orders();
	return object(out, &jb->root, PART_ROOT, 0);
}
