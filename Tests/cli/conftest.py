"""Shared fixtures of the process-level tests (pytest): the binary, private homes, a
running daemon (Home.client() speaks to it) and a private PulseAudio null sink. Every process a
fixture starts is stopped by its PID in the fixture's finalizer; homes live under
pytest's temporary folders (short names: a socket path has 108 bytes)."""
import os
import shutil
import tempfile

import pytest

import smtest
from smtest import Home


@pytest.fixture(scope="session")
def binary():
    if not os.access(smtest.BIN, os.X_OK):
        pytest.exit(f"no binary at {smtest.BIN} (swift build first)", returncode=1)
    return smtest.BIN


@pytest.fixture(scope="session", autouse=True)
def _at_root():
    """Tests run from the repository root, as the scripts did (a stray relative path
    they write would show there)."""
    old = os.getcwd()
    os.chdir(smtest.ROOT)
    yield
    os.chdir(old)


@pytest.fixture
def new_home(binary, tmp_path_factory):
    """A factory of private homes (Home(...) keyword arguments: idle_exit, extra env);
    all are closed, their daemons and processes stopped by PID, when the test ends."""
    made = []

    def make(**kw):
        h = Home(tmp_path_factory.mktemp("sm"), **kw)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


@pytest.fixture
def home(new_home):
    return new_home()


@pytest.fixture
def open_home(binary):
    """A home another user can reach the folders of (pytest's own temporary folders are
    private to us): for the tests that run something as `nobody`. Removed at the end."""
    path = tempfile.mkdtemp(prefix="sm-open-")
    os.chmod(path, 0o711)
    h = Home(path)
    try:
        yield h
    finally:
        h.close()
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home):
    """`stillmoment daemon` running in `home` (its Popen); stopped with the home."""
    p = home.start_daemon()
    assert p.poll() is None and os.path.exists(home.socket_path), "the daemon did not start"
    return p


@pytest.fixture(scope="session")
def pulse(tmp_path_factory):
    """A private PulseAudio with a null sink `sm`: the environment its clients need
    (PULSE_SERVER). Skipped only when a tool is not installed; a PulseAudio that is
    installed but does not start fails the test."""
    why = smtest.pulse_missing()
    if why:
        pytest.skip(f"the paced device: {why}")
    p, env = smtest.start_pulse(tmp_path_factory.mktemp("pa"))
    try:
        if env is None:
            pytest.fail("the paced device: PulseAudio is installed but did not start within 5 s")
        yield env
    finally:
        smtest.stop_pid(p.pid)
        p.wait()


@pytest.fixture
def paced_home(new_home, pulse):
    """A home whose clients and daemon play to the private null sink."""
    return new_home(**pulse)



# ------------------------------------------------------------------ the web app and Chromium
# Selenium is in the web venv (scripts/webenv.sh); with another python the browser tests
# are not collected (`make test` runs them with the venv's python, and a run that collects
# nothing fails).
try:
    import selenium  # noqa: F401
except ImportError:
    collect_ignore = ["test_web.py"]


@pytest.fixture(scope="session")
def web(binary, pulse):
    """Tests/cli/webharness.py (shared with `make bench`) in its private home, the device
    setting `pulse` (the private null sink) and a daemon running there; every process it
    started (web apps, the daemon, chromedriver and its browser) is stopped by its PID at
    the end, and its folder removed."""
    import webharness as wh
    wh.ENV["PULSE_SERVER"] = pulse["PULSE_SERVER"]
    try:
        r = wh.sm("settings", "set", "device", "pulse")
        assert r.returncode == 0, r.stderr
        wh.start_daemon()
        yield wh
    finally:
        wh.cleanup()


@pytest.fixture
def browser(web):
    """A factory of headless Chromium sessions (webharness.browser's arguments); each is
    quit, and its chromedriver stopped by PID, when the test ends."""
    made = []

    def make(**kw):
        d = web.browser(**kw)
        made.append(d)
        return d
    yield make
    for d in made:
        pid = d.service.process.pid if d.service.process else None
        try:
            d.quit()
        finally:
            if pid:
                smtest.stop_pid(pid)
