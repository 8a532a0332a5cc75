"""The daemon keeps time, end to end against real daemons on ALSA's null device (was
schedule-tests.py): an entry a few seconds ahead starts within 100 ms of its time (its
lateness recorded by the daemon, the sit in the practice log marked scheduled), the
schedule survives a daemon restart, `upcoming` lists exactly what then rings, a bell while
a sit plays is skipped and recorded, a one-off time that has passed is refused, a daemon
with schedules does not exit when idle, and an idle daemon with 50 entries uses no
measurable CPU. An entry's outcome is read by its keyword (`lastOutcome` is "ran",
"skipped" or "missed", then ": " and a detail)."""
import json
import os
import re
import signal
import sqlite3
import time

import pytest

import smtest
from smtest import BAD_INPUT, FAILURE


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


def new_home(tmp_path_factory, **extra):
    return smtest.Home(tmp_path_factory.mktemp("sm"), idle_exit=extra.pop("idle_exit", "600"), TZ="UTC", **extra)


def listing(h):
    return (h.json("schedule", "list", "--json") or {}).get("entries", [])


def named(h, name):
    return [e for e in listing(h) if e.get("name") == name]


def outcome(entry):
    """The keyword of an entry's last outcome ("ran", "skipped", "missed"), "" when none."""
    return (entry.get("lastOutcome") or "").split(":", 1)[0]


# ------------------------------------------------------------------ the main switch

def test_switched_off_nothing_rings_and_on_again_nothing_that_passed_rings_late(binary, tmp_path_factory):
    h = new_home(tmp_path_factory)
    try:
        at = int(time.time()) + 3
        assert h.run("schedule", "add", stamp(at), "--duration", "20s", "--preparation", "off", "--device", "null",
                     "--name", "while off").rc == 0
        assert h.run("schedule", "add", "daily 06:30", "--duration", "20m", "--name", "mornings").rc == 0
        off = h.run("schedule", "off")
        assert off.rc == 0 and "off" in off.out, off
        j = h.json("schedule", "list", "--json")
        assert j["on"] is False and all(e.get("next") is None and e["enabled"] for e in j["entries"]), j
        assert "the schedule is off" in h.run("schedule", "list").out
        assert (h.json("schedule", "upcoming", "--json") or []) == []
        time.sleep(at - time.time() + 2.5)
        assert outcome(named(h, "while off")[0]) == "" and not (h.history() or []), "nothing rang while off"
        assert h.run("schedule", "on").rc == 0
        time.sleep(1.5)
        j = h.json("schedule", "list", "--json")
        gone, mornings = named(h, "while off")[0], named(h, "mornings")[0]
        assert j["on"] is True and outcome(gone) == "" and gone.get("next") is None, j
        assert mornings["next"] and mornings["next"][11:16] == "06:30", mornings
        assert not (h.history() or []), "what passed while off did not ring late when switched on"
        de = h.run("schedule", "off", lang="de_DE.UTF-8")
        assert de.rc == 0 and "Zeitplan ist aus" in de.out, de
    finally:
        h.close()


# ------------------------------------------------------------------ on time, one home in order

@pytest.fixture(scope="module")
def timekeeper(binary, tmp_path_factory):
    h = new_home(tmp_path_factory)
    try:
        yield h
    finally:
        h.close()


def test_an_entry_a_few_seconds_ahead_starts_on_time_as_a_scheduled_sit(timekeeper):
    h = timekeeper
    at = int(time.time()) + 4
    r = h.run("schedule", "add", stamp(at), "--duration", "20s", "--preparation", "off", "--device", "null", "--name", "soon")
    assert r.rc == 0 and h.daemon_pid(), "schedule add starts the daemon on demand"
    upcoming = h.json("schedule", "upcoming", "--json") or []
    time.sleep(at - time.time() + 2.0)
    entries = listing(h)
    last = (entries[0].get("lastOutcome") or "") if entries else ""
    m = re.search(r"started (-?\d+) ms after its time", last)
    late = int(m.group(1)) if m else None
    assert late is not None and 0 <= late <= 100, f"it started within 100 ms of its time ({last})"
    assert [u["at"] for u in upcoming] == [stamp(at) + "+00:00"], "upcoming listed exactly what then rang"
    hist = h.history() or []
    assert len(hist) == 1 and hist[0]["scheduled"] and hist[0]["endReason"] == "completed", hist


