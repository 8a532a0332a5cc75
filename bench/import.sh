#!/usr/bin/env bash
# Importing a 100-MB MP3: the copy and hash against `cp` of the same file, and the
# decode + loudness scan against `mpg123 -t` (decoding without output), CPU time.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
big="$BENCH_OUT/talk-100mb.mp3"
if [ ! -f "$big" ]; then
    # About 100 MB: the 30-min programme at 320 kb/s (72 MB) plus half of it again.
    lame --quiet -b 320 "$(long_wav)" "$BENCH_OUT/part.mp3"
    cat "$BENCH_OUT/part.mp3" "$BENCH_OUT/part.mp3" > "$big"
    truncate -s 100M "$big"
    rm -f "$BENCH_OUT/part.mp3"
fi
mkdir -p "$BENCH_OUT/store"
ours=$(best_cpu 3 "$BIN/StillMomentBench" copy "$big" "$BENCH_OUT/store")
ref=$(best_cpu 3 cp "$big" "$BENCH_OUT/store/cp.mp3")
rm -f "$BENCH_OUT/store/cp.mp3"
r=$(ratio "$ours" "$ref")
report "import 100-MB MP3: copy + hash (XXH3-128) + fsync, CPU vs cp" "$r" "x ($ours s vs $ref s)" "<= 1.3" "$(le "$r" 1.3)"

ours=$(best_cpu 3 "$BIN/StillMomentBench" analyse "$big")
ref=$(best_cpu 3 mpg123 -q -t "$big")
r=$(ratio "$ours" "$ref")
report "import 100-MB MP3: decode + EBU R128 loudness and true peak, CPU vs mpg123 -t" "$r" "x ($ours s vs $ref s)" "<= 1.2" "$(le "$r" 1.2)"
