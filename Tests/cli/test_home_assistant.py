"""A real Home Assistant (core 2024.3.3, headless) and the daemon through a private
mosquitto: the device and every entity in Home Assistant's registries, a button pressed
through its REST API starting a timer that is heard (ALSA's file: capture), states following
the session, Home Assistant restarted (entities available again), the broker restarted
(reconnected), the daemon killed (unavailable). `make test-home` (scripts/haenv.sh makes
the venv); the tests run in order on one rig."""
import json
import os
import signal
import time

import pytest

import smtest
from haharness import HomeAssistant, missing as ha_missing
from mqttharness import Broker, mosquitto_missing

NODE = "cushion"
DEVICE = "Still Moment cushion"
NAMES = {  # the entity's name under the device (None: the device's own, the main entity)
    "button": {None, "Start preset", "Pause", "Resume", "Finish", "Stop", "Ring a bell"},
    "select": {"Preset"}, "number": {"Minutes"},
    "sensor": {"Phase", "Remaining", "Practice today", "Next scheduled sit"},
    "binary_sensor": {"Sitting"}, "event": {"Session"}, "switch": {"Schedules"},
}


@pytest.fixture(scope="module")
def rig(binary, tmp_path_factory):
    why = mosquitto_missing() or ha_missing()
    if why:
        pytest.fail(why)
    broker = Broker(tmp_path_factory.mktemp("mq")).start()
    h = smtest.Home(tmp_path_factory.mktemp("sm"), idle_exit="600", STILLMOMENT_TEST_DEVICES="file")
    try:
        h.capture = f"{h.dir}/cap.raw"
        assert h.run("settings", "set", "device", f"file:FILE={h.capture},FORMAT=raw").rc == 0
        h.daemon = h.start_daemon()
        assert h.run("mqtt", "enable", "--broker", broker.address, "--node", NODE).rc == 0
        ha = HomeAssistant(tmp_path_factory.mktemp("ha"), broker.port)
        took = ha.start(h)
        print(f"\nHome Assistant started in {took:.1f} s")
        yield broker, h, ha
    finally:
        h.close()          # Home Assistant, the daemon, subscribers: by PID
        broker.stop()


def entities(ha):
    """{(domain, name under the device): state} of the device's entities."""
    ids = ha.template("{{ device_entities(device_id('button.still_moment_cushion')) | join(',') }}")
    out = {}
    states = ha.states()
    for eid in filter(None, ids.split(",")):
        s = states.get(eid)
        if not s:
            continue
        friendly = s["attributes"].get("friendly_name", "")
        name = friendly[len(DEVICE):].strip() or None if friendly.startswith(DEVICE) else friendly
        out[(eid.split(".")[0], name)] = s
    return out


def all_there(ha):
    got = entities(ha)
    want = {(d, n) for d, names in NAMES.items() for n in names}
    return got if set(got) == want else None


def entity_id(ha, domain, name):
    return entities(ha)[(domain, name)]["entity_id"]


def state(ha, domain, name):
    return entities(ha)[(domain, name)]["state"]


def test_device_and_every_entity_are_in_the_registries(rig):
    broker, h, ha = rig
    assert smtest.wait_for(lambda: all_there(ha), 60, 0.5), (sorted(entities(ha)), ha.log()[-3000:])
    got = smtest.wait_for(lambda: (lambda g: g if all(s["state"] != "unavailable" for s in g.values()) else None)(all_there(ha)), 30, 0.5)
    assert got, {k: v["state"] for k, v in entities(ha).items()}
    device = ha.template("{{ device_id('button.still_moment_cushion') }}")
    assert device and device != "None"
    assert ha.template(f"{{{{ device_attr('{device}', 'name') }}}}") == DEVICE
    assert ha.template(f"{{{{ device_attr('{device}', 'model') }}}}") == "stillmoment daemon"
    assert ha.template(f"{{{{ device_attr('{device}', 'sw_version') }}}}") == open(os.path.join(smtest.ROOT, "VERSION")).read().strip()
    assert got[("sensor", "Phase")]["state"] == "idle"
    assert got[("binary_sensor", "Sitting")]["state"] == "off"
    assert got[("switch", "Schedules")]["state"] == "on"
    assert "Settings" in got[("select", "Preset")]["attributes"]["options"]


