# test/lib/lab.sh — what the Model Lab e2e scripts (test/e2e/lab*.sh) ask of the database and
# the stand-in, written once.  Source after e2e.sh; the functions read DB, NS (the project's
# namespace) and INST (mlplat._instance_id()) when called.
#
#   next_id                   the id the next lab run (or probe) will get
#   plan JOB STEP_JSON        how the stand-in runs Job JOB (ticks, exitCode, failReason,
#                             pending, and the s3 objects it writes when it completes)
#   out_obj RUN ATTEMPT TEXT  an s3 entry of a plan: the output object of that attempt
#   status RUN                "STATUS[ REASON]" of a lab run
#   creates KIND/NS/NAME      the stored creates of one object at the stand-in
#   lab_fixture [--dev DEV] OWNER NODE...
#                             the lab's payload bucket (mlplat.lab_payload_bucket 'artifacts',
#                             reset at exit), project P (owner OWNER, DEV a developer,
#                             artifacts under s3://artifacts/, READY), the lab Nodes NODE...
#                             (8 A100 each, observed), a CANDIDATE model version and a vllm lab
#                             profile; sets PID CAND PROF INST SHA, asowner SQL (as OWNER) and
#                             asdev SQL (as DEV); two TAP lines.  Reads DB, P.
#   lab_model OWNER [DEV]     that model version and profile alone (no Nodes, no TAP line)
#   lab_node_id NAME          the id of lab node NAME
#   lab_probe NODE_ID KEY     a probe of the fixture's candidate and profile on that node, made
#                             with start_lab_probe (as OWNER; its Job planned to write an
#                             output), until it PASSED (the status of a wait: assert it)

next_id() { q $DB "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM mlplat.lab_runs_id_seq"; }

plan() {
	admin POST argo/plan "{\"kind\":\"job\",\"namespace\":\"$NS\",\"name\":\"$1\",\"steps\":{\"*\":$2}}" >/dev/null
}

out_obj() {
	echo "{\"bucket\":\"artifacts\",\"key\":\"$INST/lab/$1/$2/output.json\",\"content\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$3")}"
}

status() { q $DB "SELECT status || coalesce(' ' || reason_code, '') FROM mlplat.lab_runs WHERE id = $1"; }

creates() {
	admin GET writes | python3 -c 'import json,sys; w=json.load(sys.stdin); w=w.get("writes",w); print(w.get("'"$1"'",{}).get("create",0))'
}

lab_fixture() {
	local owner n names
	LAB_DEV=
	[ "$1" = --dev ] && { LAB_DEV=$2; shift 2; }
	owner=$1
	shift
	$PSQL -d $DB -c "ALTER SYSTEM SET mlplat.lab_payload_bucket = 'artifacts'" -c "SELECT pg_reload_conf()" >/dev/null
	on_exit "$PSQL -d $DB -c \"ALTER SYSTEM RESET mlplat.lab_payload_bucket\" -c \"SELECT pg_reload_conf()\" >/dev/null"
	q $DB "CREATE ROLE $owner LOGIN" >/dev/null 2>&1
	q $DB "SELECT mlplat.create_project('$P', 8, NULL, NULL, NULL, '$owner')" >/dev/null
	q $DB "SELECT mlplat.add_artifact_location('$P', 's3://artifacts/')" >/dev/null
	if [ -n "$LAB_DEV" ]; then
		q $DB "CREATE ROLE $LAB_DEV LOGIN" >/dev/null 2>&1
		q $DB "SELECT mlplat.grant_role('$P', '$LAB_DEV', 'developer')" >/dev/null
	fi
	wait_for $DB "SELECT status FROM mlplat.projects WHERE name = '$P'" READY 60
	tap_ok $? "project $P is READY"
	for n in "$@"; do
		admin POST nodes '{"name":"'"$n"'","gpus":8,"labels":{"mlplat.io/lab":"true","mlplat.io/accelerator":"nvidia-a100"}}' >/dev/null
		q $DB "SELECT mlplat.register_lab_node('$n', 'nvidia-a100', 8)" >/dev/null
	done
	names=$(printf "'%s'," "$@")
	wait_for $DB "SELECT count(*) FROM mlplat.lab_nodes WHERE name IN (${names%,}) AND observed_ready AND observed_gpus = 8
	              AND observed_accelerator = 'nvidia-a100'" $# 60
	tap_ok $? "the worker observed the lab Nodes $* (Ready, 8 GPUs, accelerator label)"
	lab_model "$owner" "$LAB_DEV"
}

# lab_model OWNER [DEV] — in project P: a CANDIDATE model version llm/1 and a vllm lab
# profile; sets PID CAND PROF INST SHA, asowner SQL (as OWNER) and asdev SQL (as DEV).
lab_model() {
	LAB_OWNER=$1
	LAB_DEV=${2:-}
	asowner() { $PSQL -d $DB -U "$LAB_OWNER" -c "$1"; }
	asdev() { $PSQL -d $DB -U "$LAB_DEV" -c "$1"; }
	asowner "SELECT mlplat.register_model_version('$P', 'llm', '1', 's3://artifacts/llm/1', repeat('a', 64), 'vllm', 'custom')" >/dev/null
	asowner "SELECT mlplat.set_model_stage('$P', 'llm', '1', 'CANDIDATE')" >/dev/null
	asowner "SELECT mlplat.register_lab_profile('$P', 'vllm', jsonb_build_object('runtime_kind', 'vllm',
		'image', 'r.example/vllm@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'nvidia-a100',
		'families', '[\"text_generation\"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536))" >/dev/null
	# (other scripts share the database: every lookup is scoped to this project)
	PID=$(q $DB "SELECT id FROM mlplat.projects WHERE name = '$P'")
	CAND=$(q $DB "SELECT id FROM mlplat.model_versions WHERE project_id = $PID")
	PROF=$(q $DB "SELECT id FROM mlplat.lab_profiles WHERE project_id = $PID")
	INST=$(q $DB "SELECT mlplat._instance_id()")
	SHA=$(printf 'a%.0s' $(seq 64))
}

lab_node_id() { q $DB "SELECT id FROM mlplat.lab_nodes WHERE name = '$1'"; }

lab_probe() {
	local id
	id=$(next_id)
	plan "lab-$id-1" "{\"ticks\":1,\"s3\":[$(out_obj "$id" 1 '{"probe":"ok"}')]}"
	asowner "SELECT mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $1, '$2')" >/dev/null
	wait_for $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $id" PASSED 60
}
