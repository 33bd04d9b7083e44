/*
 * json.c — arena allocator and a strict recursive-descent JSON parser.
 *
 * No PostgreSQL headers: this file is linked alone into fuzzers and the
 * plain-C unit test.  See include/mlplat/json.h for the contract.
 *
 * Arrays and objects collect their children on two scratch stacks owned by
 * the parser and copy them into exact-size arena arrays when they close, so
 * the tree costs little more than its contents.  Recursion depth is bounded
 * by the depth limit, which the caller controls.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/json.h"

/* ---- arena ------------------------------------------------------------ */

#define ARENA_BLOCK_SIZE (32 * 1024)
#define ARENA_ALIGN 16

typedef struct ArenaBlock
{
	struct ArenaBlock *next;
	size_t size; /* usable bytes after the header */
	size_t used;
} ArenaBlock;

#define BLOCK_HEADER ((sizeof(ArenaBlock) + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1))

struct MlJsonArena
{
	MlJsonAllocFn alloc;
	MlJsonFreeFn free_fn;
	void *ctx;
	ArenaBlock *head;
};

static void *
malloc_alloc(void *ctx, size_t size)
{
	return malloc(size);
}

static void
malloc_free(void *ctx, void *ptr)
{
	free(ptr);
}

MlJsonArena *
ml_json_arena_new(void)
{
	return ml_json_arena_new_with(malloc_alloc, malloc_free, NULL);
}

MlJsonArena *
ml_json_arena_new_with(MlJsonAllocFn alloc, MlJsonFreeFn free_fn, void *ctx)
{
	MlJsonArena *a = alloc(ctx, sizeof(MlJsonArena));

	if (a == NULL)
		return NULL;
	a->alloc = alloc;
	a->free_fn = free_fn;
	a->ctx = ctx;
	a->head = NULL;
	return a;
}

void
ml_json_arena_free(MlJsonArena *arena)
{
	ArenaBlock *b;

	if (arena == NULL)
		return;
	b = arena->head;
	while (b != NULL)
	{
		ArenaBlock *next = b->next;

		if (arena->free_fn)
			arena->free_fn(arena->ctx, b);
		b = next;
	}
	if (arena->free_fn)
		arena->free_fn(arena->ctx, arena);
}

void *
ml_json_arena_alloc(MlJsonArena *arena, size_t size)
{
	ArenaBlock *b = arena->head;
	size_t need;

	if (size > SIZE_MAX / 2)
		return NULL;
	need = (size + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1);
	if (need == 0)
		need = ARENA_ALIGN;
	if (b == NULL || b->size - b->used < need)
	{
		size_t bsize = need > ARENA_BLOCK_SIZE / 4 ? need : ARENA_BLOCK_SIZE;

		b = arena->alloc(arena->ctx, BLOCK_HEADER + bsize);
		if (b == NULL)
			return NULL;
		b->size = bsize;
		b->used = 0;
		/* a big dedicated block goes behind the current one, keeping its room */
		if (bsize != ARENA_BLOCK_SIZE && arena->head != NULL)
		{
			b->next = arena->head->next;
			arena->head->next = b;
		}
		else
		{
			b->next = arena->head;
			arena->head = b;
		}
	}
	b->used += need;
	return (char *) b + BLOCK_HEADER + b->used - need;
}

/* ---- errors ----------------------------------------------------------- */

void
ml_json_set_error(MlJsonError *err, MlJsonErrorCode code, size_t offset, const char *message)
{
	if (err == NULL)
		return;
	err->code = code;
	err->offset = offset;
	snprintf(err->message, sizeof(err->message), "%s", message);
}

const char *
ml_json_type_name(MlJsonType type)
{
	switch (type)
	{
		case ML_JSON_NULL:
			return "null";
		case ML_JSON_BOOL:
			return "boolean";
		case ML_JSON_NUMBER:
			return "number";
		case ML_JSON_STRING:
			return "string";
		case ML_JSON_ARRAY:
			return "array";
		case ML_JSON_OBJECT:
			return "object";
	}
	return "unknown";
}

