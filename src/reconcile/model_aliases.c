/*
 * model_aliases.c — the model aliases reconciler: MLflow registry aliases.
 *
 * mlplat.model_aliases says which version each alias (champion, candidate) of
 * a model must point at, or that it must not exist.  In the registry the model
 * is the registered model "<project>.<model>"; MLflow numbers versions itself,
 * so mlplat.model_registry_versions records which registry version holds which
 * mlplat version.
 *
 * One pass:
 *   1. claim the aliases due for a look (short transaction, committed);
 *   2. observe: GET each due alias, and GET each registered model whose
 *      desired version is not yet mapped — all in one concurrent batch;
 *   3. create what is missing (registered model, then model version with
 *      source = artifact URI), adopting a version whose create answer was lost:
 *      the model's latest, carrying our mlplat.version_id tag AND this
 *      installation's mlplat.installation tag AND source = the registered
 *      artifact URI.  A latest version that carries the version tag but not the
 *      rest was planted by someone else: a conflict, reported (ledger ADOPT
 *      CONFLICT, the alias FAILED with the reason); no alias moves to it;
 *   4. decide per alias (pure: alias_decide): nothing, SET, DELETE, or REPAIR
 *      when an alias we had synced was moved outside mlplat; write them in one
 *      batch, then read every written alias back — SYNCED only once verified;
 *   5. write back in a new short transaction: compare-and-swap on row_version
 *      and the leader epoch, the version mapping, a ledger row per registry
 *      write and a history row per alias move.
 * No HTTP happens with a transaction open; nothing is remembered between passes.
 *
 * Registered-model creates and alias writes are noted in mlplat.unanswered_writes before
 * they are sent (unanswered.h): a registered model as entity 0, object "registered model
 * <name>", action CREATE; an alias write as the alias's id, object "<model>@<alias>",
 * action "APPLY <registry version>", "REPAIR <registry version>" or "DELETE".  A pass that
 * finds what such a write made while its note is left (the leader ended before its
 * write-back) records it as ADOPT, also when an intent has since changed the alias.
 * Version creates need no note: the model's latest version, tagged as ours, is adopted.
 */
#include "postgres.h"


#include "catalog/pg_type.h"
#include "common/base64.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_text.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/retry.h"
#include "mlplat/seam.h"
#include "mlplat/secret_file.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

#define TOKEN_MAX 16384
/* permanent errors (403, 400 other than "alias not found") are retried slowly (MLPLAT_PERMANENT_RETRY_MS) */
/* after forgetting a stale version mapping, look again soon */
#define FOLLOW_UP_MS 300
#define VERSION_TAG "mlplat.version_id"
/* this installation's id (mlplat.installation): a version made by another one is not ours */
#define INSTALLATION_TAG "mlplat.installation"

/* ---------------------------------------------------------------- configuration */

/* Process-local; the token is a secret: never logged, wiped when replaced. */
static MlplatSecretFile registry_token;
/* user:password for MLflow's basic-auth app; a secret like the token */
static MlplatSecretFile registry_basic;

/*
 * Is a registry configured and usable?  When not, the pass status says why
 * (shown in mlplat.reconciler_health) — a state, not an error: nothing logged.
 */
static bool
registry_ready(MlplatPass *pass)
{
	const char *why;

	if (mlplat_registry_url == NULL || mlplat_registry_url[0] == '\0')
	{
		mlplat_secret_file_forget(&registry_token);
		mlplat_secret_file_forget(&registry_basic);
		snprintf(pass->status, sizeof(pass->status),
				 "idle: no model registry configured (set mlplat.registry_url)");
		return false;
	}
	if (!mlplat_http_url_allowed(mlplat_registry_url))
	{
		snprintf(pass->status, sizeof(pass->status),
				 "idle: mlplat.registry_url is not an http or https URL");
		return false;
	}
	if ((why = mlplat_secret_file_refresh(&registry_token, mlplat_registry_token_file,
										  "registry token file", TOKEN_MAX,
										  MLPLAT_SECRET_TOKEN, NULL)) != NULL ||
		(why = mlplat_secret_file_refresh(&registry_basic, mlplat_registry_basic_auth_file,
										  "registry basic auth file", TOKEN_MAX,
										  MLPLAT_SECRET_TOKEN, NULL)) != NULL)
	{
		snprintf(pass->status, sizeof(pass->status), "idle: %s", why);
		return false;
	}
	if (registry_token.content && registry_basic.content)
	{
		/* which one the registry wants is not ours to guess: MLflow's basic-auth app refuses a token */
		snprintf(pass->status, sizeof(pass->status),
				 "idle: both mlplat.registry_token_file and mlplat.registry_basic_auth_file are set: set one");
		return false;
	}
	if (registry_basic.content && (registry_basic.content[0] == ':' || strchr(registry_basic.content, ':') == NULL))
	{
		/* the content is a secret: say what is wrong with it, never what it is */
		snprintf(pass->status, sizeof(pass->status),
				 "idle: registry basic auth file is not user:password on one line (\"%s\")",
				 mlplat_registry_basic_auth_file);
		return false;
	}
	return true;
}

/*
 * The Authorization header value for HTTP Basic authentication (RFC 7617):
 * "Basic " and base64 of user:password.  palloc'd; the caller wipes it.
 */
