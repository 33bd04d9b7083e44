/*
 * retention.h — the retention job run by a leader when pg_cron does not run it.
 *
 * The projects leader calls it after its passes (one per database, fenced by
 * that leader's epoch).  mlplat._retention_tick decides in SQL whether the
 * purge is due: every mlplat.retention_interval without pg_cron's job, and
 * with the job active only after it missed two runs, so it never runs twice.
 */
#ifndef MLPLAT_RETENTION_H
#define MLPLAT_RETENTION_H

#include "mlplat/reconcile.h"

/* Ask at most once a minute (or each interval, if shorter); purge when due. */
extern void mlplat_retention_pass(MlplatPass *pass);

#endif /* MLPLAT_RETENTION_H */
