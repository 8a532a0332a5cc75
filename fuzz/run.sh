#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] [TARGET...] — build the libFuzzer harnesses with swiftc (no package
# build) and run each one for SECONDS (default 60) on a scratch copy of its seed corpus.
# Targets: mp4 aac mpeg control time schedule device http csv json (default: all). Crash/timeout/OOM
# inputs go to fuzz/crashes/<target>/; exits non-zero if any target fails to build, crashes,
# hangs or runs out of memory. `bash fuzz/run.sh 30` is the CI-sized run.
set -u -o pipefail

all_targets=(mp4 aac mpeg control time schedule device http csv json)
usage="usage: fuzz/run.sh [SECONDS] [TARGET...]  (SECONDS a positive integer; targets: ${all_targets[*]})"
duration=${1:-60}
case $duration in ''|*[!0-9]*|0) echo "$usage" >&2; exit 2 ;; esac
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
    case " ${all_targets[*]} " in *" $target "*) ;; *) echo "fuzz: unknown target '$target'; $usage" >&2; exit 2 ;; esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
src=Sources/StillMomentAudio
out=.build-fuzz
mkdir -p "$out"

# Everything this script starts in the background is recorded here and stopped on exit.
child=""
work=""
cleanup() {
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    [ -n "$work" ] && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -g so that a crash's stack trace names the source line; lld avoids gold's noise about
# ASan's local symbols.
swiftflags=(-sanitize=fuzzer,address -parse-as-library -O -g -use-ld=lld)

build() {  # build TARGET SOURCES...
    local target=$1; shift
    echo "build fuzz-$target"
    if ! swiftc "${swiftflags[@]}" -module-name "Fuzz_$target" "$@" -o "$out/fuzz-$target" \
            >"$out/build-$target.log" 2>&1; then
        cat "$out/build-$target.log" >&2
        echo "fuzz $target: BUILD FAILED" >&2
        exit 2
    fi
}

# A Core file by name, wherever it sits under Sources/StillMomentCore (the tree is being
# reorganised into Domain/, Sessions/, Library/).
core() { find Sources/StillMomentCore -name "$1" -print -quit; }

# One declaration (`public struct NAME` / `public enum NAME` to its closing `}` at the start
# of a line) cut out of a source file that cannot be built here as a whole (it imports GRDB
# or StillMomentAudio for its other parts): the real text, written to .build-fuzz/.
excerpt() {  # excerpt FILE NAME
    local file=$1 name=$2 dest="$out/excerpt-$2.swift"
    awk -v name="$name" '
        !on && $0 ~ ("^public (struct|enum) " name "[ :{]") { on = 1 }
        on { print }
        on && /^}/ { exit }' "$file" > "$dest.$$"
    if ! [ -s "$dest.$$" ]; then
        rm -f "$dest.$$"
        echo "fuzz: BUILD FAILED (no declaration of $name in $file)" >&2
        exit 2
    fi
    # Replaced only when it changed, and by a rename: a build of another target (a second
    # campaign, fuzz/long.sh) may be reading it.
    if cmp -s "$dest.$$" "$dest"; then rm -f "$dest.$$"; else mv -f "$dest.$$" "$dest"; fi
    printf '%s\n' "$dest"
}

# A Core file that imports StillMomentAudio for a few of its types, without that line: the
# real text, written to .build-fuzz/, built with the audio layer's file that declares them.
without_audio_import() {  # without_audio_import FILE
    local file=$1 dest="$out/excerpt-$(basename "$1")"
    grep -v '^import StillMomentAudio$' "$file" > "$dest.$$"
    if cmp -s "$dest.$$" "$dest"; then rm -f "$dest.$$"; else mv -f "$dest.$$" "$dest"; fi
    printf '%s\n' "$dest"
}

# One constant of a type that cannot be built here (`static let NAME` of TYPE in FILE), as
# the only member of an enum of that name: the real line, written to .build-fuzz/.
constant() {  # constant FILE TYPE NAME
    local file=$1 type=$2 name=$3 dest="$out/excerpt-$2-$3.swift" line
    line=$(grep -m1 -E "^ +public static let $name(:| =)" "$file")
    if [ -z "$line" ]; then
        echo "fuzz: BUILD FAILED (no constant $type.$name in $file)" >&2
        exit 2
    fi
    printf 'public enum %s {\n%s\n}\n' "$type" "$line" > "$dest.$$"
    if cmp -s "$dest.$$" "$dest"; then rm -f "$dest.$$"; else mv -f "$dest.$$" "$dest"; fi
    printf '%s\n' "$dest"
}

