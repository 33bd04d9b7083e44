#!/usr/bin/env bash
# The deployments watch's backoff after a refusal starts from its floor again once a watch has
# run.  The failures in a row were cleared only by a stream that delivered bytes: against a
# server that sends no bookmarks (allowWatchBookmarks is a hint) a quiet watch is empty until the
# server ends it, no failure, yet the count stayed, and each refusal hours apart waited out a
# ceiling twice the one before (1 s, then 1-2 s, 1-4 s ... up to mlplat.backoff_max).
# Here the stand-in sends no bookmarks and ends the watch every 2 s; three times, one watch is
# refused (503) and, between, the watch runs quiet again for two of its ends.  Each refusal is
# the first in a row: its backoff is the floor, 1000 ms exactly (backoff.h: from 1 s; the
# second and third draw from 1-2 s and 1-4 s on the old code, 1000 only by a 1 in 1,001 and
# 1 in 3,001 chance).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
e2e_watch_cluster watch_backoff_reset wbr1
admin PUT config '{"watchMaxS": 2, "bookmarks": 0}' >/dev/null
LOG=$WORK/data.log
FAILED='the watch of inferenceservices failed (HTTP 503); listing and watching again in'
# watches_ok SEQ — the InferenceService watches answered 200 after request SEQ
watches_ok() { admin GET "requests?kind=InferenceService&verb=watch&since=$1" | python3 -c 'import json,sys; print(sum(e["status"] == 200 for e in json.load(sys.stdin)["items"]))'; }
seq_now() { admin GET 'requests?kind=none' | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }

# the watch open now was opened with bookmarks on: let it end, and two empty ones after it
s0=$(seq_now)
for _ in $(seq 1 40); do [ "$(watches_ok "$s0")" -ge 3 ] && break; sleep 0.5; done
tap_ok $([ "$(watches_ok "$s0")" -ge 3 ] && echo 0 || echo 1) "quiet watches without bookmarks run and end (3 opened)"
for round in 1 2 3; do
	lines=$(wc -l <"$LOG")
	admin POST faults '{"verb": "watch", "resource": "inferenceservices", "status": 503, "times": 1}' >/dev/null
	for _ in $(seq 1 40); do tail -n +"$((lines + 1))" "$LOG" | grep -qF "$FAILED" && break; sleep 0.5; done
	ms=$(tail -n +"$((lines + 1))" "$LOG" | grep -F "$FAILED" | head -1 | sed -n 's/.* again in \([0-9]*\) ms.*/\1/p')
	tap_is "$ms" 1000 "refusal $round: the watch is listed and watched again after the backoff's floor (${ms:-no refusal logged} ms)"
	# the watch back, then two quiet streams that the server ended (no failure) before the next refusal
	wait_for mlplat "$WATCHING" t 30
	tap_ok $? "refusal $round: the leader observes through its watch again"
	s0=$(seq_now)
	for _ in $(seq 1 40); do [ "$(watches_ok "$s0")" -ge 2 ] && break; sleep 0.5; done
	tap_ok $([ "$(watches_ok "$s0")" -ge 2 ] && echo 0 || echo 1) "refusal $round: then the watch runs quiet and ends twice, no failure"
done
tap_done
