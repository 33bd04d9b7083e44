/*
 * kube.h — the Kubernetes REST client, on top of the batch HTTP client.
 *
 * Configuration comes from mlplat.kube_url + mlplat.kube_token_file +
 * mlplat.kube_ca_file, or, when mlplat.kube_url is empty, from the in-cluster
 * service account (KUBERNETES_SERVICE_HOST/PORT, the token and ca.crt under
 * /var/run/secrets/kubernetes.io/serviceaccount/).  Call
 * mlplat_kube_config_refresh() at the start of every pass: it is cheap, re-reads
 * the token when its file changes (projected tokens rotate), and tells "no
 * cluster configured" (idle, say so once) apart from a broken configuration.
 *
 * Builders add one request to a batch and return it; after the batch has run,
 * mlplat_kube_parse_response() classifies the answer and parses the body once,
 * with our strict parser (mlplat/json.h), into a tree in the current memory
 * context (no catalog access: fine outside a transaction); its fields are
 * read with mlplat_json_text/_int, as every reconciler reads remote bodies.  The token goes only into the Authorization header, which is
 * never logged; error texts never contain it.
 */
#ifndef MLPLAT_KUBE_H
#define MLPLAT_KUBE_H

#include "postgres.h"

#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/kube_response.h"

#define MLPLAT_KUBE_FIELD_MANAGER "mlplat"
#define MLPLAT_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef enum MlplatKubeConfigState
{
	MLPLAT_KUBE_NOT_CONFIGURED = 0, /* no URL and not in a cluster: idle quietly */
	MLPLAT_KUBE_READY,
	MLPLAT_KUBE_CONFIG_ERROR /* configured but unusable (bad URL, unreadable token) */
} MlplatKubeConfigState;

/* A resource type: group "" (or NULL) is the core API. */
typedef struct MlplatKubeResource
{
	const char *group;	 /* "", "apps", "serving.kserve.io", ... */
	const char *version; /* "v1", "v1beta1", "v1alpha1" */
	const char *plural;	 /* "configmaps", "inferenceservices", ... */
	bool namespaced;
} MlplatKubeResource;

typedef struct MlplatKubeResult
{
	MlplatKubeOutcome outcome;
	int status; /* HTTP status, 0 on transport failure */
	int retry_after_s;
	const MlJsonValue *body; /* parsed JSON body (object, list or Status), or NULL */
	char *reason;			 /* Status.reason ("NotFound", "AlreadyExists", ...) or NULL */
	char *message;			 /* one clear line for logs and views; NULL when OK */
	/*
	 * The line a tenant may read (status_reason, last_error, spans), when
	 * message must not reach one: a transport failure, whose libcurl text
	 * names the API server's host, port or URL.  NULL: message is fine for
	 * tenants.  Administrators keep message (ledger, server log).
	 */
	char *tenant_message;
} MlplatKubeResult;

/* What a tenant may read of a result: tenant_message, else message (may be NULL). */
static inline char *
mlplat_kube_tenant_line(const MlplatKubeResult *r)
{
	return r->tenant_message ? r->tenant_message : r->message;
}

/* ---- configuration */
extern MlplatKubeConfigState mlplat_kube_config_refresh(const char **why);
/* base URL ("https://10.0.0.1:443"); NULL unless READY */
extern const char *mlplat_kube_base_url(void);

/* ---- pure helpers (palloc'd results) */
extern char *mlplat_url_encode(const char *s);
/* "/api/v1/namespaces/ns/pods/name"; ns NULL for cluster-scoped or all namespaces,
 * name NULL for the collection */
extern char *mlplat_kube_path(const MlplatKubeResource *res, const char *ns, const char *name);

/* ---- request builders (ERROR unless the configuration is READY) */
extern MlplatHttpRequest *mlplat_kube_get(MlplatHttpBatch *b, const MlplatKubeResource *res,
										  const char *ns, const char *name);
/* LIST by label selector; pass the previous page's continue token, NULL first.
 * limit <= 0: no limit.  On MLPLAT_KUBE_EXPIRED start again without a token. */
extern MlplatHttpRequest *mlplat_kube_list(MlplatHttpBatch *b, const MlplatKubeResource *res,
										   const char *ns, const char *label_selector,
										   int limit, const char *continue_token);
/* WATCH the object `name` from resource_version (a stream; see the request's sink) */
extern MlplatHttpRequest *mlplat_kube_watch(MlplatHttpBatch *b, const MlplatKubeResource *res,
											const char *ns, const char *name,
											const char *resource_version, int timeout_s);
/* WATCH every object carrying label_selector (all namespaces) from resource_version, with bookmarks */
extern MlplatHttpRequest *mlplat_kube_watch_all(MlplatHttpBatch *b, const MlplatKubeResource *res,
												const char *label_selector, const char *resource_version,
												int timeout_s);
