-- 0.2.0 -> 0.3.0, part 16: one rule for marking tables as pg_dump configuration (issue 19),
-- as in sql/install/10_api_tables.sql; the campaigns and lab parts call it.  The tables of
-- 0.2.0 are marked already.
CREATE FUNCTION mlplat._config_dump(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    PERFORM pg_catalog.pg_extension_config_dump(('mlplat.' || t)::regclass, '');
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = ('mlplat.' || t)::regclass
               AND a.attname = 'id' AND a.attidentity <> '') THEN
      PERFORM pg_catalog.pg_extension_config_dump(
        pg_catalog.pg_get_serial_sequence('mlplat.' || t, 'id')::regclass, '');
    END IF;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._config_dump(text[]) FROM PUBLIC;

-- 0.2.0 marked model_alias_history and spans but not their id sequences: a dump restored
-- into a fresh install handed out ids from 1 again, colliding with the restored rows.
SELECT mlplat._config_dump('model_alias_history', 'spans');
