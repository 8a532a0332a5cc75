#!/usr/bin/env bash
# Instruction counts (valgrind's callgrind) of decoding and rendering a 60-s MP3 to a
# float WAV with the engine (target <= 1.1 x), and with the CLI users run, against mpg123
# decoding it to the same kind of file: a ratio that depends on the code, not on the
# machine's speed or load. The binaries are stripped
# copies: valgrind 3.19 cannot read the debug information Swift 6.3 writes.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
talk="$BENCH_OUT/talk-60s.mp3"
[ -f "$talk" ] || { sox -q "$(long_wav)" -t wav - trim 0 60 | lame --quiet -V 2 - "$talk"; }
bench="$BENCH_OUT/StillMomentBench.stripped"
strip -o "$bench" "$BIN/StillMomentBench"
out="$BENCH_OUT/callgrind.wav"

# The count of a command that must succeed (a failing one would count its error path).
instructions() {
    local log
    if ! log=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null); then
        echo "callgrind.sh: $* failed: $(grep -v '^==' <<<"$log" | head -3)" >&2
        return 1
    fi
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$log"
}
ours=$(instructions "$bench" render "$talk" "$out" float) || exit 1
ref=$(instructions mpg123 -q -e f32 -w "$out" "$talk") || exit 1
rm -f "$out"
report "instructions to decode and render a 60-s MP3 to a float WAV (callgrind), engine vs mpg123 -e f32 -w" \
    "$(ratio "$ours" "$ref")" "x ($ours vs $ref)" "<= 1.1" "$(le "$(ratio "$ours" "$ref")" 1.1)"

# Per minute of audio, start-up out (issue 37): the same counts for the first 5 s of the
# programme (encoded alike), subtracted from the 60 s ones.
talk5="$BENCH_OUT/talk-5s.mp3"
[ -f "$talk5" ] || { sox -q "$(long_wav)" -t wav - trim 0 5 | lame --quiet -V 2 - "$talk5"; }
ours5=$(instructions "$bench" render "$talk5" "$out" float) || exit 1
ref5=$(instructions mpg123 -q -e f32 -w "$out" "$talk5") || exit 1
rm -f "$out"
per=$(ratio "$((ours - ours5))" "$((ref - ref5))")
report "instructions per 55 s of audio, start-up out (60-s MP3 less its first 5 s), engine vs mpg123 -e f32 -w" \
    "$per" "x ($((ours - ours5)) vs $((ref - ref5)))" "<= 1.0" "$(le "$per" 1.0)"

# The command users run: `stillmoment play ID --output` (start-up, the store, the catalog
# opened, the file checked) against the same mpg123 line.
export STILLMOMENT_HOME="$BENCH_OUT/callgrind-home"
export STILLMOMENT_SOUNDS="${STILLMOMENT_SOUNDS:-$PWD/Sounds}"   # the stripped copy is not beside them
rm -rf "$STILLMOMENT_HOME"
cli="$BENCH_OUT/stillmoment.stripped"
strip -o "$cli" "$BIN/stillmoment"
"$cli" import "$talk" --name bench-talk >/dev/null || exit 1
ours=$(instructions "$cli" play bench-talk --preparation off --output "$out" --format f32) || exit 1
rm -f "$out"
# A command typed most, `status` with no daemon running (read by QuickParse; ArgumentParser's
# first parse took 11.4 M of its 18.4 M instructions before), and `list`, which goes
# through ArgumentParser and opens the catalog.
export XDG_RUNTIME_DIR="$BENCH_OUT/callgrind-run"
rm -rf "$XDG_RUNTIME_DIR" && mkdir -m 700 "$XDG_RUNTIME_DIR"
status=$(instructions "$cli" status) || exit 1
list=$(instructions "$cli" list) || exit 1
# The commands typed most, each against a running daemon (the CLI's start-up and its
# request; the daemon is not counted): status, a timer and a meditation started detached,
# pause and stop. Target: under 10 M each (issue 37).
"$cli" settings set device null >/dev/null || exit 1
"$cli" daemon >/dev/null 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/stillmoment/control.sock" ] && break; sleep 0.05; done
typed=""
worst=0
# On `null` a timer and a meditation end at once; an open sit stays for pause and stop.
for cmd in "status" "timer 20m --detach" "play bench-talk --detach" "-timer open --detach" "pause" "resume" "stop"; do
    if [ "${cmd:0:1}" = - ]; then
        # shellcheck disable=SC2086
        "$cli" ${cmd:1} >/dev/null || exit 1
        continue
    fi
    # shellcheck disable=SC2086  # the words of the command
    n=$(instructions "$cli" $cmd) || exit 1
    typed="$typed${typed:+, }$cmd $(awk "BEGIN{printf \"%.1f\", $n / 1e6}") M"
    [ "$n" -gt "$worst" ] && worst=$n
done
kill $daemon 2>/dev/null
wait $daemon 2>/dev/null
trap - EXIT
rm -rf "$STILLMOMENT_HOME" "$XDG_RUNTIME_DIR"
report "instructions of the commands typed most, against a running daemon (callgrind; the CLI's start-up and request): $typed; the largest" \
    "$(awk "BEGIN{printf \"%.1f\", $worst / 1e6}")" "M" "< 10 M" "$(le "$worst" 9999999)"
# No target of its own: the render's is above; the rest is the CLI's start-up (parsing
# the arguments, opening the catalog), written down in BENCHMARKS.md.
line="instructions of stillmoment play 60-s MP3 --output --format f32 (callgrind) vs mpg123 -e f32 -w: $(ratio "$ours" "$ref") x ($ours vs $ref) (no target: reported)"
echo "$line"
echo "$line" >> "$RESULTS"
line="instructions of stillmoment status with no daemon (callgrind): $status; of stillmoment list: $list (no target: reported)"
echo "$line"
echo "$line" >> "$RESULTS"
