/*
 * diff.c — the default-aware spec diff used for drift detection.
 *
 * The comparison walks desired and looks each field up in observed.  What
 * "equal" means at a given place comes from the rule table below: it is data,
 * so adding a rule is adding a row (docs/drift.md says how and why each row
 * is there).  Generic rules that need no row: absent == null, an absent list
 * equals an empty list, an absent map equals a map whose members all equal
 * absent, numbers compare as IEEE 754 doubles (as in the canonical form).
 *
 * No PostgreSQL headers (see json.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/spec_diff.h"
#include "buf.h"

/* ---- the rule table --------------------------------------------------- */

typedef enum RuleKind
{
	RULE_DEFAULT,	/* absent in observed == arg (a JSON literal) */
	RULE_QUANTITY,	/* compare as Kubernetes quantities */
	RULE_KEYED_LIST /* list merged by the member named arg */
} RuleKind;

typedef struct DiffRule
{
	/*
	 * Matches the end of the path: segments separated by '.', "[]" for "an
	 * element of a list", "*" for any one key.  "ports[].protocol" matches
	 * spec.predictor.model.ports[containerPort=8080].protocol.
	 */
	const char *pattern;
	RuleKind kind;
	const char *arg;
} DiffRule;

/*
 * Each row is justified in docs/drift.md.  Probe defaults are those of
 * core/v1 Probe (the API reference: timeoutSeconds "Defaults to 1",
 * periodSeconds "Default to 10", successThreshold "Defaults to 1",
 * failureThreshold "Defaults to 3"; initialDelaySeconds has no server
 * default and is omitted when zero, so absent means 0).  Merge keys are the
 * patchMergeKey / listMapKey of core/v1 PodSpec and Container.
 */
static const DiffRule diff_rules[] = {
	{ "readinessProbe.initialDelaySeconds", RULE_DEFAULT, "0" },
	{ "readinessProbe.timeoutSeconds", RULE_DEFAULT, "1" },
	{ "readinessProbe.periodSeconds", RULE_DEFAULT, "10" },
	{ "readinessProbe.successThreshold", RULE_DEFAULT, "1" },
	{ "readinessProbe.failureThreshold", RULE_DEFAULT, "3" },
	{ "livenessProbe.initialDelaySeconds", RULE_DEFAULT, "0" },
	{ "livenessProbe.timeoutSeconds", RULE_DEFAULT, "1" },
	{ "livenessProbe.periodSeconds", RULE_DEFAULT, "10" },
	{ "livenessProbe.successThreshold", RULE_DEFAULT, "1" },
	{ "livenessProbe.failureThreshold", RULE_DEFAULT, "3" },
	{ "startupProbe.initialDelaySeconds", RULE_DEFAULT, "0" },
	{ "startupProbe.timeoutSeconds", RULE_DEFAULT, "1" },
	{ "startupProbe.periodSeconds", RULE_DEFAULT, "10" },
	{ "startupProbe.successThreshold", RULE_DEFAULT, "1" },
	{ "startupProbe.failureThreshold", RULE_DEFAULT, "3" },
	{ "ports[].protocol", RULE_DEFAULT, "\"TCP\"" },
	{ "env[].value", RULE_DEFAULT, "\"\"" },

	{ "resources.requests.*", RULE_QUANTITY, NULL },
	{ "resources.limits.*", RULE_QUANTITY, NULL },
	{ "spec.hard.*", RULE_QUANTITY, NULL },		   /* ResourceQuota */
	{ "limits[].default.*", RULE_QUANTITY, NULL }, /* LimitRange */
	{ "limits[].defaultRequest.*", RULE_QUANTITY, NULL },
	{ "limits[].max.*", RULE_QUANTITY, NULL },
	{ "limits[].min.*", RULE_QUANTITY, NULL },

	{ "containers", RULE_KEYED_LIST, "name" },
	{ "initContainers", RULE_KEYED_LIST, "name" },
	{ "env", RULE_KEYED_LIST, "name" },
	{ "ports", RULE_KEYED_LIST, "containerPort" },
	{ "volumeMounts", RULE_KEYED_LIST, "mountPath" },
	{ "volumes", RULE_KEYED_LIST, "name" },
	{ "imagePullSecrets", RULE_KEYED_LIST, "name" },
};