# The schedule's text and the Core files it uses: the WHEN, the zone rules, the timetable's
# words, the date and time; CoreError (with ErrorCategory) is cut out of Paths.swift, the
# random bells' spacing and its generator out of Sections.swift, the shortest interval out
# of TimerConfiguration.swift; CoreError names the audio layer's DeviceError.
schedule_sources() {
    schedule=("$(core Schedule.swift)" "$(core LocalTime.swift)" "$(core ZoneRules.swift)" "$(core ShellWords.swift)"
              "$(core TimeText.swift)" "$(core Display.swift)" "$(core Language.swift)" "$(core Environment.swift)"
              "$(excerpt "$(core Paths.swift)" CoreError)" "$(excerpt "$(core Paths.swift)" ErrorCategory)"
              "$(excerpt "$(core Sections.swift)" RandomBells)" "$(excerpt "$(core Sections.swift)" SeededGenerator)"
              "$(constant "$(core TimerConfiguration.swift)" TimerConfiguration minInterval)"
              "$(without_audio_import "$(core AudioErrorText.swift)")" "$src/AudioError.swift")
    local f
    for f in "${schedule[@]}"; do
        [ -n "$f" ] || { echo "fuzz: BUILD FAILED (a source of the schedule's text is missing)" >&2; exit 2; }
    done
}

# The practice log's import (CSV and JSON) and the Core files it uses: the JSON reader and
# coders, the entry and its time, the texts of its messages. PracticeEntry's id check
# (StoredName), the sound catalog's Sound and SessionKind's EndReason are cut out of files
# that need GRDB, Paths or the audio engine.
practice_sources() {
    practice=(Sources/StillMomentCore/JSON/JSON.swift Sources/StillMomentCore/JSON/JSONParser.swift
              Sources/StillMomentCore/JSON/JSONWriter.swift Sources/StillMomentCore/JSON/JSONValueEncoder.swift
              Sources/StillMomentCore/JSON/JSONValueDecoder.swift
              "$(core PracticeExport.swift)" "$(core SpreadsheetCell.swift)" "$(core PracticeStats.swift)"
              "$(core LocalTime.swift)" "$(core SessionKind.swift)" "$(core TimeText.swift)" "$(core Display.swift)"
              "$(core Language.swift)" "$(core Environment.swift)"
              "$(excerpt "$(core Meditation.swift)" StoredName)" "$(excerpt "$(core SoundCatalog.swift)" Sound)"
              "$(excerpt "$(core Session.swift)" EndReason)")
    local f
    for f in "${practice[@]}"; do
        [ -n "$f" ] || { echo "fuzz: BUILD FAILED (a source of the practice import is missing)" >&2; exit 2; }
    done
}

# The C libraries through the package's own module maps (Sources/C*/module.modulemap).
clibs=(-I Sources/CFaad -I Sources/CMpg123 -lfaad -lmpg123)

