#!/usr/bin/env bash
# Faults a test process cannot stage from inside, against the real binary:
#  - imports killed with SIGKILL at random moments, a full disk (ulimit -f), two imports at
#    once and `list` during an import, a file that grows while it is copied;
#  - the catalog emptied, deleted, replaced by an older copy, with damaged rows, with
#    foreign files in the store, overwritten with garbage: no stored file is ever lost,
#    `library verify` reports, `library verify --repair` re-adopts;
#  - `library verify --repair` racing 20 imports in parallel processes (3 rounds);
#  - a daemon SIGKILLed mid-meditation on a paced device (a private PulseAudio null sink):
#    the saved position is within a few seconds, `play --resume` starts there;
#  - planted symlinks at --output's temporary names in a sticky world-writable folder,
#    --output onto devices and links, a failed render (a damaged M4A) leaves nothing;
#  - a runtime folder (or socket, or peer) of another user: the client refuses it, sends
#    nothing, starts no daemon there (/tmp/stillmoment-UID in a private mount namespace);
#  - a read-only and a full store (a tmpfs): reading commands work, import says why not.
# Every case has its own STILLMOMENT_HOME and XDG_RUNTIME_DIR under one mktemp -d folder;
# every process started is stopped by its PID (daemons too: found by that folder in their
# environment), every mount is unmounted, in the EXIT trap.
# Each check prints "ok: …" or "FAILED: …" ("skipped: …" when the system cannot stage
# it); the script ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/debug/stillmoment}
if [ ! -x "$BIN" ] && [ "$BIN" = .build/debug/stillmoment ]; then swift build >&2 || exit 1; fi
FIX=$PWD/Tests/Fixtures
KILLS=${KILLS:-20}
t_start=$SECONDS
work=$(mktemp -d)
chmod 711 "$work"           # `nobody` (the fake daemons of case 5) must reach its folders
# A copy of the binary: others may relink .build's while this runs ("Text file busy").
# The daemons it starts run the copy too, with a copy of the bundled sounds beside it (a
# clone under /tmp is hidden by the private /tmp of case 5; the copy in $work is not).
mkdir "$work/bin" && cp "$BIN" "$work/bin/stillmoment" || exit 1
BIN=$work/bin/stillmoment
cp -r "${STILLMOMENT_SOUNDS:-$PWD/Sounds}" "$work/Sounds" || exit 1
export STILLMOMENT_SOUNDS=$work/Sounds
"$BIN" --version >/dev/null || { echo "FAILED: $BIN does not run"; exit 1; }
mounts=()
# Every process whose environment names a folder of ours: daemons the client started
# (detached, so not our children), PulseAudio, the fake daemons.
ours() {
    local e p
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}; p=${p%/environ}
        [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
        grep -qzE "^(STILLMOMENT_HOME|XDG_RUNTIME_DIR|HOME)=$work(/|$)" "$e" 2>/dev/null && echo "$p"
    done
}
cleanup() {
    unset STILLMOMENT_HOME XDG_RUNTIME_DIR PULSE_SERVER
    # Our children not yet waited for (a pid already reaped may be someone else's by now),
    # then what the environment says is ours.
    for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for p in $(ours); do kill -9 "$p" 2>/dev/null; done
    for m in "${mounts[@]:-}"; do [ -n "$m" ] && umount -l "$m" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pass=0; fail=0
# whether PID runs with this case's store (a daemon.lock may name a pid reused since)
is_ours() { [ -n "$1" ] && grep -qzx "STILLMOMENT_HOME=$STILLMOMENT_HOME" "/proc/$1/environ" 2>/dev/null; }
# stop a process of ours by its pid (quietly: no "Killed" notice from bash)
stop_pid() { kill -9 "$1" 2>/dev/null && wait "$1" 2>/dev/null; return 0; }
check() { if [ "$1" = 0 ]; then echo "ok: $2"; pass=$((pass + 1)); else echo "FAILED: $2"; fail=$((fail + 1)); fi; }
# A private store and runtime folder for one case.
fresh() {
    mkdir -p "$work/$1/run"; chmod 700 "$work/$1/run"
    export STILLMOMENT_HOME="$work/$1/home" XDG_RUNTIME_DIR="$work/$1/run"
}
sm() { "$BIN" "$@" </dev/null; }
nlines() { printf '%s\n' "$1" | grep -c .; }
first() { printf '%s' "$1" | head -n 1 | cut -c 1-150; }
# an error line's reason (what follows its last ": ")
reason() { printf '%s' "$1" | grep -v 'warning: less than' | head -n 1 | sed 's/.*: //'; }
# name and content hash of every stored file, one a line
stored() { (cd "$STILLMOMENT_HOME/Meditations" 2>/dev/null && ls -A | grep -v '^\.' | xargs -r sha256sum) | sort; }
# the ids and names in `list --json`, sorted
listed() { sm list --json 2>/dev/null | python3 -c 'import json,sys
for m in json.load(sys.stdin): print(m["id"], m["name"])' | sort; }
# the ids of the stored files
file_ids() { ls -A "$STILLMOMENT_HOME/Meditations" | grep -v '^\.' | sed 's/\.[^.]*$//' | sort; }
# small distinct MP3s: tone FOLDER N SECONDS [SECONDS_STEP]
tones() {
    local k
    mkdir -p "$1"
    for k in $(seq "$2"); do
        sox -q -n -r 22050 -c 1 -b 16 "$1/t$k.wav" synth $(($3 + ${4:-0} * k)) sine $((180 + 41 * k)) vol 0.2
        lame --quiet --tt "Tone $k" "$1/t$k.wav" "$1/t$k.mp3" && rm "$1/t$k.wav"
    done
}

# A long MP3 (a few MB) so that an import takes long enough to be killed midway.
big="$work/long talk.mp3"
for i in $(seq 40); do cat Tests/Fixtures/cbr.mp3; done > "$work/chunks.mp3"
lame --quiet -b 128 <(sox -q -n -r 44100 -c 2 -b 16 -t wav - synth 240 pinknoise vol 0.1 2>/dev/null) "$big" 2>/dev/null \
    || cp "$work/chunks.mp3" "$big"

fresh kills
left=0
for i in $(seq "$KILLS"); do
    "$BIN" import "$big" >/dev/null 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 40))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    # The next command finds the store consistent, and no temporary file remains.
    "$BIN" library verify >/dev/null 2>&1 || left=$((left + 1))
    ls -A "$STILLMOMENT_HOME/Meditations" | grep -q '^\.import-' && left=$((left + 1))
    "$BIN" delete "long talk" >/dev/null 2>&1
