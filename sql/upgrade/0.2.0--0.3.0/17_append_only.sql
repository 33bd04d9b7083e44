-- 0.2.0 -> 0.3.0, part 17: one function makes a table append-only (issue 19), as in
-- sql/install/10_api_tables.sql; the campaigns and lab parts call it.  model_alias_history
-- had only the row trigger in 0.2.0, so a TRUNCATE could empty it: it gets the second one.
CREATE FUNCTION mlplat._append_only(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON mlplat.%I
                                 FOR EACH ROW EXECUTE FUNCTION mlplat._refuse_change()', t || '_immutable', t);
    EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE TRUNCATE ON mlplat.%I
                                 FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change()', t || '_no_truncate', t);
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._append_only(text[]) FROM PUBLIC;
CREATE TRIGGER model_alias_history_no_truncate BEFORE TRUNCATE ON mlplat.model_alias_history
  FOR EACH STATEMENT EXECUTE FUNCTION mlplat._refuse_change();
