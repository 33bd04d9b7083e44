-- The extension is loaded by pg_regress (--load-extension); check it matches the library.
SELECT extension_version = library_version AS versions_agree FROM mlplat.version();
SELECT count(*) > 0 AS has_settings FROM pg_settings WHERE name LIKE 'mlplat.%';
-- settings are reserved: a typo is an error, not a silently ignored placeholder
SET mlplat.no_such_setting = 1;
-- traceparent is validated when set
SET mlplat.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
SET mlplat.traceparent = '00-00000000000000000000000000000000-b7ad6b7169203331-01';
SET mlplat.traceparent = 'not-a-traceparent';
SHOW mlplat.traceparent;
RESET mlplat.traceparent;
