"""Pauses, resumes and seeks on the `pulse` device, recorded at a private null sink's
monitor (was pause-click-tests.py; README, "Tests"): a pause 0 to 200 ms after a resume
makes no sample step above the tone's own (a click); four seeks bring the new audio within
60 ms of the old, without a click; a `seek by 0` behind 300 other requests in one write
takes the position heard when it was sent, within 5 ms; a seek stamped with the client's
own time counts from it (up to 1 s back). Then, with no recorder on the sink, 20 pauses
and resumes and 4 seeks count no xrun or underrun.

The recorded phase runs once (a module fixture); each test reads one of its marks."""
import json
import math
import os
import subprocess
import sys
import time

import pytest

import smtest
from smtest import Client

sys.path.insert(0, os.path.join(smtest.ROOT, "bench"))
import realtime as rt  # noqa: E402  (the recorder and the seek's gap, shared with `make bench`)

RATE = rt.RATE
TONE_STEP = 0.3 * 2 * math.pi * 440 / RATE
GAPS = [float(g) for g in os.environ.get("PAUSE_CLICK_GAPS", "0,0.005,0.01,0.02,0.05,0.2").split(",")]
SEEKS = 4


@pytest.fixture(scope="module")
def tone_daemon(binary, tmp_path_factory, pulse):
    """A daemon on the private null sink with `tone` (10 minutes of 440 Hz, encoded in one
    piece: a short MP3 repeated brought the encoder's gaps), and a client of it."""
    h = smtest.Home(tmp_path_factory.mktemp("sm"), idle_exit="600", **pulse)
    try:
        wav, mp3 = h.dir + "/tone.wav", h.dir + "/tone.mp3"
        subprocess.run(["sox", "-q", "-n", "-r", str(RATE), "-c", "2", wav, "synth", "600", "sine", "440", "vol", "0.3"],
                       check=True)
        subprocess.run(["lame", "--quiet", "-t", "-b", "192", wav, mp3], check=True)
        os.unlink(wav)
        assert h.run("import", mp3, "--name", "tone").rc == 0
        h.start_daemon()
        h.c = h.client("pause-click")
        yield h
    finally:
        h.close()


def result(answer):
    return (answer or {}).get("result", answer or {})


