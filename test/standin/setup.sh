#!/bin/sh
# Install the stand-in's npm dependencies (idempotent; quick when node_modules is current).
set -eu
cd "$(dirname "$0")"
if [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] && [ -d node_modules/s3rver ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
