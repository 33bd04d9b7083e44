-- Helpers shared by the pgTAP files: include with "\ir lib/helpers.sql" after BEGIN (they
-- go away with each file's final ROLLBACK).  Not a test file itself (test/run.sh runs only
-- test/pgtap/*.sql).

-- SQLSTATE of running sql as role r ('ok' when it succeeded), followed by ': <message>'
-- when with_message; always rolled back.
CREATE FUNCTION public.tap_api_try(r text, sql text, with_message boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE sql;
    RAISE EXCEPTION USING ERRCODE = 'P0999', MESSAGE = 'tap rollback';
  EXCEPTION WHEN OTHERS THEN
    RETURN CASE WHEN SQLSTATE = 'P0999' THEN 'ok'
                WHEN with_message THEN SQLSTATE || ': ' || SQLERRM ELSE SQLSTATE END;
  END;
END $$;

-- Run sql with a hostile search_path (temp and public first); its SQLSTATE, or 'ok:<result>'.
CREATE FUNCTION public.tap_hostile(sql text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
  res text;
BEGIN
  BEGIN
    EXECUTE 'SET LOCAL search_path = pg_temp, public, pg_catalog, mlplat';
    EXECUTE sql INTO res;
    RETURN 'ok:' OPERATOR(pg_catalog.||) coalesce(res, '');
  EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
  END;
END $$;

-- The plan of query q (EXPLAIN VERBOSE, without costs), one text.
CREATE FUNCTION public.tap_plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
  out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
    out := out || line || E'\n';
  END LOOP;
  RETURN out;
END $$;

GRANT EXECUTE ON FUNCTION public.tap_api_try(text, text, boolean), public.tap_hostile(text) TO PUBLIC;
