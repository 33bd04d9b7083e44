#!/usr/bin/env bash
# test/run.sh — build mlplat, install it into a private copy of PostgreSQL 15,
# start a throwaway cluster as an unprivileged user and run every suite.
#
#   test/run.sh                 all suites
#   test/run.sh --sanitize      the same, with mlplat built under ASan + UBSan
#   test/run.sh SUITE...        only these (selftest regress isolation pgtap upgrade lifecycle scripts fuzz real)
#   FUZZ_SECONDS=N              seconds per libFuzzer target in the fuzz suite (default 20)
#   KEEP=1 test/run.sh          keep the work directory (it is kept anyway on failure)
#   ONLY=regex test/run.sh scripts   only the scripts whose path matches regex
#
# The cluster is always stopped. The last line is "N passed, N failed", the line
# before it "N skipped (...)".
set -uo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
SANITIZE=0
SUITES=()
for a in "$@"; do
	case "$a" in
		--sanitize) SANITIZE=1 ;;
		-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
		*) SUITES+=("$a") ;;
	esac
done
# The fuzz targets are always built with ASan + UBSan (and need no server), so
# the --sanitize pass of scripts/test.sh does not run them a second time.
if ! ((${#SUITES[@]})); then
	SUITES=(selftest regress isolation pgtap upgrade lifecycle scripts)
	((SANITIZE)) || SUITES+=(fuzz real)
fi

. "$SRC/test/lib/cluster.sh"
. "$SRC/test/lib/judge.sh"

# The suites use only what the repository carries (the CRD schemas in
# test/schemas/, the validator in test/tools/); nothing beside it.  A clone has
# nothing beside it, but a development machine may (a shared/ directory beside
# the checkout, or beside the main checkout of a worktree): the run hides it
# behind an empty read-only tmpfs in a mount namespace of its own, so a suite
# that reads it fails here as it would in a clone.  The selftest suite also
# fails if a runtime reference to ../shared comes back.
unset MLPLAT_SHARED VALIDATE_MANIFEST
if [ -z "${MLPLAT_TEST_HIDDEN:-}" ]; then
	declare -A seen=()
	hide=()
	for d in "$SRC/../shared" "$(cd "$SRC" && cd "$(git rev-parse --git-common-dir 2>/dev/null || echo .)/../.." 2>/dev/null && pwd)/shared"; do	# hides, never reads
		[ -d "$d" ] || continue
		d=$(cd "$d" && pwd)
		[ -n "${seen[$d]:-}" ] || { seen[$d]=1; hide+=("$d"); }
	done
	if ((${#hide[@]})) && unshare -m true 2>/dev/null; then
		echo "== hiding ${hide[*]} from this run (a clone has nothing beside it)"
		exec env MLPLAT_TEST_HIDDEN="${hide[*]}" unshare -m bash -c '
			n=$1; shift
			for ((i = 0; i < n; i++)); do mount -t tmpfs -o ro,size=64k mlplat-hidden "$1" || exit 1; shift; done
			exec bash "$@"' hide "${#hide[@]}" "${hide[@]}" "$0" "$@"
	elif ((${#hide[@]})); then
		echo "== note: ${hide[*]} stays visible to this run (no mount namespace here)"
	fi
fi
cluster_init "$(mktemp -d /tmp/mlplat-test.XXXXXX)"
PASS=0
FAIL=0
SKIP=0
TODO=0
FAILED_NAMES=()
SKIPPED_NAMES=()

log() { printf '== %s\n' "$*"; }
pass() { PASS=$((PASS + ${2:-1})); }
fail() { FAIL=$((FAIL + ${2:-1})); FAILED_NAMES+=("$1"); printf 'FAILED: %s\n' "$1"; }
note_duration() { printf '%s %d\n' "$1" "$2" >>"$WORK/durations"; }

# The summary comes last on every way out (an early exit after a failed build or cluster
# start too): skips (and TODOs, known gaps) are neither passes nor failures, counted on the
# line before "N passed, N failed".
finish() {
	local rc=$?
	cluster_stop_all
	if ((FAIL == 0 && rc == 0)) && [ -z "${KEEP:-}" ]; then
		rm -rf "$WORK"
	else
		echo "work directory kept: $WORK (server log: $WORK/server.log)"
	fi
	echo "$SKIP skipped, $TODO todo${SKIPPED_NAMES:+ (${SKIPPED_NAMES[*]})}"
	echo "$PASS passed, $FAIL failed"
}
trap finish EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build + private install
# The test build: also the test kinds of test/kinds/ (a reconciler kind built by
# docs/reconcilers.md "Adding a kind", never in a release).  MLPLAT_TEST_KINDS=0
# builds and tests a release build instead; the scripts read it to count the kinds.
export MLPLAT_TEST_KINDS=${MLPLAT_TEST_KINDS:-1}
MAKE_FLAGS=(MLPLAT_TEST_KINDS="$MLPLAT_TEST_KINDS")
if ((SANITIZE)); then
	# Build a copy so the sanitized objects never mix with the normal ones.
	# The sanitizer runtimes come in with mlplat.so; their options are compiled
	# in (src/sanitizer_options.c) and reports go to the server logs, scanned
	# at the end.
	BUILD=$WORK/build
	mkdir -p "$BUILD"
	(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$BUILD")
	MAKE_FLAGS+=(MLPLAT_CFLAGS="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer -O1"
		MLPLAT_LDFLAGS="-fsanitize=address,undefined,float-cast-overflow")
fi
log "build ($([ $SANITIZE = 1 ] && echo 'ASan+UBSan' || echo 'normal'))"
t0=$SECONDS
if ! cluster_build "${MAKE_FLAGS[@]}"; then
	cat "$WORK/build.log"
	fail build
	exit 1
fi

note_duration build $((SECONDS - t0))

# ---------------------------------------------------------------- cluster
PORT=$(free_port)
DATA=$WORK/data
log "cluster on port $PORT"
# A planted credential: the attack suite checks ordinary roles cannot see where it
# lives, and the end of the run checks that no server log ever shows it.
mkdir -p "$WORK/secrets"
printf 'planted-registry-secret-%s%s' "$RANDOM" "$RANDOM" >"$WORK/secrets/token"
chmod 644 "$WORK/secrets/token"
if ! cluster_start "$DATA" "$PORT" "${MLPLAT_CONF[@]}" "mlplat.resync_interval = '2s'" "mlplat.full_resync_interval = '4s'" \
	"mlplat.registry_token_file = '$WORK/secrets/token'"; then
	cat "$DATA.log"; fail cluster; exit 1
fi
ln -sf "$DATA.log" "$WORK/server.log"
export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres PGDATABASE=mlplat
"$BIN/psql" -qX -d postgres -c "CREATE DATABASE mlplat" >/dev/null
"$BIN/psql" -qX -c "CREATE EXTENSION pg_cron; CREATE EXTENSION mlplat" >/dev/null || fail "create extension"

# ---------------------------------------------------------------- suites
# Each suite adds to PASS/FAIL; counts are tests (regress files, isolation
# specs, pgTAP assertions, script checks).

suite_regress() {
	local tests
	tests=$(make -C "$SRC" -s print-REGRESS)
	[ -n "$tests" ] || { log "regress: no tests"; return; }
	log "pg_regress: $tests"
	"$PGXS_DIR/src/test/regress/pg_regress" --bindir="$BIN" --host="$PGHOST" --port="$PGPORT" \
		--user=postgres --inputdir="$SRC" --outputdir="$WORK/regress" --dbname=mlplat_regress \
		--load-extension=mlplat $tests >"$WORK/regress.log" 2>&1
	count_pg_regress "$WORK/regress.log" regress "$WORK/regress/regression.diffs" "$(echo $tests | wc -w)"
}

suite_isolation() {
	local specs
	specs=$(make -C "$SRC" -s print-ISOLATION)
	[ -n "$specs" ] || { log "isolation: no specs"; return; }
	log "isolation: $specs"
	"$PGXS_DIR/src/test/isolation/pg_isolation_regress" --bindir="$BIN" --host="$PGHOST" --port="$PGPORT" \
		--user=postgres --inputdir="$SRC/test/isolation" --outputdir="$WORK/isolation" \
		--dbname=mlplat_isolation --load-extension=mlplat $specs >"$WORK/isolation.log" 2>&1
	count_pg_regress "$WORK/isolation.log" isolation "$WORK/isolation/regression.diffs" "$(echo $specs | wc -w)"
}

# pg_regress prints one line per test ending in "ok" or "FAILED"
count_pg_regress() {
	local logf=$1 name=$2 diffs=$3 requested=$4 ok bad
	cat "$logf"
	# a test that printed neither ok nor FAILED (missing expected file, crash) failed too
	ok=$(grep -cE '\.\.\. ok( |$)|^ok ' "$logf")
	bad=$((requested - ok))
	pass "$name" "$ok"
	if ((bad)); then
		fail "$name ($bad)" "$bad"
		[ -f "$diffs" ] && head -200 "$diffs"
	fi
}

suite_pgtap() {
	local files out tests failed
	files=$(ls "$SRC"/test/pgtap/*.sql 2>/dev/null)
	[ -n "$files" ] || { log "pgtap: no tests"; return; }
	log "pgTAP"
	"$BIN/psql" -qX -d postgres -c "DROP DATABASE IF EXISTS mlplat_tap" -c "CREATE DATABASE mlplat_tap" >/dev/null
	"$BIN/psql" -qX -d mlplat_tap -c "CREATE EXTENSION pgtap; CREATE EXTENSION mlplat" >/dev/null
	# verbose, to see each result's SKIP or TODO; the log shows all but the plain "ok" lines
	out=$(PGDATABASE=mlplat_tap pg_prove --verbose --psql-bin "$BIN/psql" -f $files 2>&1)
	echo "$out" | grep -vE '^ok [0-9]+( - [^#]*)?$'
	echo "$out" >"$WORK/pgtap.out"
	tests=$(echo "$out" | sed -n 's/.*Tests=\([0-9]*\).*/\1/p' | tail -1)
	failed=$(echo "$out" | grep -oE 'Failed [0-9]+/[0-9]+ subtests' | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
	tests=${tests:-0}
	if ! echo "$out" | grep -q '^Result: PASS'; then
		# a file that died or had a bad plan counts as one failure at least
		((failed == 0)) && failed=1
	fi
	# pg_prove counts a skip() or todo() as a pass: count them apart, per file
	local f s t nskip=0
	while read -r f s t; do
		count_skips "${f#$SRC/}" "$s" "$t"
		nskip=$((nskip + s + t))
	done < <(tap_prove_counts "$WORK/pgtap.out")
	pass pgtap $((tests - failed - nskip))
	((failed)) && fail "pgtap ($failed)" "$failed"
}

# Scripts printing TAP: test/*/run.sh suites and test/e2e/*.sh, run against this cluster.
suite_scripts() {
	local s
	for s in $(ls "$SRC"/test/unit/run.sh "$SRC"/test/tools/test.sh "$SRC"/test/style/run.sh "$SRC"/test/http/run.sh "$SRC"/test/standin/test.sh "$SRC"/test/e2e/*.sh 2>/dev/null); do
		[[ -n "${ONLY:-}" && ! "${s#$SRC/}" =~ $ONLY ]] && continue
		# These run no mlplat code in the server: the unit tests are always built
		# with ASan + UBSan (and fail in the normal pass on any report, see
		# test/lib/judge.sh), the validator and the stand-in need no server, the
		# package test builds its own .deb.  The sanitizer pass would only repeat
		# the normal pass.
		if ((SANITIZE)) && [[ ${s#$SRC/} =~ ^test/(unit/run|tools/test|style/run|standin/test|e2e/package)\.sh$ ]]; then
			log "script: ${s#$SRC/} (in the normal pass only: no server code to sanitize)"
			continue
		fi
		run_tap_script "$s"
	done
}

suite_upgrade() { run_tap_script "$SRC/test/upgrade/run.sh"; }

# The end-to-end scenarios against real peers (test/real/): a real
# kube-apiserver with etcd and kube-controller-manager, real MLflow, an S3
# server, a strict OTLP receiver. The peers are built or installed once into a
# cache (test/real/build.sh, versions in test/real/versions.env); the times
# are printed so the CI budget stays visible.
suite_real() {
	local s t0
	log "real peers: build or find in the cache"
	t0=$SECONDS
	if ! "$SRC/test/real/build.sh"; then
		fail "real peers build"
		return
	fi
	note_duration real-peers-build $((SECONDS - t0))
	log "real peers: ready after $((SECONDS - t0)) s"
	for s in "$SRC"/test/real/e2e/*.sh; do
		[[ -n "${ONLY:-}" && ! "${s#$SRC/}" =~ $ONLY ]] && continue
		run_tap_script "$s"
	done
}
suite_fuzz() { run_tap_script "$SRC/fuzz/run.sh" "${FUZZ_SECONDS:-20}"; }
suite_lifecycle() { run_tap_script "$SRC/test/lifecycle/run.sh"; }
suite_selftest() { run_tap_script "$SRC/test/selftest/run.sh"; }

# run_tap_script SCRIPT ARGS... — run one TAP script against this cluster and judge
# it by its exit status, its plan and its results (test/lib/judge.sh).  Skips are
# counted apart; more than test/expected-skips allows (with a reason) is a failure.
run_tap_script() {
	local s=$1 name out rc t0 allowed mode
	shift
	[ -f "$s" ] || return 0
	name=${s#$SRC/}
	log "script: $name"
	out=$WORK/tap/$(echo "$name" | tr / _).out
	mkdir -p "$WORK/tap"
	t0=$SECONDS
	MLPLAT_TEST_CLUSTER=1 MLPLAT_TEST_WORK=$WORK MLPLAT_TEST_BIN=$BIN timeout 900 bash "$s" "$@" >"$out" 2>&1
	rc=$?
	cat "$out"
	note_duration "$name" $((SECONDS - t0))
	tap_judge "$out" "$rc"
	pass "$name" "$J_PASS"
	count_skips "$name" "$J_SKIP" "$J_TODO"
	((J_FAIL)) && fail "$name ($J_WHY)" "$J_FAIL"
	return 0
}

# count_skips NAME SKIPS TODOS — skips and TODOs are counted apart from passes; more of
# either than test/expected-skips allows NAME in this pass is a failure
count_skips() {
	local mode allowed
	mode=$( ((SANITIZE)) && echo sanitize || echo normal)
	if (($2)); then
		SKIP=$((SKIP + $2))
		SKIPPED_NAMES+=("$1 $2")
		allowed=$(tap_allowed_skips "$SRC/test/expected-skips" "$mode" "$1" skip)
		(($2 > allowed)) && fail "$1 (skipped $2, test/expected-skips allows $allowed in the $mode pass)"
	fi
	if (($3)); then
		TODO=$((TODO + $3))
		SKIPPED_NAMES+=("$1 todo $3")
		allowed=$(tap_allowed_skips "$SRC/test/expected-skips" "$mode" "$1" todo)
		(($3 > allowed)) && fail "$1 ($3 TODO, test/expected-skips allows $allowed in the $mode pass)"
	fi
	return 0
}

export SRC BIN WORK RUNAS PGXS_DIR SANITIZE
export -f as_pg free_port
for s in "${SUITES[@]}"; do
	t0=$SECONDS
	"suite_$s"
	[[ $s =~ ^(regress|isolation|pgtap)$ ]] && note_duration "$s" $((SECONDS - t0))
done
# Where the wall-clock time went, slowest first: the CI budget is spent here.
log "slowest: $(sort -k2 -nr "$WORK/durations" 2>/dev/null | head -12 | awk '{printf "%s %ss; ", $1, $2}')"

# ---------------------------------------------------------------- teardown and checks
log "stopping"
as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -t 60 stop >/dev/null || fail "fast shutdown"
# A backend that died abnormally makes the postmaster restart every process.
if grep -E 'PANIC|TRAP:|all server processes terminated; reinitializing' "$DATA.log"; then
	fail "server log shows a crash"
fi
# No server log (this cluster's or any a script started) may contain a credential:
# the planted token above, or any stand-in's bearer token (files named "token").
if [ -d "$WORK/secrets" ]; then
	leaks=0
	while IFS= read -r -d '' tf; do
		secret=$(cat "$tf")
		[ "${#secret}" -ge 8 ] || continue
		if find "$WORK" -name '*.log' -type f ! -name standin.log -print0 |
			xargs -0 -r grep -lF -- "$secret"; then
			leaks=$((leaks + 1))
		fi
	done < <(find "$WORK" -type f -name token -print0)
	if ((leaks)); then
		fail "a credential appears in a server log"
	else
		log "secrets: no credential in any server log ($(find "$WORK" -type f -name token | wc -l) checked)"
		pass secrets
	fi
fi
# A worker's status line that overflows its buffer loses the tail tests and operators read
# (the watch cache's size, ", listed"): no server log may say one was cut.
cut=$(find "$WORK" -name '*.log' -type f ! -name standin.log -exec grep -shF 'mlplat: a status line of' {} + | head -3)
if [ -n "$cut" ]; then
	echo "$cut"
	fail "a status line was cut short"
else
	log "status lines: none cut short"
	pass status-lines
fi
if ((SANITIZE)); then
	reports=$(find "$WORK" -maxdepth 2 -name '*.log' -exec grep -shE -A25 'ERROR: AddressSanitizer|runtime error:' {} +)
	if [ -n "$reports" ]; then
		echo "$reports" | head -80
		fail "sanitizer reports"
	else
		log "sanitizers: no reports"
		pass sanitizer
	fi
fi

((FAIL)) && printf 'failed: %s\n' "${FAILED_NAMES[*]}"
((FAIL == 0))   # the summary: finish, at exit
