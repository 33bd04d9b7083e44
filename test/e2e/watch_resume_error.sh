#!/usr/bin/env bash
# An ERROR in the watch's resume does not end the worker.  The stand-in ends the deployments
# watch every 2 s and the stream's end hook resumes it in the worker's wait, outside any pass and
# transaction, where nothing catches an ERROR: one there ended the worker (exit 1, the postmaster
# started it again, the lock moved).  kube_config_gone.sh covers the configuration going away;
# here:
#   - the token file removed under the open watch: it is read by a pass's (or a lease renewal's)
#     configuration refresh, never by the resume, and the refusal stops the resume before any
#     request (passes on the old code too: it says the token raises nothing there);
#   - an ERROR raised by the resume itself (mlplat.test_watch_resume_error, as an out-of-memory
#     would): logged as a WARNING with its errcode, the worker keeps its pid, the next pass opens
#     the watch again. On the old code the deployments leader exits with code 1.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_watch_cluster watch_resume_error wre1 "log_error_verbosity = verbose"
PIDS="SELECT string_agg(kind || '=' || pid, ' ' ORDER BY kind, replica) FROM mlplat.reconciler_health"
before=$(q $DB "$PIDS")
LOG=$WORK/data.log
since() { tail -n +"$(($1 + 1))" "$LOG"; }
exits() { since "$1" | grep -c 'exited with exit code'; }
reload() { $PSQL -d $DB -c "ALTER SYSTEM $1" -c "SELECT pg_reload_conf()" >/dev/null; }

# the token file gone under the open watch, for a few of its ends
lines=$(wc -l <"$LOG")
mv "$STANDIN_TOKEN_FILE" "$STANDIN_TOKEN_FILE.away"
for _ in $(seq 60); do
	since "$lines" | grep -q 'cannot read Kubernetes token file' && break
	sleep 0.5
done
since "$lines" | grep -q 'cannot read Kubernetes token file'
tap_ok $? "a configuration refresh refuses the missing token file (server log)"
sleep 6
tap_same "$before" "$(q $DB "$PIDS")" "every reconciler keeps its pid over 6 s without the token file"
tap_is "$(exits "$lines")" 0 "no worker exit in the server log"
mv "$STANDIN_TOKEN_FILE.away" "$STANDIN_TOKEN_FILE"
q $DB "SELECT mlplat.create_project('wre2', 0)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'wre2'" READY 30
tap_ok $? "with the token file back a new project is READY"

# every resume raises an ERROR
lines=$(wc -l <"$LOG")
WARNED="mlplat: the watch of inferenceservices was not resumed: out of memory"
reload "SET mlplat.test_watch_resume_error = on"
for _ in $(seq 60); do
	[ "$(since "$lines" | grep -c "$WARNED")" -ge 3 ] && break
	[ "$(exits "$lines")" -gt 0 ] && break
	sleep 0.5
done
[ "$(since "$lines" | grep -c "WARNING:  53200: $WARNED")" -ge 3 ]
tap_ok $? "three resumes raised, each logged as a WARNING with its errcode 53200 ($(since "$lines" | grep -c "$WARNED") in the log)"
since "$lines" | grep -m1 -A2 "$WARNED" | sed 's/^/# /'
tap_same "$before" "$(q $DB "$PIDS")" "every reconciler keeps its pid"
tap_is "$(exits "$lines")" 0 "no worker exit in the server log"
[ "$(exits "$lines")" = 0 ] || since "$lines" | grep -e 'exit code' -e 'FATAL' | head -5 | sed 's/^/# /'
wait_for $DB "$WATCHING" t 30
tap_ok $? "the deployments leader still observes through its watch (each pass opens it again)"
q $DB "SELECT mlplat.create_project('wre3', 0)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'wre3'" READY 30
tap_ok $? "a new project is READY meanwhile"

reload "RESET mlplat.test_watch_resume_error"
sleep 3
warned=$(since "$lines" | grep -c "$WARNED")
sleep 6
tap_same "$warned" "$(since "$lines" | grep -c "$WARNED")" "with the setting reset the resumes raise nothing over 6 s"
tap_same "$before" "$(q $DB "$PIDS")" "... and the same workers run ($(q $DB "$PIDS"))"
tap_done
