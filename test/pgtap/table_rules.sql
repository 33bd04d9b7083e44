-- pgTAP: the rules every kind's table follows, written once (issue 19): the bookkeeping
-- columns (mlplat._reconciled_columns, copied with LIKE), the state machine's triggers
-- (mlplat._state_machine) and append-only history (mlplat._append_only).  Each check runs
-- over the whole catalog, so a table written by hand beside the helpers fails it.
BEGIN;
SELECT plan(13);

-- every reconciled entity (a table with row_version) has the template's columns exactly:
-- the same types, NOT NULL and defaults the claim and write-back code rely on
SELECT is((SELECT array_agg(DISTINCT c.relname::text ORDER BY c.relname::text)
             FROM pg_class c
             JOIN pg_attribute t ON t.attrelid = 'mlplat._reconciled_columns'::regclass AND t.attnum > 0
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = t.attname AND NOT a.attisdropped
            WHERE c.relnamespace = 'mlplat'::regnamespace AND c.relkind = 'r' AND c.relname <> '_reconciled_columns'
              AND EXISTS (SELECT 1 FROM pg_attribute r WHERE r.attrelid = c.oid AND r.attname = 'row_version')
              AND (a.attname IS NULL OR a.atttypid <> t.atttypid OR a.attnotnull <> t.attnotnull
                   OR pg_get_expr((SELECT d.adbin FROM pg_attrdef d WHERE d.adrelid = c.oid AND d.adnum = a.attnum), c.oid)
                      IS DISTINCT FROM
                      pg_get_expr((SELECT d.adbin FROM pg_attrdef d WHERE d.adrelid = t.attrelid AND d.adnum = t.attnum),
                                  t.attrelid))),
          NULL, 'every reconciled table carries the bookkeeping columns of mlplat._reconciled_columns');
SELECT is((SELECT count(*)::int FROM mlplat._reconciled_columns), 0, 'the template holds no rows');

-- every table with a state machine has both triggers, the insert one skipping exactly the one
-- initial status its transitions function lists
CREATE FUNCTION pg_temp.initial_of(fn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
  EXECUTE format('SELECT t.to_status FROM mlplat.%I() t WHERE t.from_status IS NULL', fn) INTO STRICT s;
  RETURN s;
END $$;
-- the changes a transitions function lists, as the update trigger's WHEN clause holds them
CREATE FUNCTION pg_temp.listed_of(fn text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE s text[];
BEGIN
  EXECUTE format('SELECT array_agg(t.from_status || ''>'' || t.to_status ORDER BY t.from_status, t.to_status) FROM mlplat.%I() t
                   WHERE t.from_status IS NOT NULL AND t.to_status IS NOT NULL', fn) INTO STRICT s;
  RETURN s;
END $$;
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname)
             FROM pg_class c
            WHERE c.relnamespace = 'mlplat'::regnamespace
              AND EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid
                            AND g.tgfoid = 'mlplat._status_transition_check'::regproc)
              AND (NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = c.relname || '_status_initial'
                                 AND pg_get_triggerdef(g.oid) LIKE '%BEFORE INSERT%WHEN ((new.status IS DISTINCT FROM '
                                     -- tgargs: the one argument, NUL-terminated
                                     || quote_literal(pg_temp.initial_of(split_part(encode(g.tgargs, 'escape'), '\000', 1)))
                                     || '::text))%')
                   OR NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = c.relname || '_status_transition'
                                    AND pg_get_triggerdef(g.oid) LIKE '%BEFORE UPDATE OF status%WHEN (((old.status IS DISTINCT FROM new.status) AND %'
                                        || quote_literal(pg_temp.listed_of(split_part(encode(g.tgargs, 'escape'), '\000', 1))::text)
                                        || '::text[]))))%'))),
          NULL, 'every state machine has its insert and update triggers, the insert one skipping its one initial status, the update one the changes its function lists');
