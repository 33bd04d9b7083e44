#!/bin/bash
# Build or install the real peers of `test/run.sh real`, pinned by
# test/real/versions.env, into a cache outside the repository:
#
#   $MLPLAT_PEERS_CACHE (default /var/cache/mlplat-peers)/
#     kube-<version>/bin/{kube-apiserver,kube-controller-manager}
#     etcd-<version>-<src hash>/bin/etcd
#     otlp-<version>-<src hash>/bin/otlp-receiver
#     mlflow-<version>/venv/bin/mlflow
#     moto-<version>/venv/bin/moto_server
#
# Each component is built once (under a lock, so concurrent test runs wait
# for one build), into a scratch directory renamed into place when complete;
# a later run finds it and starts at once. Go modules come only through the
# Go module proxy, Python packages only through pip.
#
#   build.sh [COMPONENT...]   components: kube etcd otlp mlflow moto (all)
#   build.sh --paths          print NAME=PATH lines for the start script
#
# Prints how long each component took (0 s when cached).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
CACHE=${MLPLAT_PEERS_CACHE:-/var/cache/mlplat-peers}
NICE=${MLPLAT_PEERS_NICE:-nice -n 10}

srchash() { cat "$@" | sha256sum | cut -c1-12; }

kube_dir=$CACHE/kube-$K8S_VERSION
etcd_dir=$CACHE/etcd-$ETCD_VERSION-$(srchash "$here/etcd/main.go")
otlp_dir=$CACHE/otlp-$OTEL_PDATA_VERSION-$(srchash "$here/otlp/main.go")
mlflow_dir=$CACHE/mlflow-$MLFLOW_VERSION-$(srchash "$here/pip/mlflow.txt")
moto_dir=$CACHE/moto-$MOTO_VERSION-$(srchash "$here/pip/moto.txt")

if [ "${1:-}" = "--paths" ]; then
	echo "KUBE_APISERVER=$kube_dir/bin/kube-apiserver"
	echo "KUBE_CONTROLLER_MANAGER=$kube_dir/bin/kube-controller-manager"
	echo "ETCD=$etcd_dir/bin/etcd"
	echo "OTLP_RECEIVER=$otlp_dir/bin/otlp-receiver"
	echo "MLFLOW=$mlflow_dir/venv/bin/mlflow"
	echo "MOTO_SERVER=$moto_dir/venv/bin/moto_server"
	exit 0
fi

mkdir -p "$CACHE"
command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is needed to build the real peers" >&2; exit 1; }
python3 -c 'import venv, ensurepip' 2>/dev/null ||
	{ echo "build.sh: python3 with venv and ensurepip (Debian: python3-venv) is needed" >&2; exit 1; }

# once DIR NAME BUILDER: run BUILDER DIR unless DIR/.complete exists. The
# lock makes concurrent runs wait for one build; .complete, written last,
# tells a finished build from an interrupted one (which is started afresh).
once() {
	local dir=$1 name=$2 builder=$3 t0 rc
	t0=$(date +%s)
	exec 9>"$CACHE/.lock-$name"
	flock 9
	if [ -e "$dir/.complete" ]; then
		echo "peers: $name cached ($(basename "$dir"))"
		exec 9>&-
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "peers: building $name into $dir (log $dir/build.log)"
	# A new process: errexit would be ignored inside a function called from
	# an "if" or "||", and a failed step must fail the build.
	rc=0
	"$0" --build "$builder" "$dir" >"$dir/build.log" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		echo "peers: building $name FAILED; last lines of $dir/build.log:" >&2
		tail -40 "$dir/build.log" >&2
		exec 9>&-
		return 1
	fi
	touch "$dir/.complete"
	exec 9>&-
	echo "peers: built $name in $(( $(date +%s) - t0 )) s"
}

go_env() {
	export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
}

