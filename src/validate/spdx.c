/*
 * spdx.c — SPDX license expressions (SPDX 2.3 annex D), checked without a
 * backend so the SQL API and the fuzzer reach the same rules.
 *
 *   expr    := and ( "OR" and )*
 *   and     := with ( "AND" with )*
 *   with    := primary [ "WITH" exception ]
 *   primary := "(" expr ")" | license [ "+" ]
 *   license := [A-Za-z0-9.-]+ | "DocumentRef-"id":LicenseRef-"id
 *
 * Operators are upper case (a lower-case "and" is read as an identifier, and
 * two identifiers in a row are refused).  NONE and NOASSERTION say that no
 * licence is known: an optimized artifact must carry a real one, so they are
 * refused.  The list of registered identifiers is not checked (it changes
 * every SPDX release); LicenseRef- covers the rest.
 */
#include <string.h>

#include "mlplat/validate.h"

typedef struct SpdxParser
{
	const char *s;
	size_t len;
	size_t pos;
	int depth;
	const char *err;
} SpdxParser;

#define SPDX_MAX_DEPTH 32

static bool
id_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		   c == '.' || c == '-';
}

static void
skip_space(SpdxParser *p)
{
	while (p->pos < p->len && p->s[p->pos] == ' ')
		p->pos++;
}

/* length of the word at pos (identifier characters, ':' and '+'), 0 if none */
static size_t
word_len(const SpdxParser *p)
{
	size_t n = 0;

	while (p->pos + n < p->len &&
		   (id_char(p->s[p->pos + n]) || p->s[p->pos + n] == ':' || p->s[p->pos + n] == '+'))
		n++;
	return n;
}

static bool
word_is(const SpdxParser *p, const char *w)
{
	size_t n = strlen(w);

	return word_len(p) == n && strncmp(p->s + p->pos, w, n) == 0;
}

static bool
is_operator_word(const SpdxParser *p)
{
	return word_is(p, "AND") || word_is(p, "OR") || word_is(p, "WITH");
}

/* [A-Za-z0-9.-]+ over [s, s+n) */
static bool
plain_id(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!id_char(s[i]))
			return false;
	return true;
}

static bool
prefixed(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n > k && strncmp(s, prefix, k) == 0 && plain_id(s + k, n - k);
}

/* a licence (or exception, allow_plus false) identifier at pos */
static bool
parse_id(SpdxParser *p, bool allow_plus)
{
	size_t n = word_len(p);
	const char *w = p->s + p->pos;
	size_t idn = n;
	const char *colon;

	if (n == 0)
	{
		if (p->pos >= p->len)
			p->err = "ends where a license identifier is expected (dangling operator)";
		else if (p->s[p->pos] == ')')
			p->err = "a \")\" stands where a license identifier is expected (empty parentheses?)";
		else
			p->err = "expected a license identifier or \"(\"";
		return false;
	}
	if (is_operator_word(p))
	{
		p->err = "an operator stands where a license identifier is expected (dangling operator)";
		return false;
	}
	if (allow_plus && w[n - 1] == '+')
		idn = n - 1;
	colon = memchr(w, ':', idn);
	if (colon != NULL)
	{
		size_t left = (size_t) (colon - w);

		if (!prefixed(w, left, "DocumentRef-") ||
			!prefixed(colon + 1, idn - left - 1, "LicenseRef-"))
		{
			p->err = "a reference with ':' must be DocumentRef-<id>:LicenseRef-<id>";
			return false;
		}
	}
	else if (!plain_id(w, idn))
	{
		p->err = "an identifier has characters outside A-Z a-z 0-9 . - (or a misplaced \"+\")";
		return false;
	}
	if ((idn == 4 && strncmp(w, "NONE", 4) == 0) ||
		(idn == 11 && strncmp(w, "NOASSERTION", 11) == 0))
	{
		p->err = "NONE and NOASSERTION are not licenses: name the artifact's license";
		return false;
	}
	p->pos += n;
	return true;
}

static bool parse_or(SpdxParser *p);

static bool
parse_with(SpdxParser *p)
{
	skip_space(p);
	if (p->pos < p->len && p->s[p->pos] == '(')
	{
		if (++p->depth > SPDX_MAX_DEPTH)
		{
			p->err = "parentheses are nested too deeply";
			return false;
		}
		p->pos++;
		if (!parse_or(p))
			return false;
		skip_space(p);
		if (p->pos >= p->len || p->s[p->pos] != ')')
		{
			p->err = "an opening \"(\" is not closed";
			return false;
		}
		p->pos++;
		p->depth--;
	}
	else if (!parse_id(p, true))
		return false;
	skip_space(p);
	if (word_is(p, "WITH"))
	{
		p->pos += 4;
		skip_space(p);
		if (!parse_id(p, false))
			return false;
	}
	return true;
}

static bool
parse_and(SpdxParser *p)
{
	if (!parse_with(p))
		return false;
	for (;;)
	{
		skip_space(p);
		if (!word_is(p, "AND"))
			return true;
		p->pos += 3;
		if (!parse_with(p))
			return false;
	}
}

static bool
parse_or(SpdxParser *p)
{
	if (!parse_and(p))
		return false;
	for (;;)
	{
		skip_space(p);
		if (!word_is(p, "OR"))
			return true;
		p->pos += 2;
		if (!parse_and(p))
			return false;
	}
}

const char *
mlplat_spdx_check(const char *s, size_t len)
{
	SpdxParser p = { s, len, 0, 0, NULL };

	if (s == NULL || len == 0)
		return "must not be empty";
	if (len > MLPLAT_SPDX_MAX_LEN)
		return "is longer than 256 characters";
	for (size_t i = 0; i < len; i++)
		if (!(id_char(s[i]) || s[i] == ' ' || s[i] == '(' || s[i] == ')' ||
			  s[i] == '+' || s[i] == ':'))
			return "has a character outside A-Z a-z 0-9 . - + : ( ) and space";
	if (!parse_or(&p))
		return p.err;
	skip_space(&p);
	if (p.pos < p.len)
		return p.s[p.pos] == ')' ? "a \")\" has no matching \"(\""
								 : "two licenses follow each other without AND, OR or WITH";
	return NULL;
}
