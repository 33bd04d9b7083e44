/*
 * observe.h — how a pass observes the cluster and the other peers, apart
 * from how it claims, decides and writes back: is a cluster there, LIST
 * every object of a kind that carries our labels, read a few objects by name
 * (a Kubernetes GET, the Lease, a registry alias, an object store's output,
 * an artifact's HEAD), each answer classified one way (MlplatObservedObject).  Fields of what it observed are
 * read with mlplat_json_text/_int of mlplat/json.h.  The deployments kind can
 * also observe through a watch-fed cache (mlplat/watch_cache.h), filled by
 * mlplat_kube_list_each.
 */
#ifndef MLPLAT_OBSERVE_H
#define MLPLAT_OBSERVE_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "mlplat/json.h"
#include "mlplat/kube.h"
#include "mlplat/reconcile.h"

/*
 * Is a Kubernetes cluster configured and usable?  When not, sets the pass
 * status to say why (shown in mlplat.reconciler_health) and returns false,
 * without logging: an unconfigured cluster is a state, not an error.
 */
extern bool mlplat_cluster_ready(MlplatPass *pass, const char **why);

/*
 * LIST every page (500 a page) of one resource across all namespaces with a
 * label selector; the parsed items are appended to *items (allocated in
 * arena) and *lists counts the requests.  A 410 Expired continue token
 * restarts the list (a few times, backing off).  Returns NULL, or why the kind
 * could not be observed (then *items holds nothing of it): also when the list
 * runs past mlplat.list_max_pages pages or a page would take the pass past
 * mlplat.pass_memory_limit.  No transaction may be open.
 */
extern char *mlplat_kube_list_all(MlJsonArena *arena, const MlplatKubeResource *res,
								  const char *selector, List **items, int *lists);

/* The same within one namespace (ns NULL: all), for a kind mlplat may read per namespace only. */
extern char *mlplat_kube_list_all_in(MlJsonArena *arena, const MlplatKubeResource *res, const char *ns,
									 const char *selector, List **items, int *lists);

/*
 * LIST n kinds (res[0..n-1]) as mlplat_kube_list_all, concurrently: the first
 * pages of all of them go out in one batch, and each kind's next page with
 * the next round's.  why[i] is NULL, or why kind i could not be observed (then
 * items[i] holds nothing of it; the other kinds are not affected).  *lists
 * counts the requests of all of them.
 */
extern void mlplat_kube_list_all_kinds(MlJsonArena *arena, const MlplatKubeResource *res, int n,
									   const char *selector, List **items, char **why, int *lists);

/*
 * What a LIST keeps of one item: a tree built in arena (parts of obj may be
 * shared), or NULL to keep nothing of it.  A kind's projection: the fields its
 * decisions and write-backs read (of the items it reads: arg may say which),
 * so that what a fleet-wide LIST holds grows with those, not with the
 * objects' full size (issue 20).
 */
typedef MlJsonValue *(*MlplatListKeep)(void *arg, MlJsonArena *arena, const MlJsonValue *obj);

/*
 * Called with each item of each LIST page.  The page is parsed into arena and
 * freed, with whatever the call allocated in CurrentMemoryContext, before the
 * next page is fetched: what is kept must be copied out.  item NULL: the LIST
 * starts over (its continue token expired), so what was kept of the earlier
 * pages is to be dropped.
 */
typedef void (*MlplatListEach)(void *arg, MlJsonArena *arena, const MlJsonValue *item);

/*
 * LIST as mlplat_kube_list_all_in, page by page through each: at most one
 * parsed page is held at a time.  *list_rv (when not NULL) gets the list's
 * resourceVersion, to watch from.
 */
extern char *mlplat_kube_list_each(const MlplatKubeResource *res, const char *ns, const char *selector,
								   MlplatListEach each, void *arg, int *lists, char **list_rv);

/*
 * LIST as mlplat_kube_list_all_in, keeping of each item only keep(arg, item),
 * appended to *items: a copy that lives in a context of its own under
 * CurrentMemoryContext (so it counts toward mlplat.pass_memory_limit as the
 * pass's).  The pass then holds the projections and one parsed page, not
 * every parsed page.
 */
extern char *mlplat_kube_list_kept(const MlplatKubeResource *res, const char *ns, const char *selector,
								   MlplatListKeep keep, void *arg, List **items, int *lists);

/*
 * GET the named objects of res (ns_names: namespace, name, namespace, name,
 * ...), concurrently in one batch, when a pass has only a few to look at: the
 * requests follow what the pass reads, not the fleet.  Appends to *items what
 * a LIST by mlplat_managed_selector(instance) would have shown of them (404s
 * and objects without our labels are left out); *requests counts the GETs.
 * Returns NULL, or why they could not be observed (then nothing is appended).
 * No transaction may be open.
 */
extern char *mlplat_kube_get_each(MlJsonArena *arena, const MlplatKubeResource *res, const char *instance,
								  List *ns_names, List **items, int *requests);

