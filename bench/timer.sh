#!/usr/bin/env bash
# A 30-minute timer session (forest ambience, interval gongs every 5 minutes) rendered to
# a WAV file: its speed as a multiple of real time, and its CPU time against decoding
# the same 30 minutes of ambience alone with the reference decoder (faad).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
out="$BENCH_OUT/session.wav"
export STILLMOMENT_HOME="$BENCH_OUT/home"

# 30 minutes of the forest loop, made by repeating the file's AAC frames (no re-encoding).
forest30="$BENCH_OUT/forest-30min.m4a"
if [ ! -f "$forest30" ]; then
    ffmpeg -loglevel error -y -stream_loop 59 -i Sounds/forest.m4a -c copy -t 1800 "$forest30"
fi

session=("$BIN/stillmoment" timer 30m --preparation off --interval 5m --ambience forest --output "$out")
best=""
for _ in 1 2 3; do
    start=$(date +%s.%N)
    "${session[@]}" >/dev/null
    end=$(date +%s.%N)
    t=$(awk "BEGIN{print $end - $start}")
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
done
# The session's length: 30 min plus the end gong's ring-out, read from the WAV header.
frames=$(python3 -c "import sys,struct;d=open(sys.argv[1],'rb').read(80);print(struct.unpack('<I',d[76:80])[0]//8)" "$out")
seconds=$(awk "BEGIN{print $frames / 44100}")
speed=$(awk "BEGIN{printf \"%.0f\", $seconds / $best}")
report "timer session 30 min (forest, gongs every 5 min) rendered, speed" "$speed" "x real time ($best s wall for $seconds s)" ">= 1000" "$(ge "$speed" 1000)"

ours=$(best_cpu 3 "${session[@]}")
ref=$(best_cpu 3 faad -q -b 4 -o "$BENCH_OUT/forest.wav" "$forest30")
r=$(ratio "$ours" "$ref")
report "timer session 30 min rendered, CPU vs faad decoding the 30-min ambience alone" "$r" "x ($ours s vs $ref s)" "for information" 1
rm -f "$out" "$BENCH_OUT/forest.wav"
