#!/usr/bin/env bash
# Packaged as PostgreSQL extensions are (issue 17, item 9): META.json is a valid
# PGXN distribution description for this version, and debian/ is a
# pg_buildext-style source that dpkg-buildpackage turns into an installable
# postgresql-15-mlplat .deb; the .deb is installed into a clean copy of the
# system's PostgreSQL 15 (no mlplat in it), which then preloads mlplat, creates
# the extension, runs its reconcilers and updates a 0.2.0 database.
# Builds the whole extension once more (~1 minute): the normal pass only.
set -u
. "$(dirname "$0")/../lib/e2e.sh"
PKG=$WORK/package
VERSION=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SRC/mlplat.control")

# --- META.json: the keys PGXN's meta spec 1.0.0 requires, and this version
out=$(python3 - "$SRC" "$VERSION" <<'PY'
import json, os, re, sys
src, version = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(src, "META.json")))
semver = re.compile(r"^\d+\.\d+\.\d+$")
errs = []
for k in ("name", "abstract", "maintainer", "license", "provides", "version", "meta-spec"):
    if k not in m: errs.append("missing " + k)
if m.get("meta-spec", {}).get("version") != "1.0.0": errs.append("meta-spec.version is not 1.0.0")
if not semver.match(m.get("version", "")): errs.append("version is not semver")
if m.get("version") != version: errs.append("version %s, mlplat.control says %s" % (m.get("version"), version))
ext = m.get("provides", {}).get("mlplat")
if not ext: errs.append("provides no mlplat extension")
else:
    for k in ("file", "version"):
        if k not in ext: errs.append("provides.mlplat lacks " + k)
    if ext.get("version") != version: errs.append("provides.mlplat.version is not " + version)
    if not os.path.exists(os.path.join(src, ext.get("file", "-"))): errs.append("provides.mlplat.file does not exist")
    if ext.get("docfile") and not os.path.exists(os.path.join(src, ext["docfile"])): errs.append("docfile missing")
req = m.get("prereqs", {}).get("runtime", {}).get("requires", {})
if not semver.match(req.get("PostgreSQL", "")): errs.append("no PostgreSQL runtime prerequisite")
print("; ".join(errs) or "valid")
PY
)
tap_is "$out" valid "META.json: a PGXN meta-spec 1.0.0 document for mlplat $VERSION"
tap_same "$VERSION" "$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)" \
	"debian/changelog is at the version mlplat.control builds"
grep -qx 15 "$SRC/debian/pgversions"
tap_ok $? "debian/pgversions names PostgreSQL 15"

# --- dpkg-buildpackage from a copy of the tracked source (as a source package
# would be unpacked), with build dependencies checked
rm -rf "$PKG"
mkdir -p "$PKG/mlplat-$VERSION"
(cd "$SRC" && git ls-files -z | xargs -0 cp --parents -t "$PKG/mlplat-$VERSION")
t0=$SECONDS
(cd "$PKG/mlplat-$VERSION" && DEB_BUILD_OPTIONS="nocheck parallel=2" nice dpkg-buildpackage -us -uc -b >"$PKG/build.log" 2>&1)
rc=$?
tap_ok $rc "dpkg-buildpackage -b builds the package ($((SECONDS - t0)) s)"
((rc)) && tail -30 "$PKG/build.log" | sed 's/^/#   /'
DEB=$(ls "$PKG"/postgresql-15-mlplat_"$VERSION"_*.deb 2>/dev/null | head -1)
tap_ok $([ -n "$DEB" ]; echo $?) "it made postgresql-15-mlplat_${VERSION}_<arch>.deb"
[ -n "$DEB" ] || { tap_done; exit; }

contents=$(dpkg-deb -c "$DEB" | awk '{print $6}')
missing=""
for f in ./usr/lib/postgresql/15/lib/mlplat.so ./usr/share/postgresql/15/extension/mlplat.control \
	./usr/share/postgresql/15/extension/mlplat--$VERSION.sql ./usr/share/postgresql/15/extension/mlplat--0.2.0--$VERSION.sql \
	./usr/share/postgresql/15/extension/mlplat--0.2.0.sql ./usr/share/doc/postgresql-15-mlplat/examples/queries.yaml; do
	echo "$contents" | grep -qxF "$f" || missing="$missing $f"
