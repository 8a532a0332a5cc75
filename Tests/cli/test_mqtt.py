"""MQTT at the protocol level, against a private Debian mosquitto on loopback: the
discovery configs Home Assistant reads, availability through the last will, commands from
the command topics (a press starts a timer that is heard), malformed and oversized
payloads ignored with a line in the log, a broker restart, `mqtt disable`, the password
file's checks, and libmosquitto loaded only when MQTT is on. (A real Home Assistant:
test_home_assistant.py, `make test-home`.)"""
import json
import os
import signal
import threading
import time

import pytest

import smtest
from mqttharness import Broker, mosquitto_missing

NODE = "cushion"
ENTITIES = {
    ("button", "start"), ("button", "start_preset"), ("button", "pause"), ("button", "resume"),
    ("button", "finish"), ("button", "stop"), ("button", "bell"), ("select", "preset"), ("number", "minutes"),
    ("sensor", "phase"), ("sensor", "remaining"), ("sensor", "today"), ("sensor", "next_sit"),
    ("binary_sensor", "sitting"), ("event", "session"), ("switch", "schedules"),
}
BASE = f"stillmoment/{NODE}"


@pytest.fixture(autouse=True)
def _mosquitto():
    why = mosquitto_missing()
    if why:
        pytest.fail(why)


@pytest.fixture
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("mq")).start()
    yield b
    b.stop()


def mqtt_home(new_home, broker, capture=True):
    """A home whose daemon plays into a file (ALSA's file: plugin) and is on MQTT."""
    h = new_home(idle_exit="120", STILLMOMENT_TEST_DEVICES="file")
    h.capture = f"{h.dir}/cap.raw"
    assert h.run("settings", "set", "device", f"file:FILE={h.capture},FORMAT=raw" if capture else "null").rc == 0
    h.daemon = h.start_daemon()
    r = h.run("mqtt", "enable", "--broker", broker.address, "--node", NODE)
    assert r.rc == 0, r
    return h


# The bridge's names of the daemon's phases (the others are the same word).
MQTT_PHASE = {"completed": "idle", "stopped": "idle", "startGong": "start_gong", "endGong": "end_gong"}


def dedup(phases):
    """The phases without repeats in a row."""
    return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]


def in_order(wanted, seen):
    """Whether `wanted` appears in `seen` in order (others may come between)."""
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


def log(h):
    """The daemon's log (started by the test: in the home's folder; on demand: in the store)."""
    out = ""
    for path in (h.dir + "/daemon.log", h.home + "/daemon.log"):
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                out += f.read()
    return out


def online(broker, seconds=10):
    return smtest.wait_for(lambda: broker.retained(f"{BASE}/availability").get(f"{BASE}/availability") == "online", seconds)


def test_discovery_configs_device_and_availability(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker), log(h)
    configs = smtest.wait_for(lambda: (lambda c: c if len(c) == len(ENTITIES) else None)(
        broker.retained("homeassistant/#")), 10) or broker.retained("homeassistant/#")
    assert {tuple(t.split("/")[1:4:2]) for t in configs} == ENTITIES, sorted(configs)
    ids = set()
    for topic, payload in configs.items():
        _, component, node, obj, last = topic.split("/")
        assert node == NODE and last == "config"
        c = json.loads(payload)
        assert c["unique_id"] == f"stillmoment_{NODE}_{obj}"
        ids.add(c["unique_id"])
        assert "object_id" not in c, "a key later Home Assistant versions deprecate"
        assert c["availability_topic"] == f"{BASE}/availability"
        d = c["device"]
        assert d["identifiers"] == [f"stillmoment_{NODE}"] and d["name"] and d["model"] and d["sw_version"]
        assert c["origin"]["name"] == "stillmoment"
        assert ("name" in c) and (c["name"] is None) == (obj == "start"), "the main entity's name is null"
        if component in ("button", "select", "number", "switch"):
            assert c["command_topic"] == f"{BASE}/cmd/{obj}"
    assert len(ids) == len(ENTITIES)
    state = json.loads(broker.retained(f"{BASE}/state")[f"{BASE}/state"])
    assert state["phase"] == "idle" and state["sitting"] == "OFF" and state["schedules"] == "ON"
    assert f"link: connected to {broker.address} as node {NODE}" in h.run("mqtt", "status").out
    assert h.status()["mqtt"] == {"broker": broker.address, "node": NODE, "connected": True}
    # The same ids after a restart of the daemon.
    smtest.stop_pid(h.daemon.pid)
    h.daemon.wait()
    h.daemon = h.start_daemon()
    assert online(broker)
    again = broker.retained("homeassistant/#")
    assert {json.loads(p)["unique_id"] for p in again.values()} == ids


