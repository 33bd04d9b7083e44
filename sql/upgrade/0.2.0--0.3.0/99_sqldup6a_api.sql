-- 0.2.0 -> 0.3.0, part 99 (sqldup6a): the API side of the sql/install duplicate pairs
-- (issue 19).
--
-- The status rules (12_rules, 60_campaigns and 65_lab define them here) are made by one
-- install-time function in a fresh install (sql/install/05_rules.sql); it is kept there, as
-- _append_only is, so an updated database has it too.
CREATE FUNCTION mlplat._status_rule(p_name text, p_values text[], p_says text, p_arg text DEFAULT 'status')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE pg_catalog.format('CREATE FUNCTION mlplat.%I(%I text) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE '
                            'AS $rule$ SELECT %I OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.text[]) $rule$',
                            p_name, p_arg, p_arg, p_values);
  EXECUTE pg_catalog.format('COMMENT ON FUNCTION mlplat.%I(text) IS %L', p_name,
                            p_says || ': ' || pg_catalog.array_to_string(p_values, ', ') || '.');
END $$;
REVOKE ALL ON FUNCTION mlplat._status_rule(text, text[], text, text) FROM PUBLIC;
