"""Rooms: three daemons, each in its own home and its own network namespace (a veth link to
the broker's namespace: they meet only through the broker, as machines on a LAN; as a user
who may not make namespaces, on loopback), playing to
its own room (a PulseAudio remap sink onto one channel of a shared null sink; its socket is a
file, reached from every namespace), all on one private mosquitto. One capture of
that sink hears every room at once, so the skew between rooms is measured between its
channels: `ring --rooms all` from one node starts the gong in every room within 2 ms; a ring
for one room is heard there only; a ring whose instant has passed is not played late; a
node whose clock is not synchronised is left out and says why; `rooms` lists the nodes
with their room, state and clock. (Several nodes share this machine's one clock: each
node's clock state is simulated with STILLMOMENT_TEST_CLOCK; what adjtimex says is read
in the unit tests.)"""
import json
import os
import time

import pytest

import smtest
from mqttharness import Broker, mosquitto_missing
from roomsharness import RATE, RoomsPulse, Site, channels, first_onset, lag, onsets, stop_recording

ROOMS = ["hall", "garden", "dining"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The broker and the shared PulseAudio; the nodes' network namespaces when they can be
    made (root, as CI runs), else every node on loopback (a user's `make test`: the cases
    that cut one node's link are then skipped, saying why)."""
    why = mosquitto_missing() or smtest.pulse_missing()
    if why:
        pytest.fail(why)
    no_netns = Site.available()
    if no_netns:
        print(f"test_rooms: the nodes share loopback ({no_netns})")
    net = None if no_netns else Site(len(ROOMS)).up()
    broker = Broker(tmp_path_factory.mktemp("mq"), netns=net.broker if net else None).start()
    pulse = RoomsPulse(tmp_path_factory.mktemp("pa"), ROOMS).start()
    broker.net = net
    yield broker, pulse
    pulse.stop()
    broker.stop()
    if net:
        net.down()


def log(h):
    with open(h.dir + "/daemon.log", errors="replace") as f:
        return f.read()


def node(new_home, broker, pulse, k, clock="synchronised"):
    room = ROOMS[k]
    h = new_home(idle_exit="120", STILLMOMENT_TEST_CLOCK=clock, **pulse.env)
    for args in (("settings", "set", "device", f"pulse:{room}"), ("settings", "set", "output-standby", "keep-open"),
                 ("room", "set", room)):
        r = h.run(*args)
        assert r.rc == 0, r
    net = broker.net
    h.prefix = net.prefix(k) if net else ()
    h.daemon = h.start_daemon(prefix=h.prefix)
    r = h.run("mqtt", "enable", "--broker", net.broker_address(k, broker.port) if net else broker.address, "--node", f"pi-{room}")
    assert r.rc == 0, r
    h.room = room
    return h


@pytest.fixture(scope="module")
def nodes(site, binary, tmp_path_factory):
    broker, pulse = site
    made = []

    def new_home(**kw):
        h = smtest.Home(tmp_path_factory.mktemp("sm"), **kw)
        made.append(h)
        return h
    hs = [node(new_home, broker, pulse, k) for k in range(len(ROOMS))]
    ok = smtest.wait_for(lambda: all(len((h.json("rooms", "--json") or [])) == len(ROOMS) for h in hs), 15, 0.2)
    assert ok, [log(h) for h in hs]
    yield hs
    for h in made:
        h.close()


def quiet(nodes):
    """Every node idle (the last ring's gong stopped), so that a capture starts in silence."""
    for h in nodes:
        h.run("stop")
    for h in nodes:
        assert h.wait_idle(10).get("state") == "idle"


def captured_frames(path):
    try:
        return os.path.getsize(path) // (2 * len(ROOMS))
    except OSError:
        return 0


def ring_and_capture(nodes, pulse, args, seconds=2.5, expect=None):
    """Rings from the first node with `args` while the shared sink is captured; the capture
    as one list of samples per room, and the ring's answer. The monitor delivers late (by
    up to the null sink's latency, 2 s until its streams ask for less): the capture runs
    until `seconds` of it came after the ring, more while the rooms in `expect` are not
    all heard yet (10 s at most)."""
    quiet(nodes)
    path = os.path.join(nodes[0].dir, f"cap-{time.monotonic_ns()}.raw")
    rec = pulse.record(nodes[0], path)
    assert smtest.wait_for(lambda: captured_frames(path) > RATE // 2, 10, 0.05), "the capture does not run"
    r = nodes[0].run("ring", "temple-bell", *args)
    assert r.rc == 0, r
    since = captured_frames(path)

    def enough():
        if captured_frames(path) < since + int(seconds * RATE):
            return False
        if not expect:
            return True
        chans = channels(path, len(ROOMS))
        return all(first_onset(chans[ROOMS.index(room)]) is not None for room in expect)
    smtest.wait_for(enough, 10, 0.1)
    stop_recording(rec)
    return channels(path, len(ROOMS)), r


def test_rooms_lists_every_node_with_room_state_and_clock(nodes):
    listed = nodes[0].json("rooms", "--json")
    assert sorted(n["node"] for n in listed) == sorted(f"pi-{r}" for r in ROOMS)
    for n in listed:
        assert n["room"] == n["node"][3:] and n["online"] is True
        assert n["clock"]["synchronised"] is True
    text = nodes[1].run("rooms").out.splitlines()
    assert len(text) == 3 and all("online" in line and "synchronised" in line for line in text), text
    st = nodes[2].status()
    assert st["room"] == "dining" and st["clock"]["synchronised"] is True
    assert "room dining; clock synchronised" in nodes[2].run("status").out


def test_a_ring_for_all_rooms_starts_in_every_room_within_2_ms(nodes, site):
    _, pulse = site
    chans, r = ring_and_capture(nodes, pulse, ["--rooms", "all"], expect=ROOMS)
    assert "ringing temple-bell in all at" in r.out, r
    starts = [first_onset(c) for c in chans]
    assert all(s is not None for s in starts), (starts, [max(map(abs, c), default=0) for c in chans], len(chans[0]),
                                                [log(h)[-1500:] for h in nodes])
    skew_ms = (max(starts) - min(starts)) * 1000 / RATE
    smtest.report("rooms: skew between 3 rooms for one ring (PulseAudio, one machine)", f"{skew_ms:.3f}", "ms", "<= 2", skew_ms <= 2)
    assert skew_ms <= 2, starts
    for h in nodes:
        assert "rooms: ring" in log(h) and "missed" not in log(h)


def test_a_ring_for_one_room_is_heard_there_only(nodes, site):
    _, pulse = site
    chans, _ = ring_and_capture(nodes, pulse, ["--rooms", "garden"], seconds=3, expect=["garden"])
    heard = [first_onset(c) is not None for c in chans]
    assert heard == [False, True, False], heard


def test_a_ring_whose_instant_has_passed_is_not_played_late(nodes, site):
    broker, pulse = site
    quiet(nodes)
    path = os.path.join(nodes[0].dir, "late.raw")
    rec = pulse.record(nodes[0], path)
    assert smtest.wait_for(lambda: captured_frames(path) > RATE // 2, 10, 0.05), "the capture does not run"
    since = captured_frames(path)
    late = {"v": 1, "id": "late-1", "from": "test", "bell": "temple-bell", "strikes": 1, "volume": 1,
            "at": int(time.time() * 1000) - 2000, "rooms": "all"}
    broker.publish("stillmoment-site/home/ring", json.dumps(late))
    far = dict(late, id="far-1", at=int(time.time() * 1000) + 120_000)
    broker.publish("stillmoment-site/home/ring", json.dumps(far))
    broker.publish("stillmoment-site/home/ring", '{"v":1,"bell":"../../x"}')
    smtest.wait_for(lambda: captured_frames(path) >= since + 3 * RATE, 10, 0.1)
    stop_recording(rec)
    assert all(first_onset(c) is None for c in channels(path, len(ROOMS)))
    for h in nodes:
        text = log(h)
        assert "ring late-1 from test came" in text and "after its instant: not played" in text
        assert "ring far-1 from test is" in text and "refused" in text
        assert "rooms: ignored a ring" in text
    assert all(h.daemon.poll() is None for h in nodes)


def test_a_node_whose_clock_is_not_synchronised_is_left_out_and_says_why(nodes, site):
    _, pulse = site
    dining = nodes[2]
    smtest.stop_pid(dining.daemon.pid)
    dining.daemon.wait()
    dining.env["STILLMOMENT_TEST_CLOCK"] = "unsynchronised"
    try:
        dining.daemon = dining.start_daemon(prefix=dining.prefix)
        assert smtest.wait_for(lambda: any(n["node"] == "pi-dining" and n["online"] and not n["clock"]["synchronised"]
                                           for n in (nodes[0].json("rooms", "--json") or [])), 10, 0.2)
        assert "not synchronised" in nodes[0].run("rooms").out
        chans, _ = ring_and_capture(nodes, pulse, ["--rooms", "all"], seconds=3, expect=["hall", "garden"])
        heard = [first_onset(c) is not None for c in chans]
        assert heard == [True, True, False], heard
        assert "this node's clock is not synchronised: left out" in log(dining)
    finally:
        smtest.stop_pid(dining.daemon.pid)
        dining.daemon.wait()
        dining.env["STILLMOMENT_TEST_CLOCK"] = "synchronised"
        dining.daemon = dining.start_daemon(prefix=dining.prefix)


def test_bad_room_input_is_one_line_and_changes_nothing(nodes):
    h = nodes[0]
    for args in (("room", "set", "a/b"), ("room", "set", "all"), ("ring", "temple-bell", "--rooms", "hall,#"),
                 ("ring", "no-such-bell", "--rooms", "all"), ("room", "set", "hall", "--offset", "1e300")):
        r = h.run(*args)
        assert r.rc != 0 and len(r.err_lines) == 1, (args, r)
    assert h.run("room").out.splitlines()[0] == "room: hall"
    r = h.run("room", "set", "x y", lang="de_DE.UTF-8")
    assert r.rc != 0 and "Raumname" in r.err, r


def test_a_node_cut_off_from_the_broker_is_offline_for_the_others_and_comes_back(nodes, site):
    broker, pulse = site
    net = broker.net
    if net is None:
        pytest.skip(f"cutting one node's link needs network namespaces: {Site.available()}")
    net.cut(1)
    try:
        # Its last will goes out once the broker misses its keepalive (30 s, 1.5 times): the
        # others see it offline; a ring for every room is heard in the others meanwhile.
        assert smtest.wait_for(lambda: any(n["node"] == "pi-garden" and not n["online"]
                                           for n in (nodes[0].json("rooms", "--json") or [])), 60, 0.5), log(nodes[1])
        chans, _ = ring_and_capture(nodes, pulse, ["--rooms", "all"], seconds=3, expect=["hall", "dining"])
        assert [first_onset(c) is not None for c in chans] == [True, False, True]
        assert "offline" in nodes[0].run("rooms").out
    finally:
        net.heal(1)
    # Back: libmosquitto reconnects with its backoff (at most 60 s), the node says online again.
    assert smtest.wait_for(lambda: any(n["node"] == "pi-garden" and n["online"]
                                       for n in (nodes[0].json("rooms", "--json") or [])), 75, 0.5), log(nodes[1])
    chans, _ = ring_and_capture(nodes, pulse, ["--rooms", "all"], expect=ROOMS)
    starts = [first_onset(c) for c in chans]
    assert (max(starts) - min(starts)) * 1000 / RATE <= 2, starts


def schedule(h):
    return (h.json("schedule", "list", "--json") or {}).get("entries", [])


def test_a_timetable_for_rooms_rings_in_every_room_from_each_nodes_copy_with_the_broker_gone(nodes, site):
    broker, pulse = site
    net = broker.net
    quiet(nodes)
    at = int(time.time()) + 15
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))
    r = nodes[0].run("schedule", "add", when, "--bell", "temple-bell", "--rooms", "all", "--name", "evening gong")
    assert r.rc == 0, r
    assert "rooms all" in nodes[0].run("schedule", "list").out
    # Every other node keeps a copy, marked as the maker's.
    assert smtest.wait_for(lambda: all(any(e["rooms"] == "all" and e.get("from") == "pi-hall" for e in schedule(h))
                                       for h in nodes[1:]), 10, 0.2), [log(h)[-800:] for h in nodes]
    assert "from pi-hall" in nodes[1].run("schedule", "list").out
    assert "pi-hall's" in nodes[2].run("schedule", "export").out
    # Then the network goes: one node cut off (with network namespaces), the broker stopped.
    # Each rings its own copy.
    if net:
        net.cut(2)
    broker.stop()
    try:
        path = os.path.join(nodes[0].dir, "timetable.raw")
        rec = pulse.record(nodes[0], path)
        assert smtest.wait_for(lambda: captured_frames(path) > RATE // 2, 10, 0.05)
        assert at - time.time() > 1, "the set-up took too long"
        smtest.wait_for(lambda: time.time() > at + 1, 30, 0.1)
        since = captured_frames(path)
        smtest.wait_for(lambda: captured_frames(path) > since + 3 * RATE and
                        all(first_onset(c) is not None for c in channels(path, len(ROOMS))), 12, 0.2)
        stop_recording(rec)
        starts = [first_onset(c) for c in channels(path, len(ROOMS))]
        assert all(s is not None for s in starts), (starts, [log(h)[-1000:] for h in nodes])
        skew_ms = (max(starts) - min(starts)) * 1000 / RATE
        smtest.report("rooms: skew between 3 rooms for a timetable bell, broker gone (PulseAudio, one machine)",
                      f"{skew_ms:.3f}", "ms", "<= 2", skew_ms <= 2)
        assert skew_ms <= 2, starts
        for h in nodes:
            assert "started for its instant" in log(h), log(h)[-1500:]
    finally:
        broker.start()
        if net:
            net.heal(2)
    # The broker came back empty (no persistence): the maker publishes its entry again.
    uuid_topic = "stillmoment-site/home/timetable/"
    assert smtest.wait_for(lambda: any(t.startswith(uuid_topic) for t in broker.retained(uuid_topic + "+")), 90, 1), \
        log(nodes[0])[-1500:]
    # Removed by its maker: the copies go too.
    own = [e for e in schedule(nodes[0]) if e["rooms"] == "all"]
    assert nodes[0].run("schedule", "remove", str(own[0]["id"])).rc == 0
    assert smtest.wait_for(lambda: all(not any(e["rooms"] for e in schedule(h) if e.get("rooms")) for h in nodes), 90, 0.5), \
        [schedule(h) for h in nodes]


def test_rooms_in_the_schedule_take_a_bell_only(nodes):
    r = nodes[0].run("schedule", "add", "daily 06:30", "--duration", "20m", "--rooms", "all")
    assert r.rc != 0 and len(r.err_lines) == 1 and "bell" in r.err, r
    r = nodes[0].run("schedule", "add", "daily 06:30", "--bell", "temple-bell", "--rooms", "hall/x")
    assert r.rc != 0 and len(r.err_lines) == 1, r


def test_a_ring_stopped_before_its_instant_leaves_nothing_behind(nodes, site):
    """A ring 40 s ahead, stopped while it waits for its instant, then a bell here: the bell
    is heard at once (the device, kept open, must not wait for the stale instant nor mute
    the next session as late)."""
    broker, pulse = site
    quiet(nodes)
    ahead = {"v": 1, "id": "ahead-1", "from": "test", "bell": "temple-bell", "strikes": 1, "volume": 1,
             "at": int(time.time() * 1000) + 40_000, "rooms": "hall"}
    broker.publish("stillmoment-site/home/ring", json.dumps(ahead))
    hall = nodes[0]
    assert smtest.wait_for(lambda: hall.status().get("source") == "bell", 5, 0.05), log(hall)[-800:]
    assert hall.run("stop").rc == 0
    assert hall.wait_idle(10).get("state") == "idle"
    chans, r = ring_and_capture([hall], pulse, [], seconds=2, expect=["hall"])
    assert "ringing temple-bell here" in r.out, r
    assert first_onset(chans[0]) is not None, log(hall)[-1500:]
    assert "missed" not in log(hall)


def sit_state(h):
    """("paused" or the phase, the source) of what a node plays."""
    st = h.status()
    return "paused" if st.get("paused") else st.get("state"), st.get("source")


def test_a_sit_in_several_rooms_keeps_every_gong_in_step_through_a_pause_and_resume_from_other_nodes(nodes, site):
    """`timer … --rooms all` from one node: the start, interval and end gongs in every room
    within 2 ms; a pause from a second node and a resume from a third reach every room, and
    the gongs after them are still in step (each node goes on from the point of the timeline
    all agreed on, at one instant)."""
    _, pulse = site
    quiet(nodes)
    path = os.path.join(nodes[0].dir, f"sit-{time.monotonic_ns()}.raw")
    rec = pulse.record(nodes[0], path)
    try:
        assert smtest.wait_for(lambda: captured_frames(path) > RATE // 2, 10, 0.05), "the capture does not run"
        r = nodes[0].run("timer", "25s", "--preparation", "off", "--bells", "12s", "--ambience", "off", "--rooms", "all")
        assert r.rc == 0 and "a sit in all from" in r.out, r
        assert smtest.wait_for(lambda: all(sit_state(h)[1] == "timer" for h in nodes), 5, 0.05), [log(h)[-800:] for h in nodes]
        time.sleep(4)
        r = nodes[1].run("pause")
        assert r.rc == 0, r
        assert smtest.wait_for(lambda: all(sit_state(h)[0] == "paused" for h in nodes), 3, 0.05), [h.status() for h in nodes]
        time.sleep(2.5)
        r = nodes[2].run("resume")
        assert r.rc == 0, r
        assert smtest.wait_for(lambda: all(sit_state(h)[0] not in ("paused", "idle") for h in nodes), 3, 0.05), [h.status() for h in nodes]
        # The rest of the timeline (21 s) and the end gong's first seconds: four onsets in
        # every room (the start gong, its ring going on after the resume, the interval bell,
        # the end gong).
        assert smtest.wait_for(lambda: all(len(onsets(c)) >= 4 for c in channels(path, len(ROOMS))), 40, 0.5), \
            [onsets(c) for c in channels(path, len(ROOMS))]
    finally:
        stop_recording(rec)
    chans = channels(path, len(ROOMS))
    per_room = [onsets(c)[:4] for c in chans]
    names = ["start gong", "resume", "interval bell after the pause", "end gong"]
    for k, name in enumerate(names):
        at = [o[k] for o in per_room]
        if name == "start gong":
            # A node that reaches the instant a few ms late (a loaded machine) leaves out
            # what was due by then and fades in on time: its start gong's first sample over
            # the threshold comes early by up to that much, the ring after it in step. The
            # timing is the lag of the ring from 30 ms after the latest onset (100 ms long)
            # against the first room's; the onsets' own skew is reported beside it.
            onset_ms = (max(at) - min(at)) * 1000 / RATE
            smtest.report("rooms: skew between 3 rooms of the first sample over the threshold of a sit's start gong "
                          "(PulseAudio, one machine; earlier where a node left out its first ms to be on time)",
                          f"{onset_ms:.3f}", "ms", "<= 2 (not a check: the timing is the lag below)", onset_ms <= 2)
            start = max(at) + RATE * 3 // 100
            at = [0] + [lag(chans[0], c, start) for c in chans[1:]]
        if name == "resume":
            # The gong rings on, faded in: its onset is the first sample of a ring over a
            # threshold, and any difference in that ring's first ms moves it by a whole cycle
            # (2.3-2.5 ms) while the rest is in step to the frame. One did differ: a node's
            # MP3 decoder, sought back a few ms right after the pause's rebase, missed its
            # pre-roll (fixed in MP3Decoder.seek; SeekAfterSeekTests). The timing is the lag
            # of the ring that follows (100 ms from 30 ms after the onset) against the first
            # room's; the onsets' own skew is reported beside it.
            onset_ms = (max(at) - min(at)) * 1000 / RATE
            smtest.report("rooms: skew between 3 rooms of the first sample over the threshold after a sit's resume "
                          "(PulseAudio, one machine; moved by a whole cycle of the ring where its first ms differ)",
                          f"{onset_ms:.3f}", "ms", "<= 2 (not a check: the timing is the lag below)", onset_ms <= 2)
            start = per_room[0][k] + RATE * 3 // 100
            at = [0] + [lag(chans[0], c, start, around=o[k] - per_room[0][k]) for c, o in zip(chans[1:], per_room[1:])]
        skew_ms = (max(at) - min(at)) * 1000 / RATE
        smtest.report(f"rooms: skew between 3 rooms for a sit's {name} (PulseAudio, one machine)", f"{skew_ms:.3f}", "ms",
                      "<= 2", skew_ms <= 2)
        if skew_ms > 2:
            for h in nodes:
                print(f"--- {h.dir}/daemon.log:\n{log(h)[-3000:]}")
        assert skew_ms <= 2, (name, at, per_room)
    # The pause held the timeline: the interval bell came 12 s of the sit after the start,
    # plus the pause (2.5 s and more).
    gap = (per_room[0][2] - per_room[0][0]) / RATE
    assert 14 < gap < 16.5, per_room
    assert smtest.wait_for(lambda: all(h.status().get("state") == "idle" for h in nodes), 15, 0.2)
    for h in nodes:
        text = log(h)
        assert "starts at" in text and "pauses at" in text and "resumes at" in text, text[-2000:]
        assert "missed" not in text


def test_a_stop_from_any_node_ends_the_sit_in_every_room_at_one_instant(nodes):
    quiet(nodes)
    r = nodes[1].run("timer", "10m", "--preparation", "off", "--rooms", "hall,dining")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: sit_state(nodes[0])[1] == "timer" and sit_state(nodes[2])[1] == "timer", 5, 0.05)
    # garden is not one of its rooms: it plays nothing, and its own commands are its own.
    assert sit_state(nodes[1])[0] == "idle"
    assert nodes[1].run("finish").rc != 0
    r = nodes[0].run("finish")
    assert r.rc != 0 and "stop" in r.err and len(r.err_lines) == 1, r
    r = nodes[0].run("stop")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: all(h.status().get("state") == "idle" for h in nodes), 5, 0.05), [h.status() for h in nodes]
    stops = []
    for h in (nodes[0], nodes[2]):
        line = [ln for ln in log(h).splitlines() if "stops at" in ln][-1]
        stops.append(line.split("stops at ")[1].split()[0])
    assert stops[0] == stops[1], stops
    # The node that started it, in none of its rooms, pauses and stops it too.
    r = nodes[1].run("timer", "10m", "--preparation", "off", "--rooms", "hall,dining")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: sit_state(nodes[0])[1] == "timer" and sit_state(nodes[2])[1] == "timer", 5, 0.05)
    assert nodes[1].run("pause").rc == 0
    assert smtest.wait_for(lambda: sit_state(nodes[0])[0] == "paused" and sit_state(nodes[2])[0] == "paused", 3, 0.05)
    assert nodes[1].run("stop").rc == 0
    assert smtest.wait_for(lambda: all(h.status().get("state") == "idle" for h in nodes), 5, 0.05), [h.status() for h in nodes]
    # A pause and a stop at once (before the broker echoes the pause): each its own revision,
    # and the stop stands everywhere.
    r = nodes[0].run("timer", "10m", "--preparation", "off", "--rooms", "hall,dining")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: sit_state(nodes[0])[1] == "timer" and sit_state(nodes[2])[1] == "timer", 5, 0.05)
    assert nodes[0].run("pause").rc == 0 and nodes[0].run("stop").rc == 0
    assert smtest.wait_for(lambda: all(h.status().get("state") == "idle" for h in nodes), 5, 0.05), [h.status() for h in nodes]


