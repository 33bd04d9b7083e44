#!/usr/bin/env bash
# Route generations, drift policy and the deploy deadline end to end, with the real
# workers against the stand-in: a listener on mlplat_routes is told each new generation's
# number (deploy -> READY, a second model, KServe taking readiness away and giving it back,
# undeploy); a steady resync publishes nothing; 'report' shows drift and never repairs it,
# switching back to 'repair' repairs it without a revision; a revision that never becomes
# ready is FAILED at the deadline, and a new intent starts a new deadline; a forged
# NOTIFY moves no gateway that follows docs/api.md.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-routes
DB=mlplat
LN=$WORK/routes-listener

# A LISTEN session: psql reads commands from a fifo and prints notifications after each one.
listener_start() {
	rm -f "$LN.fifo" "$LN.out"
	mkfifo "$LN.fifo"
	$MLPLAT_TEST_BIN/psql -XAtq -d $DB <"$LN.fifo" >"$LN.out" 2>&1 &
	LISTENER_PID=$!
	exec 7>"$LN.fifo"
	echo "LISTEN mlplat_routes;" >&7
}
listener_stop() {
	[ -n "${LISTENER_PID:-}" ] || return 0
	echo '\q' >&7
	exec 7>&-
	wait "$LISTENER_PID" 2>/dev/null
	LISTENER_PID=
}
# every payload received so far, space-separated, in arrival order
notes() {
	echo "SELECT 1;" >&7
	sleep 0.2
	sed -n 's/^Asynchronous notification "mlplat_routes" with payload "\([0-9]*\)" received.*/\1/p' "$LN.out" | tr '\n' ' ' | sed 's/ $//'
}
# wait_note N SECONDS — until payload N has arrived
wait_note() {
	local deadline=$((SECONDS + $2))
	while ((SECONDS < deadline)); do
		case " $(notes) " in *" $1 "*) return 0 ;; esac
	done
	echo "# notifications so far: '$(notes)', wanted $1"
	return 1
}
maxgen() { q $DB "SELECT coalesce(max(generation), 0) FROM mlplat.route_generations"; }
# Generations are numbered across projects, and a project an earlier script left live may
# publish one at any time (its endpoint vanished with that script's stand-in), so every
# check of what gw published reads gw's own generations.
gwgen() { q $DB "SELECT coalesce(max(generation), 0) FROM mlplat.route_generations WHERE project_id = $GW"; }
# gw_notified N... — how many of these notification payloads are generations of gw
gw_notified() {
	[ $# -gt 0 ] || { echo 0; return; }
	q $DB "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $GW AND generation IN ($(echo "$@" | tr ' ' ','))"
}
# the project's routes of its newest generation: "model/deployment@revision=endpoint ..."
gw_routes() {
	q $DB "SELECT coalesce(string_agg(model || '/' || deployment || '@' || revision || '=' || endpoint, ' ' ORDER BY model, deployment), '')
	       FROM mlplat.route_table($1) WHERE project = 'gw'"
}

e2e_standin $DB
on_exit 'listener_stop; q $DB "ALTER SYSTEM RESET mlplat.deploy_deadline" >/dev/null; q $DB "SELECT pg_reload_conf()" >/dev/null'

q $DB "SELECT mlplat.create_project('gw', 4); SELECT mlplat.add_artifact_location('gw', 's3://models/')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'gw'" READY 20
tap_ok $? "project gw is READY"
GW=$(q $DB "SELECT id FROM mlplat.projects WHERE name = 'gw'")   # other scripts' deployments share names
for m in iris wine; do
	q $DB "SELECT mlplat.register_model_version('gw', '$m', '1', 's3://models/$m/1', '$(standin_artifact "s3://models/$m/1" "$m")', 'kserve-sklearnserver', 'sklearn')" >/dev/null
	q $DB "SELECT mlplat.set_model_stage('gw', '$m', '1', 'CHAMPION')" >/dev/null
done
listener_start
BASE=$(maxgen)

# --- deploy -> READY: one new generation of gw (G1), and the listener is told that number
q $DB "SELECT mlplat.deploy('gw', 'iris', 'iris', '1', 'kserve-sklearnserver')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'" READY 20
tap_ok $? "iris converges to READY"
G1=$(gwgen)
tap_is "$(q $DB "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $GW AND generation > $BASE")/$((G1 > BASE))" 1/1 \
	"READY published exactly one generation of gw ($G1, after $BASE)"
wait_note "$G1" 5
tap_ok $? "LISTEN mlplat_routes is told generation $G1"
tap_is "$(gw_routes "$G1")" "iris/iris@1=http://iris.mlp-gw.example.com" "generation $G1 routes iris to its endpoint and revision"
tap_is "$(q $DB "SELECT string_agg(model || '=' || endpoint, ' ') FROM mlplat.routes WHERE project = 'gw'")" \
	"iris=http://iris.mlp-gw.example.com" "mlplat.routes shows the current generation"

# --- steady state: resyncs compare everything and publish nothing
g0=$(gwgen); n0=$(notes); w0=$(writes_count namespace=mlp-gw)
sleep 5   # the test cluster resyncs every 2 s
tap_same "$g0" "$(gwgen)" "steady resyncs: no new generation of gw ($g0)"
n1=$(notes)
tap_same 0 "$(gw_notified ${n1#"$n0"})" "steady resyncs: no notification of a gw generation (since '$n0': '${n1#"$n0"}')"
tap_same "$w0" "$(writes_count namespace=mlp-gw)" "steady resyncs: no write at the stand-in in gw's namespace ($w0)"

# --- a second model: one more generation of gw (G2) holds both
q $DB "SELECT mlplat.deploy('gw', 'wine', 'wine', '1', 'kserve-sklearnserver')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'wine'" READY 20
tap_ok $? "wine converges to READY"
G2=$(gwgen)
tap_is "$(q $DB "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $GW AND generation > $G1")/$((G2 > G1))" 1/1 \
	"the second READY published exactly one more generation of gw ($G2)"
wait_note "$G2" 5
tap_ok $? "the listener is told generation $G2"
tap_is "$(gw_routes "$G2")" "iris/iris@1=http://iris.mlp-gw.example.com wine/wine@1=http://wine.mlp-gw.example.com" \
	"generation $G2 routes both models"
tap_is "$(gw_routes "$G1")" "iris/iris@1=http://iris.mlp-gw.example.com" "generation $G1 is unchanged (immutable)"

# --- forged notifications (issue 18, finding 6): any login may NOTIFY mlplat_routes, so the
#     payload is a wake-up hint and route_table() the only truth.  gateway_note is the gateway
#     of docs/api.md#routes-for-gateways: a payload that is not a number, or is at or below the
#     last generation it loaded, is ignored; a higher one makes it load route_table() (never
#     route_table(payload)), and its last generation comes from the database, never the payload.
GW_LOADS=0
gateway_load() {
	GW_TABLE=$(q $DB "SELECT coalesce(string_agg(model || '/' || deployment || '@' || revision || '=' || endpoint, ' ' ORDER BY model, deployment), '')
	                  FROM mlplat.route_table() WHERE project = 'gw'")
	GW_LAST=$(maxgen)
	GW_LOADS=$((GW_LOADS + 1))
}
gateway_note() {
	case "$1" in ''|*[!0-9]*) return 0 ;; esac
	[ "$1" -le "$GW_LAST" ] && return 0
	gateway_load
}
gateway_load
served=$GW_TABLE; last=$GW_LAST; loads=$GW_LOADS
q $DB "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gw_forger') THEN CREATE ROLE gw_forger; END IF; END \$\$" >/dev/null
FORGED_AT=$(notes | wc -w)   # the three forged payloads follow the notes so far
for forged in "$G1" "$last" 999999999; do
	q $DB "SET ROLE gw_forger; NOTIFY mlplat_routes, '$forged'" >/dev/null
done
wait_note 999999999 5
tap_ok $? "a login without any right can NOTIFY mlplat_routes (the listener got '$(notes)')"
tap_is "$(gw_routes "$G1")" "iris/iris@1=http://iris.mlp-gw.example.com" \
	"the old protocol (route_table(payload)) would serve generation $G1 again: wine gone"
for n in $(notes); do gateway_note "$n"; done
tap_is "$GW_TABLE" "$served" "the gateway still serves the current table after the forged numbers ($GW_TABLE)"
tap_is "$GW_LAST/$((GW_LOADS - loads))" "$last/1" \
	"numbers at or below its last generation were ignored; the forged 999999999 cost one reload and did not become its last generation"
tap_same "$G2/0" "$(gwgen)/$(q $DB "SELECT count(*) FROM mlplat.route_generations WHERE generation = 999999999")" \
	"a forged number is no generation: gw's are unchanged and there is no generation 999999999"

# --- drift policy report: DRIFTED with the paths, never re-applied
q $DB "SELECT mlplat.set_drift_policy('gw', 'iris', 'report')" >/dev/null
tap_is "$(q $DB "SELECT drift_policy FROM mlplat.deployment_status WHERE project = 'gw' AND deployment = 'iris'")" report "deployment_status shows the policy"
admin POST edit '{"resource":"inferenceservices","namespace":"mlp-gw","name":"iris","patch":{"spec":{"predictor":{"minReplicas":3}}}}' >/dev/null
seq0=$(admin GET requests | python3 -c 'import json,sys; print(max([e["seq"] for e in json.load(sys.stdin)["items"]] or [0]))')
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'" DRIFTED 10
tap_ok $? "report: the out-of-band change is DRIFTED"
tap_is "$(q $DB "SELECT drift_paths::text FROM mlplat.deployment_status WHERE project = 'gw' AND deployment = 'iris'")" '["spec.predictor.minReplicas"]' \
	"deployment_status shows the differing path"
sleep 5   # two resyncs and follow-ups: nothing may repair it
tap_is "$(q $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'")" DRIFTED "report: still DRIFTED after resyncs"
# (the same filter without "since" finds the deploy's writes: a filter that matched
# nothing, or a failed read, would also print 0)
[ "$seq0" -gt 0 ] 2>/dev/null && [ "$(admin GET "requests?write=true&name=iris" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" -gt 0 ] 2>/dev/null
tap_ok $? "report: the stand-in's log shows earlier writes to iris (the filter matches)"
tap_is "$(admin GET "requests?since=$seq0&write=true&name=iris" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" 0 \
	"report: the stand-in saw no write to iris"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris')")" 0 \
	"report: the ledger shows no repair"
