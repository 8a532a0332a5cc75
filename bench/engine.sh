#!/usr/bin/env bash
# Decode + render a 30-minute MP3 and M4A to WAV with the engine, against mpg123 and
# faad writing the same kind of file (32-bit float WAV), measured in the same run; and the
# CLI's own `play --output` in both sample formats against mpg123.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
mp3=$(long_mp3)
m4a=$(long_m4a)
out="$BENCH_OUT/render.wav"

ours=$(best_cpu 3 "$BIN/StillMomentBench" render "$mp3" "$out" float)
ref=$(best_cpu 3 mpg123 -q -e f32 -w "$out" "$mp3")
r=$(ratio "$ours" "$ref")
report "render 30-min MP3 to WAV, CPU vs mpg123 -w" "$r" "x ($ours s vs $ref s)" "<= 1.15" "$(le "$r" 1.15)"

ours=$(best_cpu 3 "$BIN/StillMomentBench" render "$m4a" "$out" float)
ref=$(best_cpu 3 faad -q -b 4 -o "$out" "$m4a")
r=$(ratio "$ours" "$ref")
report "render 30-min M4A to WAV, CPU vs faad -o" "$r" "x ($ours s vs $ref s)" "<= 1.0" "$(le "$r" 1.0)"

# The command users run: `stillmoment play ID --output` (the store opened, the meditation
# found, the loudness gain applied, the WAV renamed into place), against mpg123 writing
# the same kind of WAV: 16-bit (`--format s16`, dithered; mpg123's default) and float.
export STILLMOMENT_HOME="$BENCH_OUT/play-home"
rm -rf "$STILLMOMENT_HOME"
"$BIN/stillmoment" import "$mp3" --name bench-long >/dev/null
for fmt in s16 f32; do
    if [ "$fmt" = s16 ]; then refargs=(-q -w "$out"); label="-w"; else refargs=(-q -e f32 -w "$out"); label="-e f32 -w"; fi
    ours=$(best_cpu 3 "$BIN/stillmoment" play bench-long --preparation off --output "$out" --format "$fmt")
    ref=$(best_cpu 3 mpg123 "${refargs[@]}" "$mp3")
    r=$(ratio "$ours" "$ref")
    report "stillmoment play 30-min MP3 --output --format $fmt, CPU vs mpg123 $label" "$r" "x ($ours s vs $ref s)" "<= 1.15" "$(le "$r" 1.15)"
done
rm -rf "$STILLMOMENT_HOME"
rm -f "$out"
