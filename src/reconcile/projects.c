/*
 * projects.c — the projects reconciler: a namespace per project and what
 * makes it a tenant.
 *
 * Per project, in namespace mlp-<project>, all labelled managed-by=mlplat,
 * mlplat.io/project and mlplat.io/instance:
 *   Namespace       mlp-<project>
 *   ResourceQuota   mlplat-quota      requests.nvidia.com/gpu (+ requests.cpu,
 *                                     requests.memory when the project sets them)
 *   LimitRange      mlplat-limits     container defaults (see LR_* below)
 *   NetworkPolicy   mlplat-isolation  ingress only from the same namespace and
 *                                     from the ingress gateway namespaces
 *   RoleBinding     mlplat-<role>-<principal> per member, roleRef ClusterRole
 *                                     mlplat-<role>
 *   ServiceAccount  <mlplat.runner_service_account>  the identity of the run's
 *                                     Workflow pods (no token automounted: Argo
 *                                     mounts one into its executor only)
 *   Role            <runner>          what Argo's executor needs and nothing
 *                                     more: create/patch workflowtaskresults
 *   RoleBinding     <runner>          the Role to the runner ServiceAccount
 *   RoleBinding     mlplat-lab-inputs  ClusterRole mlplat-lab-inputs (the lab's
 *                                     input Secrets) to mlplat.controller_user: the
 *                                     controller touches Secrets only in project
 *                                     namespaces (none when the setting is empty)
 *   ServiceAccount  <mlplat.predictor_service_account>  the identity of the
 *                                     InferenceServices' pods: KServe's S3
 *                                     annotations and the configured Secret's
 *                                     name for the storage initializer; no token
 *
 * One pass:
 *   1. claim every live project with the manifests its intents rendered and
 *      stored (render_intent, at intent time; short transaction), and render
 *      the objects the server settings determine (render_settings);
 *   2. observe: one LIST per resource kind with our label selector, paginated,
 *      every kind at once (one batch a round: the pages of a kind follow each other);
 *   3. decide per project and per object: compare desired with observed
 *      (default-aware, spec_diff) and apply (SSA) only the objects that differ,
 *      delete bindings of removed members; the namespace first, the rest once it
 *      is observed; everything in one concurrent batch;
 *   4. write back with compare-and-swap on row version and leader epoch, plus a
 *      ledger row per external write and the project's spans (see project_spans).
 * On a full resync, a namespace with our labels and no live project is an
 * orphan: deleted (with its content) and recorded in the ledger.
 * READY only when every desired object is observed as applied.  A failure on
 * one object leaves the others alone: the next pass re-applies only what still
 * differs.  DELETING deletes the namespace (Kubernetes removes its content) and
 * ends DELETED once the namespace is no longer listed and no apply of it sent
 * without a recorded answer can still land (unanswered.h); an object such an
 * apply made is adopted in the ledger.  A pass in which nothing differs writes
 * nothing, to the cluster or to the database.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_text.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/retry.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/spec_diff.h"
#include "mlplat/unanswered.h"

/* PostgreSQL 17 has foreach_ptr; 15 does not: the same loop over a List of pointers. */
#ifndef foreach_ptr
#define foreach_ptr(type, var, lst) \
	for (type *var = NULL, *var##_once_ = (type *) 1; var##_once_; var##_once_ = NULL) \
		for (ListCell *var##_lc_ = list_head(lst); \
			 var##_lc_ != NULL && ((var = (type *) lfirst(var##_lc_)) != NULL || true); \
			 var##_lc_ = lnext((lst), var##_lc_))
#endif

typedef enum ObjKind
{
	OBJ_NAMESPACE = 0,
	OBJ_QUOTA,
	OBJ_LIMITS,
	OBJ_NETPOL,
	OBJ_ROLEBINDING,
	OBJ_SERVICEACCOUNT,
	OBJ_ROLE,
	NUM_OBJ_KINDS
} ObjKind;

static const MlplatKubeResource RES[NUM_OBJ_KINDS] = {
	{ "", "v1", "namespaces", false },
	{ "", "v1", "resourcequotas", true },
	{ "", "v1", "limitranges", true },
	{ "networking.k8s.io", "v1", "networkpolicies", true },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", true },
	{ "", "v1", "serviceaccounts", true },
	{ "rbac.authorization.k8s.io", "v1", "roles", true },
};
static const char *const KIND_NAME[NUM_OBJ_KINDS] = {
	"Namespace", "ResourceQuota", "LimitRange", "NetworkPolicy", "RoleBinding", "ServiceAccount", "Role"
};
static const char *const API_VERSION[NUM_OBJ_KINDS] = {
	"v1", "v1", "v1", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1", "v1",
	"rbac.authorization.k8s.io/v1"
};

#define QUOTA_NAME "mlplat-quota"
#define LIMITS_NAME "mlplat-limits"
#define NETPOL_NAME "mlplat-isolation"
#define LAB_INPUTS_NAME "mlplat-lab-inputs"
#define SA_PREFIX "system:serviceaccount:"

/*
 * LimitRange defaults for containers that state no resources of their own (the
 * quota's requests.cpu/requests.memory make Kubernetes refuse pods without
 * requests, so every container needs some): request 250m CPU / 512Mi, limit
 * 2 CPUs / 4Gi.  GPUs get no default: a container asks for them explicitly.
 */
#define LR_REQUEST_CPU "250m"
#define LR_REQUEST_MEMORY "512Mi"
#define LR_LIMIT_CPU "2"
#define LR_LIMIT_MEMORY "4Gi"

/*
 * Namespaces whose pods may reach a project's pods, besides the project's own,
 * come from mlplat.network_allowed_namespaces (the ingress gateway — Istio or
 * Kourier —, Knative's activator, the monitoring namespace), matched by the
 * kubernetes.io/metadata.name label every namespace carries.
 */

#define FOLLOW_UP_MS 300
/* permanent errors (403, 422) are retried slowly, doubling from this up to MLPLAT_PERMANENT_RETRY_MS */
#define PERMANENT_BASE_MS 1000

typedef enum ObjAction
{
	ACT_NONE = 0,
	ACT_APPLY,
	ACT_DELETE
} ObjAction;

typedef struct ProjObj
{
	ObjKind kind;
	char *name;
	char *ns;					/* NULL for the Namespace itself */
	char *manifest;				/* desired JSON (NULL for an extra binding to delete) */
	const MlJsonValue *desired; /* manifest parsed, when render read it (a stored one) */
	const MlJsonValue *obs;
	const char *state; /* applied, missing, differs, unobserved, extra */
	char *drift;
	bool recreate; /* an immutable field differs: delete, then apply later */
	ObjAction action;
	MlplatHttpRequest *req;
	const char *ledger_outcome;
	int http_status;
	char *error;						/* for the ledger (administrators) */
	char *tenant_error;					/* the same for tenants: no API server address */
	const MlplatUnanswered *unanswered; /* an apply of it never answered */
	bool adopt;							/* found what such an apply made: ledger ADOPT */
	bool settle;						/* that apply is resolved: remove its note */
	bool answered;						/* req got an answer: remove its own note */
} ProjObj;

typedef struct Project
{
	/* claimed: the attributes of mlplat.project_claim */
	MLPLAT_SEAM_MEMBERS(project_claim)
	/* derived */
	char *ns;
	TimestampTz claim_start; /* the pass's claim transaction, for its span */
	TimestampTz claim_end;
	/* desired and observed, per object */
	List *objs;
	/* decided */
	MlplatProjectStatus new_status;
	char *reason;
	char *error;
	int retry_ms; /* -1: no retry scheduled */
	bool mark_observed;
	bool deferred; /* some objects wait for the namespace */
	bool write;
	char *observed_json;
	char *terminating_json; /* observed.terminating: its namespace's deletion, or NULL */
	List *spans;			/* written with the write-back (project_spans) */
} Project;

typedef struct ObsEntry
{
	char key[384]; /* kind/namespace/name */
	const MlJsonValue *obj;
	bool claimed;
} ObsEntry;

/* ---------------------------------------------------------------- rendering */

static void
append_metadata_annotated(StringInfo s, ObjKind kind, const char *name, const char *ns,
						  const char *project, const char *instance, const char *annotations)
{
	appendStringInfo(s, "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":",
					 API_VERSION[kind], KIND_NAME[kind]);
	escape_json(s, name);
	if (ns)
	{
		appendStringInfoString(s, ",\"namespace\":");
		escape_json(s, ns);
	}
	appendStringInfoString(s, ",\"labels\":{\"" MLPLAT_LABEL_MANAGED_BY "\":\"" MLPLAT_MANAGED_BY "\",\"" MLPLAT_LABEL_PROJECT "\":");
	escape_json(s, project);
	appendStringInfoString(s, ",\"" MLPLAT_LABEL_INSTANCE "\":");
	escape_json(s, instance);
	appendStringInfoChar(s, '}');
	if (annotations)
		appendStringInfo(s, ",\"annotations\":%s", annotations);
	appendStringInfoChar(s, '}');
}

static void
append_metadata(StringInfo s, ObjKind kind, const char *name, const char *ns,
				const char *project, const char *instance)
{
	append_metadata_annotated(s, kind, name, ns, project, instance, NULL);
}

static ProjObj *
new_obj(Project *p, ObjKind kind, const char *name, StringInfo manifest)
{
	ProjObj *o = palloc0(sizeof(ProjObj));

	o->kind = kind;
	o->name = pstrdup(name);
	o->ns = kind == OBJ_NAMESPACE ? NULL : p->ns;
	o->manifest = manifest ? manifest->data : NULL;
	p->objs = lappend(p->objs, o);
	return o;
}

/*
 * The runner identity: Argo (3.4 and later) runs every step's pods as the
 * Workflow's serviceAccountName, and its executor writes the step's outputs as
 * workflowtaskresults; without this Role every step fails with "forbidden"
 * (Argo's workflow-rbac.md gives exactly these two verbs as the executor's
 * minimum).  The ServiceAccount mounts no token by itself: the Workflow asks
 * Argo to mount one into its executor containers only (_render_workflow), so a
 * run's own code holds no Kubernetes credential.
 */
static void
render_runner(Project *p, const char *instance)
{
	const char *runner = mlplat_runner_service_account;
	StringInfoData s;

	initStringInfo(&s);
	append_metadata(&s, OBJ_SERVICEACCOUNT, runner, p->ns, p->name, instance);
	appendStringInfoString(&s, ",\"automountServiceAccountToken\":false}");
	new_obj(p, OBJ_SERVICEACCOUNT, runner, &s);

	initStringInfo(&s);
	append_metadata(&s, OBJ_ROLE, runner, p->ns, p->name, instance);
	appendStringInfoString(&s, ",\"rules\":[{\"apiGroups\":[\"argoproj.io\"],"
							   "\"resources\":[\"workflowtaskresults\"],\"verbs\":[\"create\",\"patch\"]}]}");
	new_obj(p, OBJ_ROLE, runner, &s);

	initStringInfo(&s);
	append_metadata(&s, OBJ_ROLEBINDING, runner, p->ns, p->name, instance);
	appendStringInfoString(&s, ",\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":");
	escape_json(&s, runner);
	appendStringInfoString(&s, "},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":");
	escape_json(&s, runner);
	appendStringInfoString(&s, ",\"namespace\":");
	escape_json(&s, p->ns);
	appendStringInfoString(&s, "}]}");
	new_obj(p, OBJ_ROLEBINDING, runner, &s);
}

/*
 * The lab's input Secrets (lab-<id>-input, docs/lab.md): the controller creates, reads and
 * deletes them, in project namespaces only.  It holds no Secret permission cluster-wide;
 * here it binds ClusterRole mlplat-lab-inputs (deploy/kubernetes) to itself in the project's
 * namespace, which RBAC allows through its `bind` on that one ClusterRole.
 */
static void
render_lab_inputs(Project *p, const char *instance)
{
	const char *user = mlplat_controller_user;
	const char *colon;
	StringInfoData s;

	if (user == NULL || user[0] == '\0')
		return;
	initStringInfo(&s);
	append_metadata(&s, OBJ_ROLEBINDING, LAB_INPUTS_NAME, p->ns, p->name, instance);
	appendStringInfoString(&s, ",\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\","
							   "\"name\":\"" LAB_INPUTS_NAME "\"},\"subjects\":[{");
	/* a ServiceAccount's user name is system:serviceaccount:<namespace>:<name>: bound as one */
	if (strncmp(user, SA_PREFIX, strlen(SA_PREFIX)) == 0 && (colon = strchr(user + strlen(SA_PREFIX), ':')) != NULL)
	{
		appendStringInfoString(&s, "\"kind\":\"ServiceAccount\",\"name\":");
		escape_json(&s, colon + 1);
		appendStringInfoString(&s, ",\"namespace\":");
		escape_json(&s, pnstrdup(user + strlen(SA_PREFIX), colon - user - strlen(SA_PREFIX)));
	}
	else
	{
		appendStringInfoString(&s, "\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"User\",\"name\":");
		escape_json(&s, user);
	}
	appendStringInfoString(&s, "}]}");
	new_obj(p, OBJ_ROLEBINDING, LAB_INPUTS_NAME, &s);
}

/*
 * The predictor identity: every InferenceService names it (src/render/isvc.c),
 * and KServe's storage initializer reads its annotations (S3 endpoint, https or
 * not, region) and the credentials Secret it lists to fetch the model.  Only
 * the Secret's name comes from configuration (mlplat.predictor_s3_secret); the
 * operator provides the Secret in the namespace, so no credential ever passes
 * through mlplat's tables.  Model servers need no Kubernetes token.
 */
static void
render_predictor(Project *p, const char *instance)
{
	const char *sa = mlplat_predictor_service_account;
	const char *endpoint = mlplat_predictor_s3_endpoint;
	const char *secret = mlplat_predictor_s3_secret;
	const char *region = mlplat_predictor_s3_region;
	StringInfoData a;
	StringInfoData s;

	/* one ServiceAccount of that name: the runner's would win, without these annotations */
	if (strcmp(sa, mlplat_runner_service_account) == 0)
		return;
	initStringInfo(&a);
	appendStringInfoChar(&a, '{');
	if (endpoint && endpoint[0])
	{
		bool https = strncmp(endpoint, "https://", 8) == 0;
		const char *host = endpoint + (https ? 8 : 7);
		size_t len = strcspn(host, "/");

		appendStringInfoString(&a, "\"serving.kserve.io/s3-endpoint\":");
		escape_json(&a, pnstrdup(host, len));
		appendStringInfo(&a, ",\"serving.kserve.io/s3-usehttps\":\"%s\"", https ? "1" : "0");
	}
	if (region && region[0])
	{
		appendStringInfo(&a, "%s\"serving.kserve.io/s3-region\":", a.len > 1 ? "," : "");
		escape_json(&a, region);
	}
	appendStringInfoChar(&a, '}');

	initStringInfo(&s);
	append_metadata_annotated(&s, OBJ_SERVICEACCOUNT, sa, p->ns, p->name, instance, a.len > 2 ? a.data : NULL);
	appendStringInfoString(&s, ",\"automountServiceAccountToken\":false");
	if (secret && secret[0])
	{
		appendStringInfoString(&s, ",\"secrets\":[{\"name\":");
		escape_json(&s, secret);
		appendStringInfoString(&s, "}]");
	}
	appendStringInfoChar(&s, '}');
	new_obj(p, OBJ_SERVICEACCOUNT, sa, &s);
}

/*
 * The objects that carry server settings (a reload changes them, no intent
 * does): the NetworkPolicy (mlplat.network_allowed_namespaces), the runner's
 * ServiceAccount, Role and RoleBinding, the predictor's ServiceAccount and the
 * lab inputs' RoleBinding.  Rendered by each pass, after the project's stored
 * Namespace, ResourceQuota and LimitRange.
 */
static void
render_settings(Project *p, const char *instance)
{
	StringInfoData s;

	initStringInfo(&s);
	append_metadata(&s, OBJ_NETPOL, NETPOL_NAME, p->ns, p->name, instance);
	appendStringInfoString(&s, ",\"spec\":{\"podSelector\":{},\"policyTypes\":[\"Ingress\"],"
							   "\"ingress\":[{\"from\":[{\"podSelector\":{}}");
	for (const char *n = mlplat_network_allowed_namespaces; n && *n;)
	{
		size_t len;

		while (*n == ' ' || *n == ',')
			n++;
		len = strcspn(n, ", ");
		if (len == 0)
			break;
		/* the setting's check hook let through DNS labels only */
		appendStringInfo(&s, ",{\"namespaceSelector\":{\"matchLabels\":"
							 "{\"kubernetes.io/metadata.name\":\"%.*s\"}}}",
						 (int) len, n);
		n += len;
	}
	appendStringInfoString(&s, "]}]}}");
	new_obj(p, OBJ_NETPOL, NETPOL_NAME, &s);

	render_runner(p, instance);
	render_predictor(p, instance);
	render_lab_inputs(p, instance);
}

/* s, one rendered manifest, appended to the JSON array being built in arr */
static void
array_add(StringInfo arr, StringInfo s)
{
	if (arr->len > 1)
		appendStringInfoChar(arr, ','); /* after the opening '[' and an element */
	appendBinaryStringInfo(arr, s->data, s->len);
}

/*
 * The objects a project's intents alone determine (create_project,
 * set_project_quota, grant_role, revoke_role): its Namespace, ResourceQuota,
 * LimitRange and the members' RoleBindings, as a JSON array in that order.
 * Rendered at intent time by mlplat._render_project and stored on the
 * project (projects.rendered, with its content id), so that the pass applies
 * what the intent bound; the objects that carry server settings are rendered
 * by the pass (render_settings).  members: [{principal, role, binding}].
 */
static void
render_intent(StringInfo arr, const char *project, int64 id, const char *instance, int gpu_quota,
			  const char *cpu_quota, const char *memory_quota, const char *members_json)
{
	const char *ns = mlplat_project_namespace(project, strlen(project));
	MlJsonArena *arena = mlplat_json_arena_in(CurrentMemoryContext);
	StringInfoData s;
	MlJsonValue *members;
	MlJsonError err;

	appendStringInfoChar(arr, '[');
	initStringInfo(&s);
	append_metadata_annotated(&s, OBJ_NAMESPACE, ns, NULL, project, instance,
							  psprintf("{\"" MLPLAT_ANNOTATION_PROJECT_ID "\":\"" INT64_FORMAT "\"}", id));
	appendStringInfoChar(&s, '}');
	array_add(arr, &s);

	initStringInfo(&s);
	append_metadata(&s, OBJ_QUOTA, QUOTA_NAME, ns, project, instance);
	appendStringInfo(&s, ",\"spec\":{\"hard\":{\"requests.nvidia.com/gpu\":\"%d\"", gpu_quota);
	if (cpu_quota)
	{
		appendStringInfoString(&s, ",\"requests.cpu\":");
		escape_json(&s, cpu_quota);
	}
	if (memory_quota)
	{
		appendStringInfoString(&s, ",\"requests.memory\":");
		escape_json(&s, memory_quota);
	}
	appendStringInfoString(&s, "}}}");
	array_add(arr, &s);

	initStringInfo(&s);
	append_metadata(&s, OBJ_LIMITS, LIMITS_NAME, ns, project, instance);
	appendStringInfoString(&s, ",\"spec\":{\"limits\":[{\"type\":\"Container\","
							   "\"default\":{\"cpu\":\"" LR_LIMIT_CPU "\",\"memory\":\"" LR_LIMIT_MEMORY "\"},"
							   "\"defaultRequest\":{\"cpu\":\"" LR_REQUEST_CPU "\",\"memory\":\"" LR_REQUEST_MEMORY "\"}}]}}");
	array_add(arr, &s);

	members = ml_json_parse(arena, members_json, strlen(members_json), NULL, &err);
	if (members == NULL || members->type != ML_JSON_ARRAY)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("members of project %lld are not a JSON array", (long long) id)));
	for (size_t i = 0; i < members->u.array.count; i++)
	{
		const MlJsonValue *m = members->u.array.items[i];
		const char *principal = mlplat_json_text(m, "principal", NULL, NULL);
		const char *role = mlplat_json_text(m, "role", NULL, NULL);
		const char *binding = mlplat_json_text(m, "binding", NULL, NULL);

		if (!principal || !role || !binding)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("member %zu of project %lld is incomplete", i, (long long) id)));
		initStringInfo(&s);
		append_metadata(&s, OBJ_ROLEBINDING, binding, ns, project, instance);
		appendStringInfo(&s, ",\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\","
							 "\"name\":\"mlplat-%s\"},\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\","
							 "\"kind\":\"User\",\"name\":",
						 role);
		escape_json(&s, principal);
		appendStringInfoString(&s, "}]}");
		array_add(arr, &s);
	}
	appendStringInfoChar(arr, ']');
}

