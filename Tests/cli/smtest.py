"""The process-level tests' one helper module: the binary, a private home, the daemon's
processes (stopped by PID), the control protocol's client and the few predicates the
tests share. The fixtures that use it are in conftest.py.

Nothing here decides what passes: tests assert on exit codes, protocol error codes and
typed JSON fields; only the translation checks (test_german.py) read sentences.
"""
import array
import grp
import json
import math
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import time
import wave
from typing import NamedTuple

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.path.abspath(os.environ.get("BIN", os.path.join(ROOT, ".build", "debug", "stillmoment")))
FIX = os.path.join(ROOT, "Tests", "Fixtures")
SOUNDS = os.path.join(ROOT, "Sounds")
PROTOCOL_VERSION = 1

# Exit codes (`stillmoment --help`): 1 failure, 2 bad input, 3 the device cannot open.
FAILURE, BAD_INPUT, NO_DEVICE = 1, 2, 3


# ------------------------------------------------------------------ processes by PID

def alive(pid):
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_gone(pid, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.waitpid(pid, os.WNOHANG)       # reaps it when it is our child
        except ChildProcessError:
            pass
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def stop_pid(pid, timeout=5.0):
    """SIGTERM, then SIGKILL if it has not ended within `timeout`."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_gone(pid, wait):
            return


def kill_pid(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_gone(pid, 5)


def daemons_under(root):
    """PIDs of live `stillmoment daemon` processes whose XDG_RUNTIME_DIR lies under `root`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or not alive(int(name)):
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{name}/environ", "rb") as f:
                env = dict(item.decode(errors="replace").split("=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if not argv or not os.path.basename(argv[0]).startswith("stillmoment") or "daemon" not in argv[1:]:
            continue
        runtime = env.get("XDG_RUNTIME_DIR", "")
        if runtime == root or runtime.startswith(root.rstrip("/") + "/"):
            found.append(int(name))
    return sorted(found)


def cpu_seconds(pid):
    """User plus system CPU time of a process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return 0.0


def wait_for(fn, seconds, interval=0.05):
    """fn()'s first true value within `seconds`, else its last value."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    return fn()


# ------------------------------------------------------------------ results

class catalog_sql:
    """`with catalog_sql(path) as db:` a connection to a catalog that commits and is closed
    when the block ends. (Python 3.11's sqlite3 connection sits in a reference cycle: one
    not closed by hand is closed by the garbage collector at some later moment, and closing
    the last connection checkpoints its WAL into whatever file is then at that inode: a
    test that then writes garbage over the catalog saw its pages come back.)"""

    def __init__(self, path):
        self.db = sqlite3.connect(path)

    def __enter__(self):
        return self.db

    def __exit__(self, kind, value, tb):
        try:
            if kind is None:
                self.db.commit()
        finally:
            self.db.close()


class Result(NamedTuple):
    rc: int
    out: str
    err: str
    secs: float = 0.0

    @property
    def err_lines(self):
        return [line for line in self.err.splitlines() if line.strip()]

    def json(self):
        return json.loads(self.out)


def one_line_error(r, code=BAD_INPUT):
    """Refused as the user sees it: exit `code`, one line on stderr, no escape sequence."""
    return r.rc == code and len(r.err_lines) == 1 and "\x1b" not in r.err


# ------------------------------------------------------------------ a private home

class Home:
    """A private STILLMOMENT_HOME and XDG_RUNTIME_DIR under `path`, LANG=C.UTF-8, the
    bundled sounds. Every daemon seen in its runtime folder and every process it started
    is stopped by its PID in close()."""

    def __init__(self, path, idle_exit="60", **extra):
        self.dir = str(path)
        os.makedirs(self.dir + "/run", mode=0o700, exist_ok=True)
        self.home = self.dir + "/home"
        self.runtime = self.dir + "/run"
        self.env = dict(os.environ, STILLMOMENT_HOME=self.home, XDG_RUNTIME_DIR=self.runtime,
                        LANG="C.UTF-8", STILLMOMENT_IDLE_EXIT=str(idle_exit), STILLMOMENT_SOUNDS=SOUNDS, **extra)
        for k in ("LC_ALL", "LC_MESSAGES"):
            self.env.pop(k, None)
        self.pids = set()
        self.procs = []

    @property
    def folder(self):
        return self.runtime + "/stillmoment"

    @property
    def socket_path(self):
        return self.folder + "/control.sock"

    def run(self, *args, env=None, timeout=120, lang=None, prefix=()):
        """The binary with `args` in this home (or `env`; `prefix`: e.g. setpriv)."""
        e = env or self.env
        if lang:
            e = dict(e, LANG=lang)
        t0 = time.monotonic()
        p = subprocess.run([*prefix, BIN, *args], env=e, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        self.daemon_pid(e)
        return Result(p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"),
                      time.monotonic() - t0)

    def json(self, *args):
        """The parsed output of a `--json` command, None when it failed."""
        r = self.run(*args)
        try:
            return json.loads(r.out) if r.rc == 0 else None
        except ValueError:
            return None

    def history(self):
        return self.json("history", "--json")

    def status(self):
        """`status --json` ({} when it failed): `state`, `source`, `position` (ms), …"""
        return self.json("status", "--json") or {}

    def wait_idle(self, seconds):
        """The status once it is idle (or the last one after `seconds`)."""
        return wait_for(lambda: (lambda st: st if st.get("state") == "idle" else None)(self.status()), seconds, 0.2) \
            or self.status()

    def wait_seeked(self, seconds):
        """Until the status no longer says a seek is under way."""
        wait_for(lambda: not self.status().get("seeking"), seconds, 0.02)

    def spawn(self, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=None, prefix=()):
        """A process of the binary (`prefix`: e.g. `ip netns exec NS`), stopped by its PID in close()."""
        p = subprocess.Popen([*prefix, BIN, *args], env=env or self.env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        self.procs.append(p)
        return p

    def track(self, p):
        """Another process (a recorder, a player) to be stopped by its PID in close()."""
        self.procs.append(p)
        return p

    def daemon_pid(self, env=None):
        """The PID in the daemon's lock file (noted for close()), None when there is none."""
        folder = os.path.join(env["XDG_RUNTIME_DIR"], "stillmoment") if env and "XDG_RUNTIME_DIR" in env else self.folder
        try:
            with open(folder + "/daemon.lock") as f:
                pid = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        self.pids.add(pid)
        return pid

    def start_daemon(self, log=None, prefix=()):
        """`stillmoment daemon` started here (`prefix`: e.g. in a network namespace); returns
        its Popen once its socket answers."""
        out = open(log or self.dir + "/daemon.log", "ab")
        p = self.spawn("daemon", stdout=out, stderr=out, prefix=prefix)
        out.close()
        wait_for(lambda: self.daemon_pid() == p.pid and os.path.exists(self.socket_path), 10, 0.025)
        return p

    def client(self, name="pytest"):
        c = Client(self.socket_path, name)
        self.procs.append(c)      # closed in close() too
        return c

    def close(self):
        self.daemon_pid()
        for p in self.procs:
            if isinstance(p, Client):
                p.close()
            elif p.poll() is None:
                stop_pid(p.pid)
                p.wait()
            else:
                p.wait()
        for pid in self.pids | set(daemons_under(self.dir)):
            kill_pid(pid)
        for root, dirs, _ in os.walk(self.dir):      # a test may have opened or closed folders
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o700)
                except OSError:
                    pass


# ------------------------------------------------------------------ the control protocol

class Client:
    """Newline-delimited JSON over the daemon's Unix socket: a hello, then requests with
    ids; events (lines with "event") are kept in `events`, never taken for an answer."""

    def __init__(self, path, name="pytest", version=PROTOCOL_VERSION, timeout=5.0, hello=True):
        # With a timeout the socket is non-blocking: a full listen backlog answers EAGAIN at
        # once (a blocking client would wait), so it tries again until the timeout.
        end = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:
                self.sock.close()
                if time.monotonic() > end:
                    raise
                time.sleep(0.01)
        self.buf = b""
        self.n = 0
        self.events = []
        self.sent = None          # when the last request was sent (time.monotonic())
        self.greeting = None
        if hello:
            self.send({"hello": {"version": version, "client": name}})
            self.greeting = self.recv()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def send_lines(self, objs):
        """Several messages in one write: the daemon reads them together."""
        self.send_raw(b"".join(json.dumps(o).encode() + b"\n" for o in objs))

    def recv(self):
        """The next line, parsed; None when the daemon closed the connection."""
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def answer(self):
        """The next line that is not an event."""
        while True:
            m = self.recv()
            if m is None or "event" not in m:
                return m
            self.events.append(m)

    def request(self, command, args=None, rid=None):
        """Sends a request and returns the answer with its id (events kept aside)."""
        if rid is None:
            self.n += 1
            rid = self.n
        m = {"id": rid, "command": command}
        if args is not None:
            m["args"] = args
        self.sent = time.monotonic()
        self.send(m)
        while True:
            a = self.answer()
            if a is None or a.get("id") == rid:
                return a

    def closed_within(self, seconds):
        """Reads (and discards) until EOF or reset: (whether that came within `seconds`,
        the lines read)."""
        end = time.monotonic() + seconds
        count = self.buf.count(b"\n")
        self.buf = b""
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return True, count
            except socket.timeout:
                return False, count
            if not chunk:
                return True, count
            count += chunk.count(b"\n")
        return False, count

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def error_code(answer):
    """The protocol error code of an answer, None when it is not an error."""
    return ((answer or {}).get("error") or {}).get("code")


# ------------------------------------------------------------------ media

def tone(path, seconds=3, freq=440, title=None, artist=None):
    """An MP3 of a sine tone (sox, lame), tags as given: the test files' meditation."""
    wav = str(path) + ".wav"
    subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", str(seconds), "sine",
                    str(freq), "vol", "0.3"], check=True)
    tags = (["--tt", title] if title is not None else []) + (["--ta", artist] if artist is not None else [])
    subprocess.run(["lame", "--quiet", *tags, wav, str(path)], check=True)
    return str(path)


def steps_meditation(path, rate=44100):
    """A 60-s MP3 titled "Steps" whose tone is 200 + 10*s Hz during second s: the second
    heard can be read back from any stretch of a capture."""
    wav, mp3 = str(path) + ".wav", str(path)
    frames = array.array("h")
    phase = 0.0
    for s in range(60):
        step = 2 * math.pi * (200 + 10 * s) / rate
        for _ in range(rate):
            v = int(0.3 * 32767 * math.sin(phase))
            frames.append(v)
            frames.append(v)
            phase += step
    with wave.open(wav, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames.tobytes())
    subprocess.run(["lame", "--quiet", "-b", "192", "--tt", "Steps", wav, mp3], check=True)
    return mp3


# ------------------------------------------------------------------ PulseAudio

def pulse_missing():
    """Why the paced device cannot be had here: a tool that is not installed (a skip);
    None when all are (then a PulseAudio that does not start is a failure)."""
    need = [t for t in ("pulseaudio", "parec", "pactl") if not shutil.which(t)]
    return f"{', '.join(need)} not installed" if need else None


def start_pulse(work):
    """A private PulseAudio with a null sink `sm`; returns (Popen, env for its clients),
    or (Popen, None) when it did not answer within 5 s."""
    pa = str(work)
    os.makedirs(pa + "/run", mode=0o700, exist_ok=True)
    os.makedirs(pa + "/home", mode=0o700, exist_ok=True)
    sock = pa + "/pulse.sock"
    p = subprocess.Popen(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                          "-L", "module-null-sink sink_name=sm",
                          "-L", f"module-native-protocol-unix socket={sock} auth-anonymous=1"],
                         env=dict(os.environ, HOME=pa + "/home", XDG_RUNTIME_DIR=pa + "/run"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return p, {"PULSE_SERVER": f"unix:{sock}"}
        except OSError:
            time.sleep(0.05)
    return p, None


def _skip(why):
    import pytest
    pytest.skip(why)


def as_user(uid="nobody", gid="nogroup"):
    """The setpriv prefix to run as another user; skips when that cannot be."""
    if os.geteuid() != 0:
        _skip("not running as root")
    if not shutil.which("setpriv"):
        _skip("setpriv is missing")
    try:
        pwd.getpwnam("nobody")
        grp.getgrnam("nogroup")
    except KeyError:
        _skip("no user nobody or group nogroup")
    d = os.path.realpath(BIN)
    if not os.stat(d).st_mode & stat.S_IXOTH:
        _skip(f"{d} is not world-executable")
    while d != "/":
        d = os.path.dirname(d)
        if not os.stat(d).st_mode & stat.S_IXOTH:
            _skip(f"{d} is not world-executable")
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]


def report(name, value, unit, target, ok):
    """A benchmark line, as bench/lib.sh writes them: printed and kept in $BENCH_OUT/results.txt."""
    out = os.environ.get("BENCH_OUT", "bench-out")
    os.makedirs(out, exist_ok=True)
    line = f"{name}: {value} {unit} (target {target}) {'met' if ok else 'MISSED'}"
    print(line, flush=True)
    with open(os.path.join(out, "results.txt"), "a") as f:
        f.write(line + "\n")