static char *
basic_auth_header(const char *userpass)
{
	int len = (int) strlen(userpass);
	int enclen = pg_b64_enc_len(len);
	char *h = palloc(6 + enclen + 1);
	int n;

	memcpy(h, "Basic ", 6);
	n = pg_b64_encode(userpass, len, h + 6, enclen);
	if (n < 0)
		elog(ERROR, "mlplat: base64 encoding of the registry credentials failed");
	h[6 + n] = '\0';
	return h;
}

/* ---------------------------------------------------------------- registry requests */

static char *
urlenc(const char *s)
{
	StringInfoData b;

	initStringInfo(&b);
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '_' || c == '.' || c == '~')
			appendStringInfoChar(&b, c);
		else
			appendStringInfo(&b, "%%%02X", c);
	}
	return b.data;
}

static MlplatHttpRequest *
reg_request(MlplatHttpBatch *b, const char *method, const char *endpoint, const char *name,
			const char *alias, const char *body)
{
	size_t blen = strlen(mlplat_registry_url);
	MlplatHttpRequest *r;
	StringInfoData url;

	while (blen > 0 && mlplat_registry_url[blen - 1] == '/')
		blen--;
	initStringInfo(&url);
	appendBinaryStringInfo(&url, mlplat_registry_url, blen);
	appendStringInfo(&url, "/api/2.0/mlflow/%s", endpoint);
	if (name)
		appendStringInfo(&url, "?name=%s", urlenc(name));
	if (alias)
		appendStringInfo(&url, "&alias=%s", urlenc(alias));
	r = mlplat_http_batch_add(b, method, url.data);
	mlplat_http_request_add_header(r, "Accept", "application/json");

	/*
	 * No keep-alive: libcurl silently re-sends a request whose reused
	 * connection died before any answer, and registry creates are not
	 * idempotent (a lost answer would become a second model version).  On
	 * a fresh connection a lost answer is an error; the next pass adopts
	 * the version it made by its tag.  Registry traffic is small.
	 */
	mlplat_http_request_add_header(r, "Connection", "close");
	if (registry_token.content || registry_basic.content)
	{
		char *h = registry_token.content ? psprintf("Bearer %s", registry_token.content)
										 : basic_auth_header(registry_basic.content);

		mlplat_http_request_add_header(r, "Authorization", h);
		explicit_bzero(h, strlen(h));
	}
	if (mlplat_registry_ca_file && mlplat_registry_ca_file[0])
		r->ca_file = mlplat_registry_ca_file;
	if (body)
		mlplat_http_request_set_body(r, "application/json", body, strlen(body));
	return r;
}

typedef struct RegResult
{
	int status;	   /* 0: no response */
	bool ok;	   /* 2xx */
	char *message; /* for humans (never contains headers) */
	const MlJsonValue *body;
	int retry_after_s;
} RegResult;

/* MLflow's error_code of an error answer, or NULL */
static const char *
reg_code(const MlJsonValue *body)
{
	const MlJsonValue *v = body ? ml_json_object_get(body, "error_code") : NULL;

	return (v && v->type == ML_JSON_STRING) ? v->u.string.str : NULL;
}

/* The line of an error answer: its status, MLflow's error_code and message (clipped) */
static char *
reg_error_line(int status, const MlJsonValue *body)
{
	const char *code = reg_code(body);
	const MlJsonValue *v = body ? ml_json_object_get(body, "message") : NULL;

	return psprintf("registry answered HTTP %d %s%s%s", status, code ? code : "",
					(v && v->type == ML_JSON_STRING) ? ": " : "",
					(v && v->type == ML_JSON_STRING)
						? pnstrdup(v->u.string.str, ml_utf8_clip(v->u.string.str, v->u.string.len, 300))
						: "");
}

/* The answer of a registry write (a read is observed: observe.h) */
static void
reg_parse(MlJsonArena *arena, MlplatHttpRequest *r, RegResult *out)
{
	MlJsonError err;

	memset(out, 0, sizeof(*out));
	if (r->failed || !r->done)
	{
		out->message = psprintf("registry request failed: %s", r->error[0] ? r->error : "not run");
		return;
	}
	out->status = r->status;
	out->retry_after_s = r->retry_after_s;
	out->body = r->resp_len > 0 ? ml_json_parse(arena, r->resp_body, r->resp_len, NULL, &err) : NULL;
	out->ok = r->status >= 200 && r->status < 300;
	if (out->ok)
		return;
	out->message = reg_error_line(r->status, out->body);
}

/* Did the registry answer with this status and MLflow error_code? */
static bool
reg_answered(int status, const MlJsonValue *body, int want_status, const char *want_code)
{
	const char *code = reg_code(body);

	return status == want_status && code && strcmp(code, want_code) == 0;
}

static bool
reg_is(const RegResult *res, int status, const char *code)
{
	return !res->ok && reg_answered(res->status, res->body, status, code);
}

/* A registered model that does not exist: 404 RESOURCE_DOES_NOT_EXIST */
static bool
reg_model_gone(int status, const MlJsonValue *body)
{
	return reg_answered(status, body, 404, "RESOURCE_DOES_NOT_EXIST");
}