PG_FUNCTION_INFO_V1(mlplat_render_project);

/*
 * mlplat._render_project(project, project_id, instance, gpu_quota, cpu_quota,
 *                        memory_quota, members) RETURNS json: render_intent's
 * array, its bytes exactly as the pass sends them (json, not jsonb, keeps
 * them).
 */
Datum
mlplat_render_project(PG_FUNCTION_ARGS)
{
	StringInfoData arr;

	for (int i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("mlplat._render_project: argument %d must not be NULL", i + 1)));
	initStringInfo(&arr);
	render_intent(&arr, text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_INT64(1), text_to_cstring(PG_GETARG_TEXT_PP(2)),
				  PG_GETARG_INT32(3), PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4)),
				  PG_ARGISNULL(5) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(5)),
				  PG_ARGISNULL(6) ? "[]" : DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(6))));
	PG_RETURN_TEXT_P(cstring_to_text_with_len(arr.data, arr.len));
}

/* the kind named kind (a stored manifest's), or NUM_OBJ_KINDS */
static ObjKind
kind_of(const char *kind)
{
	for (int k = 0; k < NUM_OBJ_KINDS; k++)
		if (kind && strcmp(KIND_NAME[k], kind) == 0)
			return (ObjKind) k;
	return NUM_OBJ_KINDS;
}

