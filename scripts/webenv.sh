#!/usr/bin/env bash
# The Python environment of the web app's browser tests and benchmark: Selenium and pytest
# from PyPI in .build/web-venv (made once; Chromium and its driver come from Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/web-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import selenium, pytest" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium==4.38.0" "pytest==8.3.5"
fi
