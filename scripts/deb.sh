#!/usr/bin/env bash
# `make deb`: stillmoment_<version>_<arch>.deb in the source tree's top folder, built with
# dpkg-buildpackage and debhelper from the release binary `make release` built (the
# Makefile builds it first). The package is built in a staged copy of what it needs
# (.build/deb/stillmoment-<version>/), so that dpkg-buildpackage's files beside the
# source (.buildinfo, .changes) land in .build/deb and `debian/rules clean` never sees
# .build. Usage: scripts/deb.sh [VERSION]  (a VERSION other than VERSION's is for the
# upgrade test's older package: it gets its own changelog entry on top; see
# Tests/deb/deb-tests.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat VERSION)
want=${1:-$version}
changelog=$(dpkg-parsechangelog -l debian/changelog -S Version)
if [ "$changelog" != "$version" ]; then
    echo "debian/changelog's top entry is $changelog but VERSION says $version: add an entry (dch -v $version)" >&2
    exit 1
fi
bin=.build/release/stillmoment
[ -x "$bin" ] || { echo "no $bin: run make release" >&2; exit 1; }
got=$("$bin" --version)
[ "$got" = "$version" ] || { echo "$bin --version says $got, VERSION $version: run make release" >&2; exit 1; }

# ArgumentParser's generate-manual (the tool behind its generate-manual plugin; the plugin
# itself would build stillmoment again), built once in debug.
gm=.build/debug/generate-manual
if [ ! -x "$gm" ]; then
    ${SWIFT:-swift} build --product generate-manual
fi

out=.build/deb
stage=$out/stillmoment-$want
rm -rf "$stage"
mkdir -p "$stage/debian/prebuilt"
cp -a debian dist Sounds README.md BENCHMARKS.md VERSION "$stage/"
rm -rf "$stage/debian/prebuilt" && mkdir -p "$stage/debian/prebuilt"
cp -a "$bin" "$stage/debian/prebuilt/stillmoment"
cp -a "$gm" "$stage/debian/prebuilt/generate-manual"
if [ "$want" != "$version" ]; then
    # An older package for the upgrade test: the same binary, said to be $want.
    { printf 'stillmoment (%s) unstable; urgency=medium\n\n  * An older version, for the upgrade test.\n\n -- %s  %s\n\n' \
        "$want" "$(dpkg-parsechangelog -l debian/changelog -S Maintainer)" "$(dpkg-parsechangelog -l debian/changelog -S Date)"
      cat debian/changelog; } > "$stage/debian/changelog"
    export STILLMOMENT_SKIP_VERSION_CHECK=1
fi
# Every staged file dated as the changelog's entry (a clone's files carry their checkout
# time; dh_builddeb clamps only what is newer): the same source gives the same package.
epoch=$(dpkg-parsechangelog -l "$stage/debian/changelog" -S Timestamp)
find "$stage" -exec touch -h -d "@$epoch" {} +
arch=$(dpkg --print-architecture)
rm -f "$out"/stillmoment_"$want"_*
(cd "$stage" && dpkg-buildpackage -b -us -uc --no-sign >"../build-$want.log" 2>&1) || {
    tail -40 "$out/build-$want.log" >&2
    echo "dpkg-buildpackage failed: $out/build-$want.log" >&2
    exit 1
}
deb=stillmoment_${want}_${arch}.deb
if [ "$want" = "$version" ]; then
    cp "$out/$deb" "./$deb"
    echo "built ./$deb"
else
    echo "built $out/$deb"
fi
