/*
 * worker.h — reconciler background workers.
 *
 * Each kind runs mlplat.replicas workers; one leads (a session userlock on
 * the kind, which no SQL can take), the others stand by.  See src/worker/ for the loop.
 */
#ifndef MLPLAT_WORKER_H
#define MLPLAT_WORKER_H

#include "postgres.h"

/* Register every kind's replicas; only from _PG_init while preloading. */
extern void mlplat_register_workers(void);

extern PGDLLEXPORT void mlplat_worker_main(Datum main_arg);

/* DROP DATABASE of mlplat.database: see src/worker/dropdb.c */
extern void mlplat_install_utility_hook(void);
extern bool mlplat_database_unavailable(void);

#endif /* MLPLAT_WORKER_H */
