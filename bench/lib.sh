# Helpers shared by the benchmark scripts. Source it.
set -euo pipefail
BENCH_OUT=${BENCH_OUT:-bench-out}
mkdir -p "$BENCH_OUT"
RESULTS="$BENCH_OUT/results.txt"

# cpu_seconds CMD...: user+system CPU seconds of one run (children included), to the
# millisecond (bash's own `time`, from getrusage).
cpu_seconds() {
    local TIMEFORMAT='%3U %3S' t
    t=$( { time "$@" >/dev/null 2>&1; } 2>&1 ) || { echo "bench: failed: $*" >&2; return 1; }
    echo "$t" | awk '{ printf "%.3f\n", $1 + $2 }'
}

# best_cpu N CMD...: the smallest CPU time of N runs (the least disturbed one).
best_cpu() {
    local n=$1; shift
    local best="" t
    for _ in $(seq "$n"); do
        t=$(cpu_seconds "$@")
        if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    done
    echo "$best"
}

# peak_rss_kb CMD...: maximum resident set size of one run.
peak_rss_kb() {
    local tmp=$BENCH_OUT/.time
    /usr/bin/time -f "%M" -o "$tmp" "$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; return 1; }
    cat "$tmp"
}

# report NAME VALUE UNIT TARGET-TEXT PASS(0/1)
report() {
    local verdict
    if [ "$5" = 1 ]; then verdict=met; else verdict=MISSED; fi
    local line="$1: $2 $3 (target $4) $verdict"
    echo "$line"
    echo "$line" >> "$RESULTS"
}

ratio() { awk "BEGIN{ if ($2 == 0) print 0; else printf \"%.3f\", $1 / $2 }"; }
le() { awk "BEGIN{exit !($1 <= $2)}" && echo 1 || echo 0; }
ge() { awk "BEGIN{exit !($1 >= $2)}" && echo 1 || echo 0; }

# A 30-minute programme of synthetic audio (pink noise under a slow tone), made once.
long_wav() {
    local f="$BENCH_OUT/long-30min.wav"
    if [ ! -f "$f" ]; then
        sox -q -n -r 44100 -c 2 -b 16 "$f" synth 1800 pinknoise vol 0.2 synth 1800 sine mix 220 vol 0.8 fade 0.1 1800 0.5
    fi
    echo "$f"
}

long_mp3() {
    local f="$BENCH_OUT/long-30min.mp3"
    [ -f "$f" ] || lame --quiet -V 2 "$(long_wav)" "$f"
    echo "$f"
}

long_m4a() {
    local f="$BENCH_OUT/long-30min.m4a"
    [ -f "$f" ] || ffmpeg -loglevel error -y -i "$(long_wav)" -c:a aac -b:a 128k "$f"
    echo "$f"
}
