#!/bin/sh
# Build and run the plain-C unit tests of the pure modules (no PostgreSQL),
# printing TAP on stdout so `prove test/unit/run.sh` counts them.
#   MLPLAT_UNIT_CFLAGS  extra flags (default: ASan + UBSan when available)
set -eu
cd "$(dirname "$0")/../.."
out=build/unit
mkdir -p "$out"
cc=${CC:-cc}
san=${MLPLAT_UNIT_CFLAGS--fsanitize=address,undefined -fno-sanitize-recover=all}
# The same warnings the extension is built with, plus what PostgreSQL adds.
flags="-std=gnu99 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare
       -Wmissing-prototypes -Wdeclaration-after-statement -Iinclude -Ifuzz"
# shellcheck disable=SC2086
if ! $cc $flags $san -o "$out/json_test" test/unit/json_test.c fuzz/props.c \
        src/json/json.c src/json/canonical.c src/json/diff.c src/validate/names.c \
        -lcrypto -lm >"$out/build.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - build test/unit/json_test.c"
    sed 's/^/# /' "$out/build.log"
    exit 1
fi
# The rollout test links the fuzz property of fuzz/fuzz_plan_rollout.c and
# replays its seed corpus; its test numbers continue after json_test's.
# shellcheck disable=SC2086
if ! $cc $flags $san -DMLPLAT_NO_FUZZ_MAIN -o "$out/rollout_test" test/unit/rollout_test.c \
        fuzz/fuzz_plan_rollout.c src/rollout/plan.c src/rollout/read.c src/rollout/evidence_id.c \
        src/json/json.c src/json/canonical.c \
        -lcrypto -lm >"$out/build-rollout.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - build test/unit/rollout_test.c"
    sed 's/^/# /' "$out/build-rollout.log"
    exit 1
fi
# The S3 helpers (URIs, checksum headers, credentials, SigV4 against AWS's examples).
# shellcheck disable=SC2086
if ! $cc $flags $san -o "$out/s3_test" test/unit/s3_test.c src/http/s3.c src/json/canonical.c \
        src/json/json.c -lcrypto -lm >"$out/build-s3.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - build test/unit/s3_test.c"
    sed 's/^/# /' "$out/build-s3.log"
    exit 1
fi
# What goes out or comes in from outside: PromQL revision names, UTF-8 cuts.
# shellcheck disable=SC2086
if ! $cc $flags $san -o "$out/outward_test" test/unit/outward_test.c src/rollout/prometheus.c \
        src/json/json.c src/validate/names.c -lm >"$out/build-outward.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - build test/unit/outward_test.c"
    sed 's/^/# /' "$out/build-outward.log"
    exit 1
fi
status=0
"$out/json_test" fuzz/regressions >"$out/json_test.tap" || status=1
grep -v '^1\.\.' "$out/json_test.tap"
n=$(grep -cE '^(not )?ok ' "$out/json_test.tap" || true)
"$out/rollout_test" "$n" fuzz/corpus/plan_rollout >"$out/rollout_test.tap" || status=1
grep -v '^1\.\.' "$out/rollout_test.tap"
n=$((n + $(grep -cE '^(not )?ok ' "$out/rollout_test.tap" || true)))
"$out/s3_test" "$n" >"$out/s3_test.tap" || status=1
grep -v '^1\.\.' "$out/s3_test.tap"
n=$((n + $(grep -cE '^(not )?ok ' "$out/s3_test.tap" || true)))
"$out/outward_test" "$n" || status=1
exit $status
