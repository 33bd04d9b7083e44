#!/usr/bin/env bash
# bench/soak/driver.sh CLIENT OUTDIR — one load client of the soak, as a real
# application would behave: every call is a fresh connection (psql), every
# intent carries an idempotency key chosen before the first try, and a call
# that failed for a reason that says nothing about the outcome (connection
# lost, server restarting, backend terminated, serialization failure) is
# retried with the same key until it answers.  Only calls that returned an
# `accepted` row are logged as committed intents (OUTDIR/intents.CLIENT):
#
#   ms action key project entity request_id revision status replayed tries
#
# SOAK_LOST_ANSWER_PCT (3) percent of first answers are thrown away and the
# call is made again, as after a connection that broke between COMMIT and the
# answer: a keyed call must replay the same request, an unkeyed transition
# must find itself already done.
#
# The rate is bounded like pgbench -R: one call every 1/SOAK_RATE seconds per
# client, retries included.  The client stops at the first episode boundary
# after OUTDIR/stop appears; an intent in flight is finished first (for at
# most SOAK_RETRY_MAX seconds, then logged as abandoned in OUTDIR/errors.CLIENT).
# Needs PSQL (psql with connection options) in the environment.
set -u
C=$1 OUT=$2
# SOAK_SEED makes the client's choices (answers thrown away, retry pauses) differ per run
[ -n "${SOAK_SEED:-}" ] && RANDOM=$((SOAK_SEED * 100 + C))
RATE=${SOAK_RATE:-1}
RETRY_MAX=${SOAK_RETRY_MAX:-90}
LOST_PCT=${SOAK_LOST_ANSWER_PCT:-3}
LOG=$OUT/intents.$C ERR=$OUT/errors.$C
: >"$LOG"; : >"$ERR"
INTERVAL_MS=$(awk -v r="$RATE" 'BEGIN { printf "%d", 1000 / r }')
next_ms=$(date +%s%3N)
now_ms() { date +%s%3N; }

pace() {
	local now
	next_ms=$((next_ms + INTERVAL_MS))
	now=$(now_ms)
	if ((next_ms > now)); then
		sleep "$(awk -v d=$((next_ms - now)) 'BEGIN { printf "%.3f", d / 1000 }')"
	else
		next_ms=$now   # behind (a restart held us up): no catch-up burst
	fi
}

# call ACTION KEY PROJECT ENTITY SQL — run until the call answers.  Returns 0
# and logs the intent when it was accepted, 1 on a definite refusal.
call() {
	local action=$1 key=$2 project=$3 entity=$4 sql=$5 tries=0 t0 out err code
	t0=$SECONDS
	while :; do
		tries=$((tries + 1))
		out=$($PSQL -v VERBOSITY=sqlstate -c "$sql" 2>"$OUT/.err.$C")
		if [ $? = 0 ] && [ -n "$out" ]; then
			if ((tries == 1 && RANDOM % 100 < LOST_PCT)); then
				# as if the connection broke after COMMIT, before the answer arrived
				printf '%s\tretry\t%s\t%s\t%s\t%s\n' "$(now_ms)" "$action" "$key" lost-answer "${out%%|*}" >>"$ERR"
				continue
			fi
			IFS='|' read -r rid _entity _eid rev status replayed <<<"$out"
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(now_ms)" "$action" "$key" "$project" "$entity" \
				"$rid" "${rev:--}" "$status" "$replayed" "$tries" >>"$LOG"
			return 0
		fi
		err=$(tr '\n' ' ' <"$OUT/.err.$C")
		code=$(grep -oE '(ERROR|FATAL): +[0-9A-Z]{5}' <<<"$err" | tail -1 | awk '{print $2}')
		case "$code" in
			''|08*|57P0[123]|53300|40001|40P01)
				# the outcome is unknown or the transaction lost a race: same key again
				if ((SECONDS - t0 > RETRY_MAX)); then
					printf '%s\tabandoned\t%s\t%s\t%s\t%s\n' "$(now_ms)" "$action" "$key" "$entity" "$err" >>"$ERR"
					return 1
				fi
				printf '%s\tretry\t%s\t%s\t%s\n' "$(now_ms)" "$action" "$key" "${code:-conn}" >>"$ERR"
				sleep 0.$((2 + RANDOM % 6)) ;;
			*)
				printf '%s\trefused\t%s\t%s\t%s\t%s\n' "$(now_ms)" "$action" "$key" "$entity" "$err" >>"$ERR"
				return 1 ;;
		esac
	done
}