/* ---- parser ----------------------------------------------------------- */

typedef struct Parser
{
	MlJsonArena *arena;
	const unsigned char *s;
	size_t len;
	size_t pos;
	size_t max_depth;
	MlJsonError *err;
	bool failed;

	/* scratch stacks for open arrays / objects */
	MlJsonValue **vstack;
	size_t vlen,
		vcap;
	MlJsonMember *mstack;
	size_t mlen,
		mcap;
} Parser;

static MlJsonValue *parse_value(Parser *p, size_t depth);

static void
fail(Parser *p, MlJsonErrorCode code, size_t offset, const char *message)
{
	if (p->failed)
		return;
	p->failed = true;
	ml_json_set_error(p->err, code, offset, message);
}

static void *
palloc_or_fail(Parser *p, size_t size)
{
	void *r = ml_json_arena_alloc(p->arena, size);

	if (r == NULL)
		fail(p, ML_JSON_ERR_NOMEM, p->pos, "out of memory while parsing JSON");
	return r;
}

static void
skip_ws(Parser *p)
{
	while (p->pos < p->len)
	{
		unsigned char c = p->s[p->pos];

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			p->pos++;
		else
			break;
	}
}

static bool
match_literal(Parser *p, const char *lit)
{
	size_t n = strlen(lit);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
	{
		fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid literal (expected null, true or false)");
		return false;
	}
	p->pos += n;
	return true;
}

static MlJsonValue *
new_value(Parser *p, MlJsonType type)
{
	MlJsonValue *v = palloc_or_fail(p, sizeof(MlJsonValue));

	if (v != NULL)
	{
		memset(v, 0, sizeof(*v));
		v->type = type;
	}
	return v;
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Powers of ten that doubles hold exactly (5^22 < 2^53). */
static const double pow10_exact[23] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

/*
 * The value of a number token (already checked against the grammar) without
 * strtod, when that is exact: digits m ≤ 2^53 and a decimal exponent within
 * ±22 make m and 10^|e| exact doubles, and one multiplication or division
 * rounds the exact value once, as strtod does (Clinger's fast path).  False
 * means "ask strtod".
 */
static bool
exact_double(const char *s, size_t n, double *out)
{
	uint64_t m = 0;
	int ndigits = 0,
		frac = 0,
		e = 0;
	bool neg = false,
		 in_frac = false;
	size_t i = 0;
	double d;

	if (s[0] == '-')
	{
		neg = true;
		i++;
	}
	for (; i < n && s[i] != 'e' && s[i] != 'E'; i++)
	{
		if (s[i] == '.')
		{
			in_frac = true;
			continue;
		}
		if (m != 0 || s[i] != '0')
			ndigits++;
		if (ndigits > 16)
			return false;
		m = m * 10 + (uint64_t) (s[i] - '0');
		if (in_frac)
			frac++;
	}
	if (i < n)
	{
		bool eneg = false;

		i++;
		if (s[i] == '+' || s[i] == '-')
			eneg = (s[i++] == '-');
		for (; i < n; i++)
		{
			if (e > 1000)
				return false;
			e = e * 10 + (s[i] - '0');
		}
		if (eneg)
			e = -e;
	}
	e -= frac;
	if (m > ((uint64_t) 1 << 53) || e < -22 || e > 22)
		return false;
	d = (double) m;
	d = e < 0 ? d / pow10_exact[-e] : d * pow10_exact[e];
	*out = neg ? -d : d;
	return true;
}

/*
 * Check the number token at p->pos against the grammar and move past it;
 * *is_integer: written without fraction or exponent.  False (and p failed)
 * when the text is no number.
 */
static bool
scan_number(Parser *p, bool *is_integer)
{
	*is_integer = true;
	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
	{
		fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid number: expected a digit");
		return false;
	}
	if (p->s[p->pos] == '0')
	{
		p->pos++;
		if (p->pos < p->len && is_digit(p->s[p->pos]))
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid number: leading zeros are not allowed");
			return false;
		}
	}
	else
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '.')
	{
		*is_integer = false;
		p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid number: expected a digit after the decimal point");
			return false;
		}
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
	{
		*is_integer = false;
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid number: expected a digit in the exponent");
			return false;
		}
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	return true;
}

