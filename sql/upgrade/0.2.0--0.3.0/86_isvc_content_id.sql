-- 0.2.0 -> 0.3.0, part 86: an InferenceService is rendered with its content id (annotation
-- mlplat.io/content-id, added by the C function mlplat._render_isvc) and is written by the
-- deployments and rollouts reconcilers only when it carries the id of one of the
-- deployment's revisions, or none for a revision rendered before 0.3.0 (issue 18,
-- finding 5).  Revisions already stored keep their specs: their objects carry no id.
CREATE FUNCTION mlplat._isvc_stamps_known(p_namespaces text[], p_names text[], p_content_ids text[])
RETURNS SETOF int
LANGUAGE sql STABLE AS $$
  SELECT x.i
    FROM (SELECT g.i, p_namespaces[g.i] AS ns, p_names[g.i] AS name, p_content_ids[g.i] AS content_id
            FROM pg_catalog.generate_subscripts(p_namespaces, 1) AS g(i)) x
   WHERE EXISTS (SELECT FROM mlplat.projects p
                   JOIN mlplat.deployments d ON d.project_id = p.id AND d.name = x.name
                   JOIN mlplat.deployment_revisions r ON r.deployment_id = d.id
                  WHERE mlplat._project_namespace(p.name) = x.ns
                    AND (r.spec->'metadata'->'annotations'->>'mlplat.io/content-id') IS NOT DISTINCT FROM x.content_id)
$$;
REVOKE ALL ON FUNCTION mlplat._isvc_stamps_known(text[], text[], text[]) FROM PUBLIC;