#define NUM_RULES (sizeof(diff_rules) / sizeof(diff_rules[0]))

/* ---- exact decimals (quantities) --------------------------------------- */

#define DEC_MAX_DIGITS 128

typedef struct BigDec
{
	int sign;						 /* -1, 0, +1 */
	int n;							 /* significant digits, no leading/trailing zeros */
	long exp;						 /* value = 0.digits... no: digits × 10^exp */
	unsigned char d[DEC_MAX_DIGITS]; /* digit values 0..9 */
} BigDec;

/* multiply by a small factor in place; false on overflow of the digit room */
static bool
dec_mul_small(BigDec *x, unsigned int f)
{
	unsigned int carry = 0;

	for (int i = x->n - 1; i >= 0; i--)
	{
		unsigned int v = x->d[i] * f + carry;

		x->d[i] = (unsigned char) (v % 10);
		carry = v / 10;
	}
	while (carry > 0)
	{
		if (x->n >= DEC_MAX_DIGITS)
			return false;
		memmove(x->d + 1, x->d, x->n);
		x->d[0] = (unsigned char) (carry % 10);
		carry /= 10;
		x->n++;
	}
	return true;
}

static void
dec_normalize(BigDec *x)
{
	int lead = 0;

	while (lead < x->n && x->d[lead] == 0)
		lead++;
	if (lead > 0)
	{
		memmove(x->d, x->d + lead, x->n - lead);
		x->n -= lead;
	}
	while (x->n > 0 && x->d[x->n - 1] == 0)
	{
		x->n--;
		x->exp++;
	}
	if (x->n == 0)
	{
		x->sign = 0;
		x->exp = 0;
	}
}

/*
 * Parse s[0..len) as <sign?><digits>[.<digits>][suffix].  With
 * quantity=false the suffix may only be a JSON exponent; with quantity=true
 * it is a Kubernetes quantity suffix: Ki..Ei, n u m k M G T P E, or e/E<int>.
 */
