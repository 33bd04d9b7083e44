/*
 * s3.c — pure S3 helpers: artifact URIs, checksum headers, credentials files
 * and AWS Signature Version 4 (see s3.h).
 *
 * No PostgreSQL headers: the unit tests build this file alone.  Internal
 * buffers are malloc'd and freed before returning; nothing here logs, and no
 * error text quotes a credential.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "mlplat/canonical.h"
#include "mlplat/s3.h"

/* ---- URIs ------------------------------------------------------------- */

static bool
bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

const char *
ml_s3_parse_uri(const char *uri, char *bucket, size_t bucket_cap, char *key, size_t key_cap)
{
	const char *b;
	const char *slash;
	const char *seg;
	size_t blen;
	size_t klen;

	if (uri == NULL || strncmp(uri, "s3://", 5) != 0)
		return "not an s3:// URI";
	b = uri + 5;
	slash = strchr(b, '/');
	if (slash == NULL)
		return "names a bucket, not an object (s3://bucket/key)";
	blen = (size_t) (slash - b);
	if (blen < 3 || blen > ML_S3_BUCKET_MAX)
		return "bucket name must be 3 to 63 characters";
	for (size_t i = 0; i < blen; i++)
		if (!bucket_char(b[i]))
			return "bucket name may contain only a-z, 0-9, '.' and '-'";
	if (b[0] == '.' || b[0] == '-' || b[blen - 1] == '.' || b[blen - 1] == '-')
		return "bucket name must start and end with a letter or digit";
	klen = strlen(slash + 1);
	if (klen == 0)
		return "names a bucket, not an object (s3://bucket/key)";
	if (klen > ML_S3_KEY_MAX)
		return "object key is longer than 1024 bytes";
	for (const unsigned char *p = (const unsigned char *) slash + 1; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return "object key contains a control character";
	/* "." and ".." segments: clients normalise them away, fetching another object */
	seg = slash + 1;
	for (;;)
	{
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t) (end - seg) : strlen(seg);

		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return "object key contains a \".\" or \"..\" segment";
		if (end == NULL)
			break;
		seg = end + 1;
	}
	if (blen + 1 > bucket_cap || klen + 1 > key_cap)
		return "URI too long";
	memcpy(bucket, b, blen);
	bucket[blen] = '\0';
	memcpy(key, slash + 1, klen + 1);
	return NULL;
}

size_t
ml_s3_uri_encode(const char *in, bool keep_slash, char *out, size_t cap)
{
	static const char hexd[] = "0123456789ABCDEF";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *) in; *p; p++)
	{
		char enc[4];
		size_t k;

		if (isalnum(*p) && *p < 0x80)
			k = 1, enc[0] = (char) *p;
		else if (*p == '-' || *p == '_' || *p == '.' || *p == '~' || (*p == '/' && keep_slash))
			k = 1, enc[0] = (char) *p;
		else
		{
			enc[0] = '%';
			enc[1] = hexd[*p >> 4];
			enc[2] = hexd[*p & 15];
			k = 3;
		}
		for (size_t i = 0; i < k; i++, n++)
			if (n + 1 < cap)
				out[n] = enc[i];
	}
	if (cap > 0)
		out[n < cap ? n : cap - 1] = '\0';
	return n;
}

/* ---- digests ---------------------------------------------------------- */

static void
to_hex(const unsigned char *d, size_t n, char *hex)
{
	static const char hexd[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++)
	{
		hex[2 * i] = hexd[d[i] >> 4];
		hex[2 * i + 1] = hexd[d[i] & 15];
	}
	hex[2 * n] = '\0';
}

static int
b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool
ml_s3_error_code(const char *body, char *code, size_t cap)
{
	const char *b;
	size_t n = 0;

	if (body == NULL || cap == 0 || (b = strstr(body, "<Code>")) == NULL)
		return false;
	b += strlen("<Code>");
	while (isalnum((unsigned char) b[n]) && n + 1 < cap)
		n++;
	/* only a whole, well-formed code: a truncated or odd one tells nothing */
	if (n == 0 || strncmp(b + n, "</Code>", strlen("</Code>")) != 0)
		return false;
	memcpy(code, b, n);
	code[n] = '\0';
	return true;
}

bool
ml_s3_checksum_b64_to_hex(const char *b64, char hex[ML_SHA256_HEX_LEN + 1])
{
	unsigned char d[33];
	size_t nd = 0;
	uint32_t acc = 0;
	int bits = 0;
	size_t len;

	if (b64 == NULL)
		return false;
	while (*b64 == ' ' || *b64 == '\t')
		b64++;
	len = strlen(b64);
	while (len > 0 && (b64[len - 1] == ' ' || b64[len - 1] == '\t'))
		len--;
	/* 32 bytes are exactly 44 characters with one '=' of padding */
	if (len != 44 || b64[43] != '=')
		return false;
	for (size_t i = 0; i < 43; i++)
	{
		int v = b64_value(b64[i]);

		if (v < 0)
			return false;
		acc = (acc << 6) | (uint32_t) v;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			if (nd >= sizeof(d))
				return false;
			d[nd++] = (unsigned char) (acc >> bits);
		}
	}
	/* the two bits left over must be zero in canonical base64 */
	if (nd != 32 || (acc & ((1u << bits) - 1)) != 0)
		return false;
	to_hex(d, 32, hex);
	return true;
}

