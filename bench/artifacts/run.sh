#!/usr/bin/env bash
# bench/artifacts/run.sh — what the artifact check costs before a first apply, one table:
#   deploy() commit -> the InferenceService apply arriving at the stand-in, when the
#   artifact's digest comes from (a) the store's checksum header (one HEAD), (b) the
#   digest cache (one HEAD), (c) a download hashed on the way (HEAD + GET of SIZE_MB);
# with, in the same run, the baseline that gives (c) meaning: curl | sha256sum of the
# same objects through the same S3 front.
#   TRIALS=5 SIZE_MB=32 bench/artifacts/run.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TRIALS=${TRIALS:-5}
SIZE_MB=${SIZE_MB:-32}
. "$SRC/test/lib/stack.sh"
stack_init art
stack_standin
stack_start "${MLPLAT_CONF[@]}" "cron.database_name = 'postgres'" "${STANDIN_CONF[@]}"
stack_db mlplat mlplat
$PSQL -d mlplat -c "SELECT mlplat.create_project('bench', 0)" \
	-c "SELECT mlplat.add_artifact_location('bench', 's3://models/')" >/dev/null
wait_for mlplat "SELECT status FROM mlplat.projects WHERE name = 'bench'" READY 30 >/dev/null

stats() {   # stdin: one number per line -> "median max"
	sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "- -"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.0f %.0f\n", m, a[NR]}'
}
n=0
# one_deploy VERSION URI SHA -> ms from the deploy() commit to the apply at the stand-in
one_deploy() {
	n=$((n + 1))
	local name=d$n t0 ms
	$PSQL -d mlplat -c "SELECT mlplat.register_model_version('bench', 'm', '$1', '$2', '$3', 'kserve-sklearnserver', 'sklearn')" \
		-c "SELECT mlplat.set_model_stage('bench', 'm', '$1', 'CANDIDATE')" >/dev/null 2>&1
	t0=$($PSQL -d mlplat -c "SELECT mlplat.deploy('bench', '$name', 'm', '$1', 'kserve-sklearnserver')" \
		-c "SELECT extract(epoch FROM clock_timestamp())" | tail -1)
	for _ in $(seq 1 6000); do
		ms=$(admin GET "requests?kind=InferenceService&name=$name&method=PATCH" | python3 -c '
import json, sys, datetime
i = json.load(sys.stdin)["items"]
if i:
    t = datetime.datetime.fromisoformat(i[0]["time"].replace("Z", "+00:00")).timestamp()
    print(round((t - float(sys.argv[1])) * 1000))' "$t0")
		[ -n "$ms" ] && break
		sleep 0.02
	done
	echo "${ms:-}"
}
# put KEY FILE [checksum] — straight to S3 (the admin API takes 3 MiB at most); prints the
# SHA-256.  With "checksum" the stand-in answers x-amz-checksum-sha256 (its emulation of an
# upload with a checksum); x-amz-meta-sha256 would prove nothing and is not read.
put() {
	local sha b64
	sha=$(sha256sum <"$2" | cut -d' ' -f1)
	b64=$(printf '%s' "$sha" | xxd -r -p | base64)
	curl -sf -X PUT --data-binary @"$2" ${3:+-H "x-amz-meta-standin-checksum-sha256: $b64"} "http://127.0.0.1:$STANDIN_S3/models/$1" >/dev/null || return 1
	echo "$sha"
}

: >"$WORK/meta.txt"; : >"$WORK/cache.txt"; : >"$WORK/get.txt"; : >"$WORK/base.txt"
letters=(a b c d e f g h i j k l m n o p q r s t)
for t in $(seq 1 "$TRIALS"); do
	head -c $((SIZE_MB * 1024 * 1024)) /dev/zero | tr '\0' "${letters[$((t % 20))]}" >"$WORK/obj"
	sha=$(put "meta/$t" "$WORK/obj" checksum)
	one_deploy "meta$t" "s3://models/meta/$t" "$sha" >>"$WORK/meta.txt"
	sha=$(put "raw/$t" "$WORK/obj")
	one_deploy "raw$t" "s3://models/raw/$t" "$sha" >>"$WORK/get.txt"
	one_deploy "raw$t" "s3://models/raw/$t" "$sha" >>"$WORK/cache.txt"   # same version again: cache
	t0=$(date +%s%N)
	curl -s "http://127.0.0.1:$STANDIN_S3/models/raw/$t" | sha256sum >/dev/null
	echo $((($(date +%s%N) - t0) / 1000000)) >>"$WORK/base.txt"
done
read -r meta_med meta_max < <(stats <"$WORK/meta.txt")
read -r cache_med cache_max < <(stats <"$WORK/cache.txt")
read -r get_med get_max < <(stats <"$WORK/get.txt")
read -r base_med base_max < <(stats <"$WORK/base.txt")
gets=$(admin GET "requests?area=s3&method=GET" | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("sigv4") == "valid"))')

echo
echo "artifact check before a first apply: deploy() commit -> apply at the stand-in ($TRIALS trials, ${SIZE_MB} MB objects)"
printf '| %-58s | %10s | %8s |\n' "case" "median ms" "max ms"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..60})" "$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..10})"
printf '| %-58s | %10s | %8s |\n' "digest from the store's checksum header (HEAD)" "$meta_med" "$meta_max"
printf '| %-58s | %10s | %8s |\n' "digest from the cache, second deployment (HEAD)" "$cache_med" "$cache_max"
printf '| %-58s | %10s | %8s |\n' "download + SHA-256 in the worker (HEAD + GET)" "$get_med" "$get_max"
printf '| %-58s | %10s | %8s |\n' "baseline: curl | sha256sum, same objects, same front" "$base_med" "$base_max"
awk -v a="$get_med" -v b="$base_med" -v s="$SIZE_MB" 'BEGIN { if (b > 0) printf "download path / baseline: %.2f; worker throughput %.0f MB/s\n", a / b, s / (a / 1000) }'
echo "GETs the stand-in's S3 served to mlplat: $gets (one per distinct object; none for cache hits)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