/*
 * Every object the project should have: the ones its intents determined, as
 * stored (p->manifests, render_intent's array split by the claim, each
 * element's bytes as rendered), and the ones the server settings determine,
 * rendered here.  In the order of before: Namespace, ResourceQuota,
 * LimitRange, then the settings' objects, then the members' RoleBindings.
 */
static void
render(Project *p, const char *instance, MlJsonArena *arena)
{
	List *bindings = NIL;

	foreach_ptr (char, m, p->manifests)
	{
		MlJsonError err;
		const MlJsonValue *v = ml_json_parse(arena, m, strlen(m), NULL, &err);
		const char *name = v ? mlplat_json_text(v, "metadata", "name", NULL) : NULL;
		ObjKind kind = v ? kind_of(mlplat_json_text(v, "kind", NULL, NULL)) : NUM_OBJ_KINDS;
		ProjObj *o;

		if (name == NULL || kind == NUM_OBJ_KINDS)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("a rendered manifest of project %lld is not an object of a known kind", (long long) p->id)));
		o = palloc0(sizeof(ProjObj));
		o->kind = kind;
		o->name = pstrdup(name);
		o->ns = kind == OBJ_NAMESPACE ? NULL : p->ns;
		o->manifest = m;
		o->desired = v; /* project_decide compares this parse, not a second one */
		if (kind == OBJ_ROLEBINDING)
			bindings = lappend(bindings, o);
		else
			p->objs = lappend(p->objs, o);
	}
	render_settings(p, instance);
	p->objs = list_concat(p->objs, bindings);
}

