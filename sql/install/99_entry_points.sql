-- The intent calls' rule, applied once (issue 19).  An intent call is a function of mlplat
-- whose name does not start with '_' and that answers mlplat.accepted: a tenant or an
-- administrator calls it to change desired state.  Each runs as the extension's owner
-- (SECURITY DEFINER) with search_path pinned to pg_catalog, mlplat, pg_temp (pg_temp last, so
-- no caller's temporary object shadows ours).  The functions do not spell it one by one: this
-- part, the last of the install, gives it to every intent call there is, and the upgrade script
-- ends with this same file (UPGRADE_PARTS in the Makefile), so a call an upgrade part adds or
-- redefines gets it too; on a call that has it already it changes nothing.  A call's own
-- settings stay, after the search_path (SET lock_timeout: the calls that bound their lock
-- waits give the caller's lock_timeout back on return).  test/pgtap/api_security.sql checks
-- that every intent call has it.  The other SECURITY DEFINER functions (readers such as
-- render_inference_service and the metrics, register_capability, three triggers and the
-- row-level security helper _can_view) answer other types and declare it themselves.
-- The rule is a function, mlplat._entry_points(), so that the SQL of a kind outside this
-- script (the test kind's extension mlplat_test, test/kinds/) gives its intent calls the
-- same rule by calling it last, as this part does.
CREATE OR REPLACE FUNCTION mlplat._entry_points() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  f regprocedure;
  own text;
BEGIN
  FOR f, own IN
    SELECT p.oid::regprocedure,
           (SELECT pg_catalog.string_agg(pg_catalog.format(' SET %I = %L', pg_catalog.split_part(c, '=', 1),
                                                           pg_catalog.substr(c, pg_catalog.strpos(c, '=') + 1)), '' ORDER BY o)
              FROM pg_catalog.unnest(p.proconfig) WITH ORDINALITY AS u(c, o)
             WHERE pg_catalog.split_part(c, '=', 1) OPERATOR(pg_catalog.<>) 'search_path')
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace OPERATOR(pg_catalog.=) 'mlplat'::regnamespace
       AND p.prorettype OPERATOR(pg_catalog.=) 'mlplat.accepted'::regtype
       AND pg_catalog.left(p.proname::text, 1) OPERATOR(pg_catalog.<>) '_'
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER RESET ALL SET search_path = pg_catalog, mlplat, pg_temp%s',
                              f, coalesce(own, ''));
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._entry_points() FROM PUBLIC;
SELECT mlplat._entry_points();
