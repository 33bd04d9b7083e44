-- 0.2.0 -> 0.3.0, part 18: one function gives a project table its row-level security (issue
-- 19), as in sql/install/10_api_tables.sql; the parts that add project tables call it.  The
-- tables of 0.2.0 have their policies already.
CREATE FUNCTION mlplat._member_reads(VARIADIC p_tables text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY p_tables LOOP
    EXECUTE pg_catalog.format('ALTER TABLE mlplat.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE pg_catalog.format('CREATE POLICY member_reads ON mlplat.%I FOR SELECT USING (mlplat._can_view(project_id))', t);
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._member_reads(text[]) FROM PUBLIC;
