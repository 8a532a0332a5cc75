#!/usr/bin/python3
"""The sound-card rig's seek under a stall (hw/inside.sh runs it in the guest when the run
plays hw; hw/measure.py reads seek-stall.json): does a stall of the whole daemon right after
a seek run the card dry?

In the guest: the daemon plays the rig's tone on hw:Loopback,0 (nothing records; snd-aloop
paces the playback by itself), and 12 times a `seek` of ±15 s on the control socket is
followed, as soon as its answer comes, by a SIGSTOP of the daemon for 60 ms (less than the
card's 100-ms buffer, more than a period or two); status's xruns are read after each. A
seek's refill used to keep one or two 20-ms periods of silence queued while the producer
refilled, so a stall inside that window ran the card dry (6 of 12 seeks counted an xrun);
it now fills the buffer before the seek is answered and keeps it full (0 of 12 in most runs).

hw/inside.sh runs it a second time for plughw (SEEK_STALL_MS=0, 30 seeks, SEEK_STALL_JSON=
seek-plain-plughw.json): plain seeks through the plug at 48 kHz, where the engine resamples.

For a probe (hw/rig.sh with HW_SCRIPT=): SEEK_STALL_MS sets the stall (0: none, plain
seeks), SEEK_STALL_CONTROL=1 stalls after a status instead of a seek (what a stall does to
plain playing, the comparison), SEEK_STALL_DEVICE plays on another device than
hw:Loopback,0 (plughw:Loopback,0 at 48 kHz: the engine resamples the tone) and
SEEK_STALL_SEEKS sets how many seeks."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import inside  # noqa: E402  (the result folder, its config, the binary, the guest's environment)
import realtime as rt  # noqa: E402   (bench/realtime.py, on inside's path: its control-socket client)

OUT, BIN = inside.OUT, inside.BIN
WORK = "/tmp/probe-seek"      # a home of its own: nothing left from inside.py's sessions
ENV, SOCK = inside.environment(WORK)
STALL = float(os.environ.get("SEEK_STALL_MS", "60")) / 1000   # a probe may ask for another
SEEKS = int(os.environ.get("SEEK_STALL_SEEKS", "12"))
RESULT = os.environ.get("SEEK_STALL_JSON", "seek-stall.json")   # the plain seeks' check writes its own
DEVICE = os.environ.get("SEEK_STALL_DEVICE", "hw:Loopback,0")
CONTROL = os.environ.get("SEEK_STALL_CONTROL") == "1"   # a probe's control run: no seeks


say = inside.say


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    for d in ("home", "run", "user"):
        os.makedirs(f"{WORK}/{d}", mode=0o700)
    subprocess.run([BIN, "import", os.path.join(OUT, "tone.mp3"), "--name", "tone"], env=ENV, check=True,
                   stdout=subprocess.DEVNULL)
    log = open(f"{WORK}/daemon.log", "w")
    daemon = subprocess.Popen([BIN, "daemon"], env=ENV, stdout=log, stderr=log)
    try:
        client = None
        for _ in range(200):
            try:
                client = rt.Client(SOCK)
                break
            except OSError:
                time.sleep(0.05)
        if client is None:
            say("seek-stall probe: cannot connect to the daemon")
            return 1
        what = "statuses (no seek)" if CONTROL else "seeks"
        say(f"{DEVICE}: {what}, each with a {STALL * 1000:.0f}-ms stall of the daemon")
        _, r = client.request("play", {"id": "tone", "device": DEVICE})
        time.sleep(3.0)
        _, s = client.request("status")
        try:
            with open("/proc/asound/card0/pcm0p/sub0/hw_params") as f:
                params = " ".join(line.strip() for line in f if line.startswith(("format", "rate", "buffer_size", "period_size")))
        except OSError:
            params = "?"
        say(f"seek-stall probe ({os.path.basename(BIN)}): playing, xruns {s.get('xruns')}, device {s.get('device')}, card {params}")
        problems = []
        if s.get("state") != "playing" or s.get("device") != DEVICE or not isinstance(s.get("xruns"), int):
            problems.append(f"not playing on {DEVICE} after `play`: {str(r)[:200]}; status {str(s)[:300]}")
        rows, stalls = [], []
        for i in range(SEEKS if not problems else 0):
            before = client.request("status")[1].get("xruns")
            if CONTROL:     # the same stall after a status: what a stall alone does
                _, answer = client.request("status")
            else:
                _, answer = client.request("seek", {"by": 15000 if i % 2 == 0 else -15000})
            if STALL > 0:
                t0 = time.monotonic()
                os.kill(daemon.pid, signal.SIGSTOP)
                time.sleep(STALL)
                os.kill(daemon.pid, signal.SIGCONT)
                stalls.append(round((time.monotonic() - t0) * 1000, 1))   # the guest may overshoot
            time.sleep(1.2)
            _, st = client.request("status")
            after = st.get("xruns")
            if (isinstance(answer, dict) and "error" in answer) or st.get("state") != "playing" \
                    or not isinstance(before, int) or not isinstance(after, int):
                problems.append(f"seek {i + 1}: answer {str(answer)[:200]}, status {str(st)[:200]}")
                break
            rows.append(after - before)
        say(f"seek-stall probe ({os.path.basename(BIN)}, {DEVICE}): xruns after each of {SEEKS} {what} with a "
            f"{STALL * 1000:.0f}-ms SIGSTOP at the answer: {rows}; with an xrun: "
            f"{sum(1 for x in rows if x)} of {SEEKS}; the stalls as timed: {stalls} ms")
        client.request("stop")
        with open(os.path.join(OUT, RESULT), "w") as f:
            json.dump({"stall_ms": STALL * 1000, "control": CONTROL, "device": DEVICE, "stalls_ms": stalls, "xruns": rows, "seeks": SEEKS, "problems": problems}, f)
        return 0
    finally:
        daemon.terminate()
        try:
            daemon.wait(5)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
