#!/usr/bin/env bash
# Model Lab preflight (issue 15, acceptance 2 and 4) on a server of its own with the default
# logging settings (none changed to pass):
#  - a wrong type under a marker is refused with "invalid lab request" / "Rule input_type."
#    and the marker, the field name and the item index are in neither the message, the detail,
#    the hint nor the server log, for a call made with literals (simple protocol) and with
#    bind parameters (extended protocol, pgbench -M extended);
#  - the preflight runs in BEGIN READ ONLY and returns the same row on a hot standby;
#  - acceptance 15: the fixture's probe is made through the API (start_lab_probe) and run by the
#    lab_runs worker against the stand-in, never inserted by hand: before it PROBE_MISSING,
#    while its Job create is held PROBE_RUNNING, then PASSED with completed_at.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
. "$SRC/test/lib/writeback.sh"
. "$SRC/test/lib/lab.sh"
SD=$WORK/standin-lab-preflight
e2e_standin
e2e_own_cluster lab_preflight
MARK=SECRET-MARKER-7f3a

PA=$(free_port); PB=$(free_port)
# one database cluster drives this stand-in alone: the Lease fence is not needed (and off)
cluster_start "$WORK/a" "$PA" "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "wal_level = replica" \
	"mlplat.resync_interval = '1s'" "${STANDIN_CONF[@]}" "mlplat.lease_fence = off" "mlplat.lab_payload_bucket = 'artifacts'"
tap_ok $? "primary started with the default logging settings, against the stand-in"
LOG=$WORK/a.log
qa() { $PSQL -h "$WORK" -p "$PA" -d mlplat -c "$1"; }
$PSQL -h "$WORK" -p "$PA" -d postgres -c "CREATE DATABASE mlplat" >/dev/null
qa "CREATE EXTENSION mlplat" >/dev/null
qa "SELECT setting FROM pg_settings WHERE name = 'log_min_error_statement'" | grep -qx error
tap_ok $? "log_min_error_statement is at its default (error): failing statements are logged"

qa "CREATE ROLE lab_dev LOGIN; CREATE ROLE lab_owner LOGIN" >/dev/null
qa "SELECT mlplat.create_project('lp', 8, NULL, NULL, NULL, 'lab_owner');
    SELECT mlplat.add_artifact_location('lp', 's3://lab/');
    SELECT mlplat.grant_role('lp', 'lab_dev', 'developer');" >/dev/null
admin POST nodes '{"name":"gpu-1","gpus":8,"labels":{"mlplat.io/lab":"true","mlplat.io/accelerator":"nvidia-a100"}}' >/dev/null
qa "SELECT mlplat.register_lab_node('gpu-1', 'nvidia-a100', 8)" >/dev/null
# (the worker observes the Node on every pass due: the evidence stays fresh on the primary, and
# on the standby below through replication)
$PSQL -h "$WORK" -p "$PA" -d mlplat -U lab_owner \
	-c "SELECT mlplat.register_model_version('lp', 'llm', '1', 's3://lab/llm/1', repeat('a', 64), 'vllm', 'custom')" \
	-c "SELECT mlplat.set_model_stage('lp', 'llm', '1', 'CANDIDATE')" \
	-c "SELECT mlplat.register_lab_profile('lp', 'vllm', jsonb_build_object('runtime_kind', 'vllm',
	      'image', 'r.example/vllm@sha256:' || repeat('e', 64), 'gpus', 1, 'accelerator', 'nvidia-a100',
	      'families', '[\"text_generation\"]'::jsonb, 'max_execution_seconds', 300, 'max_output_bytes', 65536))" >/dev/null
$PSQL -h "$WORK" -p "$PA" -d mlplat -U lab_owner -c "SELECT mlplat.approve_lab('lp', v.id, repeat('a', 64), f.id, n.id,
	'{text_generation}', '{}', 3, '1 day') FROM mlplat.model_versions v, mlplat.lab_profiles f, mlplat.lab_nodes n" >/dev/null
