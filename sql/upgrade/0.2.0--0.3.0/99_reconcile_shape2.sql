-- 0.2.0 -> 0.3.0, part 99 (reconcile_shape2): the reconcilers' SQL written once (issue 19).
--
-- mlplat._aliases_history (sql/install/54_reconcile_aliases.sql): the epoch fences its INSERT
-- in the statement, as every kind's write-back does, instead of a plpgsql guard before it
-- (the guard _aliases_map_version keeps; the same rows, the same answers).

CREATE OR REPLACE FUNCTION mlplat._aliases_history(p_alias_id bigint, p_action text, p_version_id bigint,
                                        p_requested_by text, p_registry_version text,
                                        p_observed_version text, p_epoch bigint, p_controller text,
                                        p_trace_id text)
RETURNS boolean
LANGUAGE sql
AS $$
  WITH recorded AS (
    INSERT INTO mlplat.model_alias_history (project_id, model_id, alias_id, registered_model, alias, action,
                                            requested_by, version_id, version, registry_version,
                                            observed_version, epoch, controller, trace_id)
    SELECT a.project_id, a.model_id, a.id, p.name || '.' || m.name, a.alias, p_action,
           p_requested_by, p_version_id, mv.version, p_registry_version,
           p_observed_version, p_epoch, p_controller, p_trace_id
      FROM mlplat.model_aliases a
      JOIN mlplat.models m ON m.id = a.model_id
      JOIN mlplat.projects p ON p.id = a.project_id
      LEFT JOIN mlplat.model_versions mv ON mv.id = p_version_id
     WHERE a.id = p_alias_id AND mlplat._epoch_current('model_aliases', p_epoch)
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM recorded)
$$;
