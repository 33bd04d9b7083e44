/*
 * kube.c — Kubernetes REST client: configuration, request builders, response
 * classification and the Lease fence.  See include/mlplat/kube.h.
 */
#include "postgres.h"

#include <sys/time.h>
#include <time.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "mlplat/guc.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/secret_file.h"
#include "kube_internal.h"

#define TOKEN_MAX 65536

/* ---- configuration (process-local; the token is a secret: never logged) */

typedef struct KubeConfig
{
	MlplatKubeConfigState state;
	char *url; /* TopMemoryContext */
	char *ca_file;
	char *token_file;
	MlplatSecretFile token; /* content NULL: no Authorization header */
	char why[256];
} KubeConfig;

static KubeConfig kcfg;

/* test hooks only: explicit settings for this backend instead of the GUCs */
static bool kube_override = false;
static char *override_url = NULL;
static char *override_token_file = NULL;
static char *override_ca_file = NULL;

static char *
top_strdup(const char *s)
{
	return (s && s[0]) ? MemoryContextStrdup(TopMemoryContext, s) : NULL;
}

static void
set_str(char **field, const char *value)
{
	if (*field && value && strcmp(*field, value) == 0)
		return;
	if (*field)
		pfree(*field);
	*field = top_strdup(value);
}

static MlplatKubeConfigState
config_fail(MlplatKubeConfigState st, const char *fmt, ...) pg_attribute_printf(2, 3);

static MlplatKubeConfigState
config_fail(MlplatKubeConfigState st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(kcfg.why, sizeof(kcfg.why), fmt, ap);
	va_end(ap);
	kcfg.state = st;
	return st;
}

/* (Re-)read the token when the file changed; false (state set) when unusable. */
static bool
refresh_token(void)
{
	char *why = mlplat_secret_file_refresh(&kcfg.token, kcfg.token_file,
										   "Kubernetes token file", TOKEN_MAX,
										   MLPLAT_SECRET_TOKEN, NULL);

	if (why == NULL)
		return true;
	config_fail(MLPLAT_KUBE_CONFIG_ERROR, "%s", why);
	pfree(why);
	return false;
}

MlplatKubeConfigState
mlplat_kube_config_refresh(const char **why)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");

	kcfg.why[0] = '\0';
	if (kube_override && override_url)
	{
		set_str(&kcfg.url, override_url);
		set_str(&kcfg.token_file, override_token_file);
		set_str(&kcfg.ca_file, override_ca_file);
	}
	else if (mlplat_kube_url && mlplat_kube_url[0])
	{
		set_str(&kcfg.url, mlplat_kube_url);
		set_str(&kcfg.token_file, mlplat_kube_token_file);
		set_str(&kcfg.ca_file, mlplat_kube_ca_file);
	}
	else if (host && host[0])
	{
		char url[512];

		/* an IPv6 literal needs brackets */
		snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
				 host, (port && port[0]) ? port : "443");
		set_str(&kcfg.url, url);
		set_str(&kcfg.token_file, MLPLAT_KUBE_SA_DIR "/token");
		set_str(&kcfg.ca_file, (mlplat_kube_ca_file && mlplat_kube_ca_file[0]) ? mlplat_kube_ca_file : MLPLAT_KUBE_SA_DIR "/ca.crt");
	}
	else
	{
		set_str(&kcfg.url, NULL);
		mlplat_secret_file_forget(&kcfg.token);
		config_fail(MLPLAT_KUBE_NOT_CONFIGURED,
					"no Kubernetes cluster configured (mlplat.kube_url is empty and KUBERNETES_SERVICE_HOST is not set)");
		goto out;
	}

	if (!mlplat_http_url_allowed(kcfg.url))
	{
		config_fail(MLPLAT_KUBE_CONFIG_ERROR, "mlplat.kube_url must be an http:// or https:// URL");
		goto out;
	}
	if (!refresh_token())
		goto out;
	kcfg.state = MLPLAT_KUBE_READY;

out:
	if (why)
		*why = kcfg.why[0] ? kcfg.why : NULL;
	return kcfg.state;
}

