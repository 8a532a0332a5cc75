#!/usr/bin/env bash
# Writes scripts/code-order.txt: the functions of the static binary that the daemon and
# the CLI run (start-up, a guided meditation and a timer with ambience on ALSA's null
# device and on a PulseAudio sink, pause, seek, status, list, history), one
# `.text.SYMBOL` section per line. The release link hands it to the linker (gold's
# --section-ordering-file, Package.swift), which puts those functions next to each other
# (at the end of .text) instead of where their object files fall in the 19 MB of code.
# Why: the kernel maps 64 KB around every code page a process faults in, and with the
# few thousand functions a session's start runs scattered over all of .text, starting a
# session made about 7 MB of the binary resident for its first 3 s (issue 16's lean
# daemon). The release build compiles Swift with -function-sections (Makefile) so that
# every function has a section of its own; the prebuilt Swift runtime and Foundation
# have them already.
#
# What runs is found with valgrind's callgrind (every function executed, not a sample).
# Run it again after changes that move much code (a new dependency, a new kind of
# session); a listed function that is gone is skipped by the linker, and one that is not
# listed is placed as before:
#   make release && bash scripts/code-order.sh && make release   (the script removes the binary so it links again)
# Needs valgrind, sox, lame and pulseaudio (make deps-bench installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath .build/release/stillmoment)
[ -x "$BIN" ] || { echo "code-order: build the release binary first (make release)"; exit 1; }
for tool in valgrind callgrind_control sox lame pulseaudio nm strip; do
    command -v "$tool" > /dev/null || { echo "code-order: $tool is missing (make deps-bench)"; exit 1; }
done
W=$(mktemp -d /tmp/sm-order.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT
export STILLMOMENT_HOME="$W/home" XDG_RUNTIME_DIR="$W/run" HOME="$W/user" LANG=C.UTF-8 \
    STILLMOMENT_SOUNDS="$PWD/Sounds"
mkdir -p "$XDG_RUNTIME_DIR" "$HOME" && chmod 700 "$XDG_RUNTIME_DIR"
unset PULSE_SERVER STILLMOMENT_IDLE_EXIT LC_ALL

# A private PulseAudio with a null sink (paced), as the tests start it.
mkdir -p "$W/pa" && chmod 700 "$W/pa"
HOME="$W/pa" XDG_RUNTIME_DIR="$W/pa" pulseaudio -n --daemonize=no --exit-idle-time=-1 --use-pid-file=no \
    -L "module-null-sink sink_name=sm" -L "module-native-protocol-unix socket=$W/pulse.sock auth-anonymous=1" \
    > "$W/pulse.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$W/pulse.sock" ] && break; sleep 0.05; done
[ -S "$W/pulse.sock" ] || { echo "code-order: pulseaudio did not start"; exit 1; }
export PULSE_SERVER="unix:$W/pulse.sock"

sox -n -r 44100 -c 1 "$W/talk.wav" synth 120 sine 330 vol 0.3
lame --quiet -b 64 --tt "Order talk" --ta Order "$W/talk.wav" "$W/talk.mp3"
# valgrind cannot read the release binary's DWARF: a copy without it (the symbols stay).
strip --strip-debug -o "$W/stillmoment" "$BIN"
CG="valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file=$W/cg.%p"
sm() {
    $CG "$W/stillmoment" "$@" > "$W/out" 2>> "$W/cli.log" || {
        echo "code-order: stillmoment $* failed:"; grep -v '^==' "$W/cli.log" | tail -3; exit 1; }
}
also() { $CG "$W/stillmoment" "$@" > /dev/null 2>&1 || true; }   # may find nothing playing
sm import "$W/talk.mp3"

# The daemon under callgrind (slow: sessions are given seconds of wall time). On null
# (ALSA, not paced) a session is over at once; on the PulseAudio sink it plays.
$CG "$W/stillmoment" daemon > "$W/daemon.log" 2>&1 &
DAEMON=$!
PIDS+=($DAEMON)
for _ in $(seq 600); do [ -S "$XDG_RUNTIME_DIR/stillmoment/control.sock" ] && break; sleep 0.1; done
[ -S "$XDG_RUNTIME_DIR/stillmoment/control.sock" ] || { echo "code-order: the daemon did not listen"; exit 1; }
# What a session runs while it plays on (its steady state, from some seconds in: the
# render and output threads, the main loop's ticks, the keep-up every 5 s, an interval
# gong) is counted apart: the profile is dumped before and after a while of it (each dump
# holds what ran since the one before: parts 1 and 3 the starts, 2 and 4 steady states).
steady() {
    dump() {
        callgrind_control -d "$DAEMON" > /dev/null 2>&1 || {
            echo "code-order: callgrind_control could not dump the daemon's profile (pid $DAEMON)"; exit 1; }
    }
    dump
    sleep "$1"
    dump
}
for device in null pulse; do
    sm settings set device "$device"
    sm play "Order talk" --preparation off --detach
    sleep 6; sm status
    [ "$device" = pulse ] && steady 12
    also pause; sleep 2; also resume; also seek +15s; sleep 2; also stop; sleep 2
    sm timer 5m --preparation off --ambience forest --interval 10s --detach
    sleep 6; sm status --json
    [ "$device" = pulse ] && steady 16
    also stop; sleep 3
done
sm list; sm history
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null || true   # callgrind writes its profile at the exit
ls "$W"/cg.* > /dev/null

# Every function seen (callgrind names each once, as fn= or cfn=), those of the binary
# only: first what the sessions' steady states ran (the daemon's profile parts 2 and 4),
# so that what stays resident while a session plays lies together in as few pages as it
# can; then the rest of the daemon's in the order first seen (what a session's start runs,
# together), then what only the CLI runs.
names() { sed -n 's/^c\{0,1\}fn=([0-9]*) //p' "$@"; }
D="$W/cg.$DAEMON"
ls "$D.1" "$D.2" "$D.3" "$D.4" "$D" > /dev/null
{ names "$D.2" "$D.4"; names "$D.1" "$D.3" "$D"; names "$W"/cg.*; } | awk '!seen[$0]++' > "$W/functions"
nm --defined-only "$BIN" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u > "$W/symbols"
awk 'NR == FNR { have[$0] = 1; next } have[$0] { print ".text." $0 }' "$W/symbols" "$W/functions" \
    > scripts/code-order.txt
echo "code-order: $(wc -l < scripts/code-order.txt) functions in scripts/code-order.txt"
# SwiftPM does not know the link reads this file, and a touched source no longer makes
# it link again (Swift 6.3): the binary is removed, so the next release build links it.
rm -f "$BIN"
