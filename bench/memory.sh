#!/usr/bin/env bash
# Memory through a long session: a timer session (forest ambience, interval gongs every
# 5 min, 3 strikes) with its RSS sampled at regular points of the *session's* time.
#   MEMORY_MINUTES (default 60): the session's length
#   MEMORY_DEVICE (default null): `null` renders as fast as the CPU goes, so an hour of
#     session passes in seconds and the samples are taken every 10 s of session time
#     (every ~30 ms of wall time); `pulse` (with a PulseAudio running) plays it in real
#     time and samples every 10 s of wall time.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
BIN=${BIN:-.build/release}
MEMORY_MINUTES=${MEMORY_MINUTES:-60}
MEMORY_DEVICE=${MEMORY_DEVICE:-null}
export STILLMOMENT_HOME="$BENCH_OUT/home"
samples="$BENCH_OUT/rss.txt"
: > "$samples"

"$BIN/stillmoment" timer "${MEMORY_MINUTES}m" --foreground --preparation off --interval 5m --strikes 3 --ambience forest \
    --device "$MEMORY_DEVICE" </dev/null >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null' EXIT
interval=10
[ "$MEMORY_DEVICE" = null ] && interval=0.03
while kill -0 "$pid" 2>/dev/null; do
    awk '/VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null >> "$samples"
    sleep "$interval"
done
wait "$pid"; rc=$?
n=$(wc -l < "$samples")
# Flat: after the first tenth (start-up, the first decoders), the RSS does not grow.
stats=$(awk -v n="$n" 'NR > n / 10 { if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1; last = $1 }
    NR == int(n / 10) + 1 { first = $1 }
    END { printf "%d %d %d %d", first, last, min, max }' "$samples")
read -r first last min max <<<"$stats"
growth=$(awk "BEGIN{printf \"%.1f\", ($last - $first) / 1024}")
spread=$(awk "BEGIN{printf \"%.1f\", ($max - $min) / 1024}")
report "RSS through a ${MEMORY_MINUTES}-min session on '$MEMORY_DEVICE' ($n samples, exit $rc): growth first→last" "$growth" "MB (range $spread MB, peak $(awk "BEGIN{printf \"%.1f\", $max / 1024}") MB)" "flat (< 1 MB)" "$(le "${growth#-}" 1)"
