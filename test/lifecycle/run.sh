#!/usr/bin/env bash
# Extension and worker lifecycle: workers are registered when preloaded, one
# leader per kind, DROP/CREATE EXTENSION work with workers running, and
# without preloading the SQL API still works after a clear WARNING.
set -u
. "$(dirname "$0")/../lib/tap.sh"
tap_require_cluster

KINDS=$(mlplat_kinds_count)
REPLICAS=$(q mlplat "SHOW mlplat.replicas")

wait_for mlplat "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mlplat reconciler'" \
	"$((KINDS * REPLICAS))" 20
tap_ok $? "$((KINDS * REPLICAS)) reconciler workers running ($KINDS kinds x $REPLICAS replicas)"

# each kind's leader holds one session userlock on (class, kind); exactly one per kind
LEADERS_SQL="SELECT count(DISTINCT objid) || '/' || count(*) FROM pg_locks
              WHERE locktype = 'userlock' AND granted AND classid = x'6d6c706c'::int::oid AND objsubid = 0
                AND database = (SELECT oid FROM pg_database WHERE datname = 'mlplat')"
wait_for mlplat "$LEADERS_SQL" "$KINDS/$KINDS" 20
tap_ok $? "exactly one leader per kind"

tap_same "$KINDS" "$(q mlplat "SELECT count(*) FROM mlplat.leader_epochs WHERE epoch >= 1")" \
	"each leader recorded an epoch"

start=$SECONDS
q mlplat "DROP EXTENSION mlplat" && q mlplat "CREATE EXTENSION mlplat"
tap_ok $? "DROP EXTENSION and CREATE EXTENSION with workers running"
tap_ok $(( (SECONDS - start) > 10 )) "... promptly ($((SECONDS - start)) s)"

wait_for mlplat "$LEADERS_SQL" "$KINDS/$KINDS" 20
tap_ok $? "leaders re-established after re-creating the extension"

# A server that does not preload mlplat: the API works, a WARNING says why nothing converges.
. "$(dirname "$0")/../lib/cluster.sh"
WORK=$MLPLAT_TEST_WORK BIN=$MLPLAT_TEST_BIN
D2=$WORK/nopreload
P2=$(free_port)
cluster_start "$D2" "$P2"
tap_ok $? "second cluster without shared_preload_libraries started"
out=$($MLPLAT_TEST_BIN/psql -qXAt -p "$P2" -d postgres -c "CREATE EXTENSION mlplat" -c "SELECT extension_version = library_version FROM mlplat.version()" 2>&1)
echo "$out" | grep -q "WARNING:  mlplat is not in shared_preload_libraries"
tap_ok $? "loading without preload warns that reconcilers are not running"
echo "$out" | grep -qx t
tap_ok $? "the SQL API works without preload"
tap_is "$($MLPLAT_TEST_BIN/psql -qXAt -p "$P2" -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mlplat reconciler'")" 0 \
	"no workers without preload"
cluster_stop_all

tap_done