IDS=$(qa "SELECT v.id || ', ' || quote_literal(repeat('a', 64)) || ', ' || f.id || ', ' || n.id || ', ' || a.id
          FROM mlplat.model_versions v, mlplat.lab_profiles f, mlplat.lab_nodes n, mlplat.lab_approvals a")
PGHOST=$WORK PGPORT=$PA wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'lp'" READY 60 &&
	PGHOST=$WORK PGPORT=$PA wait_for mlplat "SELECT observed_ready AND observed_gpus = 8 FROM mlplat.lab_nodes" t 60
tap_ok $? "project lp is READY and the worker observed the lab Node"

# --- acceptance 15: the probe, through the API
BLK="SELECT (r).blockers FROM (SELECT mlplat.lab_preflight('lp', $IDS, 'text_generation', '[{\"prompt\": \"hi\", \"max_tokens\": 4}]') AS r) x"
tap_is "$($PSQL -h "$WORK" -p "$PA" -d mlplat -U lab_dev -c "$BLK")" "{PROBE_MISSING}" "no probe yet: PROBE_MISSING"
DB=mlplat NS=mlp-lp
export PGHOST=$WORK PGPORT=$PA
INST=$(q $DB "SELECT mlplat._instance_id()")
ID=$(next_id)
plan "lab-$ID-1" "{\"ticks\":1,\"s3\":[$(out_obj "$ID" 1 '{"probe":"ok"}')]}"
hold_rule '{"method":"POST","path":"/namespaces/mlp-lp/jobs$","hold":"before","times":1}' >/dev/null
IFS=', ' read -r CAND SHA PROF NODE APPR <<<"$(echo "$IDS" | tr -d "'")"
$PSQL -d mlplat -U lab_owner -c "SELECT mlplat.start_lab_probe('lp', $CAND, '$SHA', $PROF, $NODE, 'lp-probe')" >/dev/null
wait_held 1 60
tap_ok $? "start_lab_probe: the probe run's Job create is held at the stand-in"
tap_is "$($PSQL -d mlplat -U lab_dev -c "$BLK")/$(q $DB "SELECT status FROM mlplat.lab_probes WHERE lab_run_id = $ID")" \
	"{PROBE_RUNNING}/RUNNING" "while the probe runs: PROBE_RUNNING"
release_holds
wait_for $DB "SELECT status || ' ' || (completed_at IS NOT NULL) FROM mlplat.lab_probes WHERE lab_run_id = $ID" "PASSED true" 60
tap_ok $? "the probe's Job ran: PASSED with completed_at (run: $(status "$ID"))"
wait_for $DB "SELECT count(*) FROM mlplat.lab_leases" 0 30
tap_ok $? "the probe's lease is released"
unset PGHOST PGPORT
tap_is "$($PSQL -h "$WORK" -p "$PA" -d mlplat -U lab_dev -c "$BLK")" "{}" "fixture: candidate, profile, node, approval and a passed probe: no blocker"

# --- acceptance 4: literals
BAD="[{\"prompt\": \"$MARK\", \"max_tokens\": \"$MARK\"}]"
out=$($BIN/psql -qXA -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "$WORK" -p "$PA" -d mlplat -U lab_dev \
	-c "SELECT mlplat.lab_preflight('lp', $IDS, 'text_generation', '$BAD')" 2>&1)
echo "$out" | grep -q "^ERROR:  22023: invalid lab request" && echo "$out" | grep -qx "DETAIL:  Rule input_type." &&
	echo "$out" | grep -q "^HINT:  "
tap_ok $? "literals: 22023 invalid lab request, DETAIL Rule input_type., a fixed hint"
echo "$out" | grep -v "^LOCATION:\|^CONTEXT:\|^PL/pgSQL" | grep -qE "$MARK|prompt|max_tokens|\[0\]"
tap_ok $((! $?)) "literals: no marker, field name or index in message, detail or hint"

# --- acceptance 4: bind parameters (extended protocol)
cat >"$WORK/bind.sql" <<EOF
SELECT mlplat.lab_preflight(:project, :cand::bigint, :sha, :prof::bigint, :node::bigint, :appr::bigint, :family, :inputs::jsonb);
EOF
out=$($BIN/pgbench -n -M extended -t 1 -h "$WORK" -p "$PA" -U lab_dev -f "$WORK/bind.sql" \
	-D project=lp -D cand="$CAND" -D sha="$SHA" -D prof="$PROF" -D node="$NODE" -D appr="$APPR" \
	-D family=text_generation -D inputs="$BAD" mlplat 2>&1)
echo "$out" | grep -q "invalid lab request"
tap_ok $? "bind parameters: the same refusal"
echo "$out" | grep -qE "$MARK|prompt|\[0\]"
tap_ok $((! $?)) "bind parameters: no marker, field name or index in what the client got"
# a good call with bind parameters works (the refusal above is about the input, not the protocol)
good=$($BIN/pgbench -n -M extended -t 1 -h "$WORK" -p "$PA" -U lab_dev -f "$WORK/bind.sql" \
	-D project=lp -D cand="$CAND" -D sha="$SHA" -D prof="$PROF" -D node="$NODE" -D appr="$APPR" \
	-D family=text_generation -D inputs='[{"prompt": "hi", "max_tokens": 4}]' mlplat 2>&1)
echo "$good" | grep -q "number of failed transactions: 0"
tap_ok $? "bind parameters: a valid request passes"

# the server log: both refusals are there, and nothing the caller wrote
qa "SELECT 1" >/dev/null   # the log is written before the next statement is served
tap_is "$(grep -c 'invalid lab request' "$LOG")" 2 "the server log has both refusals"
grep -qE "$MARK|prompt|max_tokens|\[0\]" "$LOG"
tap_ok $((! $?)) "the server log shows no marker, field name or index (literals and bind parameters)"
grep -qF "mlplat.lab_preflight(" "$LOG"
tap_ok $((! $?)) "... nor the failing statement"

# --- acceptance 2: READ ONLY, then the same row on a hot standby
ROW="SELECT (r).passed, (r).blockers, (r).input_digest, (r).input_count, (r).input_bytes, (r).node, (r).model,
               (r).max_execution_seconds, (r).execution_started, (r).permission_granted
        FROM (SELECT mlplat.lab_preflight('lp', $IDS, 'text_generation', '[{\"prompt\": \"hi\", \"max_tokens\": 4}]') AS r) x"
ro=$($PSQL -h "$WORK" -p "$PA" -d mlplat -U lab_dev -c "BEGIN READ ONLY" -c "$ROW" -c "COMMIT" 2>&1)
case "$ro" in t\|\{\}\|*) r=0 ;; *) r=1; echo "# $ro" ;; esac
tap_ok $r "the preflight passes in BEGIN READ ONLY"
as_pg "$BIN/pg_basebackup" -h "$WORK" -p "$PA" -U postgres -D "$WORK/b" -R -X stream -c fast >/dev/null 2>&1 &&
	echo "port = $PB" >>"$WORK/b/postgresql.conf" && CLUSTER_DIRS+=("$WORK/b") &&
	as_pg "$BIN/pg_ctl" -D "$WORK/b" -l "$WORK/b.log" -w start >/dev/null
tap_ok $? "hot standby started"
PGHOST=$WORK PGPORT=$PB wait_for mlplat "SELECT count(*) FROM mlplat.lab_approvals" 1 60
sb=$($PSQL -h "$WORK" -p "$PB" -d mlplat -U lab_dev -c "SELECT pg_is_in_recovery()" -c "$ROW" 2>&1)
tap_is "$sb" "t
$ro" "on the standby (in recovery) the preflight returns the same row"

tap_done
