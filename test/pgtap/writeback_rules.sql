-- pgTAP: the rules every kind's write-back applies, written once (issue 19, item 3):
-- the epoch fence (mlplat._epoch_current) and the retry schedule (mlplat._retry_attempts,
-- mlplat._retry_at).  The retry rules are folded into each write-back's UPDATE by the
-- planner (a SET clause or an unqualified name would stop that, or let a caller's
-- search_path change them); their results are what each write-back computed inline before.
BEGIN;
SELECT plan(11);
\ir lib/helpers.sql

CREATE TEMP TABLE tap_rows (attempts int, retry_ms int);
INSERT INTO tap_rows VALUES (0, NULL), (3, NULL), (0, 250), (7, 1500);

SELECT doesnt_match(public.tap_plan_of('SELECT mlplat._retry_attempts(attempts, retry_ms), mlplat._retry_at(retry_ms) FROM tap_rows'),
                    '_retry_(at|attempts)\(', 'the retry rules are inlined into the query that calls them');
SELECT is((SELECT array_agg(mlplat._retry_attempts(attempts, retry_ms) ORDER BY attempts, retry_ms NULLS FIRST) FROM tap_rows),
          ARRAY[0, 1, 0, 8], 'no retry scheduled resets attempts; a retry counts one more');
SELECT is(mlplat._retry_at(NULL), now(), 'no retry scheduled: due again at once');
SELECT is(mlplat._retry_at(1500), now() + interval '1.5 seconds', 'a retry is due retry_ms from now');
SELECT is(mlplat._retry_at(1), now() + interval '1 millisecond', '... to the millisecond');
-- the same under a hostile search_path: a look-alike + ahead of pg_catalog changes nothing
CREATE FUNCTION public.tap_plus_zero(int, int) RETURNS int LANGUAGE sql AS 'SELECT 0';
CREATE OPERATOR public.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = public.tap_plus_zero);
SELECT is(public.tap_hostile('SELECT mlplat._retry_attempts(41, 10) FROM (SELECT 1) x'), 'ok:42',
          '_retry_attempts ignores a look-alike + in a hostile search_path');
DROP OPERATOR public.+ (int, int);

-- the epoch fence: the kind's current epoch only, never another kind's, never a stale one
DELETE FROM mlplat.leader_epochs WHERE kind IN ('tap_kind', 'tap_other');
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('tap_kind', 5, 1, 0, 'tap'), ('tap_other', 6, 1, 0, 'tap');
SELECT ok(mlplat._epoch_current('tap_kind', 5), 'the current epoch of the kind is current');
SELECT ok(NOT mlplat._epoch_current('tap_kind', 4), 'a stale epoch is not');
SELECT ok(NOT mlplat._epoch_current('tap_kind', 6), 'nor another kind''s epoch');
SELECT ok(NOT mlplat._epoch_current('tap_none', 5), 'nor any epoch of a kind nobody leads');
-- a write-back fenced by it writes nothing under a stale epoch
DELETE FROM mlplat.leader_epochs WHERE kind = 'model_aliases';
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('model_aliases', 9, 1, 0, 'tap');
SELECT is(mlplat._aliases_map_version(-1, 'tap.model', '1', 8), false,
          'an alias registry mapping under a deposed epoch is refused');

SELECT * FROM finish();
ROLLBACK;
