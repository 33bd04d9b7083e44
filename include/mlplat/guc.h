/*
 * guc.h — every mlplat setting, declared in one place (src/guc.c).
 *
 * Settings that name secrets hold file paths only; the secrets themselves are
 * read from those files by the workers and never live in settings or tables.
 */
#ifndef MLPLAT_GUC_H
#define MLPLAT_GUC_H

#include "postgres.h"

/* where and how many reconcilers run (postmaster start) */
extern char *mlplat_database;
extern int mlplat_replicas;

/* leadership and pacing (reloadable) */
extern bool mlplat_workers_enabled;
extern int mlplat_leader_retry_interval_ms;
extern int mlplat_resync_interval_ms;
extern int mlplat_full_resync_interval_ms;
/* the deployments watch cache (issue 20): on/off, and the row resync period while it is healthy */
extern bool mlplat_deployments_watch;
extern int mlplat_watch_resync_interval_ms;
/* set by the deployments leader for mlplat._next_resync_at (0: mlplat.resync_interval) */
extern int mlplat_row_resync_interval_ms;
/* tests only: the deployments pass held open after its watch sync (test/e2e/watch_wake.sh) */
extern int mlplat_test_pass_hold_ms;
/* tests only: the watch's resume from its end hook raises an ERROR (test/e2e/watch_resume_error.sh) */
extern bool mlplat_test_watch_resume_error;
extern int mlplat_backoff_max_ms;
extern int mlplat_unanswered_write_grace_ms;

/* Kubernetes connection (reloadable; token and CA are files) */
extern char *mlplat_kube_url;
extern char *mlplat_kube_token_file;
extern char *mlplat_kube_ca_file;
/* mlplat.lease_fence: auto (the default: on whenever a cluster is configured), on, off */
typedef enum MlplatLeaseFence
{
	MLPLAT_LEASE_FENCE_AUTO,
	MLPLAT_LEASE_FENCE_ON,
	MLPLAT_LEASE_FENCE_OFF
} MlplatLeaseFence;
extern int mlplat_lease_fence;
extern char *mlplat_lease_namespace;
extern int mlplat_lease_duration_s;

/* Model registry (MLflow REST API; reloadable; the token is a file) */
extern char *mlplat_registry_url;
extern char *mlplat_registry_token_file;
extern char *mlplat_registry_basic_auth_file;
extern char *mlplat_registry_ca_file;

/* Prometheus HTTP API for rollout evidence (reloadable) */
extern char *mlplat_prometheus_url;

/* Object store (S3 API; reloadable; credentials are a file) and artifact checks */
extern char *mlplat_s3_endpoint;
extern char *mlplat_s3_region;
extern char *mlplat_s3_credentials_file;
extern char *mlplat_s3_ca_file;
extern int mlplat_artifact_hash_max_kb;
extern int mlplat_artifact_hash_timeout_ms;

/* HTTP client */
extern int mlplat_http_max_concurrency;
extern int mlplat_http_connect_timeout_ms;
extern int mlplat_http_timeout_ms;

/* housekeeping */
extern int mlplat_ledger_retention_days;
extern int mlplat_idempotency_retention_days;
/* retention of histories, route generations, purged keys; how often the leader runs it */
extern int mlplat_leader_history_retention_days;
extern int mlplat_history_retention_days;
extern int mlplat_route_generation_retention_days;
extern int mlplat_idempotency_tombstone_retention_days;
extern int mlplat_retention_interval_ms;

/* deployments */
extern int mlplat_deploy_deadline_ms;
extern int mlplat_api_lock_timeout_ms;
extern int mlplat_lab_node_max_age_s;
extern char *mlplat_controller_user;
extern int mlplat_lab_probe_max_age_s;
extern int mlplat_lab_cancel_alert_after_s;
extern int mlplat_finalizer_alert_after_s;
extern char *mlplat_lab_payload_bucket;
extern int mlplat_list_max_pages;
extern int mlplat_pass_memory_limit_kb;
extern int mlplat_pass_row_limit;

/* trace spans: export over OTLP/HTTP JSON (reloadable) and retention */
extern char *mlplat_otlp_endpoint;
extern char *mlplat_otlp_headers_file;
extern char *mlplat_runner_service_account;
extern char *mlplat_predictor_service_account;
extern char *mlplat_predictor_s3_secret;
extern char *mlplat_predictor_s3_endpoint;
extern char *mlplat_predictor_s3_region;
extern int mlplat_metrics_preset; /* MlPromPreset */
extern char *mlplat_network_allowed_namespaces;
extern int mlplat_otlp_batch_size;
extern int mlplat_otlp_export_interval_ms;
extern int mlplat_span_retention_days;

/* per session: W3C trace context supplied by the caller */
extern char *mlplat_traceparent;
extern char *mlplat_on_behalf_of;

extern void mlplat_define_gucs(void);

#endif /* MLPLAT_GUC_H */
