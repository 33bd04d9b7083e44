/*
 * shmem.c — allocation and the few operations on mlplat's shared state.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "mlplat/shmem.h"

MlplatShared *mlplat_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
mlplat_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(MlplatShared)));
}

static void
mlplat_shmem_startup(void)
{
	bool found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	mlplat_shared = ShmemInitStruct("mlplat", sizeof(MlplatShared), &found);
	if (!found)
	{
		memset(mlplat_shared, 0, sizeof(MlplatShared));
		SpinLockInit(&mlplat_shared->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
mlplat_shmem_init_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = mlplat_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = mlplat_shmem_startup;
}

void
mlplat_wake_kind(int kind)
{
	Latch *latch;

	if (mlplat_shared == NULL || kind < 0 || kind >= mlplat_num_kinds)
		return;
	SpinLockAcquire(&mlplat_shared->mutex);
	latch = mlplat_shared->kinds[kind].leader_latch;
	mlplat_shared->kinds[kind].wakes++;
	SpinLockRelease(&mlplat_shared->mutex);

	/*
	 * Process latches live in shared memory for the life of the server, so
	 * setting the latch of a leader that just exited is harmless.
	 */
	if (latch)
		SetLatch(latch);
}
