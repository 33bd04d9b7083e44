/*
 * artifact.c — before the first apply of a revision, check its artifact in the
 * object store: the object exists and its SHA-256 is the registered digest
 * (see artifact.h; URI parsing, checksum decoding and signing are the pure
 * helpers of s3.h).
 *
 * Where the digest comes from, cheapest first:
 *   1. the store's own checksum on a HEAD: x-amz-checksum-sha256 (real S3 with
 *      x-amz-checksum-mode: ENABLED, for objects uploaded with a checksum: the
 *      store computed it from the bytes it received);
 *   2. mlplat.artifact_digests, by URI and the HEAD's ETag (a digest we
 *      computed before: a second revision or a restart downloads nothing);
 *   3. a GET streamed through SHA-256 (OpenSSL EVP) without keeping the body,
 *      refused beyond mlplat.artifact_hash_max_bytes.
 * User metadata such as x-amz-meta-sha256 is never proof: it is whatever the
 * uploader wrote beside the bytes.
 *
 * Every answer of the store (HEAD, GET, DELETE) is read through observe.h
 * (the object store as a raw peer: found, gone on 404, or an error, permanent
 * or not) and ml_artifact_next (artifact_verdict.h, pure) turns that one
 * classification into the check's next step and verdict.
 *
 * What a check found is told twice: reason, for the tenant (status_reason,
 * last_error, the span), says only verified / not verified / waiting, never a
 * digest found, a size, whether the object exists, a host or a file; detail,
 * for administrators (the reconcile ledger, the server log), says why.
 * Objects are addressed path-style (<endpoint>/<bucket>/<key>); with a
 * credentials file every request is signed with AWS Signature Version 4.
 */
#include "postgres.h"

#include <time.h>

#include <openssl/evp.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/artifact.h"
#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/observe.h"
#include "mlplat/s3.h"
#include "mlplat/seam.h"
#include "mlplat/secret_file.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CREDENTIALS_MAX 8192

typedef struct MlplatArtifactPriv
{
	char bucket[ML_S3_BUCKET_MAX + 1];
	char key[ML_S3_KEY_MAX + 1];
	List *etags; /* known digests of this URI (cache) */
	List *sha256s;
	MlplatObservedObject head; /* a digest check's HEAD (head.get NULL: none) */
	MlplatObservedObject get;  /* the GET that hashes or fetches, or the DELETE */
	char *origin;			   /* addressing, for the GET after the HEAD */
	char *authority;
	char *base_path;
	char *etag;
	int64 size; /* Content-Length of the HEAD, -1 if unknown */
	/* streaming hash */
	EVP_MD_CTX *md;
	uint64 hashed;
	uint64 max_bytes;
	bool too_big;
	bool remember; /* store got_sha256 under etag */
	/* checks of the same URI in one pass share the first one's requests */
	MlplatArtifactCheck *leader;
	bool preset; /* uri and want_sha256 given by the caller: nothing to claim */
	/* a fetch (mlplat_artifact_fetch_new): the body, bounded, instead of a digest */
	size_t fetch_max;
	bool remove; /* mlplat_artifact_delete_new: a signed DELETE, 404 counted as done */
	char *fetched;
	size_t fetched_len;
} MlplatArtifactPriv;

/* ---------------------------------------------------------------- configuration */

/* Process-local; the secret is never logged and wiped when replaced. */
static struct
{
	MlplatSecretFile file;
	bool loaded; /* cred holds the parsed content of file */
	MlS3Credentials cred;
} s3cfg;

static void
forget_credentials(void)
{
	explicit_bzero(&s3cfg.cred, sizeof(s3cfg.cred));
	s3cfg.loaded = false;
	mlplat_secret_file_forget(&s3cfg.file);
}

/* (Re-)read the credentials file when it changed; NULL on success (or no file). */
static char *
refresh_credentials(void)
{
	const char *file = mlplat_s3_credentials_file;
	bool changed;
	char *why;
	const char *bad;

	why = mlplat_secret_file_refresh(&s3cfg.file, file, "object store credentials file",
									 CREDENTIALS_MAX, MLPLAT_SECRET_ANY, &changed);
	if (why || s3cfg.file.content == NULL)
	{
		forget_credentials();
		return why;
	}
	if (!changed && s3cfg.loaded)
		return NULL;
	explicit_bzero(&s3cfg.cred, sizeof(s3cfg.cred));
	bad = ml_s3_parse_credentials(s3cfg.file.content, &s3cfg.cred);
	if (bad)
	{
		/* read again next time: the file may be fixed without changing size or mtime */
		forget_credentials();
		return psprintf("object store credentials file \"%s\" is unusable: %s", file, bad);
	}
	s3cfg.loaded = true;
	return NULL;
}

