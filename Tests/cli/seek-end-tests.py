#!/usr/bin/env python3
"""Issue 11: a seek back in the last second of a guided meditation, while its end drains.

Before the fix the session froze where the seek put it, with the real-time output thread
spinning, until `stop`. Here the real binary plays a 60-s meditation on a real daemon on
ALSA's `null` device, on the `file:` device (whose capture is checked) and on a paced
device (a private PulseAudio null sink, whose monitor is recorded), seeks to 0:59 and then
back by 15 s at several moments of the last second (`seek 0:59; sleep 1.1; seek -- -15s`
is the issue's own sequence), and checks that
  - the seek is taken (or, when it came after the end, refused as "nothing is playing"),
  - the meditation plays on from about 0:44, what is heard is the file from there on,
  - the daemon uses little CPU meanwhile (no thread spins),
  - the meditation then ends by itself, logged as completed, having played to the end.

The meditation's tone steps by 10 Hz each second (200 Hz at 0:00, 790 Hz at 0:59), so
the second heard is read back from any stretch of the captured audio.

Run from the repository root: python3 Tests/cli/seek-end-tests.py (BIN overrides the
binary, default .build/debug/stillmoment; KEEP=1 keeps the captures). Prints one ok:/FAILED:/skipped: line per
check and "N passed, N failed"; exits 1 when a check failed. Every process it starts
(PulseAudio, parec, the daemons) is stopped by its PID.
"""
import array
import json
import math
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import wave

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/debug/stillmoment"))
RATE = 44100
passed = failed = 0
procs = []          # Popen objects: PulseAudio, parec, the daemons


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)
    return bool(cond)


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def stop_pid(pid, timeout=5.0):
    """SIGTERM, then SIGKILL if it has not ended within `timeout`."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.time() + wait
        while time.time() < end and alive(pid):
            time.sleep(0.05)
        if not alive(pid):
            return


# ------------------------------------------------------------------ the meditation

def make_meditation(work):
    """A 60-s MP3 whose tone is 200 + 10*s Hz during second s."""
    wav, mp3 = work + "/steps.wav", work + "/steps.mp3"
    frames = array.array("h")
    phase = 0.0
    for s in range(60):
        step = 2 * math.pi * (200 + 10 * s) / RATE
        for _ in range(RATE):
            v = int(0.3 * 32767 * math.sin(phase))
            frames.append(v)
            frames.append(v)
            phase += step
    with wave.open(wav, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames.tobytes())
    subprocess.run(["lame", "--quiet", "-b", "192", "--tt", "Steps", wav, mp3], check=True)
    return mp3


def left_channel(path):
    """The left channel of a float32 stereo capture."""
    data = array.array("f")
    with open(path, "rb") as f:
        raw = f.read()
    data.frombytes(raw[: len(raw) // 8 * 8])
    return data[0::2]


def audio_runs(left):
    """The capture as runs of continuous playback: [(first second, last second, length
    in s)], from the tone's frequency in 0.2-s windows. Within a run the second heard
    advances with the capture's time; a seek starts a new run (a window across a seek
    is a run of one and left out).

    Each window is compared with the one before it: the tone steps once a second, so in
    continuous playback the heard second less the capture's time moves from window to
    window by -0.2 (within a second) to +0.8 (at a step), a window across a step reading
    in between (and a zero crossing miscounted adds 0.25). A seek here moves it by 14 s or
    more, and a window across the seek reads anywhere between: outside -0.5..1.1 it
    starts a new run. (Comparing with a run's first window, as before, let a first window
    across the seek and a second's drift add up to the tolerance, and a continuous capture
    was split in two: a false failure seen in CI.)

    A window that is partly silent (the gap of a seek: ramp out, flush, refill) reads no
    frequency: its crossings are those of part of a tone. Two such windows in a row read
    alike and made a run of their own (a 0.4-s "0:29" between 0:46 and 0:58: a 120-ms gap
    across two windows, a false failure seen in CI twice). The tone keeps under 4 % of a
    window's samples below 0.01; a window with more than 10 % is left out."""
    win = RATE // 5
    runs = []
    for i in range(0, len(left) - win + 1, win):
        w = left[i:i + win]
        if max(abs(min(w)), abs(max(w))) < 0.02:
            continue
        if sum(1 for x in w if abs(x) < 0.01) > win // 10:
            continue
        crossings = sum(1 for a, b in zip(w, w[1:]) if (a < 0) != (b < 0))
        t, s = i / RATE, (crossings * 2.5 - 200) / 10
        if runs and t - runs[-1][1] <= 0.45 and -0.5 <= (s - t) - runs[-1][2] <= 1.1:
            first, _, _, _, n = runs[-1]
            runs[-1] = (first, t, s - t, s, n + 1)
        else:
            runs.append((s, t, s - t, s, 1))
    return [(round(first), round(last), round(n * 0.2, 1)) for first, _, _, last, n in runs if n >= 2]


