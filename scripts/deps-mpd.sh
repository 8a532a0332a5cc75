#!/usr/bin/env bash
# Installs MPD, a reference tool of `make bench`, without letting Debian start it as a
# system service (it would take the sound card): services are held back during the install
# (policy-rc.d) and, where systemd runs, its units are disabled afterwards. The benchmark
# starts a private instance of its own (bench/cpu.py, bench/daemon.py).
set -euo pipefail
dpkg-query -W -f='${Status}' mpd 2>/dev/null | grep -q "ok installed" && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
policy=/usr/sbin/policy-rc.d
echo "installing: mpd (a reference of the benchmarks; its system service is left disabled)"
if [ -e "$policy" ]; then
    # One of the machine's own (a container's holds every service back: exit 101).
    if ! grep -qx 'exit 101' "$policy"; then
        echo "deps-mpd: $policy exists and may let mpd start; install mpd yourself (apt install mpd) and disable its service" >&2
        exit 1
    fi
else
    trap '$sudo rm -f "$policy"' EXIT
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends mpd >/dev/null
if [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now mpd.service mpd.socket >/dev/null 2>&1 || true
fi
