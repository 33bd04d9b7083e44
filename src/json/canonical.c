/*
 * canonical.c — RFC 8785 (JCS) canonical JSON and SHA-256 content ids.
 *
 * No PostgreSQL headers (see json.h).  Numbers are written from the parsed
 * double, never from the source text, so "1.0", "1" and "1e0" all become 1.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * SHA-256 through libcrypto's SHA256_Init/Update/Final: OpenSSL 3 marks them
 * deprecated in favour of EVP, whose provider dispatch costs ~75 ns a digest
 * (more than hashing 128 bytes), and whose contexts cannot be copied without an
 * allocation.  The plain context can be: a digest resumed from a saved state
 * (ml_sha256_hex_prefixed) is a struct copy.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "mlplat/canonical.h"
#include "buf.h"

/* ---- buffer ----------------------------------------------------------- */

void
ml_buf_init(MlJsonBuf *b, MlJsonArena *arena)
{
	memset(b, 0, sizeof(*b));
	b->arena = arena;
}

/* make room for n more bytes and the NUL; false (and oom) when impossible */
static bool
buf_reserve(MlJsonBuf *b, size_t n)
{
	/* old storage stays in the arena until it is freed: at most 2x */
	size_t ncap = b->cap ? b->cap : 256;
	char *nd;

	if (b->oom)
		return false;
	if (b->cap - b->len > n)
		return true;
	while (ncap - b->len <= n)
	{
		if (ncap > SIZE_MAX / 4)
		{
			b->oom = true;
			return false;
		}
		ncap *= 2;
	}
	nd = ml_json_arena_alloc(b->arena, ncap);
	if (nd == NULL)
	{
		b->oom = true;
		return false;
	}
	if (b->len)
		memcpy(nd, b->data, b->len);
	b->data = nd;
	b->cap = ncap;
	return true;
}

