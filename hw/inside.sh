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
exit $rc
