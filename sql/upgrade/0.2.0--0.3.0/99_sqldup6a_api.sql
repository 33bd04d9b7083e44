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

-- The entity row p_row (as a _find_* lookup found it) locked FOR NO KEY UPDATE and read
-- again, the API's lock waits bounded first (_bound_api_waits, 30_api_deployments.sql; the
-- caller names lock_timeout in its SET clause): a reconciler's write-back in flight is waited
-- for, not failed on, and a concurrent call of the same kind finds what this one wrote.  Any
-- table with an id: the table is the row's type.
CREATE FUNCTION mlplat._lock_again(p_row anyelement) RETURNS anyelement
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._bound_api_waits();
  EXECUTE pg_catalog.format('SELECT * FROM %s x WHERE x.id = $1 FOR NO KEY UPDATE',
                            (SELECT t.typrelid::pg_catalog.regclass FROM pg_catalog.pg_type t
                              WHERE t.oid = pg_catalog.pg_typeof(p_row)))
    INTO STRICT p_row USING p_row.id;
  RETURN p_row;
END $$;
REVOKE ALL ON FUNCTION mlplat._lock_again(anyelement) FROM PUBLIC;

-- grant_role and revoke_role open with _membership_begin, which checks the arguments as
-- _check_role_args did.
DROP FUNCTION mlplat._check_role_args(text, text);
-- The opening of a membership change, the same for a grant and a revoke: the call
-- authorized (p_action on the project), then its principal and role checked.
CREATE FUNCTION mlplat._membership_begin(p_action text, p_project text, principal text, role text)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin(p_action, p_project);
BEGIN
  IF principal IS NULL OR pg_catalog.length(principal) NOT BETWEEN 1 AND 63 OR principal ~ '[[:cntrl:]]' THEN
    PERFORM mlplat._bad_input('principal', 'must be a name of 1 to 63 printable characters', 'Pass the person''s or role''s name.');
  END IF;
  IF role IS NULL OR role NOT IN ('viewer', 'developer', 'deployer', 'owner') THEN
    PERFORM mlplat._bad_input('role', 'must be one of viewer, developer, deployer, owner',
      'Roles are cumulative: developer can do what viewer can, and so on; see mlplat.policies.');
  END IF;
  RETURN api;
END $$;
REVOKE ALL ON FUNCTION mlplat._membership_begin(text, text, text, text) FROM PUBLIC;

-- The answer of a platform call that registers something immutable under a name
-- (register_optimization_preset, register_component): a new name (p_added) is audited with
-- p_detail; a name registered before is answered as it is when its content is the same
-- (p_same: nothing written, no audit) and refused with 42710 in p_words (message, detail,
-- hint) when it is not.
CREATE FUNCTION mlplat._registered(c mlplat.api_call, r mlplat.accepted, p_added boolean, p_same boolean,
                                   p_words text[], p_detail jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  IF p_added THEN
    RETURN mlplat._api_accept(c, r, p_detail);
  ELSIF NOT p_same THEN
    RAISE EXCEPTION USING ERRCODE = '42710', MESSAGE = p_words[1], DETAIL = p_words[2], HINT = p_words[3];
  END IF;
  RETURN mlplat._api_keep(c, r);
END $$;
REVOKE ALL ON FUNCTION mlplat._registered(mlplat.api_call, mlplat.accepted, boolean, boolean, text[], jsonb) FROM PUBLIC;