void
ml_buf_append(MlJsonBuf *b, const char *s, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
ml_buf_putc(MlJsonBuf *b, char c)
{
	if (!buf_reserve(b, 1))
		return;
	b->data[b->len++] = c;
	b->data[b->len] = '\0';
}

void
ml_buf_puts(MlJsonBuf *b, const char *s)
{
	ml_buf_append(b, s, strlen(s));
}

/* ---- numbers ---------------------------------------------------------- */

/* digits (no dot) and decimal exponent of "d.ddde±x" as printed by %e */
typedef struct Decimal
{
	char digits[24];
	int ndigits;
	int exp10; /* value = d.ddd × 10^exp10 */
} Decimal;

/* Powers of ten that doubles hold exactly (5^22 < 2^53). */
static const double pow10_exact[23] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

/* the decimal m × 10^-k, m > 0 */
static void
decimal_from_u64(Decimal *dec, uint64_t m, int k)
{
	char rev[24];
	int n = 0;

	do
	{
		rev[n++] = (char) ('0' + m % 10);
		m /= 10;
	} while (m != 0);
	for (int i = 0; i < n; i++)
		dec->digits[i] = rev[n - 1 - i];
	dec->ndigits = n;
	dec->exp10 = n - 1 - k;
}

static void
decimal_from_e(Decimal *dec, const char *s)
{
	dec->ndigits = 0;
	for (; *s && *s != 'e'; s++)
		if (*s >= '0' && *s <= '9')
			dec->digits[dec->ndigits++] = *s;
	dec->exp10 = (*s == 'e') ? atoi(s + 1) : 0;
}

static double
decimal_value(const Decimal *dec)
{
	char tmp[48];
	int n = 0;

	tmp[n++] = dec->digits[0];
	tmp[n++] = '.';
	for (int i = 1; i < dec->ndigits; i++)
		tmp[n++] = dec->digits[i];
	snprintf(tmp + n, sizeof(tmp) - n, "e%d", dec->exp10);
	return strtod(tmp, NULL);
}

/* add delta (+1/-1) to the last digit; false when the result is not usable */
static bool
decimal_step(Decimal *dec, int delta)
{
	int i = dec->ndigits - 1;

	if (delta > 0)
	{
		while (i >= 0 && dec->digits[i] == '9')
			dec->digits[i--] = '0';
		if (i < 0)
		{
			/* 99..9 + 1 = 100..0: one more power of ten */
			dec->digits[0] = '1';
			dec->exp10++;
			return true;
		}
		dec->digits[i]++;
		return true;
	}
	while (i >= 0 && dec->digits[i] == '0')
		dec->digits[i--] = '9';
	if (i < 0)
		return false;
	dec->digits[i]--;
	return dec->digits[0] != '0'; /* fewer digits: an earlier precision */
}

/*
 * Shortest digits that round-trip (ECMAScript Number::toString step 5: the
 * smallest k, and among those the s closest to the value).  %.*e gives the
 * closest k-digit decimal; near a power of two the rounding interval is
 * lopsided, so when the closest one fails we also try its two neighbours.
 */
static void
shortest_decimal(double x, Decimal *out)
{
	/*
	 * Integers below 2^53 are exact and doubles there are at most 1 apart, so
	 * no decimal with fewer significant digits rounds to them: their own
	 * digits are the shortest form.  (Most numbers in our documents.)
	 */
	if (x < 9007199254740992.0 && x == (double) (int64_t) x)
	{
		decimal_from_u64(out, (uint64_t) x, 0);
		return;
	}

	/*
	 * Fast path for the fractions documents are full of (0.05, 0.2, 1.25):
	 * the fewest fraction digits k such that m = round(x × 10^k) gives back x
	 * as m / 10^k.  With m < 10^15 (at most DBL_DIG digits, so below 2^53)
	 * and k ≤ 22 both operands are exact doubles and the division is rounded
	 * once, exactly as strtod rounds the decimal m×10^-k.  No two distinct
	 * decimals of at most DBL_DIG digits round to the same double, so the one
	 * found is the one the search below would find; fewer fraction digits
	 * mean fewer significant digits.  Anything else takes the search.
	 */
	if (x >= DBL_MIN && x < 1e15)
	{
		for (int k = 1; k <= 22; k++)
		{
			double t = x * pow10_exact[k];
			double m;

			if (t >= 1e15)
				break;
			m = nearbyint(t);
			if (m >= 1 && m / pow10_exact[k] == x)
			{
				decimal_from_u64(out, (uint64_t) m, k);
				return;
			}
		}
	}

	/*
	 * DBL_DIG: any decimal of at most 15 significant digits survives the trip
	 * through a normal double and back at 15 digits.  So if some decimal that
	 * short rounds to x, the 15-digit rendering of x is that decimal (padded
	 * with zeros the caller strips).  Only 16 and 17 digits need the search.
	 * Subnormals carry fewer digits and take the full search.
	 */
	if (x >= DBL_MIN)
	{
		char tmp[48];
		Decimal d15;

		snprintf(tmp, sizeof(tmp), "%.14e", x);
		decimal_from_e(&d15, tmp);
		if (decimal_value(&d15) == x)
		{
			*out = d15;
			return;
		}
	}

	for (int p = (x >= DBL_MIN) ? 16 : 1; p <= 17; p++)
	{
		char tmp[48];
		Decimal best,
			up,
			down;

		snprintf(tmp, sizeof(tmp), "%.*e", p - 1, x);
		decimal_from_e(&best, tmp);
		if (decimal_value(&best) == x)
		{
			*out = best;
			return;
		}
		up = best;
		down = best;
		if (decimal_step(&up, +1) && decimal_value(&up) == x)
		{
			*out = up;
			return;
		}
		if (decimal_step(&down, -1) && decimal_value(&down) == x)
		{
			*out = down;
			return;
		}
	}
	/* %.16e always round-trips; not reached */
	{
		char tmp[48];

		snprintf(tmp, sizeof(tmp), "%.16e", x);
		decimal_from_e(out, tmp);
	}
}

size_t
ml_json_format_number(double d, char buf[32])
{
	Decimal dec;
	int k,
		n,
		pos = 0;

	if (isnan(d) || isinf(d))
	{
		buf[0] = '\0';
		return 0;
	}
	if (d == 0)
	{
		/* both +0 and -0 */
		buf[0] = '0';
		buf[1] = '\0';
		return 1;
	}
	if (d < 0)
	{
		buf[pos++] = '-';
		d = -d;
	}
	shortest_decimal(d, &dec);
	k = dec.ndigits;
	while (k > 1 && dec.digits[k - 1] == '0')
		k--;
	n = dec.exp10 + 1; /* value = 0.s × 10^n */

	if (k <= n && n <= 21)
	{
		memcpy(buf + pos, dec.digits, k);
		pos += k;
		for (int i = 0; i < n - k; i++)
			buf[pos++] = '0';
	}
	else if (0 < n && n <= 21)
	{
		memcpy(buf + pos, dec.digits, n);
		pos += n;
		buf[pos++] = '.';
		memcpy(buf + pos, dec.digits + n, k - n);
		pos += k - n;
	}
	else if (-6 < n && n <= 0)
	{
		buf[pos++] = '0';
		buf[pos++] = '.';
		for (int i = 0; i < -n; i++)
			buf[pos++] = '0';
		memcpy(buf + pos, dec.digits, k);
		pos += k;
	}
	else
	{
		int e = n - 1;

		buf[pos++] = dec.digits[0];
		if (k > 1)
		{
			buf[pos++] = '.';
			memcpy(buf + pos, dec.digits + 1, k - 1);
			pos += k - 1;
		}
		pos += snprintf(buf + pos, 32 - pos, "e%c%d", e < 0 ? '-' : '+', e < 0 ? -e : e);
	}
	buf[pos] = '\0';
	return (size_t) pos;
}

size_t
ml_json_canonical_number(const MlJsonValue *v, char buf[32])
{
	const char *t = v->u.number.text;
	size_t tl = v->u.number.text_len;

	/*
	 * An integer written with at most 15 digits is exact in a double, and the
	 * canonical form of an integer below 10^21 is its digits: the JSON text
	 * already is that (the grammar forbids leading zeros), except "-0", which
	 * is "0".
	 */
	if (v->u.number.is_integer && t != NULL && tl > 0 &&
		tl - (t[0] == '-') <= 15 && !(t[0] == '-' && t[1] == '0'))
	{
		memcpy(buf, t, tl);
		buf[tl] = '\0';
		return tl;
	}
	return ml_json_format_number(v->u.number.value, buf);
}

/* ---- strings ---------------------------------------------------------- */

/* whether a byte of x is zero (exact: the borrow only runs above a zero byte) */
static inline bool
has_zero_byte(uint64_t x)
{
	return ((x - UINT64_C(0x0101010101010101)) & ~x & UINT64_C(0x8080808080808080)) != 0;
}

size_t
ml_json_canonical_string(const char *s, size_t n, char *start)
{
	static const char hex[] = "0123456789abcdef";
	char *out = start;

	*out++ = '"';
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c;

		/*
		 * Eight bytes at a time while none needs an escape (no byte below
		 * 0x20, no '"', no '\\'; the word tests never miss one): names and
		 * ids are copied, not looked at one by one.
		 */
		while (n - i >= 8)
		{
			uint64_t x;

			memcpy(&x, s + i, 8);
			if (((x - UINT64_C(0x2020202020202020)) & ~x) & UINT64_C(0x8080808080808080))
				break; /* a byte below 0x20 */
			if (has_zero_byte(x ^ UINT64_C(0x2222222222222222)) ||
				has_zero_byte(x ^ UINT64_C(0x5c5c5c5c5c5c5c5c)))
				break;
			memcpy(out, &x, 8);
			out += 8;
			i += 8;
		}
		if (i == n)
			break;
		c = (unsigned char) s[i];

		if (c >= 0x20 && c != '"' && c != '\\')
		{
			*out++ = (char) c;
			continue;
		}
		*out++ = '\\';
		switch (c)
		{
			case '"':
				*out++ = '"';
				break;
			case '\\':
				*out++ = '\\';
				break;
			case '\b':
				*out++ = 'b';
				break;
			case '\f':
				*out++ = 'f';
				break;
			case '\n':
				*out++ = 'n';
				break;
			case '\r':
				*out++ = 'r';
				break;
			case '\t':
				*out++ = 't';
				break;
			default:
				*out++ = 'u';
				*out++ = '0';
				*out++ = '0';
				*out++ = hex[c >> 4];
				*out++ = hex[c & 0xF];
				break;
		}
	}
	*out++ = '"';
	return (size_t) (out - start);
}