/*
 * The desired object without apiVersion/kind, for comparison: items of
 * built-in lists carry neither, and both are implied by the list anyway.
 */
static const MlJsonValue *
comparable(MlJsonArena *arena, const MlJsonValue *obj)
{
	MlJsonValue *c = ml_json_arena_alloc(arena, sizeof(MlJsonValue));
	size_t n = 0,
		   nk = 0;

	if (c == NULL)
		elog(ERROR, "out of memory");
	*c = *obj;
	c->u.object.members = ml_json_arena_alloc(arena, sizeof(MlJsonMember) * (obj->u.object.count + 1));
	c->u.object.by_key = ml_json_arena_alloc(arena, sizeof(MlJsonMember *) * (obj->u.object.count + 1));
	if (c->u.object.members == NULL || c->u.object.by_key == NULL)
		elog(ERROR, "out of memory");
	for (size_t i = 0; i < obj->u.object.count; i++)
	{
		const MlJsonMember *m = &obj->u.object.members[i];
		const MlJsonMember *k = obj->u.object.by_key[i];

		if (strcmp(m->key, "apiVersion") != 0 && strcmp(m->key, "kind") != 0)
			c->u.object.members[n++] = *m;
		if (strcmp(k->key, "apiVersion") != 0 && strcmp(k->key, "kind") != 0)
			c->u.object.by_key[nk++] = k;
	}
	c->u.object.count = n;
	return c;
}

static bool
ns_terminating(const MlJsonValue *ns)
{
	const char *phase = mlplat_json_text(ns, "status", "phase", NULL);

	return ml_json_object_get(ml_json_object_get(ns, "metadata"), "deletionTimestamp") != NULL ||
		   (phase && strcmp(phase, "Terminating") == 0);
}

/*
 * What keeps a terminating namespace: the namespace controller's own finalizer
 * ("kubernetes") only says it has not finished; what it waits for is in its
 * conditions, NamespaceFinalizersRemaining (the content's finalizers, e.g. a
 * Workflow's artifact-gc) or else NamespaceContentRemaining.  Their message, or
 * NULL.  Bounded: it goes into status_reason.
 */
static char *
ns_content_remaining(const MlJsonValue *nso)
{
	static const char *const types[] = { "NamespaceFinalizersRemaining", "NamespaceContentRemaining" };
	const MlJsonValue *conds = ml_json_object_get(ml_json_object_get(nso, "status"), "conditions");

	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return NULL;
	for (size_t t = 0; t < lengthof(types); t++)
		for (size_t i = 0; i < conds->u.array.count; i++)
		{
			const MlJsonValue *c = conds->u.array.items[i];
			const char *type = mlplat_json_text(c, "type", NULL, NULL);
			const char *status = mlplat_json_text(c, "status", NULL, NULL);
			const char *message = mlplat_json_text(c, "message", NULL, NULL);

			if (type && status && message && message[0] && strcmp(type, types[t]) == 0 &&
				strcmp(status, "True") == 0)
				return pnstrdup(message, pg_mbcliplen(message, strlen(message), 400));
		}
	return NULL;
}

/*
 * "<what>: held by finalizer(s) ... (terminating since ...)[; what remains]" for
 * p's terminating namespace nso (recorded in p->terminating_json), or what alone
 * when it names none.
 */
static char *
ns_terminating_reason(Project *p, const MlJsonValue *nso, const char *what)
{
	const char *since;
	char *fins;
	char *remaining = ns_content_remaining(nso);

	if (mlplat_object_terminating(nso, &since, &fins, &p->terminating_json) && fins[0])
		return psprintf("%s: held by finalizer(s) %s (terminating since %s)%s%s", what, fins, since,
						remaining ? "; " : "", remaining ? remaining : "");
	return remaining ? psprintf("%s: %s", what, remaining) : pstrdup(what);
}

/* ---------------------------------------------------------------- observing */

