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
