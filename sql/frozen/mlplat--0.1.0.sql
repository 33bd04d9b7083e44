-- mlplat 0.1.0 (frozen: the first release's install script; do not edit)
\echo Use "CREATE EXTENSION mlplat" to load this file. \quit

-- 00_foundation: what every release has had since 0.1.0.
-- Later parts must not change these objects without an upgrade step.

COMMENT ON SCHEMA mlplat IS 'mlplat: ML platform control plane (intent, audit, reconcilers)';

CREATE FUNCTION mlplat.version(OUT extension_version text, OUT library_version text)
RETURNS record
LANGUAGE C STRICT VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_version';
COMMENT ON FUNCTION mlplat.version() IS
  'Installed extension version and loaded library version; an error with a hint when they differ.';

REVOKE ALL ON SCHEMA mlplat FROM PUBLIC;
GRANT USAGE ON SCHEMA mlplat TO PUBLIC;
