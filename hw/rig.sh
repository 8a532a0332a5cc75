#!/usr/bin/env bash
# make test-hw: the real ALSA kernel-driver path, measured in a virtual machine.
#
# Boots Debian's own kernel (linux-image-amd64, extracted into .build-hw/, never installed)
# under qemu-system-x86_64 (software emulation: no KVM needed) with a busybox initramfs
# (hw/init) that mounts this machine's / read-only over 9p, loads snd-aloop (a loopback
# sound card paced by the kernel: what is played on hw:Loopback,0 is captured on
# hw:Loopback,1), evdev and uinput (a virtual button: hw/button.py) and runs hw/inside.sh
# in a chroot of it. The guest plays with the
# release binary and records with arecord; its captures and timings come back through a
# writable 9p share of a host temp folder, and hw/measure.py measures them here and
# prints one line per figure and `N passed, N failed`.
#
# Exit 0 when every check passed, 1 when a check failed or the rig itself failed (qemu
# could not start, the guest did not finish within HW_TIMEOUT seconds). Targets that are
# missed are reported as MISSED and do not fail the run.
#
#   HW_TIMEOUT=…     the guest's hard limit (s; default 200 per device and 220, 600 at least)
#   HW_KEEP=1        keep the result folder (captures, logs) and say where it is
#   HW_QUICK=1       only hw:Loopback,0 (no plughw, no dmix)
#   HW_DEVICES=…     the devices by name, comma-separated (hw,plughw,dmix,dmix125: all of them)
#   HW_CPU=max       qemu's CPU model (max is the fastest under software emulation here)
#   HW_SCRIPT=…      the guest's script in place of hw/inside.sh (a probe: hw/probe-cli.sh)
#   BIN=…            the binary (default .build/release/stillmoment, which must exist)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
CACHE="$REPO/.build-hw"
BIN=$(realpath -m "${BIN:-.build/release/stillmoment}")
PY=/usr/bin/python3            # Debian's python3, with python3-numpy

say() { echo "hw: $*"; }
fail() { echo "hw: FAILED: $*"; echo "0 passed, 1 failed"; exit 1; }

[ -x "$BIN" ] || fail "no binary at $BIN: build it first (make release)"
if [ "${HW_QUICK:-0}" = 1 ]; then DEVICES=hw; else DEVICES=${HW_DEVICES:-hw,plughw,dmix,dmix125}; fi
for d in ${DEVICES//,/ }; do
    case $d in hw|plughw|dmix|dmix125) ;; *) fail "HW_DEVICES: no device '$d' (hw, plughw, dmix, dmix125)";; esac
done
# A device takes the guest about 170 s (3 devices: 508 s in one run).
n=$(echo "${DEVICES//,/ }" | wc -w)
HW_TIMEOUT=${HW_TIMEOUT:-$(( n * 200 + 220 > 600 ? n * 200 + 220 : 600 ))}
bash scripts/deps.sh qemu-system-x86 busybox-static cpio alsa-utils python3 python3-numpy lame mpg123 kmod

# The kernel: the package linux-image-amd64 depends on, downloaded and extracted (once).
mkdir -p "$CACHE/kernel"
if [ ! -f "$CACHE/kernel/ready" ]; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
    if [ -z "$pkg" ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq >/dev/null 2>&1 || true
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
    fi
    [ -n "$pkg" ] || fail "apt-cache does not know linux-image-amd64 (apt-get update?)"
    say "downloading $pkg (extracted into .build-hw/kernel, not installed)"
    rm -rf "$CACHE/kernel"/*
    (cd "$CACHE/kernel" && apt-get download "$pkg" >/dev/null 2>&1) || fail "apt-get download $pkg"
    dpkg-deb -x "$CACHE/kernel"/linux-image-*.deb "$CACHE/kernel/root"
    rm -f "$CACHE/kernel"/linux-image-*.deb
    kver=$(ls "$CACHE/kernel/root/lib/modules" | head -1)
    depmod -b "$CACHE/kernel/root" "$kver"
    echo "$kver" > "$CACHE/kernel/ready"
fi
KVER=$(cat "$CACHE/kernel/ready")
KROOT="$CACHE/kernel/root"
VMLINUZ="$KROOT/boot/vmlinuz-$KVER"
[ -f "$VMLINUZ" ] || fail "no kernel at $VMLINUZ (rm -rf .build-hw to fetch it again)"

# The modules, in the order given, those that exist as modules for this kernel
# (modules.dep); a name that is built in or absent is left out.
modpath() {
    local n=${1//-/_}
    sed -n "s#^\(\(.*/\)\($1\|$n\)\.ko\(\.xz\|\.zst\)\?\):.*#\1#p" "$KROOT/lib/modules/$KVER/modules.dep" | head -1
}
WORK=$(mktemp -d /tmp/sm-hw.XXXXXX)
QPID=""
cleanup() {
    if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
        kill "$QPID" 2>/dev/null || true
        sleep 1
        kill -9 "$QPID" 2>/dev/null || true
    fi
    if [ "${HW_KEEP:-0}" = 1 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

INITRD_DIR="$WORK/initramfs"
mkdir -p "$INITRD_DIR"/{bin,modules,dev,proc,sys,host}
cp /bin/busybox "$INITRD_DIR/bin/busybox"
cp hw/init "$INITRD_DIR/init"
chmod 755 "$INITRD_DIR/init"
modules=""
sound=""
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p \
         evdev uinput soundcore snd snd-timer snd-pcm snd-aloop; do
    p=$(modpath "$m")
    [ -n "$p" ] || continue
    f="$KROOT/lib/modules/$KVER/$p"
    case "$f" in
        *.xz) xz -dc "$f" > "$INITRD_DIR/modules/$m.ko" ;;
        *.zst) zstd -qdc "$f" > "$INITRD_DIR/modules/$m.ko" ;;
        *) cp "$f" "$INITRD_DIR/modules/$m.ko" ;;
    esac
    case "$m" in soundcore|snd*) sound="$sound $m" ;; *) modules="$modules $m" ;; esac