/* ---- credentials ------------------------------------------------------ */

static const char *
set_field(char *dst, size_t cap, const char *v, size_t n, const char *what)
{
	if (n == 0)
		return what;
	if (n + 1 > cap)
		return "a credential value is too long";
	for (size_t i = 0; i < n; i++)
		if ((unsigned char) v[i] < 0x21 || (unsigned char) v[i] == 0x7f)
			return "a credential value contains a blank or control character";
	memcpy(dst, v, n);
	dst[n] = '\0';
	return NULL;
}

const char *
ml_s3_parse_credentials(const char *text, MlS3Credentials *out)
{
	const char *p = text;
	int profiles = 0;

	memset(out, 0, sizeof(*out));
	if (text == NULL)
		return "no credentials";
	while (*p)
	{
		const char *eol = strchr(p, '\n');
		const char *end = eol ? eol : p + strlen(p);
		const char *s = p;
		const char *e = end;
		const char *eq;

		p = eol ? eol + 1 : end;
		while (s < e && isspace((unsigned char) *s))
			s++;
		while (e > s && isspace((unsigned char) e[-1]))
			e--;
		if (s == e || *s == '#' || *s == ';')
			continue;
		if (*s == '[')
		{
			if (++profiles > 1)
				break; /* only the first profile */
			continue;
		}
		eq = memchr(s, '=', (size_t) (e - s));
		if (eq == NULL)
			return "a line is neither \"name = value\", a comment nor a [profile]";
		{
			const char *ne = eq;
			const char *vs = eq + 1;
			const char *why = NULL;
			size_t nl;

			while (ne > s && isspace((unsigned char) ne[-1]))
				ne--;
			while (vs < e && isspace((unsigned char) *vs))
				vs++;
			nl = (size_t) (ne - s);
			if (nl == 17 && strncmp(s, "aws_access_key_id", nl) == 0)
				why = set_field(out->access_key_id, sizeof(out->access_key_id), vs, (size_t) (e - vs),
								"aws_access_key_id is empty");
			else if (nl == 21 && strncmp(s, "aws_secret_access_key", nl) == 0)
				why = set_field(out->secret_access_key, sizeof(out->secret_access_key), vs, (size_t) (e - vs),
								"aws_secret_access_key is empty");
			else if (nl == 17 && strncmp(s, "aws_session_token", nl) == 0)
				why = set_field(out->session_token, sizeof(out->session_token), vs, (size_t) (e - vs),
								"aws_session_token is empty");
			/* other settings (region, output) are ignored */
			if (why)
			{
				memset(out, 0, sizeof(*out));
				return why;
			}
		}
	}
	if (out->access_key_id[0] == '\0' || out->secret_access_key[0] == '\0')
	{
		memset(out, 0, sizeof(*out));
		return "aws_access_key_id and aws_secret_access_key are both required";
	}
	return NULL;
}

/* ---- Signature Version 4 ---------------------------------------------- */

typedef struct SBuf
{
	char *d;
	size_t len;
	size_t cap;
	bool oom;
} SBuf;

static void
sb_add(SBuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap)
	{
		size_t ncap = b->cap ? b->cap * 2 : 512;
		char *nd;

		while (ncap < b->len + n + 1)
			ncap *= 2;
		nd = realloc(b->d, ncap);
		if (nd == NULL)
		{
			b->oom = true;
			return;
		}
		b->d = nd;
		b->cap = ncap;
	}
	memcpy(b->d + b->len, s, n);
	b->len += n;
	b->d[b->len] = '\0';
}

static void
sb_str(SBuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* header value as SigV4 wants it: trimmed, inner runs of blanks as one space */
static void
sb_header_value(SBuf *b, const char *v)
{
	bool space = false;
	bool any = false;

	for (; *v; v++)
	{
		if (*v == ' ' || *v == '\t')
		{
			space = any;
			continue;
		}
		if (space)
			sb_add(b, " ", 1);
		space = false;
		any = true;
		sb_add(b, v, 1);
	}
}

typedef struct HdrRef
{
	char name[64];
	const char *value;
} HdrRef;

static int
hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const HdrRef *) a)->name, ((const HdrRef *) b)->name);
}

