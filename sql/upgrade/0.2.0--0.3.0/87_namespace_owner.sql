-- Project namespaces: torn down as orphans only when they name a deleted project (issue 18).

-- Which orphan namespaces (by ordinal in the arrays) name, in their mlplat.io/project-id
-- annotation, a deleted project of the same name: only those are this installation's to tear
-- down.  A namespace someone else made with mlplat's labels names none (issue 18, finding 5).
CREATE FUNCTION mlplat._project_orphans_known(p_names text[], p_ids text[])
RETURNS SETOF int
LANGUAGE sql STABLE
AS $$
  SELECT c.ord::int
    FROM unnest(p_names, p_ids) WITH ORDINALITY AS c(name, id, ord)
    JOIN mlplat.projects p ON c.id ~ '^[0-9]{1,18}$' AND p.id = c.id::bigint
   WHERE p.name = c.name AND p.status = 'DELETED'
$$;
REVOKE ALL ON FUNCTION mlplat._project_orphans_known(text[], text[]) FROM PUBLIC;
