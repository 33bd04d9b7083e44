--
-- Canonical JSON (RFC 8785) and content ids.
--
-- RFC 8785 §3.2.2.3 numbers: shortest round-trip, ECMAScript spelling
SELECT mlplat.canonical_json('[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]');
-- integers stay integers, 1.0 becomes 1, -0 becomes 0, 1e21 switches to exponent form
SELECT mlplat.canonical_json('[1.0, -0, -0.0, 1e20, 1e21, 0.1, 1e-6, 1e-7, 100, 12.50e1, 9007199254740993]');
-- numbers read from jsonb's storage (integer and fraction digit groups, display scale,
-- 15 and 16 digits): the same text as ECMAScript's JSON.stringify
SELECT mlplat.canonical_json('[0.0001, 12.3400, 10000.5, 123456789.0001, -0.000012, 0.00000000001, 99999999999999.9999, 999999999999999, -999999999999999, 1000000000000000, 1234567890123456, 10000, 100000000, -10000.00, 0.5000, 5e-5, 123.456e3, -1234567.891, 1e15, 1e16, 0.1234567890123456789]');
-- RFC 8785 §3.2.2.2 strings: only " \ and control characters are escaped, lower-case hex
SELECT mlplat.canonical_json(E'{"string": "\\u20ac$\\u000F\\u000aA''\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}');
-- RFC 8785 §3.2.3 key order: UTF-16 code units, so the emoji (D83D) sorts before U+FB33
SELECT mlplat.canonical_json('{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}');
-- nesting, whitespace, empty containers
SELECT mlplat.canonical_json('{ "b" : [ 1 , { "z" : {}, "y" : [] } ], "a" : null }');
SELECT mlplat.canonical_json('"just a string"'), mlplat.canonical_json('true'), mlplat.canonical_json('[]');

-- content id = SHA-256 of the canonical bytes, lower-case hex
SELECT mlplat.content_id('{}');
SELECT mlplat.content_id('{"b": 1.0, "a": [1e2]}') = mlplat.content_id('{"a":[100],"b":1}') AS same_meaning_same_id;
SELECT mlplat.content_id('{"a":[100],"b":1}') <> mlplat.content_id('{"a":[100],"b":2}') AS different_content_different_id;
SELECT mlplat.content_id(d) = encode(sha256(convert_to(mlplat.canonical_json(d), 'UTF8')), 'hex') AS id_is_sha256_of_canonical
FROM (VALUES ('{"model":"m","version":3,"digest":"sha256:ab"}'::jsonb), ('[1,2.5,"x"]')) v(d);
-- stable: pinned so any change to the canonical form is noticed
SELECT mlplat.content_id('{"scope":{"project":"p1","deployment":"d1"},"policy":{"steps":[0.1,0.5,1.0],"ceiling":1}}');
-- a self-describing record verifies against its own id
WITH r AS (SELECT '{"decision":"ADVANCE","next_fraction":0.5}'::jsonb AS body)
SELECT mlplat.content_id(body || jsonb_build_object('content_id', mlplat.content_id(body)), 'content_id')
       = mlplat.content_id(body) AS record_verifies
FROM r;
-- only the top-level member is excluded
SELECT mlplat.content_id('{"a":{"content_id":1}}', 'content_id') = mlplat.content_id('{"a":{}}') AS nested_not_excluded;

-- what JSON cannot carry is refused with a clear error
SELECT mlplat.canonical_json('[1, 1e400]');
SELECT mlplat.content_id(('{"a":' || repeat('[', 300) || repeat(']', 300) || '}')::jsonb);
SELECT mlplat.canonical_json(NULL) IS NULL AS strict;

-- name validators
SELECT name, mlplat.is_dns_label(name) AS label, mlplat.is_dns_label(name, 5) AS label_max5
FROM (VALUES ('abc'), ('a-b-1'), ('abcdef'), ('-abc'), ('abc-'), ('Abc'), ('a_b'), (''), ('a.b'), (repeat('a', 63)), (repeat('a', 64))) v(name);
SELECT mlplat.is_dns_label('abc', 0);
SELECT v, mlplat.is_traceparent(v)
FROM (VALUES ('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'),
             ('00-00000000000000000000000000000000-00f067aa0ba902b7-01'),
             ('00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'),
             ('00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'),
             ('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'),
             ('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-'),
             ('')) t(v);
