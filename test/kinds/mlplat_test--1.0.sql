-- mlplat_test 1.0: the SQL of the test kind "echoes" (test/kinds/README.md), written by
-- docs/reconcilers.md "Adding a kind".  An echo is a ConfigMap <name> in <namespace> whose
-- data is the row's; the reconciler (test/kinds/echoes.c) creates it, repairs it when it
-- drifts, and deletes it.  Never part of a release: the test build installs it, and
-- test/e2e/echoes.sh creates and drops it.
\echo Use "CREATE EXTENSION mlplat_test" to load this file. \quit

-- the entity, with the reconciler columns every kind has
CREATE TABLE mlplat.echoes (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  namespace           text NOT NULL CHECK (namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  name                text NOT NULL CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  data                jsonb NOT NULL,
  status              text NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'SYNCED', 'FAILED', 'DELETING', 'DELETED')),
  status_reason       text,
  generation          bigint NOT NULL DEFAULT 1,
  observed_generation bigint NOT NULL DEFAULT 0,
  LIKE mlplat._reconciled_columns INCLUDING DEFAULTS,   -- row_version .. updated_at
  UNIQUE (namespace, name)
);

-- the intents: desired data (a JSON object of strings), and its removal
CREATE FUNCTION mlplat.put_echo(p_namespace text, p_name text, p_data jsonb)
RETURNS mlplat.echoes LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  r mlplat.echoes;
BEGIN
  IF pg_catalog.jsonb_typeof(p_data) IS DISTINCT FROM 'object' OR EXISTS (
       SELECT 1 FROM pg_catalog.jsonb_each(p_data) e WHERE pg_catalog.jsonb_typeof(e.value) <> 'string') THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'mlplat: echo data must be an object of strings';
  END IF;
  INSERT INTO mlplat.echoes AS e (namespace, name, data) VALUES (p_namespace, p_name, p_data)
  ON CONFLICT (namespace, name) DO UPDATE
     SET data = EXCLUDED.data, status = 'PENDING', status_reason = NULL, generation = e.generation + 1,
         row_version = e.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(),
         updated_at = pg_catalog.now()
  RETURNING * INTO r;
  PERFORM mlplat._wake_on_commit('echoes');
  RETURN r;
END $$;

CREATE FUNCTION mlplat.delete_echo(p_namespace text, p_name text)
RETURNS mlplat.echoes LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  r mlplat.echoes;
BEGIN
  UPDATE mlplat.echoes e
     SET status = 'DELETING', status_reason = NULL, generation = e.generation + 1,
         row_version = e.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(),
         updated_at = pg_catalog.now()
   WHERE e.namespace = p_namespace AND e.name = p_name AND e.status NOT IN ('DELETING', 'DELETED')
  RETURNING * INTO r;
  PERFORM mlplat._wake_on_commit('echoes');
  RETURN r;
END $$;
REVOKE ALL ON FUNCTION mlplat.put_echo(text, text, jsonb), mlplat.delete_echo(text, text) FROM PUBLIC;

-- the seam (seam.h): a claim row, and a write-back row (the status write-back every
-- status-and-observation kind shares: MlplatStatusWriteback)
CREATE TYPE mlplat.echo_claim AS (
  id bigint, namespace text, name text, data text, status text /* STATUS echo */,
  generation bigint, observed_generation bigint, row_version bigint,
  attempts int, due boolean, traceparent text);

-- retry_ms: NULL = no retry scheduled (attempts reset); otherwise attempts + 1 and
-- next_attempt_at = now() + retry_ms.  NULL observed_generation / observed keep the stored ones.
CREATE TYPE mlplat.echo_writeback AS (
  id bigint, row_version bigint, status text /* STATUS echo */, reason text,
  observed_generation bigint /* NULL<0 */, observed jsonb, error text, retry_ms int /* NULL<0 */);

-- every live echo: a pass compares each with what it observed, so drift is repaired
-- whether or not the row is due
CREATE FUNCTION mlplat._echoes_claim()
RETURNS SETOF mlplat.echo_claim LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT e.id, e.namespace, e.name, e.data::text, e.status,
         e.generation, e.observed_generation, e.row_version,
         e.attempts, e.next_attempt_at <= pg_catalog.now(), e.traceparent
    FROM mlplat.echoes e
   WHERE e.status <> 'DELETED'
   ORDER BY e.id
$$;

-- the pass's write-back in one statement: compare-and-swap on row_version and the epoch
CREATE FUNCTION mlplat._echoes_writeback_set(p_epoch bigint, p_rows mlplat.echo_writeback[])
RETURNS SETOF bigint LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT u.id FROM mlplat._status_writeback_set('echoes', p_epoch, p_rows) u
$$;
REVOKE ALL ON FUNCTION mlplat._echoes_claim(), mlplat._echoes_writeback_set(bigint, mlplat.echo_writeback[])
  FROM PUBLIC;

-- the state machine (test/kinds/README.md draws it): put_echo creates PENDING and makes
-- any live echo PENDING again; the reconciler makes it SYNCED (or FAILED, retried);
-- delete_echo starts DELETING, which only the reconciler ends, once the ConfigMap is gone
SELECT mlplat._transitions_function('echo', $$
  [*] --> PENDING
  PENDING --> SYNCED
  PENDING --> FAILED
  PENDING --> DELETING
  SYNCED --> PENDING
  SYNCED --> FAILED
  SYNCED --> DELETING
  FAILED --> PENDING
  FAILED --> SYNCED
  FAILED --> DELETING
  DELETING --> DELETED
  DELETED --> PENDING
$$);
SELECT mlplat._state_machine('echoes', '_echo_transitions');
