#!/usr/bin/env bash
# The soak on the real peers, short: bench/soak/run.sh with SOAK_PEERS=real
# for SOAK_SECONDS (60) of load from 2 clients, on a cluster of its own.  The
# real kube-apiserver (etcd, kube-controller-manager, CRDs from the real
# schemas) sits behind test/real/faultproxy.py, which injects the stand-in's
# faults (5xx, 429 + Retry-After, writes applied then the connection dropped,
# latency spikes, a create/apply held while its leader is terminated); the
# KServe/Argo imitation plays the controllers, moto the S3 server.  Leaders
# are terminated, a worker is killed with kill -9, the server is restarted in
# immediate mode.  The same checks as on the stand-in: no committed intent
# lost, exactly one audit event per intent, no duplicate object, the ledger
# and the observed state agree with what the real API server holds, worker
# memory flat.  Each check is one TAP line.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
SOAK_PEERS=real SOAK_SECONDS=${SOAK_SECONDS:-60} SOAK_CLIENTS=${SOAK_CLIENTS:-2} SOAK_HOLD_KILL_S=${SOAK_HOLD_KILL_S:-8} \
	SOAK_CONVERGE_MAX=${SOAK_CONVERGE_MAX:-150} SOAK_STEADY=${SOAK_STEADY:-20} exec bash "$ROOT/test/e2e/soak.sh"