/*
 * The endpoint split into scheme://authority and a base path without a
 * trailing '/'; NULL on success, else why it is unusable.
 */
static const char *
split_endpoint(const char *endpoint, char **origin, char **authority, char **base_path)
{
	const char *after;
	const char *slash;
	size_t len = strlen(endpoint);

	if (!mlplat_http_url_allowed(endpoint))
		return "mlplat.s3_endpoint is not an http or https URL";
	while (len > 0 && endpoint[len - 1] == '/')
		len--;
	after = strstr(endpoint, "://") + 3;
	slash = memchr(after, '/', len - (after - endpoint));
	if (slash == NULL)
		slash = endpoint + len;
	if (slash == after || memchr(after, '@', slash - after) || strpbrk(endpoint, "?# \t\r\n"))
		return "mlplat.s3_endpoint must be scheme://host[:port][/path] without user, query or blanks";
	*origin = pnstrdup(endpoint, slash - endpoint);
	*authority = pnstrdup(after, slash - after);
	*base_path = pnstrdup(slash, endpoint + len - slash);
	return NULL;
}

/* ---------------------------------------------------------------- verdicts */

/* the one line a tenant reads when an artifact is not verified, whatever the store said */
#define NOT_VERIFIED "artifact %s could not be verified against its registered sha256 " \
					 "(missing, unreadable, too large to hash or different); an administrator finds the reason in mlplat.admin_ledger"
#define NOT_READY "waiting to verify artifact %s: the platform's object store is not configured or not usable yet"

/* reason: what the tenant reads; detail: what administrators read (NULL: the same) */
static void
decide(MlplatArtifactCheck *c, MlplatArtifactVerdict v, int http_status, char *reason, char *detail)
{
	c->verdict = v;
	c->http_status = http_status;
	c->reason = reason;
	c->detail = detail ? detail : reason;
	if (v == MLPLAT_ARTIFACT_WAIT || v == MLPLAT_ARTIFACT_FAILED)
		c->retry_ms = ml_artifact_slow_retry_ms(mlplat_backoff_max_ms);
}

/* Compare the digest found with the registered one. */
static void
judge(MlplatArtifactCheck *c, const char *got, const char *source, int http_status)
{
	c->got_sha256 = pstrdup(got);
	c->source = source;
	if (strcmp(got, c->want_sha256) == 0)
		decide(c, MLPLAT_ARTIFACT_OK, http_status, psprintf("artifact %s verified", c->uri),
			   psprintf("artifact %s verified: sha256 %s (%s)", c->uri, got, source));
	else
		decide(c, MLPLAT_ARTIFACT_FAILED, http_status, psprintf(NOT_VERIFIED, c->uri),
			   psprintf("artifact %s digest mismatch: registered sha256 %s, object store has %s (%s)",
						c->uri, c->want_sha256, got, source));
}

/* The object store as observe.h's peer: its 404 says there is no such object; bodies are not JSON to a check. */
static bool
store_gone(int status, const MlJsonValue *body)
{
	(void) body;
	return status == 404;
}

const MlplatObservePeer mlplat_object_store_peer = { "object store", store_gone, NULL, false };
static const MlplatObservePeer store_raw = { "object store", store_gone, NULL, true };

static const char *const ask_names[] = {
	[ML_ARTIFACT_ASK_HEAD] = "HEAD",
	[ML_ARTIFACT_ASK_HASH] = "download",
	[ML_ARTIFACT_ASK_FETCH] = "GET",
	[ML_ARTIFACT_ASK_DELETE] = "DELETE",
};

/*
 * Read the store's answer to what a check asked (o), classify it once
 * (mlplat_observe_got) and take the verdict ml_artifact_next derives from
 * that, with its texts.  Returns the step: READ and ASK_GET leave the check
 * undecided (the caller reads the answer, or asks a GET).
 */