void
ml_buf_json_string(MlJsonBuf *b, const char *s, size_t n)
{
	size_t need = n + 2;

	/*
	 * Room for the whole literal first, so the writer needs no checks: short
	 * strings reserve the worst case (every byte a 6-byte \u00xx escape),
	 * long ones count their escapes rather than over-allocate.
	 */
	if (n <= 1024)
		need = 6 * n + 2;
	else
		for (size_t i = 0; i < n; i++)
		{
			unsigned char c = (unsigned char) s[i];

			if (c < 0x20 || c == '"' || c == '\\')
				need += 5; /* at most 5 more than the byte itself */
		}
	if (!buf_reserve(b, need))
		return;
	b->len += ml_json_canonical_string(s, n, b->data + b->len);
	b->data[b->len] = '\0';
}

/* next code point of UTF-8 s[*i..n); an invalid byte stands for itself */
static uint32_t
next_cp(const unsigned char *s, size_t n, size_t *i)
{
	unsigned char c = s[*i];
	uint32_t cp;
	size_t len,
		j;

	if (c < 0x80)
	{
		(*i)++;
		return c;
	}
	if ((c & 0xE0) == 0xC0)
	{
		len = 2;
		cp = c & 0x1F;
	}
	else if ((c & 0xF0) == 0xE0)
	{
		len = 3;
		cp = c & 0x0F;
	}
	else if ((c & 0xF8) == 0xF0)
	{
		len = 4;
		cp = c & 0x07;
	}
	else
	{
		(*i)++;
		return c;
	}
	if (*i + len > n)
	{
		(*i)++;
		return c;
	}
	for (j = 1; j < len; j++)
	{
		if ((s[*i + j] & 0xC0) != 0x80)
		{
			(*i)++;
			return c;
		}
		cp = (cp << 6) | (s[*i + j] & 0x3F);
	}
	*i += len;
	return cp;
}

