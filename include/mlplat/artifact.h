/*
 * artifact.h — verify a revision's artifact in the object store before its
 * first apply (src/reconcile/artifact.c; the pure parts are in s3.h).
 *
 * The deployments pass uses it in three steps that never hold a transaction
 * across HTTP and never make the pass's other deployments wait for a download:
 *
 *     c = mlplat_artifact_check_new(id, revision, attempts);   -- per first apply
 *     mlplat_artifact_begin(checks, batch);   -- short claim; a HEAD per check joins batch
 *     mlplat_http_batch_run(batch);           -- together with the pass's other writes
 *     mlplat_artifact_finish(pass, checks);   -- downloads and hashes what needs it, caches
 *     switch (c->verdict) ...
 */
#ifndef MLPLAT_ARTIFACT_H
#define MLPLAT_ARTIFACT_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/artifact_verdict.h"
#include "mlplat/http.h"
#include "mlplat/reconcile.h"

typedef struct MlplatArtifactCheck
{
	/* in */
	int64 deployment_id;
	int revision;
	int attempts; /* the deployment's failed attempts so far (backoff) */

	/* out (after mlplat_artifact_finish) */
	MlplatArtifactVerdict verdict;
	char *uri;			/* the model version's artifact_uri */
	char *want_sha256;	/* registered digest */
	char *got_sha256;	/* digest found, or NULL */
	const char *source; /* where got_sha256 came from */
	char *reason;		/* one line for the tenant: status_reason, last_error, the span */
	char *detail;		/* for administrators: the ledger (digests, sizes, HTTP, files) */
	int http_status;	/* of the deciding request, 0 if none */
	int retry_ms;		/* RETRY and WAIT: when to look again */
	bool cached;		/* decided from mlplat.artifact_digests */
	char *body;			/* a fetch's object (NUL-terminated), when OK */
	size_t body_len;

	/* private to artifact.c */
	struct MlplatArtifactPriv *priv;
} MlplatArtifactCheck;

/*
 * The seam of the claim (mlplat.artifact_check_claim): in the seam list of every kind
 * that checks artifacts, so its workers refuse to run when library and SQL disagree.
 */
struct MlplatSeam;
extern struct MlplatSeam mlplat_artifact_claim_seam;

extern MlplatArtifactCheck *mlplat_artifact_check_new(int64 deployment_id, int revision, int attempts);
/* A check of a named object against a given digest (no revision to claim it from). */
extern MlplatArtifactCheck *mlplat_artifact_check_new_object(const char *uri, const char *want_sha256, int attempts);
/* Read a small named object whole (at most max_bytes): c->body when the verdict is OK. */
extern MlplatArtifactCheck *mlplat_artifact_fetch_new(const char *uri, size_t max_bytes, int attempts);
/* Delete a named object: OK once it is gone (404 included). */
extern MlplatArtifactCheck *mlplat_artifact_delete_new(const char *uri, int attempts);

/* Claim (a short transaction: none may be open) and add one HEAD per check to batch. */
extern void mlplat_artifact_begin(List *checks, MlplatHttpBatch *batch);

/*
 * After batch ran: decide from the HEADs, download and hash (in a batch of its
 * own) what the store gives no digest for and the cache does not know, and
 * remember the digests found (a short transaction).  Sets every verdict.
 */
extern void mlplat_artifact_finish(MlplatPass *pass, List *checks);

/* The three steps at once, when nothing runs between them: begin, run batch (with its other requests), finish. */
extern void mlplat_artifact_run(MlplatPass *pass, List *checks, MlplatHttpBatch *batch);

/*
 * A request (GET, DELETE, ...) for the object at an s3:// URI in the configured object store,
 * signed with its credentials, added to batch; the caller sets bounds (max_body) and reads
 * the answer.  NULL with *why (palloc'd) when the store or the URI is unusable.
 */
extern MlplatHttpRequest *mlplat_s3_object_request(MlplatHttpBatch *batch, const char *uri, const char *method,
												   char **why);

/*
 * The object store as a peer of observe.h, for a read of such a request whose
 * body is JSON (a lab's output): 404 is gone.  The checks above read theirs
 * the same way, their bodies unparsed.
 */
struct MlplatObservePeer;
extern const struct MlplatObservePeer mlplat_object_store_peer;

#endif /* MLPLAT_ARTIFACT_H */
