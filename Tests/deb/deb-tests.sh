#!/usr/bin/env bash
# `make test-deb`: the package as a Pi owner meets it (README "Raspberry Pi").
#  1. lintian on the .deb: no errors, no warnings (overrides only with a written reason).
#  2. The system service's unit: `systemd-analyze security` (the exposure score must stay
#     at or under SECURITY_MAX; `systemd-analyze verify` runs in the root, after install).
#  3. In a clean Debian 12 root made with debootstrap (a chroot in its own mount and pid
#     namespace; systemd does not run there, so the daemon is started as the unit would
#     start it): install an older package, fill the system service's library (a guided
#     meditation, a preset, a schedule, settings, a practice log entry), go back to an
#     older catalog schema, upgrade, remove and install again, purge. See in-root.sh.
# The base root (debootstrap plus the package's dependencies and man-db, bash-completion,
# zsh, fish) is kept as a tarball in .build/deb-cache, named by what it holds; delete it
# to make it again. Needs root (debootstrap, chroot, unshare).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECURITY_MAX=${SECURITY_MAX:-3.0}
version=$(cat VERSION)
old=${OLD_VERSION:-0.9.0}
arch=$(dpkg --print-architecture)
deb=stillmoment_${version}_${arch}.deb
olddeb=.build/deb/stillmoment_${old}_${arch}.deb
[ -f "$deb" ] || { echo "no $deb: run make deb" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "make test-deb needs root (debootstrap, chroot, unshare)" >&2; exit 1; }
t0=$(date +%s)
passed=0; failed=0
ok() { echo "passed: $*"; passed=$((passed + 1)); }
bad() { echo "FAILED: $*"; failed=$((failed + 1)); }

# The older package: the same binary, versioned $old (the older catalog schema is made
# in the root, see in-root.sh).
[ -f "$olddeb" ] || bash scripts/deb.sh "$old" >/dev/null

# 1. lintian
echo "== lintian $deb"
if lintian --fail-on error,warning --display-info "$deb" >.build/deb/lintian.txt 2>&1; then
    ok "lintian: no errors, no warnings ($(grep -c '^[IP]:' .build/deb/lintian.txt || true) info tags)"
else
    bad "lintian"
fi
cat .build/deb/lintian.txt

# 2. the system unit
echo "== systemd-analyze"
unitdir=$(mktemp -d)
trap 'rm -rf "$unitdir"' EXIT
dpkg-deb -x "$deb" "$unitdir/root"
unit=$unitdir/root/lib/systemd/system/stillmoment.service
[ -f "$unit" ] || unit=$unitdir/root/usr/lib/systemd/system/stillmoment.service
security=$(systemd-analyze security --offline=yes --root="$unitdir/root" "$unit" 2>&1 || true)
echo "$security" | grep -v '^✓' | tail -25
score=$(echo "$security" | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
if [ -n "$score" ] && awk "BEGIN { exit !($score <= $SECURITY_MAX) }"; then
    ok "systemd-analyze security: exposure $score (at most $SECURITY_MAX)"
else
    bad "systemd-analyze security: exposure ${score:-?} (at most $SECURITY_MAX)"
fi

# 3. a clean Debian 12 root
# The base: minbase, the libraries the package links (its Depends, checked below) and the
# tools the tests use.
base_pkgs="adduser libasound2 libc6 libfaad2 libgcc-s1 libmpg123-0 libsoxr0 libsqlite3-0 libstdc++6 libxxhash0 man-db bash-completion zsh fish sqlite3 systemd"
key=$(echo "bookworm $arch $base_pkgs" | sha256sum | cut -c1-12)
cache=.build/deb-cache/bookworm-$arch-$key.tar
if [ ! -f "$cache" ]; then
    echo "== debootstrap (once; kept in $cache)"
    mkdir -p .build/deb-cache
    base=$(mktemp -d .build/deb-cache/root.XXXXXX)
    debootstrap --variant=minbase --include="$(echo $base_pkgs | tr ' ' ,)" bookworm "$base" http://deb.debian.org/debian \
        >.build/deb-cache/debootstrap.log 2>&1 || { tail -20 .build/deb-cache/debootstrap.log; rm -rf "$base"; exit 1; }
    rm -rf "$base"/var/cache/apt/archives/*.deb "$base"/var/lib/apt/lists/*
    chmod 0755 "$base"
    tar -C "$base" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
    rm -rf "$base"
fi
root=.build/deb-root
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$cache"
chmod 0755 "$root"
mkdir -p "$root/opt/test"
missing=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/([^)]*)//; s/|.*//; s/ //g' | grep -v '^$' |
    while read -r p; do chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || echo "$p"; done)
[ -z "$missing" ] || { echo "the base root lacks $missing: add it to base_pkgs in $0" >&2; exit 1; }
cp "$olddeb" "$root/opt/test/old.deb"
cp "$deb" "$root/opt/test/new.deb"
cp Tests/deb/in-root.sh "$root/opt/test/"
cp Sounds/temple-bell.mp3 "$root/opt/test/talk.mp3"
echo "== in the root (unshare --mount --pid --fork; chroot)"
if unshare --mount --pid --fork --propagation private bash -c '
    set -e
    root=$1
    mount -t proc proc "$root/proc"
    mount -t tmpfs -o mode=0755 tmpfs "$root/run"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mount --rbind /dev "$root/dev"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root bash /opt/test/in-root.sh
' _ "$root" >.build/deb/in-root.log 2>&1; then rc=0; else rc=$?; fi
cat .build/deb/in-root.log
p=$(grep -c '^passed:' .build/deb/in-root.log || true)
f=$(grep -c '^FAILED:' .build/deb/in-root.log || true)
passed=$((passed + p)); failed=$((failed + f))
[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || bad "in-root.sh ended with exit $rc"
rm -rf "$root"
echo "test-deb: $passed passed, $failed failed ($(( $(date +%s) - t0 )) s)"
[ "$failed" -eq 0 ]
