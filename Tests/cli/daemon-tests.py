#!/usr/bin/env python3
"""Integration tests of the stillmoment daemon and its control socket.

Run from the repository root: python3 Tests/cli/daemon-tests.py (BIN overrides the
binary, default .build/debug/stillmoment). Each check prints "ok: ..." or "FAILED: ...",
a case that cannot run prints "skipped: ... (why)"; the script ends with
"N passed, N failed, N skipped" and exits 1 if any check failed.

Every case runs in its own temporary folder with STILLMOMENT_HOME=<tmp>/home and
XDG_RUNTIME_DIR=<tmp>/run, and stops every process it started by its PID: the clients
it spawned, the daemons it started (the PID from daemon.lock or the hello answer, and
any `stillmoment daemon` whose XDG_RUNTIME_DIR lies in the case's folder).
Sessions play on ALSA's `null` device (100-300x faster than real time) except case 8,
which uses a private PulseAudio null sink (paced, real time) when `pulseaudio` exists.
"""
import atexit
import errno
import json
import os
import pwd
import grp
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/debug/stillmoment"))

passed = failed = skipped = 0


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)
    return bool(cond)


def skip(text, why):
    global skipped
    skipped += 1
    print(f"skipped: {text} ({why})", flush=True)


# ---------------------------------------------------------------- processes

# Every process this script started (Popen objects) and every daemon PID it learned.
all_procs = []
all_daemon_pids = set()
all_case_dirs = []


def pid_state(pid):
    """The process state letter from /proc (None if there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:][:1].decode()
    except (OSError, ValueError):
        return None


def alive(pid):
    s = pid_state(pid)
    return s is not None and s not in ("Z", "X")


def proc_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    env = {}
    for item in items:
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def proc_argv(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def is_our_daemon(pid, under=None):
    """A `stillmoment daemon` whose XDG_RUNTIME_DIR lies in one of our case folders."""
    argv = proc_argv(pid)
    if not argv or not os.path.basename(argv[0]).startswith("stillmoment") or "daemon" not in argv[1:]:
        return False
    runtime = proc_env(pid).get("XDG_RUNTIME_DIR", "")
    roots = [under] if under else all_case_dirs
    return any(runtime == r or runtime.startswith(r + "/") for r in roots)


def daemons_in(runtime_dir):
    """PIDs of live `stillmoment daemon` processes with exactly this XDG_RUNTIME_DIR."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if not alive(pid):
            continue
        argv = proc_argv(pid)
        if not argv or not os.path.basename(argv[0]).startswith("stillmoment") or "daemon" not in argv[1:]:
            continue
        if proc_env(pid).get("XDG_RUNTIME_DIR") == runtime_dir:
            found.append(pid)
    return sorted(found)


