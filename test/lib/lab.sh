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
