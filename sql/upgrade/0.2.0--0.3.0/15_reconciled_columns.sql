-- 0.2.0 -> 0.3.0, part 15: the bookkeeping columns of every reconciled entity written once
-- (issue 19), as in sql/install/10_api_tables.sql.  The tables of 0.2.0 keep the columns they
-- have (the same names, types, NOT NULL and defaults); only the template is new.
CREATE TABLE mlplat._reconciled_columns (
  row_version     bigint NOT NULL DEFAULT 1,
  next_attempt_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  attempts        int NOT NULL DEFAULT 0,
  last_error      text,
  traceparent     text,
  observed        jsonb,
  observed_at     timestamptz,
  epoch           bigint,
  created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
