#!/bin/sh
# Stop the stand-in started by start.sh (SIGTERM, then SIGKILL after ~5 s).
#   stop.sh [--state-dir DIR]     (or STANDIN_STATE_DIR)
set -eu
STATE=${STANDIN_STATE_DIR:-/tmp/standin-$(id -u)}
[ "${1:-}" = "--state-dir" ] && STATE=$2
case "${1:-}" in --state-dir=*) STATE=${1#--state-dir=} ;; esac
[ -f "$STATE/standin.pid" ] || { echo "stop.sh: no pid file in $STATE" >&2; exit 0; }
pid=$(cat "$STATE/standin.pid")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
fi
rm -f "$STATE/standin.pid"
