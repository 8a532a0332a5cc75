#!/usr/bin/env python3
"""The rig's button test (guest side): a virtual input device made with uinput presses
KEY_ENTER for the daemon, on the kernel's own evdev path. Run by hw/inside.sh after
inside.py, as `button.py OUT`; writes OUT/button.json (checks and figures), which
`measure.py analyse` reports on the host.

A press starts the preset's timer (heard on the loopback card), a hold (1.3 s) stops it,
contact chatter (five edges within a few ms, then the release) counts as one press, and a
device destroyed and made again (unplugged and plugged) is opened again by the daemon and
works. Python's evdev package is not here: the uinput ioctls are written with fcntl.
"""
import fcntl
import glob
import json
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "cli"))
import inside  # noqa: E402  (the recorder, the binary, the guest's environment)

NAME = b"stillmoment-rig-button"
EV_SYN, EV_KEY, KEY_ENTER = 0, 1, 28
UI_SET_EVBIT, UI_SET_KEYBIT = 0x40045564, 0x40045565
UI_DEV_SETUP, UI_DEV_CREATE, UI_DEV_DESTROY = 0x405C5503, 0x5501, 0x5502
mono = inside.mono


class VirtualButton:
    """A uinput device with one key."""

    def __init__(self):
        self.fd = os.open("/dev/uinput", os.O_WRONLY | os.O_NONBLOCK)
        fcntl.ioctl(self.fd, UI_SET_EVBIT, EV_KEY)
        fcntl.ioctl(self.fd, UI_SET_KEYBIT, KEY_ENTER)
        # struct uinput_setup: input_id (bustype BUS_VIRTUAL, vendor, product, version), name[80], ff_effects_max
        fcntl.ioctl(self.fd, UI_DEV_SETUP, struct.pack("HHHH80sI", 0x06, 0x1, 0x1, 1, NAME, 0))
        fcntl.ioctl(self.fd, UI_DEV_CREATE)
        self.node = None
        end = mono() + 5
        while mono() < end and not self.node:
            for d in glob.glob("/sys/class/input/event*"):
                try:
                    if open(d + "/device/name", "rb").read().strip() == NAME and os.path.exists("/dev/input/" + os.path.basename(d)):
                        self.node = "/dev/input/" + os.path.basename(d)
                except OSError:
                    pass
            time.sleep(0.02)
        if not self.node:
            raise RuntimeError("the uinput device has no /dev/input node")

    def key(self, down):
        """One edge and its SYN report; the kernel stamps them."""
        os.write(self.fd, struct.pack("llHHi", 0, 0, EV_KEY, KEY_ENTER, 1 if down else 0)
                 + struct.pack("llHHi", 0, 0, EV_SYN, 0, 0))

    def destroy(self):
        fcntl.ioctl(self.fd, UI_DEV_DESTROY)
        os.close(self.fd)


def loopback_up():
    """The guest's `lo` up (the kernel starts with it down), by SIOCSIFFLAGS: no `ip`
    needed in the host's tree the guest runs in."""
    import socket
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))
    finally:
        s.close()


