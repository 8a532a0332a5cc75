#!/usr/bin/env python3
"""output-standby: the daemon keeps the sound device open between sessions, on the paced
device (a private PulseAudio null sink, whose monitor is recorded).

- the setting: a wrong value is refused (exit 2, naming the values); the default is
  keep-open-during-schedule;
- keep-open: the daemon holds a stream on the sink while idle (pactl), writing silence at
  near-zero CPU (its CPU over 10 s against `pacat` playing /dev/zero to the same sink in
  the same run); a timer starts into that same stream (its sink input stays the same), with
  no underrun or xrun counted; after the session the stream is still there; the start
  latency (command to the first sound at the monitor) warm and, with `close`, cold;
- close: the stream goes within a few seconds; no stream between sessions;
- keep-open-during-schedule: no stream while nothing is scheduled; a bell scheduled 50 s
  ahead opens it (the lead is 60 s); removing the entry closes it again; a sit scheduled
  with a preset that names a device opens that device, not the `device` setting.

Run from the repository root: python3 Tests/cli/standby-tests.py (BIN overrides the
binary). Prints ok:/FAILED:/skipped: lines and "N passed, N failed"; exits 1 on failure.
Every process it starts (PulseAudio, the daemon, parec, pacat) is stopped by its PID.
"""
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("seekend", os.path.join(HERE, "seek-end-tests.py"))
se = importlib.util.module_from_spec(spec)
spec.loader.exec_module(se)      # its helpers: Case, start_pulse, stop_pid, check, cpu_seconds

RATE = 44100


def sink_inputs(c):
    """The sink inputs (streams) on the null sink: their indices. A pactl that fails raises
    (a failed listing must not read as "no stream")."""
    r = subprocess.run(["pactl", "list", "short", "sink-inputs"], env=c.env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"pactl list failed ({r.returncode}): {r.stderr.strip()}")
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def same_daemon(c, pid):
    """The daemon started at the beginning still runs and holds the lock: "no stream" must
    not be the silence of a daemon that died (another would start on demand)."""
    try:
        with open(c.dir + "/run/stillmoment/daemon.lock") as f:
            held = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        held = None
    return se.alive(pid) and held == pid


def clean_counts(st, state_ok=lambda s: s not in (None, "idle", "paused")):
    """Status of a session playing, with its counts present and zero (a failed status call
    gives {}: no count is taken for 0)."""
    return st.get("underruns") == 0 and st.get("xruns") == 0 and state_ok(st.get("state"))


def wait_for(fn, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    return fn()


def status_json(c):
    import json
    rc, out, _ = c.sm("status", "--json")
    try:
        return json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}


