#!/usr/bin/env bash
# The Home Assistant of `make test-home`: homeassistant==2024.3.3 (the last release on
# Python 3.11, Debian 12's python3) from PyPI in .build/ha-venv, made once, with the
# versions it is known to run with pinned beside it (paho-mqtt 1.6.1 for its MQTT
# integration; janus and josepy, which later releases break it with).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/ha-venv
if [ ! -x "$venv/bin/hass" ] || ! "$venv/bin/python" -c "import homeassistant, paho.mqtt" 2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "homeassistant==2024.3.3" "paho-mqtt==1.6.1" "janus==1.0.0" "josepy==1.14.0"
fi