def test_a_sit_from_another_node_never_interrupts_what_plays_here(nodes):
    quiet(nodes)
    dining = nodes[2]
    assert dining.run("timer", "10m", "--preparation", "off", "--detach").rc == 0
    assert smtest.wait_for(lambda: sit_state(dining)[1] == "timer", 5, 0.05)
    own = dining.status().get("session")
    assert nodes[0].run("timer", "10m", "--preparation", "off", "--rooms", "all").rc == 0
    assert smtest.wait_for(lambda: sit_state(nodes[1])[1] == "timer", 5, 0.05)
    time.sleep(0.5)
    assert dining.status().get("session") == own
    assert "not played: something plays here" in log(dining)
    # Its own stop is its own: the others' sit goes on.
    assert dining.run("stop").rc == 0
    assert dining.wait_idle(10).get("state") == "idle"
    assert sit_state(nodes[1])[1] == "timer"
    assert nodes[0].run("stop").rc == 0
    assert smtest.wait_for(lambda: all(h.status().get("state") == "idle" for h in nodes), 5, 0.05)


def test_a_hostile_sit_message_is_ignored_and_plays_nothing(nodes, site):
    broker, _ = site
    quiet(nodes)
    now = int(time.time() * 1000)
    good = {"v": 1, "id": "s-1", "from": "test", "rooms": "all", "rev": 1, "phase": "playing", "at": now + 500,
            "position": 0, "timer": {"duration": "10m"}}
    bad = [dict(good, id="s-2", timer={"duration": "10m", "device": "file:'|touch /tmp/x'"}),
           dict(good, id="s-3", at=1e300), dict(good, id="s-4", position=-5), dict(good, id="s-5", phase="exploding"),
           dict(good, id="s-6", rev=0), dict(good, id="s-7", timer={"duration": "1e300"}),
           dict(good, id="../x", timer={"duration": "10m"}), dict(good, id="s-9", rooms="hall,#")]
    for p in bad:
        broker.publish(f"stillmoment-site/home/sit/{p['id'] if '/' not in p['id'] else 'x'}", json.dumps(p))
    broker.publish("stillmoment-site/home/sit/s-10", "{" * 9000)
    broker.publish("stillmoment-site/home/sit/s-11", json.dumps(dict(good, id="other")))
    time.sleep(1.5)
    for h in nodes:
        assert h.status().get("state") == "idle", log(h)[-1500:]
        assert h.daemon.poll() is None
        assert log(h).count("rooms: ignored a sit") >= 9, log(h)[-3000:]
    for p in bad + [{"id": "s-10"}, {"id": "s-11"}, {"id": "x"}]:
        broker.publish(f"stillmoment-site/home/sit/{p['id']}", "")
