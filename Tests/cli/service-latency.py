#!/usr/bin/env python3
"""The daemon never makes a client wait for the sound device, measured on the paced device
(a private PulseAudio null sink): while a timer replaces a guided meditation (its 0.5-s
fade), while a timer replaces a timer (0.3 s), during a pause's fade and a seek, a second
connection asks `status` every few milliseconds; every answer must come within 10 ms (the
90th percentile; the slowest is printed), and the request that causes the fade is
answered at once too. Before the service's device worker, a replacement held every client
for the fade (~370 ms) and a seek on this device for 0.7-1.2 s.

Run from the repository root: python3 Tests/cli/service-latency.py (BIN overrides the
binary). Prints ok:/FAILED:/skipped: lines and "N passed, N failed"; exits 1 on failure.
Every process it starts (PulseAudio, the daemon) is stopped by its PID.
"""
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("seekend", os.path.join(HERE, "seek-end-tests.py"))
se = importlib.util.module_from_spec(spec)
spec.loader.exec_module(se)      # its helpers: Case, Socket, start_pulse, stop_pid, check


def probe(case, stop, samples):
    """Asks status over its own connection until told to stop; records each round trip (ms)."""
    s = se.Socket(case)
    while not stop.is_set():
        t0 = time.monotonic()
        a = s.ask("status")
        samples.append(((time.monotonic() - t0) * 1000, a is not None and "result" in a))
        time.sleep(0.003)
    s.close()


def measure(case, what, action):
    """Runs `action` (a request over a socket) while a probe asks status; checks both."""
    stop, samples = threading.Event(), []
    t = threading.Thread(target=probe, args=(case, stop, samples))
    t.start()
    time.sleep(0.1)
    s = se.Socket(case)
    t0 = time.monotonic()
    answer = action(s)
    took = (time.monotonic() - t0) * 1000
    s.close()
    time.sleep(1.0)                   # the fade and what follows it
    stop.set()
    t.join()
    times = sorted(ms for ms, _ in samples)
    answered = all(ok for _, ok in samples)
    p90 = times[int(len(times) * 0.9)] if times else None
    se.check(answer is not None and "result" in answer and took < 50,
             f"{what}: the request is answered in {took:.1f} ms ({str(answer)[:90]})")
    se.check(answered and p90 is not None and p90 <= 10,
             f"{what}: {len(times)} status answers meanwhile, 90% within {p90:.1f} ms, median "
             f"{times[len(times) // 2]:.1f} ms, slowest {times[-1]:.1f} ms" if times else f"{what}: no status answered")


def main():
    work = tempfile.mkdtemp(prefix="sm-latency-")
    try:
        if se.pulse_missing():
            print(f"skipped: the paced device ({se.pulse_missing()})", flush=True)
            return 0
        pulse = se.start_pulse(work)
        if not pulse:
            print("FAILED: the paced device: PulseAudio is installed but did not start within 5 s", flush=True)
            return 1
        mp3 = se.make_meditation(work)
        c = se.Case(work, "paced", "pulse", pulse)
        c.sm("import", mp3)
        pid = c.start_daemon()
        timer = {"options": {"duration": "10m", "preparation": "off", "device": "pulse"}}

        c.sm("play", "Steps", "--device", "pulse", "--detach")
        time.sleep(1.0)
        measure(c, "a timer preempts a guided meditation (0.5-s fade)", lambda s: s.ask("timer", timer))
        _, st, _ = c.sm("status")
        se.check("paused by a timer" in st, f"…the meditation is kept to be resumed ({st!r})")
        measure(c, "a timer replaces a timer (0.3-s fade)", lambda s: s.ask("timer", timer))
        measure(c, "a pause fades the timer out", lambda s: s.ask("pause"))
        measure(c, "a resume", lambda s: s.ask("resume"))
        c.sm("stop")
        c.wait_idle(5)
        c.sm("play", "Steps", "--device", "pulse", "--detach")
        time.sleep(1.0)
        measure(c, "a seek on the paced device", lambda s: s.ask("seek", {"by": 20000}))
        measure(c, "a stop (1-s fade)", lambda s: s.ask("stop"))
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
