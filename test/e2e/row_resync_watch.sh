#!/usr/bin/env bash
# test/e2e/row_resync.sh with mlplat.deployments_watch on: the due row is observed from
# the watch cache (no request), resynced mlplat.watch_resync_interval ahead, drift found
# by its event, and a new leader's first pass fills the cache with one LIST.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
ROW_RESYNC_WATCH=on
. "$(dirname "$0")/row_resync.sh"