static MlArtifactStep
answer(MlplatArtifactCheck *c, MlplatObservedObject *o, MlArtifactAsk ask)
{
	const MlplatHttpRequest *r = o->get;
	MlArtifactAnswer a = { 0 };
	MlArtifactNext n;
	bool artifact = ask == ML_ARTIFACT_ASK_HEAD || ask == ML_ARTIFACT_ASK_HASH;
	char *reason = NULL;
	char *detail = NULL;

	mlplat_observe_got(o, NULL);
	a.ask = ask;
	a.seen = o->state == MLPLAT_OBSERVED_FOUND	? ML_ARTIFACT_SEEN_FOUND
			 : o->state == MLPLAT_OBSERVED_GONE ? ML_ARTIFACT_SEEN_GONE
												: ML_ARTIFACT_SEEN_ERROR;
	a.permanent = o->permanent;
	a.too_big = c->priv->too_big;
	a.http_status = o->http_status;
	a.retry_after_s = o->retry_after_s;
	a.attempts = c->attempts;
	a.entity_id = c->deployment_id;
	a.backoff_max_ms = mlplat_backoff_max_ms;
	n = ml_artifact_next(&a);
	switch (n.step)
	{
		case ML_ARTIFACT_STEP_READ:
		case ML_ARTIFACT_STEP_ASK_GET:
			return n.step;
		case ML_ARTIFACT_STEP_DONE:
			reason = psprintf("object %s deleted", c->uri);
			break;
		case ML_ARTIFACT_STEP_RETRY:
			reason = psprintf("checking artifact %s: the object store did not answer; retrying", c->uri);
			detail = r->failed ? psprintf("%s of artifact %s failed: %s; retrying", ask_names[ask], c->uri, r->error)
							   : psprintf("%s of artifact %s answered HTTP %d; retrying", ask_names[ask], c->uri,
										  r->status);
			break;
		case ML_ARTIFACT_STEP_TOO_BIG:
			if (artifact)
				detail = psprintf("artifact %s is larger than mlplat.artifact_hash_max_bytes (%d kB) and the object "
								  "store gives no SHA-256 for it",
								  c->uri, mlplat_artifact_hash_max_kb);
			else
				reason = psprintf("object %s is larger than %zu bytes", c->uri, c->priv->fetch_max);
			break;
		case ML_ARTIFACT_STEP_MISSING:
			detail = psprintf("%s %s not found in the object store (HTTP 404)", artifact ? "artifact" : "object",
							  c->uri);
			break;
		case ML_ARTIFACT_STEP_REFUSED:
			if (ask == ML_ARTIFACT_ASK_DELETE)
				reason = psprintf("object store refused to delete %s (HTTP %d)", c->uri, r->status);
			else if (artifact)
			{
				char code[ML_S3_ERROR_CODE_MAX];
				bool has_code = ml_s3_error_code(r->resp_body, code, sizeof(code));

				/* the store's own error code (SignatureDoesNotMatch, AccessDenied, ...) tells an administrator why */
				detail = psprintf("object store refused artifact %s (HTTP %d%s%s)", c->uri, r->status,
								  has_code ? " " : "", has_code ? code : "");
			}
			else
				reason = psprintf("object store refused object %s (HTTP %d)", c->uri, r->status);
			break;
	}
	/* an artifact's failure tells the tenant only that it is not verified (see the top) */
	if (reason == NULL)
		reason = artifact && n.verdict == MLPLAT_ARTIFACT_FAILED ? psprintf(NOT_VERIFIED, c->uri) : detail;
	decide(c, n.verdict, r->status, reason, detail);
	c->retry_ms = n.retry_ms;
	return n.step;
}

/* ---------------------------------------------------------------- requests */

static void
free_md(void *arg)
{
	MlplatArtifactPriv *p = arg;

	if (p->md)
		EVP_MD_CTX_free(p->md);
	p->md = NULL;
}

/* May a sink that holds have bytes take len more, at most max?  If not, the body is too big. */
static bool
sink_room(MlplatArtifactPriv *p, uint64 have, uint64 len, uint64 max)
{
	if (have + len <= max)
		return true;
	p->too_big = true;
	return false;
}

/* libcurl write path: no ereport, no palloc */
static bool
hash_sink(void *arg, const char *data, size_t len)
{
	MlplatArtifactPriv *p = arg;

	if (!sink_room(p, p->hashed, len, p->max_bytes))
		return false;
	p->hashed += len;
	return EVP_DigestUpdate(p->md, data, len) == 1;
}

/* libcurl write path of a fetch: no ereport, no palloc (the buffer is allocated before) */
static bool
fetch_sink(void *arg, const char *data, size_t len)
{
	MlplatArtifactPriv *p = arg;

	if (!sink_room(p, p->fetched_len, len, p->fetch_max))
		return false;
	memcpy(p->fetched + p->fetched_len, data, len);
	p->fetched_len += len;
	p->fetched[p->fetched_len] = '\0';
	return true;
}