/* An alias that does not exist: MLflow's 400 INVALID_PARAMETER_VALUE, or its model's 404 */
static bool
reg_alias_gone(int status, const MlJsonValue *body)
{
	return reg_answered(status, body, 400, "INVALID_PARAMETER_VALUE") || reg_model_gone(status, body);
}

/* The registry as observe.h's peer: what it reads of a registered model, and of an alias */
static const MlplatObservePeer REGISTRY_MODEL = { "registry", reg_model_gone, reg_error_line, false };
static const MlplatObservePeer REGISTRY_ALIAS = { "registry", reg_alias_gone, reg_error_line, false };

/* ---------------------------------------------------------------- state */

typedef struct RegModel
{
	char *name;
	char *project;
	int64 alias_id;			   /* for the ledger */
	MlplatObservedObject seen; /* the registered model, observed */
	MlplatHttpRequest *create_req;
	bool exists;
	bool adopt;				   /* found, with its create's note left: ledger ADOPT */
	const MlJsonValue *latest; /* latest_versions[0] */
	char *error;
	int http_status;
	int retry_after_s;
} RegModel;

typedef struct RegVersion
{
	int64 version_id;
	RegModel *model;
	char *version;
	char *artifact_uri;
	MlplatHttpRequest *req;
	char *reg_version; /* result */
	bool adopted;
	bool conflict; /* tagged as ours, but not made by us: not adopted */
	char *error;
	int http_status;
	int retry_after_s;
} RegVersion;

typedef struct AliasRow
{
	/* claimed: the attributes of mlplat.model_alias_claim */
	MLPLAT_SEAM_MEMBERS(model_alias_claim)
	/* observed */
	MlplatObservedObject seen; /* the alias in the registry */
	bool observed_ok;
	char *observed; /* registry version the alias points at; NULL: absent */
	bool model_missing;
	/* decided */
	const char *action; /* NULL, "SET", "DELETE", "REPAIR" */
	char *target;		/* registry version wanted; NULL: absent */
	MlplatHttpRequest *write_req;
	MlplatObservedObject verify;  /* read back after the write (verify.get NULL: not written) */
	bool moved;					  /* the registry write succeeded: a history row */
	const MlplatUnanswered *note; /* an alias write never answered */
	bool adopt;					  /* what it wrote is there: ledger ADOPT */
	bool drop_note;				  /* its note is overtaken and past the grace: remove it */
	char *adopted;				  /* ... the registry version it set (NULL: deleted) */
	bool unmap;					  /* the mapped registry version is gone */
	/* write-back */
	bool write;
	MlplatModelAliasStatus new_status;
	char *reason;
	char *error;
	int retry_ms; /* -1: none */
	bool mark_observed;
	int http_status;
	const char *ledger_outcome;
	List *spans; /* written with the write-back (alias_spans) */
} AliasRow;

/* The seam (seam.h): mlplat.model_alias_claim read into AliasRow ... */
MLPLAT_SEAM_STATIC(claim_seam, model_alias_claim, AliasRow);

/* ... and mlplat.model_alias_writeback, the status write-back of seam.h */
MLPLAT_SEAM_STATIC(writeback_seam, model_alias_writeback, MlplatStatusWriteback);

MlplatSeam *const mlplat_model_aliases_seams[] = { &claim_seam, &writeback_seam, NULL };

static void
alias_fail(AliasRow *a, const char *error, int http_status, int retry_after_s, bool permanent)
{
	a->write = true;
	a->error = pstrdup(error);
	a->http_status = http_status;
	a->new_status = permanent ? MLPLAT_MODEL_ALIAS_FAILED : MLPLAT_MODEL_ALIAS_PENDING;
	a->reason = permanent ? psprintf("registry refused: %s", error) : pstrdup("waiting to retry the registry");
	a->retry_ms = mlplat_retry_ms(permanent, a->attempts, a->id, retry_after_s);
}

/* 4xx other than 404/408/409/429 will not heal by itself soon. */
static bool
permanent_status(int status)
{
	return status >= 400 && status < 500 && status != 404 && status != 408 && status != 409 && status != 429;
}

/* ---------------------------------------------------------------- notes of unanswered writes */

/* "<model>@<alias>": the object of an alias write's note */
static char *
alias_object(const AliasRow *a)
{
	return psprintf("%s@%s", a->registered_model, a->alias);
}

/* "registered model <name>": the object of a registered-model create's note (entity 0) */
static char *
model_object(const RegModel *m)
{
	return psprintf("registered model %s", m->name);
}

/* The note of an alias write: its ledger action and the registry version it sets */
static char *
alias_note(const AliasRow *a)
{
	const char *act = strcmp(a->action, "SET") == 0 ? "APPLY" : a->action;

	return a->target ? psprintf("%s %s", act, a->target) : pstrdup(act);
}

/* The registry version an alias write's note says it set (NULL: it deleted the alias) */
static const char *
noted_target(const MlplatUnanswered *u)
{
	const char *sp = strchr(u->action, ' ');

	return sp ? sp + 1 : NULL;
}

/*
 * An alias write whose answer no write-back recorded made what is observed: the wanted
 * state (then nothing is written), or the state it set before an intent changed the alias
 * (then it is recorded before the write that replaces it).  Either way: ledger ADOPT.
 */
