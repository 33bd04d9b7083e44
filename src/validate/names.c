/*
 * names.c — DNS-1123 labels and W3C traceparent, checked byte by byte.
 *
 * Hand-written rather than regex-based so the same code runs in the fuzzers
 * without a backend, and so a rejection can never depend on locale.
 */
#include <string.h>

#include "mlplat/validate.h"

static bool
is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool
is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool
mlplat_dns_label_is_valid(const char *s, size_t len, size_t max_len)
{
	if (s == NULL || len == 0 || len > max_len)
		return false;
	if (!is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
		return false;
	for (size_t i = 1; i + 1 < len; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* RFC 1035 label (Kubernetes' DNS-1035): an RFC 1123 label that starts with a letter */
bool
mlplat_dns1035_label_is_valid(const char *s, size_t len, size_t max_len)
{
	return mlplat_dns_label_is_valid(s, len, max_len) && s[0] >= 'a' && s[0] <= 'z';
}

/* true when [s, s+n) is lower-case hex and not all '0' */
static bool
hex_field_ok(const char *s, size_t n)
{
	bool nonzero = false;

	for (size_t i = 0; i < n; i++)
	{
		if (!is_lower_hex(s[i]))
			return false;
		if (s[i] != '0')
			nonzero = true;
	}
	return nonzero;
}

bool
mlplat_traceparent_is_valid(const char *s)
{
	/* 00-<32>-<16>-<2> */
	if (s == NULL || strlen(s) != 55)
		return false;
	if (s[0] != '0' || s[1] != '0' || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return false;
	if (!hex_field_ok(s + 3, 32) || !hex_field_ok(s + 36, 16))
		return false;
	return is_lower_hex(s[53]) && is_lower_hex(s[54]);
}