def last_second(left):
    """Seconds of audio from where the tone turns to the last second's (780 to 790 Hz)
    to the last audible sample: 1.0 when the end was played whole."""
    end = max((i for i in range(len(left) - 1, max(0, len(left) - 10 * RATE), -1) if abs(left[i]) > 0.01),
              default=None)
    if end is None:
        return None
    start = max(1, end - 2 * RATE)
    ups = [i - 1 + left[i - 1] / (left[i - 1] - left[i]) for i in range(start, end)
           if left[i - 1] < 0 <= left[i]]
    periods = [(b - a, b) for a, b in zip(ups, ups[1:])]
    # 780 Hz: 56.5 samples; 790 Hz: 55.8. The last stretch of 780-Hz periods ends the 0:58.
    slow = [at for p, at in periods if p > 56.18]
    return None if not slow else (end - slow[-1]) / RATE


def played_to_end(run, start=None):
    """A run that starts at `start` (the second, within 1) and plays on to the file's end."""
    first, last, length = run
    return ((start is None or abs(first - start) <= 1) and last == 59
            and 60 - first - 1.6 <= length <= 60 - first + 0.3)


# ------------------------------------------------------------------ daemon and devices

class Case:
    def __init__(self, work, label, device, extra_env=None):
        self.dir = f"{work}/{label}"
        self.label = label
        self.device = device
        os.makedirs(self.dir + "/run", mode=0o700)
        self.env = dict(os.environ, STILLMOMENT_HOME=self.dir + "/home", XDG_RUNTIME_DIR=self.dir + "/run",
                        LANG="C.UTF-8", STILLMOMENT_IDLE_EXIT="120", STILLMOMENT_SOUNDS=ROOT + "/Sounds",
                        # ALSA's file: capture, which the device guard refuses to every request
                        # unless the daemon was started with this switch.
                        STILLMOMENT_TEST_DEVICES="file", **(extra_env or {}))
        self.pid = None

    def sm(self, *args, timeout=60):
        r = subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    def start_daemon(self):
        """Starts a daemon (as `play` would on demand) and returns its PID."""
        p = subprocess.Popen([BIN, "daemon"], env=self.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=open(self.dir + "/daemon.err", "wb"))
        procs.append(p)
        for _ in range(200):
            if os.path.exists(self.dir + "/run/stillmoment/control.sock"):
                break
            time.sleep(0.05)
        self.pid = p.pid
        return p.pid

    def wait_seeked(self, limit):
        """Waits until the daemon's status no longer says a seek is under way."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            rc, out, _ = self.sm("status", "--json")
            if rc != 0 or '"seeking":true' not in out.replace(" ", ""):
                return
            time.sleep(0.02)

    def log_rows(self):
        """Every ended sit in the practice log, by id."""
        rc, out, _ = self.sm("history", "--json")
        rows = json.loads(out) if rc == 0 and out.startswith("[") else []
        return {r["id"]: r for r in rows}

    def new_log(self, before):
        """The one row logged since `before` (a log_rows()), else {} (none, or more than one:
        the newest row could be an earlier attempt's)."""
        new = [r for i, r in self.log_rows().items() if i not in before]
        return new[0] if len(new) == 1 else {}

    def ended_by_itself(self, state, pid):
        """Idle, with the daemon that played still running (a dead daemon also reads idle)."""
        return state.startswith("idle") and "no daemon" not in state and alive(pid)

    def wait_idle(self, seconds):
        end = time.time() + seconds
        state = ""
        while time.time() < end:
            _, state, _ = self.sm("status")
            if state.startswith("idle"):
                return state
            time.sleep(0.2)
        return state


def position(status):
    """Seconds of 'playing: Steps  00:44 / 01:00' (None when not playing)."""
    if not status.startswith("playing"):
        return None
    try:
        mm, ss = status.split()[-3].split(":")
        return int(mm) * 60 + int(ss)
    except (IndexError, ValueError):
        return None


class Socket:
    """The control socket, for sub-millisecond timing on devices 300 times real time."""
    def __init__(self, case):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(5)
        self.sock.connect(case.dir + "/run/stillmoment/control.sock")
        self.buf = b""
        self.n = 0
        self.send({"hello": {"version": 1, "client": "seek-end-tests"}})
        self.recv()

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, command, args=None):
        self.n += 1
        m = {"id": self.n, "command": command}
        if args is not None:
            m["args"] = args
        self.send(m)
        while True:
            a = self.recv()
            if a is None or a.get("id") == self.n:
                return a

    def close(self):
        self.sock.close()


