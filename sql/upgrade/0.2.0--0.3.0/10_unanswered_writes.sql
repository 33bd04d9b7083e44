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
    epoch      bigint NOT NULL,       -- the leader that sent it: one note per leader and write
    -- A later leader's write of the same object was answered after this note was made: seeing
    -- the object no longer proves that this write landed (it may be the later write's), so
    -- only the grace settles this note (a sight does not).
    overtaken  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (kind, entity_id, object, action, epoch)
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
    ON CONFLICT (kind, entity_id, object, action, epoch) DO UPDATE
       SET sent_at = EXCLUDED.sent_at
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;

-- The notes of one kind, with their age in milliseconds (the claim of a pass reads them):
-- one per entity, object and action, the youngest of its leaders' notes, so that a note
-- counts as past the grace only when every write it stands for is; overtaken when all of
-- them are (a sight of the object then proves none of them landed).
-- Read by name through the seam (seam.h, src/reconcile/unanswered.c).
CREATE TYPE mlplat.unanswered_note AS (entity_id bigint, object text, action text, age_ms bigint,
                                       overtaken boolean);
CREATE FUNCTION mlplat._unanswered_of(p_kind text)
RETURNS SETOF mlplat.unanswered_note
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT w.entity_id, w.object, w.action,
         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - pg_catalog.max(w.sent_at)) * 1000)::bigint,
         pg_catalog.bool_and(w.overtaken)
    FROM mlplat.unanswered_writes w
   WHERE w.kind = p_kind
   GROUP BY w.entity_id, w.object, w.action
$$;

-- Remove notes whose answer a write-back records (or whose object a pass found or gave up
-- on), if p_epoch is still current.  A NULL action names every note of that object.
--   p_answer 1: the caller's own write was answered.  That settles only the caller's own
--     notes (epoch p_epoch): an earlier leader's write of the object, sent before it died,
--     may still be in flight and land later (the real-peer soak: the next leader's answered
--     apply removed the note of the held one, the deployment was deleted, and the held apply
--     left an orphan).
--   p_answer 2: the same, and the answer says the write made or set the object (a 2xx to a
--     create or an apply): earlier leaders' notes of the object are marked overtaken, since
--     the object now seen may be this write's.  A refusal or a delete makes nothing (1).
--   p_answer 0: the object was found (adopted), or a note had the grace to land.  A
--     sight settles the notes it can prove, those not overtaken; the grace settles any
--     note older than p_grace_ms.  A note both found and overtaken in one call (adopted,
--     then written over in the same pass) goes: it was seen before the answer.
CREATE FUNCTION mlplat._unanswered_clear(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                         p_action text[], p_answer int[], p_grace_ms bigint)
RETURNS int
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  WITH r AS (
    SELECT u.*
      FROM unnest(p_entity_id, p_object, p_action, p_answer) AS u(entity_id, object, action, answer)
     WHERE EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch)),
  del AS (
    DELETE FROM mlplat.unanswered_writes w
     USING r
     WHERE w.kind = p_kind AND w.entity_id = r.entity_id AND w.object = r.object
       AND (r.action IS NULL OR w.action = r.action)
       AND CASE WHEN r.answer > 0 THEN w.epoch = p_epoch
                ELSE NOT w.overtaken
                     OR w.sent_at <= pg_catalog.clock_timestamp() - p_grace_ms * interval '1 millisecond' END
    RETURNING 1),
  overtaken AS (
    UPDATE mlplat.unanswered_writes w SET overtaken = true
      FROM r
     WHERE r.answer = 2 AND w.kind = p_kind AND w.entity_id = r.entity_id AND w.object = r.object
       AND w.epoch < p_epoch AND NOT w.overtaken
       AND NOT EXISTS (SELECT 1 FROM r s
                        WHERE s.answer = 0 AND s.entity_id = w.entity_id AND s.object = w.object
                          AND (s.action IS NULL OR s.action = w.action))
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM del
$$;
REVOKE ALL ON FUNCTION mlplat._unanswered_note(text, bigint, bigint[], text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_of(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_clear(text, bigint, bigint[], text[], text[], int[], bigint)
  FROM PUBLIC;
