"""Sync between a user's devices, with real processes: a hub (`stillmoment web`) and two
devices, each in its own network namespace on a veth link to the hub's (as three machines on
a LAN; on loopback when namespaces cannot be made), each with a private home. Clocks are
skewed per process by a small LD_PRELOAD of our own (Tests/cli/shim/shift_realtime.c) that
shifts only CLOCK_REALTIME. Covers pairing, presets and the practice log both ways, skewed
clocks and the hybrid clock's winner, edit against delete, a partition healed, kill -9 of
a device and of the hub mid-cycle, and a hostile peer."""
import json
import os
import re
import subprocess
import time
import uuid

import pytest

import smtest
from mqttharness import free_port
from roomsharness import Site

SHIM_SOURCE = os.path.join(smtest.ROOT, "Tests", "cli", "shim", "shift_realtime.c")


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("shim") / "shift_realtime.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", out, SHIM_SOURCE, "-ldl"], check=True)
    return out


class Net:
    """The hub's namespace and one per device (roomsharness.Site: the devices reach the hub
    only over their veth links), or loopback for all."""

    def __init__(self):
        why = Site.available()
        self.site = None if why else Site(2).up()
        if why:
            print(f"test_sync: the nodes share loopback ({why})")
        self.port = free_port()

    def hub_prefix(self):
        return ["ip", "netns", "exec", self.site.broker] if self.site else []

    def device_prefix(self, k):
        return self.site.prefix(k) if self.site else []

    def hub_url(self, k):
        return f"http://10.77.{k}.1:{self.port}" if self.site else f"http://127.0.0.1:{self.port}"

    def listen(self):
        return f"0.0.0.0:{self.port}" if self.site else f"127.0.0.1:{self.port}"

    def down(self):
        if self.site:
            self.site.down()


@pytest.fixture(scope="module")
def net():
    n = Net()
    yield n
    n.down()


class Hub:
    def __init__(self, home, net):
        self.home = home
        self.net = net
        self.proc = None

    def start(self):
        out = open(self.home.dir + "/web.log", "ab")
        self.proc = self.home.spawn("web", "--listen", self.net.listen(), stdout=out, stderr=out, prefix=self.net.hub_prefix())
        out.close()
        # Ready when the port answers (from inside the hub's namespace).
        probe = [*self.net.hub_prefix(), "python3", "-c",
                 f"import socket; socket.create_connection(('127.0.0.1', {self.net.port}), 0.5).close()"]
        assert smtest.wait_for(lambda: subprocess.run(probe, capture_output=True).returncode == 0, 10, 0.05), self.log()
        return self

    def kill9(self):
        smtest.kill_pid(self.proc.pid)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            smtest.stop_pid(self.proc.pid)
            self.proc.wait()

    def pin(self):
        r = self.home.run("web", "pair")
        m = re.search(r"\b(\d{6})\b", r.out + r.err)
        assert r.rc == 0 and m, r
        return m.group(1)

    def log(self):
        with open(self.home.dir + "/web.log", errors="replace") as f:
            return f.read()


class Device:
    def __init__(self, home, net, k, shift_ms=0, shim=None):
        self.home, self.net, self.k = home, net, k
        self.env = dict(home.env)
        if shift_ms:
            self.env.update(LD_PRELOAD=shim, STILLMOMENT_TEST_REALTIME_SHIFT_MS=str(shift_ms))

    def run(self, *args, timeout=120):
        return self.home.run(*args, env=self.env, prefix=self.net.device_prefix(self.k), timeout=timeout)

    def spawn(self, *args):
        return self.home.spawn(*args, env=self.env, prefix=self.net.device_prefix(self.k))

    def pair(self, hub, name):
        r = self.run("sync", "pair", self.net.hub_url(self.k), "--pin", hub.pin(), "--name", name)
        assert r.rc == 0, r
        return r

    def sync(self):
        r = self.run("sync", "now", "--json")
        assert r.rc == 0, r
        return json.loads(r.out)

    def presets(self):
        r = self.home.run("preset", "list", "--json")
        assert r.rc == 0, r
        return sorted((p["name"], p["options"].get("duration")) for p in json.loads(r.out))

    def history_ids(self):
        return sorted(e["id"] for e in self.home.history())