void
mlplat_kube_config_override(const char *url, const char *token_file, const char *ca_file)
{
	set_str(&override_url, url);
	set_str(&override_token_file, token_file);
	set_str(&override_ca_file, ca_file);
	kube_override = (url != NULL);
	mlplat_secret_file_forget(&kcfg.token);
}

const char *
mlplat_kube_base_url(void)
{
	return kcfg.state == MLPLAT_KUBE_READY ? kcfg.url : NULL;
}

/* ---- pure helpers */

char *
mlplat_url_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	StringInfoData buf;
	const unsigned char *p;

	initStringInfo(&buf);
	for (p = (const unsigned char *) s; *p; p++)
	{
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			(*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
			appendStringInfoChar(&buf, (char) *p);
		else
		{
			appendStringInfoChar(&buf, '%');
			appendStringInfoChar(&buf, hex[*p >> 4]);
			appendStringInfoChar(&buf, hex[*p & 15]);
		}
	}
	return buf.data;
}

char *
mlplat_kube_path(const MlplatKubeResource *res, const char *ns, const char *name)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (res->group == NULL || res->group[0] == '\0')
		appendStringInfo(&buf, "/api/%s", mlplat_url_encode(res->version));
	else
		appendStringInfo(&buf, "/apis/%s/%s", mlplat_url_encode(res->group),
						 mlplat_url_encode(res->version));
	if (res->namespaced && ns != NULL && ns[0] != '\0')
		appendStringInfo(&buf, "/namespaces/%s", mlplat_url_encode(ns));
	appendStringInfo(&buf, "/%s", mlplat_url_encode(res->plural));
	if (name != NULL && name[0] != '\0')
		appendStringInfo(&buf, "/%s", mlplat_url_encode(name));
	return buf.data;
}

/* ---- request builders */

static MlplatHttpRequest *
kube_request(MlplatHttpBatch *b, const char *method, const char *path, const char *query,
			 const char *content_type, const char *body)
{
	MlplatHttpRequest *req;
	char *url;

	if (kcfg.state != MLPLAT_KUBE_READY)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no usable Kubernetes configuration"),
				 errdetail("%s", kcfg.why[0] ? kcfg.why : "mlplat_kube_config_refresh() was not called."),
				 errhint("Set mlplat.kube_url, mlplat.kube_token_file and mlplat.kube_ca_file, or run in a cluster.")));

	/* the base URL may end with '/' */
	url = psprintf("%.*s%s%s%s",
				   (int) (strlen(kcfg.url) - (kcfg.url[strlen(kcfg.url) - 1] == '/' ? 1 : 0)),
				   kcfg.url, path, query ? "?" : "", query ? query : "");
	req = mlplat_http_batch_add(b, method, url);
	pfree(url);
	if (kcfg.ca_file)
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(req));

		req->ca_file = pstrdup(kcfg.ca_file);
		MemoryContextSwitchTo(old);
	}
	mlplat_http_request_add_header(req, "Accept", "application/json");
	if (kcfg.token.content)
	{
		char *auth = psprintf("Bearer %s", kcfg.token.content);

		mlplat_http_request_add_header(req, "Authorization", auth);
		explicit_bzero(auth, strlen(auth));
		pfree(auth);
	}
	if (body)
		mlplat_http_request_set_body(req, content_type, body, strlen(body));
	return req;
}

MlplatHttpRequest *
mlplat_kube_get(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns, const char *name)
{
	return kube_request(b, "GET", mlplat_kube_path(res, ns, name), NULL, NULL, NULL);
}

MlplatHttpRequest *
mlplat_kube_list(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
				 const char *label_selector, int limit, const char *continue_token)
{
	StringInfoData q;

	initStringInfo(&q);
	if (label_selector && label_selector[0])
		appendStringInfo(&q, "labelSelector=%s", mlplat_url_encode(label_selector));
	if (limit > 0)
		appendStringInfo(&q, "%slimit=%d", q.len ? "&" : "", limit);
	if (continue_token && continue_token[0])
		appendStringInfo(&q, "%scontinue=%s", q.len ? "&" : "", mlplat_url_encode(continue_token));
	return kube_request(b, "GET", mlplat_kube_path(res, ns, NULL), q.len ? q.data : NULL, NULL, NULL);
}

