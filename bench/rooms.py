#!/usr/bin/env python3
"""Rooms' budget (issue 35), measured on the daemons users run: three nodes on one machine,
each playing to its own room (a PulseAudio remap sink onto one channel of a shared null sink,
Tests/cli/roomsharness.py), all on one private mosquitto; `stillmoment ring temple-bell
--rooms all` from one node, RINGS times; each ring's onset found on every channel of one
capture of the shared sink, and the skew (latest onset less earliest) reported: median and
worst, with the nodes' devices kept open (output-standby keep-open, the set-up the README
gives) and, for comparison, opened for each ring (close). Target: ≤ 2 ms (aim ≤ 0.5 ms).

On one machine the nodes share one clock, so this is the engine's part of the skew (the
instant met on each output, its delay subtracted); between machines chrony's error adds to
it. Run with the release binary (make bench): BIN=.build/release/stillmoment python3
bench/rooms.py. Lines go to bench-out/results.txt in the format of bench/lib.sh."""
import os
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "cli"))
os.environ.setdefault("BIN", os.path.join(here, "..", ".build", "release", "stillmoment"))
import smtest  # noqa: E402
from smtest import report  # noqa: E402
from mqttharness import Broker, mosquitto_missing  # noqa: E402
from roomsharness import RATE, RoomsPulse, channels, first_onset, stop_recording  # noqa: E402

ROOMS = ["hall", "garden", "dining"]
RINGS = int(os.environ.get("RINGS", "8"))


def frames(path):
    try:
        return os.path.getsize(path) // (2 * len(ROOMS))
    except OSError:
        return 0


def skews(nodes, pulse, work):
    out = []
    for k in range(RINGS):
        for h in nodes:
            h.run("stop")
        for h in nodes:
            h.wait_idle(10)
        path = os.path.join(work, f"ring-{k}.raw")
        rec = pulse.record(nodes[0], path)
        smtest.wait_for(lambda: frames(path) > RATE // 2, 10, 0.05)
        r = nodes[0].run("ring", "temple-bell", "--rooms", "all")
        assert r.rc == 0, r
        since = frames(path)

        def heard():
            if frames(path) < since + 2 * RATE:
                return None
            starts = [first_onset(c) for c in channels(path, len(ROOMS))]
            return starts if all(s is not None for s in starts) else None
        starts = smtest.wait_for(heard, 10, 0.1)
        stop_recording(rec)
        if not starts:
            raise SystemExit(f"ring {k}: not heard in every room")
        out.append((max(starts) - min(starts)) * 1000 / RATE)
        os.unlink(path)
    return out


def main():
    why = mosquitto_missing() or smtest.pulse_missing()
    if why:
        raise SystemExit(f"bench/rooms.py: {why}")
    work = tempfile.mkdtemp(prefix="sm-rooms-")
    os.makedirs(work + "/mq")
    os.makedirs(work + "/pa")
    broker = Broker(work + "/mq").start()
    pulse = RoomsPulse(work + "/pa", ROOMS).start()
    homes = []
    try:
        for standby in ("keep-open", "close"):
            nodes = []
            for room in ROOMS:
                folder = os.path.join(work, f"{standby}-{room}")
                os.makedirs(folder)
                h = smtest.Home(folder, idle_exit="120", STILLMOMENT_TEST_CLOCK="synchronised", **pulse.env)
                homes.append(h)
                for args in (("settings", "set", "device", f"pulse:{room}"), ("settings", "set", "output-standby", standby),
                             ("room", "set", room)):
                    assert h.run(*args).rc == 0
                h.daemon = h.start_daemon()
                assert h.run("mqtt", "enable", "--broker", broker.address, "--node", f"{standby}-{room}").rc == 0
                nodes.append(h)
            assert smtest.wait_for(lambda: all(len([n for n in (h.json("rooms", "--json") or []) if n["node"].startswith(standby)])
                                               == len(ROOMS) for h in nodes), 15, 0.2)
            s = skews(nodes, pulse, work)
            median, worst = statistics.median(s), max(s)
            label = "devices kept open" if standby == "keep-open" else "devices opened per ring"
            report(f"rooms: skew between 3 rooms, {label}, median of {RINGS} rings", f"{median:.3f}", "ms",
                   "<= 2 (aim <= 0.5)" if standby == "keep-open" else "none: for comparison", median <= 2 or standby == "close")
            report(f"rooms: skew between 3 rooms, {label}, worst of {RINGS} rings", f"{worst:.3f}", "ms",
                   "<= 2" if standby == "keep-open" else "none: for comparison", worst <= 2 or standby == "close")
            for h in nodes:
                h.close()
    finally:
        for h in homes:
            h.close()
        pulse.stop()
        broker.stop()


if __name__ == "__main__":
    main()