static void
obs_key(char *key, ObjKind kind, const char *ns, const char *name)
{
	snprintf(key, sizeof(((ObsEntry *) 0)->key), "%d/%s/%s", (int) kind, ns ? ns : "", name);
}

/*
 * LIST every kind with our selector, all at once (one batch; the pages of a
 * kind follow each other), into the table.  list_error[k] is NULL, or why
 * kind k could not be observed (then nothing of it is known; the others are).
 */
static void
observe_kinds(MlJsonArena *arena, HTAB *seen, const char *selector, List **items, char **list_error, int *lists)
{
	mlplat_kube_list_all_kinds(arena, RES, NUM_OBJ_KINDS, selector, items, list_error, lists);
	for (int kind = 0; kind < NUM_OBJ_KINDS; kind++)
		foreach_ptr (const MlJsonValue, obj, items[kind])
		{
			const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
			const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
			char key[sizeof(((ObsEntry *) 0)->key)];
			ObsEntry *e;
			bool found;

			if (name == NULL)
				continue;
			obs_key(key, (ObjKind) kind, RES[kind].namespaced ? ns : NULL, name);
			e = hash_search(seen, key, HASH_ENTER, &found);
			e->obj = obj;
			e->claimed = false;
		}
}

/* ---------------------------------------------------------------- deciding */

static ProjObj *
find_obj(Project *p, ObjKind kind)
{
	foreach_ptr (ProjObj, o, p->objs)
		if (o->kind == kind)
			return o;
	return NULL;
}

/* "Kind namespace/name" ("Namespace name" for the namespace): ledger notes and write notes */
static char *
obj_label(const ProjObj *o)
{
	return psprintf("%s %s%s%s", KIND_NAME[o->kind], o->ns ? o->ns : "", o->ns ? "/" : "", o->name);
}

/*
 * Compare each desired object with what was observed and choose the writes.
 * Pure apart from allocation: the observations are already in the objects.
 */
static void
project_decide(Project *p, MlJsonArena *arena, char *const list_error[])
{
	ProjObj *nso = find_obj(p, OBJ_NAMESPACE);
	int pending = 0;
	int unobserved = 0;
	bool ns_ready;

	p->new_status = p->status;
	p->reason = p->status_reason;
	p->error = NULL;
	p->retry_ms = -1;

	/*
	 * An object found that an apply without a recorded answer made: adopt it.  While
	 * the project is being deleted the namespace's note stays until the grace is
	 * over (that apply may land after the delete); the namespace is adopted with the
	 * delete that removes it.
	 */
	foreach_ptr (ProjObj, o, p->objs)
		if (o->obs && o->unanswered && !(o == nso && p->status == MLPLAT_PROJECT_DELETING))
		{
			/* an overtaken note is not proven by the sight: it waits for the grace */
			o->adopt = mlplat_unanswered_seen_settles(o->unanswered);
			o->settle = o->adopt || mlplat_unanswered_settled(o->unanswered);
		}

	if (p->status == MLPLAT_PROJECT_DELETING)
	{
		if (list_error[OBJ_NAMESPACE] == NULL && nso->obs == NULL &&
			nso->unanswered && !mlplat_unanswered_settled(nso->unanswered))
			p->reason = psprintf("waiting up to %d s for an unanswered apply of namespace %s to land before calling it gone",
								 mlplat_unanswered_write_grace_ms / 1000, p->ns);
		else if (list_error[OBJ_NAMESPACE] == NULL && nso->obs == NULL)
		{
			p->new_status = MLPLAT_PROJECT_DELETED;
			p->reason = psprintf("namespace %s is gone", p->ns);
			p->mark_observed = true;
			nso->settle = nso->unanswered != NULL;
		}
		else if (nso->obs && ns_terminating(nso->obs))
			p->reason = ns_terminating_reason(p, nso->obs, psprintf("waiting for namespace %s to terminate", p->ns));
		else if (p->due)
		{
			nso->action = ACT_DELETE;
			nso->adopt = nso->unanswered != NULL;
		}
		else
			p->error = p->last_error;
		/* nothing else is touched: the namespace takes its content with it */
		foreach_ptr (ProjObj, o, p->objs)
			if (o != nso)
				o->state = "ignored";
		nso->state = nso->obs ? "present" : (list_error[OBJ_NAMESPACE] ? "unobserved" : "gone");
		return;
	}

	foreach_ptr (ProjObj, o, p->objs)
	{
		MlJsonError err;
		MlSpecDiff diff;
		const MlJsonValue *desired;

		if (o->manifest == NULL)
		{
			o->state = "extra"; /* a binding no member needs */
			pending++;
			continue;
		}
		if (list_error[o->kind])
		{
			/*
			 * Not observable this pass.  A READY project was seen complete
			 * before: leave it be rather than write blindly.  Otherwise apply
			 * (idempotent), so the answer says what is wrong.
			 */
			o->state = "unobserved";
			if (p->status == MLPLAT_PROJECT_READY)
				unobserved++;
			else
				pending++;
			continue;
		}
		if (o->obs == NULL)
		{
			o->state = "missing";
			pending++;
			continue;
		}
		desired = o->desired ? o->desired : ml_json_parse(arena, o->manifest, strlen(o->manifest), NULL, &err);
		if (desired == NULL)
			elog(ERROR, "rendered %s %s is not JSON: %s", KIND_NAME[o->kind], o->name, err.message);
		if (!ml_spec_diff(arena, comparable(arena, desired), o->obs, &diff, &err))
			elog(ERROR, "spec_diff failed: %s", err.message);
		if (diff.count > 0)
		{
			o->state = "differs";
			o->drift = psprintf("differs at %s", mlplat_drift_paths_line(&diff));
			/* roleRef is immutable: such a binding must be deleted and made again */
			for (size_t i = 0; i < diff.count; i++)
				if (strncmp(diff.entries[i].path, "roleRef", 7) == 0)
					o->recreate = true;
			pending++;
		}
		else if (o->kind == OBJ_QUOTA && p->quota_generation != p->generation)
		{
			/*
			 * A quota change may drop a resource (cpu_quota set to NULL): only
			 * an apply removes it, and a comparison of the fields we still want
			 * cannot see it.  So a new generation applies the quota once
			 * (remembered in observed.quota_generation).
			 */
			o->state = "differs";
			o->drift = psprintf("project generation %lld", (long long) p->generation);
			pending++;
		}
		else
			o->state = "applied";
	}

	ns_ready = nso->obs != NULL && strcmp(nso->state, "applied") == 0 && !ns_terminating(nso->obs);
	if (pending == 0 && ns_ready && unobserved > 0)
		return; /* READY as far as we can tell: keep the row as it is */
	if (pending == 0 && ns_ready)
	{
		p->new_status = MLPLAT_PROJECT_READY;
		p->reason = psprintf("all %d objects applied in namespace %s", list_length(p->objs), p->ns);
		p->mark_observed = true;
		return;
	}
	if (nso->obs && ns_terminating(nso->obs))
	{
		/* deleted out of band: nothing is applied into it; it is made again once gone */
		p->new_status = MLPLAT_PROJECT_PROVISIONING;
		p->reason = ns_terminating_reason(p, nso->obs, psprintf("namespace %s is still terminating", p->ns));
		return;
	}
	if (!p->due)
	{
		/* backing off: keep what the row says until the next attempt */
		p->error = p->last_error;
		return;
	}
	foreach_ptr (ProjObj, o, p->objs)
	{
		bool pend = strcmp(o->state, "applied") != 0 &&
					!(strcmp(o->state, "unobserved") == 0 && p->status == MLPLAT_PROJECT_READY);

		if (!pend)
			continue;
		/* the namespace first; the rest once it is observed */
		if (o != nso && !ns_ready)
		{
			p->deferred = true;
			continue;
		}
		if (o->manifest == NULL || o->recreate)
			o->action = ACT_DELETE;
		else
			o->action = ACT_APPLY;
	}
}

