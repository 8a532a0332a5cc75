"""The command line as a careless user or an attacker uses it: huge and negative numbers,
conflicting flags, hostile tags and file names, and the daemon's socket fed the same.
(Was cli-tests.py.) Refusals are read by their exit code and one line on stderr, and by
what is stored afterwards; the sentences themselves are test_german.py's."""
import json
import os
import struct
import subprocess

import pytest

import smtest
from smtest import BAD_INPUT, FAILURE, NO_DEVICE, ROOT, one_line_error

# ------------------------------------------------------------------ 1. numbers and flags

NUMBERS = [["timer", "1e15"], ["timer", "99999999999999999:00"], ["settings", "set", "duration", "1e15"],
           ["list", "--max-duration", "1e300"], ["timer", "5m", "--preparation", "1e15"],
           ["timer", "5m", "--interval", "1e15"], ["timer", "5m", "--interval", "0.001s"],
           ["settings", "set", "interval", "0.001s"], ["timer", "5m", "--bells", "99999999999999999s"],
           ["timer", "-5m"], ["timer", "inf"], ["timer", "nan"], ["timer", "0x10"],
           ["timer", "5m", "--gong-volume", "1e309"], ["timer", "5m", "--strikes", "99999999999999999999"]]


@pytest.mark.parametrize("args", NUMBERS, ids=" ".join)
def test_a_number_a_user_can_type_is_refused_in_one_line(home, args):
    """Refused with exit 2 in one line, never a trap (132)."""
    r = home.run(*args, "--device", "null") if args[0] == "timer" else home.run(*args)
    assert one_line_error(r), r


# Device names are read by one guard: an inline ALSA definition (ALSA's file plugin runs
# FILE="|cmd"; file: and tee: write any file) is refused from every way in.
DEVICES = ['file:FILE="|touch {proof}",FORMAT=raw', "file:FILE={proof},FORMAT=raw", "file:'{proof}'",
           "tee:null,{proof},raw", "tee:null,proof,raw", "alsa:tee:null,proof,raw", "plug:SLAVE=file"]
WAYS_IN = [["timer", "1m", "--foreground", "--device"], ["timer", "1m", "--detach", "--device"],
           ["settings", "set", "device"], ["preset", "save", "p", "--device"], ["play", "x", "--device"]]


@pytest.mark.parametrize("way", WAYS_IN, ids=lambda w: " ".join(w[:2]))
@pytest.mark.parametrize("device", DEVICES)
def test_an_inline_alsa_definition_is_refused_from_every_way_in(home, device, way):
    proof = home.dir + "/proof"
    dev = device.format(proof=proof)
    r = home.run(*way, dev)
    assert one_line_error(r), r
    # the guard's refusal, naming the device, not another one (`play x`: no such meditation)
    assert f"--device: '{dev}'" in r.err, r
    assert not os.path.exists(proof) and not os.path.exists(os.path.join(ROOT, "proof"))


def test_a_cards_name_in_alsas_own_form_is_a_setting(home):
    r = home.run("settings", "set", "device", "plughw:CARD=Headphones,DEV=0")
    assert r.rc == 0, r


def test_a_negative_bells_offset_is_a_value_not_an_option(home):
    out = home.dir + "/b.wav"
    r = home.run("timer", "5m", "--bells", "-2m", "--preparation", "off", "--output", out)
    assert r.rc == 0 and os.path.exists(out), r


def wav_format(path):
    with open(path, "rb") as f:
        head = f.read(256)
    i = head.find(b"fmt ")
    tag, ch, rate = struct.unpack_from("<HHI", head, i + 8)
    bits = struct.unpack_from("<H", head, i + 22)[0]
    return tag, ch, rate, bits, os.path.getsize(path)


def test_format_s16_writes_16_bit_pcm_half_the_size_of_the_float_default(home):
    r16 = home.run("timer", "1m", "--preparation", "off", "--output", home.dir + "/s16.wav", "--format", "s16")
    rf = home.run("timer", "1m", "--preparation", "off", "--output", home.dir + "/f32.wav")
    assert r16.rc == 0 and rf.rc == 0, (r16, rf)
    a, b = wav_format(home.dir + "/s16.wav"), wav_format(home.dir + "/f32.wav")
    assert a[:4] == (1, 2, 44100, 16) and b[:4] == (3, 2, 44100, 32), (a, b)
    assert abs(a[4] * 2 - b[4]) < 1024, (a, b)


