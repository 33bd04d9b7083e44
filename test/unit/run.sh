#!/usr/bin/env bash
# Build and run the plain-C unit tests of the pure modules (no PostgreSQL),
# printing TAP on stdout so `prove test/unit/run.sh` counts them.
#   MLPLAT_UNIT_CFLAGS  extra flags (default: ASan + UBSan when available)
# Each binary's results are renumbered into one plan; its own plan, exit status
# and output are checked (tap_binary in test/lib/tap.sh), so a binary that aborts
# (a sanitizer report stops it: -fno-sanitize-recover=all) fails by name.
set -u
cd "$(dirname "$0")/../.."
. test/lib/tap.sh
out=build/unit
mkdir -p "$out"
cc=${CC:-cc}
san=${MLPLAT_UNIT_CFLAGS--fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all}
# The same warnings the extension is built with, plus what PostgreSQL adds.
flags="-std=gnu99 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare
       -Wmissing-prototypes -Wdeclaration-after-statement -Iinclude -Ifuzz"
# build NAME SOURCES... — one TAP result; the compiler's output as diagnostics on failure.
build() {
	local name=$1
	shift
	# shellcheck disable=SC2086
	if $cc $flags $san -o "$out/$name" "$@" -lcrypto -lm >"$out/build-$name.log" 2>&1; then
		tap_ok 0 "build $name"
	else
		tap_ok 1 "build $name"
		sed 's/^/# /' "$out/build-$name.log"
		return 1
	fi
}
if build json_test test/unit/json_test.c fuzz/props.c \
	src/json/json.c src/json/canonical.c src/json/diff.c src/validate/names.c src/validate/spdx.c; then
	tap_binary json_test "$out/json_test" 0 fuzz/regressions
fi
# The rollout test links the fuzz property of fuzz/fuzz_plan_rollout.c and
# replays its seed corpus.
if build rollout_test -DMLPLAT_NO_FUZZ_MAIN test/unit/rollout_test.c \
	fuzz/fuzz_plan_rollout.c src/rollout/plan.c src/rollout/read.c src/rollout/evidence_id.c \
	src/json/json.c src/json/canonical.c; then
	tap_binary rollout_test "$out/rollout_test" 0 fuzz/corpus/plan_rollout
fi
# The rollouts reconciler's pure decision, and its fuzz property.
if build rollout_decide_test -DMLPLAT_NO_FUZZ_MAIN test/unit/rollout_decide_test.c fuzz/fuzz_rollout_decide.c \
	src/reconcile/rollout_decide.c; then
	tap_binary rollout_decide_test "$out/rollout_decide_test" 0
fi
# A due rollout decision as the pass makes it: evidence, content id, plan, status after;
# and its fuzz property over the target's seeds.
if build rollout_pass_plan_test -DMLPLAT_NO_FUZZ_MAIN test/unit/rollout_pass_plan_test.c \
	fuzz/fuzz_rollout_pass_plan.c src/rollout/pass_plan.c src/rollout/plan.c \
	src/rollout/read.c src/rollout/evidence_id.c src/reconcile/rollout_decide.c src/json/json.c src/json/canonical.c; then
	tap_binary rollout_pass_plan_test "$out/rollout_pass_plan_test" 0 fuzz/corpus/fuzz_rollout_pass_plan fuzz/regressions
fi
# The S3 helpers (URIs, checksum headers, credentials, SigV4 against AWS's examples).
if build s3_test test/unit/s3_test.c src/http/s3.c src/json/canonical.c src/json/json.c; then
	tap_binary s3_test "$out/s3_test" 0
fi
# What an object store's answer means for an artifact check (its verdict, its retry).
if build artifact_verdict_test test/unit/artifact_verdict_test.c src/reconcile/artifact_verdict.c src/http/backoff.c; then
	tap_binary artifact_verdict_test "$out/artifact_verdict_test" 0
fi
# What goes out or comes in from outside: PromQL revision names, UTF-8 cuts.
if build outward_test test/unit/outward_test.c src/rollout/prometheus.c src/json/json.c src/validate/names.c; then
	tap_binary outward_test "$out/outward_test" 0
fi
tap_done