def test_a_bell_within_2_minutes_of_the_end_of_a_sit_is_skipped(timekeeper):
    h = timekeeper
    at = int(time.time()) + 3
    h.run("schedule", "add", stamp(at), "--bell", "soft-interval", "--name", "after the sit")
    time.sleep(at - time.time() + 1.5)
    quiet = named(h, "after the sit")
    assert quiet and outcome(quiet[0]) == "skipped" and "a sit ended" in quiet[0]["lastOutcome"], quiet


def test_a_bell_while_a_sit_plays_is_skipped_and_recorded_and_the_sit_plays_on(timekeeper):
    h = timekeeper
    r = h.run("timer", "24h", "--device", "null", "--detach")
    at = int(time.time()) + 3
    r2 = h.run("schedule", "add", stamp(at), "--bell", "clear-strike")
    time.sleep(at - time.time() + 1.5)
    bell = [e for e in listing(h) if "--bell clear-strike" in e["action"]]
    status = h.json("status", "--json") or {}
    h.run("stop")
    assert r.rc == 0 and r2.rc == 0 and bell and outcome(bell[0]) == "skipped", bell
    assert status.get("source") == "timer", status


def test_an_entry_survives_a_daemon_restart_and_rings(timekeeper):
    h = timekeeper
    pid = h.daemon_pid()
    at = int(time.time()) + 6
    h.run("schedule", "add", stamp(at), "--duration", "10s", "--preparation", "off", "--device", "null", "--name", "after restart")
    assert pid
    os.kill(pid, signal.SIGTERM)
    assert smtest.wait_gone(pid, 5), "the old daemon ends on SIGTERM"
    new = h.start_daemon()
    assert h.daemon_pid() == new.pid != pid
    time.sleep(max(0, at - time.time()) + 2.0)
    after = named(h, "after restart")
    assert after and outcome(after[0]) == "ran", after
    status = h.json("status", "--json") or {}
    greeting = h.client().greeting or {}
    assert status.get("state") == "idle" and greeting.get("hello", {}).get("pid") == new.pid == h.daemon_pid(), \
        f"status answers, from the new daemon ({status}, {greeting})"


def test_a_timetable_with_a_bad_line_is_refused_whole(timekeeper):
    h = timekeeper
    with open(h.dir + "/bad.txt", "w") as f:
        f.write("daily 05:30 --bell temple-bell\nsometimes 06:00 --duration 45m\n")
    before = len(listing(h))
    r = h.run("schedule", "import", h.dir + "/bad.txt")
    assert r.rc == BAD_INPUT and "line 2" in r.err and len(listing(h)) == before, r


def test_import_replace_takes_a_retreat_day_and_export_gives_it_back(timekeeper):
    h = timekeeper
    with open(h.dir + "/retreat.txt", "w") as f:
        f.write("# home retreat\n\ndaily 05:30 --bell temple-bell --strikes 3 --name \"Wake-up bell\"\n"
                "daily 06:00 --duration 45m --interval 15m   # first sit\n"
                "weekdays 18:00 --sections \"sit 25m, walk 5m, sit 25m\"\n")
    r = h.run("schedule", "import", h.dir + "/retreat.txt", "--replace")
    exported = h.run("schedule", "export").out
    assert r.rc == 0 and len(listing(h)) == 3, r
    assert '--name "Wake-up bell"' in exported and "sit 25m, walk 5m, sit 25m" in exported, exported
    with open(h.dir + "/again.txt", "w") as f:
        f.write(exported)
    again = h.run("schedule", "import", h.dir + "/again.txt", "--replace")
    assert again.rc == 0 and h.run("schedule", "export").out == exported, "an export imports back to the same timetable"


