-- 0.2.0 -> 0.3.0, part 00: the delta parts that follow this one each carry one
-- topic's changes (the schema and every function it redefines), in the order
-- their numbers give.  A part must leave a 0.2.0 database exactly as a fresh
-- 0.3.0 install leaves it for that topic: test/upgrade/run.sh compares both.
SELECT 1 WHERE false;