/* Server-Side Apply: PATCH application/apply-patch+yaml, fieldManager=mlplat, force */
extern MlplatHttpRequest *mlplat_kube_apply(MlplatHttpBatch *b, const MlplatKubeResource *res,
											const char *ns, const char *name, const char *json);
extern MlplatHttpRequest *mlplat_kube_create(MlplatHttpBatch *b, const MlplatKubeResource *res,
											 const char *ns, const char *json);
/* PUT; json carries metadata.resourceVersion (optimistic concurrency) */
extern MlplatHttpRequest *mlplat_kube_replace(MlplatHttpBatch *b, const MlplatKubeResource *res,
											  const char *ns, const char *name, const char *json);
extern MlplatHttpRequest *mlplat_kube_merge_patch(MlplatHttpBatch *b, const MlplatKubeResource *res,
												  const char *ns, const char *name, const char *json);
/* DELETE with propagationPolicy=Background */
extern MlplatHttpRequest *mlplat_kube_delete(MlplatHttpBatch *b, const MlplatKubeResource *res,
											 const char *ns, const char *name);
/*
 * DELETE with propagationPolicy=Foreground: the object stays (with a deletionTimestamp)
 * until its dependants (a Job's Pods) are gone, so "absent" means "nothing runs".
 */
extern MlplatHttpRequest *mlplat_kube_delete_foreground(MlplatHttpBatch *b, const MlplatKubeResource *res,
														const char *ns, const char *name);

/* ---- responses */
extern void mlplat_kube_parse_response(const MlplatHttpRequest *req, MlplatKubeResult *out);
/* the same, the tree in the caller's arena (one the pass keeps, say) */
extern void mlplat_kube_parse_response_in(const MlplatHttpRequest *req, MlJsonArena *arena,
										  MlplatKubeResult *out);

/*
 * The same classification without the body (out->body stays NULL):
 * parse_status parses the body only to decide the outcome and frees the tree
 * at once, for callers that need the outcome alone (a write's answer);
 * classify takes the caller's word for it, for callers that parse the body
 * into their own arena (a LIST page, an object they keep for the pass).
 */
extern void mlplat_kube_parse_status(const MlplatHttpRequest *req, MlplatKubeResult *out);

/*
 * The answer to one write (apply, create, patch or delete), outcome only, as
 * parse_status, with a 404 read by the rule every reconciler follows: a
 * delete of what is already gone succeeded (OK); any other write's 404 is a
 * namespace not there (yet) and is retried (RETRY).  out->status stays 404.
 */
extern void mlplat_kube_write_result(const MlplatHttpRequest *req, bool is_delete, MlplatKubeResult *out);
extern void mlplat_kube_classify(const MlplatHttpRequest *req, bool body_is_json, MlplatKubeResult *out);
/* metadata.continue of a LIST body (palloc'd), NULL when it is the last page */
extern char *mlplat_kube_list_continue(const MlJsonValue *list);
#define mlplat_kube_outcome_name(o) ml_kube_outcome_name(o)

/* ---- Lease fence (client-go's tryAcquireOrRenew; src/reconcile/lease.c, which reads the Lease through observe.h) */
typedef enum MlplatLeaseResult
{
	MLPLAT_LEASE_HELD = 0,	/* we hold it (acquired, renewed or created) */
	MLPLAT_LEASE_OTHER,		/* another holder whose lease has not expired by our clock */
	MLPLAT_LEASE_LOST,		/* 409: someone else won the race */
	MLPLAT_LEASE_ERROR,		/* could not tell (transport, permissions, ...) */
	MLPLAT_LEASE_NO_CLUSTER /* no cluster configured */
} MlplatLeaseResult;

/* What we last saw of a lease; keep one per lease for the life of the process. */
typedef struct MlplatLeaseObservation
{
	bool valid;
	char holder[256];
	char renew_time[64];
	double observed_ms; /* our monotonic clock when holder/renewTime last changed */
	int duration_s;
} MlplatLeaseObservation;

/*
 * GET the lease; create it if missing; leave it alone while another holder's
 * renewTime has changed within leaseDurationSeconds as measured on our own
 * clock; otherwise PUT (with resourceVersion) taking or renewing it.
 * Runs synchronously (a batch of one; no transaction may be open).  *detail
 * (palloc'd, may be NULL) explains anything but a plain HELD.  A holder for
 * which may_preempt(holder, identity) is true is displaced at once instead of
 * after its lease expires (for example an old primary, still running after its
 * standby was promoted); pass NULL for plain client-go behaviour.
 */
typedef bool (*MlplatLeasePreemptFn)(const char *holder, const char *identity);
extern MlplatLeaseResult mlplat_kube_lease_acquire_preempting(MlplatLeaseObservation *obs, const char *ns,
															  const char *name, const char *identity,
															  int duration_s, MlplatLeasePreemptFn may_preempt,
															  char **detail);
extern const char *mlplat_lease_result_name(MlplatLeaseResult r);

#endif /* MLPLAT_KUBE_H */