@pytest.fixture(scope="module")
def recorded(tone_daemon):
    """The recorded phase: pauses after resumes, seeks, seeks behind a batch and stamped."""
    h, c = tone_daemon, tone_daemon.c
    rec = rt.Recorder(h.env, device="sm.monitor")
    h.track(rec.proc)
    rec.start()
    time.sleep(0.3)
    m = type("Recorded", (), {})()
    m.rec, m.marks, m.seeks, m.behind, m.stamped = rec, [], [], [], []
    c.request("play", {"id": "tone", "device": "pulse"})
    time.sleep(3)
    for gap in GAPS:
        c.request("pause")
        tp = c.sent
        time.sleep(0.6)
        c.request("resume")
        t = c.sent
        time.sleep(gap)
        c.request("pause")
        time.sleep(0.6)
        c.request("resume")
        t2 = c.sent
        time.sleep(1.5)
        m.marks.append((gap, tp, t, t2))
    # Seeks: the new audio follows the old within a few tens of ms. The silence the device
    # needed while the producer refilled went in whole periods of the stream (125 ms) in
    # front of the new audio: 250 ms at every seek, until it was taken back.
    time.sleep(0.5)
    for i in range(SEEKS):
        c.request("seek", {"by": 15000 if i % 2 == 0 else -15000})
        m.seeks.append(c.sent)
        time.sleep(1.0)
    # A seek that waits behind other requests counts from when it came in: 300 status
    # requests and a seek by 0 in one write; its target against the position heard when the
    # batch was sent, from a status just before (the stream's clock is smooth). It landed
    # 22-34 ms late when the daemon took the position only once it reached the seek.
    for _ in range(3):
        t0 = time.monotonic()
        s0 = result(c.request("status"))
        t0b = time.monotonic()
        lines = [{"id": 10000 + i, "command": "status"} for i in range(300)]
        lines.append({"id": 20000, "command": "seek", "args": {"by": 0}})
        t1 = time.monotonic()
        c.send_lines(lines)
        while (a := c.answer()) is not None and a.get("id") != 20000:
            pass
        took = (time.monotonic() - t1) * 1000
        expected = s0["position"] + (t1 - (t0 + t0b) / 2) * 1000
        m.behind.append((result(a).get("position", -1e9) - expected, (t0b - t0) * 1000 / 2, took))
        time.sleep(1.0)
    # A client on this machine may say when its user asked ("at": CLOCK_MONOTONIC in µs):
    # the seek counts from then, up to a second back; an older stamp or one in the future
    # is not believed (the request's arrival counts).
    for back, believed in ((0.3, True), (1.5, False), (-0.5, False)):
        time.sleep(2.5)
        t0 = time.monotonic()
        s0 = result(c.request("status"))
        t0b = time.monotonic()
        mid = (t0 + t0b) / 2
        at = mid - back
        r = result(c.request("seek", {"by": 0, "at": int(at * 1e6)}))
        counted = at if believed else c.sent
        off = r.get("position", -1e9) - (s0["position"] + (counted - mid) * 1000)
        m.stamped.append((back, believed, off, (t0b - t0) * 1000 / 2))
    m.status = result(c.request("status"))
    c.request("stop")
    time.sleep(0.5)
    rec.stop()
    rec.join()
    m.x = rec.samples
    if os.environ.get("PAUSE_CLICK_DUMP"):
        # Where the tone is heard in the recording (50-ms blocks), against the resumes.
        x = m.x
        blocks = [max(abs(v) for v in x[i:i + RATE // 20] or [0]) > 0.01 for i in range(0, len(x), RATE // 20)]
        print("heard:", "".join("#" if b else "." for b in blocks), flush=True)
        print("resumes at blocks:", [(g, (rec.index_at(t) or -1) // (RATE // 20)) for g, _, t, _ in m.marks], flush=True)
    return m


@pytest.mark.parametrize("i", range(len(GAPS)), ids=[f"{g * 1000:.0f}ms" for g in GAPS])
def test_a_pause_soon_after_a_resume_makes_no_click(recorded, i):
    """The recording must hold the tone where the test says it plays: before the pause
    ahead of this resume, and after the next resume (a pause within 20 ms of a resume is
    silent from the start, rightly). A window of silence, as a starved recorder gave,
    would say "no click" about nothing. (The null sink renders ahead while no stream
    plays: a resume was once heard only 0.5-1.4 s later in CI, so the tone is looked for
    until the next pause.)"""
    rec, x = recorded.rec, recorded.x
    gap, tp, t, t2 = recorded.marks[i]
    ap, a, a2 = rec.index_at(tp), rec.index_at(t), rec.index_at(t2)
    assert None not in (ap, a, a2), "the recording covers it"
    lo, hi = max(1, a - 2000), min(len(x), a + int(RATE * 1.2))
    worst = max(abs(x[k] - x[k - 1]) for k in range(lo, hi))
    before = max((abs(v) for v in x[max(0, ap - 8000):max(0, ap - 2000)]), default=0.0)
    back = next((k for k in range(a2, min(len(x), a2 + int(RATE * 1.4))) if abs(x[k]) > 0.01), None)
    assert before > 0.01, f"the tone heard before the pause ahead of it (peak {before:.2f})"
    assert back is not None, "the tone heard after the next resume"
    assert worst <= TONE_STEP * 1.001, f"largest step {worst / TONE_STEP:.2f}x the tone's own"


@pytest.mark.parametrize("n", range(SEEKS), ids=[f"{15 if n % 2 == 0 else -15:+d}s-{n + 1}" for n in range(SEEKS)])
def test_a_seek_brings_the_new_audio_within_60_ms_without_a_click(recorded, n):
    found = rt.seek_gap(recorded.rec, recorded.x, recorded.seeks[n])
    assert found is not None, "the recording covers it and the new audio"
    gap, worst, playing = found
    assert playing, "the tone was heard when the seek was sent"
    assert gap <= 60 and worst <= TONE_STEP * 1.001, \
        f"the new audio {gap:.0f} ms after the old (at most 60; 250 before), largest step {worst / TONE_STEP:.2f}x the tone's own"


def test_a_seek_behind_300_requests_counts_from_when_it_came_in(recorded):
    assert all(abs(off) <= 5 + half for off, half, _ in recorded.behind), \
        ", ".join(f"{off:+.1f} ms (±{half:.1f}; the batch answered in {took:.0f} ms)" for off, half, took in recorded.behind)


def test_a_seek_with_the_clients_own_time_counts_from_it_up_to_1_s_back(recorded):
    assert all(abs(off) <= 5 + half for _, _, off, half in recorded.stamped), \
        ", ".join(f"at {-back * 1000:+.0f} ms {'believed' if ok else 'not believed'}: {off:+.1f} ms (±{half:.1f})"
                  for back, ok, off, half in recorded.stamped)


def test_no_underrun_counted_in_the_recorded_phase(recorded):
    assert recorded.status.get("underruns") == 0, recorded.status


@pytest.fixture(scope="module")
def unrecorded(tone_daemon, recorded):
    """No recorder on the sink now: with no other stream on it, the sink mixes as far ahead
    as our stream's latency allows (~400 ms). A pause used to empty the stream before its
    cork came (an underrun at every pause); a pause's fade and the zeros after it must reach
    the server in one write: the fade alone let the sink empty the stream at 1 in 20
    pauses, so there are 20 here."""
    c = tone_daemon.c
    c.request("play", {"id": "tone", "device": "pulse"})
    time.sleep(3)
    counts, timings = [], []
    for _ in range(20):
        sent = time.monotonic()
        c.request("pause")
        time.sleep(0.4)
        paused = result(c.request("status"))
        timings.append((int(sent * 1e6), paused.get("lastPause")))
        c.request("resume")
        time.sleep(0.8)
        playing = result(c.request("status"))
        counts.append((paused.get("xruns"), paused.get("underruns"), playing.get("xruns"), playing.get("underruns"),
                       playing.get("state"), playing.get("paused")))
    for i in range(4):
        c.request("seek", {"by": 15000 if i % 2 == 0 else -15000})
        time.sleep(0.8)
    after = result(c.request("status"))
    c.request("stop")
    return counts, after, timings


def test_without_a_recorder_20_pauses_and_resumes_count_no_underrun_and_each_resume_plays(unrecorded):
    counts, _, _ = unrecorded
    assert all(c[:4] == (0, 0, 0, 0) and c[4] == "playing" and c[5] is False for c in counts), \
        f"(xruns, underruns) paused and playing after each resume: {counts}"


def test_without_a_recorder_4_seeks_count_no_underrun(unrecorded):
    _, after, _ = unrecorded
    assert after.get("xruns") == 0 and after.get("underruns") == 0 and after.get("state") == "playing", after


def test_status_says_where_each_pause_went(unrecorded):
    """status's lastPause: when the daemon posted the pause to the output thread and when the
    thread wrote its fade (CLOCK_MONOTONIC µs, the clock of the send's own stamp), and what
    the stream still held in front of the fade: each pause its own, in order, after its send."""
    _, _, timings = unrecorded
    assert all(isinstance(t, dict) for _, t in timings), timings
    posted = [t["postedAt"] for _, t in timings]
    assert posted == sorted(set(posted)), f"one account per pause, in order: {posted}"
    bad = [(sent, t) for sent, t in timings
           if not (sent <= t["postedAt"] <= t["writtenAt"] <= sent + 100_000 and 0 <= t["aheadMs"] <= 1000)]
    assert not bad, f"(the send, lastPause) out of order or late: {bad}"