def presets_of(home):
    r = home.run("preset", "list", "--json")
    assert r.rc == 0, r
    return sorted((p["name"], p["options"].get("duration")) for p in json.loads(r.out))


def practice_csv(path, n, seed=0):
    """A practice log export of `n` sits (our CSV), and their ids."""
    ids = [str(uuid.UUID(int=(seed << 64) + i + 1)) for i in range(n)]
    with open(path, "w") as f:
        f.write("id,kind,name,teacher,preset,meditation_id,start,planned_seconds,heard_seconds,end_reason,scheduled\r\n")
        for i, id_ in enumerate(ids):
            day = 1 + i % 28
            f.write(f"{id_},timer,Timer 20m,,,,2026-10-{day:02d}T07:{i % 60:02d}:00+01:00,1200,1200,completed,false\r\n")
    return ids


@pytest.fixture
def trio(new_home, net, shim):
    """A hub and two devices, paired."""
    def make(shift_a=0, shift_b=0, **extra):
        hub = Hub(new_home(), net).start()
        a = Device(new_home(**extra), net, 0, shift_a, shim)
        b = Device(new_home(), net, 1, shift_b, shim)
        a.pair(hub, "pi-bedroom")
        b.pair(hub, "pi-hall")
        return hub, a, b
    yield make


def test_pair_presets_and_log_both_ways(trio, tmp_path):
    hub, a, b = trio()
    assert a.run("preset", "save", "Morning", "--duration", "20m", "--interval", "5m").rc == 0
    assert b.run("preset", "save", "Evening", "--duration", "15m").rc == 0
    ids_a = practice_csv(tmp_path / "a.csv", 3, seed=1)
    ids_b = practice_csv(tmp_path / "b.csv", 2, seed=2)
    assert a.run("history", "import", str(tmp_path / "a.csv")).rc == 0
    assert b.run("history", "import", str(tmp_path / "b.csv")).rc == 0
    a.sync(), b.sync(), a.sync()
    want = [("Evening", "15m"), ("Morning", "20m")]
    assert presets_of(hub.home) == want and a.presets() == want and b.presets() == want
    assert a.history_ids() == b.history_ids() == sorted(ids_a + ids_b)
    st = json.loads(a.run("sync", "status", "--json").out)
    assert st["pending"] == 0 and st["hub"] == a.net.hub_url(0) and st.get("lastError") is None
    devices = hub.home.run("sync", "devices").out
    assert "pi-bedroom" in devices and "pi-hall" in devices
    # A second cycle with nothing new moves nothing.
    again = a.sync()
    assert again["uploaded"] == 0 and again["changed"] == 0


def test_skewed_clocks_converge_to_the_hybrid_clocks_winner(trio):
    """A's clock 5 minutes fast, B's 5 minutes slow (the LD_PRELOAD shift)."""
    hub, a, b = trio(shift_a=+300_000, shift_b=-300_000)
    assert a.run("preset", "save", "Sit", "--duration", "20m").rc == 0
    a.sync(), b.sync()
    assert b.presets() == [("Sit", "20m")]
    # Concurrent: both rename while apart; the larger stamp is A's (its clock is ahead and B
    # had not heard of A's change): that is the winner everywhere.
    assert a.run("preset", "rename", "Sit", "from-a").rc == 0
    time.sleep(0.2)
    assert b.run("preset", "rename", "Sit", "from-b").rc == 0
    a.sync(), b.sync(), a.sync()
    assert presets_of(hub.home) == a.presets() == b.presets() == [("from-a", "20m")]
    # Causal: B, having heard A, changes it again: B's change wins although B's wall clock is
    # 10 minutes behind A's (a wall-clock updatedAt would have kept A's).
    assert b.run("preset", "save", "from-a", "--duration", "30m").rc == 0
    b.sync(), a.sync()
    assert presets_of(hub.home) == a.presets() == b.presets() == [("from-a", "30m")]
    st = json.loads(b.run("sync", "status", "--json").out)
    assert 290_000 <= st["hubOffset"] <= 310_000, st


