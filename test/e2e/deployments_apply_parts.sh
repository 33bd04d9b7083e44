#!/usr/bin/env bash
# Issue 20, target 3 (conv7): a pass's batch of first applies writes back the applies that
# answered in parts while the others are still in flight, instead of all at its end, where
# the apply window had drained.  300 new deployments in one chunk; the stand-in parks the
# answer of the first one's apply (a `hold` rule, after it is applied), so the batch cannot
# end:
#   - while it is parked, at least 200 of the other 299 are written back (their apply
#     recorded: observed_revision 1; deploy() made them DEPLOYING already): before this
#     change none was until the batch ended (the parked answer's mlplat.http_timeout,
#     raised here to 120 s);
#   - once it is let go, all 300 are READY with one apply each (stand-in PATCHes, ledger
#     APPLY rows), and no write-back was lost.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
SD=$WORK/standin-apply-parts
DB=mlplat
N=300
e2e_standin $DB
on_exit 'release_holds drop; q $DB "ALTER SYSTEM RESET mlplat.http_timeout" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'
q $DB "ALTER SYSTEM SET mlplat.http_timeout = '120s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null

q $DB "SELECT mlplat.create_project('aparts', 0); SELECT mlplat.add_artifact_location('aparts', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'aparts'" READY 30
tap_ok $? "project aparts is READY"
SHA=$(standin_artifact s3://models/ap/1 "ap-v1")
q $DB "SELECT mlplat.register_model_version('aparts', 'm', '1', 's3://models/ap/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('aparts', 'm', '1', 'CANDIDATE')" >/dev/null
admin DELETE requests >/dev/null

hold_rule '{"method":"PATCH","path":"/namespaces/mlp-aparts/inferenceservices/ap1$","hold":"after","times":1}' >/dev/null
q $DB "SELECT count(mlplat.deploy('aparts', 'ap' || i, 'm', '1', 'kserve-sklearnserver')) FROM generate_series(1, $N) i" >/dev/null
wait_held 1 60
tap_ok $? "the apply of ap1 is parked at the stand-in (applied, its answer held)"

written="SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
          WHERE p.name = 'aparts' AND d.name <> 'ap1' AND d.observed_revision = 1"
wait_for $DB "SELECT ($written) >= 200" t 60
ok=$?
got=$(q $DB "$written")
held=$(admin GET holds | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
[ $ok = 0 ] && [ "$held" = 1 ]
tap_ok $? "while ap1's answer is parked, $got of the other $((N - 1)) are written back (want >= 200; still parked: $held)"

release_holds
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
               WHERE p.name = 'aparts' AND d.status = 'READY'" $N 120
tap_ok $? "all $N READY once it is let go"
patches=$(admin GET 'requests?method=PATCH&kind=InferenceService' |
	python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if "/namespaces/mlp-aparts/" in e["path"]))')
tap_is "$patches" "$N" "one apply each at the stand-in"
applies=$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND project = 'aparts' AND action = 'APPLY'")
tap_is "$applies" "$N" "one ledger APPLY row each"
tap_done
