-- 0.2.0 -> 0.3.0, part 98: what the reconcile kinds wrote twice, written once (issue 19).
--
-- The one-row write-backs of projects and model aliases go: each was the set write-back
-- (_projects_writeback_set, _aliases_writeback_set) of a one-element array, and neither the
-- workers nor the tests called them.  Whoever stands in for a reconciler calls the set
-- function with ARRAY[ROW(...)::mlplat.project_writeback] (or model_alias_writeback).
DROP FUNCTION mlplat._projects_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int);
DROP FUNCTION mlplat._aliases_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int);
