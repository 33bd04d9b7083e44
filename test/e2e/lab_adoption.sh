#!/usr/bin/env bash
# Look-alike lab Jobs and Secrets (issue 18, finding 5): someone who may write to a project's
# namespace plants an object under the name a lab run uses:
#  - a Secret lab-<id>-input with mlplat's lab labels of this installation and another content
#    id (the worker's LIST shows it), planted while the run's own create is held;
#  - a Secret lab-<id>-input without labels, planted before the run starts (no LIST shows it:
#    only the create's 409 finds it);
#  - a Job lab-<id>-1 with mlplat's labels and another content id (LIST; planted while held);
#  - a Job lab-<id>-1 without labels (the create's 409 finds it).
# A look-alike is never deleted either: a labelled Job lab-<id>-1 with another content id,
# planted while the run's create is held (its 409 finds it), survives the run's cancel (the run's own Job never existed:
# CANCELLED, status_reason names the look-alike, ledger DELETE CONFLICT) and the orphan
# teardown of the resyncs after it (ledger ORPHAN_TEARDOWN CONFLICT), while the run's own
# input Secret, whose content id the database knows, is torn down (ORPHAN_TEARDOWN OK).
# Each time: ledger ADOPT CONFLICT about that object, never ADOPT OK; the run stays DISPATCHED
# and its status_reason says the object is not adopted and not touched; no Job is created over
# a Secret that is not the run's input; no PATCH, PUT or DELETE reaches the planted object
# (stand-in request log) and it is unchanged.  Once the planted object is removed, the run
# creates its own and SUCCEEDS.  Every wait is for an observable outcome.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
SD=$WORK/standin-lab-adoption
e2e_standin mlplat
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
DB=mlplat
P=la
NS=mlp-$P

lab_fixture la_owner gpu-la
NODE=$(lab_node_id gpu-la)

ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"probe":"ok"}')]}"
asowner "SELECT mlplat.start_lab_probe('$P', $CAND, '$SHA', $PROF, $NODE, 'la-probe')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $ID" PASSED 90
tap_ok $? "a probe on the node PASSED"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $NODE" 0 60
tap_ok $? "the probe's lease is released"
asowner "SELECT mlplat.approve_lab('$P', $CAND, '$SHA', $PROF, $NODE, '{text_generation}', '{\"max_attempts\": 1}', 100, '1 day')" >/dev/null
APR=$(q $DB "SELECT id FROM mlplat.lab_approvals WHERE project_id = $PID AND node_id = $NODE")

labels() {   # RUN -> mlplat's lab labels of this installation, as a render carries them
	echo "{\"app.kubernetes.io/managed-by\":\"mlplat\",\"mlplat.io/instance\":\"$INST\",\"app.kubernetes.io/component\":\"lab-worker\",\"mlplat.io/project\":\"$P\",\"mlplat.io/lab-run\":\"$1\",\"mlplat.io/purpose\":\"run\"}"
}
meta() {   # NAME LABELLED RUN -> metadata of a planted object
	if [ "$2" = yes ]; then
		echo "{\"name\":\"$1\",\"labels\":$(labels "$3"),\"annotations\":{\"mlplat.io/content-id\":\"$(printf 'f%.0s' $(seq 64))\"}}"
	else
		echo "{\"name\":\"$1\",\"annotations\":{\"planted\":\"yes\"}}"
	fi
}
plant_secret() {   # NAME LABELLED RUN
	kube POST "/api/v1/namespaces/$NS/secrets" "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":$(meta "$1" "$2" "$3"),
		\"data\":{\"inputs.json\":\"$(printf '[{"prompt":"planted"}]' | base64 -w0)\"}}" >/dev/null
}
plant_job() {   # NAME LABELLED RUN
	kube POST "/apis/batch/v1/namespaces/$NS/jobs" "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":$(meta "$1" "$2" "$3"),
		\"spec\":{\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"w\",\"image\":\"registry.example/evil\"}]}}}}" >/dev/null
}
path_of() {   # secret|job NAME
	if [ "$1" = secret ]; then echo "/api/v1/namespaces/$NS/secrets/$2"; else echo "/apis/batch/v1/namespaces/$NS/jobs/$2"; fi
}
# the object as planted, less what the API server keeps up to date
snapshot() { kube GET "$(path_of "$1" "$2")" | python3 -c 'import json,sys; o=json.load(sys.stdin); m=o["metadata"]; print(json.dumps([m.get("uid"), m.get("labels"), m.get("annotations"), o.get("data"), o.get("spec", {}).get("template")], sort_keys=True))'; }
# PATCH, PUT or DELETE requests the stand-in logged for one object name in the namespace
changes_to() {
	admin GET "requests?namespace=$NS&name=$1" | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e["method"] in ("PATCH", "PUT", "DELETE")))'
}