def test_a_press_starts_a_timer_that_is_heard_and_states_follow(new_home, broker):
    h = mqtt_home(new_home, broker)
    assert online(broker)
    sub = broker.subscriber(h, f"{BASE}/#")
    broker.publish(f"{BASE}/cmd/minutes", "1")
    assert sub.wait(lambda t, p: t == f"{BASE}/state" and json.loads(p)["minutes"] == 1)
    # A live view on the socket: every phase its subscribers are told is published, in
    # order. (Into `file:` a minute renders in about 0.1 s, so which phases a step of the
    # daemon sees is not fixed; none of them may be lost on the way to MQTT.)
    view = smtest.Client(h.socket_path, "live-view")
    assert "result" in view.request("subscribe", {"progress": False})
    # Another client asks for the status all along: a change its request takes up (the
    # status looks at the engine) goes out with that request's answer, and MQTT must get
    # it too.
    polling = threading.Event()
    polls = []

    def poll():
        c = smtest.Client(h.socket_path, "poller")
        try:
            while not polling.is_set():
                a = c.request("status")
                polls.append(a)
                if a is None:       # the daemon closed the connection: the test says so below
                    break
        except OSError as e:
            polls.append(str(e))
        finally:
            c.close()
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        t0 = time.time()
        broker.publish(f"{BASE}/cmd/start", "PRESS")
        started = sub.wait(lambda t, p: t == f"{BASE}/event" and json.loads(p)["event_type"] == "started")
        assert started, log(h)
        ended = sub.wait(lambda t, p: t == f"{BASE}/event" and json.loads(p)["event_type"] == "ended", 30)
        assert ended and json.loads(ended[2]) == {"event_type": "ended", "reason": "completed", "source": "timer"}
        told = []
        while not (told and told[-1] == "idle" and any(e.get("event") == "ended" for e in view.events)):
            m = view.recv()
            assert m is not None, view.events
            view.events.append(m)
            if m.get("event") == "state":
                told.append(MQTT_PHASE.get(m["data"]["state"], m["data"]["state"]))
    finally:
        polling.set()
        poller.join(10)
        view.close()
    assert len(polls) > 5 and all(isinstance(a, dict) and "result" in a for a in polls), polls[-3:]

    def phases():
        return [json.loads(p)["phase"] for _, t, p in sub.messages() if t == f"{BASE}/state"]
    # The bridge publishes in the same step; mosquitto_sub writes it out a moment later.
    smtest.wait_for(lambda: in_order(dedup(told), dedup(phases())), 5)
    assert told[0] != "idle" and in_order(dedup(told), dedup(phases())), (phases(), told)
    assert phases()[-1] == "idle"
    assert any(json.loads(p)["sitting"] == "ON" for _, t, p in sub.messages() if t == f"{BASE}/state")
    # Heard: the capture holds the minute's gongs (not silence), and the log says completed.
    size = os.path.getsize(h.capture)
    assert size > 44100 * 4 * 50, size
    with open(h.capture, "rb") as f:
        data = f.read()
    assert any(b != 0 for b in data[: 44100 * 8 * 12]), "the start gong is in the capture"
    hist = h.history()
    assert hist and hist[0]["endReason"] == "completed"
    # Today's practice counts the minute.
    assert sub.wait(lambda t, p: t == f"{BASE}/state" and json.loads(p)["today"] >= 1, 10)
    print(f"press → started event: {(started[0] - t0) * 1000:.0f} ms")


