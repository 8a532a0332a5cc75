#!/usr/bin/env python3
"""Faults a careless user or an attacker causes, against the real binary: the catalog
emptied, deleted and replaced by an older copy (no stored file lost; verify reports,
repair re-adopts), `library verify --repair` racing 20 imports, a daemon SIGKILLed in
the middle of a guided meditation on a paced device (the position kept within a few
seconds), a planted symlink at --output's temporary name in a sticky world-writable
folder, and a read-only store.

Run from the repository root: python3 Tests/cli/store-faults.py (BIN overrides the
binary). Prints ok:/FAILED:/skipped: lines and "N passed, N failed"; exits 1 on failure.
Every process started is stopped by its PID.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
BIN = os.path.abspath(os.environ.get("BIN", ".build/debug/stillmoment"))
FIX = os.path.join(ROOT, "Tests", "Fixtures")
passed = failed = 0
procs, daemons = [], set()


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)


class Home:
    def __init__(self, root):
        self.dir = tempfile.mkdtemp(prefix="sm-faults-", dir=root)
        self.home = self.dir + "/home"
        os.makedirs(self.dir + "/run", mode=0o700)
        self.env = dict(os.environ, STILLMOMENT_HOME=self.home, XDG_RUNTIME_DIR=self.dir + "/run", LANG="C.UTF-8",
                        STILLMOMENT_IDLE_EXIT="60")
        self.env.pop("LC_ALL", None)

    def run(self, *args, env=None, timeout=120):
        p = subprocess.run([BIN, *args], env=env or self.env, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        try:
            with open(self.dir + "/run/stillmoment/daemon.lock") as f:
                daemons.add(int(f.read().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        return p.returncode, p.stdout, p.stderr

    def stored(self):
        folder = self.home + "/Meditations"
        return {n: hashlib.sha256(open(folder + "/" + n, "rb").read()).hexdigest()
                for n in sorted(os.listdir(folder)) if not n.startswith(".")}

    def count(self):
        rc, out, err = self.run("list", "--json")
        return len(json.loads(out)) if rc == 0 else -1


def tones(folder, n, seconds=2):
    """n distinct small MP3s."""
    files = []
    for k in range(n):
        wav, mp3 = f"{folder}/t{k}.wav", f"{folder}/tone-{k}.mp3"
        subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "1", "-b", "16", wav, "synth", str(seconds), "sine",
                        str(200 + 37 * k), "vol", "0.2"], check=True)
        subprocess.run(["lame", "--quiet", "--tt", f"Tone {k}", wav, mp3], check=True)
        files.append(mp3)
    return files


def catalog_cases(root):
    h = Home(root)
    files = tones(h.dir, 6)
    h.run("import", *files[:3])
    db = h.home + "/library.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute(f"VACUUM INTO '{h.dir}/backup.sqlite'")
    con.close()
    h.run("import", *files[3:])
    before = h.stored()

    # Replaced by last week's copy: nothing deleted; verify says so; repair re-adopts.
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    shutil.copy(h.dir + "/backup.sqlite", db)
    rc_list, _, _ = h.run("list")
    rc_v, out_v, _ = h.run("library", "verify")
    check(h.stored() == before and rc_list == 0 and rc_v == 1 and out_v.count("has no catalog entry") == 3,
          f"an older catalog: no stored file lost, verify reports the 3 newer ones (exit {rc_v})")
    rc_r, out_r, _ = h.run("library", "verify", "--repair")
    check(rc_r == 0 and out_r.count("adopted") == 3 and h.count() == 6 and h.stored() == before,
          f"…and repair adopts them back ({h.count()} entries)")

    # Emptied and deleted: rebuilt from the files on the next command.
    for how in ("emptied", "deleted"):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
        if how == "emptied":
            open(db, "w").close()
        rc, out, err = h.run("list", "--json")
        n = len(json.loads(out)) if rc == 0 else -1
        check(rc == 0 and n == 6 and h.stored() == before and "rebuilt" in err,
              f"a catalog {how}: the next command rebuilds it from the 6 files, none lost ({n}; {err.strip()[:60]})")
        rc_v, out_v, _ = h.run("library", "verify")
        check(rc_v == 0, f"…and verify finds it consistent ({out_v.strip()})")


def race_case(root):
    h = Home(root)
    files = tones(h.dir, 20, seconds=1)
    lost = 0
    for rnd in range(2):
        for p in [subprocess.Popen([BIN, "delete", f"Tone {k}"], env=h.env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL) for k in range(20)]:
            p.wait()
        importers = [subprocess.Popen([BIN, "import", f], env=h.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      stdin=subprocess.DEVNULL) for f in files]
        procs.extend(importers)
        repairs = 0
        while any(p.poll() is None for p in importers):
            subprocess.run([BIN, "library", "verify", "--repair"], env=h.env, capture_output=True, timeout=60)
            repairs += 1
        ok = [p for p in importers if p.wait() == 0]
        rc, out, err = h.run("list", "--json")
        names = {m["name"] for m in json.loads(out)} if rc == 0 else set()
        missing = [k for k in range(20) if f"Tone {k}" not in names]
        rc_v, out_v, _ = h.run("library", "verify")
        lost += len(missing) + (0 if rc_v == 0 else 1)
        check(len(ok) == 20 and not missing and rc_v == 0,
              f"round {rnd + 1}: 20 imports racing {repairs} repairs: all landed ({len(ok)} ok, missing {missing}), verify {rc_v}")


def output_case(root):
    h = Home(root)
    sticky = tempfile.mkdtemp(prefix="sm-sticky-", dir=root)
    os.chmod(sticky, 0o1777)
    victim = sticky + "/victim"
    with open(victim, "w") as f:
        f.write("another user's file\n")
    try:
        os.chown(victim, 65534, 65534)
    except PermissionError:
        pass
    for planted in ("sit.wav.part", ".sit.wav.part", "sit.wav.tmp"):
        os.symlink(victim, f"{sticky}/{planted}")
    rc, out, err = h.run("timer", "30s", "--preparation", "off", "--output", sticky + "/sit.wav")
    content = open(victim).read()
    check(rc == 0 and content == "another user's file\n" and os.path.isfile(sticky + "/sit.wav")
          and not os.path.islink(sticky + "/sit.wav"),
          f"planted links at --output's temporary names: the victim is untouched, the render is a file (exit {rc})")
    os.symlink(victim, sticky + "/link.wav")
    rc, out, err = h.run("timer", "30s", "--output", sticky + "/link.wav")
    check(rc != 0 and open(victim).read() == "another user's file\n" and len(err.strip().splitlines()) == 1,
          f"--output onto a link is refused ({err.strip()[:90]})")
    rc, out, err = h.run("timer", "30s", "--output", "/dev/full")
    check(rc != 0 and os.path.exists("/dev/full") and not os.path.isfile("/dev/full"),
          f"--output /dev/full is refused ({err.strip()[:90]})")
    left = [n for n in os.listdir(sticky) if n.endswith(".part") and not os.path.islink(f"{sticky}/{n}")]
    check(not left, f"no temporary file is left behind ({left})")


def start_pulse(root):
    if not shutil.which("pulseaudio"):
        return None
    pa = tempfile.mkdtemp(prefix="sm-pa-", dir=root)
    os.makedirs(pa + "/run", mode=0o700)
    sock = pa + "/pulse.sock"
    p = subprocess.Popen(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                          "-L", "module-null-sink sink_name=sm",
                          "-L", f"module-native-protocol-unix socket={sock} auth-anonymous=1"],
                         env=dict(os.environ, HOME=pa, XDG_RUNTIME_DIR=pa + "/run"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return f"unix:{sock}"
        except OSError:
            time.sleep(0.05)
    return None


def sigkill_case(root):
    server = start_pulse(root)
    if not server:
        print("skipped: a daemon SIGKILLed mid-meditation (no paced device: pulseaudio is not installed)")
        return
    h = Home(root)
    h.env["PULSE_SERVER"] = server
    mp3 = tones(h.dir, 1, seconds=60)[0]
    h.run("import", mp3, "--name", "Long")
    h.run("play", "Long", "--device", "pulse", "--detach")
    time.sleep(12.5)
    rc, out, err = h.run("status", "--json")
    pos = json.loads(out).get("position", 0) / 1000 if rc == 0 else 0
    pid = max(daemons) if daemons else None
    with open(h.dir + "/run/stillmoment/daemon.lock") as f:
        pid = int(f.read().split()[0])
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    rc, out, err = h.run("show", "Long", "--json")
    saved = json.loads(out).get("lastPosition") if rc == 0 else None
    check(saved is not None and pos - 6 <= saved <= pos + 0.5,
          f"a daemon SIGKILLed at {pos:.1f} s: the position kept is {saved} s (within 6 s)")
    rc, out, err = h.run("play", "Long", "--resume", "--device", "pulse", "--detach")
    time.sleep(0.5)
    rc2, st, _ = h.run("status", "--json")
    resumed = json.loads(st).get("position", 0) / 1000 if rc2 == 0 else -1
    check(rc == 0 and saved is not None and abs(resumed - saved) < 2,
          f"…and play --resume starts there ({resumed:.1f} s)")
    h.run("stop")


def readonly_case(root):
    h = Home(root)
    mnt = tempfile.mkdtemp(prefix="sm-ro-", dir=root)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt], capture_output=True).returncode != 0:
        print("skipped: a read-only store (mount is not permitted here)")
        return
    try:
        env = dict(h.env, STILLMOMENT_HOME=mnt + "/home")
        h.run("import", os.path.join(FIX, "vbr.mp3"), env=env)
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        rc1, out1, _ = h.run("list", env=env)
        rc2, out2, _ = h.run("library", "verify", env=env)
        rc3, out3, err3 = h.run("import", os.path.join(FIX, "cbr.mp3"), env=env)
        check(rc1 == 0 and "VBR" in out1 and rc2 == 0 and rc3 != 0 and len(err3.strip().splitlines()) == 1,
              f"a read-only store lists and verifies; an import says why not ({err3.strip()[:90]})")
        subprocess.run(["mount", "-o", "remount,rw", mnt], check=True)
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/fill", "bs=1M", "count=80"], capture_output=True)
        rc1, out1, _ = h.run("list", env=env)
        rc3, out3, err3 = h.run("import", os.path.join(FIX, "cbr.mp3"), env=env)
        check(rc1 == 0 and rc3 != 0 and ("space" in err3 or "full" in err3),
              f"a full store lists; an import names the full disk ({err3.strip()[:90]})")
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


def main():
    root = tempfile.mkdtemp(prefix="sm-store-faults-")
    os.chmod(root, 0o755)
    try:
        catalog_cases(root)
        race_case(root)
        output_case(root)
        readonly_case(root)
        sigkill_case(root)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for pid in daemons:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(root, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
