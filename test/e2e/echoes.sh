#!/usr/bin/env bash
# test/e2e/echoes.sh — the test kind "echoes" (test/kinds/), built by docs/reconcilers.md
# "Adding a kind" and nothing else, reconciled end to end against the stand-in: its leader
# idles until its SQL (the extension mlplat_test) is installed; then a ConfigMap per row is
# created, updated, repaired after a change and after a removal outside mlplat, deleted;
# another's object under its name is a conflict and is not touched; a create whose answer
# a terminated leader never recorded is noted before it is sent and adopted by the next
# leader; the seam check and the state machine hold for it as for every kind, and a status
# the library does not know (written past both) fails the pass by name instead of being misread.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/writeback.sh"
if [ "${MLPLAT_TEST_KINDS:-0}" != 1 ]; then
	echo "1..0 # SKIP a release build (MLPLAT_TEST_KINDS=0) has no test kinds"
	exit 0
fi
SD=$WORK/standin-echoes
DB=mlplat
NS=echo-ns
e2e_standin $DB
# The kind's SQL is dropped with the workers paused and no echoes pass running: dropped under a
# pass that had found the seam types in agreement, the pass failed on its write-back type
# ("refuses to run: type mlplat.echo_writeback does not match this library", one logged
# error at every run's end).  A paused worker says so only once its pass is over.
drop_test_kind() {
	release_holds drop
	q $DB "ALTER SYSTEM SET mlplat.workers_enabled = off" >/dev/null && q $DB "SELECT pg_reload_conf()" >/dev/null
	wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'echoes' AND role = 'leader'" 0 30 ||
		echo "# echoes still has a leader after 30 s: its SQL dropped under it"
	q $DB "DROP EXTENSION IF EXISTS mlplat_test" >/dev/null
	q $DB "DELETE FROM mlplat.unanswered_writes WHERE kind = 'echoes'" >/dev/null
	workers_resume $DB
}
on_exit drop_test_kind

health() { q $DB "SELECT role || ': ' || status FROM mlplat.reconciler_health WHERE kind = 'echoes' AND role IN ('leader', 'idle')"; }
status() { q $DB "SELECT status FROM mlplat.echoes WHERE namespace = '$NS' AND name = '$1'"; }
CM=/api/v1/namespaces/$NS/configmaps
cm_data() {   # the ConfigMap's data as sorted JSON, or "absent"
	kube GET "$CM/$1" | python3 -c 'import json,sys; o=json.load(sys.stdin)
print("absent" if o.get("kind") == "Status" else json.dumps(o.get("data", {}), sort_keys=True))'
}
wait_cm() { wait_says "$3" "$2" cm_data "$1"; }   # NAME EXPECTED SECONDS
notes() { q $DB "SELECT count(*) FROM mlplat.unanswered_writes WHERE kind = 'echoes' AND object = '$NS/$1'"; }

# --- the leader idles while the kind's SQL is not there, and runs once it is
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'echoes' AND role = 'idle'
              AND status = 'extension mlplat_test (this kind''s SQL) is not installed'" 1 30
tap_ok $? "without mlplat_test the echoes leader leads and idles, saying why ($(health))"
q $DB "CREATE EXTENSION mlplat_test"
tap_ok $? "CREATE EXTENSION mlplat_test (the test kind's SQL; only the test build installs it)"
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'echoes' AND role = 'leader'" 1 30
tap_ok $? "... then it reconciles ($(health))"

# --- create, update
kube POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "'$NS'"}}' >/dev/null
q $DB "SELECT mlplat.put_echo('$NS', 'e1', '{\"color\": \"red\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e1'" SYNCED 30
tap_ok $? "put_echo: the echo becomes SYNCED"
tap_is "$(cm_data e1)" '{"color": "red"}' "... its ConfigMap holds the row's data"
tap_is "$(kube GET "$CM/e1" | python3 -c 'import json,sys; l=json.load(sys.stdin)["metadata"]["labels"]
print(l.get("app.kubernetes.io/managed-by"), l.get("app.kubernetes.io/component"), l.get("mlplat.io/echo-id") == sys.argv[1], l.get("mlplat.io/instance") == sys.argv[2])' \
	"$(q $DB "SELECT id FROM mlplat.echoes WHERE name = 'e1'")" "$(q $DB "SELECT mlplat._instance_id()")")" \
	"mlplat echo True True" "... with mlplat's labels of this installation and the echo's id"