/*
 * WATCH one named object from a resourceVersion: the answer is a stream of
 * events, one JSON object per line, the first being the first change after
 * that version; the server ends it after timeout_s.  The caller consumes the
 * stream through the request's sink.
 */
MlplatHttpRequest *
mlplat_kube_watch(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
				  const char *name, const char *resource_version, int timeout_s)
{
	char *query = psprintf("watch=1&fieldSelector=%s&resourceVersion=%s&timeoutSeconds=%d",
						   mlplat_url_encode(psprintf("metadata.name=%s", name)),
						   mlplat_url_encode(resource_version), Max(timeout_s, 1));

	return kube_request(b, "GET", mlplat_kube_path(res, ns, NULL), query, NULL, NULL);
}

/*
 * WATCH every object of res carrying label_selector, across namespaces, from
 * resource_version, with bookmarks: the stream an informer-like cache keeps
 * open (observe.h).  The server ends it after timeout_s.
 */
MlplatHttpRequest *
mlplat_kube_watch_all(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *label_selector,
					  const char *resource_version, int timeout_s)
{
	char *query = psprintf("watch=1&allowWatchBookmarks=true&labelSelector=%s&resourceVersion=%s&timeoutSeconds=%d",
						   mlplat_url_encode(label_selector), mlplat_url_encode(resource_version),
						   Max(timeout_s, 1));

	return kube_request(b, "GET", mlplat_kube_path(res, NULL, NULL), query, NULL, NULL);
}

MlplatHttpRequest *
mlplat_kube_apply(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
				  const char *name, const char *json)
{
	return kube_request(b, "PATCH", mlplat_kube_path(res, ns, name),
						"fieldManager=" MLPLAT_KUBE_FIELD_MANAGER "&force=true",
						"application/apply-patch+yaml", json);
}

MlplatHttpRequest *
mlplat_kube_create(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns, const char *json)
{
	return kube_request(b, "POST", mlplat_kube_path(res, ns, NULL),
						"fieldManager=" MLPLAT_KUBE_FIELD_MANAGER, "application/json", json);
}

MlplatHttpRequest *
mlplat_kube_replace(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
					const char *name, const char *json)
{
	return kube_request(b, "PUT", mlplat_kube_path(res, ns, name),
						"fieldManager=" MLPLAT_KUBE_FIELD_MANAGER, "application/json", json);
}

MlplatHttpRequest *
mlplat_kube_merge_patch(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
						const char *name, const char *json)
{
	return kube_request(b, "PATCH", mlplat_kube_path(res, ns, name),
						"fieldManager=" MLPLAT_KUBE_FIELD_MANAGER,
						"application/merge-patch+json", json);
}

MlplatHttpRequest *
mlplat_kube_delete(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns, const char *name)
{
	return kube_request(b, "DELETE", mlplat_kube_path(res, ns, name),
						"propagationPolicy=Background", NULL, NULL);
}

MlplatHttpRequest *
mlplat_kube_delete_foreground(MlplatHttpBatch *b, const MlplatKubeResource *res, const char *ns,
							  const char *name)
{
	return kube_request(b, "DELETE", mlplat_kube_path(res, ns, name),
						"propagationPolicy=Foreground", NULL, NULL);
}

/* ---- responses */

/* Is the body UTF-8 text without NUL bytes, valid in the database encoding? */
static bool
body_is_text(const MlplatHttpRequest *req)
{
	return !req->failed && req->resp_body != NULL && req->resp_len > 0 &&
		   memchr(req->resp_body, '\0', req->resp_len) == NULL &&
		   pg_verify_mbstr(GetDatabaseEncoding(), req->resp_body, (int) req->resp_len, true);
}

/*
 * The body's tree, parsed once by our parser into arena, or NULL (no body,
 * not text, not JSON).  Never throws on bad input.
 */
