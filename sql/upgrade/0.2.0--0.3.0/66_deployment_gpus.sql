-- 0.2.0 -> 0.3.0, part 66: the GPUs of each project's deployments kept by trigger
-- (30_api_deployments), so the GPU quota no longer sums every deployment; _gpus_in_use
-- reads it (12_rules).  The counter is filled from the deployments of 0.2.0 after the
-- triggers exist: CREATE TRIGGER locks the table against writes until the update commits, so
-- no change falls between the fill and the triggers.
-- The GPUs of a project's deployments (desired_gpus of each one not DELETED), kept by
-- deployments_gpus_* so the GPU quota (_gpus_in_use) reads a few rows instead of summing
-- every deployment the project has (a quota check on each deploy(), start_run, lab start).
-- The sum of a project's rows is the sum over its deployments at every commit.  Two kinds:
--  * slot rows (slot 0-7), updated in place, each only by a transaction holding that quota
--    slot (src/quota_slot.c): a change that raises an allocation is an exact reservation
--    (_lock_project_row 'reserve', all eight slots) and writes row 0;
--  * journal rows (slot NULL), inserted by every other change (an allocation lowered, the
--    reconciler's DELETED, a row deleted): an insert waits for no one, so the reconciler's
--    write-backs and the API's calls never queue on, nor deadlock over, a counter row.
-- Each write also folds the committed journal rows no other transaction is folding (FOR
-- UPDATE SKIP LOCKED: it never waits) into the row it writes, so the journal stays a few
-- rows.  A transaction that is not READ COMMITTED only inserts a journal row: updating or
-- folding a row another transaction changed after its snapshot would fail it with 40001.
-- Internal: no privileges, RLS on with no policy; not in pg_dump's data (restoring
-- deployments fires the trigger, which rebuilds it).
CREATE TABLE mlplat.deployment_gpus (
  project_id bigint NOT NULL REFERENCES mlplat.projects (id) ON DELETE CASCADE,
  slot       int CHECK (slot BETWEEN 0 AND 7),   -- NULL: a journal row (unique only per slot)
  gpus       bigint NOT NULL,
  UNIQUE (project_id, slot)
);
ALTER TABLE mlplat.deployment_gpus ENABLE ROW LEVEL SECURITY;

-- (SECURITY DEFINER: whoever changes a deployment, the reconciler's role included, counts)
CREATE FUNCTION mlplat._deployment_gpus_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  project bigint;
  delta bigint := 0;
  rc boolean := pg_catalog.current_setting('transaction_isolation') = 'read committed';
  held int := -1;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    project := OLD.project_id;
    delta := CASE WHEN OLD.status = 'DELETED' THEN 0 ELSE -OLD.desired_gpus END;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    project := NEW.project_id;
    delta := delta + CASE WHEN NEW.status = 'DELETED' THEN 0 ELSE NEW.desired_gpus END;
  END IF;
  IF rc THEN
    held := mlplat._lab_quota_slot_held(project);
  END IF;
  WITH folded AS (
    DELETE FROM mlplat.deployment_gpus x
     WHERE x.ctid = ANY (ARRAY(SELECT y.ctid FROM mlplat.deployment_gpus y
                                WHERE rc AND y.project_id = project AND y.slot IS NULL
                                  FOR UPDATE SKIP LOCKED))
    RETURNING x.gpus
  ), total AS (
    SELECT delta + coalesce((SELECT pg_catalog.sum(f.gpus) FROM folded f), 0) AS gpus
  )
  INSERT INTO mlplat.deployment_gpus AS c (project_id, slot, gpus)
  SELECT project, CASE WHEN held >= 0 THEN held END, t.gpus FROM total t
   WHERE held >= 0 OR t.gpus <> 0
  ON CONFLICT (project_id, slot) DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
  RETURN NULL;
END $$;
CREATE TRIGGER deployments_gpus_insert AFTER INSERT ON mlplat.deployments FOR EACH ROW
  WHEN (NEW.status <> 'DELETED' AND NEW.desired_gpus <> 0)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();
-- (a redeploy of the same allocation, and every status write-back but DELETED, write nothing)
CREATE TRIGGER deployments_gpus_update AFTER UPDATE OF desired_gpus, status ON mlplat.deployments FOR EACH ROW
  WHEN (CASE WHEN OLD.status = 'DELETED' THEN 0 ELSE OLD.desired_gpus END
        <> CASE WHEN NEW.status = 'DELETED' THEN 0 ELSE NEW.desired_gpus END)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();
CREATE TRIGGER deployments_gpus_delete AFTER DELETE ON mlplat.deployments FOR EACH ROW
  WHEN (OLD.status <> 'DELETED' AND OLD.desired_gpus <> 0)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();

INSERT INTO mlplat.deployment_gpus (project_id, slot, gpus)
SELECT d.project_id, NULL, pg_catalog.sum(d.desired_gpus)
  FROM mlplat.deployments d
 WHERE d.status <> 'DELETED'
 GROUP BY d.project_id
HAVING pg_catalog.sum(d.desired_gpus) <> 0;
REVOKE ALL ON FUNCTION mlplat._deployment_gpus_count() FROM PUBLIC;
