#!/usr/bin/env bash
# The stand-in's fidelity against the real kube-apiserver: one request
# sequence (test/real/differential.py) sent to both must give the same status
# codes and the same Status reasons, step by step.
set -u
. "$(dirname "$0")/../../lib/e2e.sh"
. "$SRC/test/lib/real.sh"
real_preamble diff
SD=$WORK/standin-diff
on_exit 'standin_stop "$SD"'
real_kube_start "$RD"
tap_ok $? "real API server started"
standin_start "$SD"
tap_ok $? "stand-in started"
python3 "$SRC/test/real/differential.py" --url "$REAL_KUBE_URL" --ca "$REAL_CA" --token-file "$RD/admin-token" >"$RD/real.txt"
python3 "$SRC/test/real/differential.py" --url "$STANDIN_URL" --token-file "$STANDIN_TOKEN_FILE" >"$SD/standin.txt"
n=$(wc -l <"$RD/real.txt")
[ "$n" -gt 10 ] && [ "$(wc -l <"$SD/standin.txt")" = "$n" ]
tap_ok $? "both answered every step ($n)"
while read -r step rcode rreason; do
	read -r sstep scode sreason <&3
	tap_is "$scode $sreason" "$rcode $rreason" "$step: the stand-in answers as the real server ($rcode $rreason)"
done <"$RD/real.txt" 3<"$SD/standin.txt"
tap_done