int
ml_json_utf16_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	const unsigned char *ua = (const unsigned char *) a;
	const unsigned char *ub = (const unsigned char *) b;
	size_t i = 0,
		   j = 0;
	uint32_t pa = 0,
			 pb = 0; /* pending low surrogates */

	for (;;)
	{
		uint32_t x,
			y;

		if (pa)
		{
			x = pa;
			pa = 0;
		}
		else if (i < alen)
		{
			x = next_cp(ua, alen, &i);
			if (x >= 0x10000)
			{
				pa = 0xDC00 + ((x - 0x10000) & 0x3FF);
				x = 0xD800 + ((x - 0x10000) >> 10);
			}
		}
		else
			x = UINT32_MAX; /* end */

		if (pb)
		{
			y = pb;
			pb = 0;
		}
		else if (j < blen)
		{
			y = next_cp(ub, blen, &j);
			if (y >= 0x10000)
			{
				pb = 0xDC00 + ((y - 0x10000) & 0x3FF);
				y = 0xD800 + ((y - 0x10000) >> 10);
			}
		}
		else
			y = UINT32_MAX;

		if (x == UINT32_MAX && y == UINT32_MAX)
			return 0;
		if (x == UINT32_MAX)
			return -1; /* a prefix sorts first */
		if (y == UINT32_MAX)
			return 1;
		if (x != y)
			return x < y ? -1 : 1;
	}
}

/* ---- values ----------------------------------------------------------- */

