#!/usr/bin/env python3
"""The daemon keeps time, end to end against real daemons on ALSA's null device: an
entry a few seconds ahead starts within 100 ms of its time (its lateness recorded by the
daemon, the sit in the practice log marked scheduled), the schedule survives a daemon
restart, `upcoming` lists exactly what then rings, a bell while a sit plays is skipped
and recorded, a one-off time that has passed is refused (never kept silently), a daemon
with schedules does not exit when idle, and an idle daemon with 50 entries uses no
measurable CPU.

Run from the repository root: python3 Tests/cli/schedule-tests.py (BIN overrides the
binary). Prints ok:/FAILED: lines and "N passed, N failed"; exits 1 on failure. Every
daemon started is stopped by its PID.
"""
import json
import os
import re
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
    def __init__(self, idle_exit="600"):
        self.dir = tempfile.mkdtemp(prefix="sm-schedule-")
        self.env = dict(os.environ, STILLMOMENT_HOME=self.dir + "/home", XDG_RUNTIME_DIR=self.dir + "/run",
                        LANG="C.UTF-8", TZ="UTC", STILLMOMENT_IDLE_EXIT=idle_exit)
        self.env.pop("LC_ALL", None)
        os.makedirs(self.dir + "/run", mode=0o700)
        self.pids = set()
        self.procs = []

    def run(self, *args, timeout=60):
        p = subprocess.run([BIN, *args], env=self.env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        self.daemon_pid()
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def daemon_pid(self):
        try:
            with open(self.dir + "/run/stillmoment/daemon.lock") as f:
                pid = int(f.read().split()[0])
            self.pids.add(pid)
            return pid
        except (OSError, ValueError, IndexError):
            return None

    def start_daemon(self):
        log = open(self.dir + "/daemon-fg.log", "ab")
        p = subprocess.Popen([BIN, "daemon"], env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        self.procs.append(p)
        for _ in range(200):
            if self.daemon_pid() == p.pid:
                break
            time.sleep(0.025)
        return p

    def close(self):
        self.daemon_pid()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def listing(self):
        rc, out, err = self.run("schedule", "list", "--json")
        return json.loads(out)["entries"] if rc == 0 else []


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def schedule_data():
    """The schedule's data (hardening of 3dfe736): an import is one transaction; the daemon
    notices every change, whoever made it; export then import is the same timetable, names
    with quotes included; entries hold their preset and meditation by id; a timetable file
    never chooses the sound device."""
    c = Case()
    try:
        c.run("settings", "set", "device", "null")     # this machine may have no sound card
        c.run("schedule", "add", "daily 05:30", "--bell", "temple-bell", "--name", "old")
        big = c.dir + "/big.txt"
        with open(big, "w") as f:
            f.write("".join(f"daily {k // 60 % 24:02d}:{k % 60:02d} --bell clear-strike\n" for k in range(1001)))
        for extra in ([], ["--replace"]):
            rc, out, err = c.run("schedule", "import", big, *extra)
            names = [e.get("name") for e in c.listing()]
            check(rc == 2 and "1000" in err and names == ["old"],
                  f"a 1,001-line timetable {' '.join(extra) or 'added'} is refused whole; the old one stays ({err.strip()[:90]}; {len(names)} entries)")
        # Whoever changes the timetable (here sqlite3, as another program might), the daemon
        # notices: an entry written behind its back rings on time.
        import sqlite3
        c.start_daemon()
        at = int(time.time()) + 6
        db = sqlite3.connect(c.dir + "/home/library.sqlite")
        with db:
            db.execute("INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created) "
                       "SELECT 'behind its back', ?, action, 1, ?, 1, 0 FROM schedule WHERE name = 'old'",
                       (stamp(at), at - 60))
        db.close()
        time.sleep(at - time.time() + 2.0)
        behind = [e for e in c.listing() if e.get("name") == "behind its back"]
        check(behind and (behind[0].get("lastOutcome") or "").startswith("ran"),
              f"an entry the daemon was not told of rings on time ({behind})")
        for e in behind:
            c.run("schedule", "remove", str(e["id"]))

        # Names with quotes, spaces and backslashes: export imports back to the same timetable.
        c.run("preset", "save", 'evening "long" sit', "25m", "--interval", "5m")
        c.run("schedule", "add", "daily 19:00", "--preset", 'evening "long" sit', "--name", "it's \"the\" one \\ ok")
        c.run("schedule", "add", "weekdays 18:00", "--sections", "sit 25m, walk 5m, sit 25m", "--name", "#hash first")
        rc, exported, err = c.run("schedule", "export")
        with open(c.dir + "/again.txt", "w") as f:
            f.write(exported)
        before = [(e["when"], e["action"], e.get("name"), e["enabled"]) for e in c.listing()]
        rc2, out2, err2 = c.run("schedule", "import", c.dir + "/again.txt", "--replace")
        after = [(e["when"], e["action"], e.get("name"), e["enabled"]) for e in c.listing()]
        check(rc == 0 and rc2 == 0 and before == after and len(after) == 3,
              f"export then import is the same timetable, quoted names included ({err2.strip()[:90]}; {after})")

        # Entries hold presets by id: a rename keeps them; a delete asks for --force, then
        # the entry is shown broken and ring-now refuses it with exit 1.
        rc, out, err = c.run("preset", "rename", 'evening "long" sit', "Abend")
        sit = [e for e in c.listing() if e.get("name") == "it's \"the\" one \\ ok"]
        check(rc == 0 and sit and sit[0]["action"] == "--preset Abend" and not sit[0].get("broken"),
              f"a renamed preset keeps its entry working ({sit})")
        rc, out, err = c.run("preset", "delete", "Abend")
        check(rc == 2 and "used by the schedule" in err and "--force" in err,
              f"deleting a preset an entry uses names the entry and asks for --force ({err.strip()[:110]})")
        rc, out, err = c.run("preset", "delete", "Abend", "--force")
        rc2, listed, _ = c.run("schedule", "list")
        sit = [e for e in c.listing() if e.get("name") == "it's \"the\" one \\ ok"]
        check(rc == 0 and sit and "Abend" in (sit[0].get("broken") or "") and "[broken: the preset 'Abend' was deleted]" in listed,
              f"…with --force it goes, and the entry shows as broken ({sit})")
        rc, out, err = c.run("schedule", "ring-now", str(sit[0]["id"]) if sit else "0")
        check(rc == 1 and "deleted" in err, f"ring-now refuses a broken entry with exit 1 ({rc}: {err.strip()[:100]})")

        # A shared timetable never chooses the sound device.
        proof = c.dir + "/proof"
        with open(c.dir + "/retreat.txt", "w") as f:
            f.write(f'daily 06:00 --duration 45m --name "Morning sit" --device file:FILE="|touch {proof}",FORMAT=raw\n')
        rc, out, err = c.run("schedule", "import", c.dir + "/retreat.txt")
        with open(c.dir + "/plain.txt", "w") as f:
            f.write('daily 06:00 --duration 45m --name "Morning sit" --device hw:1,0\n')
        rc2, out2, err2 = c.run("schedule", "import", c.dir + "/plain.txt")
        check(rc == 2 and rc2 == 2 and "line 1" in err and "does not choose the sound device" in err2 and not os.path.exists(proof)
              and not [e for e in c.listing() if e.get("name") == "Morning sit"],
              f"a timetable line with --device is refused, nothing runs or is stored ({err.strip()[:80]} | {err2.strip()[:80]})")
    finally:
        c.close()


def main():
    c = Case()
    try:
        # An entry a few seconds ahead runs on time, as a scheduled sit.
        at = int(time.time()) + 4
        rc, out, err = c.run("schedule", "add", stamp(at), "--duration", "20s", "--preparation", "off", "--device", "null",
                             "--name", "soon")
        pid = c.daemon_pid()
        check(rc == 0 and pid, f"schedule add starts the daemon on demand (exit {rc}: {out.strip()} {err.strip()[:120]})")
        rc, up, err = c.run("schedule", "upcoming", "--json")
        upcoming = json.loads(up) if rc == 0 else []
        time.sleep(at - time.time() + 2.0)
        entries = c.listing()
        last = (entries[0].get("lastOutcome") or "") if entries else ""
        m = re.search(r"started (-?\d+) ms after its time", last)
        late = int(m.group(1)) if m else None
        check(late is not None and 0 <= late <= 100, f"it started within 100 ms of its time ({last})")
        check([u["at"] for u in upcoming] == [stamp(at) + "+00:00"], f"upcoming listed exactly what then rang ({upcoming})")
        rc, out, err = c.run("history", "--json")
        h = json.loads(out) if rc == 0 else []
        check(len(h) == 1 and h[0]["scheduled"] and h[0]["endReason"] == "completed",
              f"the scheduled sit is in the practice log, marked scheduled ({h})")

        # A bell never falls within 2 minutes of the end of a sit.
        at = int(time.time()) + 3
        c.run("schedule", "add", stamp(at), "--bell", "soft-interval", "--name", "after the sit")
        time.sleep(at - time.time() + 1.5)
        quiet = [e for e in c.listing() if e.get("name") == "after the sit"]
        check(quiet and "a sit ended" in (quiet[0].get("lastOutcome") or ""),
              f"a bell within 2 minutes of the end of a sit is skipped ({quiet})")

        # A bell while a sit plays is skipped and recorded.
        rc, out, err = c.run("timer", "24h", "--device", "null", "--detach")
        at = int(time.time()) + 3
        rc2, out2, err2 = c.run("schedule", "add", stamp(at), "--bell", "clear-strike")
        time.sleep(at - time.time() + 1.5)
        entries = c.listing()
        bell = [e for e in entries if "--bell clear-strike" in e["action"]]
        check(rc == 0 and rc2 == 0 and bell and (bell[0].get("lastOutcome") or "").startswith("skipped"),
              f"a bell while a sit plays is skipped and recorded ({bell})")
        rc, st, err = c.run("status", "--json")
        check('"source":"timer"' in st.replace(" ", "") or '"source": "timer"' in st, "…and the sit plays on")
        c.run("stop")

        # The schedule survives a daemon restart.
        pid = c.daemon_pid()
        at = int(time.time()) + 6
        c.run("schedule", "add", stamp(at), "--duration", "10s", "--preparation", "off", "--device", "null", "--name", "after restart")
        old_gone = False
        if pid:
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):
                try:
                    os.kill(pid, 0)
                    time.sleep(0.025)
                except ProcessLookupError:
                    old_gone = True
                    break
        new = c.start_daemon()
        restarted = old_gone and c.daemon_pid() == new.pid != pid
        time.sleep(max(0, at - time.time()) + 2.0)
        after = [e for e in c.listing() if e.get("name") == "after restart"]
        check(restarted and after and (after[0].get("lastOutcome") or "").startswith("ran"),
              f"an entry survives a daemon restart and rings (daemon {pid} → {new.pid}, "
              f"{'restarted' if restarted else 'NOT restarted'}: {after})")
        rc, st, err = c.run("status")
        check(rc == 0 and st.strip().startswith("idle") and "no daemon" not in st and c.daemon_pid() == new.pid,
              f"status answers, from the new daemon ({st.strip()})")

        # A retreat day as a file: a bad line refuses the whole file; export reads back.
        day = c.dir + "/retreat.txt"
        with open(day, "w") as f:
            f.write("# home retreat\n\ndaily 05:30 --bell temple-bell --strikes 3 --name \"Wake-up bell\"\n"
                    "daily 06:00 --duration 45m --interval 15m   # first sit\n"
                    "weekdays 18:00 --sections \"sit 25m, walk 5m, sit 25m\"\n")
        bad = c.dir + "/bad.txt"
        with open(bad, "w") as f:
            f.write("daily 05:30 --bell temple-bell\nsometimes 06:00 --duration 45m\n")
        before = len(c.listing())
        rc, out, err = c.run("schedule", "import", bad)
        check(rc == 2 and "line 2" in err and len(c.listing()) == before, f"a timetable with a bad line is refused whole ({err.strip()[:100]})")
        rc, out, err = c.run("schedule", "import", day, "--replace")
        rc2, exported, err2 = c.run("schedule", "export")
        check(rc == 0 and len(c.listing()) == 3 and '--name "Wake-up bell"' in exported and "sit 25m, walk 5m, sit 25m" in exported,
              f"import --replace takes a retreat day; export gives it back ({out.strip()})")
        with open(c.dir + "/again.txt", "w") as f:
            f.write(exported)
        rc3, out3, err3 = c.run("schedule", "import", c.dir + "/again.txt", "--replace")
        rc4, exported2, err4 = c.run("schedule", "export")
        check(rc3 == 0 and exported2 == exported, "an export imports back to the same timetable")

        # A one-off time that has passed would never ring: `add` refuses it in one line (in
        # German too) and adds nothing; `import` leaves it out and names its line.
        before = len(c.listing())
        rc, out, err = c.run("schedule", "add", "2026-01-01 06:00", "--bell", "clear-strike")
        c.env["LANG"] = "de_DE.UTF-8"
        rc2, out2, err2 = c.run("schedule", "add", "2026-01-01 06:00", "--bell", "clear-strike")
        c.env["LANG"] = "C.UTF-8"
        check(rc == 2 and rc2 == 2 and "has passed" in err and "ist vorbei" in err2 and len(err.strip().splitlines()) == 1
              and len(c.listing()) == before, f"a one-off time that has passed is refused, nothing added ({err.strip()} | {err2.strip()})")
        with open(c.dir + "/old.txt", "w") as f:
            f.write("daily 05:45 --bell clear-strike\n2026-01-01 06:00 --bell clear-strike\n")
        rc, out, err = c.run("schedule", "import", c.dir + "/old.txt")
        check(rc == 0 and "added 1 entry" in out and "(line 2)" in err and len(c.listing()) == before + 1,
              f"import leaves out a one-off time that has passed and names its line ({out.strip()} | {err.strip()[:90]})")
    finally:
        c.close()

    # A scheduled sit never interrupts what plays: it waits for the device (10 minutes;
    # 3 s here), starts when the device is free, and is recorded as missed otherwise.
    c = Case()
    c.env["STILLMOMENT_SCHEDULE_WAIT"] = "3"
    try:
        c.run("timer", "24h", "--device", "null", "--detach")
        at = int(time.time()) + 3
        c.run("schedule", "add", stamp(at), "--duration", "20s", "--device", "null", "--name", "waits")
        time.sleep(at - time.time() + 1.0)
        rc, st, err = c.run("status", "--json")
        playing = json.loads(st).get("duration") == 86_400_000 if rc == 0 else False
        c.run("stop")
        time.sleep(2.5)
        waited = [e for e in c.listing() if e.get("name") == "waits"]
        check(playing and waited and (waited[0].get("lastOutcome") or "").startswith("ran"),
              f"a scheduled sit waits while a sit plays (which plays on) and starts once it ends ({waited})")
        c.run("stop")
        c.run("timer", "24h", "--device", "null", "--detach")
        at = int(time.time()) + 3
        c.run("schedule", "add", stamp(at), "--duration", "20s", "--device", "null", "--name", "gives up")
        time.sleep(at - time.time() + 5.0)
        given = [e for e in c.listing() if e.get("name") == "gives up"]
        check(given and (given[0].get("lastOutcome") or "").startswith("missed"),
              f"…and is recorded as missed when the device stays busy past its wait ({given})")
        c.run("stop")
    finally:
        c.close()

    schedule_data()

    # A daemon with schedules does not exit when idle; 50 entries cost no measurable CPU.
    c = Case(idle_exit="2")
    try:
        for k in range(50):
            c.run("schedule", "add", f"daily {k // 6 + 1:02d}:{(k * 7) % 60:02d}", "--bell", "clear-strike") if k < 49 else None
        rc, out, err = c.run("schedule", "add", "weekends 08:00", "--duration", "20m")
        pid = c.daemon_pid()
        time.sleep(3.5)
        alive = pid is not None and os.path.exists(f"/proc/{pid}")
        check(alive, "a daemon with schedules outlives its idle exit (2 s here)")
        if alive:
            before = cpu_seconds(pid)
            time.sleep(10)
            used = cpu_seconds(pid) - before
            check(used <= 0.05, f"an idle daemon with 50 entries used {used:.2f} s of CPU in 10 s")
        rc, out, err = c.run("status")
        check(rc == 0 and "next" in out, f"status shows the next scheduled item ({out.strip()})")
    finally:
        c.close()

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
