#!/usr/bin/env python3
"""Sync's budget (issue 34), on the commands users run, release build, loopback:

1. A device with 1,000 presets (catalog rows) and 10,000 practice entries pairs with a hub
   (`stillmoment web`) and runs `stillmoment sync now`: the whole cycle (upload of 11,000
   records, the read of the hub's pages) timed as the command; then a second device pairs
   and runs `sync now`, reading all of them. Target: each under 1 s.
2. Idle wake-ups: a daemon paired with the hub beside one in the same state unpaired (both
   with the same catalog), their voluntary context switches over every thread in a 60-s
   window of 10 minutes (one periodic cycle in it) from halfway between two idle turns
   (bench/home.py's method), after the paired
   one's first cycle; target ≤ 1 a minute more.
3. RSS: the same two daemons' VmRSS (median of 5 samples, 30 s after the start, past the
   first cycle); target ≤ 2 MB more.

Not measured here (not built): files moved by hash against curl over a veth limited by tc.

Run: BIN=.build/release/stillmoment python3 bench/sync.py (make bench). Lines go to
bench-out/results.txt in bench/lib.sh's format.
"""
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "cli"))
sys.path.insert(0, here)
os.environ.setdefault("BIN", os.path.join(here, "..", ".build", "release", "stillmoment"))
import smtest  # noqa: E402
from smtest import report  # noqa: E402
from home import mid_turns, rss_mb, switches, delta  # noqa: E402

PRESETS = int(os.environ.get("SYNC_PRESETS", "1000"))
SITS = int(os.environ.get("SYNC_SITS", "10000"))
IDLE_SECONDS = int(os.environ.get("IDLE_SECONDS", "600"))   # a whole cycle period (10 min)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(hub):
    r = hub.run("web", "pair")
    m = re.search(r"\b(\d{6})\b", r.out + r.err)
    assert r.rc == 0 and m, r
    return m.group(1)


def timed(home, *args):
    t0 = time.monotonic()
    r = home.run(*args, timeout=600)
    dt = time.monotonic() - t0
    assert r.rc == 0, r
    return dt, r


def practice_csv(path, n):
    with open(path, "w") as f:
        f.write("id,kind,name,teacher,preset,meditation_id,start,planned_seconds,heard_seconds,end_reason,scheduled\r\n")
        for i in range(n):
            f.write(f"{uuid.UUID(int=i + 1)},timer,Timer 20m,,,,2026-10-{1 + i % 28:02d}T07:{i % 60:02d}:00+01:00,1200,1200,completed,false\r\n")


def main(work, homes):
    def home(name, **extra):
        h = smtest.Home(os.path.join(work, name), idle_exit="600", **extra)
        homes.append(h)
        return h

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    hub = home("hub")
    web = hub.spawn("web", "--listen", f"127.0.0.1:{port}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert smtest.wait_for(lambda: subprocess.run(["curl", "-s", "-o", "/dev/null", url + "/"]).returncode == 0, 10, 0.05)

    a = home("a")
    t0 = time.monotonic()
    for k in range(PRESETS):
        r = a.run("preset", "save", f"Preset {k:04d}", "--duration", f"{1 + k % 90}m")
        assert r.rc == 0, r
    practice_csv(os.path.join(work, "log.csv"), SITS)
    assert a.run("history", "import", os.path.join(work, "log.csv"), timeout=600).rc == 0
    print(f"sync bench: {PRESETS} presets and {SITS} sits made on device A in {time.monotonic() - t0:.1f} s")
    assert a.run("sync", "pair", url, "--pin", pin(hub), "--name", "a").rc == 0
    up, r = timed(a, "sync", "now", "--json")
    report("sync: upload of 1,000 presets and 10,000 sits (`sync now`, whole cycle)", f"{up * 1000:.0f}", "ms", "< 1000 ms", up < 1.0)
    print("  ", r.out.strip())
    b = home("b")
    assert b.run("sync", "pair", url, "--pin", pin(hub), "--name", "b").rc == 0
    down, r = timed(b, "sync", "now", "--json")
    report("sync: download of 1,000 presets and 10,000 sits to a new device (`sync now`)", f"{down * 1000:.0f}", "ms", "< 1000 ms", down < 1.0)
    print("  ", r.out.strip())
    assert len(b.history()) == SITS

    # Idle: A's daemon paired, and C's (a copy of B's catalog, unpaired) beside it.
    c = home("c")
    shutil.copytree(b.home, c.home)
    assert c.run("sync", "off").rc == 0
    pa = a.start_daemon().pid
    pc = c.start_daemon().pid
    time.sleep(30)
    samples = {pa: [], pc: []}
    for _ in range(5):
        for pid in samples:
            samples[pid].append(rss_mb(pid))
        time.sleep(1)
    ra, rc = statistics.median(samples[pa]), statistics.median(samples[pc])
    report("sync: daemon RSS paired with a hub, against the same unpaired", f"{ra - rc:+.2f}", "MB", "≤ +2 MB", ra - rc <= 2.0)
    print(f"   paired {ra:.1f} MB, unpaired {rc:.1f} MB")
    starts = mid_turns([pa, pc])
    before = {}
    for pid, t in zip((pa, pc), starts):
        while time.monotonic() < t:
            time.sleep(0.01)
        before[pid] = switches(pid, ("voluntary_ctxt_switches:",))
    ends = [t + IDLE_SECONDS for t in starts]
    after = {}
    for pid, t in sorted(zip((pa, pc), ends), key=lambda p: p[1]):
        while time.monotonic() < t:
            time.sleep(0.01)
        after[pid] = switches(pid, ("voluntary_ctxt_switches:",))
    wa = sum(delta(after[pa], before[pa]).values()) * 60 / IDLE_SECONDS
    wc = sum(delta(after[pc], before[pc]).values()) * 60 / IDLE_SECONDS
    report("sync: idle wake-ups a minute, paired against unpaired", f"{wa - wc:+.0f}", "per min", "≤ +1", wa - wc <= 1)
    print(f"   paired {wa:.0f}, unpaired {wc:.0f} a minute ({delta(after[pa], before[pa])} against {delta(after[pc], before[pc])})")
    smtest.stop_pid(web.pid)


if __name__ == "__main__":
    work = tempfile.mkdtemp(prefix="sm-bench-sync-")
    homes = []
    try:
        main(work, homes)
    finally:
        for h in homes:
            h.close()
        shutil.rmtree(work, ignore_errors=True)
