-- 0.2.0 -> 0.3.0, part 93: deploy()'s hot path (issue 20, target 4).  _db_role() becomes an
-- inlinable SQL function: as PL/pgSQL with a scalar subquery it cost an executor run per
-- call, three per deploy().  Same result.  (_idem_fingerprint's volatility, the other cut,
-- is in part 50, which creates it.)
CREATE OR REPLACE FUNCTION mlplat._db_role() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none'
              THEN SESSION_USER::text ELSE pg_catalog.current_setting('role') END
$$;