tap_same "$G2" "$(gwgen)" "a drifted endpoint keeps its route: no new generation of gw"
q $DB "SELECT status_reason FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'" | sed 's/^/# reason: /'

# --- back to repair: repaired at once (not at the next resync), same revision
t0=$(date +%s%N)
q $DB "SELECT mlplat.set_drift_policy('gw', 'iris', 'repair')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'" READY 15
tap_ok $? "repair: DRIFTED -> READY"
echo "# set_drift_policy(repair) -> READY in $((($(date +%s%N) - t0) / 1000000)) ms"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'deployments' AND action = 'REPAIR' AND outcome = 'OK' AND entity_id = (SELECT id FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris')")" 1 \
	"repair: the ledger shows one REPAIR"
tap_is "$(q $DB "SELECT latest_revision FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'")" 1 "repair created no revision"
tap_is "$(kube GET /apis/serving.kserve.io/v1beta1/namespaces/mlp-gw/inferenceservices/iris | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["predictor"]["minReplicas"])')" 1 \
	"repair: the cluster object is back to minReplicas 1"

# --- KServe takes readiness away (the model fails to load) and gives it back
g1=$(gwgen)
admin POST kserve/storage '{"uri":"s3://models/wine/1","bad":true}' >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'wine'" FAILED 10
tap_ok $? "wine: Ready=False -> FAILED"
wait_for $DB "SELECT count(*) FROM mlplat.route_table() WHERE project = 'gw' AND deployment = 'wine'" 0 5
tap_ok $? "wine left READY: the newest generation has no route to it"
admin POST kserve/storage '{"uri":"s3://models/wine/1","bad":false}' >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'wine'" READY 10
tap_ok $? "wine READY again"
g2=$(gwgen)
wait_note "$g2" 5
tap_ok $? "the listener is told generation $g2"
tap_is "$(gw_routes "$g2")" "iris/iris@1=http://iris.mlp-gw.example.com wine/wine@1=http://wine.mlp-gw.example.com" "generation $g2 routes wine again"
[ "$g2" -gt "$((g1 + 1))" ]
tap_ok $? "leaving READY and coming back made at least two generations ($g1 -> $g2)"

# --- a redeploy keeps routing to the revision KServe still serves until the new one is READY
admin PUT config '{"readyDelayMs": 2500}' >/dev/null
q $DB "SELECT mlplat.deploy('gw', 'iris', 'iris', '1', 'kserve-sklearnserver', 0, 1, 2)" >/dev/null
sleep 1
tap_is "$(q $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'")/$(gwgen)" \
	"DEPLOYING/2/$g2" "redeploy: DEPLOYING revision 2, and no generation of gw was published"
