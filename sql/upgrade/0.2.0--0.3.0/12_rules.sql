-- 0.3.0: each input rule defined once (issue 19 item 5).  The env rule and the DNS label
-- rules live in C (src/validate/env.c, names.c); _check_env and _check_label call them
-- instead of repeating them as regular expressions.
CREATE FUNCTION mlplat._env_problem(env jsonb) RETURNS text[]
LANGUAGE C STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_env_problem';
REVOKE ALL ON FUNCTION mlplat._env_problem(jsonb) FROM PUBLIC;

CREATE FUNCTION mlplat._is_dns1035_label(name text, max_len integer) RETURNS boolean
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_is_dns1035_label';
REVOKE ALL ON FUNCTION mlplat._is_dns1035_label(text, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._check_label(field text, v text, max_len int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF v IS NULL THEN
    PERFORM mlplat._bad_input(field, 'must not be null', 'Pass a name.');
  ELSIF NOT mlplat.is_dns_label(v, max_len) THEN   -- the rule: src/validate/names.c
    PERFORM mlplat._bad_input(field,
      pg_catalog.format('must be a DNS-1123 label of 1 to %s characters', max_len),
      'Use lower-case letters, digits and ''-'', starting and ending with a letter or digit.');
  END IF;
END $$;

CREATE OR REPLACE FUNCTION mlplat._check_env(field text, env jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  p text[] := mlplat._env_problem(env);
BEGIN
  IF p IS NOT NULL THEN
    PERFORM mlplat._bad_input(field, p[1], p[2]);
  END IF;
END $$;
