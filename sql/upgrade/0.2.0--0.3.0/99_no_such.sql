-- 0.3.0: the "does not exist" error of a lookup by name, defined once (mlplat._no_such);
-- revoke_evidence_signer (part 60) calls it, and the finders raise it through mlplat._found
-- (part 99_z_api_shape2, which defines _find_deployment, _find_run and _find_campaign).
CREATE FUNCTION mlplat._no_such(p_entity text, p_name text, p_hint text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704',
    MESSAGE = pg_catalog.format('%s "%s" does not exist', p_entity, pg_catalog.left(p_name, 64)),
    HINT = p_hint;
END $$;
REVOKE ALL ON FUNCTION mlplat._no_such(text, text, text) FROM PUBLIC;

