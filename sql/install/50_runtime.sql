-- 50_runtime: state the reconciler workers keep in tables.
--
-- Leadership itself is a session advisory lock (see src/worker/worker.c); the
-- table only records each acquisition, so every write a leader makes can be
-- stamped with, and fenced by, the epoch it led under.

CREATE TABLE mlplat.leader_epochs (
    kind        text PRIMARY KEY,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.leader_epochs IS
  'Current leader epoch per reconciler kind; bumped each time a replica takes the leader lock.';

CREATE TABLE mlplat.leader_history (
    kind        text NOT NULL,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (kind, epoch)
);

-- Called by a worker right after it took the kind's advisory lock.
CREATE FUNCTION mlplat._take_leadership(p_kind text, p_pid int, p_replica int)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
    v_epoch bigint;
    v_host  text := coalesce(pg_catalog.inet_server_addr()::text, pg_catalog.current_setting('cluster_name'), '')
                    || ':' || pg_catalog.current_setting('port');
BEGIN
    INSERT INTO mlplat.leader_epochs AS e (kind, epoch, pid, replica, host)
    VALUES (p_kind, 1, p_pid, p_replica, v_host)
    ON CONFLICT (kind) DO UPDATE
       SET epoch = e.epoch + 1, pid = EXCLUDED.pid, replica = EXCLUDED.replica,
           host = EXCLUDED.host, acquired_at = pg_catalog.now()
    RETURNING epoch INTO v_epoch;
    INSERT INTO mlplat.leader_history (kind, epoch, pid, replica, host)
    VALUES (p_kind, v_epoch, p_pid, p_replica, v_host);
    RETURN v_epoch;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._take_leadership(text, int, int) FROM PUBLIC;
