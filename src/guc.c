/*
 * guc.c — the one place where mlplat's settings are declared.
 *
 * Each setting's context says when it may change: PGC_POSTMASTER for what
 * shapes the set of background workers, PGC_SIGHUP for what workers re-read on
 * reload, PGC_USERSET for per-session caller context.  Paths to credentials are
 * GUC_SUPERUSER_ONLY so ordinary roles cannot even learn where they live.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/validate.h"

char *mlplat_database = NULL;
int mlplat_replicas = 2;
bool mlplat_workers_enabled = true;
int mlplat_leader_retry_interval_ms = 250;
int mlplat_resync_interval_ms = 30000;
int mlplat_full_resync_interval_ms = 300000;
bool mlplat_deployments_watch = true;
int mlplat_watch_resync_interval_ms = 21600000;
int mlplat_row_resync_interval_ms = 0;
int mlplat_test_pass_hold_ms = 0;
bool mlplat_test_watch_resume_error = false;
int mlplat_unanswered_write_grace_ms = 60000;
int mlplat_backoff_max_ms = 300000;
char *mlplat_kube_url = NULL;
char *mlplat_kube_token_file = NULL;
char *mlplat_kube_ca_file = NULL;
int mlplat_lease_fence = MLPLAT_LEASE_FENCE_AUTO;
char *mlplat_lease_namespace = NULL;
int mlplat_lease_duration_s = 15;
char *mlplat_registry_url = NULL;
char *mlplat_registry_token_file = NULL;
char *mlplat_registry_basic_auth_file = NULL;
char *mlplat_registry_ca_file = NULL;
char *mlplat_prometheus_url = NULL;
char *mlplat_s3_endpoint = NULL;
char *mlplat_s3_region = NULL;
char *mlplat_s3_credentials_file = NULL;
char *mlplat_s3_ca_file = NULL;
int mlplat_artifact_hash_max_kb = 1048576;
int mlplat_artifact_hash_timeout_ms = 600000;
int mlplat_http_max_concurrency = 32;
int mlplat_http_connect_timeout_ms = 2000;
int mlplat_http_timeout_ms = 10000;
int mlplat_ledger_retention_days = 30;
int mlplat_idempotency_retention_days = 7;
int mlplat_deploy_deadline_ms = 600000;
int mlplat_api_lock_timeout_ms = 5000;
int mlplat_list_max_pages = 1000;
int mlplat_pass_memory_limit_kb = 262144;
int mlplat_pass_row_limit = 1000;
char *mlplat_traceparent = NULL;
char *mlplat_otlp_endpoint = NULL;
char *mlplat_otlp_headers_file = NULL;
char *mlplat_runner_service_account = NULL;
char *mlplat_predictor_service_account = NULL;
char *mlplat_predictor_s3_secret = NULL;
char *mlplat_predictor_s3_endpoint = NULL;
char *mlplat_predictor_s3_region = NULL;
int mlplat_metrics_preset = 0;
char *mlplat_network_allowed_namespaces = NULL;

/* as MlPromPreset (mlplat/prometheus.h) numbers them */
static const struct config_enum_entry metrics_preset_options[] = {
	{ "knative-opencensus", 0, false },
	{ "knative-otel", 1, false },
	{ "vllm", 2, false },
	{ "triton", 3, false },
	{ NULL, 0, false }
};
int mlplat_otlp_batch_size = 512;
int mlplat_otlp_export_interval_ms = 1000;
int mlplat_span_retention_days = 7;
int mlplat_leader_history_retention_days = 30;
int mlplat_history_retention_days = 365;
int mlplat_route_generation_retention_days = 7;
int mlplat_idempotency_tombstone_retention_days = 365;
int mlplat_retention_interval_ms = 3600000;
int mlplat_lab_node_max_age_s = 60;
char *mlplat_controller_user = NULL;
int mlplat_lab_probe_max_age_s = 86400;
int mlplat_lab_cancel_alert_after_s = 300;
int mlplat_finalizer_alert_after_s = 600;
char *mlplat_lab_payload_bucket = NULL;
char *mlplat_on_behalf_of = NULL;

