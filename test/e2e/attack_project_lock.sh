#!/usr/bin/env bash
# Attack (issue 18, finding 2): project-lock squatting.  0.2.0 serialised a
# project's deploys on advisory locks whose keys docs/api.md published; any
# login holding them stalled the project's deploys until the caller gave up.
# Now the project row is the lock (only the API can take it: a row lock needs
# UPDATE on mlplat.projects) and every API wait is bounded by
# mlplat.api_lock_timeout, failing with 55P03 and a message naming the project.
#   (1) a login holding every old key blocks nothing;
#   (2) it cannot take the row lock itself;
#   (3) a session that holds the project row makes deploy, start_run and
#       set_project_quota fail with 55P03 after the (small) timeout;
#   (4) deploys in flight (their row lock held) do not serialise each other,
#       GPU-raising ones included, but a quota change waits for them (55P03);
#   (5) the bound does not leak into the caller's transaction;
#   (3b) it also bounds the wait for the entity row locked after the project's.
# Before the fix (1) hit the statement timeout and (3) succeeded.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
DB=mlplat
BG=()
on_exit 'for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
      q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '"'"'plk_%'"'"'" >/dev/null 2>&1'
W=$MLPLAT_TEST_WORK/attack_project_lock
mkdir -p "$W" && chmod 777 "$W"

# session NAME USER SQL — a background session that runs SQL and holds on
session() {
	PGAPPNAME=$1 $MLPLAT_TEST_BIN/psql -qXAt -U "$2" -d $DB -c "$3" >"$W/$1.out" 2>&1 &
	BG+=($!)
	wait_for $DB "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%pg_sleep%' AND wait_event = 'PgSleep'" 1 20
}
# call SQL — run SQL in a fresh session with a short API lock bound; prints the
# SQLSTATE and message of an error, or the result
call() {
	$MLPLAT_TEST_BIN/psql -qXAt -d $DB -v VERBOSITY=verbose \
		-c "SET mlplat.api_lock_timeout = '300ms'" -c "SET statement_timeout = '15s'" -c "$1" 2>&1 |
		head -1 | sed 's/^ERROR:  \([0-9A-Z]\{5\}\): /\1 /'
}

q $DB "DROP ROLE IF EXISTS plk_squat; CREATE ROLE plk_squat LOGIN" >/dev/null 2>&1
q $DB "SELECT mlplat.create_project('plk', 16); SELECT mlplat.add_artifact_location('plk', 's3://plk/')" >/dev/null
q $DB "SELECT mlplat.register_model_version('plk', 'm', '1', 's3://plk/m/1', repeat('c', 64), 'kserve-sklearnserver', 'sklearn')" >/dev/null
q $DB "SELECT mlplat.set_model_stage('plk', 'm', '1', 'CHAMPION')" >/dev/null
PID=$(q $DB "SELECT id FROM mlplat.projects WHERE name = 'plk'")
tap_ok $? "project plk (id $PID) with a deployable model"

# (1) the squatter takes every key 0.2.0 used for this project, in both modes
session plk_squat plk_squat "SELECT pg_advisory_lock(k, $PID), pg_advisory_lock_shared(k + 1000, $PID),
  pg_advisory_lock((k::bigint << 32) | $PID) FROM unnest(ARRAY[1836871680, 1836871681, 1836871682, 1836871683]) k;
  SELECT pg_sleep(120)"
tap_ok $? "an unprivileged login holds the old project lock keys (1836871681/2, project $PID)"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'a1', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)")" DEPLOYING \
	"deploy without GPUs goes through"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'a2', 'm', '1', 'kserve-sklearnserver', 1, 1, 2)")" DEPLOYING \
	"deploy that reserves GPUs goes through"
tap_is "$(call "SELECT 'accepted' FROM mlplat.set_project_quota('plk', 12)")" accepted \
	"set_project_quota goes through"

# (2) nor can it lock the row or the table the API serialises on
out=$($MLPLAT_TEST_BIN/psql -qXAt -U plk_squat -d $DB -v VERBOSITY=verbose \
	-c "SET lock_timeout = '1s'" \
	-c "BEGIN" -c "SELECT 1 FROM mlplat.projects WHERE id = $PID FOR KEY SHARE" -c "ROLLBACK" \
	-c "BEGIN" -c "LOCK TABLE mlplat.projects IN ROW SHARE MODE" -c "ROLLBACK" 2>&1)
tap_is "$(echo "$out" | grep -c 'ERROR:  42501')" 2 "the squatter may neither row-lock the project nor LOCK TABLE projects beyond ACCESS SHARE (42501 twice)"

# (3) a session holding the project row: the API fails with 55P03 once the bound is reached
session plk_holder postgres "BEGIN; SELECT 1 FROM mlplat.projects WHERE id = $PID FOR UPDATE; SELECT pg_sleep(120)"
tap_ok $? "a session holds the project row (FOR UPDATE)"
got=$(call "SELECT status FROM mlplat.deploy('plk', 'a3', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)")
tap_is "$got" '55P03 project "plk" is busy: deploy waited 300ms for the project'"'"'s lock' "deploy fails with 55P03 naming the project"
det=$($MLPLAT_TEST_BIN/psql -qXAt -d $DB -v VERBOSITY=verbose -c "SET mlplat.api_lock_timeout = '300ms'" \
	-c "SELECT mlplat.deploy('plk', 'a3', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)" 2>&1)