def test_a_one_off_time_that_has_passed_is_refused_nothing_added(timekeeper):
    """…in one line, and in German too (a translation check)."""
    h = timekeeper
    before = len(listing(h))
    r = h.run("schedule", "add", "2026-01-01 06:00", "--bell", "clear-strike")
    de = h.run("schedule", "add", "2026-01-01 06:00", "--bell", "clear-strike", lang="de_DE.UTF-8")
    assert r.rc == BAD_INPUT and de.rc == BAD_INPUT and len(r.err_lines) == 1, (r, de)
    assert "has passed" in r.err and "ist vorbei" in de.err, (r.err, de.err)
    assert len(listing(h)) == before


def test_import_leaves_out_a_one_off_time_that_has_passed_and_names_its_line(timekeeper):
    h = timekeeper
    before = len(listing(h))
    with open(h.dir + "/old.txt", "w") as f:
        f.write("daily 05:45 --bell clear-strike\n2026-01-01 06:00 --bell clear-strike\n")
    r = h.run("schedule", "import", h.dir + "/old.txt")
    assert r.rc == 0 and "(line 2)" in r.err and len(listing(h)) == before + 1, r


# ------------------------------------------------------------------ a busy device

@pytest.fixture(scope="module")
def waiting(binary, tmp_path_factory):
    """The scheduled sit's wait for the device: 10 minutes, 3 s here."""
    h = new_home(tmp_path_factory, STILLMOMENT_SCHEDULE_WAIT="3")
    try:
        yield h
    finally:
        h.close()


def test_a_scheduled_sit_waits_while_a_sit_plays_and_starts_once_it_ends(waiting):
    h = waiting
    h.run("timer", "24h", "--device", "null", "--detach")
    at = int(time.time()) + 3
    h.run("schedule", "add", stamp(at), "--duration", "20s", "--device", "null", "--name", "waits")
    time.sleep(at - time.time() + 1.0)
    status = h.json("status", "--json") or {}
    h.run("stop")
    time.sleep(2.5)
    waited = named(h, "waits")
    h.run("stop")
    assert status.get("duration") == 86_400_000, "the sit plays on"
    assert waited and outcome(waited[0]) == "ran", waited


def test_a_scheduled_sit_is_missed_when_the_device_stays_busy_past_its_wait(waiting):
    h = waiting
    h.run("timer", "24h", "--device", "null", "--detach")
    at = int(time.time()) + 3
    h.run("schedule", "add", stamp(at), "--duration", "20s", "--device", "null", "--name", "gives up")
    time.sleep(at - time.time() + 5.0)
    given = named(h, "gives up")
    h.run("stop")
    assert given and outcome(given[0]) == "missed", given


# ------------------------------------------------------------------ the schedule's data

@pytest.fixture(scope="module")
def data(binary, tmp_path_factory):
    """(The hardening of 3dfe736.) This machine may have no sound card: device null."""
    h = new_home(tmp_path_factory)
    try:
        h.run("settings", "set", "device", "null")
        h.run("schedule", "add", "daily 05:30", "--bell", "temple-bell", "--name", "old")
        yield h
    finally:
        h.close()


@pytest.mark.parametrize("extra", [[], ["--replace"]], ids=["added", "replacing"])
def test_a_1001_line_timetable_is_refused_whole_and_the_old_one_stays(data, extra):
    big = data.dir + "/big.txt"
    with open(big, "w") as f:
        f.write("".join(f"daily {k // 60 % 24:02d}:{k % 60:02d} --bell clear-strike\n" for k in range(1001)))
    r = data.run("schedule", "import", big, *extra)
    assert r.rc == BAD_INPUT and "1000" in r.err, r
    assert [e.get("name") for e in listing(data)] == ["old"]