/*
 * One object observed by name, for a kind that looks at a few objects it
 * knows by name (rollouts: each one's InferenceService; a GET after a 409;
 * the look before a first apply) rather than LISTing them, or at what
 * another peer holds (a registry alias, an output in the object store).  Two
 * steps, so that the reads can share one batch with the kind's other
 * requests: mlplat_observe_get (a Kubernetes object) or mlplat_observe_peer
 * (a peer's request the kind made) adds the read; after the batch ran,
 * mlplat_observe_got reads the answer once, the body parsed into arena, and
 * classifies it one way for every peer: FOUND (obj), GONE (the peer says
 * there is none), or ERROR (error says why; retry after retry_after_s, or
 * refused when permanent).  What the kind then decides reads only this
 * struct, so a watch-fed cache could fill it instead and nothing after it
 * would change.
 */
typedef enum MlplatObservedState
{
	MLPLAT_OBSERVED_UNREAD = 0, /* not asked, or its answer not read yet */
	MLPLAT_OBSERVED_FOUND,		/* read: obj (NULL for a raw peer's answer) */
	MLPLAT_OBSERVED_GONE,		/* the peer has none under that name */
	MLPLAT_OBSERVED_ERROR		/* no usable answer: error */
} MlplatObservedState;

/*
 * A peer that is not Kubernetes: its name in error lines ("registry"), which
 * answers say that there is no such object (an object store's 404; MLflow's
 * codes), and the line for an error answer (NULL: "<name> answered HTTP n").
 * body is the answer parsed, or NULL.  raw: the kind does not read the
 * answer's body as JSON (a HEAD's headers, a body streamed to the request's
 * sink, an object store's XML error): nothing is parsed (body NULL; arena
 * may be NULL), any 2xx is FOUND with obj NULL, and the kind reads what it
 * needs of the answer from get.
 */
typedef struct MlplatObservePeer
{
	const char *name;
	bool (*gone)(int status, const MlJsonValue *body);
	char *(*why)(int status, const MlJsonValue *body);
	bool raw;
} MlplatObservePeer;

typedef struct MlplatObservedObject
{
	MlplatHttpRequest *get;		   /* NULL: not asked this pass */
	const MlplatObservePeer *peer; /* NULL: a Kubernetes GET */
	MlplatObservedState state;	   /* the answer's classification */
	const MlJsonValue *obj;		   /* FOUND: the object (else NULL) */
	int http_status;			   /* 0: no answer */
	int retry_after_s;			   /* the answer's Retry-After, 0 when none */
	const char *error;			   /* ERROR: why, one line (a Kubernetes answer's tenant line) */
	bool permanent;				   /* ERROR: a retry soon will not change it (kube.c's FAILED; a peer's 2xx
									 * not JSON, or any status but 408, 429, 5xx) */
	bool too_large;				   /* ERROR: the answer was longer than the request's max_body */
	MlplatKubeResult res;		   /* a Kubernetes GET's classification in full (MLPLAT_KUBE_NOT_FOUND: GONE) */
} MlplatObservedObject;

extern void mlplat_observe_get(MlplatObservedObject *o, MlplatHttpBatch *batch, const MlplatKubeResource *res,
							   const char *ns, const char *name);
extern void mlplat_observe_peer(MlplatObservedObject *o, MlplatHttpRequest *get, const MlplatObservePeer *peer);
extern void mlplat_observe_got(MlplatObservedObject *o, MlJsonArena *arena);

/*
 * A metric of what runs in the cluster: an instant PromQL query of
 * mlplat.prometheus_url at at_ms (ms since the Unix epoch), added to batch;
 * NULL when no Prometheus is configured.  After the batch ran,
 * mlplat_observe_metric_read reads the one non-negative value of its answer
 * (prometheus.h's rules), or says why there is none (*why: palloc'd or
 * static, never the answer's raw text).
 */
extern bool mlplat_observe_metrics_configured(void);
extern MlplatHttpRequest *mlplat_observe_metric(MlplatHttpBatch *batch, const char *promql, int64 at_ms);
extern bool mlplat_observe_metric_read(MlJsonArena *arena, const MlplatHttpRequest *q, double *value,
									   const char **why);

/*
 * The object of that namespace and name among observed items (a LIST's), or
 * NULL; NULL also for a NULL name (an entity with no object named yet).
 */
extern const MlJsonValue *mlplat_observed_find(List *items, const char *ns, const char *name);

/*
 * Does obj carry mlplat's labels of this installation (managed-by and
 * instance) and, when component is not NULL, that component label?  The
 * first half of every "is this object ours" question; the second is
 * mlplat_object_content_id against the render's.
 */
extern bool mlplat_labelled_ours(const MlJsonValue *obj, const char *instance, const char *component);

/* The content id an object (a render or one found) carries, or NULL. */
extern const char *mlplat_object_content_id(const MlJsonValue *obj);

/*
 * Is the object terminating (a deletionTimestamp: deleted, held by finalizers
 * until their controllers let go)?  Then *since is that timestamp,
 * *finalizers the names that hold it ("" when none is left; metadata's, and a
 * Namespace's spec.finalizers), and *json both as JSON for
 * observed.terminating (the finalizer_stuck alert).
 */
extern bool mlplat_object_terminating(const MlJsonValue *obj, const char **since, char **finalizers,
									  char **json);

#endif /* MLPLAT_OBSERVE_H */