static void
alias_adopt_decide(AliasRow *a)
{
	if (a->note == NULL)
		return;
	if (!mlplat_unanswered_seen_settles(a->note))
	{
		/* a later leader's answered write overtook it: only the grace settles it */
		a->drop_note = mlplat_unanswered_settled(a->note);
		return;
	}
	if (mlplat_str_same(a->observed, noted_target(a->note)))
	{
		a->adopt = true;
		a->adopted = a->observed;
	}
}

/* ---------------------------------------------------------------- pure decision */

/*
 * What one alias needs, from desired and observed alone.  An alias that was
 * synced for the current intent and now differs was moved outside mlplat: that
 * is a REPAIR; otherwise a difference is mlplat's own pending move.
 */
static void
alias_decide(AliasRow *a)
{
	a->target = a->version_id ? a->registry_version : NULL;
	a->new_status = a->status;
	if (mlplat_str_same(a->observed, a->target))
	{
		a->new_status = MLPLAT_MODEL_ALIAS_SYNCED;
		a->mark_observed = true;
		a->reason = a->target ? psprintf("%s -> version %s (registry version %s), verified", a->alias,
										 a->version, a->target)
							  : psprintf("%s absent, verified", a->alias);
		a->write = a->status != MLPLAT_MODEL_ALIAS_SYNCED || a->generation != a->observed_generation ||
				   a->attempts > 0;
		return;
	}
	if (a->status == MLPLAT_MODEL_ALIAS_SYNCED && a->generation == a->observed_generation)
		a->action = "REPAIR";
	else
		a->action = a->target ? "SET" : "DELETE";
}

/* ---------------------------------------------------------------- I/O */

static List *
claim(MlplatPassWork *w, List **notes)
{
	MlplatPass *pass = w->pass;
	Datum arg = BoolGetDatum(pass->resync);
	Oid argtype = BOOLOID;
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(pass, &claim_seam, "SELECT c FROM mlplat._aliases_claim($1) c", 1, &argtype, &arg,
						   sizeof(AliasRow), true, 0, &c);
	foreach (lc, c.rows)
	{
		AliasRow *a = lfirst(lc);

		a->retry_ms = -1;
		a->note = mlplat_unanswered_find(c.notes, a->id, alias_object(a), NULL);
	}
	/* a registry's objects carry tags, not labels: the selector is not used */
	mlplat_pass_work_claimed(w, c.instance, NULL);
	*notes = c.notes;
	return c.rows;
}

/*
 * What an alias read observed: true when understood (*observed: the registry version it
 * points at, NULL when absent; *model_missing: its registered model is gone), false when
 * not (*why).
 */
static bool
observe_alias(const MlplatObservedObject *o, char **observed, bool *model_missing, const char **why)
{
	const char *v;

	*observed = NULL;
	*model_missing = false;
	switch (o->state)
	{
		case MLPLAT_OBSERVED_FOUND:
			v = mlplat_json_text(o->obj, "model_version", "version", NULL);
			if (v == NULL)
			{
				*why = "registry alias answer carries no model_version.version";
				return false;
			}
			*observed = pstrdup(v);
			return true;
		case MLPLAT_OBSERVED_GONE:
			*model_missing = o->http_status == 404; /* not MLflow's 400 of a missing alias */
			return true;
		default:
			*why = o->error;
			return false;
	}
}

static RegModel *
find_model(List *models, const char *name)
{
	ListCell *lc;

	foreach (lc, models)
	{
		RegModel *m = lfirst(lc);

		if (strcmp(m->name, name) == 0)
			return m;
	}
	return NULL;
}

/* The value of one tag of a registry version, or NULL. */
static const char *
tag_of(const MlJsonValue *mv, const char *key)
{
	const MlJsonValue *tags = mv ? ml_json_object_get(mv, "tags") : NULL;

	if (tags == NULL || tags->type != ML_JSON_ARRAY)
		return NULL;
	for (size_t i = 0; i < tags->u.array.count; i++)
	{
		const char *k = mlplat_json_text(tags->u.array.items[i], "key", NULL, NULL);

		if (k && strcmp(k, key) == 0)
			return mlplat_json_text(tags->u.array.items[i], "value", NULL, NULL);
	}
	return NULL;
}

/* Does this registry version carry our tag for version_id? */
static bool
tagged_as(const MlJsonValue *mv, int64 version_id)
{
	const char *v = tag_of(mv, VERSION_TAG);
	char want[32];

	snprintf(want, sizeof(want), INT64_FORMAT, version_id);
	return v && strcmp(v, want) == 0;
}

/*
 * Is a version tagged as ours really the one our create made?  A tag is whatever
 * its writer wrote: anyone who can write to the registry can plant a version with
 * our version tag and another source.  It must also come from this installation
 * and hold the registered artifact.  NULL when it is ours, else why not.
 */
static char *
not_ours(const MlJsonValue *mv, const RegVersion *v, const char *instance)
{
	const char *src = mlplat_json_text(mv, "source", NULL, NULL);
	const char *inst = tag_of(mv, INSTALLATION_TAG);

	if (src == NULL || strcmp(src, v->artifact_uri) != 0)
		return psprintf("its source is %s, not the registered artifact %s", src ? src : "(none)", v->artifact_uri);
	if (inst == NULL || strcmp(inst, instance) != 0)
		return psprintf("its %s tag is %s, not this installation's", INSTALLATION_TAG, inst ? inst : "absent");
	return NULL;
}