def test_an_entry_written_behind_the_daemons_back_rings_on_time(data):
    """Whoever changes the timetable (here sqlite3, as another program might), the daemon notices."""
    data.start_daemon()
    at = int(time.time()) + 6
    db = sqlite3.connect(data.dir + "/home/library.sqlite")
    with db:
        db.execute("INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created) "
                   "SELECT 'behind its back', ?, action, 1, ?, 1, 0 FROM schedule WHERE name = 'old'", (stamp(at), at - 60))
    db.close()
    time.sleep(at - time.time() + 2.0)
    behind = named(data, "behind its back")
    for e in behind:
        data.run("schedule", "remove", str(e["id"]))
    assert behind and outcome(behind[0]) == "ran", behind


QUOTED = "it's \"the\" one \\ ok"


def test_export_then_import_is_the_same_timetable_quoted_names_included(data):
    data.run("preset", "save", 'evening "long" sit', "25m", "--interval", "5m")
    data.run("schedule", "add", "daily 19:00", "--preset", 'evening "long" sit', "--name", QUOTED)
    data.run("schedule", "add", "weekdays 18:00", "--sections", "sit 25m, walk 5m, sit 25m", "--name", "#hash first")
    exported = data.run("schedule", "export")
    with open(data.dir + "/again.txt", "w") as f:
        f.write(exported.out)
    before = [(e["when"], e["action"], e.get("name"), e["enabled"]) for e in listing(data)]
    r = data.run("schedule", "import", data.dir + "/again.txt", "--replace")
    after = [(e["when"], e["action"], e.get("name"), e["enabled"]) for e in listing(data)]
    assert exported.rc == 0 and r.rc == 0 and before == after and len(after) == 3, (r, after)


def test_a_renamed_preset_keeps_its_entry_working(data):
    r = data.run("preset", "rename", 'evening "long" sit', "Abend")
    sit = named(data, QUOTED)
    assert r.rc == 0 and sit and sit[0]["action"] == "--preset Abend" and not sit[0].get("broken"), sit


def test_deleting_a_preset_an_entry_uses_asks_for_force(data):
    r = data.run("preset", "delete", "Abend")
    assert r.rc == BAD_INPUT and "--force" in r.err and QUOTED in r.err, r
    assert "Abend" in [p["name"] for p in data.json("preset", "list", "--json") or []]


def test_with_force_the_preset_goes_and_the_entry_is_broken_and_ring_now_refuses_it(data):
    r = data.run("preset", "delete", "Abend", "--force")
    sit = named(data, QUOTED)
    assert r.rc == 0 and sit and "Abend" in (sit[0].get("broken") or ""), sit
    assert "[broken: " in data.run("schedule", "list").out, "the listing shows it broken"
    ring = data.run("schedule", "ring-now", str(sit[0]["id"]))
    assert ring.rc == FAILURE and len(ring.err_lines) == 1, ring


def test_a_timetable_never_chooses_the_sound_device(data):
    proof = data.dir + "/proof"
    with open(data.dir + "/retreat.txt", "w") as f:
        f.write(f'daily 06:00 --duration 45m --name "Morning sit" --device file:FILE="|touch {proof}",FORMAT=raw\n')
    r = data.run("schedule", "import", data.dir + "/retreat.txt")
    with open(data.dir + "/plain.txt", "w") as f:
        f.write('daily 06:00 --duration 45m --name "Morning sit" --device hw:1,0\n')
    r2 = data.run("schedule", "import", data.dir + "/plain.txt")
    assert r.rc == BAD_INPUT and r2.rc == BAD_INPUT and "line 1" in r.err and "line 1" in r2.err, (r, r2)
    assert not os.path.exists(proof) and not named(data, "Morning sit")


# ------------------------------------------------------------------ idle with 50 entries