static bool
dec_parse(const char *s, size_t len, bool quantity, BigDec *x)
{
	size_t i = 0;
	bool any = false,
		 dot = false;

	memset(x, 0, sizeof(*x));
	x->sign = 1;
	if (i < len && (s[i] == '+' || s[i] == '-'))
	{
		if (!quantity && s[i] == '+')
			return false;
		x->sign = s[i] == '-' ? -1 : 1;
		i++;
	}
	for (; i < len; i++)
	{
		if (s[i] == '.')
		{
			if (dot)
				return false;
			dot = true;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			break;
		any = true;
		if (x->n == 0 && s[i] == '0')
		{
			/* leading zero: only matters for the exponent after a dot */
			if (dot)
				x->exp--;
			continue;
		}
		if (x->n >= DEC_MAX_DIGITS - 24) /* leave room for binary suffixes */
			return false;
		x->d[x->n++] = (unsigned char) (s[i] - '0');
		if (dot)
			x->exp--;
	}
	if (!any)
		return false;

	if (i < len)
	{
		const char *suf = s + i;
		size_t slen = len - i;

		if ((suf[0] == 'e' || suf[0] == 'E') && slen > 1 && suf[1] != 'i')
		{
			/* decimal exponent */
			size_t j = 1;
			int esign = 1;
			long e = 0;

			if (suf[j] == '+' || suf[j] == '-')
			{
				esign = suf[j] == '-' ? -1 : 1;
				j++;
			}
			if (j >= slen)
				return false;
			for (; j < slen; j++)
			{
				if (suf[j] < '0' || suf[j] > '9')
					return false;
				if (e > 100000000L)
					return false;
				e = e * 10 + (suf[j] - '0');
			}
			x->exp += esign * e;
		}
		else if (!quantity)
			return false;
		else if (slen == 2 && suf[1] == 'i')
		{
			static const char bin[] = "KMGTPE";
			const char *at = strchr(bin, suf[0]);
			int k;

			if (at == NULL || suf[0] == '\0')
				return false;
			for (k = (int) (at - bin) + 1; k > 0; k--)
				if (!dec_mul_small(x, 1024))
					return false;
		}
		else if (slen == 1)
		{
			switch (suf[0])
			{
				case 'n':
					x->exp -= 9;
					break;
				case 'u':
					x->exp -= 6;
					break;
				case 'm':
					x->exp -= 3;
					break;
				case 'k':
					x->exp += 3;
					break;
				case 'M':
					x->exp += 6;
					break;
				case 'G':
					x->exp += 9;
					break;
				case 'T':
					x->exp += 12;
					break;
				case 'P':
					x->exp += 15;
					break;
				case 'E':
					x->exp += 18;
					break;
				default:
					return false;
			}
		}
		else
			return false;
	}
	dec_normalize(x);
	return true;
}

static bool
dec_equal(const BigDec *a, const BigDec *b)
{
	return a->sign == b->sign && a->n == b->n && a->exp == b->exp &&
		   memcmp(a->d, b->d, a->n) == 0;
}

/*
 * Numbers are IEEE 754 doubles, as in the canonical form (RFC 8785 / I-JSON):
 * two documents with the same content id never drift.  So 1 == 1.0 == 1e0,
 * and integers beyond 2^53 that round to the same double are equal.
 */
bool
ml_json_number_equal(const MlJsonValue *a, const MlJsonValue *b)
{
	if (a->type != ML_JSON_NUMBER || b->type != ML_JSON_NUMBER)
		return false;
	return a->u.number.value == b->u.number.value;
}

static bool
quantity_of(const MlJsonValue *v, BigDec *x)
{
	if (v->type == ML_JSON_STRING)
		return strlen(v->u.string.str) == v->u.string.len &&
			   dec_parse(v->u.string.str, v->u.string.len, true, x);
	if (v->type == ML_JSON_NUMBER)
		return dec_parse(v->u.number.text, v->u.number.text_len, false, x);
	return false;
}

/*
 * Two JSON numbers compare as numbers (doubles, see above); otherwise exact
 * decimal values, so "1Ei" and "1152921504606846976" are equal to the unit.
 */
bool
ml_quantity_equal(const MlJsonValue *a, const MlJsonValue *b, bool *ok)
{
	BigDec x,
		y;

	*ok = quantity_of(a, &x) && quantity_of(b, &y);
	if (*ok && a->type == ML_JSON_NUMBER && b->type == ML_JSON_NUMBER)
		return ml_json_number_equal(a, b);
	return *ok && dec_equal(&x, &y);
}

/* ---- the walk --------------------------------------------------------- */

typedef struct Seg
{
	const char *s; /* a key, or "[]" for a list element */
	size_t len;
} Seg;

typedef struct Differ
{
	MlJsonArena *arena;
	MlJsonError *err;
	bool oom;
	MlJsonBuf path; /* printable path, grown and truncated */
	Seg *segs;		/* the same path as segments, for rules */
	size_t nsegs,
		segcap;
	MlSpecDiffEntry *entries;
	size_t count,
		cap;
	size_t path_bytes; /* total of all reported paths */
	bool too_large;
	const MlJsonValue *defaults[NUM_RULES]; /* parsed RULE_DEFAULT literals */
} Differ;

static bool
seg_push(Differ *d, const char *s, size_t len)
{
	if (d->nsegs == d->segcap)
	{
		size_t ncap = d->segcap ? d->segcap * 2 : 64;
		Seg *n = ml_json_arena_alloc(d->arena, ncap * sizeof(Seg));

		if (n == NULL)
		{
			d->oom = true;
			return false;
		}
		if (d->nsegs)
			memcpy(n, d->segs, d->nsegs * sizeof(Seg));
		d->segs = n;
		d->segcap = ncap;
	}
	d->segs[d->nsegs].s = s;
	d->segs[d->nsegs].len = len;
	d->nsegs++;
	return true;
}

/* does rule pattern match the tail of the current segments? */
static bool
rule_matches(const Differ *d, const char *pattern)
{
	const char *end = pattern + strlen(pattern);
	size_t k = d->nsegs;

	/* walk the pattern backwards, segment by segment */
	while (end > pattern)
	{
		const char *seg_start;
		size_t seg_len;

		if (k == 0)
			return false;
		if (end - pattern >= 2 && end[-1] == ']' && end[-2] == '[')
		{
			seg_start = end - 2;
			seg_len = 2;
		}
		else
		{
			seg_start = end;
			while (seg_start > pattern && seg_start[-1] != '.' && seg_start[-1] != ']')
				seg_start--;
			seg_len = end - seg_start;
		}
		k--;
		if (!(seg_len == 1 && seg_start[0] == '*' && !(d->segs[k].len == 2 && memcmp(d->segs[k].s, "[]", 2) == 0)))
		{
			if (seg_len != d->segs[k].len || memcmp(seg_start, d->segs[k].s, seg_len) != 0)
				return false;
		}
		end = seg_start;
		if (end > pattern && end[-1] == '.')
			end--;
	}
	return true;
}

/* first rule of this kind matching the current path, or -1 */
static int
find_rule(const Differ *d, RuleKind kind, int after)
{
	for (size_t i = (size_t) (after + 1); i < NUM_RULES; i++)
		if (diff_rules[i].kind == kind && rule_matches(d, diff_rules[i].pattern))
			return (int) i;
	return -1;
}

static bool
is_simple_key(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void
path_append_key(Differ *d, const char *key, size_t len)
{
	if (is_simple_key(key, len))
	{
		if (d->path.len > 0)
			ml_buf_putc(&d->path, '.');
		ml_buf_append(&d->path, key, len);
	}
	else
	{
		ml_buf_putc(&d->path, '[');
		ml_buf_json_string(&d->path, key, len);
		ml_buf_putc(&d->path, ']');
	}
}

static void
path_truncate(Differ *d, size_t len)
{
	d->path.len = len;
	if (d->path.data)
		d->path.data[len] = '\0';
}

static void
report(Differ *d, const MlJsonValue *desired, const MlJsonValue *observed)
{
	char *p;

	if (d->count == d->cap)
	{
		size_t ncap = d->cap ? d->cap * 2 : 16;
		MlSpecDiffEntry *n = ml_json_arena_alloc(d->arena, ncap * sizeof(MlSpecDiffEntry));

		if (n == NULL)
		{
			d->oom = true;
			return;
		}
		if (d->count)
			memcpy(n, d->entries, d->count * sizeof(MlSpecDiffEntry));
		d->entries = n;
		d->cap = ncap;
	}
	/*
	 * Each entry copies its path, so a long key above many differences could
	 * cost far more than the input; refuse rather than exhaust memory.
	 */
	d->path_bytes += d->path.len + 1;
	if (d->path_bytes > ML_SPEC_DIFF_MAX_PATH_BYTES)
	{
		d->too_large = true;
		return;
	}
	p = ml_json_arena_alloc(d->arena, d->path.len + 1);
	if (p == NULL || d->path.oom)
	{
		d->oom = true;
		return;
	}
	if (d->path.len)
		memcpy(p, d->path.data, d->path.len);
	p[d->path.len] = '\0';
	d->entries[d->count].path = p;
	d->entries[d->count].desired = desired;
	d->entries[d->count].observed = observed;
	d->count++;
}

static bool
is_absent(const MlJsonValue *v)
{
	return v == NULL || v->type == ML_JSON_NULL;
}

/* scalar equality (no rules): same type and value */
static bool
scalar_equal(const MlJsonValue *a, const MlJsonValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case ML_JSON_NULL:
			return true;
		case ML_JSON_BOOL:
			return a->u.boolean == b->u.boolean;
		case ML_JSON_NUMBER:
			return ml_json_number_equal(a, b);
		case ML_JSON_STRING:
			return a->u.string.len == b->u.string.len &&
				   memcmp(a->u.string.str, b->u.string.str, a->u.string.len) == 0;
		default:
			return false;
	}
}

static const MlJsonValue *
rule_default(Differ *d, int r)
{
	if (d->defaults[r] == NULL)
	{
		MlJsonError e;

		d->defaults[r] = ml_json_parse(d->arena, diff_rules[r].arg,
									   strlen(diff_rules[r].arg), NULL, &e);
		if (d->defaults[r] == NULL)
			d->oom = true; /* the literals are ours: only OOM fails */
	}
	return d->defaults[r];
}

/* Is desired (at the current path) what an absent observed field means? */
static bool
equals_absent(Differ *d, const MlJsonValue *des)
{
	int r;

	if (is_absent(des))
		return true;
	r = find_rule(d, RULE_DEFAULT, -1);
	if (r >= 0)
	{
		const MlJsonValue *def = rule_default(d, r);

		if (def != NULL && scalar_equal(des, def))
			return true;
	}
	if (des->type == ML_JSON_ARRAY)
		return des->u.array.count == 0;
	if (des->type == ML_JSON_OBJECT)
	{
		for (size_t i = 0; i < des->u.object.count; i++)
		{
			const MlJsonMember *m = &des->u.object.members[i];
			bool eq;

			if (!seg_push(d, m->key, m->key_len))
				return false;
			eq = equals_absent(d, m->value);
			d->nsegs--;
			if (!eq)
				return false;
		}
		return true;
	}
	return false;
}

static void diff_value(Differ *d, const MlJsonValue *des, const MlJsonValue *obs);

static const MlJsonValue *
member_scalar(const MlJsonValue *elem, const char *key)
{
	const MlJsonValue *v = ml_json_object_get(elem, key);

	if (v == NULL || (v->type != ML_JSON_STRING && v->type != ML_JSON_NUMBER))
		return NULL;
	return v;
}

/*
 * Keyed lists are matched through a sorted index of (key value, element), so
 * a list of n entries costs O(n log n), not O(n^2), however large it is.
 */
typedef struct KeyedItem
{
	const MlJsonValue *key;
	const MlJsonValue *elem;
	size_t pos; /* position in the list: the first one wins */
} KeyedItem;

/* a total order on string/number keys consistent with scalar_equal */
static int
key_order(const MlJsonValue *a, const MlJsonValue *b)
{
	if (a->type != b->type)
		return a->type == ML_JSON_NUMBER ? -1 : 1;
	if (a->type == ML_JSON_NUMBER)
		return a->u.number.value < b->u.number.value ? -1 : (a->u.number.value > b->u.number.value ? 1 : 0);
	{
		size_t n = a->u.string.len < b->u.string.len ? a->u.string.len : b->u.string.len;
		int c = memcmp(a->u.string.str, b->u.string.str, n);

		if (c != 0)
			return c;
		return a->u.string.len < b->u.string.len ? -1 : (a->u.string.len > b->u.string.len ? 1 : 0);
	}
}

static int
keyed_item_cmp(const void *x, const void *y)
{
	const KeyedItem *a = x;
	const KeyedItem *b = y;
	int c = key_order(a->key, b->key);

	if (c != 0)
		return c;
	return a->pos < b->pos ? -1 : (a->pos > b->pos ? 1 : 0);
}

/* index of the elements of list that carry a string/number key; *n gets the count */
static KeyedItem *
keyed_index(Differ *d, const MlJsonValue *list, const char *key, size_t *n)
{
	KeyedItem *items;

	*n = 0;
	if (list->u.array.count == 0)
		return NULL;
	items = ml_json_arena_alloc(d->arena, list->u.array.count * sizeof(KeyedItem));
	if (items == NULL)
	{
		d->oom = true;
		return NULL;
	}
	for (size_t i = 0; i < list->u.array.count; i++)
	{
		const MlJsonValue *k = member_scalar(list->u.array.items[i], key);

		if (k == NULL)
			continue;
		items[*n].key = k;
		items[*n].elem = list->u.array.items[i];
		items[*n].pos = i;
		(*n)++;
	}
	qsort(items, *n, sizeof(KeyedItem), keyed_item_cmp);
	return items;
}

/*
 * Can desired list des be matched by merge key: every element an object with
 * a string/number key, and no key twice?
 */
static bool
keyed_list_usable(Differ *d, const MlJsonValue *des, const char *key)
{
	size_t n;
	KeyedItem *idx = keyed_index(d, des, key, &n);

	if (n != des->u.array.count)
		return false;
	for (size_t i = 1; i < n; i++)
		if (key_order(idx[i - 1].key, idx[i].key) == 0)
			return false;
	return true;
}

/* first element (in list order) of a sorted index with this key, or NULL */
static const MlJsonValue *
keyed_lookup(const KeyedItem *idx, size_t n, const MlJsonValue *key)
{
	size_t lo = 0,
		   hi = n;

	while (lo < hi)
	{
		size_t mid = lo + (hi - lo) / 2;

		if (key_order(idx[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && key_order(idx[lo].key, key) == 0)
		return idx[lo].elem;
	return NULL;
}

static void
diff_keyed_list(Differ *d, const MlJsonValue *des, const MlJsonValue *obs, const char *key)
{
	size_t base = d->path.len;
	size_t nobs;
	KeyedItem *oidx = keyed_index(d, obs, key, &nobs);

	for (size_t i = 0; i < des->u.array.count && !d->oom; i++)
	{
		const MlJsonValue *elem = des->u.array.items[i];
		const MlJsonValue *kv = member_scalar(elem, key);
		const MlJsonValue *match = keyed_lookup(oidx, nobs, kv);

		/* path: env[name=TOKEN], or env[name="odd key"] */
		ml_buf_putc(&d->path, '[');
		ml_buf_puts(&d->path, key);
		ml_buf_putc(&d->path, '=');
		if (kv->type == ML_JSON_NUMBER)
			ml_buf_append(&d->path, kv->u.number.text, kv->u.number.text_len);
		else if (is_simple_key(kv->u.string.str, kv->u.string.len))
			ml_buf_append(&d->path, kv->u.string.str, kv->u.string.len);
		else
			ml_buf_json_string(&d->path, kv->u.string.str, kv->u.string.len);
		ml_buf_putc(&d->path, ']');

		if (seg_push(d, "[]", 2))
		{
			if (match == NULL)
				report(d, elem, NULL); /* a whole entry we own is gone */
			else
				diff_value(d, elem, match);
			d->nsegs--;
		}
		path_truncate(d, base);
	}
}

static void
diff_value(Differ *d, const MlJsonValue *des, const MlJsonValue *obs)
{
	int r;

	if (d->oom || d->too_large)
		return;
	if (is_absent(obs))
	{
		if (!equals_absent(d, des))
			report(d, des, NULL);
		return;
	}
	if (des->type == ML_JSON_NULL)
	{
		/* desired says "no value"; observed has one */
		report(d, des, obs);
		return;
	}

	r = find_rule(d, RULE_QUANTITY, -1);
	if (r >= 0)
	{
		bool ok;
		bool eq = ml_quantity_equal(des, obs, &ok);

		if (ok)
		{
			if (!eq)
				report(d, des, obs);
			return;
		}
		/* not quantities after all: compare as plain JSON below */
	}

	switch (des->type)
	{
		case ML_JSON_OBJECT:
		{
			size_t base = d->path.len;

			if (obs->type != ML_JSON_OBJECT)
			{
				report(d, des, obs);
				return;
			}
			for (size_t i = 0; i < des->u.object.count && !d->oom; i++)
			{
				const MlJsonMember *m = &des->u.object.members[i];

				if (!seg_push(d, m->key, m->key_len))
					return;
				path_append_key(d, m->key, m->key_len);
				diff_value(d, m->value, ml_json_object_get_n(obs, m->key, m->key_len));
				path_truncate(d, base);
				d->nsegs--;
			}
			return;
		}
		case ML_JSON_ARRAY:
		{
			size_t base = d->path.len;

			if (obs->type != ML_JSON_ARRAY)
			{
				report(d, des, obs);
				return;
			}
			for (r = find_rule(d, RULE_KEYED_LIST, -1); r >= 0;
				 r = find_rule(d, RULE_KEYED_LIST, r))
			{
				if (keyed_list_usable(d, des, diff_rules[r].arg))
				{
					diff_keyed_list(d, des, obs, diff_rules[r].arg);
					return;
				}
			}
			/* an atomic list: same length, element by element */
			if (des->u.array.count != obs->u.array.count)
			{
				report(d, des, obs);
				return;
			}
			for (size_t i = 0; i < des->u.array.count && !d->oom; i++)
			{
				char idx[32];
				int n = snprintf(idx, sizeof(idx), "[%zu]", i);

				if (!seg_push(d, "[]", 2))
					return;
				ml_buf_append(&d->path, idx, (size_t) n);
				diff_value(d, des->u.array.items[i], obs->u.array.items[i]);
				path_truncate(d, base);
				d->nsegs--;
			}
			return;
		}
		default:
			if (!scalar_equal(des, obs))
				report(d, des, obs);
			return;
	}
}

static int
entry_cmp(const void *x, const void *y)
{
	const MlSpecDiffEntry *a = x;
	const MlSpecDiffEntry *b = y;

	return strcmp(a->path, b->path);
}

bool
ml_spec_diff(MlJsonArena *arena, const MlJsonValue *desired, const MlJsonValue *observed,
			 MlSpecDiff *out, MlJsonError *err)
{
	Differ d;

	memset(&d, 0, sizeof(d));
	d.arena = arena;
	d.err = err;
	ml_buf_init(&d.path, arena);
	out->entries = NULL;
	out->count = 0;

	diff_value(&d, desired, observed);
	if (d.too_large)
	{
		ml_json_set_error(err, ML_JSON_ERR_LIMIT, 0,
						  "the differences' paths exceed the size limit");
		return false;
	}
	if (d.oom || d.path.oom)
	{
		ml_json_set_error(err, ML_JSON_ERR_NOMEM, 0, "out of memory comparing specs");
		return false;
	}
	if (d.count > 1)
		qsort(d.entries, d.count, sizeof(MlSpecDiffEntry), entry_cmp);
	out->entries = d.entries;
	out->count = d.count;
	return true;
}

char *
ml_spec_diff_to_json(MlJsonArena *arena, const MlSpecDiff *diff, size_t *len_out,
					 MlJsonError *err)
{
	MlJsonBuf b;

	ml_buf_init(&b, arena);
	ml_buf_putc(&b, '[');
	for (size_t i = 0; i < diff->count; i++)
	{
		const MlSpecDiffEntry *e = &diff->entries[i];

		if (i > 0)
			ml_buf_putc(&b, ',');
		ml_buf_puts(&b, "{\"path\":");
		ml_buf_json_string(&b, e->path, strlen(e->path));
		ml_buf_puts(&b, ",\"desired\":");
		if (!ml_buf_canonical(&b, e->desired, err))
			return NULL;
		if (e->observed != NULL)
		{
			ml_buf_puts(&b, ",\"observed\":");
			if (!ml_buf_canonical(&b, e->observed, err))
				return NULL;
		}
		ml_buf_putc(&b, '}');
	}
	ml_buf_putc(&b, ']');
	if (b.oom)
	{
		ml_json_set_error(err, ML_JSON_ERR_NOMEM, 0, "out of memory writing the diff");
		return NULL;
	}
	if (len_out)
		*len_out = b.len;
	return b.data;
}
