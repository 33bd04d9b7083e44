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

-- the intents: desired data (a JSON object of strings), and its removal.  As every intent
-- call (docs/reconcilers.md "Adding a kind", step 2): they answer mlplat.accepted, open with
-- the API call (an echo belongs to no project: a platform call, administrators only), claim
-- the idempotency key and answer through _api_accept (audit, idempotency record, the wake);
-- SECURITY DEFINER and the pinned search_path come from mlplat._entry_points() at the end of
-- this script, the rule sql/install/99_entry_points.sql applies to mlplat's own calls.
CREATE FUNCTION mlplat.put_echo(p_namespace text, p_name text, p_data jsonb, p_idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_platform('put_echo');
  r mlplat.accepted;
  e mlplat.echoes;
BEGIN
  IF pg_catalog.jsonb_typeof(p_data) IS DISTINCT FROM 'object' OR EXISTS (
       SELECT 1 FROM pg_catalog.jsonb_each(p_data) x WHERE pg_catalog.jsonb_typeof(x.value) <> 'string') THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'mlplat: echo data must be an object of strings';
  END IF;
  r := mlplat._api_claim(api, pg_catalog.jsonb_build_object('namespace', p_namespace, 'name', p_name, 'data', p_data));
  IF r IS NOT NULL THEN
    RETURN r;
  END IF;
  INSERT INTO mlplat.echoes AS x (namespace, name, data, traceparent) VALUES (p_namespace, p_name, p_data, api.tp)
  ON CONFLICT (namespace, name) DO UPDATE
     SET data = EXCLUDED.data, status = 'PENDING', status_reason = NULL, generation = x.generation + 1,
         row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(),
         traceparent = EXCLUDED.traceparent, updated_at = pg_catalog.now()
  RETURNING * INTO e;
  r := (pg_catalog.gen_random_uuid(), 'echo', e.id, e.generation, e.status, false)::mlplat.accepted;
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('namespace', p_namespace, 'name', p_name), 'echoes');
END $$;

CREATE FUNCTION mlplat.delete_echo(p_namespace text, p_name text, p_idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_platform('delete_echo');
  r mlplat.accepted := mlplat._api_claim(api, pg_catalog.jsonb_build_object('namespace', p_namespace, 'name', p_name));
  e mlplat.echoes;
BEGIN
  IF r IS NOT NULL THEN
    RETURN r;
  END IF;
  UPDATE mlplat.echoes x
     SET status = 'DELETING', status_reason = NULL, generation = x.generation + 1,
         row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(),
         traceparent = api.tp, updated_at = pg_catalog.now()
   WHERE x.namespace = p_namespace AND x.name = p_name AND x.status NOT IN ('DELETING', 'DELETED')
  RETURNING * INTO e;
  IF e.id IS NULL THEN   -- deleting or deleted already: the answer, without an audit row or a wake
    SELECT * INTO e FROM mlplat.echoes x WHERE x.namespace = p_namespace AND x.name = p_name;
    IF e.id IS NULL THEN
      PERFORM mlplat._no_such('echo', p_namespace || '/' || p_name, 'See mlplat.echoes.');
    END IF;
    RETURN mlplat._api_keep(api, (pg_catalog.gen_random_uuid(), 'echo', e.id, e.generation, e.status, false)::mlplat.accepted);
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'echo', e.id, e.generation, e.status, false)::mlplat.accepted;
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('namespace', p_namespace, 'name', p_name), 'echoes');
END $$;

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
RETURNS SETOF mlplat.echo_claim LANGUAGE sql STABLE AS $$
  SELECT e.id, e.namespace, e.name, e.data::text, e.status,
         e.generation, e.observed_generation, e.row_version,
         e.attempts, e.next_attempt_at <= pg_catalog.now(), e.traceparent
    FROM mlplat.echoes e
   WHERE e.status <> 'DELETED'
   ORDER BY e.id
$$;

-- the pass's write-back in one statement: compare-and-swap on row_version and the epoch
CREATE FUNCTION mlplat._echoes_writeback_set(p_epoch bigint, p_rows mlplat.echo_writeback[])
RETURNS SETOF bigint LANGUAGE sql AS $$
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

-- the intent calls' rule (SECURITY DEFINER, the pinned search_path), as for mlplat's own
SELECT mlplat._entry_points();
