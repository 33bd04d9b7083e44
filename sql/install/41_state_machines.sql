-- One state machine per kind, in one place (issue 19 item 2).  Each kind's transitions are
-- one IMMUTABLE function returning (from_status, to_status) rows — NULL from: a row may be
-- created in that status; NULL to: the status is final — made from the kind's moves by
-- _transitions_function (below), and one trigger function refuses any status change (or
-- initial status) the function does not list, put on every kind's table the same way by
-- _state_machine (below).  docs/reconcilers.md draws each machine with the same lines;
-- test/e2e/state_diagrams.sh fails when the drawing and the function differ.

-- Makes a kind's transitions function, mlplat._<machine>_transitions(), from its moves written
-- as the lines of a Mermaid state diagram, one move a line, in the order the rows are to come:
-- 'FROM --> TO', '[*] --> S' for the one status a row may be created in, 'S --> [*]' for a
-- final status.  They are the lines docs/reconcilers.md draws the machine with (its block is
-- a copy: test/e2e/state_diagrams.sh compares the two).  The function it makes is the
-- IMMUTABLE VALUES list a hand-written one is, under the name the C start-up check, the
-- triggers and test/e2e/state_lists.sh read.
CREATE FUNCTION mlplat._transitions_function(p_machine text, p_moves text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  bad text;
  moves text;
BEGIN
  SELECT l.line INTO bad
    FROM pg_catalog.regexp_split_to_table(p_moves, '\n') AS l(line)
   WHERE l.line !~ '^\s*$' AND l.line !~ '^\s*(\[\*\]|[A-Z_]+)\s+-->\s+(\[\*\]|[A-Z_]+)\s*$'
   LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format('mlplat: a line of the %s machine is not a move: %s', p_machine, bad),
      HINT = 'One move a line, FROM --> TO, with [*] as FROM for the status a row is created in and as TO after a final one.';
  END IF;
  SELECT pg_catalog.string_agg(pg_catalog.format('(%s, %s)', pg_catalog.quote_nullable(NULLIF(m.g[1], '[*]')),
                                                 pg_catalog.quote_nullable(NULLIF(m.g[2], '[*]'))),
                               ', ' ORDER BY l.n)
    INTO moves
    FROM pg_catalog.regexp_split_to_table(p_moves, '\n') WITH ORDINALITY AS l(line, n),
         pg_catalog.regexp_match(l.line, '^\s*(\S+)\s+-->\s+(\S+)\s*$') AS m(g)
   WHERE m.g IS NOT NULL;
  EXECUTE pg_catalog.format('CREATE FUNCTION mlplat.%I() RETURNS TABLE (from_status text, to_status text)
                               LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
                            '_' || p_machine || '_transitions', 'VALUES ' || moves);
END $$;

-- Projects: create_project creates PROVISIONING (and re-creates a DELETED project the same
-- way); the reconciler moves a live project between PROVISIONING, READY and FAILED as its
-- objects apply, fail or drift; delete_project starts DELETING from any live status, which
-- only the reconciler ends, DELETED, once the namespace is gone.
SELECT mlplat._transitions_function('project', $$
  [*] --> PROVISIONING
  PROVISIONING --> READY
  PROVISIONING --> FAILED
  PROVISIONING --> DELETING
  READY --> PROVISIONING
  READY --> FAILED
  READY --> DELETING
  FAILED --> PROVISIONING
  FAILED --> READY
  FAILED --> DELETING
  DELETING --> DELETED
  DELETED --> PROVISIONING
$$);

-- Rollouts: start_rollout creates PROGRESSING; each decision (plan_rollout) moves between the
-- three live states or starts a rollback; abort_rollout starts a rollback; the reconciler
-- closes a rollback (ROLLED_BACK, or ABORTED when asked) or a promotion; an artifact that
-- fails its check ends any active rollout as FAILED.
SELECT mlplat._transitions_function('rollout', $$
  [*] --> PROGRESSING
  PROGRESSING --> HOLDING
  PROGRESSING --> AT_CEILING
  PROGRESSING --> ROLLING_BACK
  PROGRESSING --> PROMOTED
  PROGRESSING --> FAILED
  HOLDING --> PROGRESSING
  HOLDING --> AT_CEILING
  HOLDING --> ROLLING_BACK
  HOLDING --> PROMOTED
  HOLDING --> FAILED
  AT_CEILING --> PROGRESSING
  AT_CEILING --> HOLDING
  AT_CEILING --> ROLLING_BACK
  AT_CEILING --> PROMOTED
  AT_CEILING --> FAILED
  ROLLING_BACK --> ROLLED_BACK
  ROLLING_BACK --> ABORTED
  ROLLING_BACK --> FAILED
  PROMOTED --> [*]
  ROLLED_BACK --> [*]
  ABORTED --> [*]
  FAILED --> [*]
$$);


-- Runs and pipeline runs: start_run creates PENDING; the reconciler moves a run with the phase
-- its Workflow reports (an adopted Workflow may report any phase, hence the moves straight
-- from PENDING; Argo may report Pending again after Running); cancel_run asks for a cancel
-- until the run has finished, and the cancel ends CANCELLED (or SUCCEEDED when the Workflow
-- finished first); retry_run starts a new attempt of a FAILED or CANCELLED run.
SELECT mlplat._transitions_function('run', $$
  [*] --> PENDING
  PENDING --> SUBMITTED
  PENDING --> RUNNING
  PENDING --> SUCCEEDED
  PENDING --> FAILED
  PENDING --> CANCEL_REQUESTED
  SUBMITTED --> RUNNING
  SUBMITTED --> SUCCEEDED
  SUBMITTED --> FAILED
  SUBMITTED --> CANCEL_REQUESTED
  RUNNING --> SUBMITTED
  RUNNING --> SUCCEEDED
  RUNNING --> FAILED
  RUNNING --> CANCEL_REQUESTED
  CANCEL_REQUESTED --> CANCELLED
  CANCEL_REQUESTED --> SUCCEEDED
  FAILED --> PENDING
  CANCELLED --> PENDING
  SUCCEEDED --> [*]
$$);

-- Deployments: deploy creates one PENDING (and deploys a DELETED or DELETING one again as
-- DEPLOYING: the reconciler waits for a terminating InferenceService to go first); the
-- reconciler moves a live deployment among DEPLOYING, READY, FAILED and DRIFTED as KServe
-- reports, drift is found or repaired and the artifact check answers, and deploy,
-- rollback_deployment and a rollout's end ask for DEPLOYING; undeploy starts DELETING from
-- any live status, which only the reconciler ends, DELETED.
SELECT mlplat._transitions_function('deployment', $$
  [*] --> PENDING
  PENDING --> DEPLOYING
  PENDING --> READY
  PENDING --> FAILED
  PENDING --> DRIFTED
  PENDING --> DELETING
  DEPLOYING --> READY
  DEPLOYING --> FAILED
  DEPLOYING --> DRIFTED
  DEPLOYING --> DELETING
  READY --> DEPLOYING
  READY --> FAILED
  READY --> DRIFTED
  READY --> DELETING
  FAILED --> DEPLOYING
  FAILED --> READY
  FAILED --> DRIFTED
  FAILED --> DELETING
  DRIFTED --> DEPLOYING
  DRIFTED --> READY
  DRIFTED --> FAILED
  DRIFTED --> DELETING
  DELETING --> DELETED
  DELETING --> DEPLOYING
  DELETED --> DEPLOYING
$$);

-- Model aliases: set_model_stage/set_alias create (or move) an alias PENDING; the registry
-- write ends SYNCED or, refused for good, FAILED; every status may move to every other (a
-- resync may find a SYNCED alias's version gone, a FAILED one is retried when due, a new
-- intent makes any PENDING again), so the machine's only rule is where an alias starts.
SELECT mlplat._transitions_function('model_alias', $$
  [*] --> PENDING
  PENDING --> SYNCED
  PENDING --> FAILED
  SYNCED --> PENDING
  SYNCED --> FAILED
  FAILED --> PENDING
  FAILED --> SYNCED
$$);

-- Lab runs and probes (docs/lab.md): start_lab_run/start_lab_probe create QUEUED; the
-- reconciler's claim dispatches (lease + re-check) or fails a run that cannot wait any more;
-- its write-backs move a dispatched run as its Job is seen active, complete (a one-tick Job
-- may complete before a pass sees it active), fail or vanish; a failed attempt with budget
-- left waits in RETRY_WAIT for the next dispatch; cancel_lab_run asks for a cancel until the
-- run has finished, and only the reconciler ends it: CANCELLED once the Job is seen gone,
-- or SUCCEEDED/FAILED when the Job had already finished.
SELECT mlplat._transitions_function('lab_run', $$
  [*] --> QUEUED
  QUEUED --> DISPATCHED
  QUEUED --> FAILED
  QUEUED --> CANCEL_REQUESTED
  DISPATCHED --> RUNNING
  DISPATCHED --> SUCCEEDED
  DISPATCHED --> RETRY_WAIT
  DISPATCHED --> FAILED
  DISPATCHED --> CANCEL_REQUESTED
  RUNNING --> SUCCEEDED
  RUNNING --> RETRY_WAIT
  RUNNING --> FAILED
  RUNNING --> CANCEL_REQUESTED
  RETRY_WAIT --> DISPATCHED
  RETRY_WAIT --> FAILED
  RETRY_WAIT --> CANCEL_REQUESTED
  CANCEL_REQUESTED --> CANCELLED
  CANCEL_REQUESTED --> SUCCEEDED
  CANCEL_REQUESTED --> FAILED
  SUCCEEDED --> [*]
  FAILED --> [*]
  CANCELLED --> [*]
$$);

-- Campaign candidates (issue 14): create_campaign creates PLANNED; the admission of the
-- campaigns reconciler starts a build (BUILDING) or decides it can never run (NOT_RUN);
-- cancel_campaign cancels a PLANNED candidate at once and asks a BUILDING one to stop
-- (CANCEL_REQUESTED), which the reconciler ends CANCELLED once the Job is gone, or BUILT or
-- FAILED when the build had finished first.  Every end is final.
SELECT mlplat._transitions_function('campaign_candidate', $$
  [*] --> PLANNED
  PLANNED --> BUILDING
  PLANNED --> NOT_RUN
  PLANNED --> CANCELLED
  BUILDING --> BUILT
  BUILDING --> FAILED
  BUILDING --> CANCEL_REQUESTED
  CANCEL_REQUESTED --> CANCELLED
  CANCEL_REQUESTED --> BUILT
  CANCEL_REQUESTED --> FAILED
  BUILT --> [*]
  FAILED --> [*]
  CANCELLED --> [*]
  NOT_RUN --> [*]
$$);

-- The one check: a status a row enters must be a listed transition from the one it leaves.
CREATE FUNCTION mlplat._status_transition_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  old_status text;
  listed boolean;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    IF OLD.status IS NOT DISTINCT FROM NEW.status THEN
      RETURN NEW;
    END IF;
    old_status := OLD.status;
  END IF;
  EXECUTE pg_catalog.format('SELECT true FROM mlplat.%I() t WHERE t.from_status IS NOT DISTINCT FROM $1 AND t.to_status = $2',
                            TG_ARGV[0])
    INTO listed USING old_status, NEW.status;
  IF listed IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation',
      MESSAGE = pg_catalog.format('mlplat: %s %s cannot go from %s to %s', TG_TABLE_NAME, NEW.id,
                                  coalesce(old_status, '(new)'), NEW.status),
      DETAIL = pg_catalog.format('mlplat.%s() lists the transitions of %s.', TG_ARGV[0], TG_TABLE_NAME),
      HINT = 'Whatever made the change has a bug: docs/reconcilers.md draws the state machine.';
  END IF;
  RETURN NEW;
END $$;

-- Puts a kind's state machine on its table, the same way for every kind: two triggers that
-- run the check (an EXECUTE) only on a row it would refuse -- a new row not in the machine's
-- initial status, an UPDATE to a status change the machine does not list -- so a bulk insert
-- of new rows (a campaign's 64 candidates) and every allowed change pay no function call.
-- The initial status and the listed changes ('FROM>TO') are read from the transitions
-- function itself when the triggers are made, so the WHEN clauses cannot disagree with it
-- (test/pgtap/table_rules.sql checks that they still match).  A check per changed row cost a
-- dynamic statement, parsed and planned each time: 253 of the 357 ms a deployments
-- write-back of 1,000 READYs took (docs/benchmarks.md, bench/converge/cpu.sh).
CREATE FUNCTION mlplat._state_machine(p_table text, p_transitions text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  initial text[];
  listed text[];
BEGIN
  EXECUTE pg_catalog.format('SELECT pg_catalog.array_agg(t.to_status) FROM mlplat.%I() t WHERE t.from_status IS NULL',
                            p_transitions)
    INTO initial;
  IF pg_catalog.cardinality(initial) IS DISTINCT FROM 1 THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format('mlplat.%s() lists %s initial statuses, not one', p_transitions,
                                  coalesce(pg_catalog.cardinality(initial), 0)),
      DETAIL = 'The insert trigger skips the check for the one status a new row may start in.',
      HINT = 'List exactly one transition from NULL.';
  END IF;
  EXECUTE pg_catalog.format('SELECT pg_catalog.array_agg(t.from_status || %L || t.to_status ORDER BY t.from_status, t.to_status) FROM mlplat.%I() t
                              WHERE t.from_status IS NOT NULL AND t.to_status IS NOT NULL', '>', p_transitions)
    INTO listed;
  EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE INSERT ON mlplat.%I FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM %L)
                               EXECUTE FUNCTION mlplat._status_transition_check(%L)',
                            p_table || '_status_initial', p_table, initial[1], p_transitions);
  EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE UPDATE OF status ON mlplat.%I
                               FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                                                  AND (coalesce(OLD.status, %L) || %L || coalesce(NEW.status, %L)) <> ALL (%L::text[]))
                               EXECUTE FUNCTION mlplat._status_transition_check(%L)',
                            p_table || '_status_transition', p_table, '', '>', '', coalesce(listed, '{}'), p_transitions);
END $$;

SELECT mlplat._state_machine('deployments', '_deployment_transitions');
SELECT mlplat._state_machine('model_aliases', '_model_alias_transitions');
SELECT mlplat._state_machine('projects', '_project_transitions');
SELECT mlplat._state_machine('rollouts', '_rollout_transitions');
SELECT mlplat._state_machine('runs', '_run_transitions');
SELECT mlplat._state_machine('lab_runs', '_lab_run_transitions');
SELECT mlplat._state_machine('campaign_candidates', '_campaign_candidate_transitions');
