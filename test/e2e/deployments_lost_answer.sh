#!/usr/bin/env bash
# A deployment whose apply landed but whose answer was lost (the stand-in stores
# the InferenceService, then drops the connection): the next pass finds the
# desired revision applied and records it in the ledger as ADOPT — the one write
# that made the object must not go unrecorded — with exactly one create at the
# stand-in.  An apply that is answered records APPLY and no ADOPT.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lost-answer
e2e_standin mlplat

DB=mlplat
q $DB "SELECT mlplat.create_project('lostans', 0); SELECT mlplat.add_artifact_location('lostans', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'lostans'" READY 20
tap_ok $? "project lostans is READY"
SHA=$(standin_artifact s3://models/m/1 'm-v1')   # checked in the object store before the first apply
q $DB "SELECT mlplat.register_model_version('lostans', 'm', '1', 's3://models/m/1', '$SHA', 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('lostans', 'm', '1', 'CANDIDATE')" >/dev/null
ledger() { q $DB "SELECT string_agg(l.action || ':' || l.outcome || ':' || coalesce(l.http_status::text, '-'), ' ' ORDER BY l.id)
                  FROM mlplat.reconcile_ledger l JOIN mlplat.deployments d ON d.id = l.entity_id AND l.kind = 'deployments'
                 WHERE d.name = '$1'"; }

# --- the apply of "lost" is stored and its connection dropped, and so is every resend:
# libcurl by itself re-sends a request when a reused connection dies, once per pooled
# connection it tries (how many depends on the pool: the Lease fence's requests add to it)
admin POST faults '{"method":"PATCH","path":"/inferenceservices/lost$","drop":1,"times":20}' >/dev/null
q $DB "SELECT mlplat.deploy('lostans', 'lost', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'lost'" READY 20
tap_ok $? "the deployment whose apply answer was lost converges to READY"
patches=$(admin GET "requests?name=lost&method=PATCH" | python3 -c 'import json,sys; print(" ".join(str(e["status"]) + ("/dropped" if e.get("dropped") else "") for e in json.load(sys.stdin)["items"]))')
[[ "$patches" =~ ^201/dropped(\ 200/dropped){1,19}$ ]]
tap_ok $? "the stand-in stored the apply, dropped its connection, and dropped libcurl's resends too ($patches)"
tap_is "$(ledger lost)" "APPLY:RETRY:- ADOPT:OK:-" \
	"the ledger shows the unanswered apply, then the adoption of what it made"
tap_is "$(q $DB "SELECT detail->>'note' FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'ADOPT' AND entity_id = (SELECT id FROM mlplat.deployments WHERE name = 'lost')")" \
	"found revision 1 applied without a recorded answer" "the ADOPT says why"
tap_is "$(admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); w=w.get("writes",w); print(w["InferenceService/mlp-lostans/lost"]["create"])')" 1 \
	"one create of the InferenceService: adopting wrote nothing"

# --- answered applies: APPLY, never ADOPT (a redeploy included)
q $DB "SELECT mlplat.deploy('lostans', 'fine', 'm', '1', 'kserve-sklearnserver')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE name = 'fine'" READY 20
tap_ok $? "a deployment with no fault converges to READY"
q $DB "SELECT mlplat.deploy('lostans', 'fine', 'm', '1', 'kserve-sklearnserver', 0, 1, 3)" >/dev/null
wait_for $DB "SELECT status || '/' || observed_revision FROM mlplat.deployments WHERE name = 'fine'" READY/2 20
tap_ok $? "... and its redeploy too"
tap_is "$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-lostans/inferenceservices/fine | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["maxReplicas"])')" 3 \
	"the stand-in's object carries the redeploy (maxReplicas 3)"
sleep 3   # a resync or two: steady state adds nothing
tap_is "$(ledger fine)" "APPLY:OK:201 APPLY:OK:200" "answered applies are recorded as APPLY only"
tap_is "$(ledger lost)" "APPLY:RETRY:- ADOPT:OK:-" "... and the adoption is recorded once"

q $DB "SELECT mlplat.undeploy('lostans', d) FROM unnest(ARRAY['lost', 'fine']) d" >/dev/null
# (this project's only: scripts before this one may leave deployments of their own)
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
              WHERE p.name = 'lostans' AND d.status <> 'DELETED'" 0 20
tap_ok $? "both deployments are undeployed (DELETED)"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-lostans/inferenceservices/lost) $(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-lostans/inferenceservices/fine)" \
	"404 404" "... and both InferenceServices are gone from the stand-in"
q $DB "SELECT mlplat.delete_project('lostans')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'lostans'" DELETED 20
tap_ok $? "project lostans deleted"
wait_kube_gone /api/v1/namespaces/mlp-lostans 15
tap_ok $? "... and its namespace is gone from the stand-in"
tap_done
