#!/usr/bin/env python3
"""The practice log at a million entries: a private home's log is filled with 1,000,000
entries straight through SQLite (the table and columns the app writes, its triggers
keeping the totals), then `stillmoment history --limit 5`, `stillmoment stats`, the
whole log as CSV (`history --csv`, streamed) and the web app's `GET /api/practice` are
timed (wall clock, best of 5; /usr/bin/time's start-up included, as in the reference)
with their peak RSS, against `sqlite3` counting and
summing the same rows in the same run (the reference: one pass over the table).

Run from the repository root: python3 bench/practice.py (BIN: the binary, by default the
release build; ENTRIES: how many, 1,000,000; BENCH_OUT: bench-out). Lines go to stdout
and bench-out/results.txt as `name: value unit (target …) met|MISSED`. The filled home is
kept in bench-out/practice-home and reused while it holds ENTRIES entries.
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import sqlite3
from contextlib import closing
import subprocess
import sys
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/release/stillmoment"))
OUT = os.environ.get("BENCH_OUT", "bench-out")
ENTRIES = int(os.environ.get("ENTRIES", "1000000"))
HOME = os.path.abspath(f"{OUT}/practice-home")
RUN = os.path.abspath(f"{OUT}/practice-run")
ENV = dict(os.environ, STILLMOMENT_HOME=HOME, XDG_RUNTIME_DIR=RUN, LANG="C.UTF-8", STILLMOMENT_IDLE_EXIT="30")
ENV.pop("LC_ALL", None)
DB = HOME + "/library.sqlite"


def report(name, value, unit, target, ok):
    line = f"{name}: {value} {unit} (target {target}) {'met' if ok else 'MISSED'}"
    print(line, flush=True)
    with open(f"{OUT}/results.txt", "a") as f:
        f.write(line + "\n")


def run(argv, env=ENV):
    """Wall seconds and peak RSS (KB, from /usr/bin/time: a child of this Python would
    report this Python's peak too) of one run, its output discarded."""
    rss_path = f"{RUN}/rss"
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_path, *argv], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {p.stderr.decode()}")
    with open(rss_path) as f:
        return wall, int(f.read().split()[-1])


def best(argv, n=5):
    runs = [run(argv) for _ in range(n)]
    return min(w for w, _ in runs), max(r for _, r in runs)