done
check $left "$KILLS imports killed with SIGKILL: store consistent and no temporary file after each"

# A full disk: the copy cannot be written past the file-size limit (512 KB: the catalog
# fits, the copy does not; 64 KB: not even the catalog can be written).
for limit in 512 64; do
    fresh "full$limit"
    out=$( (ulimit -f $limit; "$BIN" import "$big") 2>&1 ); rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    leftover=$(ls -A "$STILLMOMENT_HOME/Meditations" 2>/dev/null | wc -l)
    rows=$("$BIN" list --json)
    [ $rc -ne 0 ] && [ "$lines" = 1 ] && [ "$leftover" = 0 ] && [ "$rows" = "[]" ]
    check $? "full disk (ulimit -f $limit): one-line error ($out), exit $rc, nothing left behind"
done

# Two imports at once, on different files, both land; list during an import never fails.
fresh both
cp "$big" "$work/a.mp3"; cp Tests/Fixtures/editlist.m4a "$work/b.m4a"
"$BIN" import "$work/a.mp3" >/dev/null 2>&1 & p1=$!
"$BIN" import "$work/b.m4a" >/dev/null 2>&1 & p2=$!
listfail=0
while kill -0 "$p1" 2>/dev/null; do "$BIN" list >/dev/null 2>&1 || listfail=1; done
wait "$p1"; r1=$?; wait "$p2"; r2=$?
n=$("$BIN" list --json | python3 -c "import json,sys;print(len(json.load(sys.stdin)))")
[ $r1 = 0 ] && [ $r2 = 0 ] && [ "$n" = 2 ] && [ $listfail = 0 ]
check $? "two imports at once both land ($n entries); list during an import never failed"

# A file that changes size while it is copied is refused.
fresh growing
cp "$big" "$work/growing.mp3"
# Appended to without a pause from before the import starts until it has ended (bounded:
# 20 s), so the file changes during every copy and an import that succeeds is a failure.
( end=$((SECONDS + 20)); while [ ! -e "$work/growing.stop" ] && [ $SECONDS -lt $end ]; do
      cat Tests/Fixtures/cbr.mp3 >> "$work/growing.mp3"; done ) & g=$!
sleep 0.05
out=$("$BIN" import "$work/growing.mp3" 2>&1); rc=$?
touch "$work/growing.stop"; wait "$g"
leftover=$(ls -A "$STILLMOMENT_HOME/Meditations" | wc -l)
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q "changed while" && [ "$leftover" = 0 ]
check $? "a file growing during the copy is refused, nothing left (exit $rc: $out)"

