/*
 * util.c — small helpers of a pass: its memory context, trace ids, the
 * status line, the drifted-paths line.  SQL, ledger and observation have files of their own.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/json.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/reconcile_util.h"

/* the running pass's own context (set by the worker), see reconcile_util.h */
MemoryContext mlplat_pass_memory_context = NULL;

char *
mlplat_object_path(const char *ns, const char *name)
{
	return psprintf("%s/%s", ns, name);
}

void
mlplat_json_append_text(StringInfo s, const char *val)
{
	if (val)
		escape_json(s, val);
	else
		appendStringInfoString(s, "null");
}

char *
mlplat_trace_id_of(const char *traceparent)
{
	return (traceparent && strlen(traceparent) == 55) ? pnstrdup(traceparent + 3, 32) : NULL;
}

void
mlplat_pass_note_lost(MlplatPass *pass, int n)
{
	/* an intent or another leader got there first: the next pass re-reads */
	if (n > 0)
		snprintf(pass->status, sizeof(pass->status), "%d write-back(s) lost a compare-and-swap; re-reading", n);
}

void
mlplat_pass_wake_within(MlplatPass *pass, int ms)
{
	if (pass->next_pass_ms <= 0 || ms < pass->next_pass_ms)
		pass->next_pass_ms = Max(ms, 50);
}

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

char *
mlplat_drift_paths_line(const MlSpecDiff *diff)
{
	StringInfoData s;

	initStringInfo(&s);
	for (size_t i = 0; i < diff->count && i < 5; i++)
		appendStringInfo(&s, "%s%s", i ? ", " : "", diff->entries[i].path);
	if (diff->count > 5)
		appendStringInfo(&s, " and %zu more", diff->count - 5);
	return s.data;
}