static const MlJsonValue *
parse_body(const MlplatHttpRequest *req, MlJsonArena *arena)
{
	MlJsonError err;

	if (arena == NULL || !body_is_text(req))
		return NULL;
	return ml_json_parse(arena, req->resp_body, req->resp_len, NULL, &err);
}

char *
mlplat_kube_list_continue(const MlJsonValue *list)
{
	const char *c = mlplat_json_text(list, "metadata", "continue", NULL);

	return (c && c[0] != '\0') ? pstrdup(c) : NULL;
}

/* the MlplatKubeResult of a classification (pure code, fuzzed) */
static void
fill_result(const MlplatHttpRequest *req, const MlKubeResponse *r, MlplatKubeResult *out)
{
	memset(out, 0, sizeof(*out));
	out->status = req->status;
	out->retry_after_s = req->retry_after_s;
	out->outcome = r->outcome;
	if (r->has_reason)
		out->reason = pstrdup(r->reason);
	if (r->message[0] != '\0')
		out->message = pstrdup(r->message);
	/* libcurl's text names the API server (host, port, URL): not for tenants */
	if (req->failed)
		out->tenant_message = req->status == 0
								  ? psprintf("Kubernetes API %s request failed: the cluster did not answer (details for administrators)",
											 req->method ? req->method : "")
								  : psprintf("Kubernetes API returned HTTP %d but the response failed (details for administrators)",
											 req->status);
}

void
mlplat_kube_classify(const MlplatHttpRequest *req, bool is_json, MlplatKubeResult *out)
{
	MlKubeResponse r;

	ml_kube_classify(req->status, req->failed, req->error, req->method,
					 req->resp_body, req->resp_len, is_json, kcfg.token.content, &r);
	fill_result(req, &r, out);
}

void
mlplat_kube_parse_response_in(const MlplatHttpRequest *req, MlJsonArena *arena, MlplatKubeResult *out)
{
	const MlJsonValue *body = req->failed ? NULL : parse_body(req, arena);
	MlKubeResponse r;

	ml_kube_classify_tree(req->status, req->failed, req->error, req->method,
						  req->resp_body, req->resp_len, body, kcfg.token.content, &r);
	fill_result(req, &r, out);
	out->body = body;
}

void
mlplat_kube_parse_response(const MlplatHttpRequest *req, MlplatKubeResult *out)
{
	mlplat_kube_parse_response_in(req, mlplat_json_arena_in(CurrentMemoryContext), out);
}

void
mlplat_kube_parse_status(const MlplatHttpRequest *req, MlplatKubeResult *out)
{
	/* the tree only decides the outcome: a malloc arena, gone at once */
	MlJsonArena *arena = ml_json_arena_new();

	mlplat_kube_parse_response_in(req, arena, out);
	out->body = NULL;
	if (arena != NULL)
		ml_json_arena_free(arena);
}

void
mlplat_kube_write_result(const MlplatHttpRequest *req, bool is_delete, MlplatKubeResult *out)
{
	mlplat_kube_parse_status(req, out);
	if (out->outcome == MLPLAT_KUBE_NOT_FOUND)
		out->outcome = is_delete ? MLPLAT_KUBE_OK : MLPLAT_KUBE_RETRY;
}

const char *
mlplat_lease_result_name(MlplatLeaseResult r)
{
	switch (r)
	{
		case MLPLAT_LEASE_HELD:
			return "held";
		case MLPLAT_LEASE_OTHER:
			return "other";
		case MLPLAT_LEASE_LOST:
			return "lost";
		case MLPLAT_LEASE_ERROR:
			return "error";
		case MLPLAT_LEASE_NO_CLUSTER:
			return "no_cluster";
	}
	return "unknown";
}

/* ---- Lease fence */

static const MlplatKubeResource lease_resource = { "coordination.k8s.io", "v1", "leases", true };
static const MlplatKubeResource namespace_resource = { "", "v1", "namespaces", false };

static double
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1000000.0;
}

/* RFC 3339 with microseconds, UTC: the MicroTime format of Lease spec times */
static char *
rfc3339_micro_now(void)
{
	struct timeval tv;
	struct tm tm;
	char buf[40];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return psprintf("%s.%06ldZ", buf, (long) tv.tv_usec);
}

