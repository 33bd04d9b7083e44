#!/bin/sh
# fuzz/run.sh [seconds] — build every libFuzzer target and run each for N
# seconds (default 20), starting from the committed seed corpus.  Prints a
# table (target, runs, execs/s, findings) and exits non-zero on any finding.
#
# New corpus entries go to fuzz/out/corpus/ (not committed); crashes go to
# fuzz/out/artifacts/<target>/.  Turn a crash into a regression test by
# copying it to fuzz/regressions/ (test/unit/run.sh replays every file there).
# CC overrides the compiler (clang-14 by default).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}
cc=${CC:-clang-14}
out=fuzz/out
targets="fuzz_json_parse fuzz_canonical fuzz_spec_diff fuzz_names fuzz_plan_rollout"
mkdir -p "$out"

flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Ifuzz"
core="fuzz/props.c src/json/json.c src/json/canonical.c src/json/diff.c src/validate/names.c src/rollout/plan.c"
for t in $targets; do
    # shellcheck disable=SC2086
    $cc $flags -o "$out/$t" "fuzz/$t.c" $core -lcrypto -lm
done

status=0
printf '%-18s %10s %10s %9s\n' target runs "exec/s" findings > "$out/table.txt"
for t in $targets; do
    corpus=$out/corpus/$t
    art=$out/artifacts/$t
    mkdir -p "$corpus" "$art"
    dict=
    [ "$t" = fuzz_names ] || dict=-dict=fuzz/json.dict
    seeds=fuzz/corpus/$t
    [ -d "$seeds" ] || seeds=fuzz/corpus/${t#fuzz_}   # e.g. fuzz/corpus/plan_rollout
    # shellcheck disable=SC2086
    "$out/$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$art/" $dict "$corpus" "$seeds" >"$out/$t.log" 2>&1 || true
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
    runs=${runs:-0}
    findings=$(find "$art" -type f | wc -l)
    eps=$((runs / secs))
    printf '%-18s %10s %10s %9s\n' "$t" "$runs" "$eps" "$findings" >> "$out/table.txt"
    if [ "$findings" -gt 0 ] || grep -q 'ERROR: libFuzzer\|SUMMARY: .*Sanitizer' "$out/$t.log"; then
        status=1
        echo "== $t: findings (log: $out/$t.log)" >&2
        grep -m5 'ERROR\|property violated\|SUMMARY' "$out/$t.log" >&2 || true
    fi
done
cat "$out/table.txt"
exit $status
