#!/usr/bin/env bash
# scripts/setup.sh — install everything mlplat's build, tests and demo need.
# Idempotent: packages already present are not fetched again.  --bench adds what
# only the benchmarks need.  Run as root
# (or with sudo) on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
	postgresql-15 postgresql-server-dev-15 postgresql-15-cron postgresql-15-pgtap
	libtap-parser-sourcehandler-pgtap-perl
	libcurl4-openssl-dev libssl-dev make gcc
	clang-14 libclang-rt-14-dev              # fuzzers
	clang-format-14                          # the C style check (test/style/run.sh)
	python3 python3-jsonschema python3-yaml python3-kubernetes  # manifest validator, fidelity checks
	prometheus                               # real metrics backend for rollouts
)
# extra packages a suite declares for itself
for f in test/*/apt-packages.txt; do
	[ -f "$f" ] && while read -r p; do [ -n "${p%%#*}" ] && PACKAGES+=("${p%%#*}"); done <"$f"
done
# --bench: what only the benchmarks need (bench/curves draws its PNGs with gnuplot)
[ "${1:-}" = "--bench" ] && PACKAGES+=(gnuplot-nox)
# kubectl: Debian's kubernetes-client, unless some kubectl is already installed
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
# Node.js runs the stand-in cluster
command -v node >/dev/null || PACKAGES+=(nodejs npm)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# the stand-in cluster's npm dependencies
if [ -f test/standin/package.json ]; then
	(cd test/standin && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; })
fi
echo "setup: done"