echo "$det" | grep -q '^DETAIL:  Another transaction holds the project' && echo "$det" | grep -q '^HINT:  Retry.*mlplat.api_lock_timeout'
tap_ok $? "... with a detail saying why and a hint naming mlplat.api_lock_timeout"
tap_is "$(call "SELECT status FROM mlplat.start_run('plk', 'r1', '{\"image\": \"img:1\", \"gpus\": 1}')" | cut -c1-45)" \
	'55P03 project "plk" is busy: start_run waited' "start_run (reserving a GPU) fails the same way"
tap_is "$(call "SELECT status FROM mlplat.set_project_quota('plk', 10)" | cut -c1-5)" 55P03 "set_project_quota fails the same way"
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plk_holder'" >/dev/null
wait_for $DB "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'plk_holder'" 0 10
tap_ok $? "the holder's session is gone"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'a3', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)")" DEPLOYING \
	"once the holder is gone, the same deploy goes through"
# (3b) the bound covers the entity row the call locks after the project's
session plk_rowholder postgres "BEGIN; SELECT 1 FROM mlplat.deployments WHERE name = 'a1' FOR UPDATE; SELECT pg_sleep(120)"
tap_ok $? "a session holds deployment a1's row"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'a1', 'm', '1', 'kserve-sklearnserver', 0, 1, 2)")" \
	"55P03 canceling statement due to lock timeout" "a deploy of a1 fails with 55P03 after the bound, not at the statement timeout"
tap_is "$(call "SELECT status FROM mlplat.undeploy('plk', 'a1')")" \
	"55P03 canceling statement due to lock timeout" "an undeploy of a1 (no project lock) is bounded the same way"
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plk_rowholder'" >/dev/null

# (3b) the API functions that wait only for an entity row are bounded too
tap_is "$(call "SELECT status FROM mlplat.start_run('plk', 'plkjob', jsonb_build_object('image', 'x'))")" PENDING \
	"a run to cancel"
session plk_rowholder2 postgres "BEGIN; SELECT 1 FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id
  WHERE p.name = 'plk' AND r.name = 'plkjob' FOR UPDATE OF r;
  SELECT 1 FROM mlplat.models m WHERE m.project_id = $PID AND m.name = 'm' FOR UPDATE; SELECT pg_sleep(120)"
tap_ok $? "a session holds the run's and the model's rows"
tap_is "$(call "SELECT status FROM mlplat.cancel_run('plk', 'plkjob')")" \
	"55P03 canceling statement due to lock timeout" "cancel_run fails with 55P03 after the bound, not at the statement timeout"
tap_is "$(call "SELECT status FROM mlplat.set_model_stage('plk', 'm', '1', 'ARCHIVED')")" \
	"55P03 canceling statement due to lock timeout" "set_model_stage fails with 55P03 after the bound, not at the statement timeout"
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plk_rowholder2'" >/dev/null
wait_for $DB "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'plk_rowholder2'" 0 10
tap_ok $? "the second row holder's session is gone"
got=$(call "SELECT status FROM mlplat.cancel_run('plk', 'plkjob')")
[ -n "$got" ] && [ "${got:0:5}" != 55P03 ]
tap_ok $? "once the holder is gone, cancel_run no longer waits (got: $got)"

# (4) an open deploy holds the row shared (GPU-raising: FOR NO KEY UPDATE); others go on
session plk_open postgres "BEGIN; SELECT mlplat.deploy('plk', 'b1', 'm', '1', 'kserve-sklearnserver', 0, 1, 1); SELECT pg_sleep(120)"
tap_ok $? "a deploy without GPUs waits uncommitted in another session"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'b2', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)")" DEPLOYING \
	"... a second deploy without GPUs does not wait for it"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'b3', 'm', '1', 'kserve-sklearnserver', 1, 1, 1)")" DEPLOYING \
	"... nor does a deploy that reserves GPUs"
tap_is "$(call "SELECT status FROM mlplat.set_project_quota('plk', 11)" | cut -c1-5)" 55P03 \
	"... but a quota change waits for it, up to the bound"
session plk_open2 postgres "BEGIN; SELECT mlplat.deploy('plk', 'b4', 'm', '1', 'kserve-sklearnserver', 1, 1, 1); SELECT pg_sleep(120)"
tap_ok $? "a deploy reserving GPUs waits uncommitted in another session"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'b5', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)")" DEPLOYING \
	"... a deploy without GPUs does not wait for it"
tap_is "$(call "SELECT status FROM mlplat.deploy('plk', 'b6', 'm', '1', 'kserve-sklearnserver', 1, 1, 1)" | cut -c1-5)" 55P03 \
	"... a second GPU reservation waits for it (quota checks serialise), up to the bound"
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name IN ('plk_open', 'plk_open2')" >/dev/null

# (5) the bound is the API's: the caller's lock_timeout is back when the call returns
tap_is "$($MLPLAT_TEST_BIN/psql -qXAt -d $DB -c "BEGIN" -c "SET LOCAL lock_timeout = '7s'" \
	-c "SELECT status FROM mlplat.deploy('plk', 'c1', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)" -c "SHOW lock_timeout" -c "COMMIT" 2>&1 | tr '\n' ' ')" \
	"DEPLOYING 7s " "the caller's own lock_timeout is unchanged after a call"
tap_is "$($MLPLAT_TEST_BIN/psql -qXAt -U plk_squat -d $DB -c "SET mlplat.api_lock_timeout = 0" 2>&1 | grep -c 'permission denied')" 1 \
	"a caller cannot lift the bound (mlplat.api_lock_timeout is superuser-only)"
q $DB "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'plk_%'" >/dev/null
tap_done