/* Classify one write's answer; the project's status follows from them all. */
static void
obj_result(Project *p, ProjObj *o, MlplatPass *pass, bool *failed, bool *retry, int *retry_after_s,
		   StringInfo errors)
{
	MlplatKubeResult res;

	mlplat_kube_write_result(o->req, o->action == ACT_DELETE, &res);
	o->http_status = res.status;
	o->answered = mlplat_write_answered(res.status);
	switch (res.outcome)
	{
		case MLPLAT_KUBE_OK:
			o->ledger_outcome = "OK";
			return;
		case MLPLAT_KUBE_FAILED:
			o->ledger_outcome = "FAILED";
			*failed = true;
			break;
		default:
			o->ledger_outcome = "RETRY";
			*retry = true;
			*retry_after_s = Max(*retry_after_s, res.retry_after_s);
			break;
	}
	o->error = res.message ? res.message : pstrdup(mlplat_kube_outcome_name(res.outcome));
	/* the project's row and spans get what a tenant may read; the ledger keeps o->error */
	o->tenant_error = res.tenant_message ? res.tenant_message : o->error;
	appendStringInfo(errors, "%s%s %s: %s", errors->len ? "; " : "", KIND_NAME[o->kind], o->name, o->tenant_error);
}

static void
project_results(Project *p, MlplatPass *pass, char *const list_error[])
{
	StringInfoData errors;
	bool failed = false,
		 retry = false,
		 any = false,
		 deleting = p->status == MLPLAT_PROJECT_DELETING;
	int retry_after_s = 0;
	int applied = 0;

	initStringInfo(&errors);
	foreach_ptr (ProjObj, o, p->objs)
	{
		if (o->req == NULL)
			continue;
		any = true;
		obj_result(p, o, pass, &failed, &retry, &retry_after_s, &errors);
		if (strcmp(o->ledger_outcome, "OK") == 0)
			applied++;
	}
	if (!any)
		return;
	/* an object we could not even list explains itself too */
	for (int k = 0; k < NUM_OBJ_KINDS && !deleting; k++)
		if (list_error[k])
			appendStringInfo(&errors, "%s%s", errors.len ? "; " : "", list_error[k]);

	if (failed || retry)
	{
		p->error = errors.data;
		if (!deleting)
			p->new_status = failed ? MLPLAT_PROJECT_FAILED : MLPLAT_PROJECT_PROVISIONING;
		p->reason = pstrdup(errors.data);
		p->retry_ms = failed
						  ? mlplat_backoff_delay_ms(p->attempts + 1, PERMANENT_BASE_MS, Min(MLPLAT_PERMANENT_RETRY_MS, mlplat_backoff_max_ms),
													retry_after_s, (uint64) p->id)
						  : mlplat_backoff_delay_ms(p->attempts + 1, 500, mlplat_backoff_max_ms, retry_after_s, (uint64) p->id);
	}
	else if (deleting)
		p->reason = psprintf("deletion of namespace %s requested", p->ns);
	else if (errors.len > 0)
	{
		/*
		 * Applied, but some kind cannot be listed: we could never see the
		 * result, so do not come straight back to apply blindly again.
		 */
		p->error = errors.data;
		p->new_status = MLPLAT_PROJECT_PROVISIONING;
		p->reason = psprintf("applied %d object(s), but %s", applied, errors.data);
		p->retry_ms = mlplat_backoff_delay_ms(p->attempts + 1, PERMANENT_BASE_MS,
											  Min(MLPLAT_PERMANENT_RETRY_MS, mlplat_backoff_max_ms), 0, (uint64) p->id);
	}
	else
	{
		p->new_status = MLPLAT_PROJECT_PROVISIONING;
		p->reason = psprintf("applied %d object(s); waiting to observe them", applied);
		/* what this generation asks for has been sent (unless some waits for the namespace) */
		p->mark_observed = !p->deferred;
	}
	if (p->retry_ms < 0)
		pass->next_pass_ms = FOLLOW_UP_MS;
}

static char *
observed_summary(Project *p)
{
	StringInfoData s;
	bool first = true;

	initStringInfo(&s);
	foreach_ptr (ProjObj, o, p->objs)
		if (o->kind == OBJ_QUOTA && o->req && o->action == ACT_APPLY && strcmp(o->ledger_outcome, "OK") == 0)
			p->quota_generation = p->generation;
	appendStringInfo(&s, "{\"quota_generation\":%lld,\"objects\":{", (long long) p->quota_generation);
	foreach_ptr (ProjObj, o, p->objs)
	{
		char *key = psprintf("%s/%s", KIND_NAME[o->kind], o->name);

		if (!first)
			appendStringInfoChar(&s, ',');
		first = false;
		escape_json(&s, key);
		appendStringInfoChar(&s, ':');
		escape_json(&s, o->state ? o->state : "unknown");
	}
	appendStringInfo(&s, "},\"terminating\":%s}", p->terminating_json ? p->terminating_json : "null");
	return s.data;
}

/* The seam (seam.h): mlplat.project_claim read into Project ... */
MLPLAT_SEAM_STATIC(claim_seam, project_claim, Project);

/* ... and mlplat.project_writeback, the status write-back of seam.h */
MLPLAT_SEAM_STATIC(writeback_seam, project_writeback, MlplatStatusWriteback);

MlplatSeam *const mlplat_projects_seams[] = { &claim_seam, &writeback_seam, NULL };

/* ---------------------------------------------------------------- I/O */

/*
 * Keep only the orphan namespaces that are provably this installation's
 * (issue 18, finding 5, for namespaces): the annotation names a project row,
 * of the same name, that was deleted.  Labels alone can be copied by anyone
 * who can create a namespace, and tearing one down deletes all it holds; so
 * the others stay as they are, with a CONFLICT ledger row saying why.
 */