SELECT is((SELECT count(DISTINCT g.tgrelid)::int FROM pg_trigger g WHERE g.tgfoid = 'mlplat._status_transition_check'::regproc),
          7, 'the seven kinds with a state machine (projects, deployments, runs, rollouts, model aliases, candidates, lab runs)');

-- the WHEN clause passes a listed change without calling the check, and still sends an
-- unlisted one to it, which refuses it
INSERT INTO mlplat.projects (name, gpu_quota) VALUES ('tapsm', 1);
SELECT throws_ok($$UPDATE mlplat.projects SET status = 'DELETED' WHERE name = 'tapsm'$$, '23514',
                 NULL, 'an unlisted change (PROVISIONING -> DELETED) still reaches the check and is refused');
SELECT lives_ok($$UPDATE mlplat.projects SET status = 'READY' WHERE name = 'tapsm'$$,
                'a listed change (PROVISIONING -> READY) passes');

-- a transitions function with two initial statuses cannot be put on a table: the insert
-- trigger's shortcut would skip the check for one of them only
CREATE FUNCTION mlplat._tap_two_initial() RETURNS TABLE (from_status text, to_status text)
LANGUAGE sql IMMUTABLE AS $$ VALUES (NULL, 'A'), (NULL, 'B'), ('A', 'B') $$;
SELECT throws_ok($$SELECT mlplat._state_machine('projects', '_tap_two_initial')$$, '22023',
                 'mlplat._tap_two_initial() lists 2 initial statuses, not one',
                 'a machine with two initial statuses is refused');

-- a machine is written as the lines of its Mermaid drawing; _transitions_function makes the
-- IMMUTABLE function of its rows, in the order written, [*] as NULL
SELECT lives_ok($$SELECT mlplat._transitions_function('tap_made', '
  [*] --> A
  A --> B
  A --> C
  B --> A
  C --> [*]
')$$, 'a machine written as Mermaid lines makes its transitions function');
SELECT results_eq($$SELECT from_status, to_status FROM mlplat._tap_made_transitions()$$,
                  $$VALUES (NULL, 'A'), ('A', 'B'), ('A', 'C'), ('B', 'A'), ('C', NULL)$$,
                  'its rows are the moves in the order written, [*] read as NULL');
SELECT is((SELECT array_agg(DISTINCT p.provolatile::text || p.proparallel::text)
             FROM pg_proc p WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname LIKE '\_%\_transitions'),
          ARRAY['is'], 'every transitions function is IMMUTABLE PARALLEL SAFE');
SELECT throws_ok($$SELECT mlplat._transitions_function('tap_bad', '
  [*] --> A
  A -> B
')$$, '22023', 'mlplat: a line of the tap_bad machine is not a move:   A -> B',
                 'a line that is not a move is refused');

-- append-only tables refuse TRUNCATE too (api_security.sql checks that across the catalog);
-- _append_only puts both triggers on
SELECT is((SELECT array_agg(g.tgname::text ORDER BY g.tgname) FROM pg_trigger g
            WHERE g.tgrelid = 'mlplat.model_alias_history'::regclass AND NOT g.tgisinternal
              AND g.tgfoid = 'mlplat._refuse_change'::regproc),
          ARRAY['model_alias_history_immutable', 'model_alias_history_no_truncate'],
          'model_alias_history is append-only like the other history tables');

-- a table pg_dump saves (configuration) has its identity sequence saved too: otherwise a
-- restore into a fresh install hands out ids from 1 again, colliding with the restored rows
SELECT is((SELECT array_agg(c::regclass::text ORDER BY c::regclass::text)
             FROM pg_extension e, unnest(e.extconfig) c
            WHERE e.extname = 'mlplat'
              AND CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a
                                     WHERE a.attrelid = c AND a.attname = 'id' AND a.attidentity <> '')
                       THEN NOT pg_get_serial_sequence(c::regclass::text, 'id')::regclass = ANY (e.extconfig)
                       ELSE false END),
          NULL, 'every table pg_dump saves has its id sequence saved too');

SELECT * FROM finish();
ROLLBACK;