tap_is "$(q $DB "SELECT string_agg(deployment || '@' || revision, ' ') FROM mlplat.routes WHERE project = 'gw' AND model = 'iris'")" \
	"iris@1" "redeploy: the route stays on revision 1 while revision 2 is not ready"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'iris'" READY 15
tap_ok $? "redeploy: revision 2 READY"
wait_for $DB "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $GW AND generation > $g2" 1 5
tap_ok $? "redeploy: READY on revision 2 published one generation of gw"
g2=$(gwgen)
wait_note "$g2" 5
tap_ok $? "redeploy: the listener is told generation $g2"
tap_is "$(gw_routes "$g2")" "iris/iris@2=http://iris.mlp-gw.example.com wine/wine@1=http://wine.mlp-gw.example.com" \
	"generation $g2 moves the route to revision 2"
admin PUT config '{"readyDelayMs": 300}' >/dev/null

# --- undeploy: the route goes with the intent (the endpoint must not take new traffic)
q $DB "SELECT mlplat.undeploy('gw', 'wine')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.route_generations WHERE project_id = $GW AND generation > $g2" 1 5
tap_ok $? "undeploy published one generation of gw"
g3=$(gwgen)
wait_note "$g3" 5
tap_ok $? "undeploy: the listener is told generation $g3"
tap_is "$(gw_routes "$g3")" "iris/iris@2=http://iris.mlp-gw.example.com" "generation $g3 routes iris only"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'wine'" DELETED 15
tap_ok $? "wine ends DELETED"
# every notification but the three forged above matches a generation, in order, no duplicates
real_notes() { notes | tr ' ' '\n' | awk -v a="$FORGED_AT" 'NR <= a || NR > a + 3' | tr '\n' ' ' | sed 's/ $//'; }
tap_same "$(q $DB "SELECT string_agg(generation::text, ' ' ORDER BY generation) FROM mlplat.route_generations WHERE generation > $BASE")" "$(real_notes)" \
	"the listener got exactly the generations, in order"

