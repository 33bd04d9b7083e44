#!/bin/sh
# Start the stand-in in the background and wait (bounded) until it is ready.
#   start.sh [--state-dir DIR] [server options...]
# Writes DIR/standin.pid, DIR/ports.json and DIR/standin.log; prints the ready line.
# STANDIN_STATE_DIR may name the state dir instead of --state-dir (default /tmp/standin-<uid>).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${STANDIN_STATE_DIR:-/tmp/standin-$(id -u)}
prev=""
for a in "$@"; do
  [ "$prev" = "--state-dir" ] && STATE=$a
  case "$a" in --state-dir=*) STATE=${a#--state-dir=} ;; esac
  prev=$a
done
mkdir -p "$STATE"
if [ -f "$STATE/standin.pid" ] && kill -0 "$(cat "$STATE/standin.pid")" 2>/dev/null; then
  echo "start.sh: a stand-in is already running (pid $(cat "$STATE/standin.pid"), state $STATE)" >&2
  exit 1
fi
rm -f "$STATE/ports.json"
case " $* " in *" --state-dir"*) set -- "$@" ;; *) set -- --state-dir "$STATE" "$@" ;; esac
nohup node "$HERE/server.js" "$@" >"$STATE/standin.log" 2>&1 </dev/null &
echo $! >"$STATE/standin.pid"
i=0
while [ $i -lt 100 ]; do            # at most ~10 s
  if grep -q '^standin ready' "$STATE/standin.log" 2>/dev/null; then
    grep '^standin ready' "$STATE/standin.log"
    exit 0
  fi
  if ! kill -0 "$(cat "$STATE/standin.pid")" 2>/dev/null; then
    echo "start.sh: stand-in exited during start:" >&2; cat "$STATE/standin.log" >&2; exit 1
  fi
  sleep 0.1; i=$((i + 1))
done
echo "start.sh: stand-in not ready after 10 s" >&2
kill "$(cat "$STATE/standin.pid")" 2>/dev/null || true
exit 1