# CFileIO, a C target of the package (the reader libmpg123 reads files through): its
# sources built here with the same sanitizers, and a module map for its header (SwiftPM
# makes one for a package build).
cfileio_objects() {
    local dir="$out/cfileio"
    mkdir -p "$dir"
    printf 'module CFileIO {\n    header "%s"\n    export *\n}\n' "$root/Sources/CFileIO/include/cfileio.h" \
        > "$dir/module.modulemap"
    local f
    : > "$out/build-cfileio.log"
    for f in Sources/CFileIO/*.c; do
        if ! clang -c -O1 -g -fsanitize=fuzzer-no-link,address -I Sources/CFileIO/include "$f" \
                -o "$dir/$(basename "$f" .c).o" >>"$out/build-cfileio.log" 2>&1; then
            cat "$out/build-cfileio.log" >&2
            echo "fuzz: BUILD FAILED (CFileIO)" >&2
            exit 2
        fi
    done
    cfileio=(-I "$dir" "$dir"/*.o)
}

build_target() {
    case $1 in
    mp4) build mp4 "$src/MP4Demuxer.swift" fuzz/mp4/main.swift ;;
    aac) cfileio_objects
         build aac "${clibs[@]}" "${cfileio[@]}" "$src/AACDecoder.swift" "$src/MP4Demuxer.swift" \
             "$src/AudioFile.swift" "$src/AudioError.swift" "$src/Buffers.swift" "$src/Decoder.swift" \
             "$src/MP3Decoder.swift" "$src/SeekIndex.swift" "$src/MPEGAudio.swift" fuzz/common/MemFile.swift fuzz/aac/main.swift ;;
    mpeg) build mpeg "$src/MPEGAudio.swift" "$src/AudioFile.swift" "$src/AudioError.swift" "$src/Buffers.swift" \
              fuzz/common/MemFile.swift fuzz/mpeg/main.swift ;;
    control) build control Sources/StillMomentCore/JSON/JSON.swift Sources/StillMomentCore/JSON/JSONParser.swift \
                 Sources/StillMomentCore/JSON/JSONWriter.swift Sources/StillMomentCore/JSON/JSONValueEncoder.swift \
                 Sources/StillMomentCore/JSON/JSONValueDecoder.swift \
                 Sources/StillMomentControl/Protocol.swift "$(core Language.swift)" "$(core Environment.swift)" \
                 "$(core Display.swift)" fuzz/control/main.swift ;;
    time)
        # TimeText.swift and the Core files its messages use, if they exist.
        local files=() name path
        for name in TimeText.swift Display.swift Language.swift Environment.swift; do
            path=$(core "$name")
            [ -n "$path" ] && files+=("$path")
        done
        build time "${files[@]}" fuzz/time/main.swift ;;
    schedule) schedule_sources; build schedule "${schedule[@]}" fuzz/schedule/main.swift ;;
    device) build device "$src/DeviceName.swift" fuzz/device/main.swift ;;
    http)
        # The web app's request reader and the Core files it uses (Language, trimmingWhitespace).
        build http Sources/StillMomentWeb/HTTPRequest.swift "$(core Language.swift)" "$(core Environment.swift)" \
            "$(core Display.swift)" "$(core TimeText.swift)" fuzz/http/main.swift ;;
    csv) practice_sources; build csv "${practice[@]}" fuzz/common/Practice.swift fuzz/csv/main.swift ;;
    json) practice_sources; build json "${practice[@]}" fuzz/common/Practice.swift fuzz/json/main.swift ;;
    esac
}

for target in "${targets[@]}"; do build_target "$target"; done
# fuzz/long.sh builds through this script and runs the fuzzers itself.
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# Let libFuzzer/ASan handle a Swift trap (writing the input) instead of the Swift runtime's
# backtracer, which would be spawned as an extra process.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1}

work=$(mktemp -d "$root/$out/run.XXXXXX")
failed=0
for target in "${targets[@]}"; do
    corpus="$work/corpus-$target"
    cp -R "fuzz/corpus/$target" "$corpus"      # a copy: the committed seeds stay as they are
    crashes="fuzz/crashes/$target"
    mkdir -p "$crashes"
    log="$out/fuzz-$target.log"
    "$out/fuzz-$target" -max_total_time="$duration" -timeout=5 -rss_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1 &
    child=$!
    wait "$child"
    status=$?
    child=""
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    if [ "$status" -eq 0 ] && [ -z "$artifact" ]; then
        echo "fuzz $target: ${runs:-?} runs, no crash"
    else
        failed=1
        # The Swift trap's reason if there is one ("Swift runtime failure: ..."), else the sanitizer's.
        what=$(grep -m1 -oE 'Swift runtime failure: [^/]*' "$log" | sed 's/ *$//')
        [ -n "$what" ] || what=$(grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer)|Fatal error' "$log" | sed 's/^==[0-9]*== *//')
        # The first stack frame with a real Swift source line: file:line:col (function).
        frame=$(grep -m1 -E '^ +#[0-9]+ .* /[^ ]+\.swift:[0-9]+' "$log")
        where=$(printf '%s' "$frame" | grep -oE '/[^ ]+\.swift:[0-9]+(:[0-9]+)?' | sed "s#^$root/##")
        fn=$(printf '%s' "$frame" | sed -nE 's/^ +#[0-9]+ 0x[0-9a-f]+ in ([^ ]+) .*/\1/p')
        if [ -n "$fn" ] && command -v swift-demangle >/dev/null; then
            fn=$(swift-demangle --simplified --compact "$fn" 2>/dev/null || printf '%s' "$fn")
        fi
        echo "fuzz $target: CRASH (exit $status) ${what:-?} at ${where:-?} ${fn:+in $fn }| input: ${artifact:-none} | log: $log"
    fi
done
exit "$failed"