def start_latency(c):
    """Seconds from `timer` to the first sound (above -40 dBFS) at the sink's monitor: the
    recording is read in 5-ms fragments, each stamped on arrival (CLOCK_MONOTONIC)."""
    rec = subprocess.Popen(["parec", "-d", "sm.monitor", "--raw", "--format=float32le", "--channels=1",
                            f"--rate={RATE}", "--latency-msec=5"],
                           env=c.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    se.procs.append(rec)
    chunks = []

    def read():
        while True:
            b = rec.stdout.read1(65536) if hasattr(rec.stdout, "read1") else rec.stdout.read(882)
            if not b:
                return
            chunks.append((time.monotonic(), b))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    c.sm("timer", "1m", "--preparation", "off", "--device", "pulse", "--detach")
    time.sleep(2.0)
    se.stop_pid(rec.pid)
    rec.wait()
    t.join(2)
    rest = b""
    for at, b in chunks:
        data = rest + b
        n = len(data) // 4
        rest = data[n * 4:]
        samples = struct.unpack(f"<{n}f", data[: n * 4])
        for i, v in enumerate(samples):
            if abs(v) > 0.01:
                heard = at - (n - i) / RATE      # the fragment arrived after its last frame
                return max(0.0, heard - t0) if at > t0 else None
    return None


def main():
    work = tempfile.mkdtemp(prefix="sm-standby-")
    try:
        if se.pulse_missing():
            print(f"skipped: the paced device ({se.pulse_missing()})", flush=True)
            return 0
        pulse = se.start_pulse(work)
        if not pulse:
            se.check(False, "the paced device: PulseAudio is installed but did not start within 5 s")
            print(f"{se.passed} passed, {se.failed} failed", flush=True)
            return 1
        c = se.Case(work, "standby", "pulse", dict(pulse, TZ="UTC"))
        rc, out, err = c.sm("settings", "set", "output-standby", "sometimes")
        se.check(rc == 2 and "keep-open" in err and "\n" not in err.strip(),
                 f"a wrong value is refused in one line, exit 2 ({rc}: {err})")
        rc, out, _ = c.sm("settings", "show")
        se.check("keep-open-during-schedule" in out, "the default is keep-open-during-schedule")
        c.sm("settings", "set", "device", "pulse")
        c.sm("settings", "set", "output-standby", "keep-open")

        # ---- keep-open: a stream while idle, silence at near-zero CPU
        pid = c.start_daemon()
        streams = wait_for(lambda: sink_inputs(c), 10)
        se.check(len(streams) == 1, f"keep-open: the idle daemon holds a stream on the sink ({streams})")
        # (The null sink starts a new stream only once its block rendered ahead is over.)
        wait_for(lambda: status_json(c).get("keptOpen", {}).get("framesWritten", 0) > RATE, 5)
        k0 = status_json(c).get("keptOpen", {})
        time.sleep(1.0)
        k1 = status_json(c).get("keptOpen", {})
        ran = k1.get("framesWritten", 0) - k0.get("framesWritten", 0)
        se.check(k0.get("device") == "pulse" and 0.5 * RATE <= ran <= 1.6 * RATE,
                 f"…and plays silence into it: status says keptOpen {k1}, {ran} frames written in 1 s")
        _, text, _ = c.sm("status")
        se.check(text == "idle; pulse kept open", f"`status` says so ({text!r})")
        time.sleep(1.0)
        c0 = se.cpu_seconds(pid)
        time.sleep(10)
        idle_cpu = se.cpu_seconds(pid) - c0
        ref = subprocess.Popen(["pacat", "--raw", "--format=s16le", "--channels=2", f"--rate={RATE}", "-d", "sm", "/dev/zero"],
                               env=c.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        se.procs.append(ref)
        time.sleep(1.0)
        r0 = se.cpu_seconds(ref.pid)
        time.sleep(10)
        ref_cpu = se.cpu_seconds(ref.pid) - r0
        se.stop_pid(ref.pid)
        ref.wait()
        se.check(idle_cpu <= 0.05 and same_daemon(c, pid),
                 f"keep-open: the warm idle daemon's CPU in 10 s: {idle_cpu:.3f} s (pacat /dev/zero to the same sink: {ref_cpu:.3f} s)")

        latency = start_latency(c)
        st = status_json(c)
        now = sink_inputs(c)
        se.check(now == streams, f"a timer plays into the same stream ({streams} → {now})")
        se.check(latency is not None, f"keep-open: start latency, command to the first sound: "
                 f"{'none heard' if latency is None else f'{latency * 1000:.0f} ms'}")
        se.check(clean_counts(st),
                 f"no underrun or xrun counted for the start ({st.get('state')}, {st.get('underruns')}, {st.get('xruns')})")
        time.sleep(1.0)
        st = status_json(c)
        se.check(clean_counts(st),
                 f"…nor a second later ({st.get('state')}, {st.get('underruns')}, {st.get('xruns')})")
        c.sm("stop")
        idle = c.wait_idle(5)
        time.sleep(1.5)
        se.check(idle.startswith("idle") and sink_inputs(c) == streams and "keptOpen" in status_json(c),
                 f"after the session the stream stays ({idle}; {sink_inputs(c)})")
        rc, out, _ = c.sm("timer", "1m", "--preparation", "off", "--device", "pulse", "--detach")
        time.sleep(1.5)
        st = status_json(c)
        se.check(rc == 0 and clean_counts(st),
                 f"a second session after the standby: running, no underrun ({st.get('state')}, {st.get('underruns')})")
        c.sm("stop")
        c.wait_idle(5)

        # ---- close: the stream goes
        c.sm("settings", "set", "output-standby", "close")
        gone = wait_for(lambda: not sink_inputs(c), 10)
        se.check(gone and same_daemon(c, pid), f"close: the stream is closed within a few seconds, the daemon runs on "
                 f"({sink_inputs(c)}; daemon {pid} {'alive' if same_daemon(c, pid) else 'GONE'})")
        # PulseAudio's null sink renders up to 2 s ahead once its last stream has gone, and
        # a stream that comes within that block waits for its end (1.4 s measured here right
        # after the standby's stream closed): the cold start is measured 3 s later.
        time.sleep(3)
        cold = start_latency(c)
        se.check(cold is not None, f"close: start latency, command to the first sound: "
                 f"{'none heard' if cold is None else f'{cold * 1000:.0f} ms'} (warm: "
                 f"{'-' if latency is None else f'{latency * 1000:.0f} ms'})")
        c.sm("stop")
        c.wait_idle(5)
        time.sleep(1.0)
        st = status_json(c)
        se.check(not sink_inputs(c) and st.get("state") == "idle" and "keptOpen" not in st and same_daemon(c, pid),
                 f"close: no stream between sessions ({sink_inputs(c)}; {st.get('state')}; daemon {pid})")

        # ---- keep-open-during-schedule: open from a minute before an entry
        c.sm("settings", "reset", "output-standby")
        time.sleep(3)
        se.check(not sink_inputs(c) and same_daemon(c, pid), "during-schedule: no stream while nothing is scheduled")
        at = time.time() + 50
        rc, out, err = c.sm("schedule", "add", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)),
                            "--bell", "clear-strike", "--name", "soon")
        opened = wait_for(lambda: sink_inputs(c), 10)
        se.check(rc == 0 and len(opened) == 1, f"during-schedule: a bell 50 s ahead opens the stream ({rc} {err}; {opened})")
        import json
        _, listed, _ = c.sm("schedule", "list", "--json")
        for e in json.loads(listed or "{}").get("entries", []):
            c.sm("schedule", "remove", str(e["id"]))
        closed = wait_for(lambda: not sink_inputs(c), 10)
        se.check(closed and same_daemon(c, pid), f"during-schedule: the entry removed, the stream closes ({sink_inputs(c)})")

        # A scheduled sit whose preset names the device: that device is the one opened
        # (not the `device` setting, which the session would then close for its own).
        rc, _, err = c.sm("preset", "save", "on-sm", "5m", "--device", "pulse:sm")
        at = time.time() + 50
        rc2, _, err2 = c.sm("schedule", "add", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)),
                            "--preset", "on-sm", "--name", "preset-device")
        kept = wait_for(lambda: status_json(c).get("keptOpen", {}).get("device"), 10)
        se.check(rc == 0 and rc2 == 0 and kept == "pulse:sm",
                 f"during-schedule: a preset's device is the one opened ({rc} {err} {rc2} {err2}; kept {kept!r})")
        _, listed, _ = c.sm("schedule", "list", "--json")
        for e in json.loads(listed or "{}").get("entries", []):
            c.sm("schedule", "remove", str(e["id"]))
        wait_for(lambda: not sink_inputs(c), 10)

        slow = [line for line in open(c.dir + "/daemon.err").read().splitlines() if "took" in line or "cannot keep" in line]
        se.check(not slow, f"no slow or failed standby work in the log ({slow})")
        se.stop_pid(pid)
    finally:
        for p in se.procs:
            if p.poll() is None:
                se.stop_pid(p.pid)
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{se.passed} passed, {se.failed} failed")
    return 1 if se.failed else 0


if __name__ == "__main__":
    sys.exit(main())
