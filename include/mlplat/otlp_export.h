/*
 * otlp_export.h — send recorded spans to an OTLP/HTTP collector.
 *
 * The pass of the kind span_export: its leader is the one exporter per
 * database, fenced by that leader's epoch.  With mlplat.otlp_endpoint empty
 * it sends nothing and says so in the health view.
 */
#ifndef MLPLAT_OTLP_EXPORT_H
#define MLPLAT_OTLP_EXPORT_H

#include "mlplat/http.h"
#include "mlplat/reconcile.h"

/*
 * Send unexported spans in batches of mlplat.otlp_batch_size to
 * <endpoint>/v1/traces (OTLP/HTTP JSON), as the OTLP specification says: a 2xx
 * marks the batch exported (spans a partial success rejects are counted as
 * dropped); 429, 502, 503, 504 and transport errors are retried with backoff
 * that honours Retry-After, sending the same spans again; any other answer
 * (400 above all) drops the batch, counts it and never sends it again.  Sets
 * pass->next_pass_ms to when it wants to run again.
 */
extern void mlplat_otlp_export_pass(MlplatPass *pass);

/* Its seam (seam.h): the batch it reads, mlplat.span_export_batch. */
struct MlplatSeam;
extern struct MlplatSeam *const mlplat_span_export_seams[];

/*
 * Add the headers of mlplat.otlp_headers_file to req (re-reading the file when
 * it changed).  Returns NULL, or a palloc'd reason (unreadable or malformed
 * file; never a header value) and then nothing must be sent.
 */
extern char *mlplat_otlp_headers_apply(MlplatHttpRequest *req);

/* Does the OTLP specification let a client retry after this HTTP status? */
extern bool mlplat_otlp_retryable(int status);

#endif /* MLPLAT_OTLP_EXPORT_H */