done
tap_is "${missing:-none}" none "the .deb holds the library, control file, install and upgrade scripts and the exporter queries"
deps=$(dpkg-deb -f "$DEB" Depends)
echo "$deps" | grep -q 'postgresql-15' && echo "$deps" | grep -q 'libcurl'
tap_ok $? "it depends on postgresql-15 and libcurl ($deps)"
dpkg --dry-run -i "$DEB" >"$PKG/dry-run.log" 2>&1
tap_ok $? "dpkg accepts it for installation here (dependencies satisfied)"

# --- install into a clean PostgreSQL: a copy of the system's, which has no mlplat,
# with the package unpacked into it as dpkg would (same paths)
ROOT=$PKG/root
PGLIB=$(dirname "$($PG_CONFIG --pkglibdir)")
mkdir -p "$ROOT/usr/lib/postgresql" "$ROOT/usr/share/postgresql"
cp -a "$PGLIB" "$ROOT/usr/lib/postgresql/"
cp -a "$($PG_CONFIG --sharedir)" "$ROOT/usr/share/postgresql/"
tap_ok $([ ! -e "$ROOT/usr/lib/postgresql/15/lib/mlplat.so" ]; echo $?) "the PostgreSQL copy starts without mlplat"
dpkg-deb -x "$DEB" "$ROOT"
chown -R "$RUNAS" "$PKG"
PBIN=$ROOT/usr/lib/postgresql/15/bin
PD=$PKG/data
PP=$(free_port)
as_pg "$PBIN/initdb" -D "$PD" -A trust -U postgres --no-sync >/dev/null
cat >>"$PD/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PP
unix_socket_directories = '$PKG'
fsync = off
shared_preload_libraries = 'mlplat'
mlplat.database = 'pkgtest'
max_worker_processes = 32
CONF
as_pg "$PBIN/pg_ctl" -D "$PD" -l "$PD.log" -w -t 60 start >/dev/null
tap_ok $? "the clean PostgreSQL starts with the packaged mlplat preloaded"
on_exit 'as_pg "$PBIN/pg_ctl" -D "$PD" -m immediate stop >/dev/null 2>&1'
P="$PBIN/psql -qXAt -v ON_ERROR_STOP=1 -h $PKG -p $PP -U postgres"
$P -d postgres -c "CREATE DATABASE pkgtest" -c "CREATE DATABASE pkgold" >/dev/null
tap_is "$($P -d pkgtest -c "CREATE EXTENSION mlplat" -c "SELECT extension_version || ' ' || library_version FROM mlplat.version()" 2>&1)" \
	"$VERSION $VERSION" "CREATE EXTENSION mlplat from the package; schema and library are both $VERSION"
for _ in $(seq 1 100); do
	[ "$($P -d pkgtest -c "SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')" 2>/dev/null)" = "$(mlplat_kinds_count release)" ] && break
	sleep 0.2
done
tap_same "$(mlplat_kinds_count release)" "$($P -d pkgtest -c "SELECT count(*) FROM mlplat.reconciler_health WHERE role IN ('leader', 'idle')")" \
	"its reconcilers run: one leader per kind"
$P -d pkgtest -c "SELECT mlplat.create_project('pkg', 1, NULL, NULL)" >/dev/null
tap_is "$($P -d pkgtest -c "SELECT generation FROM mlplat.projects WHERE name = 'pkg'")" 1 "the packaged SQL API records intent"
tap_same "$VERSION" "$($P -d pkgold -c "CREATE EXTENSION mlplat VERSION '0.2.0'" -c "ALTER EXTENSION mlplat UPDATE" \
	-c "SELECT extversion FROM pg_extension WHERE extname = 'mlplat'" 2>&1)" \
	"a 0.2.0 database updates to $VERSION with the packaged scripts"
tap_done