/*
 * Add a signed (when credentials are set) request for s3://bucket/key at the endpoint
 * origin/authority/base_path to batch; checksum asks a HEAD for the stored SHA-256.
 */
static MlplatHttpRequest *
signed_request(MlplatHttpBatch *batch, const char *origin, const char *authority, const char *base_path,
			   const char *bucket, const char *key, const char *method, bool checksum)
{
	size_t nb = ml_s3_uri_encode(bucket, false, NULL, 0);
	size_t nk = ml_s3_uri_encode(key, true, NULL, 0);
	char *eb = palloc(nb + 1);
	char *ek = palloc(nk + 1);
	char *path;
	MlplatHttpRequest *r;

	ml_s3_uri_encode(bucket, false, eb, nb + 1);
	ml_s3_uri_encode(key, true, ek, nk + 1);
	path = psprintf("%s/%s/%s", base_path, eb, ek);
	r = mlplat_http_batch_add(batch, method, psprintf("%s%s", origin, path));
	if (mlplat_s3_ca_file && mlplat_s3_ca_file[0])
		r->ca_file = mlplat_s3_ca_file;
	/* Host is set explicitly so the signed value and the sent one cannot differ */
	mlplat_http_request_add_header(r, "Host", authority);
	if (checksum)
		mlplat_http_request_add_header(r, "x-amz-checksum-mode", "ENABLED");
	if (s3cfg.loaded)
	{
		MlS3Header hs[6];
		int n = 0;
		char date[17];
		char auth[4096];
		MlSigV4Input in;

		ml_sigv4_amz_date((long long) time(NULL), date);
		hs[n++] = (MlS3Header){ "host", authority };
		hs[n++] = (MlS3Header){ "x-amz-content-sha256", EMPTY_SHA256 };
		hs[n++] = (MlS3Header){ "x-amz-date", date };
		if (checksum)
			hs[n++] = (MlS3Header){ "x-amz-checksum-mode", "ENABLED" };
		if (s3cfg.cred.session_token[0])
			hs[n++] = (MlS3Header){ "x-amz-security-token", s3cfg.cred.session_token };
		memset(&in, 0, sizeof(in));
		in.method = method;
		in.canonical_uri = path;
		in.canonical_query = "";
		in.headers = hs;
		in.nheaders = n;
		in.payload_hash = EMPTY_SHA256;
		in.amz_date = date;
		in.region = mlplat_s3_region && mlplat_s3_region[0] ? mlplat_s3_region : "us-east-1";
		in.service = "s3";
		in.access_key_id = s3cfg.cred.access_key_id;
		in.secret_access_key = s3cfg.cred.secret_access_key;
		if (!ml_sigv4_authorization(&in, auth, sizeof(auth), NULL, 0))
			elog(ERROR, "mlplat: could not sign the object store request for s3://%s/%s", bucket, key);
		mlplat_http_request_add_header(r, "x-amz-content-sha256", EMPTY_SHA256);
		mlplat_http_request_add_header(r, "x-amz-date", date);
		if (s3cfg.cred.session_token[0])
			mlplat_http_request_add_header(r, "x-amz-security-token", s3cfg.cred.session_token);
		mlplat_http_request_add_header(r, "Authorization", auth);
		explicit_bzero(auth, sizeof(auth));
	}
	return r;
}

/* Add a signed request for c's object to batch, its answer to be read through o. */
static MlplatHttpRequest *
object_request(MlplatHttpBatch *batch, MlplatArtifactCheck *c, const char *method, MlplatObservedObject *o)
{
	MlplatArtifactPriv *p = c->priv;
	bool head = strcmp(method, "HEAD") == 0;
	MlplatHttpRequest *r = signed_request(batch, p->origin, p->authority, p->base_path, p->bucket, p->key,
										  method, head);

	mlplat_http_request_keep_header(r, "ETag");
	if (head)
	{
		mlplat_http_request_keep_header(r, "Content-Length");
		mlplat_http_request_keep_header(r, "x-amz-checksum-sha256");
	}
	r->user = c;
	mlplat_observe_peer(o, r, &store_raw);
	return r;
}

