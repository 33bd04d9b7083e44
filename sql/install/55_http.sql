-- 55_http: superuser-only test hooks for the HTTP client (src/http/).
-- They exist so the client can be tested from SQL without background workers;
-- nothing in the API depends on them.

CREATE FUNCTION mlplat._http_probe(urls text[], method text DEFAULT 'GET',
                                   timeout_ms int DEFAULT NULL,
                                   connect_timeout_ms int DEFAULT NULL,
                                   max_body int DEFAULT NULL)
RETURNS TABLE(url text, status int, error text, elapsed_ms float8, body text,
              retry_after_s int, content_type text)
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_http_probe';
COMMENT ON FUNCTION mlplat._http_probe(text[], text, int, int, int) IS
  'Test hook: run the given URLs concurrently through the HTTP client (first 4 kB of each body).';
REVOKE EXECUTE ON FUNCTION mlplat._http_probe(text[], text, int, int, int) FROM PUBLIC;

CREATE FUNCTION mlplat._backoff_delay_ms(attempts int, base_ms int, max_ms int,
                                         retry_after_s int, seed int)
RETURNS int
LANGUAGE C IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'mlplat_backoff_delay_sql';
COMMENT ON FUNCTION mlplat._backoff_delay_ms(int, int, int, int, int) IS
  'Test hook: the retry delay after attempts failures (exponential, full jitter, Retry-After honoured).';
REVOKE EXECUTE ON FUNCTION mlplat._backoff_delay_ms(int, int, int, int, int) FROM PUBLIC;

-- Kubernetes client hooks.  _kube_configure points only the calling backend at
-- a server (NULL url: back to the mlplat.kube_* settings), so tests never
-- change what the workers use.
CREATE FUNCTION mlplat._kube_configure(url text, token_file text DEFAULT NULL,
                                       ca_file text DEFAULT NULL)
RETURNS text
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_kube_configure_sql';
COMMENT ON FUNCTION mlplat._kube_configure(text, text, text) IS
  'Test hook: use this Kubernetes API URL, token file and CA file in this backend only.';
REVOKE EXECUTE ON FUNCTION mlplat._kube_configure(text, text, text) FROM PUBLIC;

CREATE FUNCTION mlplat._kube_call(op text, api_group text, api_version text, plural text,
                                  namespace text DEFAULT NULL, name text DEFAULT NULL,
                                  body jsonb DEFAULT NULL, label_selector text DEFAULT NULL,
                                  lim int DEFAULT 0, continue_token text DEFAULT NULL,
                                  OUT url text, OUT outcome text, OUT status int,
                                  OUT reason text, OUT message text, OUT resp_body jsonb,
                                  OUT next_continue text)
RETURNS record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_kube_call_sql';
COMMENT ON FUNCTION mlplat._kube_call(text, text, text, text, text, text, jsonb, text, int, text) IS
  'Test hook: one Kubernetes request (get, list, apply, create, replace, merge_patch, delete) and its classified result.';
REVOKE EXECUTE ON FUNCTION mlplat._kube_call(text, text, text, text, text, text, jsonb, text, int, text) FROM PUBLIC;

CREATE FUNCTION mlplat._kube_lease(namespace text, name text, identity text, duration_s int,
                                   OUT result text, OUT detail text)
RETURNS record
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_kube_lease_sql';
COMMENT ON FUNCTION mlplat._kube_lease(text, text, text, int) IS
  'Test hook: one round of the Lease fence (GET, create if missing, PUT with resourceVersion).';
REVOKE EXECUTE ON FUNCTION mlplat._kube_lease(text, text, text, int) FROM PUBLIC;

-- Self-test in the setting the client is built for: a background worker with
-- no transaction open, parsing a Kubernetes answer into jsonb; it reports with
-- NOTIFY mlplat_http_selftest.
CREATE FUNCTION mlplat._http_worker_selftest(base_url text)
RETURNS void
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_http_worker_selftest';
COMMENT ON FUNCTION mlplat._http_worker_selftest(text) IS
  'Test hook: GET configmap team-a/cm-selftest from base_url in a background worker outside any transaction; NOTIFY mlplat_http_selftest with the result.';
REVOKE EXECUTE ON FUNCTION mlplat._http_worker_selftest(text) FROM PUBLIC;

-- What mlplat.pass_memory_limit measures: a background worker holding ballast_mb MB of its
-- own outside any pass LISTs InferenceServices the way a pass does; NOTIFY
-- mlplat_pass_memory_selftest says whether the LIST went through or was stopped.
CREATE FUNCTION mlplat._pass_memory_selftest(ballast_mb int)
RETURNS void
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_pass_memory_selftest';
COMMENT ON FUNCTION mlplat._pass_memory_selftest(int) IS
  'Test hook: in a background worker holding ballast_mb MB outside its pass, LIST every InferenceService as a pass does (bounded by mlplat.pass_memory_limit); NOTIFY mlplat_pass_memory_selftest with the result.';
REVOKE EXECUTE ON FUNCTION mlplat._pass_memory_selftest(int) FROM PUBLIC;
