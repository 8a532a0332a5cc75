#!/usr/bin/env python3
"""The rig's guest side: plays with stillmoment on the loopback card and records it.

Run by hw/inside.sh in the virtual machine (a chroot of the host's / over 9p, with
snd-aloop loaded), as `inside.py OUT`. OUT is the host's result folder (a writable 9p
share at the same path): it holds the inputs (`config`, tone.mp3, renders, from
`measure.py prepare`) and receives, for each device NAME, NAME.raw (the capture,
interleaved stereo), NAME.json (arrival stamps of the capture and every event with its
CLOCK_MONOTONIC time, the status answers, the device's hw_params, CPU times). The
measuring is done on the host by `measure.py analyse`; here only what needs the clock.
Progress lines start with `hw-guest:` (the host shows them).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import plan  # noqa: E402
import realtime as rt  # noqa: E402   (bench/realtime.py: its control-socket client)

OUT = sys.argv[1]
CONFIG = dict(line.strip().split("=", 1) for line in open(os.path.join(OUT, "config")) if "=" in line)
BIN = CONFIG["BIN"]
WORK = "/tmp/rig"


def environment(work):
    """The environment of a stillmoment whose folders are under `work` (home, run, user),
    and its daemon's control socket."""
    env = dict(os.environ, STILLMOMENT_HOME=f"{work}/home", XDG_RUNTIME_DIR=f"{work}/run", HOME=f"{work}/user",
               NO_COLOR="1")
    return env, f"{work}/run/stillmoment/control.sock"


ENV, SOCK = environment(WORK)
LOCK = f"{WORK}/run/stillmoment/daemon.lock"
PCM_STATUS = "/proc/asound/card0/pcm0p/sub0/status"
PCM_HW = "/proc/asound/card0/pcm0p/sub0/hw_params"
PCM_SW = "/proc/asound/card0/pcm0p/sub0/sw_params"
T0 = time.monotonic()


def say(text):
    print(f"hw-guest: [{time.monotonic() - T0:6.1f} s] {text}", flush=True)


def mono():
    return time.monotonic()


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"({e})"


class Recorder(threading.Thread):
    """arecord capturing into a file on the guest's tmpfs (a real-time thread, a 500-ms
    buffer: it must never overrun); this thread polls the file every 10 ms and stamps its
    growth with CLOCK_MONOTONIC, and keeps, per poll, whether the new frames held sound,
    so the sequence can wait for sound or silence."""

    def __init__(self, path, device, fmt, rate):
        super().__init__(daemon=True)
        self.path = path
        self.rate = rate
        self.dtype = np.int32 if fmt == "S32_LE" else np.int16
        self.frame_bytes = 2 * np.dtype(self.dtype).itemsize
        self.loud = plan.LOUD * (2 ** 31 if fmt == "S32_LE" else 2 ** 15)
        self.errpath = path + ".arecord.log"
        self.err = open(self.errpath, "w")
        self.proc = subprocess.Popen(["chrt", "-f", "10", "arecord", "-q", "-D", device, "-f", fmt, "-r", str(rate),
                                      "-c", "2", "-t", "raw", "-F", "5000", "-B", "500000", path],
                                     stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL)
        self.frames = 0
        self.stamps = []          # (frames in the file, time they were seen)
        self.reads = []           # (time seen, first frame, frames, loud)
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def run(self):
        f = None
        while not self.halt.is_set():
            time.sleep(0.01)
            if f is None:
                try:
                    f = open(self.path, "rb")
                except OSError:
                    continue
            data = f.read()
            t = mono()
            if self.proc.poll() is not None and not data:
                return
            # whole frames only; the rest is read again next time
            usable = len(data) - len(data) % self.frame_bytes
            if usable < len(data):
                f.seek(usable - len(data), os.SEEK_CUR)
            if not usable:
                continue
            x = np.frombuffer(data[:usable], dtype=self.dtype)
            loud = bool(np.abs(x.astype(np.int64)).max() > self.loud)
            n = usable // self.frame_bytes
            with self.lock:
                self.reads.append((t, self.frames, n, loud))
                self.frames += n
                self.stamps.append((self.frames, t))

    def wait_started(self, timeout=10):
        end = mono() + timeout
        while mono() < end:
            if self.frames > self.rate // 10:
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("arecord did not start: " + read(self.errpath).strip()[-300:])

    def alive(self):
        return self.proc.poll() is None

    def wait_sound(self, after, timeout):
        """The time of the first poll with sound after `after`."""
        end = mono() + timeout
        i = 0
        while mono() < end and self.alive():
            with self.lock:
                reads = self.reads[i:]
                i += len(reads)
            for t, _, _, loud in reads:
                if t > after and loud:
                    return t
            time.sleep(0.01)
        return None

    def wait_silence(self, after, seconds, timeout):
        """Waits until `seconds` of silence came after `after`."""
        end = mono() + timeout
        while mono() < end and self.alive():
            with self.lock:
                reads = [r for r in self.reads if r[0] > after]
            quiet = 0
            for _, _, n, loud in reversed(reads):
                if loud:
                    break
                quiet += n
            if quiet >= seconds * self.rate:
                return True
            time.sleep(0.02)
        return False

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        time.sleep(0.05)
        self.halt.set()
        self.join(timeout=5)
        self.err.close()


