#!/bin/bash
# A probe for the sound-card rig (HW_SCRIPT=hw/probe-seek-plughw.sh HW_QUICK=1 bash hw/rig.sh):
# plain seeks (no stall) on plughw:Loopback,0 with the card held at 48 kHz by a capture of
# its other end (as the rig's plughw run has it: the engine resamples the 44.1-kHz tone),
# three runs of 30 seeks (the tone lasts about that long at 1.2 s a seek), then 20 on
# hw:Loopback,0 at 44.1 kHz; status's xruns after each. Read the `hw-guest:` lines (the
# rig's analysis then finds no captures and says so).
set -uo pipefail
echo "hw-guest: seek probe: plain seeks on plughw at 48 kHz and on hw at 44.1 kHz"
arecord -q -D hw:Loopback,1,0 -f S16_LE -r 48000 -c 2 -t raw /dev/null &
rec=$!
sleep 1
for _ in 1 2 3; do
    SEEK_STALL_MS=0 SEEK_STALL_SEEKS=30 SEEK_STALL_DEVICE=plughw:Loopback,0 /usr/bin/python3 hw/seek_stall.py "$HW_OUT"
done
kill "$rec"; wait "$rec" 2>/dev/null
arecord -q -D hw:Loopback,1,0 -f S16_LE -r 44100 -c 2 -t raw /dev/null &
rec=$!
sleep 1
SEEK_STALL_MS=0 SEEK_STALL_SEEKS=20 SEEK_STALL_DEVICE=hw:Loopback,0 /usr/bin/python3 hw/seek_stall.py "$HW_OUT"
kill "$rec"; wait "$rec" 2>/dev/null