/*
 * The double of a number token text[0..len) that passed scan_number; text
 * must be NUL-terminated (strtod reads up to the NUL).  False when it is not
 * a finite double.
 */
static bool
number_value(const char *text, size_t len, double *out)
{
	char *end;

	if (exact_double(text, len, out))
		return true;
	/* the grammar is a subset of what strtod accepts in the C locale */
	errno = 0;
	*out = strtod(text, &end);
	return end == text + len && !isinf(*out) && !isnan(*out);
}

static MlJsonValue *
parse_number(Parser *p)
{
	size_t start = p->pos;
	bool is_integer;
	MlJsonValue *v;
	char *text;
	double d;

	if (!scan_number(p, &is_integer))
		return NULL;
	text = palloc_or_fail(p, p->pos - start + 1);
	if (text == NULL)
		return NULL;
	memcpy(text, p->s + start, p->pos - start);
	text[p->pos - start] = '\0';

	if (!number_value(text, p->pos - start, &d))
	{
		fail(p, ML_JSON_ERR_VALUE, start, "number is out of range for an IEEE 754 double");
		return NULL;
	}

	v = new_value(p, ML_JSON_NUMBER);
	if (v == NULL)
		return NULL;
	v->u.number.text = text;
	v->u.number.text_len = p->pos - start;
	v->u.number.value = d;
	v->u.number.is_integer = is_integer;
	return v;
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* four hex digits at p->pos; -1 (and failure) otherwise */
static long
read_hex4(Parser *p)
{
	long r = 0;

	if (p->len - p->pos < 4)
	{
		fail(p, ML_JSON_ERR_SYNTAX, p->pos, "invalid \\u escape: expected four hex digits");
		return -1;
	}
	for (int i = 0; i < 4; i++)
	{
		int h = hexval(p->s[p->pos + i]);

		if (h < 0)
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->pos + i, "invalid \\u escape: expected four hex digits");
			return -1;
		}
		r = r * 16 + h;
	}
	p->pos += 4;
	return r;
}

