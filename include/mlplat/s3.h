/*
 * s3.h — pure helpers for the S3 object store: artifact URI parsing, checksum
 * header decoding, credentials file parsing and AWS Signature Version 4.
 *
 * No PostgreSQL headers and no I/O (OpenSSL for SHA-256/HMAC only), so the
 * unit tests (test/unit/s3_test.c) reach every function with hostile input and
 * AWS's published SigV4 examples.  The I/O that uses them is
 * src/reconcile/artifact.c.
 */
#ifndef MLPLAT_S3_H
#define MLPLAT_S3_H

#include <stdbool.h>
#include <stddef.h>

#define ML_S3_BUCKET_MAX 63
#define ML_S3_KEY_MAX 1024
#define ML_SHA256_HEX_LEN 64

/*
 * Split "s3://bucket/key".  The bucket follows S3's naming rules (3-63 of
 * [a-z0-9.-], starting and ending alphanumeric); the key is 1..1024 bytes with
 * no control characters and no "." or ".." path segment (an HTTP client would
 * resolve them and fetch another object than the one named).  Returns NULL, or
 * a static English reason why the URI is refused.
 */
extern const char *ml_s3_parse_uri(const char *uri, char *bucket, size_t bucket_cap,
								   char *key, size_t key_cap);

/*
 * Percent-encode for a SigV4 canonical URI (and the request URL, which must be
 * byte-identical): unreserved characters (A-Z a-z 0-9 - _ . ~) stay, '/' stays
 * when keep_slash, everything else becomes %XX (upper-case hex).  Writes at
 * most cap bytes including the NUL; returns the length the full result needs
 * (without the NUL), so a result >= cap means it was truncated.
 */
extern size_t ml_s3_uri_encode(const char *in, bool keep_slash, char *out, size_t cap);

/* S3's x-amz-checksum-sha256 (base64 of the 32-byte digest) -> 64 lower-case hex. */
extern bool ml_s3_checksum_b64_to_hex(const char *b64, char hex[ML_SHA256_HEX_LEN + 1]);

/*
 * The error code of an S3 error answer (<Error><Code>SignatureDoesNotMatch</Code>...)
 * into code (letters and digits only, at most cap - 1 of them); false when the body
 * has none (a HEAD's answer has no body).
 */
#define ML_S3_ERROR_CODE_MAX 64
extern bool ml_s3_error_code(const char *body, char *code, size_t cap);

typedef struct MlS3Credentials
{
	char access_key_id[129];
	char secret_access_key[129];
	char session_token[2049]; /* "" when none */
} MlS3Credentials;

/*
 * Parse a credentials file: "name = value" lines with the names of the AWS
 * shared credentials file (aws_access_key_id, aws_secret_access_key,
 * aws_session_token); blank lines, '#'/';' comments and "[profile]" headers
 * are ignored (only the first profile is read).  Returns NULL, or why the text
 * is unusable (never quoting a value).
 */
extern const char *ml_s3_parse_credentials(const char *text, MlS3Credentials *out);

typedef struct MlS3Header
{
	const char *name; /* any case */
	const char *value;
} MlS3Header;

typedef struct MlSigV4Input
{
	const char *method;			 /* "GET" */
	const char *canonical_uri;	 /* already encoded, e.g. "/bucket/key%24x" */
	const char *canonical_query; /* already canonical ("a=1&b=2"), or "" */
	const MlS3Header *headers;	 /* every header to sign, host included */
	int nheaders;
	const char *payload_hash; /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
	const char *amz_date;	  /* "YYYYMMDDTHHMMSSZ" (also the x-amz-date header) */
	const char *region;		  /* "us-east-1" */
	const char *service;	  /* "s3" */
	const char *access_key_id;
	const char *secret_access_key;
} MlSigV4Input;

/*
 * The Authorization header value for in ("AWS4-HMAC-SHA256 Credential=...,
 * SignedHeaders=...,Signature=..."), written to out.  When string_to_sign is
 * not NULL the string that was signed is copied there too (for tests).
 * Returns false when an output buffer is too small or an input is malformed.
 */
extern bool ml_sigv4_authorization(const MlSigV4Input *in, char *out, size_t cap,
								   char *string_to_sign, size_t sts_cap);

/* "YYYYMMDDTHHMMSSZ" for a Unix time (UTC). */
extern void ml_sigv4_amz_date(long long unix_seconds, char out[17]);

#endif /* MLPLAT_S3_H */