def fill():
    """ENTRIES entries, one every ~5.3 minutes up to now (about ten years), with the
    columns the app writes; kept while the count is right."""
    if os.path.exists(DB):
        with closing(sqlite3.connect(DB)) as db, db:
            if db.execute("SELECT count(*) FROM practice").fetchone()[0] == ENTRIES:
                return 0.0
    shutil.rmtree(HOME, ignore_errors=True)
    os.makedirs(RUN, mode=0o700, exist_ok=True)
    subprocess.run([BIN, "history"], env=ENV, check=True, capture_output=True)    # the store, migrated
    r = random.Random(42)
    presets = ["morning", "evening", "walk", "long sit", "lunch", None, None]
    teachers = ["Tara Brach", "Jack Kornfield", "Ajahn Sumedho", "", None, None]
    now = int(time.time())
    step = 320

    def rows():
        for i in range(ENTRIES):
            start = now - (ENTRIES - i) * step + r.randrange(step // 2)
            heard = r.randrange(60_000, 3_600_000)
            teacher = r.choice(teachers)
            yield (str(uuid.UUID(int=r.getrandbits(128), version=4)), "guided" if teacher else "timer",
                   "Body scan" if teacher else "sit", None, teacher, r.choice(presets), start,
                   3600 if (start // 86400) % 365 < 200 else 7200, heard, heard, None, "completed", r.random() < 0.1)

    t0 = time.perf_counter()
    with closing(sqlite3.connect(DB)) as db, db:
        db.executemany("""INSERT INTO practice (id, kind, name, meditationID, teacher, preset, startUnix, utcOffset, planned,
                          heard, sections, endReason, scheduled) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""", rows())
    with closing(sqlite3.connect(DB)) as db, db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return time.perf_counter() - t0


def web_practice():
    """Best-of-5 wall time of GET /api/practice on a paired web app, and its peak RSS."""
    err_path = f"{RUN}/web.err"
    with open(err_path, "w") as err:
        web = subprocess.Popen([BIN, "web", "--listen", "127.0.0.1:0"], env=ENV, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = None
        end = time.monotonic() + 15
        while port is None and time.monotonic() < end:
            m = re.search(r"serving the web app on https?://127\.0\.0\.1:(\d+)", open(err_path).read())
            port = int(m.group(1)) if m else None
            time.sleep(0.05)
        if port is None:
            sys.exit("bench: the web app did not start: " + open(err_path).read())
        pin = re.search(r"\b(\d{6})\b", subprocess.run([BIN, "web", "pair"], env=ENV, capture_output=True, text=True).stdout)
        origin = {"Origin": f"http://127.0.0.1:{port}"}

        def request(method, path, body=None, token=None):
            h = dict(origin, **({"Cookie": f"sm_token={token}"} if token else {}))
            if body is not None:
                h["Content-Type"] = "application/json"
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            resp = c.getresponse()
            data = resp.read()
            c.close()
            return resp, data

        resp, _ = request("POST", "/api/pair", {"pin": pin.group(1) if pin else "", "name": "bench"})
        token = re.search(r"sm_token=([0-9a-f]{64})", resp.getheader("set-cookie") or "")
        if not token:
            sys.exit(f"bench: pairing failed ({resp.status})")
        walls = []
        sits = None
        for _ in range(6):
            t0 = time.perf_counter()
            resp, data = request("GET", "/api/practice", token=token.group(1))
            walls.append(time.perf_counter() - t0)
            if resp.status != 200:
                sys.exit(f"bench: GET /api/practice: {resp.status} {data[:200]!r}")
            payload = json.loads(data)
            sits = payload["stats"]["all"]["sits"]
            entries = len(payload["entries"])
        hwm = int(re.search(r"VmHWM:\s+(\d+)", open(f"/proc/{web.pid}/status").read()).group(1))
        return min(walls[1:]), hwm, sits, entries
    finally:
        web.send_signal(signal.SIGTERM)
        try:
            web.wait(10)
        except subprocess.TimeoutExpired:
            web.kill()
            web.wait()


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(RUN, mode=0o700, exist_ok=True)
    filled = fill()
    if filled:
        print(f"practice log: {ENTRIES:,} entries written in {filled:.1f} s (triggers keeping the totals)", flush=True)
    label = os.path.relpath(BIN, ROOT)
    n = f"{ENTRIES:,}"
    ref_sql = "SELECT count(*), sum(heard) FROM practice WHERE endReason IS NOT NULL"
    ref, ref_rss = best(["sqlite3", DB, ref_sql])
    empty_home = f"{RUN}/empty-home"
    shutil.rmtree(empty_home, ignore_errors=True)
    base, base_rss = min(run([BIN, "stats"], dict(ENV, STILLMOMENT_HOME=empty_home)) for _ in range(3))

    h, h_rss = best([BIN, "history", "--limit", "5"])
    report(f"practice log of {n} entries: `history --limit 5` ({label}), wall, best of 5", f"{h * 1000:.1f}",
           f"ms, peak RSS {h_rss / 1024:.1f} MB ({ref / h:.1f} x faster than sqlite3 counting the rows: {ref * 1000:.1f} ms, {ref_rss / 1024:.1f} MB)",
           "<= 100 ms, < 30 MB", h <= 0.1 and h_rss < 30 * 1024)
    s, s_rss = best([BIN, "stats"])
    report(f"practice log of {n} entries: `stats` ({label}), wall, best of 5", f"{s * 1000:.1f}",
           f"ms, peak RSS {s_rss / 1024:.1f} MB (an empty log: {base * 1000:.1f} ms, {base_rss / 1024:.1f} MB; sqlite3 counting: {ref * 1000:.1f} ms)",
           "<= 100 ms, < 30 MB", s <= 0.1 and s_rss < 30 * 1024)
    c, c_rss = best([BIN, "history", "--csv"], n=1)
    report(f"practice log of {n} entries: the whole log as CSV (`history --csv`, streamed), peak RSS", f"{c_rss / 1024:.1f}",
           f"MB ({c:.2f} s wall)", "< 30 MB", c_rss < 30 * 1024)
    w, w_rss, sits, entries = web_practice()
    report(f"practice log of {n} entries: the web app's GET /api/practice (50 entries and the stats), wall, best of 5",
           f"{w * 1000:.1f}", f"ms, web app peak RSS {w_rss / 1024:.1f} MB ({sits:,} sits counted, {entries} entries)",
           "<= 100 ms, < 30 MB", w <= 0.1 and w_rss < 30 * 1024 and sits == ENTRIES)


if __name__ == "__main__":
    main()
