/*
 * shmem.h — the little state mlplat keeps in shared memory.
 *
 * Only what must cross processes lives here: which process leads each kind
 * (so a committing backend can set its latch), and what each replica is doing
 * (so the health view can show it).  Curl handles, sockets and anything else
 * process-local never do.  Everything durable lives in tables.
 */
#ifndef MLPLAT_SHMEM_H
#define MLPLAT_SHMEM_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "mlplat/kinds.h"

#define MLPLAT_MAX_REPLICAS 8

typedef enum MlplatReplicaRole
{
	MLPLAT_ROLE_STOPPED = 0, /* not running */
	MLPLAT_ROLE_STARTING,	 /* connecting */
	MLPLAT_ROLE_STANDBY,	 /* waiting for the leader lock */
	MLPLAT_ROLE_LEADER,		 /* holds the lock, reconciles */
	MLPLAT_ROLE_IDLE		 /* leader, but nothing to act on (see status) */
} MlplatReplicaRole;

typedef struct MlplatReplicaState
{
	int pid;
	MlplatReplicaRole role;
	int64 epoch; /* epoch held while leader */
	TimestampTz started_at;
	TimestampTz last_pass_start;
	TimestampTz last_pass_end;
	int64 passes;
	int64 pass_errors;
	int64 http_requests;
	int64 http_errors;
	double http_latency_ms_total;
	char status[MLPLAT_STATUS_LEN];
} MlplatReplicaState;

typedef struct MlplatKindState
{
	Latch *leader_latch; /* latch of the current leader, or NULL */
	int leader_pid;
	uint64 wakes; /* commits that asked this kind to run */
	MlplatReplicaState replicas[MLPLAT_MAX_REPLICAS];
} MlplatKindState;

/* The span exporter (src/trace/export.c), for mlplat.span_export_status. */
typedef struct MlplatExportState
{
	int64 spans_sent; /* by this server since it started */
	int64 batches_sent;
	int64 batches_failed;  /* retryable failures (sent again later) */
	int64 batches_dropped; /* refused for good (400, ...): never sent again */
	int64 spans_dropped;   /* in dropped batches, and rejected by partial successes */
	int consecutive_failures;
	TimestampTz last_success;
	TimestampTz last_failure;
	TimestampTz next_attempt;			/* 0: as soon as spans wait */
	char last_error[MLPLAT_STATUS_LEN]; /* of the last failure; never the endpoint */
} MlplatExportState;

typedef struct MlplatShared
{
	slock_t mutex; /* protects everything below */
	MlplatKindState kinds[MLPLAT_MAX_KINDS];

	/*
	 * Workers must let go of mlplat.database while it is being dropped, and
	 * must not reconnect to it once it is gone (see src/worker/dropdb.c).
	 */
	bool db_drop_in_progress;
	bool db_dropped;
	/* consecutive failed connection attempts, shared so all workers back off */
	int connect_failures;
	MlplatExportState export;
} MlplatShared;

/* NULL unless the library was loaded through shared_preload_libraries */
extern MlplatShared *mlplat_shared;

extern void mlplat_shmem_init_hooks(void);

/* Set the leader's latch of one kind (no-op without shared memory). */
extern void mlplat_wake_kind(int kind);

#endif /* MLPLAT_SHMEM_H */