static int
member_utf16_cmp(const void *x, const void *y)
{
	const MlJsonMember *a = *(const MlJsonMember *const *) x;
	const MlJsonMember *b = *(const MlJsonMember *const *) y;

	return ml_json_utf16_cmp(a->key, a->key_len, b->key, b->key_len);
}

/*
 * The parser's by_key index is in byte order, which for UTF-8 is code point
 * order.  UTF-16 code units order code points the same way except that
 * supplementary characters (lead byte 0xF0..0xF4) sort below U+E000..U+FFFF
 * (lead byte 0xEE, 0xEF).  Keys without a byte >= 0xEE have neither, so the
 * index is already in canonical order and no sort is needed.
 */
static bool
keys_in_utf16_order(const MlJsonValue *v)
{
	if (v->u.object.by_key == NULL)
		return false; /* built by hand, not by the parser */
	for (size_t i = 0; i < v->u.object.count; i++)
	{
		const unsigned char *k = (const unsigned char *) v->u.object.members[i].key;

		for (size_t j = 0; j < v->u.object.members[i].key_len; j++)
			if (k[j] >= 0xEE)
				return false;
	}
	return true;
}

static bool
write_canonical(MlJsonBuf *b, const MlJsonValue *v, const char *exclude_key,
				MlJsonError *err)
{
	switch (v->type)
	{
		case ML_JSON_NULL:
			ml_buf_append(b, "null", 4);
			break;
		case ML_JSON_BOOL:
			if (v->u.boolean)
				ml_buf_append(b, "true", 4);
			else
				ml_buf_append(b, "false", 5);
			break;
		case ML_JSON_NUMBER:
		{
			char num[32];
			size_t n = ml_json_canonical_number(v, num);

			if (n == 0)
			{
				ml_json_set_error(err, ML_JSON_ERR_VALUE, 0,
								  "NaN and Infinity have no JSON representation");
				return false;
			}
			ml_buf_append(b, num, n);
			break;
		}
		case ML_JSON_STRING:
			ml_buf_json_string(b, v->u.string.str, v->u.string.len);
			break;
		case ML_JSON_ARRAY:
			ml_buf_putc(b, '[');
			for (size_t i = 0; i < v->u.array.count; i++)
			{
				if (i > 0)
					ml_buf_putc(b, ',');
				if (!write_canonical(b, v->u.array.items[i], NULL, err))
					return false;
			}
			ml_buf_putc(b, ']');
			break;
		case ML_JSON_OBJECT:
		{
			size_t count = v->u.object.count;
			const MlJsonMember **sorted = NULL;
			bool first = true;

			if (count > 0 && keys_in_utf16_order(v))
				sorted = v->u.object.by_key;
			else if (count > 0)
			{
				sorted = ml_json_arena_alloc(b->arena, count * sizeof(MlJsonMember *));
				if (sorted == NULL)
				{
					b->oom = true;
					break;
				}
				for (size_t i = 0; i < count; i++)
					sorted[i] = &v->u.object.members[i];
				qsort((void *) sorted, count, sizeof(MlJsonMember *), member_utf16_cmp);
			}
			ml_buf_putc(b, '{');
			for (size_t i = 0; i < count; i++)
			{
				const MlJsonMember *m = sorted[i];

				if (exclude_key != NULL && m->key_len == strlen(exclude_key) &&
					memcmp(m->key, exclude_key, m->key_len) == 0)
					continue;
				if (!first)
					ml_buf_putc(b, ',');
				first = false;
				ml_buf_json_string(b, m->key, m->key_len);
				ml_buf_putc(b, ':');
				if (!write_canonical(b, m->value, NULL, err))
					return false;
			}
			ml_buf_putc(b, '}');
			break;
		}
	}
	return true;
}

bool
ml_buf_canonical(MlJsonBuf *b, const MlJsonValue *v, MlJsonError *err)
{
	if (!write_canonical(b, v, NULL, err))
		return false;
	if (b->oom)
	{
		ml_json_set_error(err, ML_JSON_ERR_NOMEM, 0, "out of memory writing canonical JSON");
		return false;
	}
	return true;
}