def test_commands_pause_resume_stop_and_a_bell(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    sub = broker.subscriber(h, f"{BASE}/#")
    # On `null` a timer ends at once: an open sit stays (nothing to count down).
    assert h.run("timer", "open", "--detach").rc == 0
    assert smtest.wait_for(lambda: h.status().get("state") in ("preparation", "running", "startGong"), 10)
    broker.publish(f"{BASE}/cmd/pause", "PRESS")
    assert smtest.wait_for(lambda: h.status().get("paused") is True, 5), log(h)
    assert sub.wait(lambda t, p: t == f"{BASE}/state" and json.loads(p)["phase"] == "paused")
    broker.publish(f"{BASE}/cmd/resume", "PRESS")
    assert smtest.wait_for(lambda: not h.status().get("paused"), 5)
    broker.publish(f"{BASE}/cmd/stop", "PRESS")
    assert h.wait_idle(10).get("state") == "idle"
    assert sub.wait(lambda t, p: t == f"{BASE}/event" and json.loads(p).get("reason") == "stopped")
    broker.publish(f"{BASE}/cmd/bell", "PRESS")
    assert sub.wait(lambda t, p: t == f"{BASE}/event" and json.loads(p)["event_type"] == "bell"), log(h)


def test_malformed_and_oversized_payloads_are_ignored_with_a_line(new_home, broker, tmp_path):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    big = tmp_path / "big"
    big.write_bytes(b"PRESS" * 4000)
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00PRESS")
    broker.publish(f"{BASE}/cmd/start", "press me")
    broker.publish(f"{BASE}/cmd/minutes", "1e400")
    broker.publish(f"{BASE}/cmd/minutes", "-3")
    broker.publish(f"{BASE}/cmd/minutes", "2.5")
    broker.publish(f"{BASE}/cmd/schedules", "maybe")
    broker.publish(f"{BASE}/cmd/preset", "no such preset")
    broker.publish(f"{BASE}/cmd/nothing", "PRESS")
    broker.publish(f"{BASE}/cmd/start", "")
    broker.publish_file(f"{BASE}/cmd/start", str(big))
    broker.publish_file(f"{BASE}/cmd/start", str(binary))
    assert smtest.wait_for(lambda: log(h).count("MQTT: ignored") + log(h).count("MQTT: no preset") + log(h).count("too long") >= 10, 10), log(h)
    assert h.daemon.poll() is None
    assert h.status().get("state") == "idle", "nothing started"
    lines = [l for l in log(h).splitlines() if "MQTT: ignored" in l or "too long" in l or "no preset" in l]
    assert len(lines) == 10, lines
    assert all("\x00" not in l and "\xff" not in l for l in lines)
    # Still served.
    broker.publish(f"{BASE}/cmd/minutes", "7")
    assert smtest.wait_for(lambda: json.loads(broker.retained(f"{BASE}/state")[f"{BASE}/state"])["minutes"] == 7, 5)


def test_last_will_says_offline_when_the_daemon_is_killed(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    os.kill(h.daemon.pid, signal.SIGKILL)
    h.daemon.wait()
    # The broker notices the dead connection at once (the socket closes) and sends the will.
    assert smtest.wait_for(lambda: broker.retained(f"{BASE}/availability").get(f"{BASE}/availability") == "offline", 10)


def test_a_clean_stop_says_offline(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    smtest.stop_pid(h.daemon.pid)
    assert h.daemon.wait() == 0
    assert broker.retained(f"{BASE}/availability").get(f"{BASE}/availability") == "offline"
    assert "MQTT: disconnected" in log(h)


def test_broker_restart_reconnects_and_keeps_playing(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    broker.stop()
    time.sleep(0.5)
    assert h.status().get("state") == "idle" and h.daemon.poll() is None, "works without the broker"
    assert smtest.wait_for(lambda: f"link: connecting to {broker.address}" in h.run("mqtt", "status").out, 5)
    broker.start()                           # same port; nothing retained (no persistence)
    assert online(broker, 20), log(h)         # backoff: 1 s, 2 s, …
    assert len(broker.retained("homeassistant/#")) == len(ENTITIES), "discovery published again"
    assert "reconnecting" in log(h)


def test_a_broker_away_at_the_start_and_a_name_that_does_not_resolve(new_home, broker):
    h = new_home(idle_exit="120")
    assert h.run("settings", "set", "device", "null").rc == 0
    h.daemon = h.start_daemon()
    broker.stop()
    # A host name (resolved on the network thread, never the daemon's), the broker away.
    assert h.run("mqtt", "enable", "--broker", f"localhost:{broker.port}", "--node", NODE).rc == 0
    assert smtest.wait_for(lambda: "cannot connect" in log(h), 10), log(h)
    t0 = time.monotonic()
    assert h.status().get("mqtt", {}).get("connected") is False
    assert time.monotonic() - t0 < 2, "the daemon answers meanwhile"
    broker.start()
    assert online(broker, 20), log(h)
    # A name that cannot resolve (.invalid): said once, the daemon serves, and it stops cleanly.
    assert h.run("mqtt", "enable", "--broker", "no-such-broker.invalid", "--node", NODE).rc == 0
    assert smtest.wait_for(lambda: log(h).count("cannot connect") >= 2, 30), log(h)
    assert h.status().get("state") == "idle"
    assert h.run("mqtt", "disable").rc == 0
    assert smtest.wait_for(lambda: "mqtt" not in h.status(), 10)
    smtest.stop_pid(h.daemon.pid)
    assert h.daemon.wait() == 0


def test_home_assistant_online_republishes(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    for topic in broker.retained("homeassistant/#"):
        broker.publish(topic, "", retain=True)           # as if the broker had forgotten
    assert broker.retained("homeassistant/#") == {}
    broker.publish("homeassistant/status", "online")
    assert smtest.wait_for(lambda: len(broker.retained("homeassistant/#")) == len(ENTITIES), 10)


def test_disable_removes_the_entities(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert online(broker)
    assert len(broker.retained("homeassistant/#")) == len(ENTITIES)
    r = h.run("mqtt", "disable")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: broker.retained("homeassistant/#") == {}, 10), log(h)
    assert broker.retained(f"{BASE}/availability").get(f"{BASE}/availability") == "offline"
    out = h.run("mqtt", "status").out
    assert out.startswith("MQTT: off") and "link: none" in out


def test_password_file_user_and_secrecy(new_home, tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("mq"), users={"sit": "s3cret-Pa55"}).start()
    try:
        h = new_home(idle_exit="120")
        assert h.run("settings", "set", "device", "null").rc == 0
        pw = f"{h.dir}/pw"
        with open(pw, "w") as f:
            f.write("s3cret-Pa55\n")
        os.chmod(pw, 0o644)
        r = h.run("mqtt", "enable", "--broker", b.address, "--node", NODE, "--user", "sit", "--password-file", pw)
        assert r.rc == smtest.BAD_INPUT and "chmod 600" in r.err and len(r.err_lines) == 1, r
        os.chmod(pw, 0o600)
        r = h.run("mqtt", "enable", "--broker", b.address, "--node", NODE, "--user", "sit", "--password-file", pw)
        assert r.rc == 0, r
        assert online(b), log(h)
        shown = h.run("mqtt", "status").out + h.run("settings", "show").out + log(h)
        assert "s3cret" not in shown
        # A wrong password: refused by the broker, said in the log, never the password.
        with open(pw, "w") as f:
            f.write("wrong-one")
        h.run("mqtt", "disable")
        h.run("mqtt", "enable", "--broker", b.address, "--node", NODE, "--user", "sit", "--password-file", pw)
        assert smtest.wait_for(lambda: "bad user name or password" in log(h) or "not authorised" in log(h), 10), log(h)
        assert "wrong-one" not in log(h)
    finally:
        b.stop()


def test_tls_with_a_ca(new_home, tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("mq"), tls=True).start()
    try:
        h = new_home(idle_exit="120")
        assert h.run("settings", "set", "device", "null").rc == 0
        r = h.run("mqtt", "enable", "--broker", b.address, "--node", NODE, "--tls", b.ca)
        assert r.rc == 0, r
        assert online(b), log(h)
        assert "over TLS" in log(h)
        assert len(b.retained("homeassistant/#")) == len(ENTITIES)
        # Another CA: the broker's certificate is refused, nothing connects.
        other = Broker(tmp_path_factory.mktemp("mq"), tls=True)
        h.run("mqtt", "enable", "--broker", b.address, "--node", "other", "--tls", other.ca)
        time.sleep(3)
        assert "stillmoment/other/availability" not in b.retained("stillmoment/#")
        assert h.status().get("mqtt", {}).get("connected") is False
    finally:
        b.stop()


def test_bad_arguments_are_refused_in_one_line(home):
    for broker in ("a b", "host:99999", "host:", "-oProxy", "mqtt://host", "[zz]:1", "x" * 300, "host\nx"):
        r = home.run("mqtt", "enable", f"--broker={broker}")
        assert r.rc == smtest.BAD_INPUT and len(r.err_lines) == 1, (broker, r)
    r = home.run("mqtt", "enable", "--broker", "h", "--tls", "rel\x01path")
    assert r.rc == smtest.BAD_INPUT, r
    r = home.run("mqtt", "enable", "--broker", "h", "--node", "Bad/Node")
    assert r.rc == smtest.BAD_INPUT, r
    r = home.run("settings", "set", "mqtt-enabled", "yes")
    assert r.rc == smtest.BAD_INPUT, r
    assert home.run("mqtt", "status").out.startswith("MQTT: off"), "off by default"


def maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_libmosquitto_is_loaded_only_when_mqtt_is_on(new_home, broker):
    h = new_home(idle_exit="120")
    h.run("settings", "set", "device", "null")
    d = h.start_daemon()
    time.sleep(5)                                     # past start-up's release of code pages
    assert "libmosquitto" not in maps(d.pid)
    without = rss_kb(d.pid)
    assert h.run("mqtt", "enable", "--broker", broker.address, "--node", NODE).rc == 0
    assert online(broker)
    time.sleep(5)
    assert "libmosquitto" in maps(d.pid)
    with_mqtt = rss_kb(d.pid)
    print(f"daemon RSS: {without} KiB without MQTT, {with_mqtt} KiB connected")
    # Idle, the network thread sleeps until the keepalive's ping (30 s): at most one ping's
    # exchange in 10 s, never a wake-up a second.
    before = switches(d.pid, "mqtt")
    time.sleep(10)
    woke = switches(d.pid, "mqtt") - before
    assert woke <= 3, f"the mqtt thread woke {woke} times in 10 s"


def switches(pid, thread):
    """Context switches of the process's thread named `thread`."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() != thread:
                continue
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            return sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
    raise AssertionError(f"no thread {thread}")


def test_home_assistants_choices_outlive_the_daemon_and_the_switch_is_the_schedules_switch(new_home, broker):
    h = mqtt_home(new_home, broker, capture=False)
    assert h.run("preset", "save", "evening", "25m").rc == 0
    assert online(broker)
    state = lambda: json.loads(broker.retained(f"{BASE}/state")[f"{BASE}/state"])  # noqa: E731
    broker.publish(f"{BASE}/cmd/preset", "evening")
    broker.publish(f"{BASE}/cmd/minutes", "17")
    assert smtest.wait_for(lambda: state()["preset"] == "evening" and state()["minutes"] == 17, 5), log(h)
    shown = h.run("settings", "show").out
    assert "mqtt-preset" in shown and "evening" in shown and "17" in shown, shown
    # A change of another setting at the same moment is not lost (one writer at a time).
    assert h.run("settings", "set", "gong-volume", "0.5").rc == 0
    smtest.stop_pid(h.daemon.pid)
    h.daemon.wait()
    h.daemon = h.start_daemon()
    assert online(broker)
    assert smtest.wait_for(lambda: state()["preset"] == "evening" and state()["minutes"] == 17, 5), state()
    assert "0.5" in h.run("settings", "show").out

    # The switch: off through Home Assistant is `schedule list`'s off, and back on from the CLI.
    assert h.run("schedule", "add", "daily 06:30", "--bell", "temple-bell").rc == 0
    broker.publish(f"{BASE}/cmd/schedules", "OFF")
    assert smtest.wait_for(lambda: (h.json("schedule", "list", "--json") or {}).get("on") is False, 5), log(h)
    assert smtest.wait_for(lambda: state()["schedules"] == "OFF" and state()["next_sit"] is None, 5), state()
    assert h.run("schedule", "on").rc == 0
    assert smtest.wait_for(lambda: state()["schedules"] == "ON" and state()["next_sit"], 5), state()
