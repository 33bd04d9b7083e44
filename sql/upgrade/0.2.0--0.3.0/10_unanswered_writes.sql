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
AS $$
  SELECT w.entity_id, w.object, w.action,
         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - pg_catalog.max(w.sent_at)) * 1000)::bigint,
         pg_catalog.bool_and(w.overtaken)
    FROM mlplat.unanswered_writes w
   WHERE w.kind = p_kind
   GROUP BY w.entity_id, w.object, w.action
$$;

REVOKE ALL ON FUNCTION mlplat._unanswered_of(text) FROM PUBLIC;