static size_t
put_utf8(char *out, unsigned long cp)
{
	if (cp < 0x80)
	{
		out[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		out[0] = (char) (0xC0 | (cp >> 6));
		out[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		out[0] = (char) (0xE0 | (cp >> 12));
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char) (0xF0 | (cp >> 18));
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

size_t
ml_utf8_clip(const char *s, size_t len, size_t max)
{
	size_t n;

	if (len <= max)
		return len;
	n = max;
	/* s[n] is the first byte left out: back up while it continues a sequence */
	while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/*
 * Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629 table 3-7),
 * or 0 when it is not well formed.
 */
static size_t
utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80,
				  hi = 0xBF;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF)
	{
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; /* no encoded surrogates */
	}
	else if (c >= 0xF0 && c <= 0xF4)
	{
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	}
	else
		return 0;
	if (n < len)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

/* A byte a string holds as it is: printable ASCII other than '"' and '\\'. */
static bool
is_plain_string_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

#define BYTES_01 UINT64_C(0x0101010101010101)
#define BYTES_80 UINT64_C(0x8080808080808080)

/*
 * How many bytes from s[0] are plain (is_plain_string_byte), at most len.
 * Eight at a time: a byte is flagged (its high bit in the mask) when it is a
 * '"' or '\\' (a zero byte after the XOR), under 0x20 (the subtraction sets
 * its high bit) or 0x80 and up.  A borrow can flag a plain byte too, but only
 * above a flagged one, so the lowest flag is the first byte that is not
 * plain: on a little-endian machine, its trailing zeros say where; elsewhere
 * the bytewise loop finds it.
 */
size_t
ml_json_plain_run(const char *s, size_t len)
{
	size_t i = 0;

	for (; len - i >= 8; i += 8)
	{
		uint64_t x;
		uint64_t q;
		uint64_t b;
		uint64_t flags;

		memcpy(&x, s + i, 8);
		q = x ^ (BYTES_01 * '"');
		b = x ^ (BYTES_01 * '\\');
		flags = (((q - BYTES_01) & ~q) | ((b - BYTES_01) & ~b) | (x - BYTES_01 * 0x20) | x) & BYTES_80;
		if (flags != 0)
		{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return i + (size_t) (__builtin_ctzll(flags) / 8);
#else
			break;
#endif
		}
	}
	while (i < len && is_plain_string_byte((unsigned char) s[i]))
		i++;
	return i;
}

/* Parse a string at p->pos (the opening quote); decoded bytes into *out. */
static bool
parse_string_raw(Parser *p, const char **out, size_t *out_len)
{
	size_t start = p->pos;
	size_t end;
	char *buf;
	size_t n = 0;

	/*
	 * Most strings (keys, names, versions) are plain bytes up to their closing
	 * quote: copied as they are, without the decoding loop's two passes, which
	 * were most of the deployments leader's JSON parsing (docs/benchmarks.md,
	 * cpu8).  Any other string is decoded below, from its start.
	 */
	end = start + 1 + ml_json_plain_run((const char *) p->s + start + 1, p->len - start - 1);
	if (end < p->len && p->s[end] == '"')
	{
		n = end - start - 1;
		buf = palloc_or_fail(p, n + 1);
		if (buf == NULL)
			return false;
		memcpy(buf, p->s + start + 1, n);
		buf[n] = '\0';
		p->pos = end + 1;
		*out = buf;
		*out_len = n;
		return true;
	}

	/* find the closing quote to size the buffer; decoding never grows it */
	end = start + 1;
	for (;;)
	{
		if (end >= p->len)
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->len, "unterminated string");
			return false;
		}
		if (p->s[end] == '"')
			break;
		if (p->s[end] == '\\')
			end++;
		end++;
	}
	buf = palloc_or_fail(p, end - start);
	if (buf == NULL)
		return false;

	p->pos = start + 1;
	while (p->pos < end)
	{
		unsigned char c = p->s[p->pos];

		if (c == '\\')
		{
			unsigned char e = p->s[p->pos + 1];

			p->pos += 2;
			switch (e)
			{
				case '"':
					buf[n++] = '"';
					break;
				case '\\':
					buf[n++] = '\\';
					break;
				case '/':
					buf[n++] = '/';
					break;
				case 'b':
					buf[n++] = '\b';
					break;
				case 'f':
					buf[n++] = '\f';
					break;
				case 'n':
					buf[n++] = '\n';
					break;
				case 'r':
					buf[n++] = '\r';
					break;
				case 't':
					buf[n++] = '\t';
					break;
				case 'u':
				{
					size_t esc = p->pos - 2;
					long cp = read_hex4(p);

					if (cp < 0)
						return false;
					if (cp >= 0xDC00 && cp <= 0xDFFF)
					{
						fail(p, ML_JSON_ERR_ENCODING, esc, "lone low surrogate in \\u escape");
						return false;
					}
					if (cp >= 0xD800 && cp <= 0xDBFF)
					{
						long lo;

						if (end - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
						{
							fail(p, ML_JSON_ERR_ENCODING, esc, "lone high surrogate in \\u escape");
							return false;
						}
						p->pos += 2;
						lo = read_hex4(p);
						if (lo < 0)
							return false;
						if (lo < 0xDC00 || lo > 0xDFFF)
						{
							fail(p, ML_JSON_ERR_ENCODING, esc, "lone high surrogate in \\u escape");
							return false;
						}
						cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					}
					n += put_utf8(buf + n, (unsigned long) cp);
					break;
				}
				default:
					fail(p, ML_JSON_ERR_SYNTAX, p->pos - 2, "invalid escape sequence in string");
					return false;
			}
		}
		else if (c < 0x20)
		{
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "unescaped control character in string");
			return false;
		}
		else if (c < 0x80)
		{
			buf[n++] = (char) c;
			p->pos++;
		}
		else
		{
			size_t l = utf8_seq_len(p->s + p->pos, end - p->pos);

			if (l == 0)
			{
				fail(p, ML_JSON_ERR_ENCODING, p->pos, "invalid UTF-8 in string");
				return false;
			}
			memcpy(buf + n, p->s + p->pos, l);
			n += l;
			p->pos += l;
		}
	}
	buf[n] = '\0';
	p->pos = end + 1;
	*out = buf;
	*out_len = n;
	return true;
}

static bool
vpush(Parser *p, MlJsonValue *v)
{
	if (p->vlen == p->vcap)
	{
		size_t ncap = p->vcap ? p->vcap * 2 : 64;
		MlJsonValue **n = palloc_or_fail(p, ncap * sizeof(MlJsonValue *));

		if (n == NULL)
			return false;
		if (p->vlen)
			memcpy(n, p->vstack, p->vlen * sizeof(MlJsonValue *));
		p->vstack = n;
		p->vcap = ncap;
	}
	p->vstack[p->vlen++] = v;
	return true;
}

static bool
mpush(Parser *p, const char *key, size_t key_len, MlJsonValue *v)
{
	if (p->mlen == p->mcap)
	{
		size_t ncap = p->mcap ? p->mcap * 2 : 32;
		MlJsonMember *n = palloc_or_fail(p, ncap * sizeof(MlJsonMember));

		if (n == NULL)
			return false;
		if (p->mlen)
			memcpy(n, p->mstack, p->mlen * sizeof(MlJsonMember));
		p->mstack = n;
		p->mcap = ncap;
	}
	p->mstack[p->mlen].key = key;
	p->mstack[p->mlen].key_len = key_len;
	p->mstack[p->mlen].value = v;
	p->mlen++;
	return true;
}

static MlJsonValue *
parse_array(Parser *p, size_t depth)
{
	size_t base = p->vlen;
	MlJsonValue *v;
	size_t count;

	p->pos++; /* '[' */
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']')
		p->pos++;
	else
		for (;;)
		{
			MlJsonValue *item = parse_value(p, depth + 1);

			if (item == NULL || !vpush(p, item))
				return NULL;
			skip_ws(p);
			if (p->pos < p->len && p->s[p->pos] == ',')
			{
				p->pos++;
				continue;
			}
			if (p->pos < p->len && p->s[p->pos] == ']')
			{
				p->pos++;
				break;
			}
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "expected ',' or ']' in array");
			return NULL;
		}

	v = new_value(p, ML_JSON_ARRAY);
	if (v == NULL)
		return NULL;
	count = p->vlen - base;
	if (count > 0)
	{
		v->u.array.items = palloc_or_fail(p, count * sizeof(MlJsonValue *));
		if (v->u.array.items == NULL)
			return NULL;
		memcpy(v->u.array.items, p->vstack + base, count * sizeof(MlJsonValue *));
	}
	v->u.array.count = count;
	p->vlen = base;
	return v;
}

