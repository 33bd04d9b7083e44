#!/usr/bin/env bash
# A Kubernetes configuration that goes away under running reconcilers (mlplat.kube_url reset
# and reloaded, as echoes.sh's teardown does): each worker stays up and says so in
# mlplat.reconciler_health — no "no usable Kubernetes configuration" ERROR, no exit and
# postmaster restart — and when the configuration comes back it reconciles again, same pid.
# The deployments watch is open and the stand-in ends it every 2 s: its end used to be resumed
# in the worker's wait, outside any pass, and the resume's request raised that ERROR there,
# which ended the worker (exit 1; the postmaster started it again).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_watch_cluster kube_config_gone kcg1
LEADERS="SELECT string_agg(kind || '=' || pid, ' ' ORDER BY kind, replica) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')"
PIDS="SELECT string_agg(kind || '=' || pid, ' ' ORDER BY kind, replica) FROM mlplat.reconciler_health"
before=$(q $DB "$PIDS")
LOG=$WORK/data.log
lines=$(wc -l <"$LOG")

# the stand-in's URL is in postgresql.conf (e2e_standin_cluster): an empty one overrides it
kube_url() { $PSQL -d $DB -c "ALTER SYSTEM $1" -c "SELECT pg_reload_conf()" >/dev/null; }
kube_url "SET mlplat.kube_url = ''"
wait_for $DB "SELECT count(*) FROM mlplat.reconciler_health WHERE kind = 'projects' AND role IN ('leader', 'idle')
              AND status LIKE '%no Kubernetes cluster configured%'" 1 30
tap_ok $? "without mlplat.kube_url the projects leader says so ($(q $DB "SELECT status FROM mlplat.reconciler_health WHERE kind = 'projects' AND role IN ('leader', 'idle')"))"
sleep 8
tap_same "$before" "$(q $DB "$PIDS")" "every reconciler keeps its pid over 8 s without a configuration (no exit, no restart)"
tap_is "$(tail -n +"$((lines + 1))" "$LOG" | grep -c -e 'no usable Kubernetes configuration' -e 'exited with exit code')" 0 \
	"no 'no usable Kubernetes configuration' error and no worker exit in the server log"
[ "$(q $DB "$PIDS")" = "$before" ] || tail -n +"$((lines + 1))" "$LOG" | grep -e 'usable' -e 'exit code' | head -5 | sed 's/^/# /'

kube_url "RESET mlplat.kube_url"
q $DB "SELECT mlplat.create_project('kcg2', 0)" >/dev/null
wait_for $DB "SELECT status FROM mlplat.projects WHERE name = 'kcg2'" READY 30
tap_ok $? "with the configuration back a new project is READY"
tap_same "$before" "$(q $DB "$PIDS")" "... reconciled by the same workers ($(q $DB "$LEADERS"))"
tap_done
