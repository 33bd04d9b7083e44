-- pgTAP: deploy()'s hot path (issue 20, target 4).  The small helpers every intent calls are
-- folded into their callers' plans by the planner: a SQL function that is not inlined parses
-- and plans its body on every call (mlplat._idem_fingerprint was, a fifteenth of a deploy()),
-- and a PL/pgSQL body runs the executor per call (mlplat._db_role, three per deploy()).
-- Their results stay what they were.
BEGIN;
SELECT plan(10);
\ir lib/helpers.sql

CREATE TEMP TABLE tap_keys (principal text, action text, key text);
INSERT INTO tap_keys VALUES ('ann', 'deploy', 'k-1'), ('Jörg Müller', 'start_run', 'ключ'), (NULL, 'deploy', 'k');

SELECT unalike(public.tap_plan_of('SELECT mlplat._idem_fingerprint(principal, action, key) FROM tap_keys'),
              '%_idem_fingerprint%', '_idem_fingerprint is inlined into the query that calls it');
SELECT alike(public.tap_plan_of('SELECT mlplat._idem_fingerprint(principal, action, key) FROM tap_keys'),
            '%sha256%', '... its SHA-256 is computed in the caller''s plan');
-- the fingerprint is the one retention stored before: lengths (in characters) first
SELECT is((SELECT array_agg(mlplat._idem_fingerprint(principal, action, key) ORDER BY key) FROM tap_keys),
          (SELECT array_agg(CASE WHEN principal IS NOT NULL THEN
                   substr(sha256(convert_to(format('%s:%s|%s:%s|%s', length(principal), principal,
                                                   length(action), action, key), 'UTF8')), 1, 16) END ORDER BY key)
           FROM tap_keys),
          'the fingerprint is 16 bytes of SHA-256 over "len:principal|len:action|key", NULL for a NULL part');
SELECT is(length(mlplat._idem_fingerprint('ann', 'deploy', 'k-1')), 16, 'a fingerprint has 16 bytes');
SELECT isnt(mlplat._idem_fingerprint('ann', 'deploy', 'k-1'), mlplat._idem_fingerprint('ann', 'deplo', 'yk-1'),
            'the lengths keep (principal, action, key) triples apart');

SELECT unalike(public.tap_plan_of('SELECT mlplat._db_role()'), '%_db_role%',
              '_db_role is inlined into the query that calls it');
SELECT is(mlplat._db_role(), session_user::text, '_db_role is the session user without SET ROLE');
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_hot_path') THEN CREATE ROLE tap_hot_path; END IF;
END $$;
GRANT USAGE ON SCHEMA mlplat TO tap_hot_path;
GRANT EXECUTE ON FUNCTION mlplat._db_role() TO tap_hot_path;
SET LOCAL ROLE tap_hot_path;
SELECT is((SELECT mlplat._db_role()), 'tap_hot_path', '... and the role set with SET ROLE');
RESET ROLE;
SELECT is(mlplat._db_role(), session_user::text, '... and the session user again after RESET ROLE');

-- inlined, its body is parsed with the caller's search_path: every operator is qualified
CREATE FUNCTION public.tap_never_eq(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.tap_never_eq);
SELECT is(public.tap_hostile('SELECT mlplat._db_role()'), 'ok:' || session_user,
          '_db_role is not fooled by an = operator ahead of pg_catalog on the search path');
DROP OPERATOR public.= (text, text);

SELECT * FROM finish();
ROLLBACK;
