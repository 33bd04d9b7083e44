#!/usr/bin/env bash
# Model Lab acceptance 13, the kill -9 case: the lab_runs leader is killed with SIGKILL while its
# Job create is applied at the stand-in and the answer never read (a crash restarts every
# backend, so this runs on a private cluster of its own).  After the crash restart the new
# leader finds the Job (the write-ahead note survived in the table, the LIST shows it), adopts
# it (ledger ADOPT), creates no second Job or Secret, and the run goes on under attempt 1 to
# SUCCEEDED.  Every wait is for an observable event, bounded and generous (ASan).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$SRC/test/lib/lab.sh"
SD=$WORK/standin-lab-crash
e2e_standin
e2e_own_cluster lab_crash
PP=$(free_port)
# one database cluster drives this stand-in alone: the Lease fence is not needed (and off)
cluster_start "$WORK/data" "$PP" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" \
	"mlplat.leader_retry_interval = '250ms'" "mlplat.resync_interval = '1s'" "${STANDIN_CONF[@]}" \
	"mlplat.lease_fence = off" "mlplat.lab_payload_bucket = 'artifacts'"
tap_ok $? "private cluster started against the stand-in"
pq() { PGHOST=$WORK PGPORT=$PP $PSQL -d mlplat -c "$1"; }
pqu() { PGHOST=$WORK PGPORT=$PP $PSQL -d mlplat -U "$1" -c "$2"; }
wait_p() { PGHOST=$WORK PGPORT=$PP wait_for mlplat "$@"; }
PGHOST=$WORK PGPORT=$PP $PSQL -d postgres -c "CREATE DATABASE mlplat" >/dev/null
pq "CREATE EXTENSION mlplat" >/dev/null
pq "CREATE ROLE lc_owner LOGIN" >/dev/null
pq "SELECT mlplat.create_project('lc', 8, NULL, NULL, NULL, 'lc_owner')" >/dev/null
pq "SELECT mlplat.add_artifact_location('lc', 's3://artifacts/')" >/dev/null
wait_p "SELECT status FROM mlplat.projects WHERE name = 'lc'" READY 60
tap_ok $? "project lc is READY"
admin POST nodes '{"name":"gpu-c","gpus":8,"labels":{"mlplat.io/lab":"true","mlplat.io/accelerator":"nvidia-a100"}}' >/dev/null
pq "SELECT mlplat.register_lab_node('gpu-c', 'nvidia-a100', 8)" >/dev/null
wait_p "SELECT observed_ready FROM mlplat.lab_nodes WHERE name = 'gpu-c'" t 60
tap_ok $? "the lab Node is observed"
pqu lc_owner "SELECT mlplat.register_model_version('lc', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'custom')" >/dev/null
pqu lc_owner "SELECT mlplat.set_model_stage('lc', 'llm', '1', 'CANDIDATE')" >/dev/null
pqu lc_owner "SELECT mlplat.register_lab_profile('lc', 'vllm', jsonb_build_object('runtime_kind', 'vllm',
	'image', 'r.example/vllm@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'nvidia-a100',
	'families', '[\"text_generation\"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536))" >/dev/null
CAND=$(pq "SELECT id FROM mlplat.model_versions")
PROF=$(pq "SELECT id FROM mlplat.lab_profiles")
NODE=$(pq "SELECT id FROM mlplat.lab_nodes")
INST=$(pq "SELECT mlplat._instance_id()")
NS=mlp-lc
out_plan() {   # ID: the Job lab-ID-1 runs a few steps and writes its output object
	admin POST argo/plan "{\"kind\":\"job\",\"namespace\":\"$NS\",\"name\":\"lab-$1-1\",\"steps\":{\"*\":{\"ticks\":3,\"s3\":[{\"bucket\":\"artifacts\",\"key\":\"$INST/lab/$1/1/output.json\",\"content\":\"{\\\"ok\\\":1}\"}]}}}" >/dev/null
}
out_plan 1
pqu lc_owner "SELECT mlplat.start_lab_probe('lc', $CAND, repeat('a', 64), $PROF, $NODE, 'probe')" >/dev/null
wait_p "SELECT status FROM mlplat.lab_probes" PASSED 90
tap_ok $? "the probe PASSED"
wait_p "SELECT count(*) FROM mlplat.lab_leases" 0 60
tap_ok $? "the probe's lease is released"
pqu lc_owner "SELECT mlplat.approve_lab('lc', $CAND, repeat('a', 64), $PROF, $NODE, '{text_generation}', '{}', 10, '1 day')" >/dev/null
APPR=$(pq "SELECT id FROM mlplat.lab_approvals")

# the create is applied and its answer held; the leader is killed while it waits for it
ID=2
out_plan $ID
admin POST faults '{"method":"POST","path":"/namespaces/'"$NS"'/jobs$","hold":"after","times":1}' >/dev/null
victim=$(pq "SELECT pid FROM mlplat.reconciler_health WHERE kind = 'lab_runs' AND role = 'leader'")
tap_same "$ID" "$(pqu lc_owner "SELECT entity_id FROM mlplat.start_lab_run('lc', $CAND, repeat('a', 64), $PROF, $NODE, $APPR,
	'text_generation', '[{\"prompt\": \"hi\", \"max_tokens\": 4}]', '{}', 'crash-1')")" "run $ID admitted"
parked=0
for _ in $(seq 1 600); do
	[ "$(admin GET holds | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" = 1 ] && { parked=1; break; }
	sleep 0.1
done
tap_is "$parked" 1 "the leader's Job create is applied at the stand-in, its answer held"
kill -9 "$victim"
tap_ok $? "kill -9 of the lab_runs leader (pid $victim) while it waits for the answer"
admin POST holds/release '{"drop": true}' >/dev/null
wait_p "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID" "SUCCEEDED 1" 120
tap_ok $? "after the crash restart the run goes on to SUCCEEDED under attempt 1 (now: $(pq "SELECT status || ' ' || attempt FROM mlplat.lab_runs WHERE id = $ID"))"
tap_is "$(creates "Job/$NS/lab-$ID-1")/$(creates "Secret/$NS/lab-$ID-input")/$(kube_code "/apis/batch/v1/namespaces/$NS/jobs/lab-$ID-2")" \
	"1/1/404" "exactly one Job and one Secret were created; no second attempt"
tap_is "$(pq "SELECT string_agg(action || ':' || outcome, ' ' ORDER BY id) FROM mlplat.reconcile_ledger
              WHERE kind = 'lab_runs' AND entity_id = $ID AND detail->>'note' = '$NS/lab-$ID-1' AND action IN ('CREATE', 'ADOPT')")" \
	"ADOPT:OK" "ledger: the Job adopted, no answered CREATE"
grep -q 'all server processes terminated; reinitializing' "$WORK/data.log"
tap_ok $? "... and the server really did restart every backend"
tap_done
