-- 0.3.0: the trigger that publishes routes says "serving" through the one rule
-- (mlplat.deployment_is_serving, 12_rules.sql) instead of its own status list.
DROP TRIGGER deployments_publish_routes ON mlplat.deployments;
CREATE CONSTRAINT TRIGGER deployments_publish_routes AFTER UPDATE ON mlplat.deployments
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (coalesce(mlplat.deployment_is_serving(OLD.status) AND OLD.endpoint IS NOT NULL
                 AND OLD.ready_revision IS NOT NULL, false)
          IS DISTINCT FROM
        coalesce(mlplat.deployment_is_serving(NEW.status) AND NEW.endpoint IS NOT NULL
                 AND NEW.ready_revision IS NOT NULL, false)
        OR (mlplat.deployment_is_serving(NEW.status)
            AND (OLD.endpoint, OLD.ready_revision) IS DISTINCT FROM (NEW.endpoint, NEW.ready_revision)))
  EXECUTE FUNCTION mlplat._routes_publish();