@pytest.mark.parametrize("args", [["--output", "{dir}/bad.wav", "--format", "mp3"], ["--format", "s16", "--device", "null"]],
                         ids=["mp3 output", "format without output"])
def test_a_bad_format_is_refused_in_one_line(home, args):
    r = home.run("timer", "1m", *(a.format(dir=home.dir) for a in args))
    assert one_line_error(r) and not os.path.exists(home.dir + "/bad.wav"), r


def test_an_unknown_option_exits_2_not_argument_parsers_64(home):
    assert home.run("timer", "--nope").rc == BAD_INPUT


def test_output_with_detach_is_refused(home):
    r = home.run("timer", "5m", "--output", home.dir + "/x.wav", "--detach")
    assert one_line_error(r) and not os.path.exists(home.dir + "/x.wav"), r


def test_a_device_that_cannot_open_exits_3_in_one_line(home):
    r = home.run("timer", "1m", "--device", "no-such-device-xyz", "--foreground")
    assert r.rc == NO_DEVICE and len(r.err_lines) == 1, r


def test_a_damaged_settings_file_is_a_failure_not_bad_input(home):
    os.makedirs(home.home, exist_ok=True)
    with open(home.home + "/settings.json", "w") as f:
        f.write("{ not json")
    r = home.run("timer", "1m", "--device", "null", "--foreground")
    assert r.rc == FAILURE and "settings" in r.err, r


def test_a_key_in_settings_json_that_is_no_setting_is_named_not_dropped(home):
    os.makedirs(home.home, exist_ok=True)
    with open(home.home + "/settings.json", "w") as f:
        f.write('{"duration": "20m", "durration": "5m"}')
    r = home.run("timer", "1m", "--device", "null", "--foreground")
    assert r.rc == FAILURE and "durration" in r.err and len(r.err_lines) == 1, r
    # The message's own remedy mends it, keeping the rest.
    r = home.run("settings", "reset", "durration")
    with open(home.home + "/settings.json") as f:
        kept = json.load(f)
    assert r.rc == 0 and kept == {"duration": "20m"}, (r, kept)


def test_the_web_apps_settings_registered_at_start_are_shown_checked_and_read_back(home):
    """web-listen and web-max-upload live in the web target and are registered by main:
    `settings` lists them, refuses a bad value with the web's rule, and a file holding
    them is read by every command (the timer too), not refused as an unknown key."""
    shown = home.run("settings", "show")
    bad = home.run("settings", "set", "web-listen", "localhost:80")
    good = home.run("settings", "set", "web-max-upload", "500M")
    timer = home.run("timer", "1s", "--device", "null", "--foreground", "--preparation", "off")
    assert shown.rc == 0 and "web-listen" in shown.out and "web-max-upload" in shown.out, shown
    assert bad.rc == BAD_INPUT and len(bad.err_lines) == 1 and "ADDRESS:PORT" in bad.err, bad
    assert good.rc == 0 and timer.rc == 0, (good, timer)
    with open(home.home + "/settings.json") as f:
        assert json.load(f) == {"web-max-upload": "500M"}


def test_help_lists_the_exit_codes_and_value_ranges(home):
    r = home.run("--help")
    assert r.rc == 0 and "Exit codes" in r.out and "24 h" in r.out


# ------------------------------------------------------------------ 2. the library

@pytest.fixture(scope="module")
def library(binary, tmp_path_factory):
    """A library with a meditation whose tags carry escape sequences."""
    h = smtest.Home(tmp_path_factory.mktemp("sm"))
    try:
        hostile = smtest.tone(h.dir + "/hostile.mp3", title="x\x1b]0;t\x07\x1b[2J title", artist="T\x1b[31m")
        h.imported = h.run("import", hostile)
        h.hostile = hostile
        data = h.json("list", "--json") or [{}]
        h.mid = data[0].get("id", "none")
        yield h
    finally:
        h.close()


def test_a_title_with_escape_sequences_imports_and_prints_without_them(library):
    r = library.imported
    assert r.rc == 0 and "\x1b" not in r.out + r.err and "\x07" not in r.out + r.err, r


