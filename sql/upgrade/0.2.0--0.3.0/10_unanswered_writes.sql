-- 0.2.0 -> 0.3.0, part 10: the write-ahead record of external writes whose answer no
-- write-back has recorded (issue 22: a leader terminated between a write and its write-back).

-- Write-ahead record of external writes whose answer is not (yet) recorded.  A reconciler
-- notes every write here, committed, before it sends the request, and removes the note in
-- the write-back of the pass that heard the answer.  A note that outlives its pass (the
-- leader was terminated between the request and its write-back, or the answer never came)
-- tells the next leader that the object may exist, or may still appear, although nothing
-- else in the database says so: it looks for the object in the cluster before concluding
-- anything ("never submitted", "gone"), adopts what it finds (a ledger ADOPT row), and
-- treats an object that has not appeared within mlplat.unanswered_write_grace as never made.
CREATE TABLE mlplat.unanswered_writes (
    kind       text NOT NULL,         -- the reconciler (leader_epochs.kind)
    entity_id  bigint NOT NULL,
    object     text NOT NULL,         -- namespace/name of the object written
    action     text NOT NULL,         -- the ledger action the write will be recorded as
    sent_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    epoch      bigint NOT NULL,
    PRIMARY KEY (kind, entity_id, object, action)
);
COMMENT ON TABLE mlplat.unanswered_writes IS
  'External writes sent (or about to be) whose answer no write-back has recorded yet.';

-- Note writes about to be sent, if and only if p_epoch is still the kind's current epoch.
-- Returns the rows noted: fewer than asked means the caller is no longer the leader and
-- must send nothing.
CREATE FUNCTION mlplat._unanswered_note(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                        p_action text[])
RETURNS int
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  WITH ins AS (
    INSERT INTO mlplat.unanswered_writes AS w (kind, entity_id, object, action, sent_at, epoch)
    SELECT p_kind, r.entity_id, r.object, r.action, pg_catalog.clock_timestamp(), p_epoch
      FROM unnest(p_entity_id, p_object, p_action) AS r(entity_id, object, action)
     WHERE EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch)
    ON CONFLICT (kind, entity_id, object, action) DO UPDATE
       SET sent_at = EXCLUDED.sent_at, epoch = EXCLUDED.epoch
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;

-- The notes of one kind, with their age in milliseconds (the claim of a pass reads them).
-- Read by name through the seam (seam.h, src/reconcile/unanswered.c).
CREATE TYPE mlplat.unanswered_note AS (entity_id bigint, object text, action text, age_ms bigint);
CREATE FUNCTION mlplat._unanswered_of(p_kind text)
RETURNS SETOF mlplat.unanswered_note
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT w.entity_id, w.object, w.action,
         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - w.sent_at) * 1000)::bigint
    FROM mlplat.unanswered_writes w
   WHERE w.kind = p_kind
$$;

-- Remove notes whose answer a write-back records (or whose object a pass found or gave up
-- on), if p_epoch is still current.  A NULL action removes every note of that object.
CREATE FUNCTION mlplat._unanswered_clear(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                         p_action text[])
RETURNS int
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  WITH del AS (
    DELETE FROM mlplat.unanswered_writes w
     USING unnest(p_entity_id, p_object, p_action) AS r(entity_id, object, action)
     WHERE w.kind = p_kind AND w.entity_id = r.entity_id AND w.object = r.object
       AND (r.action IS NULL OR w.action = r.action)
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch)
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM del
$$;
REVOKE ALL ON FUNCTION mlplat._unanswered_note(text, bigint, bigint[], text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_of(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_clear(text, bigint, bigint[], text[], text[]) FROM PUBLIC;