def wait_gone(pid, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def stop_pid(pid, term_wait=2.0):
    """SIGTERM, then SIGKILL: a PID we started (or a daemon of one of our folders)."""
    if not alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_gone(pid, term_wait):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        wait_gone(pid, 2)


def stop_popen(p):
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(2)
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                p.wait(2)
            except subprocess.TimeoutExpired:
                pass
        except ProcessLookupError:
            pass


@atexit.register
def stop_everything():
    for p in all_procs:
        stop_popen(p)
    for pid in list(all_daemon_pids):
        if is_our_daemon(pid):
            stop_pid(pid)
    for d in all_case_dirs:
        for name in os.listdir("/proc"):
            if name.isdigit() and is_our_daemon(int(name), d):
                stop_pid(int(name))
    for d in all_case_dirs:
        shutil.rmtree(d, ignore_errors=True)


def retry_exec(fn, *args, **kw):
    """Runs fn (subprocess.run or Popen), waiting out a rebuild of the binary (ETXTBSY
    while it is written, ENOENT while it is replaced) for up to 30 s."""
    end = time.monotonic() + 30
    while True:
        try:
            return fn(*args, **kw)
        except OSError as e:
            if e.errno not in (errno.ETXTBSY, errno.ENOENT) or time.monotonic() > end:
                raise
            time.sleep(0.2)


# ---------------------------------------------------------------- the raw protocol

class Conn:
    """One connection to the control socket: newline-delimited JSON."""

    def __init__(self, path, timeout=5.0):
        # With a timeout the socket is non-blocking: a full listen backlog answers EAGAIN
        # at once (a blocking client would wait), so try again until the timeout.
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
        self.events = []

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def recv(self, timeout=5.0):
        """The next message; None at EOF or reset; raises socket.timeout."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise socket.timeout("no message")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def hello(self, timeout=5.0):
        self.send({"hello": {"version": 2, "client": "daemon-tests"}})
        return self.recv(timeout)

    def request(self, rid, command, args=None, timeout=5.0):
        m = {"id": rid, "command": command}
        if args is not None:
            m["args"] = args
        self.send(m)
        end = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.01, end - time.monotonic()))
            if msg is None:
                return None
            if "event" in msg:
                self.events.append(msg)
                continue
            if msg.get("id") == rid or ("error" in msg and "id" not in msg):
                return msg

    def closed_within(self, timeout):
        """Reads (and discards) until EOF or reset; True if that came within timeout.
        Returns (closed, messages read)."""
        end = time.monotonic() + timeout
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


# ---------------------------------------------------------------- a case's world

class Result:
    def __init__(self, rc, out, err, secs):
        self.rc, self.out, self.err, self.secs = rc, out, err, secs

    @property
    def text(self):
        return (self.out + self.err).strip()

    def short(self):
        t = self.text.replace("\n", " | ")
        return t if len(t) <= 200 else t[:200] + "…"


class Case:
    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="sm-daemon-")
        all_case_dirs.append(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.run = self.make_runtime("run")
        self.env = self.make_env(self.run)
        self.procs = []
        self.n = 0

    def make_runtime(self, name):
        path = os.path.join(self.dir, name)
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)
        return path

    def make_env(self, runtime, home=None, **extra):
        env = dict(os.environ)
        for k in ("STILLMOMENT_IDLE_EXIT", "PULSE_SERVER", "STILLMOMENT_SOUNDS"):
            env.pop(k, None)
        env["STILLMOMENT_HOME"] = home or self.home
        env["XDG_RUNTIME_DIR"] = runtime
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def folder(self, env=None):
        return os.path.join((env or self.env)["XDG_RUNTIME_DIR"], "stillmoment")

    def sock_path(self, env=None):
        return os.path.join(self.folder(env), "control.sock")

    def sm(self, *args, env=None, timeout=20, prefix=()):
        t0 = time.monotonic()
        try:
            p = retry_exec(subprocess.run, list(prefix) + [BIN, *args], env=env or self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, err = -999, f"timed out after {timeout} s"
        res = Result(rc, out, err, time.monotonic() - t0)
        # Learn the daemon started by a client (kept for the cleanup).
        m = re.search(r"daemon pid (\d+)", out)
        if m:
            all_daemon_pids.add(int(m.group(1)))
        return res

    def spawn(self, *args, env=None, argv=None):
        """A background process, its output to files (never our stdout), stdin /dev/null."""
        self.n += 1
        out = open(os.path.join(self.dir, f"proc{self.n}.out"), "w")
        err = open(os.path.join(self.dir, f"proc{self.n}.err"), "w")
        p = retry_exec(subprocess.Popen, argv or [BIN, *args], env=env or self.env, stdin=subprocess.DEVNULL,
                       stdout=out, stderr=err)
        out.close()
        err.close()
        p.out_path, p.err_path = out.name, err.name
        self.procs.append(p)
        all_procs.append(p)
        return p

    @staticmethod
    def output(p):
        with open(p.out_path) as f:
            o = f.read()
        with open(p.err_path) as f:
            e = f.read()
        return o, e

    def lock_pid(self, env=None):
        try:
            with open(os.path.join(self.folder(env), "daemon.lock")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        all_daemon_pids.add(pid)
        return pid

    def status(self, env=None):
        r = self.sm("status", "--json", env=env)
        try:
            return json.loads(r.out)
        except ValueError:
            return {"_error": r.short(), "_rc": r.rc}

    def wait_status(self, pred, timeout, env=None, interval=0.05):
        end = time.monotonic() + timeout
        s = self.status(env)
        while not pred(s) and time.monotonic() < end:
            time.sleep(interval)
            s = self.status(env)
        return pred(s), s

    def conn(self, env=None, timeout=5.0):
        return Conn(self.sock_path(env), timeout)

    def hello_pid(self, env=None):
        c = self.conn(env)
        try:
            h = c.hello()
            pid = h["hello"]["pid"]
            all_daemon_pids.add(pid)
            return pid, h
        finally:
            c.close()

    def wait_socket(self, env=None, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                c = self.conn(env, timeout=1)
                c.close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def cleanup(self):
        for p in self.procs:
            stop_popen(p)
        for name in os.listdir("/proc"):
            if name.isdigit() and is_our_daemon(int(name), self.dir):
                stop_pid(int(name))
        for root, dirs, _ in os.walk(self.dir):
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o700)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.dir in all_case_dirs:
            all_case_dirs.remove(self.dir)


def run_case(title, fn, *args):
    print(f"# {title}", flush=True)
    case = Case(title)
    try:
        fn(case, *args)
    except Exception as e:  # a check that could not complete is a failure, with why
        import traceback
        tb = traceback.extract_tb(e.__traceback__)[-1]
        check(False, f"{title}: stopped by {type(e).__name__}: {e} (line {tb.lineno})")
    finally:
        case.cleanup()


def ms(v):
    return f"{v / 1000:.1f} s" if isinstance(v, (int, float)) else str(v)


# ---------------------------------------------------------------- the guided meditation

class Talk:
    """A long MP3 imported once into a template store, copied into each case that needs it.
    (8-kHz mono so that the debug build's import, which decodes it for its loudness,
    takes seconds, not a minute; 600 one-second chunks make ~11.5 minutes.)"""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sm-daemon-talk-")
        all_case_dirs.append(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.proc = None
        self.error = None
        one_wav, one_mp3 = os.path.join(self.dir, "one.wav"), os.path.join(self.dir, "one.mp3")
        self.mp3 = os.path.join(self.dir, "long.mp3")
        if not shutil.which("sox") or not shutil.which("lame"):
            self.error = "sox or lame is missing"
            return
        try:
            subprocess.run(["sox", "-n", "-r", "8000", "-c", "1", one_wav, "synth", "1", "sine", "440", "vol", "0.3"],
                           check=True, capture_output=True)
            subprocess.run(["lame", "--quiet", "-t", "-b", "8", one_wav, one_mp3], check=True, capture_output=True)
        except subprocess.CalledProcessError as e:
            self.error = f"cannot make the MP3: {e}"
            return
        with open(one_mp3, "rb") as f:
            chunk = f.read()
        with open(self.mp3, "wb") as f:
            f.write(chunk * 600)
        env = dict(os.environ, STILLMOMENT_HOME=self.home, XDG_RUNTIME_DIR=os.path.join(self.dir, "run"))
        os.mkdir(env["XDG_RUNTIME_DIR"], 0o700)
        self.log = open(os.path.join(self.dir, "import.log"), "w")
        self.proc = retry_exec(subprocess.Popen, [BIN, "import", self.mp3, "--teacher", "Test", "--name", "Long talk"],
                               env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        all_procs.append(self.proc)

    def ready(self):
        if self.error:
            return False
        if self.proc.poll() is None:
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.error = "the import took over 2 minutes"
                return False
        if self.proc.returncode != 0:
            with open(self.log.name) as f:
                self.error = f"the import failed: {f.read().strip()}"
            return False
        return True

    def install(self, case):
        shutil.copytree(self.home, case.home)


# ---------------------------------------------------------------- the cases

def case_start(c):
    r = c.sm("status")
    check(r.rc == 0 and "idle (no daemon running)" in r.out,
          f"start: status with no daemon says idle (exit {r.rc}: {r.short()})")
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    check(r.rc == 0 and r.secs < 5, f"start: timer 24h --detach started a daemon (exit {r.rc} in {r.secs:.2f} s: {r.short()})")
    pid = c.lock_pid()
    check(pid is not None and alive(pid) and is_our_daemon(pid, c.dir),
          f"start: the daemon pid {pid} from daemon.lock is alive")
    hp, hello = c.hello_pid()
    h = hello.get("hello", {})
    check(hp == pid and h.get("version") == 2 and h.get("daemon") == "stillmoment" and h.get("home") == c.home,
          f"start: the hello names the same pid and the store ({json.dumps(hello)})")
    fm = stat.S_IMODE(os.lstat(c.folder()).st_mode)
    st = os.lstat(c.sock_path())
    sm_ = stat.S_IMODE(st.st_mode)
    check(fm == 0o700 and stat.S_ISSOCK(st.st_mode) and sm_ == 0o600,
          f"start: the folder is {fm:04o} (0700) and the socket {sm_:04o} (0600)")
    stop_pid(pid)
    check(not alive(pid), f"start: the first daemon (pid {pid}) ended on SIGTERM")

    rounds, bad = 3, []
    for i in range(rounds):
        a = c.spawn("timer", "24h", "--device", "null", "--detach")
        b = c.spawn("timer", "24h", "--device", "null", "--detach")
        ra, rb = a.wait(10), b.wait(10)
        time.sleep(1)
        lp = c.lock_pid()
        ds = daemons_in(c.run)
        for pid_ in ds:
            all_daemon_pids.add(pid_)
        if ra != 0 or rb != 0 or ds != [lp]:
            oa, ob = c.output(a), c.output(b)
            bad.append(f"round {i + 1}: exits {ra},{rb}, lock pid {lp}, daemons {ds} ({oa} {ob})")
        for pid_ in ds:
            stop_pid(pid_)
        if lp:
            stop_pid(lp)
    check(not bad, f"start: two concurrent `timer --detach` leave exactly one daemon ({rounds} rounds{': ' + '; '.join(bad) if bad else ''})")

    # A daemon that cannot start (its catalog cannot be opened: here a folder in its place)
    # closes the client's readiness pipe: the client says why at once, not after 10 s.
    broken = os.path.join(c.dir, "broken-home")
    os.makedirs(os.path.join(broken, "library.sqlite"))
    env = c.make_env(c.make_runtime("run-broken"), home=broken)
    r = c.sm("timer", "24h", "--device", "null", "--detach", env=env)
    check(r.rc == 1 and r.secs < 3 and "the daemon did not start" in r.err and "catalog" in r.err,
          f"start: a daemon that cannot open its catalog is reported within {r.secs:.2f} s (under 3; exit {r.rc}: {r.short()})")
    check(daemons_in(env["XDG_RUNTIME_DIR"]) == [], "start: and no daemon is left of it")


def case_status(c):
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    check(r.rc == 0, f"status: timer started (exit {r.rc}: {r.short()})")
    ok, s = c.wait_status(lambda s: s.get("state") == "running", 5)
    need = {"source": str, "state": str, "paused": bool, "elapsed": int, "remaining": int, "session": int,
            "underruns": int, "duration": int}
    missing = [k for k, t in need.items() if not isinstance(s.get(k), t)]
    check(ok and not missing and s["source"] == "timer" and s["paused"] is False and s["duration"] == 86_400_000
          and abs(s["elapsed"] + s["remaining"] - s["duration"]) <= 1000,
          f"status: --json of a running timer has its fields (missing {missing}; {json.dumps(s)})")
    r = c.sm("pause")
    s1 = c.status()
    time.sleep(0.5)
    s2 = c.status()
    check(r.rc == 0 and s1.get("paused") is True and s1.get("elapsed") == s2.get("elapsed"),
          f"status: pause freezes elapsed over 0.5 s ({s1.get('elapsed')} -> {s2.get('elapsed')} ms, exit {r.rc})")
    r = c.sm("resume")
    time.sleep(0.3)
    s3 = c.status()
    check(r.rc == 0 and s3.get("paused") is False and (s3.get("elapsed") or 0) > (s2.get("elapsed") or 0),
          f"status: resume advances it ({s2.get('elapsed')} -> {s3.get('elapsed')} ms in 0.3 s, exit {r.rc})")
    t0 = time.monotonic()
    r = c.sm("stop")
    ok, s = c.wait_status(lambda s: s.get("state") == "idle", 2)
    dt = time.monotonic() - t0
    check(r.rc == 0 and ok and s.get("lastEnded", {}).get("reason") == "stopped",
          f"status: stop -> idle in {dt:.2f} s (exit {r.rc}, lastEnded {json.dumps(s.get('lastEnded'))})")


def case_seek(c, talk):
    talk.install(c)
    r = c.sm("play", "Long talk", "--device", "null", "--detach")
    p = c.sm("pause")
    s = c.status()
    check(r.rc == 0 and p.rc == 0 and s.get("source") == "guided" and s.get("paused") is True,
          f"seek: a guided meditation started and paused at {ms(s.get('position'))} (exits {r.rc},{p.rc}: {r.short()})")
    for arg, want in (("5:00", 300_000), ("-15s", 285_000), ("+15s", 300_000)):
        r = c.sm("seek", arg)
        s = c.status()
        pos = s.get("position")
        check(r.rc == 0 and isinstance(pos, int) and abs(pos - want) <= 1000,
              f"seek: `seek {arg}` -> position {pos} ms (want {want}±1000, exit {r.rc}: {r.short()})")
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    ok, s = c.wait_status(lambda s: s.get("source") == "timer", 3)
    r = c.sm("seek", "+15s")
    check(ok and r.rc == 2, f"seek: on a timer exits 2 (exit {r.rc}: {r.short()})")


def case_preempt(c, talk):
    talk.install(c)
    timer = c.spawn("timer", "24h", "--device", "null")
    ok, s = c.wait_status(lambda s: s.get("source") == "timer", 8)
    check(ok, f"preempt: an attached timer client started a session ({json.dumps(s)})")
    r = c.sm("play", "Long talk", "--device", "null", "--detach")
    p = c.sm("pause")
    t0 = time.monotonic()
    try:
        rc = timer.wait(3)
    except subprocess.TimeoutExpired:
        rc = None
    out, err = c.output(timer)
    last = out.strip().splitlines()[-1:] or [err.strip()]
    check(r.rc == 0 and rc == 0 and "took the sound" in out,
          f"preempt: `play --detach` ends the attached timer client (exit {rc} after {time.monotonic() - t0:.2f} s; last line: {last[0]!r})")
    s = c.status()
    pos0 = s.get("position")
    mid = (s.get("meditation") or {}).get("id")
    check(p.rc == 0 and s.get("source") == "guided" and s.get("paused") is True,
          f"preempt: the guided meditation paused at {ms(pos0)} (exit {p.rc})")
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    ok, s = c.wait_status(lambda s: s.get("source") == "timer", 3)
    sus = s.get("suspended") or {}
    check(r.rc == 0 and ok and sus.get("id") == mid and sus.get("name") == "Long talk"
          and isinstance(sus.get("position"), int) and isinstance(pos0, int) and abs(sus["position"] - pos0) <= 1000,
          f"preempt: a timer takes the sound from the guided one, which is suspended ({json.dumps(sus)}; paused at {pos0})")
    r = c.sm("stop")
    ok, s = c.wait_status(lambda s: s.get("state") == "idle", 3)
    check(r.rc == 0 and ok and (s.get("suspended") or {}).get("id") == mid,
          f"preempt: stop -> idle, the meditation still suspended ({json.dumps(s.get('suspended'))})")
    r = c.sm("resume")
    m = re.search(r"(\d+):(\d\d)(?::(\d\d))? /", r.out)
    at = None
    if m:
        g = [int(x) for x in m.groups() if x is not None]
        at = g[0] * 60 + g[1] if len(g) == 2 else g[0] * 3600 + g[1] * 60 + g[2]
    s = c.status()
    want = (sus.get("position") or 0) / 1000
    check(r.rc == 0 and at is not None and abs(at - want) <= 2 and s.get("source") == "guided"
          and (s.get("meditation") or {}).get("id") == mid,
          f"preempt: resume plays the guided meditation again from {at} s (suspended at {want:.1f} s±2; {r.short()}; now {s.get('source')})")


def case_survive(c):
    a = c.spawn("timer", "24h", "--device", "null")
    ok, s = c.wait_status(lambda s: s.get("state") == "running", 8)
    sid = s.get("session")
    check(ok, f"survive: an attached timer client started session {sid}")
    time.sleep(0.3)
    a.kill()
    a.wait(3)
    time.sleep(0.3)
    s1 = c.status()
    time.sleep(0.5)
    s2 = c.status()
    check(s1.get("session") == sid and s2.get("session") == sid and s2.get("state") == "running"
          and (s2.get("elapsed") or 0) > (s1.get("elapsed") or 0),
          f"survive: after its client's SIGKILL session {s2.get('session')} (was {sid}) plays on "
          f"(elapsed {s1.get('elapsed')} -> {s2.get('elapsed')} ms in 0.5 s)")
    b = c.spawn("attach")
    end = time.monotonic() + 5
    while time.monotonic() < end and not c.output(b)[0].strip():
        time.sleep(0.05)
    time.sleep(0.2)
    b.send_signal(signal.SIGHUP)
    try:
        rc = b.wait(3)
    except subprocess.TimeoutExpired:
        rc = None
    out, err = c.output(b)
    time.sleep(0.2)
    s1 = c.status()
    time.sleep(0.5)
    s2 = c.status()
    check(s1.get("session") == sid and s2.get("session") == sid and s2.get("state") == "running"
          and (s2.get("elapsed") or 0) > (s1.get("elapsed") or 0),
          f"survive: after an `attach` client's SIGHUP (exit {rc}: {out.strip().splitlines()[-1:] or err.strip()}) "
          f"session {s2.get('session')} plays on (elapsed {s1.get('elapsed')} -> {s2.get('elapsed')} ms)")


def case_sigterm(c):
    frun = c.make_runtime("run-fg")
    fenv = c.make_env(frun, STILLMOMENT_IDLE_EXIT=1)
    d = c.spawn("daemon", env=fenv)
    up = c.wait_socket(fenv)
    check(up, f"sigterm: a foreground `stillmoment daemon` listens (pid {d.pid})")
    time.sleep(3)
    check(d.poll() is None, f"sigterm: the foreground daemon with STILLMOMENT_IDLE_EXIT=1 is alive after 3 s idle (exit {d.poll()})")
    r = c.sm("timer", "24h", "--device", "null", "--detach", env=fenv)
    ok, s = c.wait_status(lambda s: s.get("state") == "running", 5, env=fenv)
    check(r.rc == 0 and ok and f"daemon pid {d.pid}" in r.out,
          f"sigterm: a timer plays in the foreground daemon ({r.short()})")
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    try:
        rc = d.wait(3)
    except subprocess.TimeoutExpired:
        rc = None
    dt = time.monotonic() - t0
    sock_left = os.path.lexists(c.sock_path(fenv))
    check(rc == 0 and not sock_left, f"sigterm: exit {rc} {dt:.2f} s after SIGTERM, socket {'left behind' if sock_left else 'removed'}")

    ienv = c.make_env(c.run, STILLMOMENT_IDLE_EXIT=2)
    r = c.sm("timer", "24h", "--device", "null", "--preparation", "off", "--detach", env=ienv)
    pid = c.lock_pid(ienv)
    ok, s = c.wait_status(lambda s: s.get("state") == "running", 5, env=ienv)
    r2 = c.sm("stop", env=ienv)
    ok2, s = c.wait_status(lambda s: s.get("state") == "idle", 3, env=ienv, interval=0.02)
    t0 = time.monotonic()
    gone = wait_gone(pid, 8) if pid else False
    dt = time.monotonic() - t0
    check(r.rc == 0 and ok and r2.rc == 0 and ok2 and gone and 1.5 <= dt <= 5.5,
          f"sigterm: an on-demand daemon (pid {pid}) with STILLMOMENT_IDLE_EXIT=2 exited {dt:.2f} s after its session ended "
          f"(want 2-5 s; gone {gone})")


def case_stale(c):
    d = c.spawn("daemon")
    check(c.wait_socket(), f"stale: a foreground daemon listens (pid {d.pid})")
    d.kill()
    d.wait(3)
    check(os.path.lexists(c.sock_path()), "stale: SIGKILL left control.sock behind")
    r = c.sm("status")
    check(r.rc == 0 and "idle (no daemon running)" in r.out, f"stale: status says idle (exit {r.rc}: {r.short()})")
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    pid = c.lock_pid()
    ok, s = c.wait_status(lambda s: s.get("source") == "timer", 5)
    try:
        with open(os.path.join(c.home, "daemon.log")) as f:
            log = f.read()
    except OSError as e:
        log = str(e)
    line = next((l for l in log.splitlines() if "stale socket" in l), "")
    check(r.rc == 0 and pid and pid != d.pid and alive(pid) and ok and line,
          f"stale: `timer --detach` started daemon {pid}, replaced the socket (log: {line.split('] ')[-1]!r}), status works ({s.get('source')})")


def case_cleared(c):
    """logind removes /run/user/UID at the last logout: the daemon listens again."""
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    pid = c.lock_pid()
    check(r.rc == 0 and pid and alive(pid), f"cleared: a timer plays (daemon {pid})")
    shutil.rmtree(c.folder())
    ok = False
    deadline = time.time() + 10
    while time.time() < deadline and not ok:
        time.sleep(0.25)
        s = c.status()
        ok = s.get("source") == "timer"
    check(ok and c.lock_pid() == pid,
          f"cleared: after the runtime folder was removed the same daemon ({c.lock_pid()}) answers again within 10 s")
    r = c.sm("stop")
    check(r.rc == 0, f"cleared: stop reaches it (exit {r.rc})")


def start_pulse(c):
    """A private PulseAudio with a null sink (as bench/paced.sh); returns (env extras, why not)."""
    if not shutil.which("pulseaudio"):
        return None, "pulseaudio is not installed"
    pa_run = c.make_runtime("pulse-run")
    pa_home = os.path.join(c.dir, "pulse-home")
    os.mkdir(pa_home, 0o700)
    sock = os.path.join(c.dir, "pulse.sock")
    env = dict(os.environ, HOME=pa_home, XDG_RUNTIME_DIR=pa_run)
    p = c.spawn(env=env, argv=["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                               "-L", "module-null-sink sink_name=sm",
                               "-L", f"module-native-protocol-unix socket={sock} auth-anonymous=1"])
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if p.poll() is not None:
            return None, f"pulseaudio exited {p.returncode}: {c.output(p)[1].strip().splitlines()[-1:]}"
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return {"PULSE_SERVER": f"unix:{sock}", "HOME": pa_home}, None
        except OSError:
            time.sleep(0.05)
    return None, "pulseaudio did not listen within 5 s"


def case_protocol(c, talk):
    talk.install(c)
    extra, why = start_pulse(c)
    device = "pulse" if extra else "null"
    if extra:
        c.env.update(extra)
    print(f"  (device: {device}{'' if extra else '; not paced: ' + why})", flush=True)

    r = c.sm("play", "Long talk", "--device", device, "--detach")
    if device == "null":
        c.sm("pause")   # 11 minutes play in seconds on null
    ok, s = c.wait_status(lambda s: s.get("source") == "guided", 5)
    check(r.rc == 0 and ok, f"protocol: a guided meditation plays on {device} ({r.short()})")
    # A client that never speaks, connected now: it is told off after ~5 s while the
    # checks below are served.
    silent = c.conn()
    silent_t0 = time.monotonic()

    def daemon_ok():
        t0 = time.monotonic()
        try:
            x = c.conn()
            h = x.hello()
            a = x.request(99, "status")
            x.close()
            good = bool(h and "hello" in h and a and "result" in a)
        except OSError as e:
            good, a = False, str(e)
        return good, time.monotonic() - t0

    def after(what):
        """After the fault `what`: does a fresh connection still get a status answer?"""
        good, dt = daemon_ok()
        return f"; the daemon then answers status on another connection: {'yes' if good else 'NO'} ({dt * 1000:.0f} ms)", good

    # Too long, then a valid request on the same connection.
    x = c.conn()
    x.hello()
    x.send_raw(b'{"id":1,"command":"status","pad":"' + b"x" * 70000 + b'"}\n')
    e = x.recv()
    a = x.request(2, "status")
    x.close()
    tail, good = after("too long")
    check(e and e.get("error", {}).get("code") == "message-too-long" and a and "result" in a and a.get("id") == 2 and good,
          f"protocol: a 70000-byte line -> {json.dumps(e)[:120]}; the next request on it is answered ({'yes' if a and 'result' in a else a}){tail}")

    x = c.conn()
    x.hello()
    x.send_raw(b'{"id":1,"command":\n')
    e = x.recv()
    x.close()
    tail, good = after("malformed")
    check(e and e.get("error", {}).get("code") == "malformed-json" and good,
          f"protocol: malformed JSON -> {json.dumps(e)}{tail}")

    x = c.conn()
    x.send({"id": 1, "command": "status"})
    e = x.recv()
    x.close()
    tail, good = after("before hello")
    check(e and e.get("error", {}).get("code") == "hello-expected" and good,
          f"protocol: a request before the hello -> {json.dumps(e)}{tail}")

    x = c.conn()
    x.send({"hello": {"version": 0}})
    e = x.recv()
    closed, _ = x.closed_within(2)
    x.close()
    tail, good = after("bad version")
    check(e and e.get("error", {}).get("code") == "unsupported-version" and closed and good,
          f"protocol: hello version 0 -> {json.dumps(e)}, connection {'closed' if closed else 'NOT closed'}{tail}")

    # The hello negotiates: a newer client is answered with the daemon's version 2, an
    # old one (version 1) with its own, and both are served.
    answers = []
    for v in (1, 3):
        x = c.conn()
        x.send({"hello": {"version": v}})
        h = x.recv()
        r = x.request(1, "status")
        x.close()
        answers.append(((h or {}).get("hello", {}).get("version"), "result" in (r or {})))
    check(answers == [(1, True), (2, True)],
          f"protocol: the hello negotiates (client 1 -> {answers[0]}, client 3 -> {answers[1]}; want version 1 and 2, both served)")

    # Version 2's arguments are typed: an unknown key is refused, naming it, and nothing starts.
    sid0 = c.status().get("session")
    refusals = []
    for rid, cmd, args, key in ((21, "timer", {"options": {"durration": "20m"}}, "durration"),
                                (22, "timer", {"duration": "20m"}, "duration"),
                                (23, "status", {"verbose": True}, "verbose"),
                                (24, "play", {"id": "Long talk", "form": 1000}, "form"),
                                (25, "seek", {"by": 1000, "too": 5}, "too")):
        x = c.conn()
        x.hello()
        e = x.request(rid, cmd, args)
        x.close()
        err = (e or {}).get("error", {})
        refusals.append(err.get("code") == "bad-arguments" and key in err.get("message", "") and e.get("id") == rid)
    s = c.status()
    tail, good = after("unknown keys")
    check(all(refusals) and s.get("session") == sid0 and good,
          f"protocol: unknown keys (options.durration, duration, status.verbose, play.form, seek.too) refused naming them: "
          f"{refusals}; session {s.get('session')} (was {sid0}) unchanged{tail}")

    x = c.conn()
    x.hello()
    e = x.request(7, "dance")
    x.close()
    tail, good = after("unknown")
    check(e and e.get("error", {}).get("code") == "unknown-command" and e.get("id") == 7 and good,
          f"protocol: an unknown command -> {json.dumps(e)[:140]}{tail}")

    sid = c.status().get("session")
    for rid, cmd, args, what in ((3, "seek", {"by": "x"}, "seek by \"x\" while a guided meditation plays"),
                                 (4, "timer", {"options": {"duration": "abc"}}, "timer with duration \"abc\""),
                                 (5, "play", {}, "play without an id")):
        x = c.conn()
        x.hello()
        e = x.request(rid, cmd, args)
        x.close()
        tail, good = after(what)
        s = c.status()
        check(e and e.get("error", {}).get("code") == "bad-arguments" and e.get("id") == rid and good
              and s.get("session") == sid and s.get("source") == "guided",
              f"protocol: {what} -> {json.dumps(e)[:140]}; session {s.get('session')} (was {sid}) unchanged{tail}")

    # Numbers out of any range: refused, never a crash (a trap would end the session).
    x = c.conn()
    x.send({"hello": {"version": 1e19}})
    e = x.recv()
    x.close()
    tail, good = after("huge version")
    check(e and e.get("error", {}).get("code") == "unsupported-version" and good,
          f"protocol: hello version 1e19 -> {json.dumps(e)[:120]}{tail}")
    for rid, cmd, args in ((11, "seek", {"by": 1e15}), (12, "seek", {"to": 1e300}),
                           (13, "play", {"id": "Long talk", "preparation": 1e15}),
                           (14, "play", {"id": "Long talk", "from": 9e18})):
        x = c.conn()
        x.hello()
        e = x.request(rid, cmd, args)
        x.close()
        tail, good = after(f"{cmd} {args}")
        s = c.status()
        check(e and e.get("error", {}).get("code") == "bad-arguments" and good and s.get("session") == sid,
              f"protocol: {cmd} {json.dumps(args)} -> {json.dumps(e)[:120]}; session {s.get('session')} (was {sid}) "
              f"plays on{tail}")

    # A client that reads nothing: subscribed, then thousands of requests unread.
    x = c.conn()
    x.hello()
    x.request(1, "subscribe")
    batch = b"".join(json.dumps({"id": 100 + i, "command": "status"}).encode() + b"\n" for i in range(3000))
    x.sock.settimeout(5)
    sent_all = True
    try:
        x.sock.sendall(batch)
    except (OSError, socket.timeout):
        sent_all = False
    time.sleep(0.3)
    good, dt = daemon_ok()
    closed, n = x.closed_within(10)
    x.close()
    check(closed and n < 3000 and good,
          f"protocol: a client that reads nothing (subscribed, 3000 status requests{'' if sent_all else ', not all sent'}) "
          f"is dropped: {'EOF/reset' if closed else 'NO EOF'} after {n} answers; another client was served meanwhile "
          f"({'yes' if good else 'NO'}, {dt * 1000:.0f} ms)")

    # 100 clients at once.
    conns, errors = [], []
    t0 = time.monotonic()
    try:
        for i in range(100):
            conns.append(c.conn())
        for x in conns:
            x.send({"hello": {"version": 1}})
            x.send({"id": 1, "command": "status"})
        got = 0
        for x in conns:
            h = x.recv()
            a = x.recv()
            if h and "hello" in h and a and a.get("id") == 1 and "result" in a:
                got += 1
            else:
                errors.append(f"{h} {a}")
    except (OSError, socket.timeout) as e:
        got = -1
        errors.append(str(e))
    for x in conns:
        x.close()
    check(got == 100, f"protocol: 100 clients at once all get their hello and a status answer ({got}/100 in "
                      f"{time.monotonic() - t0:.2f} s{'; ' + errors[0][:120] if errors else ''})")

    def crowd(n):
        """n clients connect and say hello at once: (hellos, busy answers)."""
        conns, busy, hellos = [], 0, 0
        try:
            for i in range(n):
                conns.append(c.conn())
            for x in conns:
                try:
                    x.send({"hello": {"version": 1}})
                except OSError:
                    pass
            for x in conns:
                try:
                    m = x.recv(3)
                except (OSError, socket.timeout):
                    m = None
                if m and m.get("error", {}).get("code") == "busy":
                    busy += 1
                elif m and "hello" in m:
                    hellos += 1
        finally:
            for x in conns:
                x.close()
        return hellos, busy

    # Right after those 100 hung up, 127 more (128 with the silent one: the limit). Not a
    # check, as it depends on timing: connections that hung up in the same poll round still
    # count against the limit until the loop reaps them, so some of these may be told busy.
    hellos, busy = crowd(127)
    if busy:
        print(f"  (note: 100 clients hung up and 127 connected right after: {hellos} got a hello, {busy} were "
              f"told busy although at most {hellos + 1} were connected)", flush=True)
    time.sleep(0.5)

    # More than 128: the extra ones are told the daemon is busy.
    hellos, busy = crowd(135)
    time.sleep(0.5)   # let the daemon reap those 135 (see the note above)
    tail, good = after("busy")
    check(120 <= hellos <= 127 and hellos + busy == 135 and good,
          f"protocol: 135 clients at once (plus the silent one): {hellos} get a hello, {busy} get busy{tail}")

    # The silent client: hello-expected after ~5 s, then closed; others were served meanwhile.
    try:
        e = silent.recv(max(0.1, silent_t0 + 8 - time.monotonic()))
    except socket.timeout:
        e = None
    t_err = time.monotonic() - silent_t0
    closed, _ = silent.closed_within(2)
    silent.close()
    check(e and e.get("error", {}).get("code") == "hello-expected" and 4.5 <= t_err <= 7.5 and closed,
          f"protocol: a silent client gets {json.dumps(e)[:100]} after {t_err:.1f} s and is {'closed' if closed else 'NOT closed'} "
          f"(the checks above were served meanwhile)")

    s = c.status()
    check(s.get("session") == sid and s.get("underruns") == 0 and s.get("source") == "guided",
          f"protocol: afterwards session {s.get('session')} (was {sid}) still plays on {s.get('device')} "
          f"({'paced PulseAudio null sink' if extra else 'ALSA null, not paced, paused'}) with underruns {s.get('underruns')} "
          f"at {ms(s.get('position'))}")

    # stop, and pause during its 1-s fade (a paced device is needed to be inside the fade).
    if not extra:
        skip("protocol: stop, then pause during the fade", "needs the paced PulseAudio device")
        return
    x = c.conn()
    x.hello()
    a1 = x.request(1, "stop")
    a2 = x.request(2, "pause")
    t0 = time.monotonic()
    ok1, s = c.wait_status(lambda s: s.get("state") == "idle", 2)
    t_idle = time.monotonic() - t0
    note = f"idle after {t_idle:.2f} s" if ok1 else f"still {s.get('source')} {'paused' if s.get('paused') else 'playing'} after 2 s"
    if not ok1:
        a3 = x.request(3, "resume")
        ok2, s = c.wait_status(lambda s: s.get("state") == "idle", 2.5)
        p1 = s.get("position")
        time.sleep(0.5)
        p2 = c.status().get("position")
        note += (f"; after `resume` {'idle' if ok2 else 'it plays on for 2.5 s more'}"
                 f"{'' if ok2 else f' (position {ms(p1)} -> {ms(p2)}, the stop forgotten)'}")
    x.close()
    check(ok1, f"protocol: `stop` then `pause` during its 1-s fade still ends the session within 2 s "
               f"(pause answered {'paused' if (a2 or {}).get('result', {}).get('paused') else json.dumps(a2)[:80]}; {note})")

    # Device names: `pulse` above is PulseAudio's native protocol; a sink that does not
    # exist is refused in one line (exit 3, a device error), and `alsa:pulse` still plays
    # through ALSA's pulse plugin.
    r = c.sm("timer", "1m", "--preparation", "off", "--device", "pulse:no-such-sink", "--detach")
    lines = (r.err or r.out).strip().splitlines()
    check(r.rc == 3 and len(lines) == 1 and "no sink named 'no-such-sink'" in lines[0],
          f"devices: pulse:no-such-sink is refused in one line, exit {r.rc}: {lines}")
    r = c.sm("timer", "1m", "--preparation", "off", "--device", "alsa:pulse", "--detach")
    ok, s = c.wait_status(lambda s: s.get("source") == "timer" and (s.get("elapsed") or 0) >= 1500, 6)
    c.sm("stop")
    check(r.rc == 0 and ok and s.get("device") == "alsa:pulse" and s.get("underruns") == 0,
          f"devices: alsa:pulse (ALSA's pulse plugin) plays a timer ({r.short()}; device {s.get('device')}, "
          f"elapsed {ms(s.get('elapsed'))}, underruns {s.get('underruns')})")


def case_foreign(c):
    if os.geteuid() != 0:
        skip("foreign user", "not running as root")
        return
    if not shutil.which("setpriv"):
        skip("foreign user", "setpriv is missing")
        return
    try:
        pwd.getpwnam("nobody")
        grp.getgrnam("nogroup")
    except KeyError:
        skip("foreign user", "no user nobody or group nogroup")
        return
    real = os.path.realpath(BIN)
    closed = []
    d = os.path.dirname(real)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            closed.append(d)
        if d == "/":
            break
        d = os.path.dirname(d)
    if closed or not os.stat(real).st_mode & stat.S_IXOTH:
        skip("foreign user", f"nobody cannot execute {real} ({', '.join(closed) or 'the file'} not world-executable)")
        return
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all"]
    r = c.sm("--help", prefix=as_nobody)
    if r.rc != 0:
        skip("foreign user", f"nobody cannot run the binary: exit {r.rc}: {r.short()}")
        return
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    ok, s = c.wait_status(lambda s: s.get("source") == "timer", 5)
    check(r.rc == 0 and ok, f"foreign: a timer plays for root ({r.short()})")
    r = c.sm("status", prefix=as_nobody)
    check(r.rc != 0 and "permission" in r.text.lower(),
          f"foreign: nobody cannot reach the private socket (exit {r.rc}: {r.short()})")
    opened = [c.dir, c.run, c.folder()]
    try:
        for p in opened:
            os.chmod(p, 0o711)
        os.chmod(c.sock_path(), 0o666)
        # The daemon's side, on the raw socket: the refusal, then the connection closed.
        probe = ("import socket,sys\n"
                 "s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1]); d=b''\n"
                 "try:\n"
                 "    while True:\n"
                 "        b=s.recv(65536)\n"
                 "        if not b: break\n"
                 "        d+=b\n"
                 "except ConnectionResetError: pass\n"
                 "print(d.decode().strip())\n")
        py = next(p for p in ("/usr/bin/python3", sys.executable) if os.access(p, os.X_OK))
        p = subprocess.run(as_nobody + [py, "-I", "-c", probe, c.sock_path()], env=c.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
        try:
            e = json.loads(p.stdout.strip().splitlines()[0])
        except (ValueError, IndexError):
            e = {"_raw": (p.stdout + p.stderr).strip()[:200]}
        check(p.returncode == 0 and e.get("error", {}).get("code") == "forbidden" and "serves only its own user" in e["error"].get("message", ""),
              f"foreign: with the folders 0711 and the socket 0666 the daemon answers nobody's connection with {json.dumps(e)} and closes it")
        # The client: it refuses root's folder itself before sending anything (the daemon's
        # own refusal above is the second wall).
        tries, results = 5, []
        for _ in range(tries):
            r = c.sm("status", prefix=as_nobody)
            results.append(r)
        good = [r for r in results if r.rc != 0 and ("belongs to another user" in r.text or "serves only its own user" in r.text)]
        others = sorted({f"exit {r.rc}: {r.short()}" for r in results if r not in good})
        check(len(good) == tries,
              f"foreign: nobody's `stillmoment status` is refused, by the client or the daemon ({len(good)}/{tries} said "
              f"'belongs to another user' or 'serves only its own user'{'; the others: ' + ' / '.join(others) if others else ''})")
        x = c.conn()
        h = x.hello()
        a = x.request(1, "status")
        x.close()
        check(h and "hello" in h and a and a.get("result", {}).get("source") == "timer",
              f"foreign: the daemon still serves root ({json.dumps(a)[:100]})")
    finally:
        for p in opened:
            os.chmod(p, 0o700)
        if os.path.lexists(c.sock_path()):
            os.chmod(c.sock_path(), 0o600)
    try:
        with open(os.path.join(c.home, "daemon.log")) as f:
            line = next((l for l in f if "refused a connection from uid" in l), "")
    except OSError:
        line = ""
    check("uid 65534" in line, f"foreign: the daemon logged the refusal ({line.strip().split('] ')[-1]!r})")


# ---------------------------------------------------------------- trust, fakes and crowds

# A fake daemon: listens at argv[1] for argv[2] seconds (on the socket inherited as fd
# FAKE_FD when set: bound by root, listening as whoever runs this), prints "ready",
# "connected" and "received <bytes>" to stdout. argv[3] says what it answers: "silent",
# "hello-error" (a refusal full of escape sequences) or "daemon" (a hello naming pid 1,
# then a result for every request).
FAKE_DAEMON = r'''
import json, os, socket, sys, time
path, secs, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
home = sys.argv[4] if len(sys.argv) > 4 else "/"
fd = int(os.environ.get("FAKE_FD", "-1"))
if fd >= 0:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
else:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
srv.listen(16)
print("ready uid %d pid %d" % (os.geteuid(), os.getpid()), flush=True)
srv.settimeout(0.05)
evil = "\u001b]0;owned\u0007\u001b[2J\u001b[31mred\u009b1mbold\r\nsecond line\ttab\u0085end"
end = time.monotonic() + secs
conns = {}
while time.monotonic() < end:
    try:
        k, _ = srv.accept()
        print("connected", flush=True)
        k.setblocking(False)
        conns[k] = b""
        if mode == "hello-error":
            try:
                k.sendall(json.dumps({"error": {"code": "busy\u001b[5m", "message": evil}}).encode() + b"\n")
            except OSError:
                pass
    except (socket.timeout, BlockingIOError):
        pass
    for k in list(conns):
        try:
            d = k.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            d = b""
        if not d:
            del conns[k]
            k.close()
            continue
        print("received " + repr(d), flush=True)
        conns[k] += d
        while mode == "daemon" and b"\n" in conns[k]:
            line, conns[k] = conns[k].split(b"\n", 1)
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if "hello" in m:
                a = {"hello": {"version": 1, "daemon": "stillmoment", "pid": 1, "home": home}}
            else:
                a = {"id": m.get("id"), "result": {"session": 7, "state": "running", "source": "timer"}}
            try:
                k.sendall(json.dumps(a).encode() + b"\n")
            except OSError:
                pass
for k in conns:
    k.close()
srv.close()
'''

CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def foreign_prefix(uid="nobody", gid="nogroup"):
    """(setpriv prefix, None) to run as another user, or (None, why not)."""
    if os.geteuid() != 0:
        return None, "not running as root"
    if not shutil.which("setpriv"):
        return None, "setpriv is missing"
    try:
        pwd.getpwnam("nobody")
        grp.getgrnam("nogroup")
    except KeyError:
        return None, "no user nobody or group nogroup"
    real = os.path.realpath(BIN)
    d = real
    while d != "/":
        d = os.path.dirname(d)
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return None, f"{d} is not world-executable"
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"], None


def python_bin():
    return next(p for p in ("/usr/bin/python3", sys.executable) if os.access(p, os.X_OK))


def start_fake(c, path, mode="silent", secs=60, prefix=(), fd=None, home="/"):
    """Starts FAKE_DAEMON (stopped by PID in the cleanup); waits for it to listen."""
    env = dict(c.env)
    pass_fds = ()
    if fd is not None:
        env["FAKE_FD"] = str(fd)
        pass_fds = (fd,)
    c.n += 1
    out = open(os.path.join(c.dir, f"fake{c.n}.out"), "w")
    p = subprocess.Popen(list(prefix) + [python_bin(), "-I", "-c", FAKE_DAEMON, path, str(secs), mode, home],
                         env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, pass_fds=pass_fds)
    out.close()
    p.out_path = out.name
    c.procs.append(p)
    all_procs.append(p)
    end = time.monotonic() + 10
    while time.monotonic() < end and p.poll() is None and "ready" not in fake_log(p):
        time.sleep(0.02)
    return p


def fake_log(p):
    try:
        with open(p.out_path) as f:
            return f.read()
    except OSError:
        return ""


def fake_heard(p):
    """What the fake received: (connections, the bytes it was sent as text)."""
    log = fake_log(p)
    return log.count("connected"), "".join(l[9:] for l in log.splitlines() if l.startswith("received "))


def one_clean_line(r):
    text = r.err.strip() or r.out.strip()
    return len(text.splitlines()) == 1 and not CONTROL.search(text)


def case_untrusted(c):
    prefix, why = foreign_prefix()
    if prefix is None:
        skip("untrusted runtime folders", why)
        return
    folder, sock = c.folder(), c.sock_path()
    # Others must be able to reach the runtime folder for a fake there to run as nobody.
    os.chmod(c.dir, 0o755)
    os.chmod(c.run, 0o755)

    def refused(what, needles, fake, connects=0):
        """Three commands against the fake: each refused in one line, nothing sent."""
        results = [c.sm("status"), c.sm("timer", "5m", "--device", "null", "--detach"), c.sm("stop")]
        bad = [f"exit {r.rc}: {r.short()}" for r in results
               if r.rc == 0 or not one_clean_line(r) or not all(n in r.text for n in needles)]
        time.sleep(0.2)
        conns, heard = fake_heard(fake)
        started = daemons_in(c.run)
        for pid in started:
            stop_pid(pid)
        ready = "ready" in fake_log(fake)     # a fake that never listened proves nothing
        check(ready and not bad and heard == "" and conns <= connects and not started,
              f"untrusted: {what}: status, timer and stop are refused in one line naming the folder and what to do "
              f"{'' if ready else '(THE FAKE NEVER LISTENED) '}"
              f"({results[0].short()[:160]}); the fake was connected to {conns} time(s) and sent {heard[:80]!r}"
              f"{'; a daemon was started: ' + str(started) if started else ''}{'; ' + ' / '.join(bad) if bad else ''}")

    # 1. The folder is nobody's and a fake daemon of nobody's listens in it.
    os.mkdir(folder, 0o700)
    os.chown(folder, 65534, 65534)
    fake = start_fake(c, sock, prefix=prefix)
    check("ready uid 65534" in fake_log(fake), f"untrusted: a fake daemon listens as nobody in a folder of nobody's ({fake_log(fake).strip()[:60]})")
    refused("the folder belongs to nobody", [folder, "belongs to another user (uid 65534)", "XDG_RUNTIME_DIR"], fake)
    stop_popen(fake)
    shutil.rmtree(folder, ignore_errors=True)

    # 2. The folder is ours but open to others (0755); the fake is ours too.
    os.mkdir(folder, 0o755)
    os.chmod(folder, 0o755)
    fake = start_fake(c, sock)
    refused("our folder open to others (0755)", [folder, "open to other users (mode 755)", "chmod 700"], fake)
    stop_popen(fake)
    shutil.rmtree(folder, ignore_errors=True)

    # 3. A private folder of ours, but the socket in it is nobody's (bound by root, given
    #    away, listened on by nobody).
    os.mkdir(folder, 0o700)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(sock)
        os.chown(sock, 65534, 65534)
        fake = start_fake(c, sock, prefix=prefix, fd=s.fileno())
    finally:
        s.close()
    refused("a socket of nobody's in our folder", [folder, "control.sock that is not ours"], fake)
    stop_popen(fake)
    shutil.rmtree(folder, ignore_errors=True)

    # 4. Folder and socket ours, but the process listening is nobody's: SO_PEERCRED says so.
    #    The client may connect, but sends nothing.
    os.mkdir(folder, 0o700)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(sock)
        fake = start_fake(c, sock, prefix=prefix, fd=s.fileno())
    finally:
        s.close()
    refused("our socket served by nobody's process", [sock, "another user's process (uid 65534", "XDG_RUNTIME_DIR"], fake,
            connects=3)
    stop_popen(fake)
    shutil.rmtree(folder, ignore_errors=True)

    # 5. /tmp/stillmoment-UID (no XDG_RUNTIME_DIR), made first by nobody, for a user (uid
    #    54321, no passwd entry needed) whose client must refuse it.
    uid = 54321
    tmp_folder = f"/tmp/stillmoment-{uid}"
    prefix_u, why = foreign_prefix(str(uid), str(uid))
    if os.path.lexists(tmp_folder) or os.path.lexists(f"/run/user/{uid}"):
        skip("untrusted: /tmp/stillmoment-UID", f"{tmp_folder} or /run/user/{uid} exists already")
        return
    if prefix_u is None:
        skip("untrusted: /tmp/stillmoment-UID", why)
        return
    home = os.path.join(c.dir, "home-u")
    own_run = os.path.join(c.dir, "run-u")
    for d in (home, own_run):
        os.mkdir(d, 0o700)
        os.chown(d, uid, uid)
    env = c.make_env(own_run, home=home)
    env.pop("XDG_RUNTIME_DIR")
    env["HOME"] = home
    try:
        os.mkdir(tmp_folder, 0o700)
        os.chown(tmp_folder, 65534, 65534)
        fake = start_fake(c, tmp_folder + "/control.sock", prefix=prefix)
        results = [c.sm("status", env=env, prefix=prefix_u),
                   c.sm("timer", "5m", "--device", "null", "--detach", env=env, prefix=prefix_u)]
        bad = [f"exit {r.rc}: {r.short()}" for r in results
               if r.rc == 0 or not one_clean_line(r) or tmp_folder not in r.text or "belongs to another user" not in r.text]
        time.sleep(0.2)
        conns, heard = fake_heard(fake)
        check("ready" in fake_log(fake) and not bad and conns == 0 and heard == "",
              f"untrusted: {tmp_folder} made first by nobody (its fake {'listening' if 'ready' in fake_log(fake) else 'NEVER LISTENED'}): uid {uid}'s status and timer are refused ({results[0].short()[:150]}); "
              f"the fake was connected to {conns} time(s){'; ' + ' / '.join(bad) if bad else ''}")
        # With a runtime folder of its own, the client still probes /tmp (a daemon started
        # from cron listens there): it tells why it did not talk there, and starts its own.
        env["XDG_RUNTIME_DIR"] = own_run
        r1 = c.sm("status", env=env, prefix=prefix_u)
        r2 = c.sm("timer", "5m", "--device", "null", "--detach", env=env, prefix=prefix_u)
        pid = c.lock_pid(env)
        r3 = c.sm("status", "--json", env=env, prefix=prefix_u)
        c.sm("stop", env=env, prefix=prefix_u)
        if pid:
            stop_pid(pid)
        time.sleep(0.2)
        conns, heard = fake_heard(fake)
        check(r1.rc != 0 and tmp_folder in r1.text and one_clean_line(r1) and r2.rc == 0 and '"timer"' in r3.out
              and conns == 0 and heard == "",
              f"untrusted: with XDG_RUNTIME_DIR set, the probe of {tmp_folder} is refused ({r1.short()[:100]}), and "
              f"`timer --detach` starts uid {uid}'s own daemon (exit {r2.rc}: {r2.short()[:100]}); the fake heard {conns} connection(s)")
        stop_popen(fake)
    finally:
        shutil.rmtree(tmp_folder, ignore_errors=True)


def case_fake_words(c):
    """A daemon of our own uid (a fake) that says hostile things: nothing of it reaches the
    terminal raw, and the pid the user is told is the kernel's, not the one it names."""
    os.mkdir(c.folder(), 0o700)
    fake = start_fake(c, c.sock_path(), mode="hello-error")
    r = c.sm("status")
    raw = r.out + r.err
    check(r.rc != 0 and one_clean_line(r) and "red" in raw and "second line" in raw and "end" in raw,
          f"fake: a refusal full of escape sequences and line breaks is printed on one line without them "
          f"(exit {r.rc}: {r.short()!r})")
    stop_popen(fake)
    os.unlink(c.sock_path())
    fake = start_fake(c, c.sock_path(), mode="daemon", home=c.home)
    r = c.sm("timer", "5m", "--device", "null", "--detach")
    m = re.search(r"daemon pid (\d+)", r.out)
    check(r.rc == 0 and m and int(m.group(1)) == fake.pid,
          f"fake: a daemon that names pid 1 is reported by its real pid {fake.pid} (exit {r.rc}: {r.short()[:140]})")
    all_daemon_pids.discard(fake.pid)
    stop_popen(fake)


def case_crowd(c):
    """Idle clients cannot lock others out; deep JSON is refused at once, wide JSON read."""
    r = c.sm("timer", "24h", "--device", "null", "--detach")
    ok, _ = c.wait_status(lambda s: s.get("source") == "timer", 5)
    check(r.rc == 0 and ok, f"crowd: a timer plays ({r.short()})")
    pid = c.lock_pid()

    # Deep and wide lines over the socket.
    x = c.conn()
    x.hello()
    attack = ",".join(["[1," * 510 + "1" + "]" * 510] * 31)
    t0 = time.monotonic()
    x.send_raw(('{"id":1,"command":"status","args":{"x":[' + attack + ']}}\n').encode())
    e = x.recv(5)
    took = time.monotonic() - t0
    err = (e or {}).get("error", {})
    check(err.get("code") == "bad-request" and "32" in err.get("message", "") and "\n" not in err.get("message", "") and took < 1,
          f"crowd: a 63-KB line nested 510 deep is refused in {took * 1000:.0f} ms with {json.dumps(e)[:120]}")
    # 32 deep in all is within the limit (the reply is whatever status says of an unknown
    # argument), 33 is not.
    answers = []
    for rid, depth in ((2, 30), (3, 31)):
        x.send_raw(('{"id":%d,"command":"status","args":{"x":%s1%s}}\n' % (rid, "[" * depth, "]" * depth)).encode())
        answers.append(x.recv(5) or {})
    wide = '{"id":4,"command":"status","args":{"x":[' + ",".join(["1"] * 30000) + ']}}\n'
    t0 = time.monotonic()
    x.send_raw(wide.encode())
    w = x.recv(5) or {}
    took_wide = time.monotonic() - t0
    a = x.request(5, "status")
    x.close()
    deep_ok = "nest" not in json.dumps(answers[0]) and answers[0].get("id") == 2
    deep_refused = answers[1].get("error", {}).get("code") == "bad-request" and "32" in answers[1]["error"].get("message", "")
    check(deep_ok and deep_refused and w.get("id") == 4 and "nest" not in json.dumps(w) and took_wide < 1 and a and "result" in a,
          f"crowd: 32 deep is read ({json.dumps(answers[0])[:80]}), 33 refused ({json.dumps(answers[1])[:80]}), "
          f"a 60-KB line of 30000 values answered in {took_wide * 1000:.0f} ms, and the connection serves on")

    # A live view (subscribed), then 127 clients that say hello and idle: the daemon is full.
    view = c.conn()
    view.hello()
    sub = view.request(1, "subscribe", {"progress": False})
    idle, t_full = [], time.monotonic()
    try:
        for i in range(127):
            k = c.conn()
            idle.append(k)
            k.send({"hello": {"version": 1, "client": f"idle-{i}"}})
            # Keep their hellos answered (a full backlog would hold the next connect).
            k.recv(5)
        r0 = c.sm("status")
        check(sub and "result" in sub and len(idle) == 127 and r0.rc != 0 and "too many clients" in r0.text,
              f"crowd: a live view and 127 idle clients fill the daemon; a new client is refused at first ({r0.short()[:90]})")
        time.sleep(max(0.0, t_full + 10.5 - time.monotonic()))
        # A client that comes now makes room: the client idle longest without a
        # subscription is closed, told why. It leaves, so of two more that stay, the first
        # takes its place and only the second makes room, by closing the next idlest.
        r1 = c.sm("status")
        extra = []
        for i in range(2):
            k = c.conn()
            idle.append(k)
            extra.append(k.hello())
        told = []
        for k in idle[:2]:
            try:
                m = k.recv(2)
            except (OSError, socket.timeout):
                m = None
            told.append(m)
        closed = [k.closed_within(2)[0] for k in idle[:2]] + [idle[2].closed_within(0.3)[0]]
        view_closed, _ = view.closed_within(0.3)
        view_alive = view.request(2, "status") if not view_closed else None
        check(r1.rc == 0 and "timer" in r1.out and all(h and "hello" in h for h in extra) and closed == [True, True, False]
              and all(m and m.get("error", {}).get("code") == "busy" for m in told)
              and not view_closed and view_alive and "result" in view_alive,
              f"crowd: 10 s later a new client is served ({r1.short()[:60]}) by closing the client idle longest, and two more "
              f"that stay close one more ({json.dumps(told[0])[:90]}; the 3 idlest closed: {closed}, want [True, True, False]); "
              f"the live view, idle longer, is kept "
              f"({'closed!' if view_closed else 'open'})")
    finally:
        for k in idle:
            k.close()
        view.close()
    if pid:
        stop_pid(pid)


def main():
    t_start = time.monotonic()
    # SIGTERM/SIGHUP end the script through the atexit cleanup like Ctrl-C does.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, f: sys.exit(128 + n))
    if not os.access(BIN, os.X_OK):
        print(f"FAILED: no binary at {BIN}")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    talk = Talk()   # imports in the background while the first cases run
    run_case("1 start on demand", case_start)
    run_case("2 status, pause, resume, stop", case_status)
    for title, fn in (("3 seek", case_seek), ("4 preemption both ways", case_preempt)):
        if talk.ready():
            run_case(title, fn, talk)
        else:
            print(f"# {title}")
            skip(title, talk.error)
    run_case("5 the session survives its client", case_survive)
    run_case("6 SIGTERM and idle exit", case_sigterm)
    run_case("7 stale socket", case_stale)
    run_case("7b runtime folder cleared", case_cleared)
    if talk.ready():
        run_case("8 protocol faults", case_protocol, talk)
    else:
        print("# 8 protocol faults")
        skip("protocol faults", talk.error)
    run_case("9 foreign user", case_foreign)
    run_case("10 untrusted runtime folders", case_untrusted)
    run_case("11 a fake daemon's words and pid", case_fake_words)
    run_case("12 idle clients, deep and wide JSON", case_crowd)
    print(f"{passed} passed, {failed} failed, {skipped} skipped ({time.monotonic() - t_start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
