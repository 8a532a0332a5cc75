"""Buttons, the LED and hooks through the CLI and a real daemon (the kernel's evdev path
is the sound-card rig's: hw/button.py). `hooks add/list/remove` and `button add/list/remove`
with their refusals; an on-end hook of a real sit writes its environment to a file; an
on-start hook that hangs holds up nothing; the LED on a file tree shaped like sysfs;
`button test` on a FIFO carrying input events; a device the daemon may not read, then may."""
import grp
import os
import pwd
import struct
import subprocess
import time

import smtest
from smtest import one_line_error, wait_for


def test_hooks_and_buttons_are_stored_checked_and_listed(home):
    r = home.run("hooks", "add", "on-end", "env", "--flag", "a b")
    assert r.rc == 0, r.err
    assert r.out.startswith("hook 1: on-end /") and '"a b"' in r.out      # found in PATH, stored as a path
    assert one_line_error(home.run("hooks", "add", "on-middle", "/bin/true"))
    assert one_line_error(home.run("hooks", "add", "on-end", "no-such-program-here"))
    assert "on-end" in home.run("hooks", "list").out
    assert home.run("hooks", "remove", "1").rc == 0
    assert one_line_error(home.run("hooks", "remove", "1"))

    # Buttons: the device guard, the key, the actions, each refused in one line, exit 2.
    for args in (["/tmp/x", "--press", "stop"], ["/dev/input/../mem", "--press", "stop"],
                 ["/dev/input/event0", "--key", "KEY_NOPE", "--press", "stop"],
                 ["/dev/input/event0", "--press", "dance"], ["/dev/input/event0", "--press", "timer --bogus 3"],
                 ["/dev/input/event0"]):
        r = home.run("button", "add", *args)
        assert one_line_error(r), (args, r.err)
    r = home.run("button", "add", "/dev/input/by-path/none-event", "--key", "KEY_SPACE",
                 "--press", "timer --preset morning", "--hold", "stop", "--double", "toggle")
    assert r.rc == 0, r.err
    assert "no such device" in r.err                  # said, and the daemon keeps trying
    listed = home.run("button", "list").out
    assert "KEY_SPACE" in listed and '--press "timer --preset morning"' in listed and "--hold stop" in listed
    # A daemon that watches a button was started and stays; it says what it waits for.
    pid = home.daemon_pid()
    assert pid
    assert home.run("button", "remove", "1").rc == 0
    assert one_line_error(home.run("button", "test", "/etc/passwd"))


def test_an_on_end_hook_gets_the_sits_facts_and_a_hanging_one_blocks_nothing(home, tmp_path):
    out = tmp_path / "env.txt"
    assert home.run("hooks", "add", "on-end", "/bin/sh", "-c", 'env > "$0"', str(out)).rc == 0
    assert home.run("hooks", "add", "on-start", "/bin/sleep", "60").rc == 0
    assert home.run("preset", "save", "quick", "2s", "--preparation", "off").rc == 0
    home.start_daemon()
    t = time.monotonic()
    r = home.run("timer", "--preset", "quick", "--device", "null")
    assert r.rc == 0, r.err
    assert time.monotonic() - t < 30                  # the hanging on-start hook held up nothing
    assert wait_for(lambda: out.exists() and "STILLMOMENT_END_REASON" in out.read_text(), 10)
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert env["STILLMOMENT_EVENT"] == "on-end"
    assert env["STILLMOMENT_KIND"] == "timer"
    assert env["STILLMOMENT_PRESET"] == "quick" and env["STILLMOMENT_NAME"] == "quick"
    assert env["STILLMOMENT_END_REASON"] == "completed"
    assert env["STILLMOMENT_PLANNED_SECONDS"] == "2"
    assert int(env["STILLMOMENT_HEARD_SECONDS"]) >= 2
    # The hook wrote its file before it exited; the daemon logs "done" once it has reaped it.
    log_path = home.dir + "/daemon.log"
    assert wait_for(lambda: "hook 1 (on-end /bin/sh) done" in open(log_path).read(), 10), open(log_path).read()[-2000:]


def test_the_led_follows_the_session_on_a_sysfs_shaped_tree(new_home, tmp_path):
    leds = tmp_path / "leds"
    (leds / "sit").mkdir(parents=True)
    for name, text in (("brightness", "0"), ("max_brightness", "1"), ("trigger", "[none] timer"),
                       ("delay_on", ""), ("delay_off", "")):
        (leds / "sit" / name).write_text(text)
    home = new_home(STILLMOMENT_LEDS=str(leds))
    assert one_line_error(home.run("settings", "set", "led", "../x"))
    assert home.run("settings", "set", "led", "sit").rc == 0
    home.start_daemon()
    read = lambda name: (leds / "sit" / name).read_text()   # noqa: E731
    assert wait_for(lambda: read("brightness") == "0" and read("trigger") == "none", 5)
    assert home.run("timer", "24h", "--preparation", "off", "--device", "null", "--detach").rc == 0
    assert wait_for(lambda: read("brightness") == "1" and read("trigger") == "none", 5)
    assert home.run("pause").rc == 0
    assert wait_for(lambda: read("trigger") == "timer" and read("delay_on") == "1000", 5)
    assert home.run("stop").rc == 0
    assert wait_for(lambda: read("trigger") == "none" and read("brightness") == "0", 5)


