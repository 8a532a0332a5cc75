#!/usr/bin/env python3
"""The web app's budget, on the release binary (make bench runs it in the web venv):

- the daemon's RSS while it plays a timer with ambience, before and after the web app
  starts and a browser's event stream watches it (the same session: ≤ +2 MB);
- the web app's own peak RSS after pairing, an event stream, the library, the timer's
  choices and the upload and import of a 5-minute MP3 (< 25 MB);
- its CPU with no browser connected (none);
- the first render of a cold load in headless Chromium, CPU throttled 4x (Lighthouse's
  mid-range phone) and 10x, over a LAN of 5 ms and 20 Mbit/s: ours against the same
  files served by Python's http.server in the same run (the reference), median of 3.

Lines go to bench-out/results.txt in the format of bench/lib.sh.
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "cli"))
os.environ.setdefault("BIN", os.path.join(here, "..", ".build", "release", "stillmoment"))
import webharness as h  # noqa: E402

report = h.report


def peak_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Sampler:
    """The largest VmRSS of a process, sampled every 20 ms on a thread."""
    def __init__(self, pid):
        import threading
        self.pid, self.peak, self.running = pid, 0, True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while self.running:
            try:
                self.peak = max(self.peak, h.rss_kb(self.pid))
            except OSError:
                return
            time.sleep(0.02)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.peak


def event_stream(port, token):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: sm_token={token}\r\n\r\n".encode())
    s.settimeout(5)
    s.recv(4096)
    return s


def main():
    h.ENV["PULSE_SERVER"] = h.start_pulse()
    h.sm("settings", "set", "device", "pulse")
    daemon = h.start_daemon()
    h.sm("timer", "5m", "--preparation", "off", "--ambience", "forest", "--interval", "1m", "--detach")
    time.sleep(5)
    before = h.rss_kb(daemon.pid)
    web, port = h.start_web()
    time.sleep(0.5)
    sampler = Sampler(web.pid)
    status, token, _ = h.pair_http(port)
    stream = event_stream(port, token)
    for _ in range(3):
        h.request(port, "GET", "/api/status", token=token, origin=None)
        h.request(port, "GET", "/api/options", token=token, origin=None)
    time.sleep(5)
    after = h.rss_kb(daemon.pid)
    h.sm("stop")
    report("daemon RSS playing a timer with ambience, web app watching (same session)", f"{(after - before) / 1024:+.2f}",
           f"MB ({before / 1024:.1f} → {after / 1024:.1f} MB)", "≤ +2 MB", after - before <= 2048)

    mp3 = os.path.join(h.DIR, "five.mp3")
    h.make_mp3(mp3, 300, "Five minutes", "Bench")
    with open(mp3, "rb") as f:
        data = f.read()
    status, _, body = h.request(port, "PUT", "/api/import?name=five.mp3", data, token=token,
                                headers={"Content-Type": "application/octet-stream"})
    h.request(port, "GET", "/api/meditations", token=token, origin=None)
    serving = sampler.stop()
    report(f"web app RSS while serving, largest sample (paired, streaming events, a 5-min MP3 uploaded and imported: {status}; "
           f"start-up peak before its code pages are released {peak_kb(web.pid) / 1024:.1f} MB)",
           f"{serving / 1024:.1f}", "MB", "< 25 MB", serving < 25 * 1024 and status == 200)
    stream.close()

    ticks, woke = h.quiet_cost(web.pid, 10)
    report(f"web app CPU with no browser connected, 10 s (woken {woke} times)", ticks, "ticks", "0", ticks == 0 and woke == 0)

    # The reference: the same shell files from Python's http.server.
    shell = os.path.join(here, "..", "Sources", "StillMomentWeb", "Shell")
    ref_port = h.free_port()
    h.spawn([sys.executable, "-m", "http.server", str(ref_port), "--bind", "127.0.0.1", "--directory", shell], os.environ, "reference")
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", ref_port)).close()
            break
        except OSError:
            time.sleep(0.05)
    for rate in (4, 10):
        ours = statistics.median([h.first_paint(f"http://127.0.0.1:{port}/", rate) or 1e9 for _ in range(3)])
        ref = statistics.median([h.first_paint(f"http://127.0.0.1:{ref_port}/index.html", rate) or 1e9 for _ in range(3)])
        target = "< 1000 ms" if rate == 4 else "reported"
        report(f"web app first render, cold, CPU throttled {rate}x, LAN 5 ms 20 Mbit/s (http.server: {ref:.0f} ms, ratio {ours / ref:.2f})",
               f"{ours:.0f}", "ms", target, ours < 1000 if rate == 4 else True)


try:
    main()
finally:
    h.cleanup()