static bool
ensure_registry_versions(MlplatPassWork *w, List *models, List *versions, List *notes)
{
	MlJsonArena *arena = w->arena;
	MlplatHttpBatch *b;
	ListCell *lc;
	RegResult res;
	MlplatWriteNotes sending = { 0 }; /* the model creates' own: committed before the alias writes are decided */

	/* registered models that do not exist yet */
	b = mlplat_http_batch_create(CurrentMemoryContext);
	foreach (lc, models)
	{
		RegModel *m = lfirst(lc);

		if (m->seen.state == MLPLAT_OBSERVED_FOUND)
		{
			const MlJsonValue *lv = ml_json_object_get(ml_json_object_get(m->seen.obj, "registered_model"),
													   "latest_versions");

			m->exists = true;
			/* made by a create whose answer was never recorded */
			m->adopt = mlplat_unanswered_find(notes, 0, model_object(m), NULL) != NULL;
			if (lv && lv->type == ML_JSON_ARRAY && lv->u.array.count > 0)
				m->latest = lv->u.array.items[lv->u.array.count - 1];
		}
		else if (m->seen.state == MLPLAT_OBSERVED_GONE)
		{
			m->create_req = reg_request(b, "POST", "registered-models/create", NULL, NULL,
										mlplat_json_object("name", m->name, "description",
														   psprintf("mlplat model %s", m->name), NULL));
			mlplat_write_notes_add(&sending, 0, model_object(m), "CREATE");
			w->creates++;
		}
		else
		{
			m->error = pstrdup(m->seen.error);
			m->http_status = m->seen.http_status;
			m->retry_after_s = m->seen.retry_after_s;
		}
	}
	/* the write-ahead: every create is on record before it is sent */
	if (!mlplat_write_notes_commit(w->pass, &sending, "model creates"))
		return false;
	mlplat_http_batch_run(b);
	foreach (lc, models)
	{
		RegModel *m = lfirst(lc);

		if (!m->create_req)
			continue;
		reg_parse(arena, m->create_req, &res);
		/* RESOURCE_ALREADY_EXISTS: someone (an earlier pass whose answer was lost) made it */
		if (res.ok || reg_is(&res, 400, "RESOURCE_ALREADY_EXISTS"))
			m->exists = true;
		else
		{
			m->error = res.message;
			m->retry_after_s = res.retry_after_s;
		}
		m->http_status = res.status;
	}

	/* model versions: adopt our lost-answer create, else create */
	b = mlplat_http_batch_create(CurrentMemoryContext);
	foreach (lc, versions)
	{
		RegVersion *v = lfirst(lc);
		char idbuf[32];
		StringInfoData body;

		if (!v->model->exists)
			continue;
		if (tagged_as(v->model->latest, v->version_id) && mlplat_json_text(v->model->latest, "version", NULL, NULL))
		{
			char *why = not_ours(v->model->latest, v, w->instance);

			if (why)
			{
				/* planted, or made by another installation: report it and move nothing */
				v->conflict = true;
				v->error = psprintf("registry version %s of %s carries %s %lld but is not this installation's create: %s;"
									" not adopted (remove it from the registry to go on)",
									mlplat_json_text(v->model->latest, "version", NULL, NULL), v->model->name, VERSION_TAG,
									(long long) v->version_id, why);
				continue;
			}
			v->reg_version = pstrdup(mlplat_json_text(v->model->latest, "version", NULL, NULL));
			v->adopted = true;
			continue;
		}
		snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, v->version_id);
		initStringInfo(&body);
		appendStringInfoString(&body, "{\"name\":");
		escape_json(&body, v->model->name);
		appendStringInfoString(&body, ",\"source\":");
		escape_json(&body, v->artifact_uri);
		appendStringInfoString(&body, ",\"description\":");
		escape_json(&body, psprintf("mlplat version %s", v->version));
		appendStringInfoString(&body, ",\"tags\":[{\"key\":\"" VERSION_TAG "\",\"value\":");
		escape_json(&body, idbuf);
		appendStringInfoString(&body, "},{\"key\":\"mlplat.version\",\"value\":");
		escape_json(&body, v->version);
		appendStringInfoString(&body, "},{\"key\":\"" INSTALLATION_TAG "\",\"value\":");
		escape_json(&body, w->instance);
		appendStringInfoString(&body, "}]}");
		v->req = reg_request(b, "POST", "model-versions/create", NULL, NULL, body.data);
		w->creates++;
	}
	mlplat_http_batch_run(b);
	foreach (lc, versions)
	{
		RegVersion *v = lfirst(lc);

		if (!v->model->exists)
		{
			v->error = v->model->error;
			v->http_status = v->model->http_status;
			v->retry_after_s = v->model->retry_after_s;
			continue;
		}
		if (!v->req)
			continue;
		reg_parse(arena, v->req, &res);
		v->http_status = res.status;
		if (res.ok && mlplat_json_text(res.body, "model_version", "version", NULL))
			v->reg_version = pstrdup(mlplat_json_text(res.body, "model_version", "version", NULL));
		else
		{
			v->error = res.message ? res.message : pstrdup("registry answer carries no model_version.version");
			v->retry_after_s = res.retry_after_s;
		}
	}
	return true;
}

