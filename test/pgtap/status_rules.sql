-- pgTAP: the status lists are each one IMMUTABLE SQL function (issue 19 item 5), and the
-- planner still reads them as the lists they stand for: a partial index whose predicate
-- calls one serves the claims that call it (or a status it implies).  Plans on empty
-- tables with sequential scans off: the question is whether the index can be used at all.
BEGIN;
SELECT plan(11);
\ir lib/helpers.sql

SET LOCAL enable_seqscan = off;

-- _campaigns_claim: builders out, and finished builders whose Job is still to clean up
SELECT alike(public.tap_plan_of($$SELECT k.id FROM mlplat.campaign_candidates k
  WHERE mlplat.candidate_is_building(k.status)
     OR (k.cleanup_done_at IS NULL AND k.job_name IS NOT NULL AND mlplat.candidate_is_finished(k.status))$$),
  '%campaign_candidates_active%campaign_candidates_uncleaned%',
  'the campaigns claim reads the active and the uncleaned candidates by their partial indexes');
-- _campaigns_admit: the builders out and the lowest PLANNED candidate of one campaign
SELECT alike(public.tap_plan_of($$SELECT count(*) FROM mlplat.campaign_candidates x
  WHERE x.campaign_id = 1 AND mlplat.candidate_is_building(x.status)$$),
  '%campaign_candidates_active%', 'counting a campaign''s builders uses campaign_candidates_active');
SELECT alike(public.tap_plan_of($$SELECT count(*) FROM mlplat.campaign_candidates x
  WHERE x.campaign_id = 1 AND x.status = 'PLANNED'$$),
  '%campaign_candidates_active%', 'PLANNED implies the predicate of campaign_candidates_active');
-- cancel_campaign
SELECT alike(public.tap_plan_of($$SELECT 1 FROM mlplat.campaign_candidates x
  WHERE x.campaign_id = 1 AND NOT mlplat.candidate_is_finished(x.status)$$),
  '%campaign_candidates_active%', 'a campaign''s unfinished candidates use campaign_candidates_active');
-- the lab runs on a node whose Job is out are among its active ones
SELECT alike(public.tap_plan_of($$SELECT x.id FROM mlplat.lab_runs x
  WHERE x.node_id = 1 AND mlplat.lab_run_is_running(x.status)$$),
  '%lab_runs_active%', 'a node''s dispatched and running lab runs use lab_runs_active');
-- _deployments_claim: the changed rows, fenced to that index's predicate (plain index scans)
SET LOCAL enable_bitmapscan = off;
SELECT alike(public.tap_plan_of($$SELECT x.id FROM (SELECT y.id, y.status FROM mlplat.deployments y
  WHERE mlplat.deployment_is_changing(y.status) OR y.generation <> y.observed_generation OFFSET 0) x
  WHERE x.status <> 'DELETED'$$),
  '%Index Scan using deployments_changed%', 'the deployments claim reads the changed rows by deployments_changed');
RESET enable_bitmapscan;

-- the lists are the statuses they name, and nothing else
SELECT is((SELECT array_agg(s ORDER BY s) FROM unnest(ARRAY['PLANNED', 'BUILDING', 'CANCEL_REQUESTED', 'BUILT', 'FAILED',
                                                             'CANCELLED', 'NOT_RUN']) s
           WHERE mlplat.candidate_is_building(s) OR mlplat.candidate_is_finished(s)),
          ARRAY['BUILDING', 'BUILT', 'CANCELLED', 'CANCEL_REQUESTED', 'FAILED', 'NOT_RUN'],
          'a candidate is building, finished, or PLANNED');
SELECT is((SELECT array_agg(s ORDER BY s) FROM unnest(ARRAY['QUEUED', 'DISPATCHED', 'RUNNING', 'RETRY_WAIT', 'CANCEL_REQUESTED',
                                                             'SUCCEEDED', 'FAILED', 'CANCELLED']) s
           WHERE mlplat.lab_run_is_running(s)),
          ARRAY['DISPATCHED', 'RUNNING'], 'a lab run''s Job is out while DISPATCHED or RUNNING');
SELECT is((SELECT array_agg(s ORDER BY s) FROM unnest(ARRAY['PENDING', 'DEPLOYING', 'READY', 'FAILED', 'DRIFTED',
                                                             'DELETING', 'DELETED']) s
           WHERE mlplat.deployment_is_changing(s)),
          ARRAY['DELETING', 'DEPLOYING', 'DRIFTED', 'PENDING'], 'a deployment is acted on, due or not, while changing');
SELECT is((SELECT array_agg(s ORDER BY s) FROM unnest(ARRAY['PENDING', 'DEPLOYING', 'READY', 'FAILED', 'DRIFTED',
                                                             'DELETING', 'DELETED']) s
           WHERE mlplat.deployment_is_serving(s)),
          ARRAY['DEPLOYING', 'DRIFTED', 'READY'], 'a deployment''s endpoint serves (and is routed) while READY, DRIFTED or DEPLOYING');
SELECT is((SELECT array_agg(s ORDER BY s) FROM unnest(ARRAY['NONE', 'CANDIDATE', 'CHAMPION', 'ARCHIVED']) s
           WHERE mlplat.model_stage_is_deployable(s)),
          ARRAY['CANDIDATE', 'CHAMPION'], 'a model version may be deployed from CANDIDATE or CHAMPION');

SELECT * FROM finish();
ROLLBACK;
