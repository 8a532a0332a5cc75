#!/bin/bash
# Runs in the rig's virtual machine (hw/init chroots into the host's / and starts this
# from the repository root with HW_OUT set): the guest side of the measures.
set -uo pipefail
echo "hw-guest: kernel $(uname -r), $(nproc) CPUs; cards: $(sed -n 's/^ *[0-9]* \[\([A-Za-z]*\) *\].*/\1/p' /proc/asound/cards | tr '\n' ' ')"
exec /usr/bin/python3 hw/inside.py "$HW_OUT"