SHA=$(printf 'soak-model' | sha256sum | cut -d' ' -f1)
RUNSPEC='{"image": "python:3.12", "command": ["python", "train.py"]}'
n=0
while [ ! -e "$OUT/stop" ]; do
	n=$((n + 1))
	p=s${C}x$n k=soak-$C-$n
	# one episode: a project with a model, two deployments and two runs going
	# through their lives: deploy, redeploy, undeploy, start, cancel
	# the project's artifact location comes with it (same statement, keyed too: a retry replays both)
	call create_project "$k-p" "$p" "$p" "SELECT c.* FROM mlplat.create_project('$p', 0, '8', '16Gi', '$k-p') c
		CROSS JOIN LATERAL mlplat.add_artifact_location('$p', 's3://models/', '$k-l') l" || continue
	pace
	# the tenancy changes under faults too: a quota change (keyed) and a member
	# granted a second role, then losing the first (bindings made and deleted;
	# grant_role/revoke_role take no key: a retry changes nothing)
	call set_project_quota "$k-q" "$p" "" "SELECT * FROM mlplat.set_project_quota('$p', 0, '6', '12Gi', '$k-q')"
	pace
	call grant_role "$k-g1" "$p" soak-dev/developer "SELECT * FROM mlplat.grant_role('$p', 'soak-dev', 'developer')"
	pace
	for v in 1 2; do
		call register_model_version "$k-m$v" "$p" m/$v \
			"SELECT * FROM mlplat.register_model_version('$p', 'm', '$v', 's3://models/m/$v', '$SHA', 'kserve-sklearnserver', 'sklearn', '$k-m$v')"
		pace
		# set_model_stage takes no key; setting the stage it already has changes nothing
		call set_model_stage "$k-s$v" "$p" m/$v "SELECT * FROM mlplat.set_model_stage('$p', 'm', '$v', 'CANDIDATE')"
		pace
	done
	call deploy "$k-d1" "$p" a "SELECT * FROM mlplat.deploy('$p', 'a', 'm', '1', 'kserve-sklearnserver', 0, 1, 2, '{}', '$k-d1')"
	pace
	call start_run "$k-r1" "$p" r1 "SELECT * FROM mlplat.start_run('$p', 'r1', '$RUNSPEC', '$k-r1')"
	pace
	call start_run "$k-r2" "$p" long-$p "SELECT * FROM mlplat.start_run('$p', 'long-$p', '$RUNSPEC', '$k-r2')"
	pace
	call deploy "$k-d2" "$p" a "SELECT * FROM mlplat.deploy('$p', 'a', 'm', '2', 'kserve-sklearnserver', 0, 1, 2, '{\"SOAK\": \"$n\"}', '$k-d2')"
	pace
	call deploy "$k-d3" "$p" b "SELECT * FROM mlplat.deploy('$p', 'b', 'm', '1', 'kserve-sklearnserver', 0, 1, 1, '{}', '$k-d3')"
	pace
	# cancel_run and undeploy take no key: a retry after a lost answer finds
	# CANCEL_REQUESTED/DELETING and is a no-op (its fresh request id has no audit event)
	call cancel_run "$k-c2" "$p" long-$p "SELECT * FROM mlplat.cancel_run('$p', 'long-$p')"
	pace
	call undeploy "$k-u1" "$p" a "SELECT * FROM mlplat.undeploy('$p', 'a')"
	pace
	call grant_role "$k-g2" "$p" soak-dev/deployer "SELECT * FROM mlplat.grant_role('$p', 'soak-dev', 'deployer')"
	pace
	call revoke_role "$k-v1" "$p" soak-dev/developer "SELECT * FROM mlplat.revoke_role('$p', 'soak-dev', 'developer')"
	pace
done
