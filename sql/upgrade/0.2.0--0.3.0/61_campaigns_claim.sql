-- 0.2.0 -> 0.3.0: the database half of the campaigns reconciler (issue 14): admission, claim,
-- write-back, cleanup (the same text as sql/install/76_reconcile_campaigns.sql).
-- project_status, which counts builder GPUs, has its one definition in this upgrade in part
-- 65_lab: it reads the campaign tables of part 60 and the lab tables of part 65.

-- 76_reconcile_campaigns: the database half of the campaigns reconciler (issue 14,
-- docs/campaigns.md "Admission and spend").
--
-- _campaigns_claim admits PLANNED candidates in one short transaction, before anything is
-- sent: approval present and unexpired, ordinal order, max_parallel, the approval window, the
-- hard spend limit and the project's GPU quota (under the project lock deploy() takes).  It
-- marks what can never run NOT_RUN, and returns the candidates a pass must act on.
-- _campaigns_writeback records what a pass observed, with a compare-and-swap on row_version
-- and the leader's epoch: a stale worker changes nothing.  The claim and the write-back have
-- the typed seam of every kind (docs/reconcilers.md "Adding a kind"): the claim returns
-- mlplat.campaign_claim rows, _campaigns_writeback_set takes an array of
-- mlplat.campaign_writeback.  The worker is src/reconcile/campaigns.c.

