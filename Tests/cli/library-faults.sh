#!/usr/bin/env bash
# Faults a test process cannot stage from inside: imports killed with SIGKILL at random
# moments, a full disk (ulimit -f), two imports at once and `list` during an import.
# Each check prints "ok: …" or "FAILED: …"; the script ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/debug/stillmoment}
KILLS=${KILLS:-20}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
pass=0; fail=0
check() { if [ "$1" = 0 ]; then echo "ok: $2"; pass=$((pass + 1)); else echo "FAILED: $2"; fail=$((fail + 1)); fi; }

# A long MP3 (a few MB) so that an import takes long enough to be killed midway.
big="$work/long talk.mp3"
for i in $(seq 40); do cat Tests/Fixtures/cbr.mp3; done > "$work/chunks.mp3"
lame --quiet -b 128 <(sox -q -n -r 44100 -c 2 -b 16 -t wav - synth 240 pinknoise vol 0.1) "$big" 2>/dev/null \
    || cp "$work/chunks.mp3" "$big"

export STILLMOMENT_HOME="$work/home"
left=0
for i in $(seq "$KILLS"); do
    "$BIN" import "$big" >/dev/null 2>&1 &
    pid=$!; pids+=("$pid")
    sleep "0.$((RANDOM % 40))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    # The next command finds the store consistent, and no temporary file remains.
    "$BIN" library verify >/dev/null 2>&1 || left=$((left + 1))
    ls -A "$STILLMOMENT_HOME/Meditations" | grep -q '^\.import-' && left=$((left + 1))
    "$BIN" delete "long talk" >/dev/null 2>&1
done
check $left "$KILLS imports killed with SIGKILL: store consistent and no temporary file after each"

# A full disk: the copy cannot be written past the file-size limit.
export STILLMOMENT_HOME="$work/full"
out=$( (ulimit -f 64; "$BIN" import "$big") 2>&1 ); rc=$?
lines=$(printf '%s\n' "$out" | grep -c .)
leftover=$(ls -A "$STILLMOMENT_HOME/Meditations" | wc -l)
rows=$("$BIN" list --json)
[ $rc -ne 0 ] && [ "$lines" = 1 ] && [ "$leftover" = 0 ] && [ "$rows" = "[]" ]
check $? "full disk (ulimit -f): one-line error ($out), exit $rc, nothing left behind"

# Two imports at once, on different files, both land; list during an import never fails.
export STILLMOMENT_HOME="$work/both"
cp "$big" "$work/a.mp3"; cp Tests/Fixtures/editlist.m4a "$work/b.m4a"
"$BIN" import "$work/a.mp3" >/dev/null 2>&1 & p1=$!; pids+=("$p1")
"$BIN" import "$work/b.m4a" >/dev/null 2>&1 & p2=$!; pids+=("$p2")
listfail=0
while kill -0 "$p1" 2>/dev/null; do "$BIN" list >/dev/null 2>&1 || listfail=1; done
wait "$p1"; r1=$?; wait "$p2"; r2=$?
n=$("$BIN" list --json | python3 -c "import json,sys;print(len(json.load(sys.stdin)))")
[ $r1 = 0 ] && [ $r2 = 0 ] && [ "$n" = 2 ] && [ $listfail = 0 ]
check $? "two imports at once both land ($n entries); list during an import never failed"

# A file that changes size while it is copied is refused.
export STILLMOMENT_HOME="$work/growing"
cp "$big" "$work/growing.mp3"
( for _ in $(seq 200); do cat Tests/Fixtures/cbr.mp3 >> "$work/growing.mp3"; sleep 0.005; done ) & g=$!; pids+=("$g")
out=$("$BIN" import "$work/growing.mp3" 2>&1); rc=$?
wait "$g"
leftover=$(ls -A "$STILLMOMENT_HOME/Meditations" | wc -l)
if [ $rc -ne 0 ]; then
    printf '%s' "$out" | grep -q "changed while" && [ "$leftover" = 0 ]
    check $? "a file growing during the copy is refused, nothing left ($out)"
else
    # The copy may have finished between two appends: then it must be a complete entry.
    "$BIN" library verify >/dev/null
    check $? "a growing file imported between two appends is consistent"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
