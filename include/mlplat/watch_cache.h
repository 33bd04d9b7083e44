/*
 * watch_cache.h — an informer-like cache of one kind's objects in the worker
 * (issue 20): a LIST at start (and after 410 Gone, or a stream that cannot
 * resume) fills it and gives the version to watch from; a watch with bookmarks
 * kept open across passes (started in the background, driven while the worker
 * waits: mlplat_http_wait) keeps it current.  Each object is kept as the
 * compact JSON text of only the fields the kind's decision reads (its prune
 * function), so memory follows those fields, not the objects' full size.
 *
 * A pass calls mlplat_watch_cache_sync first (no transaction open): it
 * applies the events that arrived, relists when it must, restarts the watch
 * when it ended, and says which objects changed since the last sync.  While
 * it returns NULL the pass may read observed objects from the cache instead
 * of GETting or LISTing them; otherwise it observes as it would without one.
 */
#ifndef MLPLAT_WATCH_CACHE_H
#define MLPLAT_WATCH_CACHE_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/json.h"
#include "mlplat/kube.h"

typedef struct MlplatWatchCache MlplatWatchCache;

/*
 * What of obj the cache keeps: a tree built in arena (parts of obj may be
 * shared), written as canonical JSON.  NULL: keep nothing of it.
 */
typedef MlJsonValue *(*MlplatWatchPrune)(MlJsonArena *arena, const MlJsonValue *obj);

typedef struct MlplatWatchSync
{
	List *changed; /* "namespace/name" of objects added, changed or deleted since the last sync */
	bool filled;   /* this sync filled an empty cache: nothing is "changed", compare everything */
	int lists;	   /* LIST requests this sync made */
	int relists;   /* relists this sync made (0 or 1) */
	int rewatches; /* watches it started */
	int events;	   /* events it applied */
	long retry_ms; /* the watch failed: the next sync lists and watches no sooner (0: at once) */
} MlplatWatchSync;

/* A cache of res's objects (created once per process; empty until the first sync). */
extern MlplatWatchCache *mlplat_watch_cache_create(const MlplatKubeResource *res, MlplatWatchPrune prune);

/*
 * Bring the cache up to date for objects carrying selector (a different
 * selector or mlplat.kube_url than last time empties it first).  Returns NULL when the cache may
 * be read, else why not (then out->changed is empty and the caller observes
 * without it; the next sync tries again).  Lists live in CurrentMemoryContext.
 */
extern char *mlplat_watch_cache_sync(MlplatWatchCache *wc, const char *selector, MlplatWatchSync *out);

/*
 * The answer (body, an object) to a write of ours, as the cache's state of
 * that object until an event newer than it arrives: a pass that reads the
 * cache before the write's own event came sees what it wrote, not nothing.
 * Not "changed": the writer knows.  Ignored when the answer is no object
 * with a numeric resourceVersion, or the cache holds a newer state.
 */
extern void mlplat_watch_cache_wrote(MlplatWatchCache *wc, const char *body, size_t body_len);

/* The cached object of namespace/name, parsed into arena, or NULL (not there). */
extern const MlJsonValue *mlplat_watch_cache_get(MlplatWatchCache *wc, MlJsonArena *arena, const char *ns,
												 const char *name);
/* Whether the cache holds namespace/name (nothing parsed: a pass asking about a fleet's worth) */
extern bool mlplat_watch_cache_has(MlplatWatchCache *wc, const char *ns, const char *name);

/*
 * The "namespace/name" key of every cached object (palloc'd), unparsed: what
 * a judge of orphans needs of the whole fleet is names, not objects.
 */
extern List *mlplat_watch_cache_keys(MlplatWatchCache *wc);

/* Objects held and bytes of memory the cache uses (entries and stream buffer). */
extern void mlplat_watch_cache_size(MlplatWatchCache *wc, long *objects, Size *bytes);

/* Forget everything and close the watch (leadership lost, watch turned off). */
extern void mlplat_watch_cache_reset(MlplatWatchCache *wc);

/*
 * Keep only members keys[0..n) of object obj (those it has), in arena: the
 * building block of a prune function.  NULL when obj is no object.
 */
extern MlJsonValue *mlplat_json_pick(MlJsonArena *arena, const MlJsonValue *obj, const char *const *keys, int n);

#endif /* MLPLAT_WATCH_CACHE_H */
