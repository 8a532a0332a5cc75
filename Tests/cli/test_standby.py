"""output-standby: the daemon keeps the sound device open between sessions, on the paced
device (a private PulseAudio null sink, whose monitor is recorded; was standby-tests.py).

- the setting: a wrong value is refused (exit 2, naming the values); the default is
  keep-open-during-schedule;
- keep-open: the daemon holds a stream on the sink while idle (pactl), writing silence at
  near-zero CPU (its CPU over 10 s against `pacat` playing /dev/zero to the same sink in
  the same run); a timer starts into that same stream (its sink input stays the same), with
  no underrun or xrun counted; after the session the stream is still there; the start
  latency (command to the first sound at the monitor) warm and, with `close`, cold;
- close: the stream goes within a few seconds; no stream between sessions;
- keep-open-during-schedule: no stream while nothing is scheduled; a bell scheduled 50 s
  ahead opens it (the lead is 60 s); removing the entry closes it again; a sit scheduled
  with a preset that names a device opens that device, not the `device` setting.

The tests run in order on one daemon (each setting's phase starts from the last's)."""
import struct
import subprocess
import threading
import time

import pytest

import smtest
from smtest import BAD_INPUT, wait_for

RATE = 44100


def sink_inputs(h):
    """The sink inputs (streams) on the null sink: their indices. A pactl that fails raises
    (a failed listing must not read as "no stream")."""
    r = subprocess.run(["pactl", "list", "short", "sink-inputs"], env=h.env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"pactl list failed ({r.returncode}): {r.stderr.strip()}")
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def same_daemon(h):
    """The daemon started at the beginning still runs and holds the lock: "no stream" must
    not be the silence of a daemon that died (another would start on demand)."""
    return smtest.alive(h.pid) and h.daemon_pid() == h.pid


def clean_counts(st):
    """Status of a session playing, with its counts present and zero (a failed status call
    gives {}: no count is taken for 0)."""
    return st.get("underruns") == 0 and st.get("xruns") == 0 and st.get("state") not in (None, "idle", "paused")