/* bytewise, a prefix first; keys are short, so a loop beats a call to memcmp */
static inline int
key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;

	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (unsigned char) a[i] < (unsigned char) b[i] ? -1 : 1;
	return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

static int
member_ptr_cmp(const void *x, const void *y)
{
	const MlJsonMember *a = *(const MlJsonMember *const *) x;
	const MlJsonMember *b = *(const MlJsonMember *const *) y;

	return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

/*
 * An object value holding a copy of members[0..count) and its by_key index;
 * a duplicate key fails at offset.  Objects are small: insertion sort beats
 * qsort's call per comparison there.
 */
static MlJsonValue *
make_object(Parser *p, const MlJsonMember *members, size_t count, size_t offset)
{
	MlJsonValue *v = new_value(p, ML_JSON_OBJECT);
	const MlJsonMember **by_key;

	if (v == NULL)
		return NULL;
	if (count > 0)
	{
		v->u.object.members = palloc_or_fail(p, count * sizeof(MlJsonMember));
		v->u.object.by_key = by_key = palloc_or_fail(p, count * sizeof(MlJsonMember *));
		if (v->u.object.members == NULL || by_key == NULL)
			return NULL;
		memcpy(v->u.object.members, members, count * sizeof(MlJsonMember));
		if (count <= 16)
		{
			for (size_t i = 0; i < count; i++)
			{
				const MlJsonMember *m = &v->u.object.members[i];
				size_t j = i;

				while (j > 0 && member_ptr_cmp(&by_key[j - 1], &m) > 0)
				{
					by_key[j] = by_key[j - 1];
					j--;
				}
				by_key[j] = m;
			}
		}
		else
		{
			for (size_t i = 0; i < count; i++)
				by_key[i] = &v->u.object.members[i];
			qsort((void *) by_key, count, sizeof(MlJsonMember *), member_ptr_cmp);
		}
		for (size_t i = 1; i < count; i++)
			if (member_ptr_cmp(&by_key[i - 1], &by_key[i]) == 0)
			{
				fail(p, ML_JSON_ERR_VALUE, offset, "duplicate key in object");
				return NULL;
			}
	}
	v->u.object.count = count;
	return v;
}

static MlJsonValue *
parse_object(Parser *p, size_t depth)
{
	size_t start = p->pos;
	size_t base = p->mlen;
	MlJsonValue *v;

	p->pos++; /* '{' */
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}')
		p->pos++;
	else
		for (;;)
		{
			const char *key;
			size_t key_len;
			MlJsonValue *item;

			if (p->pos >= p->len || p->s[p->pos] != '"')
			{
				fail(p, ML_JSON_ERR_SYNTAX, p->pos, "expected a string key in object");
				return NULL;
			}
			if (!parse_string_raw(p, &key, &key_len))
				return NULL;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
			{
				fail(p, ML_JSON_ERR_SYNTAX, p->pos, "expected ':' after object key");
				return NULL;
			}
			p->pos++;
			item = parse_value(p, depth + 1);
			if (item == NULL || !mpush(p, key, key_len, item))
				return NULL;
			skip_ws(p);
			if (p->pos < p->len && p->s[p->pos] == ',')
			{
				p->pos++;
				skip_ws(p);
				continue;
			}
			if (p->pos < p->len && p->s[p->pos] == '}')
			{
				p->pos++;
				break;
			}
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "expected ',' or '}' in object");
			return NULL;
		}

	/* an empty object may come before any member stack exists (NULL + 0 is UB) */
	v = make_object(p, p->mlen > base ? p->mstack + base : NULL, p->mlen - base, start);
	p->mlen = base;
	return v;
}