class DeviceWatch(threading.Thread):
    """Polls the loopback playback substream's /proc status every 10 ms: when it was
    opened and when it started running, to split a start latency."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop_at = None
        self.opened = None
        self.running = None
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            t = mono()
            status = read(PCM_STATUS)
            if self.opened is None and not status.startswith("closed"):
                self.opened = t
            if self.running is None and "state: RUNNING" in status:
                self.running = t
                return
            time.sleep(0.01)


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def run(args, timeout=60, **kw):
    t = mono()
    p = subprocess.run([BIN] + args, env=ENV, capture_output=True, text=True, timeout=timeout, **kw)
    return t, mono(), p


class Guest:
    def __init__(self, dev):
        self.dev = dev
        self.name = dev["name"]
        self.events = []
        self.statuses = []
        self.notes = {}
        self.daemon = None        # our Popen of a `stillmoment daemon`, when we started it
        self.client = None
        self.log = open(os.path.join(OUT, f"{self.name}.log"), "w")

    def event(self, kind, t, **more):
        self.events.append(dict(kind=kind, t=t, **more))

    def status(self, label):
        try:
            t, s = self.client.request("status")
        except (OSError, ValueError) as e:
            t, s = mono(), {"error": str(e)}
        self.statuses.append({"label": label, "t": t, "status": s})
        return s

    def daemon_pid(self):
        try:
            return int(open(LOCK).read().strip())
        except (OSError, ValueError):
            return None

    def start_daemon(self):
        self.daemon = subprocess.Popen([BIN, "daemon"], env=ENV, stdout=self.log, stderr=self.log,
                                       stdin=subprocess.DEVNULL)
        for _ in range(400):
            if os.path.exists(SOCK):
                try:
                    self.client = rt.Client(SOCK)
                    return
                except OSError:
                    pass
            time.sleep(0.025)
        raise RuntimeError("the daemon did not start")

    def connect(self):
        for _ in range(200):
            try:
                self.client = rt.Client(SOCK)
                return
            except OSError:
                time.sleep(0.025)
        raise RuntimeError("cannot connect to the daemon")

    def stop_daemon(self):
        if self.client:
            try:
                self.client.sock.close()
            except OSError:
                pass
            self.client = None
        pid = self.daemon_pid()
        if pid and pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            for _ in range(400):
                if not pid_alive(pid):
                    break
                time.sleep(0.025)
            else:
                os.kill(pid, signal.SIGKILL)
        if self.daemon:
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
            self.daemon = None

    def wait_idle(self, timeout=10):
        end = mono() + timeout
        while mono() < end:
            if self.status("wait").get("state") == "idle":
                self.statuses.pop()
                return True
            self.statuses.pop()
            time.sleep(0.1)
        return False

    # ------------------------------------------------------------ the sequence

    def timer_session(self, rec):
        """The timer in the foreground (no daemon), stopped 1.5 s into its end gong (the
        rest is the gong's ring-out, which the capture need not wait for)."""
        args = ["timer"] + self.dev["timer"] + ["--device", self.dev["device"], "--foreground"]
        say(f"{self.name}: stillmoment {' '.join(args)}")
        t = mono()
        p = subprocess.Popen([BIN] + args, env=ENV, stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL,
                             text=True)
        lines = []
        ended = None
        deadline = t + 150
        sampled = False

        def reader():
            for line in p.stdout:
                lines.append((mono(), line.rstrip()))
        th = threading.Thread(target=reader, daemon=True)
        th.start()
        while mono() < deadline and p.poll() is None:
            time.sleep(0.05)
            if not sampled and mono() - t > 3.5:
                self.notes["timer_hw_params"] = read(PCM_HW)
                self.notes["timer_sw_params"] = read(PCM_SW)
                sampled = True
            if ended is None and any("end gong" in l for _, l in lines):
                ended = mono()
            if ended is not None and mono() - ended > 1.5:
                p.send_signal(signal.SIGTERM)
                break
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        th.join(timeout=2)
        self.log.write("".join(f"{l}\n" for _, l in lines))
        self.event("timer-session", t, end=mono(), rc=rc if ended is None else (0 if rc in (0, -15, 143) else rc),
                   args=args, stopped_in_end_gong=ended is not None, lines=[l for _, l in lines])
        rec.wait_silence(mono(), 0.2, 3)

    def start_latency(self, rec, what, mode, via):
        """One start: `what` (timer or play) with a daemon that runs (warm) or is started
        by the command (on-demand), through the CLI or a socket request."""
        device = self.dev["device"]
        if mode == "on-demand":
            self.stop_daemon()
        else:
            # As before any session a user starts: the daemon idle long enough to have
            # released the code pages its last session touched (after 2 s idle).
            time.sleep(plan.SETTLE)
        watch = DeviceWatch()
        watch.start()
        time.sleep(0.05)
        if via == "cli":
            args = (["timer"] + plan.LATENCY_TIMER if what == "timer" else ["play", "tone"]) + \
                   ["--device", device, "--detach"]
            t, returned, p = run(args)
            ok = p.returncode == 0
            detail = (p.stdout + p.stderr).strip()[:300]
        else:
            if what == "timer":
                opts = {"duration": plan.LATENCY_TIMER[0], "preparation": "off", "device": device}
                t, r = self.client.request("timer", {"options": opts})
            else:
                t, r = self.client.request("play", {"id": "tone", "device": device})
            returned = mono()
            ok = "error" not in r
            detail = json.dumps(r)[:300]
        heard = rec.wait_sound(t, 8)
        watch.halt.set()
        watch.join()
        self.event("start", t, what=what, mode=mode, via=via, returned=returned, ok=ok, detail=detail,
                   heard_live=heard, opened=watch.opened, running=watch.running)
        say(f"{self.name}: start {what} {mode} via {via}: "
            f"{'sound' if heard else 'NO SOUND'} {((heard or t) - t) * 1000:.0f} ms after the command (live estimate)")
        if mode == "on-demand":
            self.connect()
        time.sleep(0.3)
        self.status(f"start {what} {mode} {via}")
        self.client.request("stop")
        rec.wait_silence(mono(), 0.3, 5)
        self.wait_idle()

    def control_sequence(self, rec):
        """A guided meditation in the running daemon: pauses and resumes (socket and CLI),
        seeks, three 300-ms SIGSTOPs; status after each kind; CPU while it plays."""
        device = self.dev["device"]
        t, r = self.client.request("play", {"id": "tone", "device": device})
        self.event("play", t, detail=json.dumps(r)[:300])
        rec.wait_sound(t, 8)
        time.sleep(1.0)
        self.notes["play_hw_params"] = read(PCM_HW)
        self.notes["play_sw_params"] = read(PCM_SW)
        self.notes["play_status"] = read(PCM_STATUS)
        self.status("after start")
        pid = self.daemon_pid()
        c0, w0 = cpu_ticks(pid), mono()
        time.sleep(4.0)
        c1, w1 = cpu_ticks(pid), mono()
        self.notes["daemon_cpu"] = {"ticks": (c1 - c0) if c0 is not None and c1 is not None else None,
                                    "seconds": w1 - w0, "hz": os.sysconf("SC_CLK_TCK")}
        for i in range(4):
            via = "socket" if i % 2 == 0 else "cli"
            if via == "socket":
                t, _ = self.client.request("pause")
            else:
                t, _, p = run(["pause"])
            self.event("pause", t, via=via)
            time.sleep(0.8)
            # Where the pause's time went (status's lastPause; hw/measure.py prints it).
            self.status(f"paused {i}")
            if via == "socket":
                t, _ = self.client.request("resume")
            else:
                t, _, p = run(["resume"])
            self.event("resume", t, via=via)
            time.sleep(1.5)
        self.status("after pauses and resumes")
        for by in (15000, -15000):
            # Stamped with its send's time, as every client of ours stamps a seek (the CLI's
            # start, a key of the live view, the web server's arrival).
            t, r = self.client.request("seek", {"by": by}, stamp=True)
            self.event("seek", t, by=by, detail=json.dumps(r)[:300])
            time.sleep(1.5)
        self.status("after seeks")
        pid = self.daemon_pid()
        self.status("before the stall")
        # Three stalls, each at another moment of the output thread's period: one that
        # stops it inside a write through plughw lost that write once (the rate plugin
        # passed it on to the card after the xrun), one in three or so.
        for pause in (1.5, 1.37, 1.71):
            t = mono()
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.3)
            os.kill(pid, signal.SIGCONT)
            self.event("sigstop", t, cont=mono(), ms=300)
            time.sleep(pause)
        self.status("after the 300-ms SIGSTOP")
        t, _ = self.client.request("stop")
        self.event("stop", t)
        rec.wait_silence(t, 0.3, 5)
        self.wait_idle()

    def standby(self, rec):
        """output-standby keep-open: the idle daemon keeps the card running on silence (its
        CPU meanwhile), a timer starts into that running stream, and `close` closes the card."""
        device = self.dev["device"]
        run(["settings", "set", "device", device])
        run(["settings", "set", "output-standby", "keep-open"])

        def wait_card(word, timeout=15):
            t = mono()
            while mono() - t < timeout:
                if word in read(PCM_STATUS):
                    return mono() - t
                time.sleep(0.1)
            return None
        self.notes["standby_open"] = wait_card("RUNNING")
        time.sleep(1.0)
        pid = self.daemon_pid()
        c0, w0 = cpu_ticks(pid), mono()
        time.sleep(4.0)
        c1, w1 = cpu_ticks(pid), mono()
        self.notes["standby_cpu"] = {"ticks": (c1 - c0) if c0 is not None and c1 is not None else None,
                                     "seconds": w1 - w0, "hz": os.sysconf("SC_CLK_TCK"),
                                     "status": read(PCM_STATUS)[:400], "sw_params": read(PCM_SW)[:600]}
        self.start_latency(rec, "timer", "standby", "cli")
        self.start_latency(rec, "timer", "standby", "socket")
        time.sleep(1.0)
        self.notes["standby_after_session"] = "RUNNING" in read(PCM_STATUS)
        run(["settings", "set", "output-standby", "close"])
        self.notes["standby_closed"] = wait_card("closed")
        # The CPU against aplay writing zeros to the same device, taken in turns (aplay,
        # the daemon, aplay, ...: 3 s each), so that the emulated machine's speed, which
        # drifts by 10 % and more over a run, is the same for both (the first comparison,
        # minutes apart, swung from 0.8 x to 1.4 x between runs).
        pairs = []
        for _ in range(3):
            zero = self.aplay_zero(3)
            run(["settings", "set", "output-standby", "keep-open"])
            wait_card("RUNNING")
            time.sleep(0.5)
            c0, w0 = cpu_ticks(pid), mono()
            time.sleep(3.0)
            c1, w1 = cpu_ticks(pid), mono()
            daemon = (c1 - c0) / os.sysconf("SC_CLK_TCK") / (w1 - w0) * 100 if None not in (c0, c1) else None
            run(["settings", "set", "output-standby", "close"])
            wait_card("closed")
            pairs.append({"aplay": zero, "daemon": daemon})
        self.notes["standby_turns"] = pairs
        run(["settings", "reset", "device"])
        run(["settings", "reset", "output-standby"])

    def aplay_zero(self, seconds):
        """CPU of `aplay /dev/zero` (S32, 44.1 kHz) on the device for `seconds`, % of a core."""
        cmd = ["aplay", "-q", "-D", self.dev["device"], "-t", "raw", "-f", "S32_LE", "-r", "44100", "-c", "2",
               "-d", str(seconds), "/dev/zero"]
        p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
        t = mono()
        _, status, usage = os.wait4(p.pid, 0)
        seconds = mono() - t
        time.sleep(0.3)
        return (usage.ru_utime + usage.ru_stime) / seconds * 100 if status == 0 else None

    def reference_starts(self, rec):
        """aplay and mpg123 started on the same device in the same run, as the CLI is
        (a process spawned from here): the command to their first sound, the part of a
        CLI start that any program pays in this guest."""
        device = self.dev["device"]
        for name, cmd in (("aplay", ["aplay", "-q", "-D", device, os.path.join(OUT, "render-play-s32.wav")]),
                          ("mpg123", ["mpg123", "-q", "-o", "alsa", "-a", device, os.path.join(OUT, "tone.mp3")])):
            for _ in range(self.dev["rounds"]):
                t = mono()
                try:
                    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         stdin=subprocess.DEVNULL)
                except OSError as e:
                    self.event("reference_start", t, tool=name, ok=False, detail=str(e))
                    break
                heard = rec.wait_sound(t, 8)
                p.terminate()
                try:
                    _, err = p.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate()
                detail = err.decode(errors="replace").strip()[-300:]
                self.event("reference_start", t, tool=name, ok=heard is not None, heard_live=heard, detail=detail)
                say(f"{self.name}: start {name}: {'sound' if heard else 'NO SOUND'} "
                    f"{((heard or t) - t) * 1000:.0f} ms after the command (live estimate)")
                rec.wait_silence(mono(), 0.3, 5)

    def reference_cpu(self):
        """aplay and mpg123 playing the same tone on the same device, 4 s each: CPU time."""
        device = self.dev["device"]
        out = {}
        for name, cmd in (("aplay", ["aplay", "-q", "-D", device, "-d", "4", os.path.join(OUT, "render-play-s32.wav")]),
                          ("mpg123", ["mpg123", "-q", "-o", "alsa", "-a", device, "-n", "154",
                                      os.path.join(OUT, "tone.mp3")])):
            try:
                p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
            except OSError as e:
                out[name] = {"error": str(e)}
                continue
            t = mono()
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = status
            err = p.stderr.read().decode(errors="replace").strip()[:300]
            out[name] = {"cpu": usage.ru_utime + usage.ru_stime, "seconds": mono() - t, "status": status, "error": err}
            time.sleep(0.3)
        self.notes["reference_cpu"] = out

    def run(self):
        cap_dev, fmt, rate = self.dev["capture"]
        raw = os.path.join(WORK, f"{self.name}.raw")
        rec = Recorder(raw, cap_dev, fmt, rate)
        rec.start()
        ok = True
        try:
            rec.wait_started()
            time.sleep(0.3)
            self.timer_session(rec)
            self.start_daemon()
            say(f"{self.name}: daemon running; start latencies")
            for what in ("timer", "play"):
                for _ in range(self.dev["rounds"]):
                    self.start_latency(rec, what, "warm", "cli")
                    self.start_latency(rec, what, "warm", "socket")
                self.start_latency(rec, what, "on-demand", "cli")
            say(f"{self.name}: pause, resume, seek, SIGSTOP")
            self.control_sequence(rec)
            say(f"{self.name}: output-standby")
            self.standby(rec)
            self.stop_daemon()
            say(f"{self.name}: aplay and mpg123 for reference")
            self.reference_cpu()
            self.reference_starts(rec)
            time.sleep(0.3)
            if not rec.alive():
                raise RuntimeError("arecord stopped during the run: " + read(rec.errpath).strip()[-300:])
        except Exception as e:      # noqa: BLE001 - reported to the host, which fails the run
            ok = False
            self.notes["error"] = f"{type(e).__name__}: {e}"
            say(f"{self.name}: FAILED: {type(e).__name__}: {e}")
            try:
                self.stop_daemon()
            except Exception:       # noqa: BLE001
                pass
        finally:
            rec.stop()
            if os.path.exists(raw):
                shutil.copyfile(raw, os.path.join(OUT, f"{self.name}.raw"))
                os.remove(raw)
            else:
                open(os.path.join(OUT, f"{self.name}.raw"), "wb").close()
            self.notes["arecord"] = read(rec.errpath)[-2000:]
        if "overrun" in self.notes["arecord"]:
            say(f"{self.name}: arecord overran: " + self.notes["arecord"].strip()[-200:])
        with rec.lock:
            stamps = list(rec.stamps)
        with open(os.path.join(OUT, f"{self.name}.json"), "w") as f:
            json.dump({"device": self.dev, "rate": rate, "format": fmt, "frames": rec.frames, "stamps": stamps,
                       "events": self.events, "statuses": self.statuses, "notes": self.notes, "ok": ok}, f)
        say(f"{self.name}: captured {rec.frames / rate:.1f} s")
        return ok


