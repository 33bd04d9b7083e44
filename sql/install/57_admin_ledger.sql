-- 57_admin_ledger: the reconcile ledger for platform administrators.
--
-- The ledger keeps what tenants are not told (issue 18, findings 3 and 7): the digest an
-- artifact check found, the store's HTTP status, transport errors naming hosts.  The table
-- itself is readable by superusers only; this definer view gives it to the principals in
-- mlplat.admins as well, and to nobody else.  _can_view(NULL) is true for administrators
-- only (a member's right is always for one project id).
CREATE VIEW mlplat.admin_ledger WITH (security_barrier = true) AS
SELECT l.id, l.at, l.kind, l.entity, l.entity_id, l.project, l.action, l.outcome, l.desired_digest,
       l.observed_digest, l.http_status, l.error, l.epoch, l.controller, l.trace_id, l.detail
  FROM mlplat.reconcile_ledger l
 WHERE mlplat._can_view(NULL::bigint);
REVOKE ALL ON mlplat.admin_ledger FROM PUBLIC;
GRANT SELECT ON mlplat.admin_ledger TO PUBLIC;
COMMENT ON VIEW mlplat.admin_ledger IS
  'mlplat.reconcile_ledger for administrators (mlplat.admins, superusers): what each reconciler did and why, with the detail tenants are not shown; empty for everyone else.';