/* A CLIENT span of one registry request made for alias a, or NULL without a trace. */
static MlplatSpan *
alias_request_span(AliasRow *a, MlplatHttpRequest *r, const char *name, const char *error)
{
	MlplatSpan *s = mlplat_span_begin_at(a->traceparent, name, MLPLAT_SPAN_CLIENT,
										 r->started_at ? r->started_at : GetCurrentTimestamp());

	mlplat_span_set_entity(s, a->project, "model_alias", a->id);
	mlplat_span_attr_text(s, "mlplat.registered_model", a->registered_model);
	mlplat_span_attr_text(s, "mlplat.alias", a->alias);
	mlplat_span_attr_text(s, "mlplat.alias.action", a->action);
	if (a->target)
		mlplat_span_attr_text(s, "mlplat.registry_version", a->target);
	mlplat_span_end_request(s, r, r->status, error);
	return s;
}

/*
 * The spans of an alias this pass wrote, in the trace of the intent stored
 * with it (set_model_stage, ...): the registry write (SET, DELETE or REPAIR)
 * and the read-back that verified it.
 */
static void
alias_spans(AliasRow *a)
{
	if (a->write_req == NULL)
		return;
	a->spans = lappend(a->spans, alias_request_span(a, a->write_req, "model_aliases.write",
													strcmp(a->ledger_outcome, "OK") == 0 ? NULL : a->error));
	if (a->verify.get)
		a->spans = lappend(a->spans, alias_request_span(a, a->verify.get, "model_aliases.verify",
														a->new_status == MLPLAT_MODEL_ALIAS_SYNCED
															? NULL
															: a->error));
}

/*
 * The write-back row of a (after its registry bookkeeping: the mapped version,
 * the ledger rows, the notes it settles, a history row when it moved).
 */
static bool
alias_row(MlplatWriteback *wb, void *entity, void *row)
{
	AliasRow *a = entity;
	MlplatStatusWriteback *w = row;
	char *trace = mlplat_trace_id_of(a->traceparent);

	if (a->unmap)
		(void) mlplat_sql_bool("SELECT mlplat._aliases_map_version($1, NULL, NULL, $2)", 2,
							   (Oid[]){ INT8OID, INT8OID },
							   (Datum[]){ Int64GetDatum(a->version_id), Int64GetDatum(wb->pass->epoch) }, NULL);
	if (a->adopt)
		mlplat_ledger_batch_add(wb->ledger, "model_alias", a->id, a->project, "ADOPT", "OK", NULL, NULL, 0, NULL, trace,
								psprintf("%s %s -> %s: set by a write whose answer was never recorded", a->registered_model,
										 a->alias, a->adopted ? a->adopted : "(none)"));
	/* this leader's notes of the alias once a write is answered; an adopted one by itself too */
	if (a->write_req && mlplat_write_answered(a->http_status))
		mlplat_write_notes_answered(&wb->settled, a->id, alias_object(a), NULL,
									strcmp(a->action, "DELETE") != 0 && mlplat_write_made(a->http_status));
	if (a->adopt || a->drop_note)
		mlplat_write_notes_add(&wb->settled, a->id, alias_object(a), a->note->action);
	if (a->write_req)
	{
		mlplat_ledger_batch_add(wb->ledger, "model_alias", a->id, a->project,
								strcmp(a->action, "SET") == 0 ? "APPLY" : a->action,
								a->ledger_outcome, NULL, NULL, a->http_status, a->error, trace,
								psprintf("%s %s: %s -> %s", a->registered_model, a->alias,
										 a->observed ? a->observed : "(none)",
										 a->target ? a->target : "(none)"));
	}
	if (a->moved)
		(void) mlplat_sql_bool("SELECT mlplat._aliases_history($1, $2, $3, $4, $5, $6, $7, $8, $9)", 9,
							   (Oid[]){ INT8OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID },
							   (Datum[]){ Int64GetDatum(a->id), CStringGetTextDatum(a->action),
										  Int64GetDatum(a->version_id), a->moved_by ? CStringGetTextDatum(a->moved_by) : 0,
										  a->target ? CStringGetTextDatum(a->target) : 0,
										  a->observed ? CStringGetTextDatum(a->observed) : 0,
										  Int64GetDatum(wb->pass->epoch), CStringGetTextDatum(wb->pass->controller),
										  trace ? CStringGetTextDatum(trace) : 0 },
							   (const char[]){ ' ', ' ', a->version_id ? ' ' : 'n', a->moved_by ? ' ' : 'n',
											   a->target ? ' ' : 'n', a->observed ? ' ' : 'n', ' ', ' ', trace ? ' ' : 'n' });
	if (!a->write)
		return false;
	w->status = a->new_status;
	w->reason = a->reason;
	w->observed_generation = a->mark_observed ? a->generation : -1;
	w->observed = a->observed_ok ? mlplat_json_object("registered_model", a->registered_model, "version",
													  a->mark_observed ? a->target : a->observed, NULL)
								 : NULL;
	w->error = a->error;
	w->retry_ms = a->retry_ms;
	wb->row_spans = a->spans;
	return true;
}