static char *
lease_body(const char *ns, const char *name, const char *rv, const char *identity,
		   int duration_s, const char *acquire, const char *renew, int64 transitions)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":");
	escape_json(&b, name);
	appendStringInfoString(&b, ",\"namespace\":");
	escape_json(&b, ns);
	if (rv)
	{
		appendStringInfoString(&b, ",\"resourceVersion\":");
		escape_json(&b, rv);
	}
	appendStringInfoString(&b, "},\"spec\":{\"holderIdentity\":");
	escape_json(&b, identity);
	appendStringInfo(&b, ",\"leaseDurationSeconds\":%d,\"acquireTime\":", duration_s);
	escape_json(&b, acquire);
	appendStringInfoString(&b, ",\"renewTime\":");
	escape_json(&b, renew);
	appendStringInfo(&b, ",\"leaseTransitions\":" INT64_FORMAT "}}", transitions);
	return b.data;
}

/* run a batch of one request and classify it */
static void
run_one(MlplatHttpBatch *b, MlplatHttpRequest *req, bool allow_xact, MlplatKubeResult *res)
{
	if (allow_xact)
		mlplat_http_batch_allow_transaction(b);
	mlplat_http_batch_run(b);
	/* the result is parsed into the current context; the batch can go */
	mlplat_kube_parse_response(req, res);
	mlplat_http_batch_free(b);
}