# ------------------------------------------------------------------ the cases

def fast_device(work, mp3, label, device, capture=None):
    """null and file:, 300 times real time: the seeks go over one socket connection, the
    second one 0-5 ms after the first, so that it lands in the last second, in the
    drain, as the end completes or (refused) after it."""
    c = Case(work, label, device)
    c.sm("import", mp3)
    pid = c.start_daemon()
    landed = 0
    delays = (0, 0, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005)
    for attempt, delay in enumerate(delays):
        if capture:
            dev = f"file:FILE={c.dir}/cap{attempt}.raw,FORMAT=raw"
        else:
            dev = device
        logged = c.log_rows()
        s = Socket(c)
        a = s.ask("play", {"id": "Steps", "device": dev})
        ok = a is not None and "result" in a
        a1 = s.ask("seek", {"to": 59000}) if ok else None
        time.sleep(delay)
        a2 = s.ask("seek", {"by": -15000}) if ok else None
        s.close()
        took = a2 is not None and "result" in a2
        refused = a2 is not None and "error" in a2 and "nothing is playing" in json.dumps(a2)
        landed += took
        what = f"{label}, seek back {delay * 1000:.1f} ms after seek 0:59"
        if not check(ok and a1 is not None and (took or refused), f"{what}: taken or refused as over ({a2})"):
            continue
        c0 = cpu_seconds(pid)
        state = c.wait_idle(10)
        check(c.ended_by_itself(state, pid), f"{what}: the meditation then ends by itself ({state})")
        row = c.new_log(logged)
        check(row.get("endReason") == "completed",
              f"{what}: logged as completed ({row.get('endReason')}, heard {row.get('heardSeconds')} s)")
        if capture and took:
            left = left_channel(f"{c.dir}/cap{attempt}.raw")
            runs, tail = audio_runs(left), last_second(left)
            from44 = [r for r in runs if 40 <= r[0] <= 50]
            check(len(from44) == 1 and runs[-1] == from44[0] and played_to_end(runs[-1], 44)
                  and tail is not None and abs(tail - 1) < 0.03,
                  f"{what}: heard from 0:44 to the end, once, the last second whole "
                  f"(runs {runs}; last second {tail if tail is None else round(tail, 3)} s)")
        time.sleep(0.3)
        used = cpu_seconds(pid) - c0
        check(used < 0.6, f"{what}: no thread spins ({used:.2f} s of CPU)")
    check(landed >= 1, f"{label}: seeks landed in the last second in {landed} of {len(delays)} attempts")
    idle0 = cpu_seconds(pid)
    time.sleep(1.0)
    check(cpu_seconds(pid) - idle0 < 0.2, f"{label}: the daemon is quiet afterwards "
          f"({cpu_seconds(pid) - idle0:.2f} s of CPU in 1 s)")
    stop_pid(pid)


def pulse_missing():
    """Why the paced device cannot be had here: a tool is not installed (a skip), else None
    (then a PulseAudio that does not start is a failure, never a skip)."""
    need = [t for t in ("pulseaudio", "parec", "pactl") if not shutil.which(t)]
    return f"{', '.join(need)} not installed" if need else None


