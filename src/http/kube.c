/*
 * kube.c — Kubernetes REST client: configuration, request builders and
 * response classification.  See include/mlplat/kube.h (the Lease fence built
 * on it is src/reconcile/lease.c).
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "mlplat/guc.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
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

/*
 * Both below allocate what their result needs, not a StringInfo's 1 kB: a pass
 * builds a path for every request of its batch up front (a chunk of 1,000
 * applies held 6 kB of buffers a row: the path's and its five encoded parts').
 */
static bool
url_plain(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		   c == '_' || c == '~';
}

char *
mlplat_url_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;
	size_t len = 0;
	char *out;
	char *o;

	for (p = (const unsigned char *) s; *p; p++)
		len += url_plain(*p) ? 1 : 3;
	out = o = palloc(len + 1);
	for (p = (const unsigned char *) s; *p; p++)
	{
		if (url_plain(*p))
			*o++ = (char) *p;
		else
		{
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

char *
mlplat_kube_path(const MlplatKubeResource *res, const char *ns, const char *name)
{
	bool core = res->group == NULL || res->group[0] == '\0';
	char *group = core ? NULL : mlplat_url_encode(res->group);
	char *version = mlplat_url_encode(res->version);
	char *nsenc = res->namespaced && ns != NULL && ns[0] != '\0' ? mlplat_url_encode(ns) : NULL;
	char *plural = mlplat_url_encode(res->plural);
	char *nameenc = name != NULL && name[0] != '\0' ? mlplat_url_encode(name) : NULL;
	char *path = psprintf("/%s%s/%s%s%s/%s%s%s", core ? "api" : "apis/", core ? "" : group, version,
						  nsenc ? "/namespaces/" : "", nsenc ? nsenc : "", plural, nameenc ? "/" : "", nameenc ? nameenc : "");

	if (group)
		pfree(group);
	pfree(version);
	if (nsenc)
		pfree(nsenc);
	pfree(plural);
	if (nameenc)
		pfree(nameenc);
	return path;
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