static void
write_back(MlplatPass *pass, List *aliases, List *models, List *versions)
{
	MlplatWriteback wb;
	ListCell *lc;

	/* built before the transaction: the lists live in the pass's context */
	foreach (lc, aliases)
		alias_spans(lfirst(lc));

	mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
	foreach (lc, models)
	{
		RegModel *m = lfirst(lc);

		if (m->adopt)
			mlplat_ledger_batch_add(wb.ledger, "model_alias", m->alias_id, m->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
									NULL, psprintf("%s: made by a create whose answer was never recorded", model_object(m)));
		if (m->create_req)
			mlplat_ledger_batch_add(wb.ledger, "model_alias", m->alias_id, m->project, "CREATE",
									m->exists ? "OK" : "RETRY", NULL, NULL, m->http_status, m->error, NULL,
									model_object(m));
		if (m->adopt)
			mlplat_write_notes_add(&wb.settled, 0, model_object(m), NULL);
		else if (m->create_req && mlplat_write_answered(m->http_status))
			mlplat_write_notes_answered(&wb.settled, 0, model_object(m), NULL, mlplat_write_made(m->http_status));
	}
	foreach (lc, versions)
	{
		RegVersion *v = lfirst(lc);

		if (v->reg_version)
			(void) mlplat_sql_bool("SELECT mlplat._aliases_map_version($1, $2, $3, $4)", 4,
								   (Oid[]){ INT8OID, TEXTOID, TEXTOID, INT8OID },
								   (Datum[]){ Int64GetDatum(v->version_id), CStringGetTextDatum(v->model->name),
											  CStringGetTextDatum(v->reg_version), Int64GetDatum(pass->epoch) },
								   NULL);
		if (v->conflict)
			mlplat_ledger_batch_add(wb.ledger, "model_alias", 0, v->model->project, "ADOPT", "CONFLICT", NULL, NULL, 0,
									v->error, NULL, psprintf("model version %s of %s", v->version, v->model->name));
		if (v->adopted)
			mlplat_ledger_batch_add(wb.ledger, "model_alias", 0, v->model->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
									NULL, psprintf("model version %s of %s found as registry version %s (an earlier"
												   " create whose answer was lost)",
												   v->version, v->model->name, v->reg_version));
		if (v->req)
			mlplat_ledger_batch_add(wb.ledger, "model_alias", 0, v->model->project, "CREATE",
									v->reg_version ? "OK" : "RETRY", NULL, NULL, v->http_status, v->error, NULL,
									psprintf("model version %s of %s%s%s", v->version, v->model->name,
											 v->reg_version ? " as registry version " : "",
											 v->reg_version ? v->reg_version : ""));
	}
	mlplat_writeback_rows(&wb, aliases, alias_row, "SELECT * FROM mlplat._aliases_writeback_set($1, $2)", NULL);
	mlplat_writeback_end(&wb);
}

/*
 * Observe: every due alias, and the models of versions the registry lacks
 * (*models, *versions: what ensure_registry_versions is to create), in the work's batch.
 */
static void
observe(MlplatPassWork *w, List *due, List **models, List **versions)
{
	ListCell *lc;

	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);

		mlplat_observe_peer(&a->seen,
							reg_request(w->batch, "GET", "registered-models/alias", a->registered_model, a->alias, NULL),
							&REGISTRY_ALIAS);
		if (a->version_id && a->registry_version == NULL)
		{
			RegModel *m = find_model(*models, a->registered_model);
			RegVersion *v = NULL;
			ListCell *vc;

			if (m == NULL)
			{
				m = palloc0(sizeof(RegModel));
				m->name = a->registered_model;
				m->project = a->project;
				m->alias_id = a->id;
				mlplat_observe_peer(&m->seen,
									reg_request(w->batch, "GET", "registered-models/get", a->registered_model, NULL, NULL),
									&REGISTRY_MODEL);
				*models = lappend(*models, m);
			}
			foreach (vc, *versions)
				if (((RegVersion *) lfirst(vc))->version_id == a->version_id)
					v = lfirst(vc);
			if (v == NULL)
			{
				v = palloc0(sizeof(RegVersion));
				v->version_id = a->version_id;
				v->model = m;
				v->version = a->version;
				v->artifact_uri = a->artifact_uri;
				*versions = lappend(*versions, v);
			}
		}
	}
	mlplat_http_batch_run(w->batch);
	foreach (lc, *models)
		mlplat_observe_got(&((RegModel *) lfirst(lc))->seen, w->arena);

	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);
		const char *why;

		mlplat_observe_got(&a->seen, w->arena);
		a->observed_ok = observe_alias(&a->seen, &a->observed, &a->model_missing, &why);
		if (!a->observed_ok)
			alias_fail(a, why, a->seen.http_status, a->seen.retry_after_s, permanent_status(a->seen.http_status));
		else if (a->model_missing && a->registry_version)
		{
			/* the registry lost the model our mapping points into: map again */
			a->unmap = true;
			a->write = true;
			a->new_status = MLPLAT_MODEL_ALIAS_PENDING;
			a->reason = psprintf("registered model %s is missing; recreating it", a->registered_model);
			w->pass->next_pass_ms = FOLLOW_UP_MS;
		}
	}
}

/*
 * Decide, then write every alias that differs in one batch, its note on record first,
 * and read back what was written: SYNCED only once verified.  False when the notes
 * could not be committed (no longer the leader): nothing was sent.
 */
