#!/usr/bin/env python3
"""The command line as a careless user or an attacker uses it: huge and negative numbers,
conflicting flags, hostile tags and file names, and the daemon's socket fed the same.

Run from the repository root: python3 Tests/cli/cli-tests.py (BIN overrides the binary,
default .build/debug/stillmoment). Each check prints "ok: ..." or "FAILED: ...", the
script ends with "N passed, N failed" and exits 1 if any check failed. Every case has its
own STILLMOMENT_HOME and XDG_RUNTIME_DIR; every daemon it starts is killed by its PID.
"""
import json
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
FIX = os.path.join(ROOT, "Tests", "Fixtures")
passed = failed = 0
daemons = set()


def check(cond, text):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {text}", flush=True)
    else:
        failed += 1
        print(f"FAILED: {text}", flush=True)
    return bool(cond)


class Case:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sm-cli-")
        self.env = dict(os.environ, STILLMOMENT_HOME=self.dir + "/home", XDG_RUNTIME_DIR=self.dir + "/run",
                        LANG="C.UTF-8", STILLMOMENT_IDLE_EXIT="30")
        self.env.pop("LC_ALL", None)
        os.makedirs(self.dir + "/run", mode=0o700)

    def run(self, *args, env=None, timeout=60):
        p = subprocess.run([BIN, *args], env=env or self.env, capture_output=True, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def daemon_pid(self):
        try:
            with open(self.dir + "/run/stillmoment/daemon.lock") as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def close(self):
        pid = self.daemon_pid()
        if pid:
            daemons.add(pid)
        for pid in list(daemons):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            daemons.discard(pid)
        shutil.rmtree(self.dir, ignore_errors=True)


def one_line_error(rc, out, err, code=2):
    lines = [l for l in err.splitlines() if l.strip()]
    return rc == code and len(lines) == 1 and "\x1b" not in err


def main():
    # 1. Numbers a user can type: refused in one line with exit 2, never a trap (132).
    c = Case()
    try:
        for args in (["timer", "1e15"], ["timer", "99999999999999999:00"], ["settings", "set", "duration", "1e15"],
                     ["list", "--max-duration", "1e300"], ["timer", "5m", "--preparation", "1e15"],
                     ["timer", "5m", "--interval", "1e15"], ["timer", "5m", "--interval", "0.001s"],
                     ["settings", "set", "interval", "0.001s"], ["timer", "5m", "--bells", "99999999999999999s"],
                     ["timer", "-5m"], ["timer", "inf"], ["timer", "nan"], ["timer", "0x10"],
                     ["timer", "5m", "--gong-volume", "1e309"], ["timer", "5m", "--strikes", "99999999999999999999"]):
            rc, out, err = c.run(*args, "--device", "null") if args[0] == "timer" else c.run(*args)
            check(one_line_error(rc, out, err), f"`{' '.join(args)}` is refused in one line with exit 2 (exit {rc}: {err.strip()[:110]})")
        # Device names are read by one guard: an inline ALSA definition (ALSA's file plugin
        # runs FILE="|cmd"; file: and tee: write any file) is refused from every way in.
        proof = c.dir + "/proof"
        for device in (f'file:FILE="|touch {proof}",FORMAT=raw', f"file:FILE={proof},FORMAT=raw", f"file:'{proof}'",
                       f"tee:null,{proof},raw", "tee:null,proof,raw", "alsa:tee:null,proof,raw", "plug:SLAVE=file"):
            for args in (["timer", "1m", "--foreground", "--device", device], ["timer", "1m", "--detach", "--device", device],
                         ["settings", "set", "device", device], ["preset", "save", "p", "--device", device],
                         ["play", "x", "--device", device]):
                rc, out, err = c.run(*args)
                check(one_line_error(rc, out, err) and "refused" in err and not os.path.exists(proof)
                      and not os.path.exists(os.path.join(ROOT, "proof")),
                      f"`{' '.join(args[:2])} … --device {device[:30]}` is refused in one line, nothing written (exit {rc}: {err.strip()[:90]})")
        rc, out, err = c.run("settings", "set", "device", "plughw:CARD=Headphones,DEV=0")
        check(rc == 0, f"a card's name by ALSA's own form is a setting (exit {rc}: {err.strip()[:80]})")
        c.run("settings", "reset", "device")
        rc, out, err = c.run("timer", "5m", "--bells", "-2m", "--preparation", "off", "--output", c.dir + "/b.wav")
        check(rc == 0 and os.path.exists(c.dir + "/b.wav"), f"`--bells -2m` is a value, not an unknown option (exit {rc}: {err.strip()[:80]})")
        # --format: a 16-bit PCM WAV (dithered) or 32-bit float (the default); the same session either way.
        import struct
        def wav_format(path):
            with open(path, "rb") as f:
                head = f.read(256)
            i = head.find(b"fmt ")
            tag, ch, rate = struct.unpack_from("<HHI", head, i + 8)
            bits = struct.unpack_from("<H", head, i + 22)[0]
            return tag, ch, rate, bits, os.path.getsize(path)
        rc16, _, err16 = c.run("timer", "1m", "--preparation", "off", "--output", c.dir + "/s16.wav", "--format", "s16")
        rcf, _, errf = c.run("timer", "1m", "--preparation", "off", "--output", c.dir + "/f32.wav")
        if rc16 == 0 and rcf == 0:
            a, b = wav_format(c.dir + "/s16.wav"), wav_format(c.dir + "/f32.wav")
            check(a[:4] == (1, 2, 44100, 16) and b[:4] == (3, 2, 44100, 32) and abs(a[4] * 2 - b[4]) < 1024,
                  f"--format s16 writes 16-bit PCM, half the size of the float default ({a}, {b})")
        else:
            check(False, f"--format s16 renders (exit {rc16}: {err16.strip()[:80]}; {rcf}: {errf.strip()[:80]})")
        for args in (["--output", c.dir + "/bad.wav", "--format", "mp3"], ["--format", "s16", "--device", "null"]):
            rc, out, err = c.run("timer", "1m", *args)
            check(one_line_error(rc, out, err) and not os.path.exists(c.dir + "/bad.wav"),
                  f"`timer 1m {' '.join(a for a in args if not a.startswith('/'))}` is refused in one line, exit 2 ({err.strip()[:80]})")
        rc, out, err = c.run("timer", "--nope")
        check(rc == 2, f"an unknown option exits 2, not ArgumentParser's 64 (exit {rc})")
        rc, out, err = c.run("timer", "5m", "--output", c.dir + "/x.wav", "--detach")
        check(one_line_error(rc, out, err) and not os.path.exists(c.dir + "/x.wav"), f"--output with --detach is refused ({err.strip()[:80]})")
        rc, out, err = c.run("timer", "1m", "--device", "no-such-device-xyz", "--foreground")
        check(rc == 3 and len(err.strip().splitlines()) == 1, f"a device that cannot open exits 3 in one line (exit {rc})")
        os.makedirs(c.env["STILLMOMENT_HOME"], exist_ok=True)
        with open(c.env["STILLMOMENT_HOME"] + "/settings.json", "w") as f:
            f.write("{ not json")
        rc, out, err = c.run("timer", "1m", "--device", "null", "--foreground")
        check(rc == 1 and "settings" in err, f"a damaged settings file is a failure (exit 1), not bad input (exit {rc}: {err.strip()[:90]})")
        with open(c.env["STILLMOMENT_HOME"] + "/settings.json", "w") as f:
            f.write('{"duration": "20m", "durration": "5m"}')
        rc, out, err = c.run("timer", "1m", "--device", "null", "--foreground")
        check(rc == 1 and "durration" in err and "is not a setting" in err and len(err.strip().splitlines()) == 1,
              f"a key in settings.json that is no setting is named, not dropped (exit {rc}: {err.strip()[:90]})")
        os.unlink(c.env["STILLMOMENT_HOME"] + "/settings.json")
        rc, out, err = c.run("--help")
        check(rc == 0 and "Exit codes" in out and "24 h" in out, "--help lists the exit codes and value ranges")
    finally:
        c.close()

    # 2. The library: search, prefixes, --album, --from past the end, hostile tags and names.
    c = Case()
    try:
        hostile = c.dir + "/hostile.mp3"
        title = "x\x1b]0;t\x07\x1b[2J title"
        wav = c.dir + "/t.wav"
        subprocess.run(["sox", "-q", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "3", "sine", "440", "vol", "0.3"], check=True)
        subprocess.run(["lame", "--quiet", "--tt", title, "--ta", "T\x1b[31m", wav, hostile], check=True)
        rc, out, err = c.run("import", hostile)
        check(rc == 0 and "\x1b" not in out + err and "\x07" not in out + err, f"a title with escape sequences imports and prints without them ({out.strip()[:80]!r})")
        rc, out, err = c.run("list")
        check(rc == 0 and "\x1b" not in out and "title" in out, "list prints the hostile title without control characters")
        rc, out, err = c.run("list", "--json")
        data = json.loads(out)
        check(data and "\x1b" in data[0]["name"], "list --json keeps the title as it is, escaped by JSON")
        mid = data[0]["id"]
        rc, out, err = c.run("list", "--search", "no such thing")
        check(rc == 0 and "nothing in the library matches" in out, f"list --search without matches says so ({out.strip()})")
        rc, out, err = c.run("show", mid[:2])
        check(rc == 0 and mid in out, f"a unique id prefix of 2 characters finds the meditation (exit {rc})")
        rc, out, err = c.run("edit", mid[:8], "--album", "Morning")
        rc2, out2, _ = c.run("show", mid, "--json")
        check(rc == 0 and json.loads(out2)["album"] == "Morning", "edit --album sets the album")
        rc, out, err = c.run("play", mid, "--from", "9:00", "--foreground", "--device", "null")
        check(one_line_error(rc, out, err) and "past the end" in err, f"play --from past the end is refused ({err.strip()[:100]})")
        # Text-direction characters (U+202E shows what follows reversed) from a tag are not
        # printed; a tab or one of them in a name one gives is refused.
        bidi = c.dir + "/bidi.mp3"
        subprocess.run(["lame", "--quiet", "--tt", "evil\u202egpj.exe\u2066x\u2069", "--ta", "T\u200f", wav, bidi], check=True)
        rc, out, err = c.run("import", bidi)
        rc2, listed, _ = c.run("list")
        check(rc == 0 and rc2 == 0 and "evilgpj.exe" in listed and not any(ch in out + err + listed for ch in "\u202e\u2066\u2069\u200f"),
              f"a title with text-direction characters imports and prints without them ({listed.strip()[-60:]!r})")
        for args in (["preset", "save", "a\tb", "20m"], ["preset", "save", "a\u202eb", "20m"],
                     ["schedule", "add", "daily 06:00", "--bell", "temple-bell", "--name", "a\tb"],
                     ["edit", mid[:8], "--name", "a\tb"], ["edit", mid[:8], "--teacher", "x\u202ey"]):
            rc, out, err = c.run(*args)
            check(one_line_error(rc, out, err) and "name" in err, f"`{' '.join(args[:2])}` with a tab or U+202E in a name is refused ({err.strip()[:90]!r})")
        raw = os.fsencode(c.dir) + b"/caf\xe9 talk.mp3"
        shutil.copy(hostile, raw)
        p = subprocess.run([os.fsencode(BIN), b"import", raw], env=c.env, capture_output=True)
        check(p.returncode == 0, f"a file name that is not UTF-8 imports (exit {p.returncode}: {p.stderr.decode('utf-8', 'replace').strip()[:80]})")
    finally:
        c.close()

    # 3. The daemon's socket fed the numbers that used to kill it: refused, and it lives on.
    c = Case()
    try:
        rc, out, err = c.run("timer", "24h", "--device", "null", "--detach")
        pid = c.daemon_pid()
        check(rc == 0 and pid, f"a daemon runs a timer (exit {rc})")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(c.dir + "/run/stillmoment/control.sock")
        f = sock.makefile("rwb")

        def ask(obj):
            f.write((json.dumps(obj) + "\n").encode())
            f.flush()
            while True:
                line = json.loads(f.readline())
                if "event" not in line:
                    return line
        hello = ask({"hello": {"version": 1, "client": "cli-tests"}})
        version = hello.get("hello", {}).get("version", 1)
        if "error" in hello:  # a newer protocol: say hello in its version
            f.close()
            sock.close()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(c.dir + "/run/stillmoment/control.sock")
            f = sock.makefile("rwb")
            hello = ask({"hello": {"version": 2, "client": "cli-tests"}})
        n = 2
        for options in ({"duration": "1e15"}, {"duration": "99999999999999999:00"}, {"interval": "0.001s"},
                        {"bells": "99999999999999999s"}, {"preparation": "1e300"}):
            answer = ask({"id": n, "command": "timer", "args": {"options": options}})
            n += 1
            code = answer.get("error", {}).get("code")
            check(code == "bad-arguments", f"over the socket {options} is refused with bad-arguments ({code})")
        for args in ({"by": 1e300}, {"to": -1e300}, {"by": "x"}):
            answer = ask({"id": n, "command": "seek", "args": args})
            n += 1
            check("error" in answer, f"seek {args} is refused ({answer.get('error', {}).get('code')})")
        status = ask({"id": n, "command": "status"})
        check(status.get("result", {}).get("session") is not None and os.path.exists(f"/proc/{pid}"),
              "the daemon and its session live on after all of it")
        # The deep-nesting line that once held the loop for 37 s: refused, and others are answered at once.
        attack = ",".join(["[1," * 510 + "1" + "]" * 510] * 31)
        t0 = time.time()
        answer = ask(json.loads('{"id": 90, "command": "status"}') | {"args": {"x": 0}}) if False else None
        f.write(('{"id":90,"command":"status","args":{"x":[' + attack + ']}}\n').encode())
        f.flush()
        line = json.loads(f.readline())
        took = time.time() - t0
        code = line.get("error", {}).get("code")
        check(code == "bad-request" and took < 1.0, f"a 510-deep line is refused ({code}) in {took * 1000:.0f} ms")
        # The file first: while a makefile() of it is open, socket.close() leaves the
        # connection open (Python closes the descriptor with its last user), and the daemon
        # rightly counted it as a client: the 128th idle one below was refused. The loop
        # took the refusal for a hello answer and failed only when the daemon's close came
        # before its hello was sent (now and then in CI); it now wants the hello itself.
        f.close()
        sock.close()
        # A whole request from another client: the daemon's poll loop has gone round since
        # the close, so that connection is reaped before the 128 come; the status client's
        # own is reaped in the poll that accepts the first of them (hang-ups go first).
        c.run("status")

        # 128 clients that say hello and idle do not lock others out: the idlest make room.
        idle = []
        lost = []
        for k in range(128):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(c.dir + "/run/stillmoment/control.sock")
                s.sendall(b'{"hello":{"version":1,"client":"idle"}}\n')
                answer = s.recv(4096)   # its hello answer: it is one of the daemon's clients
                if b'"hello"' not in answer:
                    raise OSError(answer.decode("utf-8", "replace").strip()[:80] or "closed without an answer")
                idle.append(s)
            except OSError as e:
                lost.append(f"client {k + 1}: {e}")
                s.close()
            time.sleep(0.003)
        rc0, out0, err0 = c.run("status")
        time.sleep(10.5)
        t0 = time.time()
        rc, out, err = c.run("status")
        check(len(idle) == 128 and rc0 != 0 and "too many clients" in err0,
              f"{len(idle)} idle clients fill the daemon (a new one is refused at first: exit {rc0}: "
              f"{err0.strip()[:70]})" + (f"; not connected: {'; '.join(lost[:3])}" if lost else ""))
        check(rc == 0, f"…and 10 s later the idlest make room: status answered in {(time.time() - t0) * 1000:.0f} ms (exit {rc}: {err.strip()[:80]})")
        for s in idle:
            s.close()
    finally:
        c.close()

    # 4. Another user's folder: the client sends nothing there and says why.
    if os.geteuid() == 0:
        c = Case()
        folder = c.dir + "/run/stillmoment"
        child = None
        try:
            os.chmod(c.dir, 0o755)
            os.chmod(c.dir + "/run", 0o755)
            os.mkdir(folder, 0o700)
            os.chown(folder, 65534, 65534)
            r, w = os.pipe()
            child = os.fork()
            if child == 0:      # a fake daemon, as nobody
                try:
                    os.close(r)
                    os.setgid(65534)
                    os.setuid(65534)
                    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    srv.bind(folder + "/control.sock")
                    srv.listen(4)
                    os.write(w, b"1")
                    srv.settimeout(8)
                    data = b""
                    try:
                        conn, _ = srv.accept()
                        mark = os.open(folder + "/received", os.O_WRONLY | os.O_CREAT, 0o666)
                        os.write(mark, b"connected;")
                        os.close(mark)
                        conn.settimeout(2)
                        conn.sendall(b'{"hello":{"version":1,"pid":1,"home":"/x\u001b[2J"}}\n')
                        data = conn.recv(65536)
                    except OSError:
                        pass
                    fd = os.open(folder + "/received", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
                    os.write(fd, data)
                    os.close(fd)
                finally:
                    os._exit(0)
            os.close(w)
            listening = os.read(r, 1) == b"1"     # else the fake never listened: no refusal is shown
            os.close(r)
            check(listening, "the fake daemon (as nobody) listens in the folder")
            rc, out, err = c.run("status")
            time.sleep(0.2)
            check(rc != 0 and "another user" in err and len(err.strip().splitlines()) == 1,
                  f"a runtime folder of another user is refused in one line (exit {rc}: {err.strip()[:120]})")
            rc, out, err = c.run("timer", "5m", "--device", "null")
            check(rc != 0 and "another user" in err, f"…and no daemon is started or sent a timer there (exit {rc})")
        finally:
            if child:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            received = open(folder + "/received", "rb").read() if os.path.exists(folder + "/received") else b""
            check(received == b"", f"the fake daemon was not even connected to ({received[:60]!r})")
            c.close()

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