# --- deploy deadline: a revision that never becomes ready
q $DB "ALTER SYSTEM SET mlplat.deploy_deadline = '3s'" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
admin PUT config '{"readyDelayMs": 600000}' >/dev/null
gd=$(gwgen)
t0=$(date +%s%N)
q $DB "SELECT mlplat.deploy('gw', 'slow', 'wine', '1', 'kserve-sklearnserver')" >/dev/null
sleep 1.5
tap_is "$(q $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'")" DEPLOYING "before the deadline: DEPLOYING"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'" FAILED 10
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
tap_ok $rc "past the deadline: FAILED"
[ "$ms" -ge 3000 ]
tap_ok $? "not before the deadline ($ms ms after the deploy)"
echo "# deploy -> FAILED at the 3 s deadline in $ms ms"
tap_is "$(q $DB "SELECT status_reason FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'")" \
	"revision 1 was not READY within the deploy deadline of 3 s (mlplat.deploy_deadline)" "the reason names the deadline"
# a new intent starts a new deadline
t0=$(date +%s%N)
q $DB "SELECT mlplat.deploy('gw', 'slow', 'wine', '1', 'kserve-sklearnserver', 0, 1, 2)" >/dev/null
sleep 1.5
tap_is "$(q $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'")" DEPLOYING/2 \
	"a new deploy waits again (new deadline)"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'" FAILED 10
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 0 ] && [ "$ms" -ge 3000 ]
tap_ok $? "... and is FAILED at its own deadline ($ms ms after the second deploy)"
q $DB "SELECT mlplat.rollback_deployment('gw', 'slow')" >/dev/null
sleep 1.5
tap_is "$(q $DB "SELECT status || '/' || desired_revision FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'")" DEPLOYING/1 \
	"a rollback starts a new deadline too"
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'" FAILED 10
tap_ok $? "... and fails at it"
# the deployment's own deadline overrides the setting (back at its 10 min default)
q $DB "ALTER SYSTEM RESET mlplat.deploy_deadline" >/dev/null
q $DB "SELECT pg_reload_conf()" >/dev/null
q $DB "SELECT mlplat.set_deploy_deadline('gw', 'slow', '2 seconds')" >/dev/null
t0=$(date +%s%N)
q $DB "SELECT mlplat.deploy('gw', 'slow', 'wine', '1', 'kserve-sklearnserver', 0, 1, 3)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'" FAILED 10
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 0 ] && [ "$ms" -ge 2000 ]
tap_ok $? "set_deploy_deadline: FAILED at the deployment's own 2 s deadline ($ms ms), not the 10 min setting"
tap_is "$(q $DB "SELECT status_reason FROM mlplat.deployments WHERE project_id = $GW AND name = 'slow'")" \
	"revision 3 was not READY within the deploy deadline of 2 s (set_deploy_deadline)" "the reason names the deployment's deadline"
tap_same "$gd" "$(gwgen)" "a deployment that never became ready never got a route"
admin PUT config '{"readyDelayMs": 300}' >/dev/null

# leave nothing live for the scripts that run after this one against their own stand-in
listener_stop
q $DB "SELECT mlplat.undeploy('gw', d) FROM unnest(ARRAY['iris', 'slow']) d" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
              WHERE p.name = 'gw' AND d.status <> 'DELETED'" 0 20
tap_ok $? "undeploy: every deployment of gw ends DELETED"
tap_is "$(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-gw/inferenceservices/iris) $(kube_code /apis/serving.kserve.io/v1beta1/namespaces/mlp-gw/inferenceservices/slow)" \
	"404 404" "... and both InferenceServices are gone from the stand-in"
q $DB "SELECT mlplat.delete_project('gw')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'gw'" DELETED 20
tap_ok $? "project gw is deleted once its deployments are gone"
# (an empty answer is the expected one here, so the query must be seen to succeed)
last=$(gw_routes "")
rc=$?
[ "$rc" = 0 ] && [ -z "$last" ] && [ "$(gwgen)" -gt "$gd" ] 2>/dev/null
tap_ok $? "its last generation (after $gd) routes nothing (query exit $rc, routes '$last')"
tap_done