static bool
hmac(const unsigned char *key, size_t klen, const char *msg, size_t mlen, unsigned char out[32])
{
	unsigned int ol = 0;

	return HMAC(EVP_sha256(), key, (int) klen, (const unsigned char *) msg, mlen, out, &ol) != NULL && ol == 32;
}

bool
ml_sigv4_authorization(const MlSigV4Input *in, char *out, size_t cap,
					   char *string_to_sign, size_t sts_cap)
{
	HdrRef *hs;
	SBuf cr = { 0 };
	SBuf sts = { 0 };
	SBuf signed_names = { 0 };
	SBuf kkey = { 0 };
	char cr_hash[ML_SHA256_HEX_LEN + 1];
	char date[9];
	char sig_hex[ML_SHA256_HEX_LEN + 1];
	unsigned char k[32];
	bool ok = false;
	int n;

	if (in->nheaders <= 0 || in->nheaders > 64 || in->amz_date == NULL || strlen(in->amz_date) != 16 ||
		strchr(in->region, '/') || strchr(in->service, '/') || strchr(in->access_key_id, '/'))
		return false;
	hs = calloc((size_t) in->nheaders, sizeof(HdrRef));
	if (hs == NULL)
		return false;
	for (int i = 0; i < in->nheaders; i++)
	{
		size_t nl = strlen(in->headers[i].name);

		if (nl == 0 || nl >= sizeof(hs[i].name))
			goto done;
		for (size_t j = 0; j <= nl; j++)
			hs[i].name[j] = (char) tolower((unsigned char) in->headers[i].name[j]);
		hs[i].value = in->headers[i].value;
	}
	qsort(hs, (size_t) in->nheaders, sizeof(HdrRef), hdr_cmp);

	/* canonical request */
	sb_str(&cr, in->method);
	sb_str(&cr, "\n");
	sb_str(&cr, in->canonical_uri);
	sb_str(&cr, "\n");
	sb_str(&cr, in->canonical_query ? in->canonical_query : "");
	sb_str(&cr, "\n");
	for (int i = 0; i < in->nheaders; i++)
	{
		if (i > 0 && strcmp(hs[i].name, hs[i - 1].name) == 0)
			goto done; /* one value per name here; callers never repeat one */
		sb_str(&cr, hs[i].name);
		sb_str(&cr, ":");
		sb_header_value(&cr, hs[i].value);
		sb_str(&cr, "\n");
		if (i > 0)
			sb_str(&signed_names, ";");
		sb_str(&signed_names, hs[i].name);
	}
	sb_str(&cr, "\n");
	sb_str(&cr, signed_names.d ? signed_names.d : "");
	sb_str(&cr, "\n");
	sb_str(&cr, in->payload_hash);
	if (cr.oom || signed_names.oom)
		goto done;
	if (!ml_sha256_hex(cr.d, cr.len, cr_hash))
		goto done;

	/* string to sign */
	memcpy(date, in->amz_date, 8);
	date[8] = '\0';
	sb_str(&sts, "AWS4-HMAC-SHA256\n");
	sb_str(&sts, in->amz_date);
	sb_str(&sts, "\n");
	sb_str(&sts, date);
	sb_str(&sts, "/");
	sb_str(&sts, in->region);
	sb_str(&sts, "/");
	sb_str(&sts, in->service);
	sb_str(&sts, "/aws4_request\n");
	sb_str(&sts, cr_hash);

	/* signing key: HMAC chain from "AWS4" + secret over date, region, service, "aws4_request" */
	sb_str(&kkey, "AWS4");
	sb_str(&kkey, in->secret_access_key);
	if (sts.oom || kkey.oom)
		goto done;
	if (!hmac((unsigned char *) kkey.d, kkey.len, date, 8, k) ||
		!hmac(k, 32, in->region, strlen(in->region), k) ||
		!hmac(k, 32, in->service, strlen(in->service), k) ||
		!hmac(k, 32, "aws4_request", 12, k) ||
		!hmac(k, 32, sts.d, sts.len, k))
		goto done;
	to_hex(k, 32, sig_hex);

	n = snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request,SignedHeaders=%s,Signature=%s",
				 in->access_key_id, date, in->region, in->service, signed_names.d, sig_hex);
	if (n < 0 || (size_t) n >= cap)
		goto done;
	if (string_to_sign)
	{
		if (sts.len + 1 > sts_cap)
			goto done;
		memcpy(string_to_sign, sts.d, sts.len + 1);
	}
	ok = true;
done:
	if (kkey.d)
	{
		/* the secret was in this buffer */
		memset(kkey.d, 0, kkey.cap);
		free(kkey.d);
	}
	memset(k, 0, sizeof(k));
	free(cr.d);
	free(sts.d);
	free(signed_names.d);
	free(hs);
	return ok;
}

void
ml_sigv4_amz_date(long long unix_seconds, char out[17])
{
	time_t t = (time_t) unix_seconds;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
