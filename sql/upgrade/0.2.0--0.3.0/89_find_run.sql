-- 0.2.0 -> 0.3.0: one lookup of a run by name (cancel_run, retry_run and render_workflow,
-- redefined in parts 95, 30 and 11, call it instead of repeating its refusal).

CREATE FUNCTION mlplat._find_run(p_project_id bigint, p_run text)
RETURNS mlplat.runs LANGUAGE plpgsql STABLE AS $$
DECLARE
  u mlplat.runs;
BEGIN
  SELECT * INTO u FROM mlplat.runs x WHERE x.project_id = p_project_id AND x.name = p_run;
  IF u.id IS NULL THEN
    PERFORM mlplat._no_such('run', p_run, 'See mlplat.run_status for the project''s runs.');
  END IF;
  RETURN u;
END $$;
REVOKE ALL ON FUNCTION mlplat._find_run(bigint, text) FROM PUBLIC;