done
case "$sound" in *snd-aloop*) ;; *) fail "kernel $KVER has no snd-aloop module" ;; esac
OUT="$WORK/out"
mkdir -p "$OUT"
cat > "$INITRD_DIR/rig.conf" <<CONF
MODULES="$modules"
SOUND_MODULES="$sound"
OUT="$OUT"
REPO="$REPO"
SCRIPT="${HW_SCRIPT:-hw/inside.sh}"
CONF
(cd "$INITRD_DIR" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.gz"

# What the guest needs from here: the inputs it plays and the renders to compare with.
cat > "$OUT/config" <<CONF
BIN=$BIN
DEVICES=$DEVICES
CONF
say "preparing the inputs and the offline renders"
BIN="$BIN" $PY hw/measure.py prepare "$OUT" || fail "preparing the inputs (hw/measure.py prepare)"

load0=$(cut -d' ' -f1 /proc/loadavg)
say "booting $KVER under qemu (software emulation; limit ${HW_TIMEOUT} s; host load average $load0)"
start=$(date +%s)
qemu-system-x86_64 -m 2048 -smp 2 -cpu "${HW_CPU:-max}" -nographic -no-reboot \
    -kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet" \
    -virtfs local,path=/,mount_tag=host,security_model=passthrough,id=host,readonly=on,multidevs=remap \
    -virtfs local,path="$OUT",mount_tag=out,security_model=passthrough,id=out,multidevs=remap \
    < /dev/null > "$WORK/console.log" 2>&1 &
QPID=$!
shown=0
while kill -0 "$QPID" 2>/dev/null; do
    sleep 1
    # the guest's progress lines as they come
    n=$(wc -l < "$WORK/console.log")
    if [ "$n" -gt "$shown" ]; then
        sed -n "$((shown + 1)),${n}p" "$WORK/console.log" | grep -ao 'hw-guest:.*' || true
        shown=$n
    fi
    if [ $(( $(date +%s) - start )) -ge "$HW_TIMEOUT" ]; then
        say "the guest did not finish within $HW_TIMEOUT s; killing qemu (pid $QPID)"
        kill "$QPID" 2>/dev/null || true
        tail -20 "$WORK/console.log" | sed 's/^/  console: /'
        fail "the guest did not finish within $HW_TIMEOUT s"
    fi
done
qrc=0
wait "$QPID" || qrc=$?
QPID=""
n=$(wc -l < "$WORK/console.log")
[ "$n" -le "$shown" ] || sed -n "$((shown + 1)),${n}p" "$WORK/console.log" | grep -ao 'hw-guest:.*' || true
elapsed=$(( $(date +%s) - start ))
if [ ! -f "$OUT/guest-boot" ]; then
    tail -30 "$WORK/console.log" | sed 's/^/  console: /'
    fail "the guest never came up (qemu exit $qrc after $elapsed s); its console is above"
fi
if [ ! -f "$OUT/guest-rc" ]; then
    tail -30 "$WORK/console.log" | sed 's/^/  console: /'
    fail "the guest's script did not finish (qemu exit $qrc after $elapsed s)"
fi
say "guest ran $elapsed s ($(cat "$OUT/guest-boot")); its script exited $(cat "$OUT/guest-rc"); host load average $(cut -d' ' -f1 /proc/loadavg) (other work on this machine slows the emulated guest)"
$PY hw/measure.py analyse "$OUT"
