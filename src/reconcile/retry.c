/*
 * retry.c — when a row's failed request is tried again (retry.h).
 */
#include "postgres.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/retry.h"

int
mlplat_retry_ms(bool permanent, int attempts, int64 id, int retry_after_s)
{
	if (permanent)
		return Min(MLPLAT_PERMANENT_RETRY_MS, mlplat_backoff_max_ms);
	return (int) mlplat_backoff_delay_ms(attempts + 1, 500, mlplat_backoff_max_ms, retry_after_s,
										 (uint32) id ^ (uint32) attempts);
}

void
mlplat_write_failed(const MlplatKubeResult *res, int attempts, int64 id, const char **ledger_outcome, char **error,
					char **ledger_error, int *retry_ms)
{
	bool permanent = res->outcome == MLPLAT_KUBE_FAILED;

	*ledger_outcome = permanent ? "FAILED" : "RETRY";
	*error = mlplat_kube_tenant_line(res);
	*ledger_error = res->tenant_message ? res->message : NULL;
	*retry_ms = mlplat_retry_ms(permanent, attempts, id, permanent ? 0 : res->retry_after_s);
}