# ---------------------------------------------------------------------------------------
# 1. The catalog emptied, deleted, replaced by an older copy (last week's backup), with
#    damaged rows, beside foreign files, overwritten with garbage: no stored file is lost.
fresh catalog
tones "$work/tones" 8 1
sm import "$work"/tones/t{1,2,3,4}.mp3 >/dev/null
db=$STILLMOMENT_HOME/library.sqlite
sqlite3 "$db" "VACUUM INTO '$work/catalog/backup.sqlite'"
sm import "$work"/tones/t{5,6,7}.mp3 >/dev/null
newer=$(sm list --json | python3 -c 'import json,sys
print(" ".join(m["id"] for m in json.load(sys.stdin) if m["name"] in ("Tone 5","Tone 6","Tone 7")))')
sm delete "Tone 4" >/dev/null     # gone since the backup: its old row points at nothing
before=$(stored)
expect=$(printf 'Tone %s\n' 1 2 3 5 6 7)
names_ok() { [ "$(listed | cut -d' ' -f2- | sort)" = "$expect" ] && [ "$(listed | cut -d' ' -f1)" = "$(file_ids)" ]; }

rm -f "$db" "$db-wal" "$db-shm"; cp "$work/catalog/backup.sqlite" "$db"
out=$(sm list 2>&1); rc_list=$?
vout=$(sm library verify 2>&1); rc_v=$?
reported=0; for id in $newer; do printf '%s' "$vout" | grep -q "$id.*no catalog entry" && reported=$((reported + 1)); done
[ "$(stored)" = "$before" ] && [ $rc_list = 0 ] && [ $rc_v = 1 ] && [ $reported = 3 ] \
    && ! printf '%s' "$vout" | grep -q consistent
check $? "catalog replaced by an older copy: no stored file lost ($(stored | wc -l) files), list exit $rc_list, verify exit $rc_v reports the $reported newer files"
rout=$(sm library verify --repair 2>&1); rc_r=$?
vout=$(sm library verify 2>&1); rc_v=$?
[ $rc_r = 0 ] && [ "$(printf '%s' "$rout" | grep -c adopted)" = 3 ] && [ $rc_v = 0 ] \
    && printf '%s' "$vout" | grep -q consistent && [ "$(stored)" = "$before" ] && names_ok
check $? "…verify --repair re-adopts them (exit $rc_r, $(printf '%s' "$rout" | grep -c adopted) adopted); then: $(first "$vout"); list --json has all $(listed | wc -l)"

rm -f "$db-wal" "$db-shm"; : > "$db"
out=$(sm list 2>&1); rc_list=$?
vout=$(sm library verify 2>&1); rc_v=$?
[ "$(stored)" = "$before" ] && [ $rc_list = 0 ] && printf '%s' "$out" | grep -q rebuilt && [ $rc_v = 0 ] && names_ok
check $? "catalog emptied (: > library.sqlite): the next list rebuilds it from the files (exit $rc_list), none lost; verify exit $rc_v; list --json has all $(listed | wc -l)"

rm -f "$db" "$db-wal" "$db-shm"
vout=$(sm library verify 2>&1); rc_v=$?
[ "$(stored)" = "$before" ] && [ $rc_v = 0 ] && printf '%s' "$vout" | grep -q "consistent (6 entries)" && names_ok
check $? "catalog deleted: the next command (verify) rebuilds it, none lost: $(printf '%s' "$vout" | tail -n 1)"

# Damaged rows: a path out of the store, an unreadable date, a zero sample rate, an
# absurd length. Listed around, reported, rebuilt from their files. The path out of the
# store leads to a decoy of ours (never a system file: a regressed build might delete it).
echo "not a meditation" > "$work/catalog/decoy"; decoy=$(stat -c '%s %Y' "$work/catalog/decoy")
sqlite3 "$db" "UPDATE meditation SET storedFile='../../decoy' WHERE name='Tone 1';
               UPDATE meditation SET dateAdded='last week' WHERE name='Tone 2';
               UPDATE meditation SET sampleRate=0 WHERE name='Tone 3';
               UPDATE meditation SET durationFrames=9223372036854775000 WHERE name='Tone 5';"
out=$(sm list 2>&1); rc_list=$?
sm play "Tone 1" --output "$work/catalog/p.wav" >/dev/null 2>&1
vout=$(sm library verify 2>&1); rc_v=$?
damaged=$(printf '%s' "$vout" | grep -c damaged)
rout=$(sm library verify --repair 2>&1); rc_r=$?
sm library verify >/dev/null 2>&1; rc_v2=$?
[ $rc_list = 0 ] && [ $rc_v = 1 ] && [ "$damaged" -ge 4 ] && [ $rc_r = 0 ] && [ $rc_v2 = 0 ] \
    && [ "$(stored)" = "$before" ] && [ "$(stat -c '%s %Y' "$work/catalog/decoy" 2>/dev/null)" = "$decoy" ] && [ ! -e "$work/catalog/p.wav" ] && names_ok
check $? "4 damaged rows: list exit $rc_list, verify exit $rc_v ($damaged damaged), repair exit $rc_r, then verify exit $rc_v2; no file lost, the decoy at ../../decoy untouched"

# Foreign files in Meditations/: unreadable ones go to Lost+Found, byte for byte.
cp "$FIX/random.bin" "$STILLMOMENT_HOME/Meditations/0b0e0c0d-1111-4222-8333-944455556666.mp3"
cp "$FIX/text.mp3" "$STILLMOMENT_HOME/Meditations/notes.mp3"
planted=$(sha256sum "$FIX/random.bin" "$FIX/text.mp3" | cut -d' ' -f1 | sort)
sm library verify >/dev/null 2>&1; rc_v=$?
sm library verify --repair >/dev/null 2>&1; rc_r=$?
lf=$(cat "$STILLMOMENT_HOME/Lost+Found"/* 2>/dev/null | wc -c)
found=$(sha256sum "$STILLMOMENT_HOME/Lost+Found"/* 2>/dev/null | cut -d' ' -f1 | sort)
[ $rc_v = 1 ] && [ $rc_r = 0 ] && [ "$found" = "$planted" ] && [ "$(stored)" = "$before" ] && names_ok \
    && sm library verify >/dev/null 2>&1
check $? "unreadable and foreign files in the store: verify exit $rc_v, repair moves both to Lost+Found/ intact ($lf bytes), the rest unchanged"

# Garbage over the catalog: either refused in one line, or kept aside byte for byte and
# rebuilt from the files; never a stored file deleted.
rm -f "$db-wal" "$db-shm"; head -c 90000 /dev/urandom > "$work/catalog/garbage"; cp "$work/catalog/garbage" "$db"
gsum=$(sha256sum < "$work/catalog/garbage")
out=$(sm list 2>&1); rc_list=$?
kept=$(for f in "$db".*; do [ -f "$f" ] && [ "$(sha256sum < "$f")" = "$gsum" ] && echo "${f##*/}"; done | head -n 1)
if [ $rc_list = 0 ]; then
    [ -n "$kept" ] && [ "$(stored)" = "$before" ] && names_ok && sm library verify >/dev/null 2>&1
    check $? "catalog overwritten with garbage: list rebuilds it from the files ($(listed | wc -l) entries), the garbage kept as ${kept:-(nothing!)}, none lost"
else
    sm library verify --repair >/dev/null 2>&1
    sm import "$work/tones/t8.mp3" >/dev/null 2>&1
    [ "$(nlines "$out")" = 1 ] && [ -z "$(comm -23 <(echo "$before") <(stored))" ]
    check $? "catalog overwritten with garbage: list refuses in one line (exit $rc_list: $(first "$out")), verify --repair and import delete no stored file"
fi

# ---------------------------------------------------------------------------------------
# 2. `library verify --repair` (three loops of it) racing 20 imports in parallel processes.
tones "$work/race" 20 2 1
for round in 1 2 3; do
    fresh "race$round"
    sm library verify >/dev/null 2>&1     # the store exists before the race
    stop=$work/race$round/stop
    reps=()
    for r in 1 2 3; do
        ( n=0; while [ ! -e "$stop" ] && [ $n -lt 300 ]; do
              "$BIN" library verify --repair </dev/null >>"$work/race$round/repair.log" 2>&1; n=$((n + 1))
          done; echo "$n" > "$work/race$round/repairs.$r" ) &
        reps+=($!)
    done
    imp=()
    for k in $(seq 20); do
        "$BIN" import --json "$work/race/t$k.mp3" </dev/null >"$work/race$round/out.$k" 2>"$work/race$round/err.$k" &
        imp+=($!)
    done
    rcs=()
    for k in $(seq 20); do wait "${imp[$((k - 1))]}"; rcs+=($?); done
    touch "$stop"
    for p in "${reps[@]}"; do wait "$p"; done
    rows=$(listed)
    okn=0; bad=""
    for k in $(seq 20); do
        if [ "${rcs[$((k - 1))]}" = 0 ]; then
            okn=$((okn + 1))
            id=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))[0]["id"])' "$work/race$round/out.$k" 2>/dev/null)
            src=$(sha256sum < "$work/race/t$k.mp3")
            got=$(cat "$STILLMOMENT_HOME/Meditations/$id.mp3" 2>/dev/null | sha256sum)
            { [ -n "$id" ] && [ "$src" = "$got" ] && grep -q "^$id " <<<"$rows"; } || bad="$bad t$k"
        else
            bad="$bad t$k(exit ${rcs[$((k - 1))]}: $(first "$(cat "$work/race$round/err.$k")"))"
        fi
    done
    nrep=$(( $(cat "$work/race$round"/repairs.* | paste -sd+) ))
    vout=$(sm library verify 2>&1); rc_v=$?
    nfiles=$(file_ids | wc -l); nrows=$(grep -c . <<<"$rows")
    lf=$(ls -A "$STILLMOMENT_HOME/Lost+Found" 2>/dev/null | wc -l)
    [ $okn = 20 ] && [ -z "$bad" ] && [ $rc_v = 0 ] && [ "$nfiles" = 20 ] && [ "$nrows" = 20 ] && [ "$lf" = 0 ]
    check $? "race $round: 20 parallel imports vs $nrep repairs: $okn exited 0, each with its row and file (lost:${bad:- none}); $nfiles files, $nrows rows, $lf in Lost+Found; $(first "$vout")"