def start_latency(h):
    """Seconds from `timer` to the first sound (above -40 dBFS) at the sink's monitor: the
    recording is read in 5-ms fragments, each stamped on arrival (CLOCK_MONOTONIC)."""
    rec = h.track(subprocess.Popen(["parec", "-d", "sm.monitor", "--raw", "--format=float32le", "--channels=1",
                                    f"--rate={RATE}", "--latency-msec=5"],
                                   env=h.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    chunks = []

    def read():
        while True:
            b = rec.stdout.read1(65536)
            if not b:
                return
            chunks.append((time.monotonic(), b))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    h.run("timer", "1m", "--preparation", "off", "--device", "pulse", "--detach")
    time.sleep(2.0)
    smtest.stop_pid(rec.pid)
    rec.wait()
    t.join(2)
    rest = b""
    for at, b in chunks:
        data = rest + b
        n = len(data) // 4
        rest = data[n * 4:]
        samples = struct.unpack(f"<{n}f", data[: n * 4])
        for i, v in enumerate(samples):
            if abs(v) > 0.01:
                heard = at - (n - i) / RATE      # the fragment arrived after its last frame
                return max(0.0, heard - t0) if at > t0 else None
    return None


def remove_all_entries(h):
    for e in (h.json("schedule", "list", "--json") or {}).get("entries", []):
        h.run("schedule", "remove", str(e["id"]))


@pytest.fixture(scope="module")
def standby(binary, tmp_path_factory, pulse):
    h = smtest.Home(tmp_path_factory.mktemp("sm"), idle_exit="120", TZ="UTC", **pulse)
    h.pid = None
    try:
        yield h
    finally:
        h.close()


def test_a_wrong_value_is_refused_in_one_line_naming_the_values(standby):
    r = standby.run("settings", "set", "output-standby", "sometimes")
    assert r.rc == BAD_INPUT and len(r.err_lines) == 1 and "keep-open" in r.err, r


def test_the_default_is_keep_open_during_schedule(standby):
    assert "keep-open-during-schedule" in standby.run("settings", "show").out


# ---- keep-open: a stream while idle, silence at near-zero CPU

def test_keep_open_the_idle_daemon_holds_a_stream_on_the_sink(standby):
    h = standby
    h.run("settings", "set", "device", "pulse")
    h.run("settings", "set", "output-standby", "keep-open")
    h.pid = h.start_daemon().pid
    h.streams = wait_for(lambda: sink_inputs(h), 10)
    assert len(h.streams) == 1, h.streams


def test_keep_open_plays_silence_into_it(standby):
    h = standby
    # (The null sink starts a new stream only once its block rendered ahead is over.)
    wait_for(lambda: h.status().get("keptOpen", {}).get("framesWritten", 0) > RATE, 5)
    k0 = h.status().get("keptOpen", {})
    time.sleep(1.0)
    k1 = h.status().get("keptOpen", {})
    ran = k1.get("framesWritten", 0) - k0.get("framesWritten", 0)
    assert k0.get("device") == "pulse" and 0.5 * RATE <= ran <= 1.6 * RATE, f"keptOpen {k1}, {ran} frames written in 1 s"


def test_keep_open_status_says_so(standby):
    """The rendering of keptOpen in `status`."""
    assert standby.run("status").out.strip() == "idle; pulse kept open"


def test_keep_open_the_warm_idle_daemon_uses_near_zero_cpu(standby):
    h = standby
    time.sleep(1.0)
    c0 = smtest.cpu_seconds(h.pid)
    time.sleep(10)
    idle_cpu = smtest.cpu_seconds(h.pid) - c0
    ref = h.track(subprocess.Popen(["pacat", "--raw", "--format=s16le", "--channels=2", f"--rate={RATE}", "-d", "sm", "/dev/zero"],
                                   env=h.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)
    r0 = smtest.cpu_seconds(ref.pid)
    time.sleep(10)
    ref_cpu = smtest.cpu_seconds(ref.pid) - r0
    smtest.stop_pid(ref.pid)
    ref.wait()
    assert idle_cpu <= 0.05 and same_daemon(h), \
        f"CPU in 10 s: {idle_cpu:.3f} s (pacat /dev/zero to the same sink: {ref_cpu:.3f} s)"


def test_keep_open_a_timer_starts_into_the_same_stream_without_underruns(standby):
    h = standby
    h.latency = start_latency(h)
    st = h.status()
    now = sink_inputs(h)
    assert now == h.streams, f"a timer plays into the same stream ({h.streams} → {now})"
    assert h.latency is not None, "keep-open: start latency, command to the first sound: none heard"
    print(f"keep-open: start latency {h.latency * 1000:.0f} ms")
    assert clean_counts(st), f"no underrun or xrun counted for the start ({st})"
    time.sleep(1.0)
    st = h.status()
    assert clean_counts(st), f"…nor a second later ({st})"


def test_keep_open_after_the_session_the_stream_stays(standby):
    h = standby
    h.run("stop")
    idle = h.wait_idle(5)
    time.sleep(1.5)
    assert idle.get("state") == "idle" and sink_inputs(h) == h.streams and "keptOpen" in h.status(), (idle, sink_inputs(h))


def test_keep_open_a_second_session_after_the_standby_has_no_underrun(standby):
    h = standby
    r = h.run("timer", "1m", "--preparation", "off", "--device", "pulse", "--detach")
    time.sleep(1.5)
    st = h.status()
    h.run("stop")
    h.wait_idle(5)
    assert r.rc == 0 and clean_counts(st), {k: st.get(k) for k in ("state", "underruns", "xruns", "silences", "elapsed")}


# ---- close: the stream goes

def test_close_the_stream_is_closed_within_a_few_seconds(standby):
    h = standby
    h.run("settings", "set", "output-standby", "close")
    gone = wait_for(lambda: not sink_inputs(h), 10)
    assert gone and same_daemon(h), f"({sink_inputs(h)}; daemon {h.pid} {'alive' if same_daemon(h) else 'GONE'})"


def test_close_start_latency_cold(standby):
    h = standby
    # PulseAudio's null sink renders up to 2 s ahead once its last stream has gone, and a
    # stream that comes within that block waits for its end (1.4 s measured right after
    # the standby's stream closed): the cold start is measured 3 s later.
    time.sleep(3)
    cold = start_latency(h)
    assert cold is not None, "close: start latency, command to the first sound: none heard"
    warm = getattr(h, "latency", None)
    print(f"close: start latency {cold * 1000:.0f} ms (warm: {'-' if warm is None else f'{warm * 1000:.0f} ms'})")


def test_close_no_stream_between_sessions(standby):
    h = standby
    h.run("stop")
    h.wait_idle(5)
    time.sleep(1.0)
    st = h.status()
    assert not sink_inputs(h) and st.get("state") == "idle" and "keptOpen" not in st and same_daemon(h), st


# ---- keep-open-during-schedule: open from a minute before an entry

def test_during_schedule_no_stream_while_nothing_is_scheduled(standby):
    h = standby
    h.run("settings", "reset", "output-standby")
    time.sleep(3)
    assert not sink_inputs(h) and same_daemon(h)


def test_during_schedule_a_bell_50_s_ahead_opens_the_stream_and_removing_it_closes_it(standby):
    h = standby
    at = time.time() + 50
    r = h.run("schedule", "add", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)), "--bell", "clear-strike", "--name", "soon")
    opened = wait_for(lambda: sink_inputs(h), 10)
    remove_all_entries(h)
    closed = wait_for(lambda: not sink_inputs(h), 10)
    assert r.rc == 0 and len(opened) == 1, f"a bell 50 s ahead opens the stream ({r}; {opened})"
    assert closed and same_daemon(h), f"the entry removed, the stream closes ({sink_inputs(h)})"


def test_during_schedule_a_presets_device_is_the_one_opened(standby):
    """A scheduled sit whose preset names the device: that device is opened (not the
    `device` setting, which the session would then close for its own)."""
    h = standby
    r = h.run("preset", "save", "on-sm", "5m", "--device", "pulse:sm")
    at = time.time() + 50
    r2 = h.run("schedule", "add", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)), "--preset", "on-sm", "--name", "preset-device")
    kept = wait_for(lambda: h.status().get("keptOpen", {}).get("device"), 10)
    remove_all_entries(h)
    wait_for(lambda: not sink_inputs(h), 10)
    assert r.rc == 0 and r2.rc == 0 and kept == "pulse:sm", (r, r2, kept)


def test_no_slow_or_failed_standby_work_in_the_log(standby):
    slow = [line for line in open(standby.dir + "/daemon.log").read().splitlines() if "took" in line or "cannot keep" in line]
    assert not slow