static const struct config_enum_entry lease_fence_options[] = {
	{ "auto", MLPLAT_LEASE_FENCE_AUTO, false },
	{ "on", MLPLAT_LEASE_FENCE_ON, false },
	{ "off", MLPLAT_LEASE_FENCE_OFF, false },
	{ "true", MLPLAT_LEASE_FENCE_ON, true },
	{ "false", MLPLAT_LEASE_FENCE_OFF, true },
	{ "yes", MLPLAT_LEASE_FENCE_ON, true },
	{ "no", MLPLAT_LEASE_FENCE_OFF, true },
	{ "1", MLPLAT_LEASE_FENCE_ON, true },
	{ "0", MLPLAT_LEASE_FENCE_OFF, true },
	{ NULL, 0, false }
};

/* A malformed traceparent is refused when set, not discovered later in a span. */
static bool
check_traceparent(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || **newval == '\0')
		return true;
	if (!mlplat_traceparent_is_valid(*newval))
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("invalid value for \"mlplat.traceparent\"");
		GUC_check_errdetail("A traceparent is \"00-<32 hex trace id>-<16 hex span id>-<2 hex flags>\" "
							"in lower case, with neither id all zeros.");
		return false;
	}
	return true;
}

/* A Kubernetes object name mlplat renders into every project: a DNS label. */
static bool
check_k8s_name(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && mlplat_dns_label_is_valid(*newval, strlen(*newval), 63))
		return true;
	GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
	GUC_check_errdetail("A Kubernetes object name here is a DNS label: at most 63 lower-case letters, "
						"digits and '-', starting and ending with a letter or digit.");
	return false;
}

/* Empty, or a Kubernetes object name (a DNS subdomain: labels joined by '.'). */
static bool
check_k8s_name_or_empty(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	size_t len = v ? strlen(v) : 0;
	const char *p = v;

	if (len == 0)
		return true;
	if (len <= 253)
	{
		while (p && *p)
		{
			size_t n = strcspn(p, ".");

			if (!mlplat_dns_label_is_valid(p, n, 63))
				break;
			p = p[n] ? p + n + 1 : NULL;
		}
		if (p == NULL)
			return true;
	}
	GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
	GUC_check_errdetail("A Kubernetes object name: lower-case letters, digits, '-' and '.', at most 253 characters.");
	return false;
}

/* A comma-separated list of namespace names (DNS labels), possibly empty. */
static bool
check_namespace_list(char **newval, void **extra, GucSource source)
{
	const char *p = *newval ? *newval : "";

	while (*p)
	{
		size_t n;

		while (*p == ' ' || *p == ',')
			p++;
		n = strcspn(p, ", ");
		if (n == 0)
			break;
		if (!mlplat_dns_label_is_valid(p, n, 63))
		{
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errdetail("Namespace names, separated by commas: each a DNS label (lower-case letters, digits, '-').");
			return false;
		}
		p += n;
	}
	return true;
}

/* Empty, or http(s)://host[:port] as KServe's storage initializer reaches the object store. */
static bool
check_s3_endpoint(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	const char *host;

	if (v == NULL || v[0] == '\0')
		return true;
	host = strncmp(v, "https://", 8) == 0 ? v + 8 : strncmp(v, "http://", 7) == 0 ? v + 7
																				  : NULL;
	if (host && host[0] && host[0] != '/' && strpbrk(host, "@ \t\r\n\"") == NULL)
		return true;
	GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
	GUC_check_errdetail("An http:// or https:// URL of the object store as the cluster's pods reach it, without credentials.");
	return false;
}

