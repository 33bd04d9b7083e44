-- 0.2.0 -> 0.3.0, part 81: readiness as KServe reports it.  KServe copies
-- status.observedGeneration from its child (kserve#6081), so the deployments reconciler
-- remembers what KServe showed at a revision's first apply (deployments.observed ->
-- 'kserve_at_apply') and waits for the status to move past it.  A promoted rollout marks the
-- target as seen served; a rollback clears the mark so the baseline's re-apply records anew.
CREATE OR REPLACE FUNCTION mlplat._rollout_close(ro mlplat.rollouts, p_obs jsonb, p_revision_kn text, p_to_status text,
                                      p_epoch bigint, p_controller text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  frac numeric := mlplat._rollout_fraction(ro.id);
  route jsonb;
  v mlplat.model_versions;
BEGIN
  route := mlplat.with_content_id(pg_catalog.jsonb_build_object(
    'contract_content_id', ro.contract->'content_id', 'observed_at', p_obs->'observed_at',
    'revision', p_revision_kn, 'traffic', p_obs->'traffic'));
  IF NOT mlplat._rollout_record(ro, CASE WHEN p_to_status = 'PROMOTED' THEN 'PROMOTED' ELSE 'ROUTE_RESTORED' END,
                                ARRAY['TRAFFIC_OBSERVED_100'], p_to_status, frac,
                                CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
                                route, NULL, p_obs, p_epoch, p_controller) THEN
    RETURN 'REPLAYED';
  END IF;
  UPDATE mlplat.rollouts x
     SET status = p_to_status, current_fraction = CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
         status_reason = pg_catalog.format('100%% of the traffic observed on %s', p_revision_kn),
         observed_generation = x.generation
   WHERE x.id = ro.id;
  IF p_to_status = 'PROMOTED' THEN
    -- The deployment now serves the target; the baseline becomes its rollback revision
    -- (and stops being reserved: the rollout's extra capacity is released).
    UPDATE mlplat.deployments d
       SET previous_revision = ro.baseline_revision, desired_revision = ro.target_revision,
           status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s promoted revision %s', ro.id, ro.target_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           -- KServe was seen serving the target: its status counts as it is (deployments.c,
           -- isvc_status_current), where a first apply would wait for the child to move
           observed = coalesce(d.observed, '{}'::jsonb) || pg_catalog.jsonb_build_object('kserve_at_apply',
                        pg_catalog.jsonb_build_object('revision', ro.target_revision, 'observedGeneration', NULL,
                                                      'latestCreatedRevision', NULL)),
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
    -- The promoted version becomes the model's CHAMPION, as set_model_stage would do.
    SELECT mv.* INTO v FROM mlplat.model_versions mv
      JOIN mlplat.deployment_revisions dr ON dr.model_version_id = mv.id
     WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.target_revision;
    IF v.stage <> 'CHAMPION' THEN
      PERFORM 1 FROM mlplat.models m WHERE m.id = v.model_id FOR UPDATE;
      UPDATE mlplat.model_versions mv SET stage = 'ARCHIVED', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.model_id = v.model_id AND mv.stage = 'CHAMPION';
      UPDATE mlplat.model_versions mv SET stage = 'CHAMPION', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.id = v.id;
      IF mlplat._sync_aliases(v.model_id, ro.traceparent) THEN
        PERFORM mlplat._wake_on_commit('model_aliases');
      END IF;
    END IF;
  ELSE
    -- Rolled back: the deployment reconciler owns the object again and re-applies the
    -- baseline's manifest (dropping the canary setting).
    UPDATE mlplat.deployments d
       SET status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s rolled back to revision %s', ro.id, ro.baseline_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           -- the baseline's re-apply is a first apply again: KServe's status before it is the target's
           observed = d.observed - 'kserve_at_apply',
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
  END IF;
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN p_to_status;
END $$;