static void
judge_orphans(List *orphans)
{
	int n = list_length(orphans);
	const char **cells = palloc(sizeof(char *) * 2 * Max(n, 1));
	bool *deleted;
	int i = 0;

	foreach_ptr (ProjObj, o, orphans)
	{
		cells[i++] = mlplat_json_text(o->obs, "metadata", "labels", MLPLAT_LABEL_PROJECT);
		cells[i++] = mlplat_json_text(o->obs, "metadata", "annotations", MLPLAT_ANNOTATION_PROJECT_ID);
	}
	deleted = mlplat_sql_known_ordinals("SELECT * FROM mlplat._project_orphans_known($1, $2)", 2, n, cells);
	for (i = 0; i < n; i++)
	{
		ProjObj *o = list_nth(orphans, i);
		const char *id = mlplat_json_text(o->obs, "metadata", "annotations", MLPLAT_ANNOTATION_PROJECT_ID);

		if (deleted[i])
			continue;
		o->action = ACT_NONE;
		o->ledger_outcome = "CONFLICT";
		o->error = id ? psprintf("not torn down: its project id %s is not a deleted project of that name", id)
					  : pstrdup("not torn down: it carries mlplat's labels but no project id (not made by this installation)");
	}
}

static List *
claim(MlplatPassWork *w, List **notes)
{
	MlplatClaim c;

	mlplat_seam_claim_pass(w->pass, &claim_seam, "SELECT c FROM mlplat._projects_claim() c", 0, NULL, NULL,
						   sizeof(Project), true, 0, &c);
	foreach_ptr (Project, p, c.rows)
	{
		p->ns = mlplat_project_namespace(p->name, strlen(p->name));
		p->claim_start = c.start;
		p->claim_end = c.end;
	}
	mlplat_pass_work_claimed(w, c.instance, NULL);
	*notes = c.notes;
	return c.rows;
}

/*
 * The spans of a project's pass that wrote something, in the trace of the
 * intent stored with it (create_project, set_project_quota, grant_role, ...):
 * the claim, one CLIENT span per object written, and, when the project
 * becomes READY, the wait from its last apply.  NIL without a trace.
 */
static List *
project_spans(Project *p)
{
	List *spans = NIL;
	MlplatSpan *s;

	foreach_ptr (ProjObj, o, p->objs)
	{
		if (o->req == NULL)
			continue;
		if (spans == NIL)
		{
			/* the claim that led to the first write */
			s = mlplat_span_begin_at(p->traceparent, "projects.claim", MLPLAT_SPAN_INTERNAL, p->claim_start);
			if (s == NULL)
				return NIL; /* no trace */
			mlplat_span_set_entity(s, p->name, "project", p->id);
			mlplat_span_end_at(s, p->claim_end, NULL);
			spans = lappend(spans, s);
		}
		s = mlplat_span_begin_at(p->traceparent, o->action == ACT_DELETE ? "projects.delete" : "projects.apply",
								 MLPLAT_SPAN_CLIENT, o->req->started_at ? o->req->started_at : p->claim_end);
		mlplat_span_set_entity(s, p->name, "project", p->id);
		if (o->ns)
			mlplat_span_attr_text(s, "k8s.namespace.name", o->ns);
		mlplat_span_attr_text(s, "mlplat.object.kind", KIND_NAME[o->kind]);
		mlplat_span_attr_text(s, "mlplat.object.name", o->name);
		mlplat_span_end_request(s, o->req, o->http_status,
								strcmp(o->ledger_outcome, "OK") == 0 ? NULL
																	 : (o->tenant_error ? o->tenant_error : o->error));
		spans = lappend(spans, s);
	}
	if (p->new_status == MLPLAT_PROJECT_READY && p->status != MLPLAT_PROJECT_READY)
	{
		s = mlplat_span_begin(p->traceparent, "projects.readiness_wait", MLPLAT_SPAN_INTERNAL);
		mlplat_span_set_entity(s, p->name, "project", p->id);
		mlplat_span_start_after(s, "projects.apply");
		mlplat_span_attr_text(s, "k8s.namespace.name", p->ns);
		mlplat_span_end(s, NULL);
		spans = lappend(spans, s);
	}
	return spans;
}

/* the write-back row of p (and the notes its objects settle, their adoptions' ledger rows) */
static bool
project_row(MlplatWriteback *wb, void *entity, void *row)
{
	Project *p = entity;
	MlplatStatusWriteback *w = row;

	foreach_ptr (ProjObj, o, p->objs)
	{
		if (o->settle)
			mlplat_write_notes_add(&wb->settled, p->id, obj_label(o), NULL);
		else if (o->answered)
		{
			/*
			 * An answer (2xx, or a refusal: 429, 4xx) settles only this leader's
			 * write: an earlier leader's unanswered write of the object may still
			 * land, so its note stays until the grace ends (unanswered.h).
			 */
			mlplat_write_notes_answered(&wb->settled, p->id, obj_label(o), o->action == ACT_DELETE ? "DELETE" : "APPLY",
										o->action != ACT_DELETE && mlplat_write_made(o->http_status));
		}
		if (o->adopt)
			mlplat_ledger_batch_add(wb->ledger, "project", p->id, p->name, "ADOPT", "OK", NULL, NULL, 0, NULL,
									mlplat_trace_id_of(p->traceparent),
									psprintf("%s: made by an apply whose answer was never recorded", obj_label(o)));
	}
	if (!p->write)
		return false;
	w->status = p->new_status;
	w->reason = p->reason;
	w->observed_generation = p->mark_observed ? p->generation : -1;
	w->observed = p->observed_json;
	w->error = p->error;
	w->retry_ms = p->retry_ms;
	wb->row_spans = p->spans;
	return true;
}

/* after the write-back: the ledger rows of p's writes */
static void
project_done(MlplatWriteback *wb, void *entity, bool held)
{
	Project *p = entity;

	/*
	 * The external writes happened whether or not the row's compare-and-swap
	 * held (an intent may have landed meanwhile): record them either way; a
	 * deposed leader's rows are refused by the epoch check inside.
	 */
	foreach_ptr (ProjObj, o, p->objs)
	{
		if (o->req == NULL)
			continue;
		mlplat_ledger_batch_add(wb->ledger, "project", p->id, p->name, o->action == ACT_DELETE ? "DELETE" : "APPLY",
								o->ledger_outcome, NULL, NULL, o->http_status, o->error,
								mlplat_trace_id_of(p->traceparent),
								psprintf("%s%s%s", obj_label(o), o->drift ? ": " : "", o->drift ? o->drift : ""));
	}
}

static void
write_back(MlplatPass *pass, List *projects, List *orphans)
{
	MlplatWriteback wb;

	/* built before the transaction: the lists live in the pass's context */
	foreach_ptr (Project, p, projects)
		if (p->write)
			p->spans = project_spans(p);
	mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
	mlplat_writeback_rows(&wb, projects, project_row, "SELECT * FROM mlplat._projects_writeback_set($1, $2)",
						  project_done);
	foreach_ptr (ProjObj, o, orphans)
		mlplat_writeback_orphan(&wb, "project", 0, mlplat_json_text(o->obs, "metadata", "labels", MLPLAT_LABEL_PROJECT),
								o->ledger_outcome, o->http_status, o->error, psprintf("Namespace %s", o->name));
	mlplat_writeback_end(&wb);
}