static char *
canonical_ex(MlJsonArena *arena, const MlJsonValue *v, const char *exclude_key,
			 size_t *len_out, MlJsonError *err)
{
	MlJsonBuf b;

	ml_buf_init(&b, arena);

	/*
	 * Start with room for a typical record (a rollout contract or evidence
	 * record is about a kilobyte): growing from the default 256 bytes copied
	 * the text three times.
	 */
	buf_reserve(&b, 2047);
	if (!write_canonical(&b, v, exclude_key, err))
		return NULL;
	if (b.oom)
	{
		ml_json_set_error(err, ML_JSON_ERR_NOMEM, 0, "out of memory writing canonical JSON");
		return NULL;
	}
	if (len_out)
		*len_out = b.len;
	return b.data; /* never NULL: every value writes something */
}

char *
ml_json_canonical(MlJsonArena *arena, const MlJsonValue *v, size_t *len_out, MlJsonError *err)
{
	return canonical_ex(arena, v, NULL, len_out, err);
}

static void
sha256_to_hex(const unsigned char md[SHA256_DIGEST_LENGTH], char out[ML_CONTENT_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned int i = 0; i < SHA256_DIGEST_LENGTH; i++)
	{
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 0xF];
	}
	out[ML_CONTENT_ID_LEN] = '\0';
}

bool
ml_sha256_hex(const void *data, size_t len, char out[ML_CONTENT_ID_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;

	if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, data, len) != 1 ||
		SHA256_Final(md, &ctx) != 1)
		return false;
	sha256_to_hex(md, out);
	return true;
}

_Static_assert(sizeof(SHA256_CTX) <= sizeof(((MlSha256Prefix *) 0)->state),
			   "MlSha256Prefix must hold libcrypto's SHA256_CTX");

bool
ml_sha256_prefix(MlSha256Prefix *p, const void *prefix, size_t len)
{
	SHA256_CTX ctx;

	p->len = 0;
	if (len > sizeof(p->bytes) || SHA256_Init(&ctx) != 1 ||
		SHA256_Update(&ctx, prefix, len) != 1)
		return false;
	memcpy(p->state, &ctx, sizeof(ctx));
	memcpy(p->bytes, prefix, len);
	p->len = len;
	return true;
}

bool
ml_sha256_hex_prefixed(const MlSha256Prefix *p, const void *data, size_t len,
					   char out[ML_CONTENT_ID_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;

	/* the saved state stands for p->bytes only: any other text is hashed whole */
	if (p == NULL || p->len == 0 || len < p->len || memcmp(data, p->bytes, p->len) != 0)
		return ml_sha256_hex(data, len, out);
	memcpy(&ctx, p->state, sizeof(ctx));
	if (SHA256_Update(&ctx, (const char *) data + p->len, len - p->len) != 1 ||
		SHA256_Final(md, &ctx) != 1)
		return false;
	sha256_to_hex(md, out);
	return true;
}

static bool
content_id_ex(MlJsonArena *arena, const MlJsonValue *v, const char *exclude_key,
			  char out[ML_CONTENT_ID_LEN + 1], MlJsonError *err)
{
	size_t len;
	char *text = canonical_ex(arena, v, exclude_key, &len, err);

	if (text == NULL)
		return false;
	if (!ml_sha256_hex(text, len, out))
	{
		ml_json_set_error(err, ML_JSON_ERR_NOMEM, 0, "SHA-256 digest failed in libcrypto");
		return false;
	}
	return true;
}

bool
ml_json_content_id(MlJsonArena *arena, const MlJsonValue *v,
				   char out[ML_CONTENT_ID_LEN + 1], MlJsonError *err)
{
	return content_id_ex(arena, v, NULL, out, err);
}

bool
ml_json_content_id_excluding(MlJsonArena *arena, const MlJsonValue *v, const char *exclude_key,
							 char out[ML_CONTENT_ID_LEN + 1], MlJsonError *err)
{
	return content_id_ex(arena, v, exclude_key, out, err);
}