def ha_press(result, check, wait, sounding, rec):
    """Home Assistant's "start preset" button through a mosquitto in the guest (on its
    loopback), published over one kept connection: the press to the session's start and to
    its first sound on the card."""
    import mqttharness
    loopback_up()
    port = 18830
    conf = os.path.join(inside.WORK, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    broker = subprocess.Popen([mqttharness.tool("mosquitto"), "-c", conf], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pub = None
    try:
        _, _, p = inside.run(["mqtt", "enable", "--broker", f"127.0.0.1:{port}", "--node", "rig"])
        topic = "stillmoment/rig"
        end = mono() + 10
        while mono() < end:
            try:
                pub = mqttharness.Publisher(port, client_id="rig-home-assistant")
                break
            except (OSError, RuntimeError):
                time.sleep(0.1)
        log = os.path.join(inside.OUT, "button.log")
        end = mono() + 15
        while mono() < end and "MQTT: connected" not in open(log, errors="replace").read():
            time.sleep(0.05)
        connected = "MQTT: connected" in open(log, errors="replace").read()
        if not check(p.returncode == 0 and pub is not None and connected,
                     f"the daemon connects to a mosquitto in the guest ({(p.stdout + p.stderr).strip()[:160]})"):
            return
        pub.publish(f"{topic}/cmd/preset", "rig")
        time.sleep(0.5)
        t0 = mono()
        pub.publish(f"{topic}/cmd/start_preset", "PRESS")
        s = wait(lambda s: sounding(s), 5)
        t_session = mono()
        heard = rec.wait_sound(t0, 5)
        check(sounding(s) and heard is not None, "Home Assistant's start button (MQTT) starts the preset's timer, heard on the card")
        result["figures"]["ha_press_to_session_ms"] = (t_session - t0) * 1000
        if heard:
            result["figures"]["ha_press_to_sound_ms"] = (heard - t0) * 1000
        inside.run(["stop"])
        wait(lambda s: s.get("state") == "idle", 5)
        inside.run(["mqtt", "disable"])
    finally:
        if pub:
            pub.close()
        broker.terminate()
        try:
            broker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()


def main():
    out = sys.argv[1]
    result = {"checks": [], "figures": {}}

    def check(ok, text):
        result["checks"].append({"ok": bool(ok), "text": text})
        inside.say(f"button: {'passed' if ok else 'FAILED'}: {text}")
        return ok

    if not os.path.exists("/dev/uinput"):
        check(False, "/dev/uinput exists in the guest (uinput loaded)")
        json.dump(result, open(os.path.join(out, "button.json"), "w"))
        return 1
    dev = inside.plan.chosen(inside.CONFIG)[0]
    cap_dev, fmt, rate = dev["capture"]
    for d in (f"{inside.WORK}/home", f"{inside.WORK}/user"):
        os.makedirs(d, exist_ok=True)
    os.makedirs(f"{inside.WORK}/run", mode=0o700, exist_ok=True)
    guest = inside.Guest(dict(dev, name="button"))
    raw = os.path.join(inside.WORK, "button.raw")
    rec = inside.Recorder(raw, cap_dev, fmt, rate)
    rec.start()
    button = None
    try:
        rec.wait_started()
        button = VirtualButton()
        node = button.node
        inside.run(["preset", "save", "rig", "1m", "--preparation", "off", "--device", dev["device"]])
        guest.start_daemon()
        _, _, p = inside.run(["button", "add", node, "--key", "KEY_ENTER", "--press", "timer --preset rig", "--hold", "stop"])
        check(p.returncode == 0, f"stillmoment button add {node} --press 'timer --preset rig' --hold stop "
                                 f"({(p.stdout + p.stderr).strip()[:200]})")

        def status():
            return guest.client.request("status")[1]

        def sounding(s):
            return s.get("state") in ("preparation", "startGong", "running", "endGong")

        def wait(cond, timeout):
            end = mono() + timeout
            while mono() < end:
                s = status()
                if cond(s):
                    return s
                time.sleep(0.005)
            return status()

        time.sleep(0.5)
        # A press: its session starts and is heard.
        t0 = mono()
        button.key(True)
        time.sleep(0.06)
        button.key(False)
        s = wait(lambda s: s.get("session") is not None, 5)
        t_session = mono()
        heard = rec.wait_sound(t0, 5)
        first = s.get("session")
        check(first is not None and sounding(wait(sounding, 5)), "a press starts the preset's timer")
        check(heard is not None, "the press's timer is heard on the loopback card")
        # The press is taken on the release (the button has a hold action): from the release.
        result["figures"]["press_to_session_ms"] = (t_session - t0 - 0.06) * 1000
        if heard:
            result["figures"]["press_to_sound_ms"] = (heard - t0 - 0.06) * 1000

        # A hold stops it (not before 1 s).
        button.key(True)
        time.sleep(0.7)
        still = status()
        time.sleep(0.6)
        button.key(False)
        s = wait(lambda s: s.get("state") == "idle", 5)
        check(sounding(still) and s.get("state") == "idle",
              f"a hold stops it (at 0.7 s: {still.get('state')}; after: {s.get('state')})")
        rec.wait_silence(mono(), 0.2, 3)

        # Chatter: five edges within a few ms, then the release: one press, one session.
        t = mono()
        for down in (True, False, True, False, True):
            button.key(down)
        spread = (mono() - t) * 1000
        time.sleep(0.1)
        button.key(False)
        wait(sounding, 5)
        time.sleep(0.5)
        s = status()
        check(s.get("session") == first + 1 and sounding(s),
              f"chatter ({spread:.1f} ms for five edges) counts as one press (session {s.get('session')}, the first was {first})")
        guest.client.request("stop")
        wait(lambda s: s.get("state") == "idle", 5)

        # Unplugged and plugged again: the daemon opens it again as soon as its node is back (inotify) and a press works.
        button.destroy()
        button = None
        time.sleep(0.5)
        button = VirtualButton()
        same = button.node == node
        log = open(os.path.join(out, "button.log")).read() if os.path.exists(os.path.join(out, "button.log")) else ""
        t = mono()
        end = t + 6
        while mono() < end:
            log = open(os.path.join(out, "button.log")).read()
            if log.count("watching") >= 2:
                break
            time.sleep(0.05)
        reopened = log.count("watching") >= 2
        result["figures"]["replug_to_watching_s"] = mono() - t
        button.key(True)
        time.sleep(0.05)
        button.key(False)
        s = wait(lambda s: s.get("session") == first + 2 and sounding(s), 5)
        check(same and reopened and s.get("session") == first + 2 and sounding(s),
              f"unplugged and plugged again ({node} again: {same}), it is watched again and a press starts a timer "
              f"(session {s.get('session')})")
        check("went away" in log or "No such device" in log, "the daemon's log says the device went away")
        guest.client.request("stop")
        wait(lambda s: s.get("state") == "idle", 5)

        # `button test` on the real device: its name, then each edge as the kernel sent it.
        tester = subprocess.Popen([inside.BIN, "button", "test", button.node, "--seconds", "3"], env=inside.ENV,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            button.key(True)
            time.sleep(0.05)
            button.key(False)
            shown, err = tester.communicate(timeout=10)
        finally:
            if tester.poll() is None:
                tester.kill()
                tester.wait()
        check(tester.returncode == 0 and NAME.decode() in shown and "KEY_ENTER (28) down" in shown and "KEY_ENTER (28) up" in shown,
              f"`button test {button.node}` names the device and shows the key's edges ({(shown + err).strip()[-160:]!r})")

        ha_press(result, check, wait, sounding, rec)
    except Exception as e:  # noqa: BLE001 - reported to the host, which fails the run
        check(False, f"the button sequence ran ({type(e).__name__}: {e})")
    finally:
        try:
            guest.stop_daemon()
        except Exception:  # noqa: BLE001
            pass
        if button:
            button.destroy()
        rec.stop()
        if os.path.exists(raw):
            os.remove(raw)
    json.dump(result, open(os.path.join(out, "button.json"), "w"))
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
