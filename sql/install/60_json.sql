-- 60_json: the pure JSON core (canonical JSON, content ids, default-aware
-- spec diff) and the name validators, callable from SQL.  All pure: no
-- catalog access, no I/O, same answer for the same input.

CREATE FUNCTION mlplat.canonical_json(doc jsonb)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_canonical_json';
COMMENT ON FUNCTION mlplat.canonical_json(jsonb) IS
  'RFC 8785 canonical JSON text of doc: sorted keys, no whitespace, shortest numbers.';

CREATE FUNCTION mlplat.content_id(doc jsonb)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_content_id';
COMMENT ON FUNCTION mlplat.content_id(jsonb) IS
  'Lower-case hex SHA-256 of canonical_json(doc).';

CREATE FUNCTION mlplat.content_id(doc jsonb, exclude_key text)
RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_content_id_excluding';
COMMENT ON FUNCTION mlplat.content_id(jsonb, text) IS
  'Content id of doc without its top-level member exclude_key (to verify records that carry their own id).';

CREATE FUNCTION mlplat.spec_diff(desired jsonb, observed jsonb)
RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_spec_diff';
COMMENT ON FUNCTION mlplat.spec_diff(jsonb, jsonb) IS
  'Default-aware drift: [{path, desired, observed}] for fields of desired that observed does not match (see docs/drift.md).';

CREATE FUNCTION mlplat.is_dns_label(name text, max_len integer DEFAULT 63)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_is_dns_label';
COMMENT ON FUNCTION mlplat.is_dns_label(text, integer) IS
  'RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..max_len bytes.';

CREATE FUNCTION mlplat.is_traceparent(value text)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'mlplat_is_traceparent';
COMMENT ON FUNCTION mlplat.is_traceparent(text) IS
  'W3C trace-context version 00 traceparent, lower-case hex, non-zero ids.';
