-- 0.2.0 -> 0.3.0: running campaign candidates among the reconciled entities (issue 14): the
-- health view's pending work, the reconcile_age and repeated_failures alerts and the queue
-- metrics see them like every other kind's.  The one definition of _entities in this upgrade
-- (sql/install/50_runtime.sql).

-- Every live reconciled entity with the columns all kinds share; the health
-- and alerts views read it.
CREATE OR REPLACE VIEW mlplat._entities AS
    SELECT 'projects' AS kind, p.name AS entity, p.id AS entity_id, p.name AS project,
           p.generation, p.observed_generation, p.attempts, p.last_error, p.status, p.updated_at
      FROM mlplat.projects p WHERE p.status <> 'DELETED'
    UNION ALL
    SELECT 'deployments', d.name, d.id, p.name, d.generation, d.observed_generation, d.attempts,
           d.last_error, d.status, d.updated_at
      FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE d.status <> 'DELETED'
    UNION ALL
    SELECT 'runs', r.name, r.id, p.name, r.generation, r.observed_generation, r.attempts,
           r.last_error, r.status, r.updated_at
      FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id
     WHERE mlplat.run_is_active(r.status)
    UNION ALL
    SELECT 'model_aliases', a.alias, a.id, p.name, a.generation, a.observed_generation, a.attempts,
           a.last_error, a.status, a.updated_at
      FROM mlplat.model_aliases a JOIN mlplat.models m ON m.id = a.model_id JOIN mlplat.projects p ON p.id = m.project_id
    UNION ALL
    SELECT 'rollouts', d.name, o.id, p.name, o.generation, o.observed_generation, o.attempts,
           o.last_error, o.status, o.updated_at
      FROM mlplat.rollouts o JOIN mlplat.deployments d ON d.id = o.deployment_id JOIN mlplat.projects p ON p.id = d.project_id
     WHERE mlplat.rollout_is_active(o.status)
    UNION ALL
    -- campaign candidates the campaigns reconciler acts on: a build running or being stopped
    -- (PLANNED ones wait for an approval or their turn: the admission, not a reconcile)
    SELECT 'campaigns', c.name || '/' || k.name, k.id, p.name, k.generation, k.observed_generation, k.attempts,
           k.last_error, k.status, k.updated_at
      FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id JOIN mlplat.projects p ON p.id = k.project_id
     WHERE mlplat.candidate_is_building(k.status);