def test_list_prints_the_hostile_title_without_control_characters(library):
    r = library.run("list")
    assert r.rc == 0 and "\x1b" not in r.out and "title" in r.out, r


def test_list_json_keeps_the_title_as_it_is(library):
    data = library.json("list", "--json")
    assert data and "\x1b" in data[0]["name"]


def test_list_search_without_matches_is_empty(library):
    r = library.run("list", "--search", "no such thing")
    assert r.rc == 0 and library.json("list", "--search", "no such thing", "--json") == [], r


def test_a_unique_id_prefix_of_2_characters_finds_the_meditation(library):
    r = library.run("show", library.mid[:2])
    assert r.rc == 0 and library.mid in r.out, r


def test_edit_album_sets_the_album(library):
    r = library.run("edit", library.mid[:8], "--album", "Morning")
    assert r.rc == 0 and library.json("show", library.mid, "--json")["album"] == "Morning", r


def test_play_from_past_the_end_is_refused(library):
    r = library.run("play", library.mid, "--from", "9:00", "--foreground", "--device", "null")
    assert one_line_error(r), r
    assert not library.history(), "nothing played"


def test_text_direction_characters_from_tags_are_not_printed(library, tmp_path):
    """U+202E shows what follows reversed: a title with it imports and prints without."""
    bidi = smtest.tone(tmp_path / "bidi.mp3", title="evil\u202egpj.exe\u2066x\u2069", artist="T\u200f")
    r = library.run("import", bidi)
    listed = library.run("list")
    assert r.rc == 0 and listed.rc == 0 and "evilgpj.exe" in listed.out, (r, listed)
    assert not any(ch in r.out + r.err + listed.out for ch in "\u202e\u2066\u2069\u200f")


def _names(h):
    """Every name the user gave that is stored: presets, schedule entries, a meditation's tags."""
    shown = h.json("show", h.mid, "--json") or {}
    return (json.dumps(h.json("preset", "list", "--json")), json.dumps(h.json("schedule", "list", "--json")),
            shown.get("name"), shown.get("teacher"))


@pytest.mark.parametrize("args", [["preset", "save", "a\tb", "20m"], ["preset", "save", "a\u202eb", "20m"],
                                  ["schedule", "add", "daily 06:00", "--bell", "temple-bell", "--name", "a\tb"],
                                  ["edit", "{mid}", "--name", "a\tb"], ["edit", "{mid}", "--teacher", "x\u202ey"]],
                         ids=["preset tab", "preset U+202E", "schedule tab", "edit name tab", "edit teacher U+202E"])
def test_a_tab_or_u202e_in_a_name_is_refused_from_every_command(library, args):
    before = _names(library)
    r = library.run(*(a.format(mid=library.mid[:8]) for a in args))
    assert one_line_error(r), r
    assert _names(library) == before, "nothing stored"


def test_a_file_name_that_is_not_utf8_imports(library):
    raw = os.fsencode(library.dir) + b"/caf\xe9 talk.mp3"
    with open(library.hostile, "rb") as src, open(raw, "wb") as dst:
        dst.write(src.read())
    p = subprocess.run([os.fsencode(smtest.BIN), b"import", raw], env=library.env, capture_output=True)
    assert p.returncode == 0, p.stderr


# ------------------------------------------------------------------ 3. the socket
# The numbers that used to kill the daemon, sent over its socket, the 510-deep line and
# 128 idle clients were tested here and again in daemon-tests.py: they are in
# test_daemon.py once (test_every_bad_message_is_refused_and_the_daemon_serves_on,
# test_a_510_deep_line_is_refused_at_once_and_a_wide_one_read, the crowd's tests); what
# each value is answered with is SessionServiceTests' and ParserPropertyTests'.


# ------------------------------------------------------------------ 4. another user's folder
# A runtime folder of nobody's with a fake daemon of theirs listening in it was tested here,
# in daemon-tests.py and in library-faults.sh: it is test_daemon.py's
# test_untrusted_a_folder_of_nobodys_with_a_fake_daemon_of_theirs (status, timer and stop
# refused in one line naming the folder, the fake never connected to, no daemon started),
# and library-faults.sh's case 5 (also /tmp/stillmoment-UID in a mount namespace).
