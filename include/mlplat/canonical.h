/*
 * canonical.h — canonical JSON (RFC 8785, JCS) and SHA-256 content ids.
 *
 * Canonical form: no whitespace; object members sorted by the UTF-16 code
 * units of their keys; strings with the minimal escaping of RFC 8785 §3.2.2.2
 * (only '"', '\\' and control characters, lower-case \u00xx); numbers in the
 * shortest form that round-trips, as ECMAScript's Number.prototype.toString
 * writes them (1.0 → 1, 1e21 → 1e+21, 0.1 → 0.1, -0 → 0).  Two documents
 * that mean the same JSON give the same bytes, so the SHA-256 of those bytes
 * (lower-case hex) is a content id.
 *
 * No PostgreSQL headers; SHA-256 comes from OpenSSL libcrypto.
 */
#ifndef MLPLAT_CANONICAL_H
#define MLPLAT_CANONICAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlplat/json.h"

/* 64 hex digits */
#define ML_CONTENT_ID_LEN 64

/*
 * Canonical text of v, NUL-terminated, in arena; *len_out gets its length.
 * NULL with *err on a non-finite number or out of memory.
 */
extern char *ml_json_canonical(MlJsonArena *arena, const MlJsonValue *v,
							   size_t *len_out, MlJsonError *err);

/* Content id of v: SHA-256 of its canonical bytes; out gets 64 hex + NUL. */
extern bool ml_json_content_id(MlJsonArena *arena, const MlJsonValue *v,
							   char out[ML_CONTENT_ID_LEN + 1], MlJsonError *err);

/*
 * Content id of object v as if its top-level member exclude_key were absent
 * (for self-describing records that carry their own id, e.g. "content_id").
 * A non-object v, or one without the key, hashes as itself.
 */
extern bool ml_json_content_id_excluding(MlJsonArena *arena, const MlJsonValue *v,
										 const char *exclude_key,
										 char out[ML_CONTENT_ID_LEN + 1], MlJsonError *err);

/* SHA-256 of data[0..len) as lower-case hex; false if libcrypto failed. */
extern bool ml_sha256_hex(const void *data, size_t len, char out[ML_CONTENT_ID_LEN + 1]);

/*
 * A SHA-256 state after a fixed prefix of at most one 64-byte block, for
 * many texts that start with the same bytes (a rollout's texts all begin
 * with its contract's id): resuming from it skips hashing that block again.
 * Plain bytes, so it can be copied and cached.
 */
typedef struct MlSha256Prefix
{
	uint64_t state[16]; /* libcrypto's context after bytes[0..len) */
	char bytes[64];
	size_t len; /* 0: no prefix */
} MlSha256Prefix;

/* Save the state after prefix[0..len), len <= 64; false (and len 0) on failure. */
extern bool ml_sha256_prefix(MlSha256Prefix *p, const void *prefix, size_t len);

/*
 * ml_sha256_hex of data[0..len), resumed from p's state when data starts
 * with p's bytes, else (or with p NULL) hashed whole: the digest is the same
 * either way.
 */
extern bool ml_sha256_hex_prefixed(const MlSha256Prefix *p, const void *data, size_t len,
								   char out[ML_CONTENT_ID_LEN + 1]);

/*
 * ECMAScript Number::toString of a finite double into buf (NUL-terminated);
 * returns the length, or 0 for NaN/Infinity.  32 bytes are always enough.
 */
extern size_t ml_json_format_number(double d, char buf[32]);

/*
 * The canonical text of number v as the writer above puts it into a document
 * (NUL-terminated); returns the length, or 0 for NaN/Infinity.
 */
extern size_t ml_json_canonical_number(const MlJsonValue *v, char buf[32]);

/*
 * s[0..n) as a canonical JSON string literal (quotes included) at out, which
 * must have room for 6 * n + 2 bytes; returns the length written (no NUL).
 */
extern size_t ml_json_canonical_string(const char *s, size_t n, char *out);

/* Compare two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3). */
extern int ml_json_utf16_cmp(const char *a, size_t alen, const char *b, size_t blen);

#endif /* MLPLAT_CANONICAL_H */