static MlJsonValue *
parse_value(Parser *p, size_t depth)
{
	MlJsonValue *v;

	skip_ws(p);
	if (p->pos >= p->len)
	{
		fail(p, ML_JSON_ERR_SYNTAX, p->pos, "unexpected end of input, expected a value");
		return NULL;
	}
	switch (p->s[p->pos])
	{
		case '{':
		case '[':
			if (depth >= p->max_depth)
			{
				fail(p, ML_JSON_ERR_LIMIT, p->pos, "nesting exceeds the depth limit");
				return NULL;
			}
			return p->s[p->pos] == '{' ? parse_object(p, depth) : parse_array(p, depth);
		case '"':
		{
			const char *s;
			size_t n;

			if (!parse_string_raw(p, &s, &n))
				return NULL;
			v = new_value(p, ML_JSON_STRING);
			if (v == NULL)
				return NULL;
			v->u.string.str = s;
			v->u.string.len = n;
			return v;
		}
		case 't':
			if (!match_literal(p, "true"))
				return NULL;
			v = new_value(p, ML_JSON_BOOL);
			if (v)
				v->u.boolean = true;
			return v;
		case 'f':
			if (!match_literal(p, "false"))
				return NULL;
			v = new_value(p, ML_JSON_BOOL);
			if (v)
				v->u.boolean = false;
			return v;
		case 'n':
			if (!match_literal(p, "null"))
				return NULL;
			return new_value(p, ML_JSON_NULL);
		default:
			if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
				return parse_number(p);
			fail(p, ML_JSON_ERR_SYNTAX, p->pos, "unexpected character, expected a value");
			return NULL;
	}
}