tap_is "$(ledger_of $DB echoes $NS/e1)/$(notes e1)" "CREATE:OK/0" "... the ledger has the create; no write-ahead note is left"
q $DB "SELECT mlplat.put_echo('$NS', 'e1', '{\"color\": \"blue\", \"size\": \"L\"}')" >/dev/null
wait_for $DB "SELECT status || ' ' || observed_generation FROM mlplat.echoes WHERE name = 'e1'" "SYNCED 2" 30
tap_ok $? "a new intent: SYNCED at generation 2"
tap_is "$(cm_data e1)" '{"color": "blue", "size": "L"}' "... the ConfigMap follows"
tap_is "$(ledger_of $DB echoes $NS/e1)" "CREATE:OK APPLY:OK" "... by an apply"

# --- drift: changed, then removed outside mlplat
# the change is read from the PATCH's answer: a later GET races the next pass (every 2 s here),
# which on a loaded machine has put the row's data back before the GET runs
patched=$(curl -s -X PATCH -H "Authorization: Bearer $STANDIN_TOKEN" -H 'Content-Type: application/merge-patch+json' \
	-d '{"data": {"color": "green"}}' "$STANDIN_URL$CM/e1" | python3 -c 'import json,sys
print(json.dumps(json.load(sys.stdin).get("data", {}), sort_keys=True))')
tap_is "$patched" '{"color": "green", "size": "L"}' "(the ConfigMap is changed outside mlplat)"
wait_cm e1 '{"color": "blue", "size": "L"}' 30
tap_ok $? "the next pass puts the row's data back"
tap_is "$(ledger_of $DB echoes $NS/e1)/$(status e1)" "CREATE:OK APPLY:OK REPAIR:OK/SYNCED" "... as a REPAIR; the echo stays SYNCED"
kube DELETE "$CM/e1" >/dev/null
wait_cm e1 '{"color": "blue", "size": "L"}' 30
tap_ok $? "a ConfigMap removed outside mlplat is made again"
tap_is "$(ledger_of $DB echoes $NS/e1)" "CREATE:OK APPLY:OK REPAIR:OK REPAIR:OK" "... as a REPAIR"

# --- another's ConfigMap under an echo's name
kube POST "$CM" '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e2", "namespace": "'$NS'"}, "data": {"x": "theirs"}}' >/dev/null
q $DB "SELECT mlplat.put_echo('$NS', 'e2', '{\"x\": \"ours\"}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e2'" FAILED 30
tap_ok $? "an echo whose name another's ConfigMap holds is FAILED"
[[ "$(q $DB "SELECT status_reason FROM mlplat.echoes WHERE name = 'e2'")" == *"exists but is not this echo's; not adopted, not touched"* ]]
tap_ok $? "... saying so"
tap_is "$(cm_data e2)/$(ledger_of $DB echoes $NS/e2)" '{"x": "theirs"}/ADOPT:CONFLICT' "... the object is untouched; the ledger has ADOPT/CONFLICT"

# --- write-ahead: the leader dies with its create applied and the answer in flight
hold_rule '{"method":"POST","path":"/namespaces/'$NS'/configmaps$","hold":"after","times":1}' >/dev/null
q $DB "SELECT mlplat.put_echo('$NS', 'e3', '{\"k\": \"v\"}')" >/dev/null
wait_held 1
tap_ok $? "the leader's create of e3 is held at the stand-in (applied, answer not sent)"
tap_is "$(q $DB "SELECT action FROM mlplat.unanswered_writes WHERE kind = 'echoes' AND object = '$NS/e3'")" CREATE \
	"... noted in mlplat.unanswered_writes, committed before it was sent"
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'echoes'")
workers_pause $DB
leader_kill $DB echoes
tap_is "$(status e3)" PENDING "the leader is terminated: the database does not know the ConfigMap exists"
workers_resume $DB
wait_new_leader $DB echoes "$epoch"
tap_ok $? "a new echoes leader took over"
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e3'" SYNCED 30
tap_ok $? "the new leader finds the ConfigMap and makes e3 SYNCED"
release_holds drop
tap_is "$(ledger_of $DB echoes $NS/e3)/$(notes e3)" "ADOPT:OK/0" "... adopting it (ledger ADOPT), not creating it again; the note is removed"

# --- delete
q $DB "SELECT mlplat.delete_echo('$NS', 'e1')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e1'" DELETED 30
tap_ok $? "delete_echo: DELETED"
tap_is "$(cm_data e1)" absent "... its ConfigMap is gone"
tap_is "$(ledger_of $DB echoes $NS/e1 | awk '{print $NF}')" DELETE:OK "... the ledger has the delete"

# --- the state machine and the seam hold for the test kind too
err=$(q $DB "UPDATE mlplat.echoes SET status = 'SYNCED' WHERE name = 'e1'" 2>&1)
[[ "$err" == *"cannot go from DELETED to SYNCED"* ]]
tap_ok $? "the trigger refuses a move _echo_transitions() does not list"
tap_binary "state diagrams with the test kind's" env STATE_DOCS="$SRC/test/kinds/README.md" bash "$SRC/test/e2e/state_diagrams.sh"
q $DB "ALTER TYPE mlplat.echo_claim ADD ATTRIBUTE surprise int" >/dev/null
wait_for $DB "SELECT count(*) > 0 FROM mlplat.reconciler_health WHERE kind = 'echoes' AND status LIKE 'refuses to run: type mlplat.echo_claim does not match this library%'" t 30
tap_ok $? "an attribute the C table does not know: the echoes workers refuse to run"
q $DB "ALTER TYPE mlplat.echo_claim DROP ATTRIBUTE surprise" >/dev/null
q $DB "SELECT mlplat.put_echo('$NS', 'e4', '{}')" >/dev/null
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e4'" SYNCED 30
tap_ok $? "... and run again once the type agrees"

# --- a status the library does not know (the CHECK constraint and the transition trigger
# bypassed, as only an administrator, or a library of another version, could): the seam's
# read is an ERROR naming the machine and the value, not a row misread.  As any ERROR in a
# pass, it fails that pass (logged, in the health row) and the leader keeps its lead and
# tries again with backoff; every pass stops at the same claim, so no echo is reconciled
# meanwhile, while other kinds go on.  The row put right, the same leader converges.
lines_before=$(wc -l <"$WORK/data.log")
epoch=$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'echoes'")
MSG='mlplat: the echo status "BOGUS" is not one this library knows'
seam_errors() { tail -n +"$lines_before" "$WORK/data.log" | grep -cF "reconciler pass failed: $MSG"; }
q $DB "ALTER TABLE mlplat.echoes DROP CONSTRAINT echoes_status_check" >/dev/null
q $DB "SET session_replication_role = replica; UPDATE mlplat.echoes SET status = 'BOGUS' WHERE name = 'e3'" >/dev/null
q $DB "SELECT mlplat.put_echo('$NS', 'e5', '{\"k\": \"v5\"}')" >/dev/null
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'echoes' AND role = 'leader'
              AND status LIKE 'pass failed: mlplat: the echo status%' AND starts_with('pass failed: $MSG', status)" 1 30
tap_ok $? "an echo whose status is BOGUS: the pass fails with an ERROR naming the machine and the value ($(health))"
deadline=$((SECONDS + 30))
until (($(seam_errors) >= 3)) || ((SECONDS >= deadline)); do sleep 0.2; done
tap_ok $((($(seam_errors) >= 3) ? 0 : 1)) "... logged, and tried again with backoff ($(seam_errors) failed passes in the log)"
tap_is "$(status e5)/$(cm_data e5)" "PENDING/absent" "... meanwhile no echo is reconciled (every pass stops at its claim)"
tap_is "$(q $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'projects' AND role = 'leader'")" 1 \
	"... while the other kinds' leaders go on"
