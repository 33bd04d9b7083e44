#!/usr/bin/env bash
# bench/steady_pass/epoch_fence.sh — what the epoch fence costs when it is a call of
# mlplat._epoch_current (a SQL function with its own search_path: not inlined, its query
# planned each call) instead of the same EXISTS written into the statement, as
# _unanswered_note had it before issue 19's "each rule once": the function as it is beside a
# copy of its old body, side by side in one cluster, calls alternating, each timed inside the
# server, median of REPS.  No workers; the epoch row is made by hand.
#   REPS=201 bench/steady_pass/epoch_fence.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-201}
. "$SRC/bench/steady_pass/sql_side.sh"
side_start epoch_fence deployments
Q <<'SQL' >/dev/null
CREATE FUNCTION public.note_old(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[], p_action text[])
RETURNS int LANGUAGE sql SET search_path = pg_catalog, mlplat, pg_temp AS $$
  WITH ins AS (
    INSERT INTO mlplat.unanswered_writes AS w (kind, entity_id, object, action, sent_at, epoch)
    SELECT p_kind, r.entity_id, r.object, r.action, pg_catalog.clock_timestamp(), p_epoch
      FROM unnest(p_entity_id, p_object, p_action) AS r(entity_id, object, action)
     WHERE EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch)
    ON CONFLICT (kind, entity_id, object, action, epoch) DO UPDATE
       SET sent_at = EXCLUDED.sent_at
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins $$;
SQL
side_times <<SQL
DO \$\$
DECLARE n int; rep int; t0 timestamptz; k int; ids bigint[]; objs text[]; acts text[];
BEGIN
  FOREACH n IN ARRAY '{1,10,100}'::int[] LOOP
    ids := ARRAY(SELECT g::bigint FROM generate_series(1, n) g);
    objs := ARRAY(SELECT 'ns/o' || g FROM generate_series(1, n) g);
    acts := ARRAY(SELECT 'APPLY' FROM generate_series(1, n) g);
    FOR rep IN 1..$REPS LOOP
      t0 := clock_timestamp();
      k := public.note_old('deployments', 7, ids, objs, acts);
      RAISE NOTICE '% old %', n, extract(epoch FROM clock_timestamp() - t0) * 1000;
      t0 := clock_timestamp();
      k := mlplat._unanswered_note('deployments', 7, ids, objs, acts);
      RAISE NOTICE '% new %', n, extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
  END LOOP;
END \$\$;
SQL
side_table "$WORK/times.txt" "$REPS" old new \
	"notes a call" "inline EXISTS, ms" "_epoch_current, ms"
