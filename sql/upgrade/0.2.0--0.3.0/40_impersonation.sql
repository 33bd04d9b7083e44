-- 0.2.0 -> 0.3.0, part 40: impersonation never reaches an administrator, and an
-- impersonator can be limited to a set of projects (issue 18, finding 4).
ALTER TABLE mlplat.impersonators ADD COLUMN projects text[];
COMMENT ON COLUMN mlplat.impersonators.projects IS
  'Projects (names) the role may act in on behalf of a person; NULL: every project. Administrators are never impersonated.';

CREATE OR REPLACE FUNCTION mlplat._actor() RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  obo text := coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '');
  r text;
BEGIN
  IF obo = '' THEN
    RETURN mlplat._db_role();
  END IF;
  r := mlplat._db_role();
  IF NOT mlplat._is_superuser(r)
     AND NOT EXISTS (SELECT 1 FROM mlplat.impersonators i WHERE i.app_role = r) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('role "%s" may not act on behalf of another person', r),
      DETAIL = 'mlplat.on_behalf_of is set but the role holds no impersonation right.',
      HINT = 'An administrator must add the role to mlplat.impersonators, or RESET mlplat.on_behalf_of.';
  END IF;
  IF pg_catalog.length(obo) > 63 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'mlplat.on_behalf_of is too long',
      DETAIL = 'A principal name has at most 63 characters.', HINT = 'Use the person''s principal name.';
  END IF;
  -- grant_role never accepts such a principal, and echoing one in a denial would let the
  -- caller write forged lines into the server log
  IF obo ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'mlplat.on_behalf_of contains a control character',
      DETAIL = 'A principal name has 1 to 63 printable characters.', HINT = 'Use the person''s principal name.';
  END IF;
  -- acting for an administrator would make the application role one (create_project,
  -- every project): administrators act as themselves, never through an impersonator
  IF EXISTS (SELECT 1 FROM mlplat.admins a WHERE a.principal = obo) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('role "%s" may not act on behalf of an administrator', r),
      DETAIL = 'mlplat.on_behalf_of names a principal in mlplat.admins; administrators are never impersonated.',
      HINT = 'Administrators call the API as themselves, without mlplat.on_behalf_of.';
  END IF;
  RETURN obo;
END $$;

CREATE OR REPLACE FUNCTION mlplat._impersonation_allows(p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope text[];
BEGIN
  IF coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '') = '' THEN
    RETURN true;
  END IF;
  SELECT i.projects INTO scope FROM mlplat.impersonators i WHERE i.app_role = mlplat._db_role();
  RETURN scope IS NULL OR p_project = ANY (scope);
END $$;

CREATE OR REPLACE FUNCTION mlplat._authorize(p_action text, p_project text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  pid bigint;
  allowed boolean;
  who text := mlplat._actor();
BEGIN
  SELECT p.id, EXISTS (SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
                        WHERE m.project_id = p.id AND m.principal = who AND po.action = p_action)
  INTO pid, allowed
  FROM mlplat.projects p WHERE p.name = p_project;
  IF pid IS NOT NULL AND (allowed OR mlplat._is_admin()) AND mlplat._impersonation_allows(p_project) THEN
    RETURN pid;
  END IF;
  IF pid IS NULL AND mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('project "%s" does not exist', p_project),
      HINT = 'Create it with mlplat.create_project().';
  END IF;
  IF pid IS NOT NULL AND (allowed OR mlplat._is_admin()) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('permission denied: %s on project "%s"', p_action, p_project),
      DETAIL = pg_catalog.format('Role "%s" may act on behalf of people only in the projects mlplat.impersonators lists for it.',
                                 mlplat._db_role()),
      HINT = 'An administrator must add the project to the role''s mlplat.impersonators.projects.';
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42501',
    MESSAGE = pg_catalog.format('permission denied: %s on project "%s"', p_action, p_project),
    DETAIL = pg_catalog.format('Principal "%s" holds no role in the project whose policy allows %s.', who, p_action),
    HINT = 'Ask a project owner to grant a role that allows this action.';
END $$;

CREATE OR REPLACE FUNCTION mlplat._can_view(p_project_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  RETURN (EXISTS (
    SELECT 1 FROM mlplat.members m JOIN mlplat.policies po ON po.role = m.role
    WHERE m.project_id = p_project_id AND m.principal = mlplat._actor() AND po.action = 'view') OR mlplat._is_admin())
    AND (coalesce(pg_catalog.current_setting('mlplat.on_behalf_of', true), '') = ''
         OR mlplat._impersonation_allows((SELECT p.name FROM mlplat.projects p WHERE p.id = p_project_id)));
END $$;

REVOKE ALL ON FUNCTION mlplat._impersonation_allows(text) FROM PUBLIC;