def test_button_test_prints_the_keys_a_device_sends(new_home, tmp_path):
    """`button test` on a FIFO under a test root that carries the kernel's struct input_event
    (24 bytes on 64-bit: the time, type, code, value): each key edge, named, in order; a
    SYN or a relative motion is not a key; the device going away ends it in one line."""
    root = tmp_path / "input"
    root.mkdir()
    fifo = str(root / "event3")
    os.mkfifo(fifo, 0o600)
    h = new_home(STILLMOMENT_INPUT_ROOT=str(root))
    p = h.track(subprocess.Popen([smtest.BIN, "button", "test", fifo, "--seconds", "5"], env=h.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    w = os.open(fifo, os.O_WRONLY)         # waits for the reader
    ev = lambda t, c, v: struct.pack("qqHHi", 0, 0, t, c, v)  # noqa: E731
    os.write(w, ev(1, 28, 1) + ev(0, 0, 0) + ev(2, 0, 5) + ev(1, 28, 2) + ev(1, 28, 0) + ev(0, 0, 0) + ev(1, 57, 1))
    time.sleep(0.3)
    os.close(w)                            # unplugged
    out, err = p.communicate(timeout=10)
    keys = [ln for ln in out.splitlines() if ln.startswith("KEY_")]
    assert keys == ["KEY_ENTER (28) down", "KEY_ENTER (28) repeat", "KEY_ENTER (28) up", "KEY_SPACE (57) down"], (out, err)
    assert p.returncode != 0 and len(err.strip().splitlines()) == 1 and "went away" in err, (p.returncode, err)


def test_a_device_the_daemon_may_not_read_is_said_once_and_opened_when_its_permissions_allow(open_home):
    """The daemon as `nobody`, its button a root-owned FIFO of mode 0600 (what a user not in
    the `input` group meets): one line in its log naming the group; `button test` refused
    in one line. Then the node's permissions change (as udev's group or a chmod would):
    the daemon opens it at once (inotify sees the change; nothing is tried on a timer) and a
    press starts the timer."""
    h = open_home
    nobody = smtest.as_user()
    uid, gid = pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    base = h.dir + "/nobody"
    for d, mode in (("", 0o700), ("/home", 0o700), ("/run", 0o700), ("/input", 0o755)):
        os.mkdir(base + d, mode)
        os.chown(base + d, uid, gid)
    fifo = base + "/input/event0"
    os.mkfifo(fifo, 0o600)                       # root's, unreadable for nobody
    env = dict(h.env, HOME=base, STILLMOMENT_HOME=base + "/home", XDG_RUNTIME_DIR=base + "/run",
               STILLMOMENT_INPUT_ROOT=base + "/input", STILLMOMENT_IDLE_EXIT="60")
    t = h.run("button", "test", fifo, "--seconds", "1", env=env, prefix=nobody)
    assert t.rc != 0 and len(t.err.strip().splitlines()) == 1 and "'input'" in t.err, t
    r = h.run("button", "add", fifo, "--key", "KEY_ENTER", "--press", "timer 24h --preparation off --device null",
              env=env, prefix=nobody)
    assert r.rc == 0, r
    log = base + "/home/daemon.log"
    said = lambda: open(log, errors="replace").read() if os.path.exists(log) else ""  # noqa: E731
    assert wait_for(lambda: "permission denied" in said() and "'input' group" in said(), 10), said()
    # Read again (another button added: the CLI asks the daemon to reread them all): the
    # same problem is not said again.
    assert h.run("button", "add", base + "/input/event9", "--press", "stop", env=env, prefix=nobody).rc == 0
    assert wait_for(lambda: "event9" in said(), 10), said()
    time.sleep(0.3)
    assert said().count("permission denied") == 1, said()
    os.chmod(fifo, 0o666)
    t0 = time.monotonic()
    assert wait_for(lambda: "watching" in said(), 5), said()
    opened = time.monotonic() - t0
    w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        def edge(down):
            now = time.clock_gettime(time.CLOCK_MONOTONIC)
            sec, usec = int(now), int((now % 1) * 1e6)
            os.write(w, struct.pack("qqHHi", sec, usec, 1, 28, int(down)) + struct.pack("qqHHi", sec, usec, 0, 0, 0))
        edge(True)
        time.sleep(0.05)
        edge(False)
        started = wait_for(lambda: '"running"' in h.run("status", "--json", env=env, prefix=nobody).out, 10)
    finally:
        os.close(w)
    h.run("stop", env=env, prefix=nobody)
    print(f"opened {opened * 1000:.0f} ms after the chmod")
    assert started, said()
    assert opened < 2.0, "seen by inotify, not by a 2-s retry"
