#!/usr/bin/env bash
# bench/converge runs to its table at a small size (SIZES=20) on a cluster of its own: both
# bare-client runs reach Ready and mlplat converges every deployment, one apply each.  The
# bench once hung in its bare client for a whole session unnoticed (its namespaces lacked the
# predictor ServiceAccount the stand-in's KServe now needs); this keeps it runnable.  A timing
# is printed as a comment, never judged.  Skipped under --sanitize (a benchmark's plumbing).
set -u
. "$(dirname "$0")/../lib/e2e.sh"
if [ "${SANITIZE:-0}" = 1 ]; then
	echo "1..0 # SKIP bench/converge runs in the normal build only"
	exit 0
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$(SIZES=20 timeout 150 bash "$ROOT/bench/converge/run.sh" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
tap_is "$rc" 0 "bench/converge SIZES=20 finished (exit status; 124 is the 150 s timeout)"
# the row for N=20: N api_ms conv_ms bare_ms (a/b) ratio applies/N ...
row=$(echo "$out" | awk '$1 == 20 && NF >= 7')
tap_ok $([ -n "$row" ]; echo $?) "the table has its N=20 row"
tap_is "$(echo "$row" | awk '{print $7}')" 1.000 "one apply per deployment"
tap_done
