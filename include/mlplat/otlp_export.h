/*
 * otlp_export.h — send recorded spans to an OTLP/HTTP collector.
 *
 * Run by the leader of the projects kind after each of its passes (one
 * exporter per database, fenced by that leader's epoch).  With
 * mlplat.otlp_endpoint empty it does nothing at all.
 */
#ifndef MLPLAT_OTLP_EXPORT_H
#define MLPLAT_OTLP_EXPORT_H

#include "mlplat/reconcile.h"

/*
 * Send unexported spans in batches of mlplat.otlp_batch_size to
 * <endpoint>/v1/traces (OTLP/HTTP JSON), marking each batch exported on a 2xx;
 * after a failure (transport, timeout, non-2xx) wait with backoff and send the
 * same spans again.  Sets pass->next_pass_ms to when it wants to run again.
 */
extern void mlplat_otlp_export_pass(MlplatPass *pass);

#endif							/* MLPLAT_OTLP_EXPORT_H */