MlplatLeaseResult
mlplat_kube_lease_impl(MlplatLeaseObservation *obs, const char *ns, const char *name,
					   const char *identity, int duration_s, char **detail, bool allow_xact,
					   MlplatLeasePreemptFn may_preempt)
{
	MlplatHttpBatch *b;
	MlplatHttpRequest *req;
	MlplatKubeResult res;
	const char *holder,
		*renew,
		*acquire,
		*rv;
	char *now;
	int64 dur = duration_s,
		  transitions = 0;
	double t;

	if (detail)
		*detail = NULL;
	if (mlplat_kube_config_refresh(NULL) != MLPLAT_KUBE_READY)
	{
		if (detail)
			*detail = pstrdup(kcfg.why);
		return kcfg.state == MLPLAT_KUBE_NOT_CONFIGURED ? MLPLAT_LEASE_NO_CLUSTER : MLPLAT_LEASE_ERROR;
	}

	b = mlplat_http_batch_create(CurrentMemoryContext);
	req = mlplat_kube_get(b, &lease_resource, ns, name);
	run_one(b, req, allow_xact, &res);
	now = rfc3339_micro_now();

	if (res.outcome == MLPLAT_KUBE_NOT_FOUND)
	{
		/* nobody has it: create it held by us */
		b = mlplat_http_batch_create(CurrentMemoryContext);
		req = mlplat_kube_create(b, &lease_resource, ns,
								 lease_body(ns, name, NULL, identity, duration_s, now, now, 0));
		run_one(b, req, allow_xact, &res);
		if (res.outcome == MLPLAT_KUBE_NOT_FOUND)
		{
			/*
			 * The Lease's namespace does not exist yet.  The fence is on by
			 * default whenever a cluster is configured, and a missing
			 * namespace must not leave every reconciler fenced: create it
			 * (mlplat creates namespaces for projects anyway; a 409 means a
			 * peer was faster) and try the Lease once more.
			 */
			StringInfoData nsb;

			initStringInfo(&nsb);
			appendStringInfoString(&nsb, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":");
			escape_json(&nsb, ns);
			appendStringInfoString(&nsb, ",\"labels\":" MLPLAT_MANAGED_BY_JSON "}}");
			b = mlplat_http_batch_create(CurrentMemoryContext);
			req = mlplat_kube_create(b, &namespace_resource, NULL, nsb.data);
			run_one(b, req, allow_xact, &res);
			if (res.outcome == MLPLAT_KUBE_OK || res.outcome == MLPLAT_KUBE_EXISTS ||
				res.outcome == MLPLAT_KUBE_CONFLICT)
			{
				b = mlplat_http_batch_create(CurrentMemoryContext);
				req = mlplat_kube_create(b, &lease_resource, ns,
										 lease_body(ns, name, NULL, identity, duration_s, now, now, 0));
				run_one(b, req, allow_xact, &res);
			}
		}
		if (res.outcome == MLPLAT_KUBE_OK)
		{
			obs->valid = true;
			strlcpy(obs->holder, identity, sizeof(obs->holder));
			strlcpy(obs->renew_time, now, sizeof(obs->renew_time));
			obs->observed_ms = mono_ms();
			obs->duration_s = duration_s;
			return MLPLAT_LEASE_HELD;
		}
		if (detail)
			*detail = res.message;
		return (res.outcome == MLPLAT_KUBE_EXISTS || res.outcome == MLPLAT_KUBE_CONFLICT)
				   ? MLPLAT_LEASE_LOST
				   : MLPLAT_LEASE_ERROR;
	}
	if (res.outcome != MLPLAT_KUBE_OK || res.body == NULL)
	{
		if (detail)
			*detail = res.message ? res.message : pstrdup("lease GET returned no body");
		return MLPLAT_LEASE_ERROR;
	}

	holder = mlplat_json_text(res.body, "spec", "holderIdentity", NULL);
	renew = mlplat_json_text(res.body, "spec", "renewTime", NULL);
	acquire = mlplat_json_text(res.body, "spec", "acquireTime", NULL);
	rv = mlplat_json_text(res.body, "metadata", "resourceVersion", NULL);
	(void) mlplat_json_int(res.body, "spec", "leaseDurationSeconds", &dur);
	(void) mlplat_json_int(res.body, "spec", "leaseTransitions", &transitions);

	/* measure expiry on our own clock, from when we saw the record change */
	t = mono_ms();
	if (!obs->valid || strcmp(obs->holder, holder ? holder : "") != 0 ||
		strcmp(obs->renew_time, renew ? renew : "") != 0)
	{
		obs->valid = true;
		strlcpy(obs->holder, holder ? holder : "", sizeof(obs->holder));
		strlcpy(obs->renew_time, renew ? renew : "", sizeof(obs->renew_time));
		obs->observed_ms = t;
	}
	obs->duration_s = (int) dur;

	if (holder && holder[0] && strcmp(holder, identity) != 0 &&
		t < obs->observed_ms + (double) dur * 1000.0 &&
		!(may_preempt && may_preempt(holder, identity)))
	{
		if (detail)
			*detail = psprintf("lease %s/%s is held by \"%s\" (renewed %s)", ns, name, holder,
							   renew ? renew : "never");
		return MLPLAT_LEASE_OTHER;
	}

	/* take it (new holder: new acquireTime, one more transition) or renew it */
	if (!(holder && strcmp(holder, identity) == 0))
	{
		acquire = now;
		transitions++;
	}
	b = mlplat_http_batch_create(CurrentMemoryContext);
	req = mlplat_kube_replace(b, &lease_resource, ns, name,
							  lease_body(ns, name, rv, identity, duration_s,
										 acquire ? acquire : now, now, transitions));
	run_one(b, req, allow_xact, &res);
	if (res.outcome == MLPLAT_KUBE_OK)
	{
		strlcpy(obs->holder, identity, sizeof(obs->holder));
		strlcpy(obs->renew_time, now, sizeof(obs->renew_time));
		obs->observed_ms = mono_ms();
		obs->duration_s = duration_s;
		return MLPLAT_LEASE_HELD;
	}
	if (detail)
		*detail = res.message;
	return res.outcome == MLPLAT_KUBE_CONFLICT ? MLPLAT_LEASE_LOST : MLPLAT_LEASE_ERROR;
}

MlplatLeaseResult
mlplat_kube_lease_acquire_preempting(MlplatLeaseObservation *obs, const char *ns,
									 const char *name, const char *identity, int duration_s,
									 MlplatLeasePreemptFn may_preempt, char **detail)
{
	return mlplat_kube_lease_impl(obs, ns, name, identity, duration_s, detail, false, may_preempt);
}
