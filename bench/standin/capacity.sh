#!/bin/sh
# Measure the stand-in's request capacity (see capacity.js). Prints a table; never fails on timing.
#   bench/standin/capacity.sh [--requests N] [--concurrency C] [--runs R]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../../test/standin/setup.sh"
exec node "$HERE/capacity.js" "$@"
