-- 54_reconcile_aliases: the model_aliases reconciler's tables and short transactions.
--
-- The registry (MLflow) knows a model as the registered model "<project>.<model>"
-- (MLflow names allow dots; project and model names are DNS labels, so the
-- mapping is one-to-one).  MLflow numbers versions itself, so which registry
-- version holds which mlplat version is recorded here, once, when the reconciler
-- creates (or finds) it.

CREATE TABLE mlplat.model_registry_versions (
  version_id        bigint PRIMARY KEY REFERENCES mlplat.model_versions (id),
  project_id        bigint NOT NULL REFERENCES mlplat.projects (id),
  registered_model  text NOT NULL,
  registry_version  text NOT NULL,
  epoch             bigint NOT NULL,
  recorded_at       timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.model_registry_versions IS
  'Which registry (MLflow) version number holds each mlplat model version.';

-- Every move of a registry alias mlplat made, including repairs of moves made
-- outside mlplat, which MLflow itself does not keep.
CREATE TABLE mlplat.model_alias_history (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id        bigint NOT NULL REFERENCES mlplat.projects (id),
  model_id          bigint NOT NULL REFERENCES mlplat.models (id),
  alias_id          bigint NOT NULL REFERENCES mlplat.model_aliases (id),
  registered_model  text NOT NULL,
  alias             text NOT NULL,
  action            text NOT NULL CHECK (action IN ('SET', 'DELETE', 'REPAIR')),
  requested_by      text,          -- the person whose intent this is (model_aliases.moved_by)
  version_id        bigint REFERENCES mlplat.model_versions (id),  -- NULL: the alias was deleted
  version           text,          -- mlplat's version label
  registry_version  text,          -- what the alias points at now (verified), NULL when deleted
  observed_version  text,          -- what the registry had before the move (NULL: no alias)
  observed_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  epoch             bigint NOT NULL,
  controller        text NOT NULL,
  trace_id          text
);
CREATE INDEX ON mlplat.model_alias_history (model_id, alias, observed_at);
SELECT mlplat._append_only('model_alias_history');
COMMENT ON TABLE mlplat.model_alias_history IS
  'Append-only: every registry alias move made by mlplat (SET, DELETE, REPAIR of an outside move).';

-- Read like the other project tables: members only, through RLS.
SELECT mlplat._member_reads('model_alias_history', 'model_registry_versions');
GRANT SELECT ON mlplat.model_alias_history, mlplat.model_registry_versions TO PUBLIC;
SELECT mlplat._config_dump('model_alias_history', 'model_registry_versions');

-- The seam (src/reconcile/seam.c): the claim returns mlplat.model_alias_claim rows, the
-- write-back takes an array of mlplat.model_alias_writeback; C reads and builds them by name.
CREATE TYPE mlplat.model_alias_claim AS (
  id bigint, project text, registered_model text, alias text,
  version_id bigint, version text, artifact_uri text, registry_version text,
  status text /* STATUS model_alias */, generation bigint, observed_generation bigint, row_version bigint,
  moved_by text, traceparent text, attempts int, due boolean);

-- retry_ms: NULL = no retry (attempts reset); otherwise attempts + 1 and
-- next_attempt_at = now() + retry_ms.  NULL observed_generation / observed keep the stored ones.
CREATE TYPE mlplat.model_alias_writeback AS (
  id bigint, row_version bigint, status text /* STATUS model_alias */, reason text,
  observed_generation bigint /* NULL<0 */, observed jsonb, error text, retry_ms int /* NULL<0 */);

CREATE FUNCTION mlplat._aliases_claim(p_resync boolean)
RETURNS SETOF mlplat.model_alias_claim
LANGUAGE sql STABLE
AS $$
  SELECT a.id, p.name, p.name || '.' || m.name, a.alias,
         a.version_id, mv.version, mv.artifact_uri, rv.registry_version,
         a.status, a.generation, a.observed_generation, a.row_version,
         a.moved_by, a.traceparent, a.attempts,
         a.next_attempt_at <= pg_catalog.now()
           AND (p_resync OR a.status <> 'SYNCED' OR a.generation <> a.observed_generation)
    FROM mlplat.model_aliases a
    JOIN mlplat.models m ON m.id = a.model_id
    JOIN mlplat.projects p ON p.id = a.project_id
    LEFT JOIN mlplat.model_versions mv ON mv.id = a.version_id
    LEFT JOIN mlplat.model_registry_versions rv ON rv.version_id = a.version_id
   WHERE p.status <> 'DELETED'
   ORDER BY a.id
$$;

-- The write-back of a pass in one statement: compare-and-swap on each row's row_version and
-- on the epoch.  Returns the ids written.
CREATE FUNCTION mlplat._aliases_writeback_set(p_epoch bigint, p_rows mlplat.model_alias_writeback[])
RETURNS SETOF bigint
LANGUAGE sql
AS $$
  SELECT u.id FROM mlplat._status_writeback_set('model_aliases', p_epoch, p_rows) u
$$;

-- Record (p_registry_version not NULL) or forget (NULL: the registry lost it)
-- which registry version holds an mlplat version.  Facts about the registry are
-- kept even when the alias write-back loses its compare-and-swap.
CREATE FUNCTION mlplat._aliases_map_version(p_version_id bigint, p_registered_model text,
                                            p_registry_version text, p_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT mlplat._epoch_current('model_aliases', p_epoch) THEN
        RETURN false;
    END IF;
    IF p_registry_version IS NULL THEN
        DELETE FROM mlplat.model_registry_versions WHERE version_id = p_version_id;
        RETURN true;
    END IF;
    INSERT INTO mlplat.model_registry_versions (version_id, project_id, registered_model, registry_version, epoch)
    SELECT mv.id, mv.project_id, p_registered_model, p_registry_version, p_epoch
      FROM mlplat.model_versions mv WHERE mv.id = p_version_id
    ON CONFLICT (version_id) DO UPDATE
      SET registered_model = excluded.registered_model, registry_version = excluded.registry_version,
          epoch = excluded.epoch, recorded_at = pg_catalog.now();
    RETURN true;
END;
$$;

-- Values are those the move was made for (as claimed), so a move whose
-- write-back then lost its compare-and-swap is still recorded truthfully.  The epoch fences
-- the INSERT itself, as in every kind's write-back: a deposed leader records nothing.
CREATE FUNCTION mlplat._aliases_history(p_alias_id bigint, p_action text, p_version_id bigint,
                                        p_requested_by text, p_registry_version text,
                                        p_observed_version text, p_epoch bigint, p_controller text,
                                        p_trace_id text)
RETURNS boolean
LANGUAGE sql
AS $$
  WITH recorded AS (
    INSERT INTO mlplat.model_alias_history (project_id, model_id, alias_id, registered_model, alias, action,
                                            requested_by, version_id, version, registry_version,
                                            observed_version, epoch, controller, trace_id)
    SELECT a.project_id, a.model_id, a.id, p.name || '.' || m.name, a.alias, p_action,
           p_requested_by, p_version_id, mv.version, p_registry_version,
           p_observed_version, p_epoch, p_controller, p_trace_id
      FROM mlplat.model_aliases a
      JOIN mlplat.models m ON m.id = a.model_id
      JOIN mlplat.projects p ON p.id = a.project_id
      LEFT JOIN mlplat.model_versions mv ON mv.id = p_version_id
     WHERE a.id = p_alias_id AND mlplat._epoch_current('model_aliases', p_epoch)
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM recorded)
$$;

REVOKE ALL ON FUNCTION mlplat._aliases_claim(boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_writeback_set(bigint, mlplat.model_alias_writeback[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_map_version(bigint, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_history(bigint, text, bigint, text, text, text, bigint, text, text) FROM PUBLIC;