n=0
for c in "secret yes" "secret no" "job yes" "job no"; do
	read -r kind labelled <<<"$c"
	n=$((n + 1))
	ID=$(next_id)
	if [ "$kind" = secret ]; then NAME=lab-$ID-input; else NAME=lab-$ID-1; fi
	what="$kind $NAME ($([ "$labelled" = yes ] && echo "mlplat's labels, another content id" || echo "no labels"))"
	start() {
		asowner "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APR,
			'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '{}', 'la-$n')"
	}
	if [ "$labelled" = yes ]; then
		# planted once the run is claimed (earlier, a resync deletes it as an orphan of ours):
		# the worker's create of that object is held before it reaches the API, the look-alike
		# planted, and the create dropped unapplied; the next pass finds the look-alike
		hold_rule '{"method":"POST","path":"/namespaces/'"$NS"'/'"$kind"'s$","hold":"before","times":1}' >/dev/null
		got=$(start)
		wait_held 1 60
		tap_ok $? "$kind: the run's create of $NAME is held before it reaches the API"
		"plant_$kind" "$NAME" "$labelled" "$ID"
		before=$(snapshot "$kind" "$NAME")
		release_holds drop
	else
		# no LIST shows it: planted before the run starts, only the create's 409 finds it
		"plant_$kind" "$NAME" "$labelled" "$ID"
		before=$(snapshot "$kind" "$NAME")
		got=$(start)
	fi
	tap_is "$got" "$ID" "run $ID started; planted: $what"
	wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID
	              AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = '$NS/$NAME'" t 60
	tap_ok $? "$kind: ledger ADOPT CONFLICT about $NS/$NAME"
	passes_after $DB lab_runs 2
	tap_ok $? "$kind: two more passes of the lab_runs worker"
	tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID AND action = 'ADOPT' AND outcome <> 'CONFLICT'")" 0 \
		"$kind: never adopted (no ADOPT but CONFLICT)"
	tap_is "$(q $DB "SELECT status || ' | ' || (status_reason LIKE '%$NS/$NAME exists but is not this run''s: %; not adopted, not touched')
	                 FROM mlplat.lab_run_status WHERE lab_run_id = $ID")" "DISPATCHED | true" \
		"$kind: the run stays DISPATCHED and its status_reason says not adopted, not touched ($(q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID"))"
	if [ "$kind" = secret ]; then
		tap_is "$(creates "Job/$NS/lab-$ID-1")/$(kube_code "$(path_of job "lab-$ID-1")")" 0/404 "secret: no Job is created over a Secret that is not the run's input"
	fi
	tap_is "$(changes_to "$NAME")/$(snapshot "$kind" "$NAME")" "0/$before" "$kind: no PATCH, PUT or DELETE reached $NAME; it is as planted"
	# the planted object goes: the run makes its own and runs to the end
	plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"ok":true}')]}"
	kube DELETE "$(path_of "$kind" "$NAME")" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
	wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" SUCCEEDED 90
	tap_ok $? "$kind: once the planted object is gone the run creates its own and SUCCEEDS (now: $(status "$ID"))"
	wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $NODE" 0 60
	tap_ok $? "$kind: the node lease is released"
