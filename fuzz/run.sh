#!/bin/sh
# fuzz/run.sh [seconds] — build every libFuzzer target, replay every committed
# crash input (fuzz/regressions/*) through each, then run each target for N
# seconds (default 20) from the committed seed corpus.  Prints TAP (one test
# per build, per replay and per run, so test/run.sh's `fuzz` suite counts
# them) and a table (target, seconds, runs, execs/s, coverage, findings) as
# TAP comments; exits non-zero on any finding.
#
# New corpus entries go to fuzz/out/corpus/ (not committed); crashes go to
# fuzz/out/artifacts/<target>/.  Turn a crash into a regression test by
# copying it to fuzz/regressions/ (replayed here, by every target, and by
# test/unit/run.sh through fuzz/props.c).
#   CC           compiler (clang-14 by default)
#   FUZZ_TARGETS targets to run (default: all)
#   FUZZ_JOBS    run this many targets at once (default 1; the machine is shared)
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}
cc=${CC:-clang-14}
out=fuzz/out
targets=${FUZZ_TARGETS:-"fuzz_json_parse fuzz_canonical fuzz_spec_diff fuzz_names fuzz_spdx fuzz_plan_rollout fuzz_kube_status fuzz_prometheus fuzz_rollout_decide fuzz_rollout_pass_plan"}
mkdir -p "$out"

flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Ifuzz"
core="fuzz/props.c src/json/json.c src/json/canonical.c src/json/diff.c src/validate/names.c src/validate/spdx.c src/rollout/plan.c
      src/rollout/read.c src/rollout/evidence_id.c
      src/http/kube_response.c src/rollout/prometheus.c src/reconcile/rollout_decide.c src/rollout/pass_plan.c"
n=0
status=0
tap() {	# tap OK|FAIL description
	n=$((n + 1))
	if [ "$1" = OK ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; status=1; fi
}
ntargets=$(echo $targets | wc -w)
echo "1..$((ntargets * 3))"

# The shared code is compiled once (not once per target): it was most of the
# suite's build time.  A core file that does not compile fails every build.
mkdir -p "$out/obj"
rm -f "$out/core.build.log"
objs=
core_ok=1
for c in $core; do
	o=$out/obj/$(echo "$c" | tr / _ | sed 's/\.c$/.o/')
	# shellcheck disable=SC2086
	$cc $flags -c -o "$o" "$c" >"$o.log" 2>&1 || { core_ok=0; cat "$o.log" >>"$out/core.build.log"; }
	objs="$objs $o"
done
for t in $targets; do
	# shellcheck disable=SC2086
	if [ "$core_ok" = 1 ] && $cc $flags -o "$out/$t" "fuzz/$t.c" $objs -lcrypto -lm >"$out/$t.build.log" 2>&1; then
		tap OK "build $t"
	else
		tap FAIL "build $t"
		[ "$core_ok" = 1 ] || sed 's/^/# /' "$out/core.build.log"
		sed 's/^/# /' "$out/$t.build.log"
	fi
done

# Committed crash inputs: every target must get through every one of them.
for t in $targets; do
	if [ ! -x "$out/$t" ]; then tap FAIL "$t replays fuzz/regressions (not built)"; continue; fi
	# shellcheck disable=SC2046
	if "$out/$t" -runs=1 $(find fuzz/regressions -type f ! -name '*.md' | sort) >"$out/$t.replay.log" 2>&1; then
		tap OK "$t replays fuzz/regressions ($(find fuzz/regressions -type f ! -name '*.md' | wc -l) inputs)"
	else
		tap FAIL "$t replays fuzz/regressions"
		grep -m5 'ERROR\|property violated\|SUMMARY\|Running:' "$out/$t.replay.log" | sed 's/^/# /'
	fi
done

run_one() {
	t=$1
	corpus=$out/corpus/$t
	art=$out/artifacts/$t
	rm -rf "$art"
	mkdir -p "$corpus" "$art"
	dict=
	[ "$t" = fuzz_names ] || dict=-dict=fuzz/json.dict
	seeds=fuzz/corpus/$t
	[ -d "$seeds" ] || seeds=fuzz/corpus/${t#fuzz_}   # e.g. fuzz/corpus/plan_rollout
	# shellcheck disable=SC2086
	"$out/$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$art/" $dict "$corpus" "$seeds" >"$out/$t.log" 2>&1 || true
}
jobs=${FUZZ_JOBS:-1}
running=0
for t in $targets; do
	[ -x "$out/$t" ] || continue
	run_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then wait; running=0; fi
done
wait

printf '# %-18s %6s %10s %8s %6s %6s %8s\n' target secs runs "exec/s" cov ft findings > "$out/table.txt"
for t in $targets; do
	log=$out/$t.log
	art=$out/artifacts/$t
	if [ ! -f "$log" ]; then tap FAIL "fuzz $t (did not run)"; continue; fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	findings=$(find "$art" -type f | wc -l)
	printf '# %-18s %6s %10s %8s %6s %6s %8s\n' "$t" "$secs" "${runs:-0}" "${eps:-0}" "${cov:-?}" "${ft:-?}" \
		"$findings" >> "$out/table.txt"
	if [ "$findings" -gt 0 ] || [ -z "$runs" ] || grep -q 'ERROR: libFuzzer\|SUMMARY: .*Sanitizer' "$log"; then
		tap FAIL "fuzz $t for ${secs}s: ${runs:-0} runs, $findings findings (log: $log)"
		grep -m5 'ERROR\|property violated\|SUMMARY' "$log" | sed 's/^/# /' || true
		for f in "$art"/*; do [ -f "$f" ] && echo "# artifact: $f ($(base64 -w0 "$f" | head -c 300))"; done
	else
		tap OK "fuzz $t for ${secs}s: $runs runs, no findings"
	fi
done
cat "$out/table.txt"
exit $status