def main():
    for d in (f"{WORK}/home", f"{WORK}/user"):
        os.makedirs(d, exist_ok=True)
    os.makedirs(f"{WORK}/run", mode=0o700, exist_ok=True)
    with open(f"{WORK}/user/.asoundrc", "w") as f:
        f.write(plan.ASOUNDRC)
    # How slow this machine is: the binary's start-up (the host measured the same).
    times = []
    for _ in range(5):
        t = mono()
        subprocess.run([BIN, "--version"], env=ENV, capture_output=True)
        times.append(mono() - t)
    t = mono()
    subprocess.run([BIN, "timer"] + plan.LATENCY_TIMER + ["--output", f"{WORK}/speed.wav"], env=ENV,
                   capture_output=True)
    render = mono() - t
    os.remove(f"{WORK}/speed.wav")
    t = mono()
    p = subprocess.run([BIN, "import", os.path.join(OUT, "tone.mp3"), "--name", "tone"], env=ENV,
                       capture_output=True, text=True)
    imported = mono() - t
    with open(os.path.join(OUT, "guest.json"), "w") as f:
        json.dump({"version_seconds": times, "render_seconds": render, "import_seconds": imported, "import_rc": p.returncode,
                   "import_output": (p.stdout + p.stderr)[-500:], "cpus": os.cpu_count(),
                   "cards": read("/proc/asound/cards"), "kernel": os.uname().release}, f)
    say(f"stillmoment --version takes {min(times) * 1000:.0f} ms here; import of the tone took {imported:.1f} s "
        f"(exit {p.returncode})")
    if p.returncode != 0:
        say("FAILED: could not import the tone: " + (p.stdout + p.stderr).strip()[-300:])
        return 1
    ok = True
    for dev in plan.chosen(CONFIG):
        ok &= Guest(dev).run()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
