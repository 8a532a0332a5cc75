#!/bin/bash
# Runs in the rig's virtual machine (hw/init chroots into the host's / and starts this
# from the repository root with HW_OUT set): the guest side of the measures, then the
# button's (a uinput device pressing a key for the daemon).
set -uo pipefail
echo "hw-guest: kernel $(uname -r), $(nproc) CPUs; cards: $(sed -n 's/^ *[0-9]* \[\([A-Za-z]*\) *\].*/\1/p' /proc/asound/cards | tr '\n' ' ')"
/usr/bin/python3 hw/inside.py "$HW_OUT"
rc=$?
# A button on the kernel's evdev path (uinput): hw/button.py.
/usr/bin/python3 hw/button.py "$HW_OUT" || rc=1
# Seeks with the daemon stalled right after each (hw only): hw/seek_stall.py.
if grep -q '^DEVICES=.*\bhw\b' "$HW_OUT/config"; then
    /usr/bin/python3 hw/seek_stall.py "$HW_OUT" || rc=1
fi
# Plain seeks through plughw with the card at 48 kHz (held there by a capture of its other
# end, as in the plughw run): 1 in 20 counted an xrun before the take-back's margin counted
# from the card's reckoned position (hw/seek_stall.py, SEEK_STALL_MS=0).
if grep -q '^DEVICES=.*\bplughw\b' "$HW_OUT/config"; then
    arecord -q -D hw:Loopback,1,0 -f S16_LE -r 48000 -c 2 -t raw /dev/null &
    rec=$!
    sleep 1
    SEEK_STALL_MS=0 SEEK_STALL_SEEKS=30 SEEK_STALL_DEVICE=plughw:Loopback,0 SEEK_STALL_JSON=seek-plain-plughw.json \
        /usr/bin/python3 hw/seek_stall.py "$HW_OUT" || rc=1
    kill "$rec"; wait "$rec" 2>/dev/null
fi
exit $rc