def test_a_clock_far_ahead_is_refused_with_a_clear_error(trio):
    hub, a, b = trio(shift_a=+900_000)
    assert a.run("preset", "save", "Fast", "--duration", "20m").rc == 0
    r = a.run("sync", "now")
    assert r.rc != 0 and len(r.err.strip().splitlines()) == 1 and "clock" in r.err and "min" in r.err, r
    assert presets_of(hub.home) == [], "nothing of the refused upload was stored"
    st = json.loads(a.run("sync", "status", "--json").out)
    assert st["pending"] >= 1 and "clock" in st["lastError"]
    de = a.home.run("sync", "now", env=dict(a.env, LANG="de_DE.UTF-8"), prefix=a.net.device_prefix(0))
    assert de.rc != 0 and "Uhr" in de.err, de


def test_edit_against_delete(trio):
    hub, a, b = trio()
    assert a.run("preset", "save", "Walk", "--duration", "10m").rc == 0
    a.sync(), b.sync()
    # B edits, then A deletes (later): the delete wins.
    assert b.run("preset", "save", "Walk", "--duration", "12m").rc == 0
    time.sleep(0.05)
    assert a.run("preset", "delete", "Walk").rc == 0
    b.sync(), a.sync(), b.sync()
    assert presets_of(hub.home) == a.presets() == b.presets() == []
    # A practice entry deleted on one device is gone everywhere.
    assert a.run("preset", "save", "Walk", "--duration", "8m").rc == 0
    a.sync(), b.sync()
    assert b.presets() == [("Walk", "8m")]
    assert b.run("preset", "delete", "Walk").rc == 0
    time.sleep(0.05)
    assert a.run("preset", "save", "Walk", "--duration", "9m").rc == 0   # an edit after the delete
    b.sync(), a.sync(), b.sync()
    assert presets_of(hub.home) == a.presets() == b.presets() == [("Walk", "9m")]


def test_a_partition_for_many_cycles_then_healed(trio, net, tmp_path):
    if not net.site:
        pytest.skip("cutting a device's link needs network namespaces (root)")
    hub, a, b = trio()
    net.site.cut(1)
    try:
        for k in range(5):
            assert a.run("preset", "save", f"A{k}", "--duration", f"{k + 1}m").rc == 0
            a.sync()
            assert b.run("preset", "save", f"B{k}", "--duration", f"{k + 1}m").rc == 0
            r = b.run("sync", "now", timeout=60)
            assert r.rc != 0 and len(r.err.strip().splitlines()) == 1 and "cannot be reached" in r.err, r
        st = json.loads(b.run("sync", "status", "--json").out)
        assert st["pending"] > 0 and "cannot be reached" in st["lastError"]
    finally:
        net.site.heal(1)
    b.sync(), a.sync()
    want = sorted([(f"A{k}", f"{k + 1}m") for k in range(5)] + [(f"B{k}", f"{k + 1}m") for k in range(5)])
    assert presets_of(hub.home) == a.presets() == b.presets() == want
    assert json.loads(b.run("sync", "status", "--json").out).get("lastError") is None