def test_a_daemon_with_schedules_outlives_its_idle_exit_and_costs_no_cpu(binary, tmp_path_factory):
    h = new_home(tmp_path_factory, idle_exit="2")
    try:
        for k in range(49):
            h.run("schedule", "add", f"daily {k // 6 + 1:02d}:{(k * 7) % 60:02d}", "--bell", "clear-strike")
        h.run("schedule", "add", "weekends 08:00", "--duration", "20m")
        pid = h.daemon_pid()
        time.sleep(3.5)
        assert pid is not None and smtest.alive(pid), "a daemon with schedules outlives its idle exit (2 s here)"
        before = smtest.cpu_seconds(pid)
        time.sleep(10)
        used = smtest.cpu_seconds(pid) - before
        assert used <= 0.05, f"an idle daemon with 50 entries used {used:.2f} s of CPU in 10 s"
        status = h.json("status", "--json") or {}
        assert status.get("nextScheduled"), f"status shows the next scheduled item ({status})"
    finally:
        h.close()


def test_a_timetable_with_cr_lf_line_ends_imports_line_by_line(timekeeper):
    """A file written on Windows ("\r\n" is one Character in Swift: splitting on "\n" read it as one line)."""
    h = timekeeper
    with open(h.dir + "/crlf.txt", "w", newline="") as f:
        f.write("# from a Windows editor\r\ndaily 05:30 --bell temple-bell\r\n\r\nweekdays 18:00 --duration 20m\r\n")
    before = len(listing(h))
    r = h.run("schedule", "import", h.dir + "/crlf.txt")
    assert r.rc == 0 and len(listing(h)) == before + 2, r
    with open(h.dir + "/crlf-bad.txt", "w", newline="") as f:
        f.write("daily 05:30 --bell temple-bell\r\nsometimes 06:00\r\n")
    bad = h.run("schedule", "import", h.dir + "/crlf-bad.txt")
    assert bad.rc == BAD_INPUT and "line 2" in bad.err and len(listing(h)) == before + 2, bad


def test_tz_naming_a_fifo_or_a_folder_is_replaced_by_utc_with_a_warning(timekeeper):
    """TZ's one guard: libc would wait in open() on a FIFO (and our reader with it); a folder or
    a device is no zone either. The command runs at once, on UTC, and says so in one line."""
    h = timekeeper
    fifo = h.dir + "/tz-fifo"
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for tz in (fifo, ":" + fifo, "/dev/zero", h.dir):
        r = h.run("schedule", "upcoming", env=dict(h.env, TZ=tz), timeout=20)
        assert r.rc == 0 and r.secs < 10, (tz, r)
        assert "not a time zone file" in r.err and "using UTC" in r.err and len(r.err_lines) == 1, (tz, r.err)
    de = h.run("schedule", "upcoming", env=dict(h.env, TZ=fifo), lang="de_DE.UTF-8", timeout=20)
    assert de.rc == 0 and "keine Zeitzonendatei" in de.err, de
    for tz in ("Europe/Berlin", "CET-1CEST,M3.5.0,M10.5.0/3", "UTC", "No/Such_Zone"):
        ok = h.run("schedule", "upcoming", env=dict(h.env, TZ=tz), timeout=20)
        assert ok.rc == 0 and "time zone" not in ok.err, (tz, ok)


def test_tz_guard_follows_links_and_tzdir(timekeeper):
    """A link to a FIFO, and a FIFO under TZDIR, are no zone either (libc would wait on both)."""
    h = timekeeper
    fifo = h.dir + "/tz-fifo-2"
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    link = h.dir + "/tz-link"
    if not os.path.lexists(link):
        os.symlink(fifo, link)
    zones = h.dir + "/zones"
    os.makedirs(zones, exist_ok=True)
    if not os.path.exists(zones + "/Trap"):
        os.mkfifo(zones + "/Trap")
    for env in (dict(h.env, TZ=link), dict(h.env, TZ="Trap", TZDIR=zones)):
        r = h.run("schedule", "upcoming", env=env, timeout=20)
        assert r.rc == 0 and r.secs < 10 and "using UTC" in r.err, (env.get("TZ"), r)
