#!/usr/bin/env python3
"""A seek back in the last second of a guided meditation, while its end drains: the
session plays on from the new place and ends normally; the output thread never spins.
Run on ALSA's null device, the file: device and a paced device (a private PulseAudio
null sink), against real daemons.

Run from the repository root: python3 Tests/cli/seek-end-tests.py (BIN overrides the
binary). Prints ok:/FAILED:/skipped: lines and "N passed, N failed"; exits 1 on failure.
Every process started (daemons, PulseAudio) is stopped by its PID.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/debug/stillmoment"))
passed = failed = 0
procs = []


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    work = tempfile.mkdtemp(prefix="sm-seekend-")
    daemons = set()
    try:
        wav, mp3 = work + "/t.wav", work + "/t60.mp3"
        subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "60", "sine", "300", "vol", "0.2"], check=True)
        subprocess.run(["lame", "--quiet", "--tt", "Sixty", wav, mp3], check=True)
        pulse = None
        if shutil.which("pulseaudio"):
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
                    pulse = {"PULSE_SERVER": f"unix:{sock}"}
                    break
                except OSError:
                    time.sleep(0.05)
        devices = [("null", "null", None), ("file", f"file:FILE={work}/cap.raw,FORMAT=raw", None)]
        if pulse:
            devices.append(("paced", "pulse", pulse))
        else:
            print("skipped: the paced device (pulseaudio is not installed)")
        for label, device, extra in devices:
            case = f"{work}/{label}"
            os.makedirs(case + "/run", mode=0o700)
            env = dict(os.environ, STILLMOMENT_HOME=case + "/home", XDG_RUNTIME_DIR=case + "/run", LANG="C.UTF-8",
                       STILLMOMENT_IDLE_EXIT="60", **(extra or {}))

            def sm(*args):
                r = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
                return r.returncode, r.stdout.strip(), r.stderr.strip()
            sm("import", mp3)
            rc, out, err = sm("play", "Sixty", "--device", device, "--detach")
            with open(case + "/run/stillmoment/daemon.lock") as f:
                pid = int(f.read().split()[0])
            daemons.add(pid)
            # On a paced device the last second is real time; elsewhere the end comes at once,
            # so the seek back follows the drain (or meets it) in each run.
            results = []
            for attempt in range(3):
                if attempt:
                    sm("play", "Sixty", "--device", device, "--detach")
                time.sleep(0.3)
                sm("seek", "0:59")
                time.sleep(1.1 if label == "paced" else 0.05)
                rc, out, err = sm("seek", "--", "-15s")
                time.sleep(0.2)
                c0 = cpu_seconds(pid)
                _, s1, _ = sm("status")
                time.sleep(1.5)
                _, s2, _ = sm("status")
                used = cpu_seconds(pid) - c0
                results.append((s1, s2, used))
            if label == "paced":
                moving = all(a != b and "playing" in b for a, b, _ in results)
                check(moving, f"{label}: after a seek back in the last second the meditation plays on ({[r[:2] for r in results]})")
            else:
                check(all("Sixty" in a or "idle" in a for a, _, _ in results),
                      f"{label}: a seek back at the end is taken ({[r[:2] for r in results]})")
            worst = max(u for _, _, u in results)
            check(worst < 0.8, f"{label}: no thread spins meanwhile ({worst:.2f} s of CPU in 1.5 s)")
            # It still ends normally: wait for the end (a paced 15 s, or at once).
            deadline = time.time() + (25 if label == "paced" else 10)
            state = ""
            while time.time() < deadline:
                _, state, _ = sm("status")
                if state.startswith("idle"):
                    break
                time.sleep(0.5)
            check(state.startswith("idle"), f"{label}: the meditation then ends by itself ({state})")
            os.kill(pid, signal.SIGTERM)
    finally:
        for pid in daemons:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
