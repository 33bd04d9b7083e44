-- 0.2.0 -> 0.3.0, part 85: mlplat.pass_memory_limit bounds the pass's own memory, not the
-- worker's; the test hook that shows it (issue 18, finding 12).
CREATE FUNCTION mlplat._pass_memory_selftest(ballast_mb int)
RETURNS void
LANGUAGE C VOLATILE STRICT
AS 'MODULE_PATHNAME', 'mlplat_pass_memory_selftest';
COMMENT ON FUNCTION mlplat._pass_memory_selftest(int) IS
  'Test hook: in a background worker holding ballast_mb MB outside its pass, LIST every InferenceService as a pass does (bounded by mlplat.pass_memory_limit); NOTIFY mlplat_pass_memory_selftest with the result.';
REVOKE EXECUTE ON FUNCTION mlplat._pass_memory_selftest(int) FROM PUBLIC;
