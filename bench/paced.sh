#!/usr/bin/env bash
# Real-time measures on a paced sound device without hardware: a private PulseAudio with
# a null sink (it plays at the real rate). stillmoment's `pulse` device speaks PulseAudio's
# own protocol; `alsa:pulse` (ALSA's pulse plugin, as mpg123 -o alsa -a pulse uses) is
# measured too, for comparison. The script starts its own PulseAudio on a private socket
# and stops it by its PID.
#   PLAY_SECONDS (default 60): the length of the playback measures
#   STRESS_SECONDS (default 600): the length of the playback under `stress-ng --cpu 2`
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
PLAY_SECONDS=${PLAY_SECONDS:-60}
STRESS_SECONDS=${STRESS_SECONDS:-600}

runtime=$(mktemp -d)
export XDG_RUNTIME_DIR=$runtime PULSE_SERVER=unix:$runtime/pulse.sock HOME=$runtime
pulseaudio -n --daemonize=no --exit-idle-time=-1 --disallow-exit \
    -L "module-null-sink sink_name=bench" -L "module-native-protocol-unix socket=$runtime/pulse.sock auth-anonymous=1" \
    >"$runtime/pulse.log" 2>&1 &
pa=$!
stress=""
refclock=""
cleanup() {
    [ -n "$stress" ] && kill "$stress" 2>/dev/null
    [ -n "$refclock" ] && kill "$refclock" 2>/dev/null
    kill "$pa" 2>/dev/null; wait "$pa" 2>/dev/null
    rm -rf "$runtime"
}
trap cleanup EXIT
for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done

# A 60-s guided MP3 (a slice of the 30-min programme).
talk="$BENCH_OUT/talk-60s.mp3"
[ -f "$talk" ] || { sox -q "$(long_wav)" -t wav - trim 0 "$PLAY_SECONDS" | lame --quiet -V 2 - "$talk"; }

rss() { { /usr/bin/time -f "%M" -o "$BENCH_OUT/.rss" "$@" >"$BENCH_OUT/.out" 2>&1; } ; cat "$BENCH_OUT/.rss"; }

# Best of three: the first stream on a fresh sound server costs more.
ours=$(best_cpu 3 "$BIN/StillMomentBench" play "$talk" pulse)
ref=$(best_cpu 3 mpg123 -q -o alsa -a pulse "$talk")
r=$(ratio "$ours" "$ref")
report "real-time playback of a 60-s MP3 on the paced device, CPU vs mpg123 -o alsa -a pulse" "$r" "x ($ours s vs $ref s)" "<= 1.3" "$(le "$r" 1.3)"
plugin=$(best_cpu 2 "$BIN/StillMomentBench" play "$talk" alsa:pulse)
r=$(ratio "$plugin" "$ref")
report "the same through ALSA's pulse plugin (alsa:pulse, 100-ms buffer: no rewind there, so no deeper buffer)" "$r" "x ($plugin s vs $ref s)" "for information" 1
kb=$(rss "$BIN/StillMomentBench" play "$talk" pulse)
mb=$(awk "BEGIN{printf \"%.1f\", $kb / 1024}")
report "real-time playback of a 60-s MP3, peak RSS" "$mb" "MB" "<= 20" "$(le "$mb" 20)"
grep -E "clock|xruns" "$BENCH_OUT/.out" | sed 's/^/  /'

# A timer session with ambience and gongs, against mpg123 playing the ambience alone
# (decoded to MP3 for mpg123, which does not read M4A).
amb="$BENCH_OUT/forest-60s.mp3"
[ -f "$amb" ] || { ffmpeg -loglevel error -y -stream_loop 1 -i Sounds/forest.m4a -t "$PLAY_SECONDS" -f wav - | lame --quiet -V 2 - "$amb"; }
export STILLMOMENT_HOME="$BENCH_OUT/home"
ours=$(best_cpu 3 "$BIN/stillmoment" timer "${PLAY_SECONDS}s" --foreground --preparation off --interval 15s --ambience forest --device pulse)
ref=$(best_cpu 3 mpg123 -q -o alsa -a pulse "$amb")
r=$(ratio "$ours" "$ref")
report "real-time timer session (forest, gongs) on the paced device, CPU vs mpg123 playing the ambience alone" "$r" "x ($ours s vs $ref s)" "<= 2" "$(le "$r" 2)"

# Underruns with both cores loaded, and the clock. Beside the engine, on the same sink and
# under the same load, a plain libpulse client measures its own clock the same way
# (bench/clock-ref.c): the sink's own rate against CLOCK_MONOTONIC, which a clock that
# reports what the device played follows.
cc -O2 -o "$BENCH_OUT/clock-ref" "$here/clock-ref.c" -lpulse-simple -lpulse -lm
stress-ng --cpu 2 --timeout "$((STRESS_SECONDS + 30))s" >/dev/null 2>&1 &
stress=$!
sleep 1
"$BENCH_OUT/clock-ref" "$STRESS_SECONDS" > "$BENCH_OUT/.ref" 2>&1 &
refclock=$!
"$BIN/StillMomentBench" play Sounds/forest.m4a pulse "$STRESS_SECONDS" loop > "$BENCH_OUT/.out" 2>&1
wait "$refclock"; refclock=""
kill "$stress" 2>/dev/null; wait "$stress" 2>/dev/null; stress=""
x=$(sed -n 's/^xruns: \([0-9-]*\),.*/\1/p' "$BENCH_OUT/.out")
rt=$(sed -n 's/.*realtime: //p' "$BENCH_OUT/.out")
report "underruns in ${STRESS_SECONDS} s of playback under stress-ng --cpu 2 ($rt)" "${x:-?}" "xruns" "0" "$( [ "${x:-1}" = 0 ] && echo 1 || echo 0)"
d=$(sed -n 's/.*drift \([-0-9.e]*\) ms/\1/p' "$BENCH_OUT/.out")
ad=$(awk "BEGIN{d=$d; if (d<0) d=-d; printf \"%.2f\", d}")
report "audio clock against CLOCK_MONOTONIC over ${STRESS_SECONDS} s (under load)" "$ad" "ms drift" "<= 5" "$(le "$ad" 5)"
rd=$(sed -n 's/.*drift \([-0-9.e]*\) ms/\1/p' "$BENCH_OUT/.ref")
report "the reference client's clock (bench/clock-ref.c) on the same sink, same run, against CLOCK_MONOTONIC" "${rd:-?}" "ms drift" "for information" 1
dd=$(awk "BEGIN{d=$d - (${rd:-0}); if (d<0) d=-d; printf \"%.2f\", d}")
report "the audio clock against the reference client's (what the engine adds to the sink's own rate)" "$dd" "ms over ${STRESS_SECONDS} s" "<= 1" "$( [ -n "$rd" ] && le "$dd" 1 || echo 0)"
