#!/usr/bin/env python3
"""The daemon users run, measured while it plays (issue 16's lean daemon): its RSS playing
a 5-minute guided meditation and a timer with ambience on a private PulseAudio null sink,
beside mpg123 and MPD playing the same MP3 to the same sink in the same run, and what the
daemon's resident pages of the binary are (bench/pages.py, as root). MPD is installed by
`make bench` (scripts/deps-mpd.sh: its system service held back and disabled) and a
private instance is started here.

Run with the release binary (make bench): .build/web-venv/bin/python bench/daemon.py.
Lines go to bench-out/results.txt in the format of bench/lib.sh.
"""
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "cli"))
os.environ.setdefault("BIN", os.path.join(here, "..", ".build", "release", "stillmoment"))
import webharness as h  # noqa: E402
from mpdref import MPD  # noqa: E402

report = h.report


def peaks(pid, seconds, steady_from):
    """The largest VmRSS (MB) sampled every 50 ms for `seconds`: over all, and from
    `steady_from` s on (the daemon releases a session's start-up code pages 3 s in)."""
    allpeak = steady = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            v = h.rss_kb(pid)
        except OSError:
            break
        allpeak = max(allpeak, v)
        if time.monotonic() - t0 >= steady_from:
            steady = max(steady, v)
        time.sleep(0.05)
    return allpeak / 1024, steady / 1024


def reset_peak(pid):
    """Starts the kernel's own peak (VmHWM) again from the RSS now (clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def true_peak(pid):
    """VmHWM (MB): the largest RSS since reset_peak, every page counted, not a sample."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_while(pid, seconds):
    """The largest VmRSS (MB) sampled every 50 ms for `seconds`."""
    peak = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            peak = max(peak, h.rss_kb(pid))
        except OSError:
            break
        time.sleep(0.05)
    return peak / 1024


def mpd_rss(mp3, pulse):
    """MPD playing the MP3 to the same sink (None when mpd is not installed)."""
    if not MPD.installed():
        return None
    m = MPD(h, mp3, pulse)
    m.cmd("play")
    time.sleep(3)
    rss = peak_while(m.proc.pid, 5)
    m.close()
    return rss


def cache_binary():
    """Reads the binary into the page cache: the kernel maps the cached pages around each page
    fault (64 KB), so what a run holds depends on what is cached; read whole, every run starts
    alike (the worst case: 3-5 MB more than just after a build, which leaves part of it out)."""
    with open(os.environ["BIN"], "rb") as f:
        while f.read(1 << 20):
            pass


def main():
    cache_binary()
    pulse = h.start_pulse()
    h.ENV["PULSE_SERVER"] = pulse
    h.sm("settings", "set", "device", "pulse")
    mp3 = os.path.join(h.DIR, "talk.mp3")
    h.make_mp3(mp3, 300, "Bench talk", "Bench")
    r = h.sm("import", mp3)
    assert r.returncode == 0, r.stderr
    daemon = h.start_daemon()
    time.sleep(8)
    idle = h.rss_kb(daemon.pid) / 1024

    reset_peak(daemon.pid)
    h.sm("play", "Bench talk", "--preparation", "off", "--detach")
    guided_start, guided = peaks(daemon.pid, 9, 4)
    guided_hwm = true_peak(daemon.pid)
    if os.geteuid() == 0:
        pages = subprocess.run([sys.executable, os.path.join(here, "pages.py"), str(daemon.pid), os.environ["BIN"]],
                               capture_output=True, text=True).stdout
        with open(os.path.join(os.environ.get("BENCH_OUT", "bench-out"), "daemon-pages.txt"), "w") as f:
            f.write(pages)
    h.sm("stop")
    # The timer as the first session of a daemon of its own too (in the same daemon, 1.5 s
    # after the guided one, it found part of its code resident already).
    daemon.terminate()
    daemon.wait(timeout=10)
    daemon = h.start_daemon()
    time.sleep(8)
    reset_peak(daemon.pid)
    h.sm("timer", "5m", "--preparation", "off", "--ambience", "forest", "--interval", "1m", "--detach")
    timer_start, timer = peaks(daemon.pid, 9, 4)
    timer_hwm = true_peak(daemon.pid)
    h.sm("stop")

    p = h.spawn(["mpg123", "-q", "-o", "pulse", mp3], dict(os.environ, PULSE_SERVER=pulse), "mpg123")
    time.sleep(2)
    ref = peak_while(p.pid, 4)
    p.terminate()
    mpd = mpd_rss(mp3, pulse)
    refs = f"mpg123 -o pulse {ref:.1f} MB" + (f", MPD {mpd:.1f} MB" if mpd else ", MPD not installed")
    report(f"daemon RSS playing a 5-min MP3 (guided) on the paced device, largest sample from 4 s to 9 s "
           f"({refs}, same MP3 and sink)", f"{guided:.1f}", "MB", "≤ 20 MB", guided <= 20)
    report("the same, from the command on (the session's start included): the kernel's peak (VmHWM, reset before "
           f"the command; largest 50-ms sample {guided_start:.1f} MB)", f"{guided_hwm:.1f}", "MB", "≤ 20 MB",
           guided_hwm <= 20)
    report("daemon RSS playing a timer with ambience and interval gongs on the paced device, from 4 s to 9 s",
           f"{timer:.1f}", "MB", "≤ 20 MB", timer <= 20)
    report(f"the same, from the command on: VmHWM (largest 50-ms sample {timer_start:.1f} MB)", f"{timer_hwm:.1f}", "MB",
           "≤ 20 MB", timer_hwm <= 20)
    time.sleep(8)
    after = h.rss_kb(daemon.pid) / 1024
    report(f"daemon RSS idle, 8 s after start / 8 s after its sessions (code pages released after 2 s idle)",
           f"{idle:.1f} / {after:.1f}", "MB", "reported", True)


try:
    main()
finally:
    h.cleanup()