MlplatHttpRequest *
mlplat_s3_object_request(MlplatHttpBatch *batch, const char *uri, const char *method, char **why)
{
	char *origin;
	char *authority;
	char *base_path;
	char bucket[ML_S3_BUCKET_MAX + 1];
	char key[ML_S3_KEY_MAX + 1];
	const char *bad;

	*why = NULL;
	if (mlplat_s3_endpoint == NULL || mlplat_s3_endpoint[0] == '\0')
	{
		*why = pstrdup("no object store configured (set mlplat.s3_endpoint)");
		return NULL;
	}
	if ((bad = split_endpoint(mlplat_s3_endpoint, &origin, &authority, &base_path)) != NULL)
	{
		*why = pstrdup(bad);
		return NULL;
	}
	if ((*why = refresh_credentials()) != NULL)
		return NULL;
	if ((bad = ml_s3_parse_uri(uri, bucket, sizeof(bucket), key, sizeof(key))) != NULL)
	{
		*why = psprintf("object URI %s is unusable: %s", uri, bad);
		return NULL;
	}
	return signed_request(batch, origin, authority, base_path, bucket, key, method, false);
}

/* ---------------------------------------------------------------- the steps */

MlplatArtifactCheck *
mlplat_artifact_check_new(int64 deployment_id, int revision, int attempts)
{
	MlplatArtifactCheck *c = palloc0(sizeof(MlplatArtifactCheck));

	c->deployment_id = deployment_id;
	c->revision = revision;
	c->attempts = attempts;
	c->retry_ms = -1;
	c->priv = palloc0(sizeof(MlplatArtifactPriv));
	c->priv->size = -1;
	return c;
}

/*
 * A check of an object the caller names with the digest it must have (a builder's
 * output and its attested SHA-256): no revision to claim it from.
 */
MlplatArtifactCheck *
mlplat_artifact_check_new_object(const char *uri, const char *want_sha256, int attempts)
{
	MlplatArtifactCheck *c = mlplat_artifact_check_new(0, 0, attempts);

	c->uri = pstrdup(uri);
	c->want_sha256 = pstrdup(want_sha256);
	c->priv->preset = true;
	return c;
}

/*
 * Read a small object (an attestation) whole, at most max_bytes: the verdict is OK with
 * body/body_len set, FAILED when it is missing, refused or larger, RETRY/WAIT as for a
 * check.  The same signing and endpoint rules as the digest checks.
 */
MlplatArtifactCheck *
mlplat_artifact_fetch_new(const char *uri, size_t max_bytes, int attempts)
{
	MlplatArtifactCheck *c = mlplat_artifact_check_new(0, 0, attempts);

	c->uri = pstrdup(uri);
	c->priv->preset = true;
	c->priv->fetch_max = max_bytes;
	return c;
}

/* Delete a named object (partial outputs of a failed build): OK when gone, 404 included. */
MlplatArtifactCheck *
mlplat_artifact_delete_new(const char *uri, int attempts)
{
	MlplatArtifactCheck *c = mlplat_artifact_check_new(0, 0, attempts);

	c->uri = pstrdup(uri);
	c->priv->preset = true;
	c->priv->remove = true;
	return c;
}

static void
after_fetch(MlplatArtifactCheck *c)
{
	MlplatArtifactPriv *p = c->priv;
	MlplatHttpRequest *r = p->get.get;

	if (answer(c, &p->get, ML_ARTIFACT_ASK_FETCH) != ML_ARTIFACT_STEP_READ)
		return;
	c->body = p->fetched;
	c->body_len = p->fetched_len;
	decide(c, MLPLAT_ARTIFACT_OK, r->status, psprintf("object %s read (%zu bytes)", c->uri, p->fetched_len), NULL);
}

/* The seam (seam.h): mlplat.artifact_check_claim read into ArtifactClaim */
typedef struct ArtifactClaim
{
	/* ord: 1-based position in the arrays passed; etags: known digests of the URI, etags[i] has sha256s[i] */
	MLPLAT_SEAM_MEMBERS(artifact_check_claim)
} ArtifactClaim;

MLPLAT_SEAM_GLOBAL(mlplat_artifact_claim_seam, artifact_check_claim, ArtifactClaim);