-- Committed spend of a campaign: actual GPU-seconds of finished candidates plus the whole
-- reservation of running ones (a running build may use all of it).
CREATE FUNCTION mlplat._campaign_committed_spend(p_campaign_id bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce(pg_catalog.sum(CASE WHEN mlplat.candidate_is_building(k.status) THEN k.reserved_gpu_seconds
                                      ELSE coalesce(k.actual_gpu_seconds, 0) END), 0)::bigint
    FROM mlplat.campaign_candidates k
   WHERE k.campaign_id = p_campaign_id AND k.status <> 'PLANNED'
$$;

-- One reconciler transition of a candidate (CAS on row_version), with its transitions row.
CREATE FUNCTION mlplat._candidate_move(k mlplat.campaign_candidates, p_to text, p_reason text, p_status_reason text,
                                       p_epoch bigint, p_controller text, p_observation jsonb DEFAULT '{}')
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE mlplat.campaign_candidates x
     SET status = p_to, reason_code = p_reason, status_reason = p_status_reason,
         job_name = CASE WHEN p_to = 'BUILDING' THEN 'opt-' || (SELECT c.name FROM mlplat.campaigns c WHERE c.id = k.campaign_id)
                                                     || '-' || k.ordinal ELSE x.job_name END,
         claimed_at = CASE WHEN p_to = 'BUILDING' THEN pg_catalog.now() ELSE x.claimed_at END,
         finished_at = CASE WHEN mlplat.candidate_is_finished(p_to) THEN pg_catalog.now() ELSE x.finished_at END,
         actual_gpu_seconds = CASE WHEN p_to = 'NOT_RUN' THEN 0 ELSE x.actual_gpu_seconds END,
         epoch = p_epoch, row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(),
         updated_at = pg_catalog.now()
   WHERE x.id = k.id AND x.row_version = k.row_version AND x.status = k.status;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM mlplat._candidate_transition(k, p_to, p_reason, p_observation, NULL, p_epoch, p_controller);
  RETURN true;
END $$;

-- Admission (docs/campaigns.md): returns the number of candidates moved.
CREATE FUNCTION mlplat._campaigns_admit(p_epoch bigint, p_controller text) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
  c record;
  k mlplat.campaign_candidates;
  p mlplat.projects;
  active int;
  committed bigint;
  used bigint;
  moved int := 0;
  why text;
BEGIN
  FOR c IN SELECT x.id, x.name, x.project_id, x.max_parallel, a.max_spend_gpu_seconds, a.expires_at
             FROM mlplat.campaigns x JOIN mlplat.campaign_approvals a ON a.campaign_id = x.id
            WHERE x.cancel_requested_at IS NULL
              AND x.id IN (SELECT DISTINCT k2.campaign_id FROM mlplat.campaign_candidates k2 WHERE k2.status = 'PLANNED')
            ORDER BY x.id LOOP
    -- serialized with approve_campaign and cancel_campaign on the campaign row
    PERFORM 1 FROM mlplat.campaigns x WHERE x.id = c.id AND x.cancel_requested_at IS NULL FOR NO KEY UPDATE;
    CONTINUE WHEN NOT FOUND;
    IF c.expires_at <= pg_catalog.now() THEN
      FOR k IN SELECT * FROM mlplat.campaign_candidates x WHERE x.campaign_id = c.id AND x.status = 'PLANNED' ORDER BY x.ordinal LOOP
        IF mlplat._candidate_move(k, 'NOT_RUN', 'APPROVAL_EXPIRED',
             pg_catalog.format('the approval expired at %s', c.expires_at), p_epoch, p_controller) THEN
          moved := moved + 1;
        END IF;
      END LOOP;
      CONTINUE;
    END IF;
    LOOP
      -- the lowest PLANNED ordinal: every lower one has been decided
      SELECT * INTO k FROM mlplat.campaign_candidates x WHERE x.campaign_id = c.id AND x.status = 'PLANNED'
       ORDER BY x.ordinal LIMIT 1 FOR NO KEY UPDATE;
      EXIT WHEN NOT FOUND;
      SELECT pg_catalog.count(*) INTO active FROM mlplat.campaign_candidates x
       WHERE x.campaign_id = c.id AND mlplat.candidate_is_building(x.status);
      EXIT WHEN active >= c.max_parallel;
      IF pg_catalog.now() + pg_catalog.make_interval(secs => (k.plan->>'max_seconds')::int) > c.expires_at THEN
        IF mlplat._candidate_move(k, 'NOT_RUN', 'APPROVAL_WINDOW_TOO_SHORT',
             pg_catalog.format('max_seconds %s would end after the approval expires at %s', k.plan->>'max_seconds', c.expires_at),
             p_epoch, p_controller) THEN
          moved := moved + 1;
        END IF;
        CONTINUE;
      END IF;
      committed := mlplat._campaign_committed_spend(c.id);
      IF committed + k.reserved_gpu_seconds > c.max_spend_gpu_seconds THEN
        IF active > 0 THEN
          -- something still runs and may finish under its reservation: wait for it
          why := pg_catalog.format('waiting for spend: %s GPU-seconds committed of %s, %s reserved for this build',
                                   committed, c.max_spend_gpu_seconds, k.reserved_gpu_seconds);
          UPDATE mlplat.campaign_candidates x SET status_reason = why
           WHERE x.id = k.id AND x.status_reason IS DISTINCT FROM why;
          EXIT;
        END IF;
        IF mlplat._candidate_move(k, 'NOT_RUN', 'SPEND_EXHAUSTED',
             pg_catalog.format('%s GPU-seconds committed of %s: %s more do not fit', committed, c.max_spend_gpu_seconds,
                               k.reserved_gpu_seconds), p_epoch, p_controller) THEN
          moved := moved + 1;
        END IF;
        CONTINUE;
      END IF;
      -- the GPU quota, under the same project lock as deploy(): waits, never fails
      p := mlplat._lock_project_row(k.project_id, 'reserve', 'campaigns');
      IF mlplat.project_is_deleting(p.status) THEN
        why := pg_catalog.format('waiting: project is %s', p.status);
      ELSE
        used := mlplat._gpus_in_use(k.project_id);
        why := CASE WHEN used + k.gpus > p.gpu_quota THEN
                 pg_catalog.format('waiting for GPU quota: %s requested, %s of %s in use', k.gpus, used, p.gpu_quota) END;
      END IF;
      IF why IS NOT NULL THEN
        UPDATE mlplat.campaign_candidates x SET status_reason = why
         WHERE x.id = k.id AND x.status_reason IS DISTINCT FROM why;
        EXIT;
      END IF;
      IF mlplat._candidate_move(k, 'BUILDING', NULL, 'admitted: the builder Job is to be created', p_epoch, p_controller,
           pg_catalog.jsonb_build_object('committed_gpu_seconds', committed, 'reserved_gpu_seconds', k.reserved_gpu_seconds,
                                         'max_spend_gpu_seconds', c.max_spend_gpu_seconds)) THEN
        moved := moved + 1;
      ELSE
        EXIT;
      END IF;
    END LOOP;
  END LOOP;
  RETURN moved;
END $$;

-- The claim of one pass: admission first (committed before any request is sent), then
-- every candidate a pass acts on, with the Job to create for the BUILDING ones.
CREATE TYPE mlplat.campaign_claim AS (
  id               bigint,
  project          text,
  namespace        text,
  campaign         text,
  candidate        text,
  ordinal          int,
  status           text,
  job_name         text,
  manifest         jsonb,        -- the Job (BUILDING, CANCEL_REQUESTED): render_builder_job
  row_version      bigint,
  claimed_at       timestamptz,
  expires_at       timestamptz,  -- of the approval: a build running past it is deleted
  cancel_requested boolean,
  output_uri       text,
  attestation_uri  text,
  cleanup          boolean,      -- terminal, with a Job name: delete the Job (and, unless BUILT, the outputs)
  traceparent      text,
  created          boolean,      -- a create of its Job was answered 201 (or adopted): absence is JOB_DISAPPEARED
  gpus             int,          -- of the plan: actual spend = gpus x seconds the Job ran
  expect           text,         -- JSON: the attestation fields that must equal the plan (docs/campaigns.md)
  attempts         int,          -- failed attempts since the last success (the backoff's exponent)
  due              boolean       -- next_attempt_at has passed: a request may be sent
);

CREATE FUNCTION mlplat._campaigns_claim(p_epoch bigint, p_controller text)
RETURNS SETOF mlplat.campaign_claim
LANGUAGE plpgsql
AS $$
BEGIN
  PERFORM mlplat._campaigns_admit(p_epoch, p_controller);
  RETURN QUERY
  SELECT k.id, p.name, mlplat._project_namespace(p.name), c.name, k.name, k.ordinal, k.status, k.job_name,
         CASE WHEN mlplat.candidate_is_building(k.status) THEN mlplat._render_builder_job(k.id) END,
         k.row_version, k.claimed_at, a.expires_at, c.cancel_requested_at IS NOT NULL,
         mlplat._candidate_output_dir(c.output_prefix, p.name, c.name, k.ordinal) || 'artifact',
         mlplat._candidate_output_dir(c.output_prefix, p.name, c.name, k.ordinal) || 'attestation.json',
         mlplat.candidate_is_finished(k.status), coalesce(a.traceparent, c.traceparent),
         coalesce((k.observed->>'job_created')::boolean, false), k.gpus,
         pg_catalog.jsonb_build_object(
           'type', 'mlplat.io/build-attestation/v1', 'campaign_content_id', c.content_id, 'candidate', k.name,
           'candidate_content_id', k.content_id,
           'builder_image_digest', 'sha256:' || pg_catalog.split_part(k.plan #>> '{builder,image}', '@sha256:', 2),
           'tool', k.plan #>> '{builder,tool}', 'tool_version', k.plan #>> '{builder,tool_version}',
           'algorithm', k.plan->>'algorithm', 'precision', k.plan->>'precision',
           'config_content_id', mlplat.content_id(k.plan->'config'), 'base_artifact_sha256', c.base_artifact_sha256,
           'hardware', pg_catalog.jsonb_build_object('accelerator', k.plan #>> '{hardware,accelerator}',
                                                     'arch', k.plan #>> '{hardware,arch}'),
           'output_uri', mlplat._candidate_output_dir(c.output_prefix, p.name, c.name, k.ordinal) || 'artifact',
           'spdx', k.plan->>'spdx')::text,
         k.attempts, k.next_attempt_at <= pg_catalog.now()
    FROM mlplat.campaign_candidates k
    JOIN mlplat.campaigns c ON c.id = k.campaign_id
    JOIN mlplat.projects p ON p.id = k.project_id
    LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
   WHERE mlplat.candidate_is_building(k.status)
      OR (k.cleanup_done_at IS NULL AND k.job_name IS NOT NULL AND mlplat.candidate_is_finished(k.status))
   ORDER BY k.id;
END $$;

-- What a pass observed for one candidate.  CAS on row_version and the leader's epoch; false
-- when either moved (nothing written).  A BUILT write-back inserts the optimized artifact
-- (p_artifact: its provenance record, verified by the worker) and bumps evidence_version in
-- the same statement's transaction.  p_status NULL records only an observation (no move).
-- p_retry_ms: NULL leaves the backoff as it is, 0 (a request of the pass succeeded) or a move
-- resets it, more counts one failed attempt and defers the next request by that long.
CREATE FUNCTION mlplat._campaigns_writeback(p_id bigint, p_row_version bigint, p_epoch bigint, p_controller text,
                                            p_status text, p_reason text, p_status_reason text, p_observation jsonb,
                                            p_started_at timestamptz, p_actual_gpu_seconds bigint, p_artifact jsonb,
                                            p_retry_ms int DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
  k mlplat.campaign_candidates;
  c mlplat.campaigns;
  a jsonb := p_artifact;
BEGIN
  SELECT * INTO k FROM mlplat.campaign_candidates x WHERE x.id = p_id AND x.row_version = p_row_version FOR NO KEY UPDATE;
  IF k.id IS NULL OR NOT mlplat._epoch_current('campaigns', p_epoch) THEN
    RETURN false;
  END IF;
  IF p_status = 'BUILT' AND a IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a BUILT write-back needs the verified artifact',
      HINT = 'The worker verifies the attestation and the output digest first.';
  END IF;
  UPDATE mlplat.campaign_candidates x
     SET status = coalesce(p_status, x.status),
         reason_code = CASE WHEN p_status IS NULL THEN x.reason_code ELSE p_reason END,
         status_reason = coalesce(p_status_reason, x.status_reason),
         started_at = coalesce(x.started_at, p_started_at),
         finished_at = CASE WHEN mlplat.candidate_is_finished(p_status) THEN pg_catalog.now() ELSE x.finished_at END,
         -- never more than the reservation: the approval's bound holds whatever a clock says
         actual_gpu_seconds = CASE WHEN p_actual_gpu_seconds IS NULL THEN x.actual_gpu_seconds
                                   ELSE LEAST(p_actual_gpu_seconds, x.reserved_gpu_seconds) END,
         evidence_version = x.evidence_version + (p_status IS NOT DISTINCT FROM 'BUILT')::int,  -- NULL: an observation only
         observed = coalesce(p_observation, x.observed), observed_at = pg_catalog.now(),
         -- the pass saw the candidate: its intent is observed; a failure is its last error
         observed_generation = x.generation,
         last_error = CASE WHEN p_status IS DISTINCT FROM k.status AND p_status IS NOT NULL OR p_retry_ms = 0 THEN NULL
                           WHEN p_retry_ms > 0 THEN coalesce(p_status_reason, x.last_error) ELSE x.last_error END,
         -- the retry schedule every kind shares (reset, or one more attempt due retry_ms from
         -- now); a write-back that only observes (NULL, no move) leaves it
         attempts = CASE WHEN p_retry_ms IS NULL AND (p_status IS NULL OR p_status = k.status) THEN x.attempts
                         ELSE mlplat._retry_attempts(x.attempts, CASE WHEN p_status IS DISTINCT FROM k.status AND p_status IS NOT NULL
                                                                      THEN NULL ELSE NULLIF(p_retry_ms, 0) END) END,
         next_attempt_at = CASE WHEN p_retry_ms IS NULL AND (p_status IS NULL OR p_status = k.status) THEN x.next_attempt_at
                                ELSE mlplat._retry_at(CASE WHEN p_status IS DISTINCT FROM k.status AND p_status IS NOT NULL
                                                           THEN NULL ELSE NULLIF(p_retry_ms, 0) END) END,
         epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now()
   WHERE x.id = k.id;
  IF p_status IS NOT NULL AND p_status <> k.status THEN
    PERFORM mlplat._candidate_transition(k, p_status, p_reason, coalesce(p_observation, '{}'), NULL, p_epoch, p_controller);
  END IF;
  IF p_status = 'BUILT' THEN
    SELECT * INTO c FROM mlplat.campaigns x WHERE x.id = k.campaign_id;
    INSERT INTO mlplat.optimized_artifacts (project_id, campaign_id, candidate_id, kind, base_model_version_id,
      base_artifact_sha256, tool, tool_version, builder_image, builder_image_digest, algorithm, precision, config,
      config_content_id, hardware, spdx, sbom_sha256, output_uri, output_sha256, output_bytes, attestation,
      attestation_sha256, verified_by, content_id, epoch, controller)
    VALUES (k.project_id, k.campaign_id, k.id, k.plan->>'kind', c.base_model_version_id, c.base_artifact_sha256,
      k.plan #>> '{builder,tool}', k.plan #>> '{builder,tool_version}', k.plan #>> '{builder,image}',
      'sha256:' || pg_catalog.split_part(k.plan #>> '{builder,image}', '@sha256:', 2), k.plan->>'algorithm',
      k.plan->>'precision', k.plan->'config', mlplat.content_id(k.plan->'config'), k.plan->'hardware', k.plan->>'spdx',
      a->>'sbom_sha256', a->>'output_uri', a->>'output_sha256', (a->>'output_bytes')::bigint, a->'attestation',
      a->>'attestation_sha256', a->>'verified_by',
      mlplat.content_id(pg_catalog.jsonb_build_object('candidate_content_id', k.content_id, 'output_sha256', a->>'output_sha256',
                                                      'attestation_sha256', a->>'attestation_sha256')),
      p_epoch, p_controller);
  END IF;
  RETURN true;
END $$;

-- Cleanup of a terminal candidate is done (its Job and, unless BUILT, its partial outputs
-- deleted, 404 counted as done).
CREATE FUNCTION mlplat._campaigns_cleanup_done(p_id bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE mlplat.campaign_candidates x SET cleanup_done_at = pg_catalog.now(), row_version = x.row_version + 1,
         updated_at = pg_catalog.now()
   WHERE x.id = p_id AND x.cleanup_done_at IS NULL AND mlplat.candidate_is_finished(x.status)
     AND mlplat._epoch_current('campaigns', p_epoch);
  RETURN FOUND;
END $$;

-- The write-back of one pass, as every kind's (docs/reconcilers.md): one row per candidate
-- the pass observed; returns the ids whose write-back won its compare-and-swap.
CREATE TYPE mlplat.campaign_writeback AS (
  id                 bigint,
  row_version        bigint,        -- as claimed
  status             text,          -- NULL: an observation only
  reason_code        text,
  status_reason      text,
  observation        jsonb,         -- Job conditions, times, attestation digest, verified_by
  started_at         timestamptz,
  actual_gpu_seconds bigint,        -- capped at the reservation
  artifact           jsonb,         -- BUILT: the verified output (output_uri, output_sha256, ...)
  cleanup_done       boolean,       -- the Job (and unless BUILT the outputs) are gone
  retry_ms           int            -- NULL: backoff unchanged; 0: reset; > 0: one more failed attempt
);

CREATE FUNCTION mlplat._campaigns_writeback_set(p_epoch bigint, p_rows mlplat.campaign_writeback[])
RETURNS SETOF bigint
LANGUAGE plpgsql
AS $$
DECLARE
  w mlplat.campaign_writeback;
  ctl text := (SELECT e.host || '/' || e.pid || '/' || e.replica FROM mlplat.leader_epochs e
                WHERE e.kind = 'campaigns' AND e.epoch = p_epoch);
BEGIN
  FOREACH w IN ARRAY coalesce(p_rows, '{}') LOOP
    IF w.cleanup_done THEN
      IF mlplat._campaigns_cleanup_done(w.id, p_epoch) THEN
        RETURN NEXT w.id;
      END IF;
    ELSIF mlplat._campaigns_writeback(w.id, w.row_version, p_epoch, ctl, w.status, w.reason_code, w.status_reason,
                                      w.observation, w.started_at, w.actual_gpu_seconds, w.artifact, w.retry_ms) THEN
      RETURN NEXT w.id;
    END IF;
  END LOOP;
END $$;

REVOKE ALL ON FUNCTION mlplat._campaign_committed_spend(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._candidate_move(mlplat.campaign_candidates, text, text, text, bigint, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaigns_admit(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaigns_claim(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaigns_writeback(bigint, bigint, bigint, text, text, text, text, jsonb, timestamptz, bigint, jsonb, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaigns_cleanup_done(bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._campaigns_writeback_set(bigint, mlplat.campaign_writeback[]) FROM PUBLIC;