q $DB "SET session_replication_role = replica; UPDATE mlplat.echoes SET status = 'SYNCED' WHERE name = 'e3'" >/dev/null
q $DB "ALTER TABLE mlplat.echoes ADD CONSTRAINT echoes_status_check
       CHECK (status IN ('PENDING', 'SYNCED', 'FAILED', 'DELETING', 'DELETED'))" >/dev/null
wait_for $DB "SELECT status FROM mlplat.echoes WHERE name = 'e5'" SYNCED 30
tap_ok $? "the row put right, the kind converges again"
tap_is "$(cm_data e5)/$(q $DB "SELECT epoch FROM mlplat.leader_epochs WHERE kind = 'echoes'")" "{\"k\": \"v5\"}/$epoch" \
	"... e5's ConfigMap is made, by the same leader (epoch $epoch): the ERROR cost no lead"

# --- the kind touched only the files the guide lists for a test kind
# (the kind, its pass and seams, its state machine, its SQL objects; the generated seam_types.h
# is not in the repository)
tap_is "$(cd "$SRC" && grep -rlE --include='*.[ch]' --include='*.sql' \
	'MLPLAT_KIND_ECHOES|mlplat_echoes_|"echoes"|\bECHO\b|echo_names|echo_claim|echo_writeback|mlplat\.echoes|_echo_transitions|_echoes_' \
	src include sql | grep -v '^include/mlplat/seam_types\.h$' | sort | tr '\n' ' ')" \
	"include/mlplat/kinds.h include/mlplat/reconcile.h include/mlplat/states.h src/kinds.c src/reconcile/registry.c src/states.c " \
	"outside test/, the kind is named only where docs/reconcilers.md says (steps 1, 4 and 5: kinds.h, kinds.c, reconcile.h, registry.c, states.h, states.c; nothing in sql/)"
tap_done
