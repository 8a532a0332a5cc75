#!/bin/bash
# A probe for the sound-card rig (HW_SCRIPT=hw/probe-seek.sh bash hw/rig.sh, HW_QUICK=1):
# hw/seek_stall.py's seeks with a stall of the daemon at each answer, beside the same stall
# after a status (plain playing, the comparison), at 60 ms (the rig's check) and at 85 ms
# (near the card's 100-ms buffer, where a shallow refill shows). Read the `hw-guest:` lines
# (the rig's analysis then finds no captures and says so).
set -uo pipefail
echo "hw-guest: seek-stall probe: seeks and plain playing, 60 and 85 ms stalls"
for ms in 60 85; do
    for control in 0 1; do
        [ "$control" = 1 ] && echo "hw-guest: plain playing (no seek), $ms ms:" || echo "hw-guest: seeks, $ms ms:"
        SEEK_STALL_MS=$ms SEEK_STALL_CONTROL=$control /usr/bin/python3 hw/seek_stall.py "$HW_OUT"
    done
done
