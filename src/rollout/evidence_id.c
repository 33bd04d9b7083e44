/*
 * evidence_id.c — the content id of an evidence record given as its fields
 * (see ml_rollout_evidence_fields_id in mlplat/rollout.h).  Pure: no
 * PostgreSQL, no I/O.
 *
 * The record's shape is fixed, so its canonical text (RFC 8785) needs no
 * tree and no sort: every key is ASCII, so byte order is the UTF-16 order
 * RFC 8785 sorts by, and the key lists are in byte order already.  Values
 * are written by the canonical writer's own number and string routines, so
 * the text is the one ml_json_canonical writes for the record's tree.
 */
#include <stdint.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/json.h"
#include "mlplat/rollout.h"

/*
 * Room for any record whose fields passed validation: six names or digests
 * of at most 253 bytes (6 × 253 + 2 escaped), two 64-digit ids, 22 numbers
 * of at most 31 bytes, 31 keys of at most 20 bytes with their punctuation:
 * under 11 kB.  Anything longer is refused, not truncated.
 */
#define TEXT_MAX 16384

typedef struct Text
{
	char s[TEXT_MAX];
	size_t len;
	bool overflow;
} Text;

static void
put(Text *t, const char *s, size_t n)
{
	if (t->overflow || TEXT_MAX - t->len < n)
	{
		t->overflow = true;
		return;
	}
	memcpy(t->s + t->len, s, n);
	t->len += n;
}

/* a scalar value; false for arrays and objects */
static bool
put_value(Text *t, const MlJsonValue *v)
{
	char num[32];
	size_t n;

	switch (v->type)
	{
		case ML_JSON_NULL:
			put(t, "null", 4);
			return true;
		case ML_JSON_BOOL:
			if (v->u.boolean)
				put(t, "true", 4);
			else
				put(t, "false", 5);
			return true;
		case ML_JSON_NUMBER:
			if ((n = ml_json_canonical_number(v, num)) == 0)
				return false;
			put(t, num, n);
			return true;
		case ML_JSON_STRING:
			if (t->overflow || TEXT_MAX - t->len < 2 ||
				(TEXT_MAX - t->len - 2) / 6 < v->u.string.len)
			{
				t->overflow = true;
				return true;
			}
			t->len += ml_json_canonical_string(v->u.string.str, v->u.string.len,
											   t->s + t->len);
			return true;
		case ML_JSON_ARRAY:
		case ML_JSON_OBJECT:
			break;
	}
	return false;
}

/*
 * The text is a fixed template with a hole per field: the literal before
 * each field (keys, braces, commas) is built once per process from the key
 * lists, in the order the fields appear.
 */
#define NHOLES (ML_EV_NFIELDS - 4) /* neither content_id nor the three objects */

typedef struct Hole
{
	int field;
	uint8_t len;
	char before[48]; /* the longest: ,"previous":{"desired_replicas": (32) */
} Hole;

static Hole holes[NHOLES];
static char closing[4]; /* "}" */
static size_t closing_len;
static bool layout_ready = false;

typedef struct Layout
{
	int n;
	char pending[48];
	size_t len;
} Layout;

static void
lay(Layout *l, const char *s)
{
	size_t n = strlen(s);

	memcpy(l->pending + l->len, s, n);
	l->len += n;
}

static void
lay_key(Layout *l, const char *key, bool first)
{
	if (!first)
		lay(l, ",");
	lay(l, "\"");
	lay(l, key);
	lay(l, "\":");
}

static void
lay_field(Layout *l, int field)
{
	Hole *h = &holes[l->n++];

	h->field = field;
	h->len = (uint8_t) l->len;
	memcpy(h->before, l->pending, l->len);
	l->len = 0;
}

static void
lay_object(Layout *l, int first, const char *const *keys)
{
	lay(l, "{");
	for (int i = 0; keys[i] != NULL; i++)
	{
		lay_key(l, keys[i], i == 0);
		lay_field(l, first + i);
	}
	lay(l, "}");
}

static void
prepare_layout(void)
{
	Layout l;
	bool first = true;

	l.n = 0;
	l.len = 0;
	lay(&l, "{");
	for (int i = 0; ml_rollout_evidence_keys[i] != NULL; i++)
	{
		if (i == ML_EV_CONTENT_ID)
			continue; /* the id is of the record without it */
		lay_key(&l, ml_rollout_evidence_keys[i], first);
		first = false;
		if (i == ML_EV_SCOPE)
			lay_object(&l, ML_EV_SCOPE_FIRST, ml_rollout_scope_keys);
		else if (i == ML_EV_TARGET)
			lay_object(&l, ML_EV_TARGET_FIRST, ml_rollout_revision_keys);
		else if (i == ML_EV_PREVIOUS)
			lay_object(&l, ML_EV_PREVIOUS_FIRST, ml_rollout_revision_keys);
		else
			lay_field(&l, i);
	}
	lay(&l, "}");
	memcpy(closing, l.pending, l.len);
	closing_len = l.len;
	layout_ready = true;
}

bool
ml_rollout_evidence_fields_id(const MlJsonValue *const f[ML_EV_NFIELDS],
							  const MlSha256Prefix *prefix, char out[ML_CONTENT_ID_LEN + 1])
{
	Text t;

	if (!layout_ready)
		prepare_layout();
	t.len = 0;
	t.overflow = false;
	for (int i = 0; i < NHOLES; i++)
	{
		/*
		 * The literal is copied whole (a constant size the compiler turns into
		 * a few vector moves) and the length then advanced by its real size:
		 * a memcpy of a variable length this short cost more than the rest of
		 * the text together.  Bytes past the literal are overwritten next.
		 */
		if (t.overflow || TEXT_MAX - t.len < sizeof(holes[i].before))
		{
			t.overflow = true;
			break;
		}
		memcpy(t.s + t.len, holes[i].before, sizeof(holes[i].before));
		t.len += holes[i].len;
		if (!put_value(&t, f[holes[i].field]))
			return false;
	}
	put(&t, closing, closing_len);
	return !t.overflow && ml_sha256_hex_prefixed(prefix, t.s, t.len, out);
}