done

# --- a labelled look-alike Job survives the run's cancel and the orphan teardown after it
ID=$(next_id)
NAME=lab-$ID-1
# the run's Job create is held before it reaches the API (its input Secret is made), the
# look-alike planted, the create let through: its 409 finds the look-alike
hold_rule '{"method":"POST","path":"/namespaces/'"$NS"'/jobs$","hold":"before","times":1}' >/dev/null
got=$(asowner "SELECT entity_id FROM mlplat.start_lab_run('$P', $CAND, '$SHA', $PROF, $NODE, $APR,
	'text_generation', '[{\"prompt\": \"Say hi.\", \"max_tokens\": 16}]', '{}', 'la-cancel')")
wait_held 1 60
tap_ok $? "cancel: the run's create of $NAME is held before it reaches the API"
plant_job "$NAME" yes "$ID"
before=$(snapshot job "$NAME")
release_holds
tap_is "$got/$(kube_code "$(path_of secret "lab-$ID-input")")" "$ID/200" \
	"run $ID started and made its input Secret; planted: a labelled Job $NAME with another content id"
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID
              AND action = 'ADOPT' AND outcome = 'CONFLICT' AND detail->>'note' = '$NS/$NAME'" t 60
tap_ok $? "cancel: ledger ADOPT CONFLICT about $NS/$NAME"
tap_is "$(asowner "SELECT status FROM mlplat.cancel_lab_run('$P', $ID)")" CANCEL_REQUESTED "cancel: CANCEL_REQUESTED"
wait_for $DB "SELECT status FROM mlplat.lab_runs WHERE id = $ID" CANCELLED 90
tap_ok $? "cancel: the run's own Job never existed: CANCELLED (now: $(status "$ID"))"
tap_is "$(q $DB "SELECT status_reason LIKE 'job $NS/$NAME exists but is not this run''s: %; not deleted, not touched' FROM mlplat.lab_runs WHERE id = $ID")" t \
	"cancel: its status_reason names the look-alike left untouched ($(q $DB "SELECT status_reason FROM mlplat.lab_runs WHERE id = $ID"))"
tap_is "$(q $DB "SELECT count(*) > 0 FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND entity_id = $ID
                 AND action = 'DELETE' AND outcome = 'CONFLICT' AND detail->>'note' = '$NS/$NAME'")" t \
	"cancel: ledger DELETE CONFLICT about $NS/$NAME"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases WHERE node_id = $NODE" 0 60
tap_ok $? "cancel: the node lease is released"
# no run claims either name now: the resyncs judge both as orphans
wait_kube_gone "$(path_of secret "lab-$ID-input")" 60
tap_ok $? "orphans: the run's own input Secret is torn down"
wait_for $DB "SELECT string_agg(DISTINCT outcome, ' ') FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs'
              AND action = 'ORPHAN_TEARDOWN' AND detail->>'note' = '$NS/lab-$ID-input'" OK 30
tap_ok $? "orphans: ledger ORPHAN_TEARDOWN OK for the Secret"
wait_for $DB "SELECT count(*) >= 2 FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND action = 'ORPHAN_TEARDOWN'
              AND outcome = 'CONFLICT' AND detail->>'note' = '$NS/$NAME'" t 60
tap_ok $? "orphans: two resyncs report the look-alike Job (ledger ORPHAN_TEARDOWN CONFLICT)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconcile_ledger WHERE kind = 'lab_runs' AND detail->>'note' = '$NS/$NAME'
                 AND outcome NOT IN ('CONFLICT')")" 0 "orphans: no write to the look-alike in the ledger"
tap_is "$(changes_to "$NAME")/$(snapshot job "$NAME")" "0/$before" "no PATCH, PUT or DELETE reached $NAME; it is as planted"
tap_done
