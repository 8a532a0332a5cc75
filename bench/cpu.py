#!/usr/bin/env python3
"""Real-time playback CPU (issue 37): the daemon users run playing a 60-s stereo MP3 on the
paced device (a private PulseAudio null sink, stillmoment's native `pulse` device), against
MPD and `mpg123 -o pulse` playing the same MP3 to the same sink in the same run, and against
`mpg123 -t` decoding it without output (the floor: what any player must spend).

CPU is each process's time on a core over all its threads (the first field of
/proc/PID/task/*/schedstat, in ns), over the same 40-s window of each playback (from 5 s
in: start-up left out), best of ROUNDS (default 2). `mpg123 -t`'s whole decode is scaled to
the window's 40 s of audio.

Run with the release binary (make bench): .build/web-venv/bin/python bench/cpu.py.
Lines go to bench-out/results.txt in the format of bench/lib.sh.
"""
import os
import resource
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "cli"))
os.environ.setdefault("BIN", os.path.join(here, "..", ".build", "release", "stillmoment"))
import webharness as h  # noqa: E402
from mpdref import MPD  # noqa: E402

SKIP, WINDOW = 5.0, 40.0
ROUNDS = int(os.environ.get("ROUNDS", "2"))


def on_cpu_ns(pid):
    """ns on a core of every thread of `pid` alive now."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def window(pid, started):
    """CPU seconds of `pid` from SKIP to SKIP + WINDOW s after `started` (monotonic)."""
    time.sleep(max(0.0, started + SKIP - time.monotonic()))
    a = on_cpu_ns(pid)
    time.sleep(max(0.0, started + SKIP + WINDOW - time.monotonic()))
    return (on_cpu_ns(pid) - a) / 1e9


def make_music(path, seconds):
    """A stereo 128-kbps MP3 with content in every band (pink noise under two tones), as a
    recorded talk with music would be: the decoder's work is not a silent file's."""
    wav = path + ".wav"
    subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", str(seconds),
                    "pinknoise", "sine", "220", "vol", "0.3"], check=True)
    subprocess.run(["lame", "--quiet", "-b", "128", "--tt", "Bench music", wav, path], check=True)
    os.unlink(wav)


def ours(daemon):
    t = time.monotonic()
    r = h.sm("play", "Bench music", "--preparation", "off", "--detach")
    assert r.returncode == 0, r.stderr
    cpu = window(daemon.pid, t)
    h.sm("stop")
    time.sleep(1)
    return cpu


def mpd(mp3, pulse, n):
    m = MPD(h, mp3, pulse, name=f"mpd{n}")
    try:
        t = time.monotonic()
        m.cmd("play")
        return window(m.proc.pid, t)
    finally:
        m.close()
        m.proc.terminate()
        m.proc.wait(timeout=10)


def mpg123_pulse(mp3, pulse, n):
    t = time.monotonic()
    p = h.spawn(["mpg123", "-q", "-o", "pulse", mp3], dict(os.environ, PULSE_SERVER=pulse), f"mpg123-{n}")
    try:
        return window(p.pid, t)
    finally:
        p.terminate()
        p.wait(timeout=10)


def mpg123_decode(mp3, seconds):
    """`mpg123 -t` (decode, no output) of the whole file, CPU scaled to the window."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["mpg123", "-q", "-t", mp3], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu * WINDOW / seconds


def main():
    if not MPD.installed():
        sys.exit("mpd is not installed: make bench installs it (scripts/deps-mpd.sh)")
    pulse = h.start_pulse()
    h.ENV["PULSE_SERVER"] = pulse
    h.sm("settings", "set", "device", "pulse")
    seconds = 60
    mp3 = os.path.join(h.DIR, "music.mp3")
    make_music(mp3, seconds)
    r = h.sm("import", mp3)
    assert r.returncode == 0, r.stderr
    daemon = h.start_daemon()
    time.sleep(3)
    got = {"ours": [], "mpd": [], "mpg123": [], "floor": []}
    for n in range(ROUNDS):
        got["ours"].append(ours(daemon))
        got["mpd"].append(mpd(mp3, pulse, n))
        got["mpg123"].append(mpg123_pulse(mp3, pulse, n))
        got["floor"].append(min(mpg123_decode(mp3, seconds) for _ in range(3)))
    best = {k: min(v) for k, v in got.items()}
    print("CPU seconds over the 40-s window, each round: " + "; ".join(f"{k} {', '.join(f'{x:.3f}' for x in v)}"
                                                                       for k, v in got.items()), flush=True)
    vs_mpd = best["ours"] / best["mpd"]
    h.report(f"real-time playback of a 60-s stereo 128-kbps MP3 on the paced device (PulseAudio null sink), CPU over "
             f"40 s of it, the daemon against MPD to the same sink ({best['ours']:.3f} s vs {best['mpd']:.3f} s; "
             f"mpg123 -o pulse {best['mpg123']:.3f} s)", f"{vs_mpd:.2f}", "x", "≤ 0.5 x", vs_mpd <= 0.5)
    vs_floor = best["ours"] / best["floor"]
    h.report(f"the same against decoding alone, mpg123 -t scaled to 40 s ({best['ours']:.3f} s vs {best['floor']:.3f} s)",
             f"{vs_floor:.2f}", "x", "≤ 1.3 x", vs_floor <= 1.3)


try:
    main()
finally:
    h.cleanup()
