/*
 * retry.h — when a row's failed request is tried again, and what its failure
 * leaves on the row.  The delays themselves are backoff.h's (pure); this adds
 * the settings and the Kubernetes outcome, which only the backend has.
 */
#ifndef MLPLAT_RETRY_H
#define MLPLAT_RETRY_H

#include "postgres.h"

#include "mlplat/kube.h"

/* permanent failures (403, 422, ...) are retried slowly: a later grant heals them */
#define MLPLAT_PERMANENT_RETRY_MS 30000

/*
 * When to try a row's failed request again, in ms: a permanent failure after
 * MLPLAT_PERMANENT_RETRY_MS (no more than mlplat.backoff_max_ms), anything
 * else after a backoff from 500 ms by the row's attempts, never before the
 * server's Retry-After, jittered by the row's id (backoff.h).
 */
extern int mlplat_retry_ms(bool permanent, int attempts, int64 id, int retry_after_s);

/*
 * What a write the cluster did not take (res: any outcome but OK) leaves on
 * its row: the ledger outcome ("FAILED" for a permanent failure, else
 * "RETRY"), the line a tenant may read, the administrators' line when it is
 * not that one (else NULL), and when to try again (mlplat_retry_ms).
 */
extern void mlplat_write_failed(const MlplatKubeResult *res, int attempts, int64 id, const char **ledger_outcome,
								char **error, char **ledger_error, int *retry_ms);

#endif /* MLPLAT_RETRY_H */