done

# ---------------------------------------------------------------------------------------
# 3. A daemon SIGKILLed mid-meditation, on a paced device (PulseAudio's null sink plays
#    in real time; the `null` device runs faster).
pos_of() { sm status --json 2>/dev/null | python3 -c 'import json,sys
try: d=json.load(sys.stdin); print(d.get("position", -1000) / 1000 if d.get("source") == "guided" else -1)
except Exception: print(-1)'; }
saved_of() { sm show "$1" --json 2>/dev/null | python3 -c 'import json,sys
v=json.load(sys.stdin).get("lastPosition"); print(-1 if v is None else v / 1000)'; }
# play until the position passes $1 s (bounded), then SIGKILL the daemon; sets pos, dpid
kill_at() {
    local end=$((SECONDS + $1 + 15))
    dpid=$(cat "$XDG_RUNTIME_DIR/stillmoment/daemon.lock" 2>/dev/null | tr -dc 0-9)
    pos=-1
    while [ $SECONDS -lt $end ]; do
        pos=$(pos_of)
        python3 -c "import sys; sys.exit(0 if $pos >= $1 else 1)" && break
        sleep 0.3
    done
    is_ours "$dpid" && kill -9 "$dpid"
    for _ in $(seq 50); do is_ours "$dpid" || break; sleep 0.1; done
}
within() { python3 -c "import sys; p,s=$1,$2; sys.exit(0 if s >= 0 and p - 6 <= s <= p + 0.5 else 1)"; }
fresh sigkill
pa=$work/sigkill/pa
if command -v pulseaudio >/dev/null; then
    mkdir -p "$pa/run" "$pa/home"; chmod 700 "$pa/run" "$pa/home"
    HOME=$pa/home XDG_RUNTIME_DIR=$pa/run pulseaudio -n --daemonize=no --exit-idle-time=-1 --use-pid-file=no \
        -L "module-null-sink sink_name=sm" -L "module-native-protocol-unix socket=$pa/pulse.sock auth-anonymous=1" \
        </dev/null >"$pa/log" 2>&1 &
    pa_pid=$!
    for _ in $(seq 100); do [ -S "$pa/pulse.sock" ] && break; sleep 0.05; done
fi
if ! command -v pulseaudio >/dev/null; then
    echo "skipped: a daemon SIGKILLed mid-meditation (no paced device: pulseaudio is not installed)"
elif [ ! -S "$pa/pulse.sock" ]; then
    check 1 "a daemon SIGKILLed mid-meditation: PulseAudio is installed but did not start within 5 s"
else
    export PULSE_SERVER=unix:$pa/pulse.sock
    real_home=$HOME; export HOME=$pa/home      # libpulse's cookie and config stay in there
    lame --quiet --tt "Sixty" <(sox -q -n -r 44100 -c 2 -b 16 -t wav - synth 60 pinknoise vol 0.1 2>/dev/null) "$work/sigkill/sixty.mp3"
    id=$(sm import --json "$work/sigkill/sixty.mp3" | python3 -c 'import json,sys;print(json.load(sys.stdin)[0]["id"])')
    sm play "$id" --device pulse --detach >"$work/sigkill/play1" 2>&1; rc1=$?
    kill_at 12; pos1=$pos
    saved1=$(saved_of "$id")
    # The kill must have happened (else the live daemon's checkpoints pass for it).
    within "$pos1" "$saved1" && [ -n "$dpid" ] && ! is_ours "$dpid"
    check $? "daemon $dpid SIGKILLed at ${pos1} s of a guided meditation on pulse (play exit $rc1): lastPosition ${saved1} s (within 6 s)"
    sm play "$id" --resume --device pulse --detach >"$work/sigkill/play2" 2>&1; rc2=$?
    resumed=$(pos_of)
    python3 -c "import sys; sys.exit(0 if $rc2 == 0 and $saved1 > 0 and abs($resumed - $saved1) <= 1.5 else 1)"
    check $? "…play --resume starts there: status position ${resumed} s (exit $rc2)"
    kill_at "$(python3 -c "print(int($saved1 + 9))")"; pos2=$pos
    saved2=$(saved_of "$id")
    within "$pos2" "$saved2" && [ -n "$dpid" ] && ! is_ours "$dpid"
    check $? "…and SIGKILLed again at ${pos2} s after the resume: lastPosition ${saved2} s"
    unset PULSE_SERVER; export HOME=$real_home
fi
[ -n "${pa_pid:-}" ] && stop_pid "$pa_pid"

# ---------------------------------------------------------------------------------------
# 4. --output: planted links at plausible temporary names in a sticky world-writable
#    folder, devices and links as PATH, a failed render.
fresh output
sticky=$work/output/sticky; mkdir -p "$sticky"; chmod 1777 "$sticky"
victim=$sticky/victim; echo "another user's file" > "$victim"; chown nobody "$victim" 2>/dev/null
vsum() { stat -c '%U %s %h %Y' "$victim"; sha256sum < "$victim"; }
vbefore=$(vsum)
names="sit.wav.part .sit.wav.part sit.wav.tmp .sit.wav.tmp sit.wav~ .sit.wav.swp sit.wav.partial .#sit.wav sit.wav.new"
for n in $names; do ln -s "$victim" "$sticky/$n"; done
links_ok() { local n; for n in $names; do [ "$(readlink "$sticky/$n")" = "$victim" ] || return 1; done; }
out=$(sm timer 1m --preparation off --device null --output "$sticky/sit.wav" 2>&1); rc=$?
out2=$(sm timer 30s --preparation off --device null --output "$sticky/sit.wav" 2>&1); rc2=$?
strays=$(find "$sticky" -name '*.part' -type f | wc -l)
[ $rc = 0 ] && [ $rc2 = 0 ] && [ "$(vsum)" = "$vbefore" ] && [ -f "$sticky/sit.wav" ] && [ ! -L "$sticky/sit.wav" ] \
    && [ "$(head -c 4 "$sticky/sit.wav")" = RIFF ] && links_ok && [ "$strays" = 0 ]
check $? "links planted at 9 temporary names for sit.wav in a sticky folder: two renders (exit $rc, $rc2) leave another user's file unchanged, the links as they were, no stray .part"
ln "$victim" "$sticky/hard.wav"
out=$(sm timer 30s --preparation off --device null --output "$sticky/hard.wav" 2>&1); rc=$?
[ $rc = 0 ] && [ "$(vsum)" = "$vbefore" ] && [ "$(head -c 4 "$sticky/hard.wav")" = RIFF ]
check $? "--output onto a hard link to another user's file replaces the name, not the file (exit $rc)"
# Refusals: a link (to the victim), a dangling link, a folder; and /dev/full, /dev/stdout,
# /dev/null. Those three are tried in a private mount namespace whose /dev is a tmpfs of
# our own: a regressed build renames its render over them (as root it did), and that
# must never hit the system's /dev. Without a namespace: device nodes made in our folder.
ln -s "$victim" "$sticky/link.wav"; ln -s "$sticky/nothing-here" "$sticky/dangling.wav"; mkdir "$sticky/folder.wav"
refuse() {    # refuse PATH...: one line per path: "ok PATH" or "no PATH (exit, lines)"
    local t out rc
    for t in "$@"; do
        out=$(sm timer 30s --preparation off --device null --output "$t" 2>&1 >/dev/null); rc=$?
        if [ $rc != 0 ] && [ "$(nlines "$out")" = 1 ]; then echo "ok $t"; else echo "no $t(exit $rc, $(nlines "$out") lines)"; fi
    done
}
devs_ok() { [ "$(stat -c '%F %t,%T' "$1/full" "$1/null")" = "$(printf 'character special file 1,7\ncharacter special file 1,3')" ] \
                && [ "$(readlink "$1/stdout")" = /proc/self/fd/1 ]; }
results=$(refuse "$sticky/link.wav" "$sticky/dangling.wav" "$sticky/folder.wav")
export -f refuse sm nlines devs_ok
export BIN
if unshare -m --propagation private true 2>/dev/null; then
    where="/dev in a private namespace"
    results+=$'\n'$(unshare -m --propagation private bash -c '
        mount -t tmpfs -o mode=755 tmpfs /dev || { echo "no /dev(no tmpfs)"; exit; }
        mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/full c 1 7
        mknod -m 666 /dev/random c 1 8; mknod -m 666 /dev/urandom c 1 9; mkdir -m 1777 /dev/shm
        ln -s /proc/self/fd /dev/fd; ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout
        ln -s /proc/self/fd/2 /dev/stderr
        refuse /dev/full /dev/stdout /dev/null
        devs_ok /dev || echo "no /dev(replaced: $(stat -c "%n %F" /dev/full /dev/null /dev/stdout | tr "\n" " "))"' 2>&1)
else
    where="device nodes in our folder"
    dev=$work/output/dev; mkdir -p "$dev"
    if mknod -m 666 "$dev/full" c 1 7 2>/dev/null && mknod -m 666 "$dev/null" c 1 3; then
        ln -s /proc/self/fd/1 "$dev/stdout"
        results+=$'\n'$(refuse "$dev/full" "$dev/stdout" "$dev/null")
        devs_ok "$dev" || results+=$'\n'"no $dev(replaced)"
    else
        echo "skipped: --output onto devices (no private /dev and no mknod here)"
        where="devices skipped"
    fi
fi
refused=$(grep -c '^ok ' <<<"$results"); why=$(grep -v '^ok ' <<<"$results" | sed 's/^no //' | tr '\n' ' ')
tried=$(grep -v '^no /dev\|^no .*/dev(replaced)' <<<"$results" | grep -c .)
[ "$refused" = "$tried" ] && [ -z "$why" ] && [ "$(vsum)" = "$vbefore" ] && [ -L "$sticky/link.wav" ] \
    && [ ! -e "$sticky/nothing-here" ] && [ -d "$sticky/folder.wav" ]
check $? "--output onto a link, a dangling link, a folder, /dev/full, /dev/stdout, /dev/null ($where): $refused of $tried refused in one line${why:+ (not: $why)}"
# A failed render: a stored M4A with garbage over some AAC frames (the decoder fails
# midway), and one cut short. Nothing new is left; an older file is untouched.
out_dir=$work/output/o; mkdir -p "$out_dir"
bad_m4a() {   # import the fixture into a new store and damage the stored copy: frames | cut
    local id f off
    fresh "output-$1"
    id=$(sm import --json "$FIX/editlist.m4a" | python3 -c 'import json,sys;print(json.load(sys.stdin)[0]["id"])')
    f=$STILLMOMENT_HOME/Meditations/$id.m4a
    if [ "$1" = frames ]; then
        for off in 3000 6000 9000 12000 15000; do
            printf '\377\377\377\377\0\0\0\0\336\255\276\357' | dd of="$f" bs=1 seek=$off conv=notrunc 2>/dev/null
        done
    else
        truncate -s 9000 "$f"
    fi
    echo "$id"
}
for damage in frames cut; do
    rm -f "$out_dir"/*
    bad_m4a $damage >"$work/output/id"; id=$(cat "$work/output/id")    # (sets the store)
    out=$(sm play "$id" --output "$out_dir/x.wav" 2>&1); rc=$?
    echo "an older render" > "$out_dir/y.wav"; ysum=$(sha256sum < "$out_dir/y.wav")
    out2=$(sm play "$id" --output "$out_dir/y.wav" 2>&1); rc2=$?
    [ -n "$id" ] && [ $rc != 0 ] && [ "$(nlines "$out")" = 1 ] && [ ! -e "$out_dir/x.wav" ] && [ $rc2 != 0 ] \
        && [ "$(sha256sum < "$out_dir/y.wav")" = "$ysum" ] && [ "$(ls -A "$out_dir")" = y.wav ]
    check $? "a failed render (an M4A with damaged $damage, exit $rc: $(reason "$out")) leaves no x.wav and no .part ($(ls -A "$out_dir" | tr '\n' ' ')); an existing y.wav stays as it was"
done

# ---------------------------------------------------------------------------------------
# 5. Another user's runtime folder, socket or daemon: the client sends nothing there and
#    starts no daemon there. The fake daemons are run as nobody.
fake_py='import os, socket, sys, time
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path); s.listen(16); s.settimeout(0.3)
end = time.time() + 170
with open(log, "a", buffering=1) as f:
    while time.time() < end:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        f.write("connect\n")
        c.settimeout(1)
        try:
            c.sendall(b"{\"hello\":{\"version\":1,\"daemon\":\"stillmoment\",\"pid\":1}}\n")
            data = c.recv(65536)
            if data:
                f.write("received %d bytes: %r\n" % (len(data), data[:120]))
        except OSError:
            pass
        c.close()'
# fake FOLDER: a fake daemon run as nobody listening at FOLDER/control.sock; sets fake_pid
fake() {
    : > "$1.log"; chown nobody "$1.log"
    (cd / && exec setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "$fake_py" "$1/control.sock" "$1.log") \
        </dev/null >/dev/null 2>&1 &
    fake_pid=$!
    for _ in $(seq 100); do [ -S "$1/control.sock" ] && break; sleep 0.05; done
    [ -S "$1/control.sock" ] || check 1 "the fake daemon (run as nobody) did not listen at $1/control.sock"
}
# try FOLDER LABEL WANT: run status, a detached timer and stop against it; each must be
# refused in one line naming FOLDER, with nothing sent to the fake (nor a connection at
# all unless WANT is "peer"), no daemon.lock and no daemon of ours started there.
try() {
    local folder=$1 bad="" c out rc
    for c in "status" "timer 10m --preparation off --device null --detach" "stop"; do
        out=$(sm $c 2>&1); rc=$?
        if [ $rc = 0 ] || [ "$(nlines "$out")" != 1 ] || ! printf '%s' "$out" | grep -qF "$folder"; then
            bad="$bad [$c: exit $rc: $(first "$out")]"
        fi
    done
    grep -q received "$folder.log" && bad="$bad [received: $(grep -m1 received "$folder.log" | cut -c 1-100)]"
    [ "${3:-}" != peer ] && grep -q connect "$folder.log" && bad="$bad [connected to]"
    [ -e "$folder/daemon.lock" ] && bad="$bad [daemon.lock made]"
    [ -n "$(ours_daemons)" ] && bad="$bad [a daemon started: $(ours_daemons)]"
    for c in $(ours_daemons); do kill -9 "$c" 2>/dev/null; done
    if [ -z "$bad" ]; then check 0 "$2: refused, nothing sent ($(first "$out"))"; else check 1 "$2: not so:$bad"; fi
}
# daemons started with this case's store
ours_daemons() {
    local p
    for p in $(ours); do
        grep -qz '^daemon$' "/proc/$p/cmdline" 2>/dev/null && grep -qzx "STILLMOMENT_HOME=$STILLMOMENT_HOME" "/proc/$p/environ" && echo "$p"
    done
}
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ ! -x /usr/bin/python3 ]; then
    echo "skipped: another user's runtime folder (needs root, setpriv and /usr/bin/python3 to run a fake daemon as nobody)"
else
    fresh foreign-folder; chmod 711 "$XDG_RUNTIME_DIR"
    f=$XDG_RUNTIME_DIR/stillmoment; mkdir -m 700 "$f"; chown nobody:nogroup "$f"
    fake "$f"
    try "$f" "XDG_RUNTIME_DIR/stillmoment owned by nobody, a nobody daemon listening"
    stop_pid "$fake_pid"

    fresh open-folder; chmod 711 "$XDG_RUNTIME_DIR"
    f=$XDG_RUNTIME_DIR/stillmoment; mkdir "$f"; chmod 777 "$f"
    fake "$f"
    try "$f" "XDG_RUNTIME_DIR/stillmoment ours but mode 777, nobody's socket in it"
    stop_pid "$fake_pid"

    fresh foreign-peer; chmod 711 "$XDG_RUNTIME_DIR"
    f=$XDG_RUNTIME_DIR/stillmoment; mkdir -m 700 "$f"; chown nobody "$f"
    fake "$f"
    chown root:root "$f" "$f/control.sock"; chmod 700 "$f"      # all looks ours but the peer
    try "$f" "folder and socket ours, the daemon behind it nobody's (SO_PEERCRED)" peer
    stop_pid "$fake_pid"

    # /tmp/stillmoment-UID itself, in a private mount namespace (a tmpfs over /tmp there;
    # the host's /tmp is never touched): XDG_RUNTIME_DIR unset; then set to a folder of
    # our own, as the refusal advises: that must work, beside the foreign folder.
    fresh tmp-folder
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "skipped: /tmp/stillmoment-UID (no private mount namespace: unshare -m is not permitted)"
    else
        export -f try fake ours ours_daemons nlines first sm check stop_pid is_ours
        export work BIN fake_py
        nsout=$(unshare -m --propagation private bash -c '
            pass=0; fail=0
            cd "$work" || exit 1
            mount -t tmpfs -o mode=1777 tmpfs /tmp || { echo "skipped: /tmp/stillmoment-UID (no private /tmp: mount failed)"; exit 0; }
            mkdir -p "$work" && mount --no-canonicalize --bind . "$work" || exit 1   # our own folder again
            [ -e "/run/user/$(id -u)" ] && mount -t tmpfs tmpfs /run/user
            f=/tmp/stillmoment-$(id -u); mkdir -m 700 "$f"; chown nobody:nogroup "$f"
            fake "$f"
            own=$XDG_RUNTIME_DIR; unset XDG_RUNTIME_DIR
            try "$f" "/tmp/stillmoment-$(id -u) made by nobody first (XDG_RUNTIME_DIR unset)"
            export XDG_RUNTIME_DIR=$own
            out=$(sm timer 10m --preparation off --device null --detach 2>&1); rc=$?
            st=$(sm status 2>&1); rs=$?
            dpid=$(cat "$XDG_RUNTIME_DIR/stillmoment/daemon.lock" 2>/dev/null | tr -dc 0-9)
            sm stop >/dev/null 2>&1
            is_ours "$dpid" && kill -9 "$dpid"
            [ $rc = 0 ] && [ $rs = 0 ] && [ -n "$dpid" ] && ! grep -q received "$f.log"
            check $? "…with XDG_RUNTIME_DIR set to a folder of our own (as the refusal advises), a timer plays in our own daemon beside it (timer exit $rc: $(first "$out"); status exit $rs)"
            stop_pid "$fake_pid"
            echo "counts $pass $fail"
        ' 2>&1)
        printf '%s\n' "$nsout" | grep -v '^counts '
        c=$(printf '%s\n' "$nsout" | grep '^counts ' | tail -n 1)
        if [ -n "$c" ]; then set -- $c; pass=$((pass + $2)); fail=$((fail + $3))
        elif ! printf '%s' "$nsout" | grep -q '^skipped'; then check 1 "the mount-namespace case did not run: $(first "$nsout")"; fi
    fi
fi

# ---------------------------------------------------------------------------------------
# 6. A read-only and a full store: a tmpfs as STILLMOMENT_HOME's parent.
fresh disk
mnt=$work/disk/mnt; mkdir -p "$mnt"
if ! mount -t tmpfs -o size=64m tmpfs "$mnt" 2>/dev/null; then
    echo "skipped: a read-only and a full store (mount is not permitted here)"
else
    mounts+=("$mnt")
    export STILLMOMENT_HOME=$mnt/home
    sm import "$work"/tones/t{1,2,3}.mp3 >/dev/null 2>&1
    before=$(stored)
    mount -o remount,ro "$mnt"
    sm list >/dev/null 2>&1; r1=$?; sm list --json >/dev/null 2>&1; r2=$?
    sm show "Tone 1" >/dev/null 2>&1; r3=$?; sm library verify >/dev/null 2>&1; r4=$?
    sm library usage >/dev/null 2>&1; r5=$?
    out=$(sm import "$work/tones/t4.mp3" 2>&1); rc=$?
    [ $r1$r2$r3$r4$r5 = 00000 ] && [ $rc != 0 ] && [ "$(nlines "$out")" = 1 ] && [ "$(stored)" = "$before" ]
    check $? "read-only store: list, list --json, show, verify, usage exit $r1$r2$r3$r4$r5; import refused in one line (exit $rc)"
    printf '%s' "$out" | grep -qi "read-only"
    check $? "…and the import's error names the read-only file system (it ends: $(reason "$out"))"
    mount -o remount,rw "$mnt"
    # Nearly full: room for the catalog, not for the copy.
    avail=$(df -B1 --output=avail "$mnt" | tail -n 1)
    fallocate -l $((avail - 1500000)) "$mnt/fill" 2>/dev/null || dd if=/dev/zero of="$mnt/fill" bs=1M count=$((avail / 1048576 - 2)) 2>/dev/null
    out=$(sm import "$big" 2>&1 >/dev/null); rc=$?
    err=$(printf '%s\n' "$out" | grep -v 'warning: less than')
    strays=$(ls -A "$STILLMOMENT_HOME/Meditations" | grep -c '^\.')
    sm list >/dev/null 2>&1; r1=$?; sm library verify >/dev/null 2>&1; r4=$?
    [ $rc != 0 ] && [ "$(nlines "$err")" = 1 ] && printf '%s' "$err" | grep -qiE "full|space" && [ "$strays" = 0 ] \
        && [ $r1$r4 = 00 ] && [ "$(stored)" = "$before" ]
    check $? "nearly full store (1.5 MB free), a 3.8-MB import: refused in one line naming the full disk (exit $rc: $(first "$err")), nothing left, list/verify exit $r1$r4"
    # Full: not a byte free.
    dd if=/dev/zero of="$mnt/fill2" bs=64k 2>/dev/null
    sm list >/dev/null 2>&1; r1=$?; sm list --json >/dev/null 2>&1; r2=$?
    sm show "Tone 1" >/dev/null 2>&1; r3=$?; sm library verify >/dev/null 2>&1; r4=$?
    sm library usage >/dev/null 2>&1; r5=$?
    out=$(sm import "$work/tones/t4.mp3" 2>&1 >/dev/null); rc=$?
    err=$(printf '%s\n' "$out" | grep -v 'warning: less than')
    [ $r1$r2$r3$r4$r5 = 00000 ] && [ $rc != 0 ] && [ "$(nlines "$err")" = 1 ] && printf '%s' "$err" | grep -qiE "full|space" \
        && [ "$(stored)" = "$before" ]
    check $? "full store (df: $(df -B1 --output=avail "$mnt" | tail -n 1 | tr -d ' ') bytes free): list, list --json, show, verify, usage exit $r1$r2$r3$r4$r5; import refused in one line naming the full disk (exit $rc: …$(reason "$err"))"
    export STILLMOMENT_HOME=$work/disk/home
    umount "$mnt" && mounts=()
fi

echo "time: $((SECONDS - t_start)) s"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