def test_a_button_pressed_in_home_assistant_starts_a_timer_that_is_heard(rig):
    broker, h, ha = rig
    ha.api("POST", "/api/services/number/set_value", {"entity_id": entity_id(ha, "number", "Minutes"), "value": 1})
    assert smtest.wait_for(lambda: state(ha, "number", "Minutes") in ("1", "1.0"), 10)
    sub = broker.subscriber(h, f"stillmoment/{NODE}/#")
    t0 = time.time()
    ha.api("POST", "/api/services/button/press", {"entity_id": entity_id(ha, "button", None)})
    started = sub.wait(lambda t, p: t.endswith("/event") and json.loads(p)["event_type"] == "started", 10)
    assert started, h.run("status").out
    print(f"\nHA press → session started (the daemon's event at the broker): {(started[0] - t0) * 1000:.0f} ms")
    ended = sub.wait(lambda t, p: t.endswith("/event") and json.loads(p)["event_type"] == "ended", 30)
    assert ended and json.loads(ended[2])["reason"] == "completed"
    # Heard: a minute and its preparation went into the capture, gongs in it.
    assert os.path.getsize(h.capture) > 44100 * 4 * 50
    with open(h.capture, "rb") as f:
        assert any(f.read(44100 * 8 * 12))
    assert h.history()[0]["endReason"] == "completed"
    # States followed (on file: the minute plays in about a second; the open sit below
    # follows them at leisure): idle again, not sitting.
    assert smtest.wait_for(lambda: state(ha, "sensor", "Phase") == "idle", 10)
    assert state(ha, "binary_sensor", "Sitting") == "off"
    assert smtest.wait_for(lambda: int(float(state(ha, "sensor", "Practice today"))) >= 1, 20)
    # The event entity says the last event.
    assert smtest.wait_for(lambda: entities(ha)[("event", "Session")]["attributes"].get("event_type") == "ended", 10)


def test_pause_and_stop_from_home_assistant_follow_the_session(rig):
    broker, h, ha = rig
    assert h.run("timer", "open", "--detach").rc == 0
    assert smtest.wait_for(lambda: state(ha, "binary_sensor", "Sitting") == "on", 10)
    ha.api("POST", "/api/services/button/press", {"entity_id": entity_id(ha, "button", "Pause")})
    assert smtest.wait_for(lambda: h.status().get("paused") is True, 10)
    assert smtest.wait_for(lambda: state(ha, "sensor", "Phase") == "paused", 10)
    ha.api("POST", "/api/services/button/press", {"entity_id": entity_id(ha, "button", "Stop")})
    assert h.wait_idle(10).get("state") == "idle"
    assert smtest.wait_for(lambda: state(ha, "binary_sensor", "Sitting") == "off", 10)


def test_home_assistant_restarted_finds_the_entities_available(rig):
    broker, h, ha = rig
    ha.stop()
    took = ha.start(h)
    print(f"\nHome Assistant restarted in {took:.1f} s")
    got = smtest.wait_for(lambda: (lambda g: g if g and all(s["state"] != "unavailable" for s in g.values()) else None)(all_there(ha)), 60, 0.5)
    assert got, {k: v["state"] for k, v in entities(ha).items()}


def test_broker_restarted_the_daemon_reconnects(rig):
    broker, h, ha = rig
    broker.stop()
    assert smtest.wait_for(lambda: state(ha, "sensor", "Phase") == "unavailable", 60, 0.5)
    broker.start()
    assert smtest.wait_for(lambda: state(ha, "sensor", "Phase") == "idle", 90, 0.5), ha.log()[-2000:]


def test_the_daemon_killed_its_entities_become_unavailable(rig):
    broker, h, ha = rig
    os.kill(h.daemon.pid, signal.SIGKILL)
    h.daemon.wait()
    assert smtest.wait_for(lambda: state(ha, "button", None) == "unavailable", 20, 0.5)
    h.daemon = h.start_daemon()
    assert smtest.wait_for(lambda: state(ha, "button", None) != "unavailable", 20, 0.5)
