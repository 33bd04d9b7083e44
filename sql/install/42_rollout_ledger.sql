-- 42_rollout_ledger: the rollouts reconciler's state on the rollout row and its
-- transition ledger (before 45/50 so the views and alerts can read them; the
-- reconciler's functions are in 72_reconcile_rollouts).

ALTER TABLE mlplat.rollouts
  ADD COLUMN contract        jsonb,         -- frozen at the first claim; its content_id binds every decision
  ADD COLUMN applied_percent int,           -- canaryTrafficPercent last applied (-1: removed for promotion)
  ADD COLUMN window_start    timestamptz,   -- when the observed traffic first matched the current fraction
  ADD COLUMN decide_at       numeric;       -- epoch seconds (millisecond precision) from which the next decision is due

-- The transition ledger: append-only, one row per transition the controller took.
-- A decision is keyed by the content id of the evidence it was made on, so replaying
-- the same evidence (a retried pass, a new leader) cannot record or apply it twice.
CREATE TABLE mlplat.rollout_transitions (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rollout_id          bigint NOT NULL REFERENCES mlplat.rollouts (id),
  project_id          bigint NOT NULL REFERENCES mlplat.projects (id),
  seq                 int NOT NULL,
  decision            text NOT NULL CHECK (decision IN ('ADVANCE', 'HOLD', 'ROLLBACK', 'ROUTE_RESTORED', 'PROMOTED')),
  reasons             text[] NOT NULL,
  from_status         text NOT NULL,
  to_status           text NOT NULL,
  from_fraction       numeric NOT NULL,
  to_fraction         numeric NOT NULL,
  contract_content_id text NOT NULL,
  contract            jsonb NOT NULL,
  evidence_content_id text NOT NULL,
  evidence            jsonb NOT NULL,     -- plan_rollout's evidence, or the observed route for ROUTE_RESTORED/PROMOTED
  plan                jsonb,              -- plan_rollout's output (decisions only)
  observation         jsonb NOT NULL,     -- what else the controller saw: revision names, traffic, metric gaps
  epoch               bigint NOT NULL,
  controller          text NOT NULL,
  at                  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  UNIQUE (rollout_id, evidence_content_id),
  UNIQUE (rollout_id, seq)
);
SELECT mlplat._append_only('rollout_transitions');
COMMENT ON TABLE mlplat.rollout_transitions IS
  'Append-only transition ledger of canary rollouts: contract, evidence, decision, controller and resulting state.';
SELECT mlplat._member_reads('rollout_transitions');
GRANT SELECT ON mlplat.rollout_transitions TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.rollout_transitions', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('mlplat.rollout_transitions', 'id')::regclass, '');
