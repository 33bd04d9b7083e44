/*
 * otlp_headers.c — request headers for the OTLP collector, from a file.
 *
 * Collectors authenticate exporters by a header (an Authorization bearer
 * token, an API key, a tenant id), not by credentials in the endpoint URL,
 * which travel into proxies' logs.  mlplat.otlp_headers_file names a file of
 * "Name: value" lines (blank lines and lines starting with '#' are skipped),
 * read again when it changes (src/secret_file.c), so a rotated token is used by
 * the next export without a reload.  The values are secrets: never logged,
 * and a malformed file names the line number only.
 */
#include "postgres.h"

#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/otlp_export.h"
#include "mlplat/secret_file.h"

#define HEADERS_MAX (16 * 1024)

static MlplatSecretFile headers_file;

/* An RFC 9110 token character (header names). */
static bool
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		   strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Headers the exporter sets itself, or that would change the framing. */
static bool
is_reserved(const char *name, size_t len)
{
	static const char *const reserved[] = { "content-type", "content-length", "host",
											"transfer-encoding", "connection", "expect" };

	for (int i = 0; i < lengthof(reserved); i++)
		if (strlen(reserved[i]) == len && pg_strncasecmp(name, reserved[i], len) == 0)
			return true;
	return false;
}

/*
 * Parse content into (name, value) pairs added to req (req NULL: only check).
 * Returns NULL, or a reason naming the line.
 */
static char *
apply(const char *content, MlplatHttpRequest *req)
{
	const char *p = content;
	int lineno = 0;

	while (*p)
	{
		const char *eol = strchr(p, '\n');
		const char *end = eol ? eol : p + strlen(p);
		const char *colon;
		const char *v;
		const char *ve;
		size_t nlen;

		lineno++;
		/* trim a CR and trailing blanks */
		ve = end;
		while (ve > p && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (ve == p || *p == '#')
			goto next;
		colon = memchr(p, ':', ve - p);
		if (colon == NULL || colon == p)
			return psprintf("line %d is not \"Name: value\"", lineno);
		nlen = colon - p;
		for (size_t i = 0; i < nlen; i++)
			if (!is_tchar((unsigned char) p[i]))
				return psprintf("line %d: the header name is not a token", lineno);
		if (is_reserved(p, nlen))
			return psprintf("line %d: the exporter sets \"%.*s\" itself", lineno, (int) nlen, p);
		v = colon + 1;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		if (v == ve)
			return psprintf("line %d: the value is empty", lineno);
		for (const char *c = v; c < ve; c++)
			if ((unsigned char) *c < 0x20 && *c != '\t')
				return psprintf("line %d: the value holds a control character", lineno);
		if (req)
			mlplat_http_request_add_header(req, pnstrdup(p, nlen), pnstrdup(v, ve - v));
	next:
		if (eol == NULL)
			break;
		p = eol + 1;
	}
	return NULL;
}

char *
mlplat_otlp_headers_apply(MlplatHttpRequest *req)
{
	char *why;
	char *bad;

	why = mlplat_secret_file_refresh(&headers_file, mlplat_otlp_headers_file,
									 "OTLP headers file", HEADERS_MAX, MLPLAT_SECRET_ANY, NULL);
	if (why != NULL)
		return why;
	if (headers_file.content == NULL)
		return NULL; /* no file configured: no extra headers */
	if ((bad = apply(headers_file.content, NULL)) != NULL)
		return psprintf("OTLP headers file \"%s\": %s", mlplat_otlp_headers_file, bad);
	(void) apply(headers_file.content, req);
	return NULL;
}
