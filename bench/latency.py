#!/usr/bin/env python3
"""Control latency on a paced device: from a `pause` sent on the control socket to
silence at the PulseAudio null sink's monitor, and whether the transition clicks.

A private PulseAudio (started and stopped here, by PID) plays at the real rate; a
foreground `stillmoment daemon` plays a guided meditation holding a steady 440-Hz tone on
ALSA's `pulse` device; `parec` records the sink's monitor in 5-ms fragments, each stamped
with CLOCK_MONOTONIC when it arrives. For each of ROUNDS pauses: the time the command was
sent, the time the first sample of the lasting silence arrived (an upper bound on when it
was heard: the monitor's own latency counts against us), and the largest step between
samples around the transition against the largest step inside the tone (a click is a step
larger than the signal itself makes).

Prints `name: value unit (target …) met|MISSED` lines, appended to bench-out/results.txt.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array

BIN = os.environ.get("BIN", ".build/release/stillmoment")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
RATE = 44100
OUT = os.environ.get("BENCH_OUT", "bench-out")
SILENT = 1e-4          # below the 16-bit floor: the ramp has reached zero


def report(name, value, unit, target, met):
    line = f"{name}: {value} {unit} (target {target}) {'met' if met else 'MISSED'}"
    print(line, flush=True)
    with open(os.path.join(OUT, "results.txt"), "a") as f:
        f.write(line + "\n")


class Recorder(threading.Thread):
    """parec's raw float stream, each read stamped on arrival."""

    def __init__(self, env):
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(
            ["parec", "--device=bench.monitor", "--format=float32le", "--channels=2", f"--rate={RATE}",
             "--latency-msec=5", "--raw"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)
        self.samples = array("f")          # left channel only
        self.stamps = []                   # (frames so far after this read, monotonic time)
        self.lock = threading.Lock()

    def run(self):
        fd = self.proc.stdout.fileno()
        pending = b""
        while True:
            chunk = os.read(fd, 4096)
            t = time.monotonic()
            if not chunk:
                return
            pending += chunk
            usable = len(pending) - len(pending) % 8
            frames = array("f", pending[:usable])
            pending = pending[usable:]
            with self.lock:
                self.samples.extend(frames[0::2])
                self.stamps.append((len(self.samples), t))

    def time_of(self, index):
        """When frame `index` arrived: the stamp of the read that brought it, less the
        frames that came after it in that read."""
        with self.lock:
            for end, t in self.stamps:
                if end > index:
                    return t - (end - 1 - index) / RATE
        return None

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb", buffering=0)
        self.next = 1
        self.send({"hello": {"version": 1}})
        self.read()

    def send(self, message):
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def read(self):
        return json.loads(self.file.readline())

    def request(self, command, args=None):
        rid = self.next
        self.next += 1
        message = {"id": rid, "command": command}
        if args:
            message["args"] = args
        t = time.monotonic()
        self.send(message)
        while True:
            m = self.read()
            if m.get("id") == rid:
                return t, m


def main():
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sm-latency-")
    env = dict(os.environ, XDG_RUNTIME_DIR=work, HOME=work, STILLMOMENT_HOME=os.path.join(work, "home"),
               PULSE_SERVER=f"unix:{work}/pulse.sock")
    os.chmod(work, 0o700)
    procs = []
    try:
        pa = subprocess.Popen(
            ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit",
             "-L", "module-null-sink sink_name=bench",
             "-L", f"module-native-protocol-unix socket={work}/pulse.sock auth-anonymous=1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        procs.append(pa)
        for _ in range(50):
            if subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        # A 10-minute steady tone as a guided meditation (1-s MP3 frames concatenated).
        one = os.path.join(work, "one")
        subprocess.run(["sox", "-q", "-n", "-r", str(RATE), "-c", "2", one + ".wav", "synth", "1", "sine", "440",
                        "vol", "0.3"], check=True)
        subprocess.run(["lame", "--quiet", "-t", "-b", "192", one + ".wav", one + ".mp3"], check=True)
        with open(one + ".mp3", "rb") as f:
            frame = f.read()
        with open(os.path.join(work, "tone.mp3"), "wb") as f:
            f.write(frame * 600)
        subprocess.run([BIN, "import", os.path.join(work, "tone.mp3"), "--name", "tone"], env=env, check=True,
                       capture_output=True)
        log = open(os.path.join(work, "daemon.log"), "w")
        daemon = subprocess.Popen([BIN, "daemon"], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        procs.append(daemon)
        path = os.path.join(work, "stillmoment", "control.sock")
        for _ in range(100):
            if os.path.exists(path):
                break
            time.sleep(0.05)
        client = Client(path)
        recorder = Recorder(env)
        procs.append(recorder.proc)
        recorder.start()
        time.sleep(0.5)
        client.request("play", {"id": "tone", "device": "pulse"})
        time.sleep(3)
        sent = []
        for _ in range(ROUNDS):
            t, _answer = client.request("pause")
            sent.append(t)
            time.sleep(1.0)
            client.request("resume")
            time.sleep(2.5)   # PulseAudio refills its buffer after a resume before the clock moves
        _, status = client.request("status")
        client.request("stop")
        time.sleep(0.5)
        recorder.stop()
        recorder.join()

        x = recorder.samples
        steps = [abs(x[i] - x[i - 1]) for i in range(1, len(x))]
        tone_step = 0.3 * 2 * 3.141592653589793 * 440 / RATE
        latencies = []
        worst_step = 0.0
        for t in sent:
            # The first frame that arrived after the command was sent …
            start = next((end for end, s in recorder.stamps if s >= t), None)
            if start is None:
                continue
            start = max(0, start - 4096)
            # … and from there the first frame of a run of 50 ms of silence.
            run = 0
            onset = None
            for i in range(start, min(len(x), start + RATE)):
                if abs(x[i]) < SILENT:
                    run += 1
                    if run >= RATE // 20:
                        onset = i - run + 1
                        break
                else:
                    run = 0
            if onset is None:
                continue
            heard = recorder.time_of(onset)
            latencies.append((heard - t) * 1000)
            lo, hi = max(1, onset - RATE // 20), min(len(steps), onset + RATE // 20)
            worst_step = max(worst_step, max(steps[lo:hi]))
        if len(latencies) < ROUNDS:
            report("control latency: pause to silence at the monitor", "n/a", "",
                   "<= 50 ms", False)
            print(f"  found {len(latencies)} of {ROUNDS} transitions", file=sys.stderr)
            return 1
        latencies.sort()
        worst = latencies[-1]
        report(f"control latency: pause to silence at the monitor (worst of {ROUNDS}; median "
               f"{latencies[len(latencies) // 2]:.1f} ms)", f"{worst:.1f}", "ms", "<= 50", worst <= 50)
        report("click at the pause: largest sample step within 50 ms of the transition, "
               f"vs the tone's own largest step ({tone_step:.4f})",
               f"{worst_step / tone_step:.2f}", "x", "<= 1", worst_step <= tone_step * 1.001)
        print(f"  underruns during the run: {status.get('result', {}).get('underruns')}")
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