static bool
write_aliases(MlplatPassWork *w, List *due)
{
	MlplatHttpBatch *batch;
	ListCell *lc;
	RegResult res;

	batch = mlplat_http_batch_create(w->cxt);
	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);

		if (!a->observed_ok || a->unmap || a->error)
			continue;
		alias_decide(a);
		alias_adopt_decide(a);
		if (a->action == NULL)
			continue;
		if (a->target)
			a->write_req = reg_request(batch, "POST", "registered-models/alias", NULL, NULL,
									   mlplat_json_object("name", a->registered_model, "alias", a->alias, "version", a->target, NULL));
		else
			a->write_req = reg_request(batch, "DELETE", "registered-models/alias", a->registered_model, a->alias,
									   mlplat_json_object("name", a->registered_model, "alias", a->alias, NULL));
		mlplat_write_notes_add(&w->sending, a->id, alias_object(a), alias_note(a));
		w->writes++;
	}
	/* the write-ahead: every alias write is on record before it is sent */
	if (!mlplat_pass_work_notes_commit(w, "alias writes"))
		return false;
	mlplat_http_batch_run(batch);

	/* read back what was written: SYNCED only once verified */
	batch = mlplat_http_batch_create(w->cxt);
	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);

		if (!a->write_req)
			continue;
		reg_parse(w->arena, a->write_req, &res);
		a->http_status = res.status;
		if (res.ok)
		{
			a->ledger_outcome = "OK";
			a->moved = true;
			mlplat_observe_peer(&a->verify,
								reg_request(batch, "GET", "registered-models/alias", a->registered_model, a->alias, NULL),
								&REGISTRY_ALIAS);
		}
		else
		{
			a->ledger_outcome = permanent_status(res.status) ? "FAILED" : "RETRY";
			if (a->target && reg_is(&res, 404, "RESOURCE_DOES_NOT_EXIST"))
			{
				/* the version (or model) we mapped is gone from the registry */
				a->unmap = true;
				w->pass->next_pass_ms = FOLLOW_UP_MS;
			}
			alias_fail(a, res.message, res.status, res.retry_after_s, permanent_status(res.status));
		}
	}
	mlplat_http_batch_run(batch);
	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);
		char *seen;
		bool missing;
		const char *why;

		if (!a->verify.get)
			continue;
		a->write = true;
		mlplat_observe_got(&a->verify, w->arena);
		if (!observe_alias(&a->verify, &seen, &missing, &why))
		{
			alias_fail(a, why, a->verify.http_status, a->verify.retry_after_s, false);
			continue;
		}
		if (!mlplat_str_same(seen, a->target))
		{
			alias_fail(a, psprintf("read back %s %s -> %s after writing %s", a->registered_model, a->alias, seen ? seen : "(none)", a->target ? a->target : "(none)"),
					   0, 0, false);
			continue;
		}
		a->new_status = MLPLAT_MODEL_ALIAS_SYNCED;
		a->mark_observed = true;
		a->reason = a->target
						? psprintf("%s -> version %s (registry version %s): %s, verified", a->alias, a->version,
								   a->target, strcmp(a->action, "REPAIR") == 0 ? "repaired an outside move" : "set")
						: psprintf("%s deleted%s, verified", a->alias,
								   strcmp(a->action, "REPAIR") == 0 ? " (repaired an outside move)" : "");
	}
	return true;
}

void
mlplat_model_aliases_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	List *all;
	List *due = NIL;
	List *models = NIL;
	List *versions = NIL;
	ListCell *lc;
	List *notes;

	if (!registry_ready(pass))
		return;

	mlplat_pass_work_begin(&w, pass);
	all = claim(&w, &notes);
	foreach (lc, all)
	{
		AliasRow *a = lfirst(lc);

		if (a->due)
			due = lappend(due, a);
	}
	if (due == NIL)
	{
		snprintf(pass->status, sizeof(pass->status), "%d aliases, none due", list_length(all));
		return;
	}

	observe(&w, due, &models, &versions);
	if (versions != NIL && !ensure_registry_versions(&w, models, versions, notes))
	{
		snprintf(pass->status, sizeof(pass->status), "no longer the leader: registered models not created");
		return;
	}
	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);
		ListCell *vc;

		if (!a->observed_ok || a->unmap || !a->version_id || a->registry_version)
			continue;
		foreach (vc, versions)
		{
			RegVersion *v = lfirst(vc);

			if (v->version_id != a->version_id)
				continue;
			if (v->reg_version)
				a->registry_version = v->reg_version;
			else
				alias_fail(a, v->error ? v->error : "registry version not created", v->http_status,
						   v->retry_after_s, v->conflict || permanent_status(v->http_status));
		}
	}

	if (!write_aliases(&w, due))
		return;

	write_back(pass, due, models, versions);
	/* come back when the earliest retry is due, not only at the next resync */
	foreach (lc, due)
	{
		AliasRow *a = lfirst(lc);

		if (a->retry_ms >= 0 && (pass->next_pass_ms <= 0 || a->retry_ms + 50 < pass->next_pass_ms))
			pass->next_pass_ms = a->retry_ms + 50;
	}
	/* the alias writes are the status line's writes */
	mlplat_pass_work_status(&w, NULL, "%d aliases, %d due, %d versions mapped", list_length(all), list_length(due),
							list_length(versions));
}