def start_pulse(work):
    if not shutil.which("pulseaudio") or not shutil.which("parec"):
        return None
    pa = work + "/pa"
    os.makedirs(pa + "/run", mode=0o700)
    os.makedirs(pa + "/home", mode=0o700)
    sock = pa + "/pulse.sock"
    p = subprocess.Popen(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                          "-L", "module-null-sink sink_name=sm",
                          "-L", f"module-native-protocol-unix socket={sock} auth-anonymous=1"],
                         env=dict(os.environ, HOME=pa + "/home", XDG_RUNTIME_DIR=pa + "/run"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return {"PULSE_SERVER": f"unix:{sock}"}
        except OSError:
            time.sleep(0.05)
    return None


def paced_device(work, mp3, pulse):
    """PulseAudio's null sink plays in real time: the issue's own commands, with the seek
    back 0.3, 0.8, 0.95 and 1.1 s after `seek 0:59` (the drain is under way in all); the
    sink's monitor is recorded to check what was heard."""
    c = Case(work, "paced", "pulse", pulse)
    c.sm("import", mp3)
    pid = c.start_daemon()
    for attempt, delay in enumerate((0.3, 0.8, 0.95, 1.1)):
        what = f"paced, seek -15s {delay} s after seek 0:59"
        cap = f"{c.dir}/monitor{attempt}.raw"
        with open(cap, "wb") as out:
            rec = subprocess.Popen(["parec", "-d", "sm.monitor", "--raw", "--format=float32le", "--channels=2",
                                    f"--rate={RATE}", "--latency-msec=20"],
                                   env=c.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL)
        procs.append(rec)
        time.sleep(0.3)
        logged = c.log_rows()
        c.sm("play", "Steps", "--device", "pulse", "--detach")
        time.sleep(0.5)
        c.sm("seek", "0:59")
        c.wait_seeked(3)        # the daemon answers at once; the device takes the seek a moment later
        time.sleep(delay)
        t0 = time.monotonic()
        rc, answer, err = c.sm("seek", "--", "-15s")
        c.wait_seeked(3)
        t1 = time.monotonic()        # until the device took it, not only the answer
        c.sm("status")
        t2 = time.monotonic()
        took = rc == 0 and position(answer) is not None
        if not check(took or "nothing is playing" in err, f"{what}: taken ({answer or err})"):
            stop_pid(rec.pid)
            continue
        if took:
            # The drain's last period (125 ms) at most: not the whole device buffer.
            check(t1 - t0 < (t2 - t1) + 0.3,
                  f"{what}: the seek acts at once ({t1 - t0:.3f} s; a status takes {t2 - t1:.3f} s)")
            time.sleep(0.2)
            c0 = cpu_seconds(pid)
            _, s1, _ = c.sm("status")
            time.sleep(1.5)
            _, s2, _ = c.sm("status")
            used = cpu_seconds(pid) - c0
            p1, p2 = position(s1), position(s2)
            check(p1 is not None and 43 <= p1 <= 46 and p2 is not None and p2 > p1,
                  f"{what}: plays on from 0:44 ({s1!r} then {s2!r})")
            check(used < 0.5, f"{what}: no thread spins ({used:.2f} s of CPU in 1.5 s)")
            c.sm("seek", "0:58")        # to the end again, sooner than 15 s
        state = c.wait_idle(8)
        check(c.ended_by_itself(state, pid), f"{what}: the meditation then ends by itself ({state})")
        row = c.new_log(logged)
        check(row.get("endReason") == "completed",
              f"{what}: logged as completed ({row.get('endReason')}, heard {row.get('heardSeconds')} s)")
        time.sleep(0.3)
        stop_pid(rec.pid)
        left = left_channel(cap)
        runs, tail = audio_runs(left), last_second(left)
        whole = tail is not None and abs(tail - 1) < 0.03
        shown = f"runs {runs}; last second {tail if tail is None else round(tail, 3)} s"
        if took:
            back = [i for i, r in enumerate(runs) if 43 <= r[0] <= 46]
            good = (len(back) == 1 and runs[back[0]][2] >= 1.2 and back[0] + 1 == len(runs) - 1
                    and played_to_end(runs[-1], 58) and whole)
            check(good, f"{what}: heard 0:44 on, then 0:58 to the end, the last second whole ({shown})")
        else:
            check(runs and played_to_end(runs[-1]) and whole, f"{what}: the end was heard whole ({shown})")
    stop_pid(pid)


def main():
    work = tempfile.mkdtemp(prefix="sm-seekend-")
    try:
        mp3 = make_meditation(work)
        fast_device(work, mp3, "null", "null")
        fast_device(work, mp3, "file", None, capture=True)
        pulse = start_pulse(work)
        if pulse:
            paced_device(work, mp3, pulse)
        elif pulse_missing():
            print(f"skipped: the paced device ({pulse_missing()})", flush=True)
        else:
            check(False, "the paced device: PulseAudio is installed but did not start within 5 s")
    finally:
        for p in procs:
            if p.poll() is None:
                stop_pid(p.pid)
                p.wait()
        if os.environ.get("KEEP"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