build_kube() {
	local s=$1 gomod mods m
	go_env
	mkdir -p "$s/src" "$s/bin"
	cd "$s/src"
	# The usual way to consume k8s.io/kubernetes as a module: require it and
	# replace each staging module (./staging/src/k8s.io/X in its go.mod) by
	# the published k8s.io/X release of the same version.
	gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	[ -s "$gomod" ] || { echo "no go.mod for k8s.io/kubernetes@$K8S_VERSION"; return 1; }
	mods=$(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*|\1|p' "$gomod")
	[ -n "$mods" ] || { echo "no staging modules in $gomod"; return 1; }
	{
		echo "module mlplat.test/realpeers/kube"
		echo
		echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/').0"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		echo "replace ("
		for m in $mods; do echo "	$m => $m $K8S_STAGING_VERSION"; done
		echo ")"
	} >go.mod
	cat go.mod
	go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
		"k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION"
	local major minor ld
	major=${K8S_VERSION#v}; major=${major%%.*}
	minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
	ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
	ld="$ld -X k8s.io/component-base/version.gitMajor=$major"
	ld="$ld -X k8s.io/component-base/version.gitMinor=$minor"
	ld="$ld -X k8s.io/component-base/version.gitTreeState=clean"
	for m in kube-apiserver kube-controller-manager; do
		date
		$NICE go build -trimpath -ldflags "$ld" -o "$s/bin/$m" "k8s.io/kubernetes/cmd/$m"
	done
	date
	"$s/bin/kube-apiserver" --version
}

# A tiny main of our own (DIR/main.go) against pinned module versions.
build_small() {
	local s=$1 src=$2 out=$3
	shift 3
	go_env
	mkdir -p "$s/src" "$s/bin"
	cp "$src/main.go" "$s/src/"
	cd "$s/src"
	go mod init "mlplat.test/realpeers/$out"
	go get "$@"
	go mod tidy
	$NICE go build -trimpath -ldflags "-s -w" -o "$s/bin/$out" .
}
build_etcd() { build_small "$1" "$here/etcd" etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION"; }
build_otlp() {
	build_small "$1" "$here/otlp" otlp-receiver \
		"go.opentelemetry.io/collector/pdata@$OTEL_PDATA_VERSION"
}

# build_venv DIR CONSTRAINTS PACKAGE... — a venv with PACKAGEs, every dependency held to
# the version CONSTRAINTS names; the build fails if pip installed anything else.
build_venv() {
	local s=$1 pins=$2
	shift 2
	python3 -m venv "$s/venv"
	$NICE "$s/venv/bin/pip" install --disable-pip-version-check -q -c "$pins" "$@"
	"$s/venv/bin/pip" freeze >"$s/freeze.txt"
	if ! diff <(grep -v '^#' "$pins" | sort -f) <(sort -f "$s/freeze.txt") >"$s/freeze.diff"; then
		echo "build.sh: $s installed other packages than $pins pins:" >&2
		cat "$s/freeze.diff" >&2
		return 1
	fi
}
build_mlflow() {
	build_venv "$1" "$here/pip/mlflow.txt" "mlflow==$MLFLOW_VERSION" \
		"psycopg2-binary==$PSYCOPG2_BINARY_VERSION" "Flask-WTF==$FLASK_WTF_VERSION"
}
build_moto() { build_venv "$1" "$here/pip/moto.txt" "moto[server,s3]==$MOTO_VERSION"; }

if [ "${1:-}" = --build ]; then
	set -e
	"$2" "$3"
	exit 0
fi

comps=${*:-kube etcd otlp mlflow moto}
t_all=$(date +%s)
# The pip installs mostly wait on the network: they run beside the Go builds.
pids=()
for c in $comps; do
	case $c in
	mlflow) once "$mlflow_dir" mlflow build_mlflow & pids+=($!) ;;
	moto) once "$moto_dir" moto build_moto & pids+=($!) ;;
	esac
done
rc=0
for c in $comps; do
	case $c in
	kube) once "$kube_dir" kube build_kube || rc=1 ;;
	etcd) once "$etcd_dir" etcd build_etcd || rc=1 ;;
	otlp) once "$otlp_dir" otlp build_otlp || rc=1 ;;
	mlflow | moto) ;;
	*) echo "build.sh: unknown component $c" >&2; exit 2 ;;
	esac
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
((rc == 0)) || exit 1
echo "peers: ready in $(( $(date +%s) - t_all )) s"