def test_kill_9_of_a_device_and_of_the_hub_mid_cycle(trio, tmp_path):
    hub, a, b = trio()
    ids = practice_csv(tmp_path / "big.csv", 10_000, seed=3)
    r = b.run("history", "import", str(tmp_path / "big.csv"), timeout=300)
    assert r.rc == 0, r
    # The hub killed while B uploads its 10,000 sits (five uploads of 2,000).
    p = b.spawn("sync", "now")
    t0 = time.monotonic()
    assert smtest.wait_for(lambda: "from device" in hub.log(), 30, 0.01), "no upload reached the hub"
    hub.kill9()
    p.wait(timeout=60)
    print(f"hub killed {time.monotonic() - t0:.2f} s into the device's cycle; its exit {p.returncode}")
    assert p.returncode != 0, "the cycle ended before the hub was killed: nothing was cut"
    with smtest.catalog_sql(hub.home.home + "/library.sqlite") as db:
        taken = db.execute("SELECT count(*) FROM practice").fetchone()[0]
    assert 0 < taken < 10_000, taken
    hub.start()
    b.sync()
    assert len(hub.home.history()) == 10_000
    # A killed while it reads them, page by page; the next cycle goes on from its cursor.
    p = a.spawn("sync", "now")
    a_db = a.home.home + "/library.sqlite"

    def some_taken():
        try:
            with smtest.catalog_sql(a_db) as db:
                return db.execute("SELECT count(*) FROM practice").fetchone()[0] > 0
        except Exception:
            return False
    assert smtest.wait_for(some_taken, 30, 0.005), "no page reached the device"
    smtest.kill_pid(p.pid)
    p.wait()
    with smtest.catalog_sql(a_db) as db:
        taken = db.execute("SELECT count(*) FROM practice").fetchone()[0]
    print(f"device killed with {taken} of 10,000 sits taken")
    assert 0 < taken < 10_000, taken
    a.sync()
    assert a.history_ids() == sorted(ids), "nothing lost, nothing twice"
    assert json.loads(a.run("sync", "status", "--json").out)["pending"] == 0


def http(net, k, method, path, body=None, token=None, raw=None):
    """A request to the hub from device k's namespace (curl), its status and body."""
    args = ["curl", "-s", "--path-as-is", "-o", "-", "-w", "\n%{http_code}", "-X", method, net.hub_url(k) + path]
    if token:
        args += ["-H", f"Authorization: Bearer {token}"]
    if body is not None or raw is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = subprocess.run([*net.device_prefix(k), *args], input=data, capture_output=True, timeout=60)
    out = r.stdout.decode("utf-8", "replace")
    text, _, code = out.rpartition("\n")
    return int(code or 0), text


