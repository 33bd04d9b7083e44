-- 0.2.0 -> 0.3.0, part 98: campaign and lab histories are purged past
-- mlplat.history_retention too (issue 18, finding 11).  The rules, which _purgeable
-- (part 50) and _run_retention use, are in sql/install/80_retention.sql; the candidates'
-- and campaigns' guards (part 60) let exactly those deletes through.

-- Has this campaign ended more than mlplat.history_retention days ago, with nothing live
-- referring to it?  Ended: its state is final (SUCCEEDED, PARTIALLY_SUCCEEDED, FAILED,
-- CANCELLED, EXPIRED), every candidate that had a Job has it cleaned up, and its last change
-- (creation, approval, cancel request, the approval's expiry, a candidate's update) is older
-- than the cutoff.  Live: a deployment of the project, not deleted, with a revision of a model
-- version whose artifact is one of the campaign's optimized artifacts (by digest).  The approval, the
-- candidates and their transitions, predictions, measurements, artifacts and qualifications
-- go with the campaign.
CREATE FUNCTION mlplat._campaign_expired(p_campaign_id bigint) RETURNS boolean
LANGUAGE sql STABLE
AS $$
  SELECT EXISTS (
    SELECT 1 FROM mlplat.campaigns c
      LEFT JOIN mlplat.campaign_approvals a ON a.campaign_id = c.id
     WHERE c.id = p_campaign_id
       AND GREATEST(c.created_at, c.cancel_requested_at, a.approved_at, a.expires_at)
           < mlplat._history_cutoff()
       AND NOT EXISTS (SELECT 1 FROM mlplat.campaign_candidates k
                        WHERE k.campaign_id = c.id
                          AND (k.updated_at >= mlplat._history_cutoff()
                               OR (k.status <> 'PLANNED' AND k.cleanup_done_at IS NULL)))
       AND mlplat._campaign_state(c.id) IN ('SUCCEEDED', 'PARTIALLY_SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
       AND NOT EXISTS (SELECT 1 FROM mlplat.optimized_artifacts o
                         JOIN mlplat.model_versions v ON v.artifact_sha256 = o.output_sha256
                         JOIN mlplat.deployment_revisions dr ON dr.model_version_id = v.id
                         JOIN mlplat.deployments d ON d.id = dr.deployment_id
                        WHERE o.campaign_id = c.id AND d.project_id = c.project_id AND d.status <> 'DELETED'))
$$;

-- May this probe go?  It completed more than mlplat.history_retention days ago and is no
-- longer evidence: a newer completed probe of the same (project, artifact, profile, node)
-- supersedes it, or no live approval (not revoked, not expired) is for that scope.
CREATE FUNCTION mlplat._lab_probe_expired(p_probe_id bigint) RETURNS boolean
LANGUAGE sql STABLE
AS $$
  SELECT EXISTS (
    SELECT 1 FROM mlplat.lab_probes pb
     WHERE pb.id = p_probe_id AND pb.status <> 'RUNNING'
       AND pb.completed_at < mlplat._history_cutoff()
       AND (EXISTS (SELECT 1 FROM mlplat.lab_probes n
                     WHERE n.project_id = pb.project_id AND n.artifact_sha256 = pb.artifact_sha256
                       AND n.runtime_profile_id = pb.runtime_profile_id AND n.node_id = pb.node_id
                       AND n.completed_at IS NOT NULL AND (n.completed_at, n.id) > (pb.completed_at, pb.id))
            OR NOT EXISTS (SELECT 1 FROM mlplat.lab_approvals a
                            WHERE a.project_id = pb.project_id AND a.artifact_sha256 = pb.artifact_sha256
                              AND a.runtime_profile_id = pb.runtime_profile_id AND a.node_id = pb.node_id
                              AND a.revoked_at IS NULL AND a.expires_at > pg_catalog.now())))
$$;

-- May this lab run (or probe run) go, with its transitions and any payload left?  It ended
-- (SUCCEEDED, FAILED, CANCELLED) and last changed more than mlplat.history_retention days
-- ago, its output's retain_until has passed, it holds no node lease, and no probe that is
-- still kept names it.
CREATE FUNCTION mlplat._lab_run_expired(p_lab_run_id bigint) RETURNS boolean
LANGUAGE sql STABLE
AS $$
  SELECT EXISTS (
    SELECT 1 FROM mlplat.lab_runs r
     WHERE r.id = p_lab_run_id AND NOT mlplat.lab_run_is_active(r.status)
       AND GREATEST(r.finished_at, r.updated_at) < mlplat._history_cutoff()
       AND (r.retain_until IS NULL OR r.retain_until <= pg_catalog.now())
       AND NOT EXISTS (SELECT 1 FROM mlplat.lab_leases l WHERE l.lab_run_id = r.id)
       AND NOT EXISTS (SELECT 1 FROM mlplat.lab_probes pb WHERE pb.lab_run_id = r.id))
$$;

REVOKE ALL ON FUNCTION mlplat._campaign_expired(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._lab_probe_expired(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._lab_run_expired(bigint) FROM PUBLIC;