static void
claim(List *checks)
{
	MemoryContext cxt = CurrentMemoryContext;
	int n = list_length(checks);
	Datum *ids = palloc(sizeof(Datum) * n);
	Datum *revs = palloc(sizeof(Datum) * n);
	MlplatArtifactCheck **byord = palloc(sizeof(MlplatArtifactCheck *) * n);
	List *rows;
	ListCell *lc;
	int i = 0;

	foreach (lc, checks)
	{
		MlplatArtifactCheck *c = lfirst(lc);

		if (c->priv->preset)
			continue;
		byord[i] = c;
		ids[i] = Int64GetDatum(c->deployment_id);
		revs[i++] = Int32GetDatum(c->revision);
	}
	n = i;
	if (n == 0)
		return; /* every check named its object itself */
	mlplat_txn_begin();
	MemoryContextSwitchTo(cxt);
	rows = mlplat_seam_claim(&mlplat_artifact_claim_seam, cxt, "SELECT c FROM mlplat._artifact_claim($1, $2) c", 2,
							 (Oid[]){ INT8ARRAYOID, INT4ARRAYOID },
							 (Datum[]){ PointerGetDatum(construct_array(ids, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
										PointerGetDatum(construct_array(revs, n, INT4OID, 4, true, TYPALIGN_INT)) },
							 sizeof(ArtifactClaim));
	MemoryContextSwitchTo(cxt);
	foreach (lc, rows)
	{
		ArtifactClaim *row = lfirst(lc);
		MlplatArtifactCheck *c;

		if (row->ord < 1 || row->ord > n)
			elog(ERROR, "mlplat: artifact claim returned position %lld of %d", (long long) row->ord, n);
		c = byord[row->ord - 1];
		c->uri = row->artifact_uri;
		c->want_sha256 = row->artifact_sha256;
		c->priv->etags = row->etags;
		c->priv->sha256s = row->sha256s;
	}
	mlplat_txn_commit();
	MemoryContextSwitchTo(cxt);
}

static int
check_uri_cmp(const ListCell *a, const ListCell *b)
{
	const MlplatArtifactCheck *x = lfirst(a);
	const MlplatArtifactCheck *y = lfirst(b);

	return strcmp(x->uri ? x->uri : "", y->uri ? y->uri : "");
}

void
mlplat_artifact_begin(List *checks, MlplatHttpBatch *batch)
{
	List *by_uri;
	MlplatArtifactCheck *prev = NULL;
	ListCell *lc;
	char *origin = NULL;
	char *authority = NULL;
	char *base_path = NULL;
	const char *bad_endpoint = NULL;
	char *bad_credentials = NULL;
	bool configured = mlplat_s3_endpoint && mlplat_s3_endpoint[0];
	bool logged = false;

	if (checks == NIL)
		return;
	claim(checks);
	if (configured)
	{
		bad_endpoint = split_endpoint(mlplat_s3_endpoint, &origin, &authority, &base_path);
		bad_credentials = refresh_credentials();
	}
	/* sorted by URI, so thousands of deployments of one artifact cost one HEAD */
	by_uri = list_copy(checks);
	list_sort(by_uri, check_uri_cmp);
	foreach (lc, by_uri)
	{
		MlplatArtifactCheck *c = lfirst(lc);
		const char *why;

		if (c->uri == NULL)
		{
			/* the revision went away between the claims: the next pass re-reads */
			decide(c, MLPLAT_ARTIFACT_RETRY, 0, psprintf("revision %d has no model version", c->revision), NULL);
			c->retry_ms = 1000;
			continue;
		}
		if (strncmp(c->uri, "s3://", 5) != 0)
		{
			decide(c, MLPLAT_ARTIFACT_FAILED, 0,
				   psprintf("artifact %s cannot be verified: only s3:// artifacts in the object store are checked",
							c->uri),
				   NULL);
			continue;
		}
		why = ml_s3_parse_uri(c->uri, c->priv->bucket, sizeof(c->priv->bucket), c->priv->key, sizeof(c->priv->key));
		if (why)
		{
			decide(c, MLPLAT_ARTIFACT_FAILED, 0, psprintf("artifact URI %s is refused: %s", c->uri, why), NULL);
			continue;
		}
		if (!configured)
		{
			decide(c, MLPLAT_ARTIFACT_WAIT, 0, psprintf(NOT_READY, c->uri),
				   psprintf("waiting to verify artifact %s: no object store configured (set mlplat.s3_endpoint)", c->uri));
			continue;
		}
		if (bad_endpoint || bad_credentials)
		{
			decide(c, MLPLAT_ARTIFACT_WAIT, 0, psprintf(NOT_READY, c->uri),
				   psprintf("waiting to verify artifact %s: %s", c->uri, bad_endpoint ? bad_endpoint : bad_credentials));
			if (!logged)
			{
				/* the setup detail (a file, a setting) is for the server log, not the tenant's row */
				ereport(LOG, (errmsg("mlplat: artifact checks wait: %s", bad_endpoint ? bad_endpoint : bad_credentials)));
				logged = true;
			}
			continue;
		}
		if (c->priv->remove)
		{
			c->priv->origin = origin;
			c->priv->authority = authority;
			c->priv->base_path = base_path;
			(void) object_request(batch, c, "DELETE", &c->priv->get);
			continue;
		}
		if (c->priv->fetch_max > 0)
		{
			MlplatArtifactPriv *p = c->priv;
			MlplatHttpRequest *r;

			p->origin = origin;
			p->authority = authority;
			p->base_path = base_path;
			p->fetched = palloc(p->fetch_max + 1);
			p->fetched[0] = '\0';
			r = object_request(batch, c, "GET", &p->get);
			r->sink = fetch_sink;
			r->sink_arg = p;
			r->max_body = 64 * 1024;
			continue;
		}
		if (prev && strcmp(prev->uri, c->uri) == 0)
		{
			c->priv->leader = prev;
			continue;
		}
		prev = c;
		c->priv->origin = origin;
		c->priv->authority = authority;
		c->priv->base_path = base_path;
		c->priv->max_bytes = (uint64) mlplat_artifact_hash_max_kb * 1024;
		(void) object_request(batch, c, "HEAD", &c->priv->head);
	}
}

/* What the HEAD says; may leave the check undecided (a download is needed). */
static void
after_head(MlplatArtifactCheck *c)
{
	MlplatArtifactPriv *p = c->priv;
	MlplatHttpRequest *r = p->head.get;
	const char *v;
	char hex[ML_SHA256_HEX_LEN + 1];
	ListCell *le;
	ListCell *ls;

	/* a refused HEAD (not a 404) stays undecided: the GET that follows is refused too and names the code */
	if (answer(c, &p->head, ML_ARTIFACT_ASK_HEAD) != ML_ARTIFACT_STEP_READ)
		return;
	v = mlplat_http_response_header(r, "ETag");
	p->etag = v && v[0] ? pstrdup(v) : NULL;
	v = mlplat_http_response_header(r, "Content-Length");
	if (v)
		p->size = strtoll(v, NULL, 10);
	v = mlplat_http_response_header(r, "x-amz-checksum-sha256");
	if (v && ml_s3_checksum_b64_to_hex(v, hex))
	{
		judge(c, hex, "x-amz-checksum-sha256", r->status);
		p->remember = p->etag != NULL;
		return;
	}
	if (p->etag)
		forboth (le, p->etags, ls, p->sha256s)
			if (lfirst(le) && lfirst(ls) && strcmp(lfirst(le), p->etag) == 0)
			{
				c->cached = true;
				judge(c, lfirst(ls), "cached download", r->status);
				return;
			}
	if (p->size >= 0 && (uint64) p->size > p->max_bytes)
		decide(c, MLPLAT_ARTIFACT_FAILED, r->status, psprintf(NOT_VERIFIED, c->uri),
			   psprintf("artifact %s is %lld bytes and the object store gives no SHA-256 for it; "
						"hashing it would read more than mlplat.artifact_hash_max_bytes (%d kB)",
						c->uri, (long long) p->size, mlplat_artifact_hash_max_kb));
	/* else undecided: download it */
}

static void
after_get(MlplatArtifactCheck *c)
{
	MlplatArtifactPriv *p = c->priv;
	MlplatHttpRequest *r = p->get.get;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[ML_SHA256_HEX_LEN + 1];
	const char *etag;

	if (answer(c, &p->get, ML_ARTIFACT_ASK_HASH) != ML_ARTIFACT_STEP_READ)
		return;
	if (EVP_DigestFinal_ex(p->md, md, &mdlen) != 1 || mdlen != 32)
		elog(ERROR, "mlplat: SHA-256 of artifact %s failed", c->uri);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	/* the bytes hashed belong to the GET's ETag (the object may have been replaced since the HEAD) */
	etag = mlplat_http_response_header(r, "ETag");
	p->etag = etag && etag[0] ? pstrdup(etag) : NULL;
	p->size = (int64) p->hashed;
	judge(c, hex, "download", r->status);
	p->remember = p->etag != NULL;
}

static void
remember(List *checks)
{
	MemoryContext cxt = CurrentMemoryContext;
	ListCell *lc;
	bool any = false;

	foreach (lc, checks)
		any |= ((MlplatArtifactCheck *) lfirst(lc))->priv->remember;
	if (!any)
		return;
	mlplat_txn_begin();
	foreach (lc, checks)
	{
		MlplatArtifactCheck *c = lfirst(lc);
		MlplatArtifactPriv *p = c->priv;

		if (!p->remember)
			continue;
		if (SPI_execute_with_args("SELECT mlplat._artifact_remember($1, $2, $3, $4, $5)", 5,
								  (Oid[]){ TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID },
								  (Datum[]){ CStringGetTextDatum(c->uri), CStringGetTextDatum(p->etag),
											 CStringGetTextDatum(c->got_sha256), Int64GetDatum(p->size),
											 CStringGetTextDatum(c->source) },
								  (const char[]){ ' ', ' ', ' ', p->size >= 0 ? ' ' : 'n', ' ' },
								  false, 0) != SPI_OK_SELECT)
			elog(ERROR, "mlplat: could not remember the digest of artifact %s", c->uri);
	}
	mlplat_txn_commit();
	MemoryContextSwitchTo(cxt);
}

void
mlplat_artifact_finish(MlplatPass *pass, List *checks)
{
	ListCell *lc;
	MlplatHttpBatch *batch = NULL;

	foreach (lc, checks)
	{
		MlplatArtifactCheck *c = lfirst(lc);

		if (c->verdict != MLPLAT_ARTIFACT_UNDECIDED || c->priv->get.get == NULL)
			continue;
		if (c->priv->remove)
			(void) answer(c, &c->priv->get, ML_ARTIFACT_ASK_DELETE);
		else if (c->priv->fetch_max > 0)
			after_fetch(c);
	}
	foreach (lc, checks)
	{
		MlplatArtifactCheck *c = lfirst(lc);
		MlplatArtifactPriv *p = c->priv;
		MlplatHttpRequest *r;

		if (c->verdict != MLPLAT_ARTIFACT_UNDECIDED || p->head.get == NULL)
			continue;
		after_head(c);
		if (c->verdict != MLPLAT_ARTIFACT_UNDECIDED)
			continue;
		/* no digest from the store or the cache: stream the object through SHA-256 */
		if (batch == NULL)
			batch = mlplat_http_batch_create(CurrentMemoryContext);
		p->md = EVP_MD_CTX_new();
		if (p->md == NULL || EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) != 1)
		{
			free_md(p);
			elog(ERROR, "mlplat: could not start a SHA-256 digest");
		}
		{
			MemoryContextCallback *cb = palloc0(sizeof(MemoryContextCallback));

			/* an ERROR later in the pass must not leak OpenSSL's context */
			cb->func = free_md;
			cb->arg = p;
			MemoryContextRegisterResetCallback(CurrentMemoryContext, cb);
		}
		r = object_request(batch, c, "GET", &p->get);
		r->sink = hash_sink;
		r->sink_arg = p;
		r->max_body = 64 * 1024; /* error answers only: the object itself goes to the sink */
		r->timeout_ms = Max(mlplat_artifact_hash_timeout_ms, mlplat_http_timeout_ms);
	}
	if (batch)
	{
		mlplat_http_batch_run(batch);
		foreach (lc, checks)
		{
			MlplatArtifactCheck *c = lfirst(lc);

			if (c->verdict == MLPLAT_ARTIFACT_UNDECIDED && c->priv->get.get)
				after_get(c);
			free_md(c->priv);
		}
	}
	/* the other checks of a URI: judge the digest found against their own registered one */
	foreach (lc, checks)
	{
		MlplatArtifactCheck *c = lfirst(lc);
		MlplatArtifactCheck *l = c->priv->leader;

		if (l == NULL || c->verdict != MLPLAT_ARTIFACT_UNDECIDED)
			continue;
		c->cached = l->cached;
		if (l->got_sha256)
			judge(c, l->got_sha256, l->source, l->http_status);
		else
		{
			decide(c, l->verdict, l->http_status, l->reason, l->detail);
			c->retry_ms = l->retry_ms;
		}
	}
	remember(checks);
}

void
mlplat_artifact_run(MlplatPass *pass, List *checks, MlplatHttpBatch *batch)
{
	mlplat_artifact_begin(checks, batch);
	mlplat_http_batch_run(batch);
	mlplat_artifact_finish(pass, checks);
}