def test_a_hostile_peer(trio, net):
    hub, a, b = trio()
    # The device's token, as it keeps it (a hostile device has its own).
    with smtest.catalog_sql(a.home.home + "/library.sqlite") as db:
        token = json.loads(db.execute("SELECT value FROM syncState WHERE key = 'hub'").fetchone()[0])["token"]
    now = int(time.time() * 1000)
    node = "aaaaaaaa-0000-4000-8000-000000000001"

    def stamp(ms, counter=0):
        return f"{ms:015d}-{counter:05d}-{node}"

    rid = str(uuid.uuid4())
    good = {"k": "preset", "i": rid, "f": "name", "v": "\"Fine\"", "h": stamp(now)}
    cases = {
        "a path as id": dict(good, i="../../../etc/passwd"),
        "a name with ../": dict(good, v="\"../../x\\u0000\""),
        "a stamp far in the future": dict(good, h=stamp(now + 86_400_000)),
        "a stamp that is not one": dict(good, h="tomorrow"),
        "a device in a request": dict(good, f="request", v="{\"device\":\"file:'|touch /tmp/x'\"}"),
    }
    for label, change in cases.items():
        code, text = http(net, 0, "POST", "/api/sync/push", {"node": node, "changes": [good, change]}, token)
        assert code == 422, (label, code, text)
    # A kind this version does not know (a newer device's) is passed over, the rest taken.
    other = str(uuid.uuid4())
    code, text = http(net, 0, "POST", "/api/sync/push",
                      {"node": node, "changes": [dict(good, k="lantern", i=other, f="wick", v="\"/etc/passwd\"")]}, token)
    assert code == 200, (code, text)
    # A million rows: refused by size before it is read.
    million = json.dumps({"node": node, "changes": [good] * 1_000_000}).encode()
    code, text = http(net, 0, "POST", "/api/sync/push", raw=million, token=token)
    assert code == 413, (code, text[:200])
    # 2,001 rows: over the batch's count.
    code, text = http(net, 0, "POST", "/api/sync/push", {"node": node, "changes": [good] * 2001}, token)
    assert code == 422 and "2000" in text, (code, text[:200])
    # No token, a wrong token, a revoked (replayed) token.
    assert http(net, 0, "GET", "/api/sync/pull?after=0")[0] == 401
    assert http(net, 0, "GET", "/api/sync/pull?after=0", token="0" * 64)[0] == 401
    devices = hub.home.run("sync", "devices", "--json")
    ident = [d["id"] for d in json.loads(devices.out) if d["name"] == "pi-bedroom"][0]
    assert hub.home.run("sync", "forget", str(ident)).rc == 0
    assert http(net, 0, "GET", "/api/sync/pull?after=0", token=token)[0] == 401
    r = a.run("sync", "now")
    assert r.rc != 0 and "pair again" in r.err, r
    # Nothing of all that was stored on the hub.
    assert presets_of(hub.home) == []
    with smtest.catalog_sql(hub.home.home + "/library.sqlite") as db:
        assert db.execute("SELECT count(*) FROM syncField WHERE id = ?", (rid,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM syncField WHERE id = ?", (other,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM syncField WHERE id LIKE '%..%'").fetchone()[0] == 0


def test_the_daemon_syncs_by_itself(trio):
    """A device's daemon runs cycles itself: what waits is sent, the hub's changes arrive,
    and a sit it plays reaches the hub (looks shortened to 1 s by a test seam; 1 min and
    5 min otherwise)."""
    hub, a, b = trio(idle_exit="120", STILLMOMENT_TEST_SYNC_SECONDS="1")
    assert a.run("preset", "save", "From-A", "--duration", "7m").rc == 0
    a.home.start_daemon(prefix=a.net.device_prefix(0))
    assert smtest.wait_for(lambda: ("From-A", "7m") in presets_of(hub.home), 30, 0.5), presets_of(hub.home)
    assert b.run("preset", "save", "From-B", "--duration", "9m").rc == 0
    b.sync()
    assert smtest.wait_for(lambda: ("From-B", "9m") in a.presets(), 30, 0.5), a.presets()
    r = a.run("timer", "2s", "--device", "null", "--preparation", "off", "--gong", "clear-strike")
    assert r.rc == 0, r
    assert smtest.wait_for(lambda: len(a.home.history() or []) == 1, 30, 0.25)
    sit = a.home.history()[0]["id"]
    assert smtest.wait_for(lambda: sit in [e["id"] for e in (hub.home.history() or [])], 40, 0.5), "the sit did not reach the hub"


def test_a_delete_is_collected_once_every_device_has_it(trio, tmp_path):
    hub, a, b = trio()
    ids = practice_csv(tmp_path / "two.csv", 2, seed=4)
    assert a.run("history", "import", str(tmp_path / "two.csv")).rc == 0
    a.sync(), b.sync()
    assert a.run("history", "delete", ids[0]).rc == 0
    a.sync()

    def kept():
        with smtest.catalog_sql(hub.home.home + "/library.sqlite") as db:
            return sorted(r[0] for r in db.execute("SELECT field FROM syncField WHERE id = ?", (ids[0],)))
    assert kept() == ["deleted", "entry"]
    a.sync()
    assert kept() == ["deleted", "entry"], "B has not read the delete: the hub keeps the sit"
    b.sync(), a.sync(), b.sync()
    assert kept() == ["deleted"], "read by both devices, only the delete's own row stays"
    assert "collected" in hub.log()
    a.sync(), b.sync()
    assert a.history_ids() == b.history_ids() == [ids[1]] and [e["id"] for e in hub.home.history()] == [ids[1]]