void
mlplat_projects_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	char *list_error[NUM_OBJ_KINDS] = { 0 };
	List *items[NUM_OBJ_KINDS] = { 0 };
	List *claimed;
	List *projects = NIL;
	HASHCTL ctl;
	HTAB *seen;
	List *notes = NIL;

	mlplat_pass_work_begin(&w, pass);
	claimed = claim(&w, &notes);
	foreach_ptr (Project, p, claimed)
	{
		if (p->manifests == NIL)
		{
			/*
			 * Every intent that makes or changes a project stores its render, and
			 * the update to 0.3.0 stored one for every project: only a row written
			 * around the API lacks it.  Skipped, not guessed at; the others go on.
			 */
			ereport(WARNING, (errcode(ERRCODE_DATA_CORRUPTED),
							  errmsg("project %s has no rendered manifests: not reconciled", p->name),
							  errhint("Render them with an intent (mlplat.set_project_quota) or mlplat._project_render_store(%lld).",
									  (long long) p->id)));
			continue;
		}
		projects = lappend(projects, p);
		render(p, w.instance, w.arena);
		if (notes != NIL)
			foreach_ptr (ProjObj, o, p->objs)
				o->unanswered = mlplat_unanswered_find(notes, p->id, obj_label(o), "APPLY");
	}

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(((ObsEntry *) 0)->key);
	ctl.entrysize = sizeof(ObsEntry);
	ctl.hcxt = w.cxt;
	seen = hash_create("mlplat observed project objects", 256, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	observe_kinds(w.arena, seen, w.selector, items, list_error, &w.lists);

	/* match observations to desired objects */
	foreach_ptr (Project, p, projects)
	{
		foreach_ptr (ProjObj, o, p->objs)
		{
			char key[sizeof(((ObsEntry *) 0)->key)];
			ObsEntry *e;

			obs_key(key, o->kind, o->ns, o->name);
			e = hash_search(seen, key, HASH_FIND, NULL);
			if (e)
			{
				o->obs = e->obj;
				e->claimed = true;
			}
		}
	}
	/*
	 * Bindings in a live project's namespace that no member needs (revoked, role
	 * changed), and a runner ServiceAccount or Role left by an earlier
	 * mlplat.runner_service_account (or predictor identity): deleted.
	 */
	for (int k = OBJ_ROLEBINDING; k < NUM_OBJ_KINDS; k++)
	{
		foreach_ptr (const MlJsonValue, rb, items[k])
		{
			const char *name = mlplat_json_text(rb, "metadata", "name", NULL);
			const char *ns = mlplat_json_text(rb, "metadata", "namespace", NULL);
			char key[sizeof(((ObsEntry *) 0)->key)];
			ObsEntry *e;

			if (!name || !ns)
				continue;
			obs_key(key, (ObjKind) k, ns, name);
			e = hash_search(seen, key, HASH_FIND, NULL);
			if (e == NULL || e->claimed)
				continue;
			foreach_ptr (Project, p, projects)
			{
				if (strcmp(p->ns, ns) == 0 && p->status != MLPLAT_PROJECT_DELETING)
				{
					ProjObj *o = new_obj(p, (ObjKind) k, name, NULL);

					o->obs = rb;
					break;
				}
			}
		}
	}

	/*
	 * A namespace with our labels and no live project is an orphan candidate:
	 * torn down with its content only if it names (annotation
	 * mlplat.io/project-id) a project of this installation that was deleted,
	 * such as an apply that landed after the delete; one someone else made
	 * with our labels is reported and left alone (judge_orphans).  Judged only
	 * on a full resync, like deployments.
	 */
	if (pass->resync)
	{
		foreach_ptr (const MlJsonValue, nsobj, items[OBJ_NAMESPACE])
		{
			const char *name = mlplat_json_text(nsobj, "metadata", "name", NULL);
			char key[sizeof(((ObsEntry *) 0)->key)];
			ObsEntry *e;
			ProjObj *o;

			if (name == NULL || ns_terminating(nsobj))
				continue;
			obs_key(key, OBJ_NAMESPACE, NULL, name);
			e = hash_search(seen, key, HASH_FIND, NULL);
			if (e == NULL || e->claimed)
				continue;
			o = palloc0(sizeof(ProjObj));
			o->kind = OBJ_NAMESPACE;
			o->name = pstrdup(name);
			o->obs = nsobj;
			o->action = ACT_DELETE;
			w.orphans = lappend(w.orphans, o);
		}
	}

	judge_orphans(w.orphans);
	foreach_ptr (ProjObj, o, w.orphans)
	{
		if (o->action != ACT_DELETE)
			continue;
		o->req = mlplat_kube_delete(w.batch, &RES[OBJ_NAMESPACE], NULL, o->name);
		w.deletes++;
	}
	foreach_ptr (Project, p, projects)
	{
		project_decide(p, w.arena, list_error);
		foreach_ptr (ProjObj, o, p->objs)
		{
			if (o->action == ACT_APPLY)
				o->req = mlplat_kube_apply(w.batch, &RES[o->kind], o->ns, o->name, o->manifest);
			else if (o->action == ACT_DELETE)
				o->req = mlplat_kube_delete(w.batch, &RES[o->kind], o->ns, o->name);
			if (o->req)
			{
				if (o->action == ACT_DELETE)
					w.deletes++;
				else
					w.creates++; /* an apply creates or updates */
				mlplat_write_notes_add(&w.sending, p->id, obj_label(o), o->action == ACT_DELETE ? "DELETE" : "APPLY");
			}
		}
		if (p->new_status == MLPLAT_PROJECT_PROVISIONING || p->new_status == MLPLAT_PROJECT_DELETING)
		{
			if (p->due)
				pass->next_pass_ms = FOLLOW_UP_MS;
		}
	}
	/* the write-ahead: what is about to be sent is on record before it is sent */
	if (!mlplat_pass_work_notes_commit(&w, "writes"))
		return;
	mlplat_http_batch_run(w.batch);

	foreach_ptr (ProjObj, o, w.orphans)
	{
		MlplatKubeResult res;

		if (o->req == NULL)
			continue; /* not ours: judge_orphans said why */
		mlplat_kube_write_result(o->req, true, &res);
		o->http_status = res.status;
		o->ledger_outcome = res.outcome == MLPLAT_KUBE_OK ? "OK" : "FAILED";
		o->error = res.message;
	}
	foreach_ptr (Project, p, projects)
	{
		project_results(p, pass, list_error);
		p->observed_json = observed_summary(p);
		p->write = false;
		foreach_ptr (ProjObj, o, p->objs)
			if (o->req || o->adopt || o->settle)
				p->write = true;
		if (p->new_status != p->status || !mlplat_str_same(p->reason, p->status_reason) ||
			!mlplat_str_same(p->error, p->last_error) ||
			(p->mark_observed && p->observed_generation != p->generation))
			p->write = true;
	}

	write_back(pass, projects, w.orphans);
	mlplat_pass_work_status(&w, NULL, "%d projects", list_length(projects));
}
