/*
 * ed25519.c — Ed25519 signature verification (RFC 8032) through OpenSSL's
 * EVP_PKEY_ED25519, for signed quality evidence (qualify_artifact).
 *
 * mlplat only verifies: it never holds a signing key.  A key or signature of
 * the wrong length is a false answer, not an error, so a caller cannot tell
 * a malformed signature from a forged one.
 */
#include "postgres.h"

#include <openssl/evp.h>

#include "fmgr.h"

PG_FUNCTION_INFO_V1(mlplat_ed25519_verify);

#define ED25519_KEY_LEN 32
#define ED25519_SIG_LEN 64

static bool
ed25519_verify(const unsigned char *key, const unsigned char *msg, size_t msg_len,
			   const unsigned char *sig)
{
	EVP_PKEY *pk;
	EVP_MD_CTX *ctx;
	bool ok = false;

	pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, key, ED25519_KEY_LEN);
	if (pk == NULL)
		return false;
	ctx = EVP_MD_CTX_new();
	/* Ed25519 is one-shot: no digest is named, the whole message goes in at once */
	if (ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1)
		ok = EVP_DigestVerify(ctx, sig, ED25519_SIG_LEN, msg, msg_len) == 1;
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pk);
	return ok;
}

Datum
mlplat_ed25519_verify(PG_FUNCTION_ARGS)
{
	bytea *key = PG_GETARG_BYTEA_PP(0);
	bytea *msg = PG_GETARG_BYTEA_PP(1);
	bytea *sig = PG_GETARG_BYTEA_PP(2);

	if (VARSIZE_ANY_EXHDR(key) != ED25519_KEY_LEN || VARSIZE_ANY_EXHDR(sig) != ED25519_SIG_LEN)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(ed25519_verify((const unsigned char *) VARDATA_ANY(key),
								  (const unsigned char *) VARDATA_ANY(msg), VARSIZE_ANY_EXHDR(msg),
								  (const unsigned char *) VARDATA_ANY(sig)));
}
