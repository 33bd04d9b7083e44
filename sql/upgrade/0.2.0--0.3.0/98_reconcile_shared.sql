-- 0.2.0 -> 0.3.0, part 98: what the reconcile kinds wrote twice, written once (issue 19).
--
-- The one-row write-backs of projects and model aliases go: each was the set write-back
-- (_projects_writeback_set, _aliases_writeback_set) of a one-element array, and neither the
-- workers nor the tests called them.  Whoever stands in for a reconciler calls the set
-- function with ARRAY[ROW(...)::mlplat.project_writeback] (or model_alias_writeback).
DROP FUNCTION mlplat._projects_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int);
DROP FUNCTION mlplat._aliases_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int);

-- The notes of unanswered writes (part 10 made their table) are taken and cleared only while
-- the caller's epoch is current, by the one fence every kind's write-back uses
-- (_epoch_current, part 14), not a copy of its query; they are made here, after part 14.

-- Note writes about to be sent, if and only if p_epoch is still the kind's current epoch.
-- Returns the rows noted: fewer than asked means the caller is no longer the leader and
-- must send nothing.
CREATE FUNCTION mlplat._unanswered_note(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                        p_action text[])
RETURNS int
LANGUAGE sql
AS $$
  WITH ins AS (
    INSERT INTO mlplat.unanswered_writes AS w (kind, entity_id, object, action, sent_at, epoch)
    SELECT p_kind, r.entity_id, r.object, r.action, pg_catalog.clock_timestamp(), p_epoch
      FROM unnest(p_entity_id, p_object, p_action) AS r(entity_id, object, action)
     WHERE mlplat._epoch_current(p_kind, p_epoch)
    ON CONFLICT (kind, entity_id, object, action, epoch) DO UPDATE
       SET sent_at = EXCLUDED.sent_at
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
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
AS $$
  WITH r AS (
    SELECT u.*
      FROM unnest(p_entity_id, p_object, p_action, p_answer) AS u(entity_id, object, action, answer)
     WHERE mlplat._epoch_current(p_kind, p_epoch)),
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
REVOKE ALL ON FUNCTION mlplat._unanswered_clear(text, bigint, bigint[], text[], text[], int[], bigint)
  FROM PUBLIC;
