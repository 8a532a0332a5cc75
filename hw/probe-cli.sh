#!/bin/bash
# A probe, not a check: where a command's start goes in the rig's emulated guest. Run it
# in place of the measures with
#   make release && HW_SCRIPT=hw/probe-cli.sh HW_DEVICES=hw bash hw/rig.sh
# and read the `hw-guest:` lines (the rig's analysis then finds no captures and says so).
# Each figure is one command run 6 times from bash (EPOCHREALTIME, no fork to time it):
# the exec floor (`/bin/true`, an empty C program, the same linking the binary's nine
# libraries), `status` read by the quick parser and `--version` by ArgumentParser, and
# 6 timers started through the CLI with a daemon started on demand each time.
set -u
BIN=$(sed -n 's/^BIN=//p' "$HW_OUT/config")
W=/tmp/probe; mkdir -p $W/run $W/home $W/user; chmod 700 $W/run
export STILLMOMENT_HOME=$W/home XDG_RUNTIME_DIR=$W/run HOME=$W/user NO_COLOR=1
say() { echo "hw-guest: $*"; }
ms() { python3 -c "print(round(($2 - $1) * 1000))"; }
t() {
    local label=$1 out="" s e; shift
    for _ in 1 2 3 4 5 6; do
        s=$EPOCHREALTIME; "$@" > /dev/null 2>&1; e=$EPOCHREALTIME
        out="$out $(ms "$s" "$e")"
    done
    say "$label:$out ms"
}
echo 'int main(void) { return 0; }' > $W/empty.c
gcc -O2 -o $W/empty $W/empty.c || say "no gcc: the C programs are left out"
gcc -O2 -o $W/empty-libs $W/empty.c -Wl,--no-as-needed -lsqlite3 -lsoxr -lmpg123 -lfaad -lxxhash -lstdc++ -lasound -lm 2>/dev/null
t "/bin/true" /bin/true
[ -x $W/empty ] && t "an empty C program" $W/empty
[ -x $W/empty-libs ] && t "the same linking the binary's libraries" $W/empty-libs
t "stillmoment status (no daemon; quick parser)" "$BIN" status
t "stillmoment --version (ArgumentParser)" "$BIN" --version
out=""
for _ in 1 2 3 4 5 6; do
    s=$EPOCHREALTIME
    "$BIN" timer 10m --preparation off --device null --detach > $W/out.txt 2>&1
    e=$EPOCHREALTIME
    out="$out $(ms "$s" "$e")"
    grep -q "^started" $W/out.txt || say "the timer did not start: $(head -c 200 $W/out.txt)"
    pid=$(cat $W/run/stillmoment/daemon.lock 2>/dev/null)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    for _ in $(seq 50); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
say "timer --detach with a daemon started on demand (to the CLI's return):$out ms"
