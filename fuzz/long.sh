#!/usr/bin/env bash
# fuzz/long.sh [TARGET...] — the long campaign (`make fuzz-long`): each target in turn until
# it has run RUNS inputs (default 10,000,000; libFuzzer's -runs), then the inputs it found
# that add coverage are merged into the repository's corpus, fuzz/corpus/<target>/
# (libFuzzer -merge=1: only what adds a feature is kept), each at most MAX_LEN bytes
# (default 65536). Writes a table (target, runs, seconds, exec/s, cov, ft, corpus files,
# findings) to bench-out/fuzz-long.txt and prints it. Crash/timeout/OOM inputs go to
# fuzz/crashes/<target>/; exits non-zero if a target fails to build, crashes, hangs (> 5 s on
# one input) or runs out of memory (the other targets still run). Builds with fuzz/run.sh.
#
#   make fuzz-long                       # every target, 10 M runs each
#   RUNS=20000 bash fuzz/long.sh csv     # a quick check of one target
#   FUZZ_LONG_REPORT=FILE                # the table elsewhere (two campaigns side by side)
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# The target list is run.sh's.
eval "$(grep -m1 '^all_targets=' fuzz/run.sh)"
runs=${RUNS:-10000000}
max_len=${MAX_LEN:-65536}
usage="usage: [RUNS=N] [MAX_LEN=BYTES] fuzz/long.sh [TARGET...]  (targets: ${all_targets[*]})"
case $runs in ''|*[!0-9]*|0) echo "$usage" >&2; exit 2 ;; esac
case $max_len in ''|*[!0-9]*|0) echo "$usage" >&2; exit 2 ;; esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
    case " ${all_targets[*]} " in *" $target "*) ;; *) echo "fuzz-long: unknown target '$target'; $usage" >&2; exit 2 ;; esac
done

out=.build-fuzz
report=${FUZZ_LONG_REPORT:-bench-out/fuzz-long.txt}
mkdir -p "$out" bench-out

# Every process this script starts runs in a session (and process group) of its own, so
# that the whole group is stopped on exit: libFuzzer's -merge=1 runs itself again in a
# child through a shell.
child=""
work=""
cleanup() {
    if [ -n "$child" ] && kill -0 -- "-$child" 2>/dev/null; then
        kill -TERM -- "-$child" 2>/dev/null
        sleep 0.2
        kill -KILL -- "-$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    [ -n "$work" ] && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs its arguments in a new session in the background and waits for them; the exit status
# is theirs. setsid does not fork here (a background job of a script leads no group).
run() {
    setsid "$@" &
    child=$!
    wait "$child"
    local status=$?
    child=""
    return "$status"
}

FUZZ_BUILD_ONLY=1 bash fuzz/run.sh 1 "${targets[@]}" || exit 2

export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1}

work=$(mktemp -d "$root/$out/long.XXXXXX")
rows=()
failed=0
for target in "${targets[@]}"; do
    fuzzer="$out/fuzz-$target"
    corpus="fuzz/corpus/$target"
    new="$work/new-$target"          # what this run finds; the repository's corpus is only read
    crashes="fuzz/crashes/$target"
    log="$out/fuzz-long-$target.log"
    mkdir -p "$new" "$crashes"
    before=$(find "$corpus" -type f | wc -l)
    echo "fuzz-long $target: $runs runs…"
    start=$(date +%s.%N)
    run "$fuzzer" -runs="$runs" -max_len="$max_len" -timeout=5 -rss_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$crashes/" "$new" "$corpus" >"$log" 2>&1
    status=$?
    end=$(date +%s.%N)
    done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    # Wall time of the run (the corpus's loading included) and runs per second of it
    # (libFuzzer's own average_exec_per_sec is whole seconds' worth, 0 for a short run).
    seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    speed=$(awk -v n="${done_runs:-0}" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
    # The last status line (`#N DONE cov: C ft: F corp: …`, or the last before a crash).
    cov=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 | sed -nE 's/.* cov: ([0-9]+).*/\1/p')
    ft=$(grep -E '^#[0-9]+.* ft: ' "$log" | tail -1 | sed -nE 's/.* ft: ([0-9]+).*/\1/p')
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    if [ "$status" -eq 0 ] && [ -z "$artifact" ]; then
        finding=0
    else
        failed=1
        # The Swift trap's reason if there is one, else libFuzzer's or the sanitizer's.
        what=$(grep -m1 -oE 'Swift runtime failure: [^/]*' "$log" | sed 's/ *$//')
        [ -n "$what" ] || what=$(grep -m1 -oE 'ERROR: (libFuzzer|AddressSanitizer): [a-z -]*[a-z]' "$log")
        finding="1 (exit $status, ${what:-?}: ${artifact:-no input saved}; log $log)"
    fi
    # What the run found, merged into the repository's corpus where it adds coverage (this
    # also runs when the target crashed: the crashing input is in fuzz/crashes/, not here).
    merge_log="$out/fuzz-long-$target-merge.log"
    if [ -n "$(ls -A "$new")" ]; then
        run "$fuzzer" -merge=1 -max_len="$max_len" -timeout=5 -rss_limit_mb=1024 \
            -artifact_prefix="$crashes/" "$corpus" "$new" >"$merge_log" 2>&1
        mstatus=$?
        if [ "$mstatus" -ne 0 ]; then
            failed=1
            finding="$finding; merge failed (exit $mstatus, log $merge_log)"
        fi
    fi
    after=$(find "$corpus" -type f | wc -l)
    rows+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$target" "${done_runs:-?}" "$seconds" "${speed:-?}" \
        "${cov:-?}" "${ft:-?}" "$after (+$((after - before)))" "$finding")")
    echo "fuzz-long $target: ${done_runs:-?} runs in ${seconds} s (${speed:-?} exec/s), cov ${cov:-?}, ft ${ft:-?}," \
        "corpus $after (+$((after - before))), findings $finding"
done

{
    echo "# fuzz-long $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
        "RUNS=$runs MAX_LEN=$max_len, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
    # Aligned columns, two spaces apart (the last one, findings, as it is).
    printf '%s\n' "target	runs	seconds	exec/s	cov	ft	corpus files	findings" "${rows[@]}" | awk -F '\t' '
        { n = NR; for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }; if (NF > nf) nf = NF }
        END { for (r = 1; r <= n; r++) { line = ""
                  for (i = 1; i < nf; i++) line = line sprintf("%-" w[i] "s  ", cell[r, i])
                  print line cell[r, nf] } }'
} > "$report"
echo
cat "$report"
exit "$failed"