MlJsonValue *
ml_json_parse(MlJsonArena *arena, const char *text, size_t len,
			  const MlJsonLimits *limits, MlJsonError *err)
{
	Parser p;
	MlJsonValue *root;
	size_t max_bytes = ML_JSON_DEFAULT_MAX_BYTES;

	memset(&p, 0, sizeof(p));
	p.arena = arena;
	p.s = (const unsigned char *) text;
	p.len = len;
	p.err = err;
	p.max_depth = ML_JSON_DEFAULT_MAX_DEPTH;
	if (limits != NULL && limits->max_depth > 0)
		p.max_depth = limits->max_depth;
	if (limits != NULL && limits->max_bytes > 0)
		max_bytes = limits->max_bytes;
	if (err != NULL)
		ml_json_set_error(err, ML_JSON_OK, 0, "");

	if (len > max_bytes)
	{
		fail(&p, ML_JSON_ERR_LIMIT, max_bytes, "JSON text exceeds the size limit");
		return NULL;
	}
	if (text == NULL && len > 0)
	{
		fail(&p, ML_JSON_ERR_SYNTAX, 0, "no input");
		return NULL;
	}
	root = parse_value(&p, 0);
	if (root == NULL)
		return NULL;
	skip_ws(&p);
	if (p.pos != p.len)
	{
		fail(&p, ML_JSON_ERR_SYNTAX, p.pos, "unexpected data after the JSON value");
		return NULL;
	}
	return root;
}

/* ---- building trees from other sources -------------------------------- */

MlJsonValue *
ml_json_new_number(MlJsonArena *arena, const char *text, size_t len, MlJsonError *err)
{
	Parser p;
	MlJsonValue *v;

	memset(&p, 0, sizeof(p));
	p.arena = arena;
	p.s = (const unsigned char *) text;
	p.len = len;
	p.err = err;
	if (len == 0 || !(text[0] == '-' || is_digit((unsigned char) text[0])))
	{
		fail(&p, ML_JSON_ERR_SYNTAX, 0, "invalid number: expected a digit");
		return NULL;
	}
	v = parse_number(&p);
	if (v != NULL && p.pos != len)
	{
		fail(&p, ML_JSON_ERR_SYNTAX, p.pos, "unexpected data after the JSON value");
		return NULL;
	}
	return v;
}

bool
ml_json_number_view(const char *text, size_t len, MlJsonValue *out)
{
	Parser p;
	MlJsonError err;
	bool is_integer;
	double d;

	memset(&p, 0, sizeof(p));
	p.s = (const unsigned char *) text;
	p.len = len;
	p.err = &err;
	if (!scan_number(&p, &is_integer) || p.pos != len || !number_value(text, len, &d))
		return false;
	memset(out, 0, sizeof(*out));
	out->type = ML_JSON_NUMBER;
	out->u.number.text = text;
	out->u.number.text_len = len;
	out->u.number.value = d;
	out->u.number.is_integer = is_integer;
	return true;
}

MlJsonValue *
ml_json_new_object(MlJsonArena *arena, const MlJsonMember *members, size_t count,
				   MlJsonError *err)
{
	Parser p;

	memset(&p, 0, sizeof(p));
	p.arena = arena;
	p.err = err;
	return make_object(&p, members, count, 0);
}

/* ---- lookup ----------------------------------------------------------- */

const MlJsonValue *
ml_json_object_get_n(const MlJsonValue *obj, const char *key, size_t key_len)
{
	size_t lo = 0,
		   hi;

	if (obj == NULL || obj->type != ML_JSON_OBJECT)
		return NULL;
	hi = obj->u.object.count;
	while (lo < hi)
	{
		size_t mid = lo + (hi - lo) / 2;
		const MlJsonMember *m = obj->u.object.by_key[mid];
		int c = key_cmp(m->key, m->key_len, key, key_len);

		if (c == 0)
			return m->value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const MlJsonValue *
ml_json_object_get(const MlJsonValue *obj, const char *key)
{
	return ml_json_object_get_n(obj, key, strlen(key));
}