void
mlplat_define_gucs(void)
{
	/*
	 * Settings that shape the set of workers exist only when preloading:
	 * PostgreSQL refuses (FATAL) to define postmaster-level settings later,
	 * and without preloading there are no workers for them to shape.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("mlplat.database",
								   "Database the reconcilers connect to.",
								   "The extension must be installed in this database.",
								   &mlplat_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);
		DefineCustomIntVariable("mlplat.replicas",
								"Background worker replicas per reconciler kind.",
								"One replica leads; the others stand by to take over.",
								&mlplat_replicas, 2, 1, 8,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}

	DefineCustomBoolVariable("mlplat.workers_enabled",
							 "Whether reconcilers act on the cluster.",
							 "When off, workers stay connected and idle; reload to resume.",
							 &mlplat_workers_enabled, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.leader_retry_interval",
							"How long a standby waits in the leader lock's queue before it rechecks its settings.",
							"A standby is woken the moment the leader's lock is released; this bounds how late it notices a reload, recovery or the extension's state.", &mlplat_leader_retry_interval_ms, 250, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.resync_interval",
							"Period of the full resync that detects drift.",
							"Committed intents wake the reconciler at once; the resync catches changes made outside mlplat.",
							&mlplat_resync_interval_ms, 30000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.full_resync_interval",
							"Period of the deployments reconciler's full pass: every live row compared, the whole fleet listed, orphans found.",
							"Between full passes a pass reads only the rows that changed or whose own resync (spread over mlplat.resync_interval) is due. "
							"A new leader's first pass is always full.",
							&mlplat_full_resync_interval_ms, 300000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("mlplat.deployments_watch",
							 "Whether the deployments reconciler observes InferenceServices through a watch-fed cache.",
							 "The leader LISTs once, then keeps a watch with bookmarks open: an out-of-band change makes its row due at once, "
							 "passes read claimed rows from the cache, and rows are resynced every mlplat.watch_resync_interval. "
							 "When the watch is not healthy, passes observe with GETs and LISTs as without it.",
							 &mlplat_deployments_watch, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.watch_resync_interval",
							"How often a deployment is compared with the cluster although nothing changed, while the watch is healthy.",
							"Replaces mlplat.resync_interval as the per-row resync period while mlplat.deployments_watch keeps the cache current: "
							"out-of-band changes arrive as events.",
							&mlplat_watch_resync_interval_ms, 21600000, 100, 604800000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.row_resync_interval",
							"Set by the deployments leader: the per-row resync period in force (0: mlplat.resync_interval).",
							"Read by mlplat._next_resync_at in the leader's write-backs; not meant to be set by hand.",
							&mlplat_row_resync_interval_ms, 0, 0, 604800000,
							PGC_SUSET, GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.test_pass_hold",
							"For tests: hold one deployments pass open, after its watch sync, this long.",
							"Each new value holds the leader's next pass that is not a commit's wake, while the watch "
							"keeps being read as during a slow batch; 0: never. Not meant for production.",
							&mlplat_test_pass_hold_ms, 0, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomBoolVariable("mlplat.test_watch_resume_error",
							 "For tests: a watch's resume from the stream's end hook raises an ERROR.",
							 "As an out-of-memory there would: what the hook does with an ERROR it cannot "
							 "leave to a pass. Not meant for production.",
							 &mlplat_test_watch_resume_error, false,
							 PGC_SIGHUP, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.unanswered_write_grace",
							"How long an external write sent without a recorded answer may still land.",
							"Until then, a reconciler that does not find the object such a write makes keeps waiting for it "
							"instead of concluding that it was never made (a cancel or delete then waits too).",
							&mlplat_unanswered_write_grace_ms, 60000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.backoff_max",
							"Upper bound of the per-entity retry backoff.",
							NULL, &mlplat_backoff_max_ms, 300000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.kube_url",
							   "Kubernetes API server URL (http or https).",
							   "Empty: use the in-cluster service account when KUBERNETES_SERVICE_HOST is set, otherwise no cluster.",
							   &mlplat_kube_url, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.kube_token_file",
							   "File holding the bearer token for the Kubernetes API.",
							   "Re-read whenever it changes, so projected tokens may rotate.",
							   &mlplat_kube_token_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.kube_ca_file",
							   "CA bundle used to verify the Kubernetes API server.",
							   NULL, &mlplat_kube_ca_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	/*
	 * On by default whenever a cluster is configured: after a failover the old
	 * primary's workers must not keep driving Kubernetes (issue 18, finding
	 * 14).  "off" is the documented opt-out; the boolean spellings of 0.2.0's
	 * setting still parse.
	 */
	DefineCustomEnumVariable("mlplat.lease_fence",
							 "Require a Kubernetes Lease per kind before applying: auto (whenever a cluster is configured), on or off.",
							 "Guards against two database clusters (say, an old primary after a failover) driving one Kubernetes cluster.",
							 &mlplat_lease_fence, MLPLAT_LEASE_FENCE_AUTO, lease_fence_options,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.lease_namespace",
							   "Namespace of the reconcilers' Leases.",
							   NULL, &mlplat_lease_namespace, "mlplat-system",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.lease_duration",
							"Lease duration for the Kubernetes fence.",
							NULL, &mlplat_lease_duration_s, 15, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.registry_url",
							   "Model registry (MLflow) base URL (http or https).",
							   "Empty: no registry; the model_aliases reconciler idles and says so.",
							   &mlplat_registry_url, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.registry_token_file",
							   "File holding the bearer token for the model registry.",
							   "Re-read whenever it changes. Empty: requests carry no Authorization header.",
							   &mlplat_registry_token_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.registry_basic_auth_file",
							   "File holding user:password for HTTP Basic authentication to the model registry (MLflow's basic-auth app).",
							   "One line. Re-read whenever it changes. Empty: no Basic authentication. Not together with mlplat.registry_token_file.",
							   &mlplat_registry_basic_auth_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.registry_ca_file",
							   "CA bundle that verifies the model registry's TLS certificate.",
							   "Empty: the system's trusted CAs.",
							   &mlplat_registry_ca_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.prometheus_url",
							   "Prometheus base URL (http or https) the rollouts reconciler queries for request metrics.",
							   "Empty: no metrics; every rollout decision lacks request evidence and holds.",
							   &mlplat_prometheus_url, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.s3_endpoint",
							   "Object store (S3 API) base URL, e.g. https://s3.us-east-1.amazonaws.com.",
							   "Objects are addressed path-style: <endpoint>/<bucket>/<key>. Empty: s3:// artifacts cannot be verified and their deployments wait.",
							   &mlplat_s3_endpoint, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.s3_region",
							   "Region named in the object store's request signatures.",
							   NULL, &mlplat_s3_region, "us-east-1",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.s3_credentials_file",
							   "File holding the object store's access key (AWS shared credentials format).",
							   "Re-read when it changes. Empty: requests are sent unsigned.",
							   &mlplat_s3_credentials_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.s3_ca_file",
							   "CA bundle used to verify the object store.",
							   NULL, &mlplat_s3_ca_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.artifact_hash_max_bytes",
							"Largest artifact the deployments reconciler downloads to hash itself.",
							"Only for objects whose store offers no SHA-256 checksum; a larger one fails its deployment.",
							&mlplat_artifact_hash_max_kb, 1048576, 1, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.artifact_hash_timeout",
							"Total timeout of one artifact download for hashing.",
							NULL, &mlplat_artifact_hash_timeout_ms, 600000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.http_max_concurrency",
							"Most HTTP requests a reconciler has in flight at once.",
							NULL, &mlplat_http_max_concurrency, 32, 1, 1024,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.http_connect_timeout",
							"Connect timeout of one HTTP request.",
							NULL, &mlplat_http_connect_timeout_ms, 2000, 10, 600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.http_timeout",
							"Total timeout of one HTTP request.",
							NULL, &mlplat_http_timeout_ms, 10000, 10, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.ledger_retention",
							"Days of reconcile-ledger rows kept by the retention job.",
							NULL, &mlplat_ledger_retention_days, 30, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.idempotency_retention",
							"Days an idempotency key is remembered.",
							NULL, &mlplat_idempotency_retention_days, 7, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.deploy_deadline",
							"How long a deployed revision may take to become READY.",
							"Counted from the deploy or rollback that asked for it; past it the deployment is FAILED. 0 disables it.",
							&mlplat_deploy_deadline_ms, 600000, 0, 604800000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	/*
	 * Read by the SQL API (mlplat._lock_project_row), not by C: how long a call
	 * waits for a project's lock before it fails with 55P03.  Superuser-set, so
	 * a caller cannot turn its own bound into an endless wait (0 is refused).
	 */
	DefineCustomIntVariable("mlplat.list_max_pages",
							"Most pages one paginated LIST may take in a pass.",
							"A LIST whose continue chain goes on longer stops the pass with a message; 500 objects a page.",
							&mlplat_list_max_pages, 1000, 1, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.pass_memory_limit",
							"Memory a reconciler may hold while it reads a LIST.",
							"A page whose parse would take the pass's own memory (its context, not the worker's caches) past it stops the pass with a message in reconciler_health.",
							&mlplat_pass_memory_limit_kb, 262144, 8192, 1048576 * 64,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.pass_row_limit",
							"Most rows one reconciler pass claims and acts on.",
							"A pass whose claim comes back full is followed at once by the next; a full resync walks the rows in chunks of this size. Bounds a leader's memory by the chunk, not the fleet.",
							&mlplat_pass_row_limit, 1000, 1, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	/* the variable lives in src/http/backoff.c, which unit tests link without PostgreSQL */
	DefineCustomIntVariable("mlplat.retry_after_max",
							"Longest wait a remote's Retry-After can impose on one entity.",
							"Longer Retry-After values are cut to this; a jitter of up to half of it (at least 5 s) is added on top so entities refused together do not retry together.",
							&mlplat_retry_after_max_ms, 600000, 1000, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.api_lock_timeout",
							"How long an API call waits for a project's lock before failing with SQLSTATE 55P03.",
							"Bounds every wait for a project's row lock and the entity locks after it.",
							&mlplat_api_lock_timeout_ms, 5000, 1, 3600000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.traceparent",
							   "W3C traceparent of the caller's request.",
							   "Stored with the entity and audit event an intent writes; reconciler spans continue the trace.",
							   &mlplat_traceparent, "",
							   PGC_USERSET, 0, check_traceparent, NULL, NULL);
	DefineCustomStringVariable("mlplat.otlp_endpoint",
							   "OTLP/HTTP collector base URL that spans are exported to.",
							   "Spans are POSTed as OTLP JSON to <endpoint>/v1/traces. Empty: spans are only kept in mlplat.spans.",
							   &mlplat_otlp_endpoint, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.runner_service_account",
							   "ServiceAccount (and Role, RoleBinding) that runs a project's Argo Workflows.",
							   "The projects reconciler makes it in every project namespace with the Role Argo's executor needs (create/patch workflowtaskresults); rendered Workflows name it.",
							   &mlplat_runner_service_account, "mlplat-runner",
							   PGC_SIGHUP, 0, check_k8s_name, NULL, NULL);
	DefineCustomStringVariable("mlplat.controller_user",
							   "The Kubernetes user mlplat's reconcilers act as, for the bindings they make to themselves.",
							   "The projects reconciler binds ClusterRole mlplat-lab-inputs (the lab's input Secrets) to it in every project namespace, so the controller reads and writes Secrets only there. A ServiceAccount is system:serviceaccount:<namespace>:<name>. Empty: no such binding is made.",
							   &mlplat_controller_user, "system:serviceaccount:mlplat-system:mlplat",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.predictor_service_account",
							   "ServiceAccount every InferenceService's predictor runs as.",
							   "The projects reconciler makes it in every project namespace with KServe's S3 annotations and the mlplat.predictor_s3_secret reference; deploy renders it as serviceAccountName.",
							   &mlplat_predictor_service_account, "mlplat-predictor",
							   PGC_SIGHUP, 0, check_k8s_name, NULL, NULL);
	DefineCustomStringVariable("mlplat.predictor_s3_secret",
							   "Name of the Secret (in each project namespace) holding the S3 credentials KServe's storage initializer uses.",
							   "Only the name: the operator provides the Secret (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); no credential passes through mlplat. Empty: none (IAM roles, anonymous).",
							   &mlplat_predictor_s3_secret, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, check_k8s_name_or_empty, NULL, NULL);
	DefineCustomStringVariable("mlplat.predictor_s3_endpoint",
							   "Object store URL as the cluster's pods reach it (serving.kserve.io/s3-endpoint and s3-usehttps).",
							   "Empty: KServe's own defaults.",
							   &mlplat_predictor_s3_endpoint, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, check_s3_endpoint, NULL, NULL);
	DefineCustomStringVariable("mlplat.predictor_s3_region",
							   "Object store region for KServe's storage initializer (serving.kserve.io/s3-region).",
							   "Empty: KServe's own default.",
							   &mlplat_predictor_s3_region, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("mlplat.metrics_preset",
							 "Which serving stack's metrics rollout evidence is read from.",
							 "knative-opencensus: Knative <= 1.18 queue-proxy (revision_request_count, ms); knative-otel: Knative >= 1.19 (kn_serving_invocation_duration_seconds); vllm, triton: RawDeployment, the model server's own metrics.",
							 &mlplat_metrics_preset, 0, metrics_preset_options,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.network_allowed_namespaces",
							   "Namespaces whose pods may reach a project's pods, besides the project's own.",
							   "Comma-separated: the ingress gateway's (istio-system, kourier-system), Knative's activator (knative-serving) and the monitoring namespace whose Prometheus scrapes the model servers. Rendered into every project's NetworkPolicy.",
							   &mlplat_network_allowed_namespaces, "istio-system,knative-serving",
							   PGC_SIGHUP, 0, check_namespace_list, NULL, NULL);
	DefineCustomStringVariable("mlplat.otlp_headers_file",
							   "File of \"Name: value\" lines sent as headers with every OTLP export request.",
							   "For collector authentication (Authorization, API keys) instead of credentials in the endpoint URL. Re-read whenever it changes. Empty: no extra headers.",
							   &mlplat_otlp_headers_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.otlp_batch_size",
							"Most spans sent in one OTLP export request.",
							NULL, &mlplat_otlp_batch_size, 512, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.otlp_export_interval",
							"How often recorded spans are exported while mlplat.otlp_endpoint is set.",
							NULL, &mlplat_otlp_export_interval_ms, 1000, 10, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.span_retention",
							"Days of spans kept by the retention job, exported or not.",
							NULL, &mlplat_span_retention_days, 7, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.leader_history_retention",
							"Days of leader_history rows kept by the retention job (the current epoch's row always stays).",
							NULL, &mlplat_leader_history_retention_days, 30, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.history_retention",
							"Days the histories of an ended entity are kept by the retention job.",
							"Audit events and alias history of a deleted project, revisions of a deleted deployment, "
							"transitions of a finished rollout, finished runs; and revisions no live state refers to. "
							"Nothing of an entity that still lives is purged.",
							&mlplat_history_retention_days, 365, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.route_generation_retention",
							"Days a superseded route generation is kept by the retention job.",
							"The latest generation of each project always stays.",
							&mlplat_route_generation_retention_days, 7, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.idempotency_tombstone_retention",
							"Days the fingerprint of a purged idempotency key is kept, so a late retry is refused.",
							NULL, &mlplat_idempotency_tombstone_retention_days, 365, 1, 36500,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.retention_interval",
							"How often the projects leader runs the retention job when pg_cron does not.",
							"With pg_cron's mlplat-retention job active, the leader steps in only after two missed runs.",
							&mlplat_retention_interval_ms, 3600000, 1000, PG_INT32_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	/*
	 * Model Lab evidence freshness, read by the SQL assessment (mlplat._lab_assess) on every
	 * preflight, start and dispatch.  Superuser-set: a caller must not widen its own
	 * freshness window to pass a check.
	 */
	DefineCustomIntVariable("mlplat.lab_node_max_age",
							"How old the last observation of a lab node may be for a lab run to be admitted.",
							"Older observations block preflight and start with NODE_OBSERVATION_STALE; the lab_runs reconciler refreshes them on every full pass.",
							&mlplat_lab_node_max_age_s, 60, 1, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.lab_probe_max_age",
							"How old the latest passed probe of (artifact, runtime profile, node) may be.",
							"Older probes block preflight and start with PROBE_STALE.",
							&mlplat_lab_probe_max_age_s, 86400, 1, 2592000,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.finalizer_alert_after",
							"How long an InferenceService or a project's namespace may stay deleted but held by finalizers before the finalizer_stuck alert fires.",
							NULL, &mlplat_finalizer_alert_after_s, 600, 1, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mlplat.lab_cancel_alert_after",
							"How long a lab run may stay CANCEL_REQUESTED before the lab_cancel_stuck alert fires.",
							NULL, &mlplat_lab_cancel_alert_after_s, 300, 1, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomStringVariable("mlplat.lab_payload_bucket",
							   "S3 bucket where lab workers write their output objects.",
							   "Empty: lab runs wait in QUEUED (no lab payload store configured).",
							   &mlplat_lab_payload_bucket, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("mlplat.on_behalf_of",
							   "Person an application role acts for.",
							   "Honoured only when the session's role holds the impersonation right; the audit keeps both names.",
							   &mlplat_on_behalf_of, "",
							   PGC_USERSET, 0, NULL, NULL, NULL);

	MarkGUCPrefixReserved("mlplat");
}
