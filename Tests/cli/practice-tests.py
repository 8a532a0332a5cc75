#!/usr/bin/env python3
"""The practice log end to end, against the real binary and real daemons: a foreground
sit, a daemon sit stopped after some seconds and a guided meditation each appear once in
`history --json` with their heard length and end reason; renders and previews appear
nowhere; a sit whose daemon was killed is closed at the next start with what was heard;
the CSV export round-trips through `history import`.

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


def main():
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
