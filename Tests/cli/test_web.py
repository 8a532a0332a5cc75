"""The web app, tested in a real browser and with plain HTTP clients (was web-tests.py).

Run with the venv scripts/webenv.sh makes (`make test` does):
.build/web-venv/bin/python -m pytest -q Tests/cli/test_web.py. Headless Chromium from
Debian (chromium, chromium-driver) is driven by Selenium against a real `stillmoment web`
and a real daemon playing on a private PulseAudio null sink (paced, real time): the `web`
fixture (conftest.py, through webharness.py). The tests of a section run in order on the
section's web app (and browser)."""
import fcntl
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.parse
import warnings

import pytest
from selenium.webdriver.common.by import By

import smtest


def stop_hard(p):
    """SIGKILL (a crash) to a process of ours, by its PID, and its end awaited."""
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)


def tls_context(maximum=None, minimum=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if maximum:
        ctx.maximum_version, ctx.minimum_version = maximum, minimum
    return ctx


def tls_exchange(port, data, wait=5.0):
    """Raw bytes over TLS (any certificate), what came back until the server closed."""
    out = b""
    try:
        s = tls_context().wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=wait))
        s.sendall(data)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        s.close()
    except (OSError, ssl.SSLError):
        pass
    return out


def upload(port, token, name, data):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("PUT", "/api/import?name=" + urllib.parse.quote(name, safe=""), body=data,
              headers={"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sm_token={token}"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw


def certificate(web, name):
    cert, key = (os.path.join(web.DIR, f"{name}-{n}") for n in ("cert.pem", "key.pem"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=localhost", "-days", "2", "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def cut_upload(port, token):
    """A PUT of 1,000,000 bytes cut off after 300,000: the open socket."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall((f"PUT /api/import?name=cut.mp3 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
               f"Cookie: sm_token={token}\r\nContent-Length: 1000000\r\n\r\n").encode() + b"\xff" * 300000)
    return s


# ------------------------------------------------------------------ hardening (commit 3dfe736)
# A header that once killed the web app, the pairing lockout across a crash and per client
# address, a crash's partial upload, file names that look like options, a sound device
# named by the web. Its web apps are stopped by PID when the section ends.

BAD_LANGUAGES = (";", ";;", "fr,;", ";,en")


@pytest.fixture(scope="module")
def hard(web):
    h = type("Hardening", (), {})()
    h.web, h.port = web.start_web()
    _, h.token, _ = web.pair_http(h.port, "hardening")
    h.up = os.path.join(web.HOME, ".web-uploads")
    yield h
    for p in (h.web, getattr(h, "tls_web", None)):
        if p is not None and p.poll() is None:
            smtest.stop_pid(p.pid)
            p.wait()


def test_hardening_an_empty_accept_language_part_is_answered_and_the_web_app_lives(web, hard):
    answers = []
    for value in BAD_LANGUAGES:
        for path in ("/", "/api/status", "/nothing"):
            try:
                out = web.raw_exchange(hard.port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{hard.port}\r\n"
                                                  f"Accept-Language: {value}\r\n\r\n".encode())
            except OSError as e:
                out = repr(e).encode()
            answers.append(out[:12])
    alive = hard.web.poll() is None
    try:
        status, _, _ = web.request(hard.port, "GET", "/api/status", token=hard.token, origin=None, headers={"Accept-Language": "fr,;"})
    except OSError as e:
        status = repr(e)
    if not alive:   # died (the bug): a new one, so that the tests below still say something
        hard.web, hard.port = web.start_web()
        _, hard.token, _ = web.pair_http(hard.port, "hardening")
    assert alive and all(a.startswith(b"HTTP/1.1 ") for a in answers) and status == 200, (set(answers), status)


def test_hardening_api_timer_never_chooses_a_sound_device(web, hard):
    """ALSA's file plugin would run FILE="|cmd": refused as /api/play's device is."""
    proof = os.path.join(web.DIR, "proof")
    status, _, body = web.request(hard.port, "POST", "/api/timer",
                                  {"options": {"duration": "1m", "device": f'file:FILE="|id>{proof}",FORMAT=raw'}}, token=hard.token)
    time.sleep(1)
    play_status, _, play_body = web.request(hard.port, "POST", "/api/play", {"meditation": "x", "device": "hw:0"}, token=hard.token)
    web.request(hard.port, "POST", "/api/stop", {}, token=hard.token)
    assert status == 422 and body["error"]["code"] == "bad-arguments" and play_status == 422, (status, body, play_status)
    assert play_body["error"]["code"] == "bad-arguments" and body["error"]["message"] == play_body["error"]["message"], play_body
    assert not os.path.exists(proof) and web.daemon_status().get("state") == "idle"


def test_hardening_upload_names_that_look_like_options_are_names(web, hard):
    hard.outcomes = []
    for i, name in enumerate(("-x.mp3", "--help")):
        mp3 = os.path.join(web.DIR, f"dash{i}.mp3")
        web.make_mp3(mp3, 2 + i, f"Dash {i}", "Options")
        with open(mp3, "rb") as f:
            hard.outcomes.append(upload(hard.port, hard.token, name, f.read()))
    assert all(st == 200 and isinstance(b, dict) and b.get("outcome") == "imported" for st, b in hard.outcomes), hard.outcomes
    assert [b["meditation"]["file"] for _, b in hard.outcomes] == ["-x.mp3", "--help"]


def test_hardening_web_names_by_the_cli_rule_and_a_scheduled_meditation_deleted_only_with_force(web, hard):
    """The same rules as the CLI's, from Core: a tab or U+202E in a name is refused; a
    meditation a schedule entry plays is deleted only with force (409 in-use naming the
    entry first). The uploads go again: the library tests below start from an empty store."""
    assert getattr(hard, "outcomes", None), "the uploads above"
    port, token = hard.port, hard.token
    mid = hard.outcomes[0][1]["meditation"]["id"]
    names = [web.request(port, "POST", "/api/meditations/" + mid, {"name": bad}, token=token)[0] for bad in ("a\tb", "a\u202eb")]
    r = web.sm("schedule", "add", "daily 06:00", "--play", mid, "--name", "Dash at six")
    first, _, body = web.request(port, "DELETE", "/api/meditations/" + mid, token=token)
    forced, _, _ = web.request(port, "DELETE", "/api/meditations/" + mid + "?force=1", token=token)
    entries = json.loads(web.sm("schedule", "list", "--json").stdout)["entries"]
    for e in entries:
        web.sm("schedule", "remove", str(e["id"]))
    for _, b in hard.outcomes[1:]:
        web.request(port, "DELETE", "/api/meditations/" + b["meditation"]["id"], token=token)
    assert names == [422, 422] and r.returncode == 0, (names, r.stderr)
    assert first == 409 and body["error"]["code"] == "in-use" and "Dash at six" in body["error"]["message"], (first, body)
    assert forced == 200 and [e.get("broken") for e in entries if e.get("name") == "Dash at six"][0], entries


def test_hardening_a_crash_mid_upload_leaves_a_partial_file_removed_when_a_web_app_starts_again(web, hard):
    s = cut_upload(hard.port, hard.token)
    smtest.wait_for(lambda: os.path.isdir(hard.up) and os.listdir(hard.up), 5)
    time.sleep(0.3)
    stop_hard(hard.web)
    s.close()
    partial = sorted(os.listdir(hard.up))
    # Beside it: another web app's upload in flight, held with flock (it must stay).
    live = open(os.path.join(hard.up, "upload-live.mp3"), "wb")
    fcntl.flock(live, fcntl.LOCK_EX)
    hard.web, hard.port = web.start_web()
    left = sorted(os.listdir(hard.up))
    live.close()
    os.unlink(os.path.join(hard.up, "upload-live.mp3"))
    assert len(partial) == 1 and left == ["upload-live.mp3"], (partial, left)


def test_hardening_the_pairing_lockout_survives_a_crash_and_is_per_client_address(web, hard):
    """Wrong PINs are counted on disk and per client address (127.0.0.3 guesses, .4 pairs)."""
    codes = [web.request(hard.port, "POST", "/api/pair", {"pin": "000000" if i % 2 else "999999", "name": "x"},
                         source="127.0.0.3")[0] for i in range(5)]
    stop_hard(hard.web)
    hard.web, hard.port = web.start_web()
    pin = web.new_pin()
    after, headers, _ = web.request(hard.port, "POST", "/api/pair", {"pin": pin, "name": "x"}, source="127.0.0.3")
    other, _, _ = web.request(hard.port, "POST", "/api/pair", {"pin": pin, "name": "other"}, source="127.0.0.4")
    assert codes == [403] * 4 + [429] and after == 429 and headers.get("retry-after", "").isdigit(), (codes, after, headers)
    assert other == 200, "another client address is not locked by the first one's wrong PINs"


def test_hardening_over_tls_too_an_empty_accept_language_part_is_answered(web, hard):
    cert, key = certificate(web, "hardening")
    hard.tls_web, tls_port = web.start_web("--tls", cert, key)
    outs = [tls_exchange(tls_port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{tls_port}\r\nAccept-Language: {v}\r\n\r\n".encode())[:12]
            for v in BAD_LANGUAGES]
    out = tls_exchange(tls_port, f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{tls_port}\r\n\r\n".encode())
    assert hard.tls_web.poll() is None and all(o.startswith(b"HTTP/1.1 200") for o in outs), set(outs)
    assert out.startswith(b"HTTP/1.1 401"), out[:12]


# ------------------------------------------------------------------ the web app with plain HTTP clients

@pytest.fixture(scope="module")
def app(web, hard):
    """The web app of the rest of the tests (--max-upload 2M, --head-timeout 2), started
    over an upload folder a crashed web app left: a file old and one just written, and one
    held with flock (another web app's upload in flight)."""
    a = type("App", (), {})()
    a.up = os.path.join(web.HOME, ".web-uploads")
    os.makedirs(a.up, mode=0o700, exist_ok=True)
    for name, age in (("upload-dead.mp3", 3600), ("upload-fresh.mp3", 0), ("upload-live.mp3", 0)):
        with open(os.path.join(a.up, name), "wb") as f:
            f.write(b"\0" * 1000)
        os.utime(os.path.join(a.up, name), (time.time() - age, time.time() - age))
    live = open(os.path.join(a.up, "upload-live.mp3"), "rb")
    fcntl.flock(live, fcntl.LOCK_EX)
    a.web, a.port = web.start_web("--max-upload", "2M", "--head-timeout", "2")
    a.left = sorted(os.listdir(a.up))
    live.close()
    os.unlink(os.path.join(a.up, "upload-live.mp3"))
    a.base = f"http://127.0.0.1:{a.port}"
    a.status, a.token, a.cookie = web.pair_http(a.port)
    yield a
    if a.web.poll() is None:
        smtest.stop_pid(a.web.pid)
        a.web.wait()


def test_a_crashed_uploads_file_old_or_fresh_is_removed_at_start_a_locked_one_kept(app):
    assert app.left == ["upload-live.mp3"]


def test_no_token_get_api_status_is_401(web, app):
    assert web.request(app.port, "GET", "/api/status", origin=None)[0] == 401


def test_the_shell_carries_a_strict_csp_nosniff_and_no_referrer(web, app):
    status, headers, _ = web.request(app.port, "GET", "/", origin=None)
    assert status == 200 and "default-src 'none'" in headers.get("content-security-policy", ""), headers
    assert headers.get("x-content-type-options") == "nosniff" and headers.get("referrer-policy") == "no-referrer", headers


def test_the_whole_shell_is_under_100_kb(app):
    sizes = []
    for p in ("/", "/app.js", "/app.css", "/sw.js", "/manifest.webmanifest", "/icon.svg"):
        c = http.client.HTTPConnection("127.0.0.1", app.port, timeout=10)
        c.request("GET", p)
        sizes.append(len(c.getresponse().read()))
        c.close()
    assert sum(sizes) < 100 * 1024, sizes


def test_a_pin_from_web_pair_buys_a_token_in_an_httponly_samesite_strict_cookie(app):
    assert app.status == 200 and app.token and "HttpOnly" in app.cookie and "SameSite=Strict" in app.cookie, app.cookie


def test_with_the_token_status_answers(web, app):
    status, _, body = web.request(app.port, "GET", "/api/status", token=app.token, origin=None)
    assert status == 200 and body.get("state") == "idle", body


def test_a_daemon_held_for_5_s_delays_no_page_and_status_says_so_within_50_ms(web, app):
    """The daemon SIGSTOPped (as a swapping Pi or a debugger would hold it): the shell, the
    library and /api/status are answered within 50 ms each, status saying the daemon is not
    answering; once it runs again, status is the daemon's own."""
    with open(os.path.join(web.RUN, "stillmoment", "daemon.lock")) as f:
        pid = int(f.read().split()[0])
    assert smtest.alive(pid)
    os.kill(pid, signal.SIGSTOP)
    slowest, statuses = 0.0, []
    try:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            for path in ("/", "/app.js", "/api/meditations", "/api/status"):
                t0 = time.monotonic()
                status, _, body = web.request(app.port, "GET", path, token=app.token, origin=None)
                slowest = max(slowest, time.monotonic() - t0)
                if path == "/api/status":
                    statuses.append((status, body.get("daemon") if isinstance(body, dict) else None))
            time.sleep(0.2)
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)
    after = web.request(app.port, "GET", "/api/status", token=app.token, origin=None)
    print(f"held daemon: slowest page or status {slowest * 1000:.1f} ms over {len(statuses)} rounds", flush=True)
    assert slowest < 0.05, f"a request took {slowest * 1000:.1f} ms while the daemon was held"
    assert statuses and all(s == (200, "not answering") for s in statuses), statuses
    assert after[0] == 200 and "daemon" not in after[2] and after[2].get("state"), after


def unix_sockets(pid):
    """How many Unix sockets process `pid` holds (its socket inodes that /proc/net/unix lists)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    with open("/proc/net/unix") as f:
        unix = {line.split()[6] for line in f.readlines()[1:] if len(line.split()) > 6}
    return len(inodes & unix)


def daemon_pid(web):
    with open(os.path.join(web.RUN, "stillmoment", "daemon.lock")) as f:
        return int(f.read().split()[0])


def lock_pid(web):
    try:
        return daemon_pid(web)
    except (OSError, ValueError, IndexError):
        return None


def event_stream(port, token):
    """An open /api/events (its socket, reading with a 10-s timeout)."""
    es = socket.create_connection(("127.0.0.1", port), timeout=10)
    es.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: sm_token={token}\r\n\r\n".encode())
    return es


def events_until(es, found, seconds):
    """Reads server-sent events (name, data) until `found(events)` or `seconds` pass."""
    buf, events, end = b"", [], time.monotonic() + seconds
    es.settimeout(0.2)
    while time.monotonic() < end and not found(events):
        try:
            chunk = es.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            lines = dict(l.split(": ", 1) for l in block.decode().split("\n") if ": " in l and not l.startswith(":"))
            if "event" in lines and "data" in lines:
                events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_requests_held_by_the_daemon_are_in_flight_together_on_one_connection(web, app):
    """Five requests sent while the daemon is held wait on the web app's one connection
    (the HTTP thread meanwhile answers pages), and are all answered by the daemon, by id,
    once it runs again; the web app never holds more than one Unix socket."""
    import threading
    pid = daemon_pid(web)
    web.request(app.port, "GET", "/api/status", token=app.token, origin=None)
    os.kill(pid, signal.SIGSTOP)
    results, most = [], 0
    try:
        def seek(i):
            t0 = time.monotonic()
            status, _, body = web.request(app.port, "POST", "/api/seek", {"by": 1000 + i}, token=app.token)
            results.append((status, body.get("error", {}).get("code") if isinstance(body, dict) else None, time.monotonic() - t0))
        threads = [threading.Thread(target=seek, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            most = max(most, unix_sockets(app.web.pid))
            t0 = time.monotonic()
            page = web.request(app.port, "GET", "/", origin=None)[0]
            assert page == 200 and time.monotonic() - t0 < 0.05
            time.sleep(0.05)
    finally:
        os.kill(pid, signal.SIGCONT)
    for t in threads:
        t.join(15)
    print(f"in flight together: answers after {sorted(round(r[2], 2) for r in results)} s", flush=True)
    assert sorted(r[:2] for r in results) == [(409, "no-session")] * 5, results
    assert all(r[2] >= 0.9 for r in results), "answered only once the daemon ran again"
    assert most == 1, f"{most} Unix sockets in the web app"


def test_n_event_streams_share_the_one_daemon_connection(web, app):
    """Six browsers watching: the web app holds one Unix socket (its link) and the daemon
    sees no more clients than with one stream."""
    pid = daemon_pid(web)
    first = event_stream(app.port, app.token)
    assert events_until(first, lambda ev: ev, 5), "a first event"
    one = unix_sockets(pid)
    streams = [event_stream(app.port, app.token) for _ in range(5)]
    try:
        assert all(events_until(es, lambda ev: ev, 5) for es in streams), "each stream has its first event"
        six = unix_sockets(pid)   # (before the session: playing, the daemon holds the sound server's socket too)
        web.request(app.port, "POST", "/api/timer", {"options": {"duration": "1m", "preparation": "off"}}, token=app.token)
        heard = [events_until(es, lambda ev: any(n == "progress" or d.get("state") == "running" for n, d in ev), 5)
                 for es in [first] + streams]
        mine = unix_sockets(app.web.pid)
    finally:
        web.request(app.port, "POST", "/api/stop", {}, token=app.token)
        for es in [first] + streams:
            es.close()
    print(f"six streams: the daemon holds {six} Unix sockets (with one stream: {one}), the web app {mine}", flush=True)
    assert all(heard), "every stream hears the session"
    assert mine == 1 and six == one, (mine, one, six)


def test_the_daemon_killed_and_started_again_the_streams_hear_it_and_events_resume(web, app):
    """SIGKILL to the daemon: a watching browser hears that it went; a new daemon started,
    the link reconnects by itself (backoff of at most 3 s) and the session's events come."""
    pid = daemon_pid(web)
    es = event_stream(app.port, app.token)
    try:
        assert events_until(es, lambda ev: ev, 5)
        os.kill(pid, signal.SIGKILL)
        for p in web.procs:
            if p.pid == pid:
                p.wait(timeout=10)
        gone = events_until(es, lambda ev: any(d.get("daemon") is False for _, d in ev), 5)
        new = web.start_daemon()
        t0 = time.monotonic()
        end = t0 + 10
        while time.monotonic() < end and not (lock_pid(web) == new.pid and web.sm("status").returncode == 0):
            time.sleep(0.05)
        status, _, _ = web.request(app.port, "POST", "/api/timer", {"options": {"duration": "1m", "preparation": "off"}}, token=app.token)
        back = events_until(es, lambda ev: any(n == "progress" for n, _ in ev), 10)
        took = time.monotonic() - t0
    finally:
        web.request(app.port, "POST", "/api/stop", {}, token=app.token)
        es.close()
    print(f"reconnected: the session's events came {took:.2f} s after the new daemon was started", flush=True)
    assert any(d.get("daemon") is False for _, d in gone), gone
    assert status == 200 and any(n == "progress" for n, _ in back), (status, back)
    assert daemon_pid(web) == new.pid != pid


@pytest.mark.parametrize("origin", ["http://evil.example", None], ids=["foreign", "none"])
def test_a_change_from_a_foreign_origin_or_none_is_403(web, app, origin):
    assert web.request(app.port, "POST", "/api/stop", {}, token=app.token, origin=origin)[0] == 403


def test_a_misspelt_timer_option_is_refused_naming_it(web, app):
    status, _, body = web.request(app.port, "POST", "/api/timer", {"options": {"durration": "20m"}}, token=app.token)
    assert status == 422 and body["error"]["code"] == "bad-arguments" and "durration" in body["error"]["message"], body


def revoke(web, name):
    victim = [d for d in json.loads(web.sm("web", "devices", "--json").stdout) if d["name"] == name]
    return web.sm("web", "revoke", str(victim[0]["id"])) if victim else None


def test_a_revoked_token_is_refused(web, app):
    _, token2, _ = web.pair_http(app.port, "to be revoked")
    r = revoke(web, "to be revoked")
    status, _, _ = web.request(app.port, "GET", "/api/status", token=token2, origin=None)
    assert r is not None and r.returncode == 0 and status == 401, (r, status)


def test_a_revoked_devices_event_stream_is_closed(web, app):
    """(within 5 s while something plays)"""
    _, token3, _ = web.pair_http(app.port, "watching, then revoked")
    es = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    es.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\nCookie: sm_token={token3}\r\n\r\n".encode())
    first = es.recv(65536)
    web.request(app.port, "POST", "/api/timer", {"options": {"duration": "1m", "preparation": "off"}}, token=app.token)
    time.sleep(1.5)
    revoke(web, "watching, then revoked")
    t0 = time.monotonic()
    closed = False
    try:
        while time.monotonic() - t0 < 10:
            if not es.recv(65536):
                closed = True
                break
    except (socket.timeout, ConnectionResetError):
        pass
    took = time.monotonic() - t0
    es.close()
    web.request(app.port, "POST", "/api/stop", {}, token=app.token)
    assert first.startswith(b"HTTP/1.1 200") and b"text/event-stream" in first, first[:80]
    assert closed and took < 7, f"closed {took:.1f} s after the revoke"


def test_revoking_an_unknown_device_is_one_line_exit_2(web):
    r = web.sm("web", "revoke", "999")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r


def test_a_request_body_over_64_kib_is_413(web, app):
    assert web.request(app.port, "POST", "/api/timer", b"{" + b" " * 70000 + b"}", token=app.token)[0] == 413


def test_a_head_over_8_kib_is_431(web, app):
    assert web.raw_exchange(app.port, b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 9000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431")


def test_an_upload_over_max_upload_is_413_before_its_body_is_read(web, app):
    out = web.raw_exchange(app.port, (f"PUT /api/import?name=big.mp3 HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\n"
                                      f"Origin: http://127.0.0.1:{app.port}\r\nCookie: sm_token={app.token}\r\n"
                                      f"Content-Length: {3 << 20}\r\n\r\n").encode() + b"\0" * 65536)
    assert out.startswith(b"HTTP/1.1 413"), out[:20]


def test_an_upload_cut_off_half_way_leaves_nothing_in_a_private_folder(web, app):
    meds = os.path.join(web.HOME, "Meditations")
    before = sorted(os.listdir(meds)) if os.path.isdir(meds) else []
    s = cut_upload(app.port, app.token)
    time.sleep(0.5)
    partial = os.listdir(app.up) if os.path.isdir(app.up) else []
    s.close()
    time.sleep(0.5)
    after = sorted(os.listdir(meds)) if os.path.isdir(meds) else []
    left = os.listdir(app.up) if os.path.isdir(app.up) else []
    assert len(partial) == 1 and left == [] and after == before, "streamed to one private file, removed, the store unchanged"
    assert os.stat(app.up).st_mode & 0o777 == 0o700, "uploads stream into a private folder"


def test_a_slow_client_is_dropped_after_the_head_timeout(app):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", app.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    s.settimeout(10)
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    took = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 408") and took < 5, (got[:20], took)


def test_over_64_connections_the_65th_is_503_and_then_the_server_answers_again(web, app):
    socks = [socket.create_connection(("127.0.0.1", app.port)) for _ in range(64)]
    out = web.raw_exchange(app.port, b"GET / HTTP/1.1\r\n\r\n", wait=3)
    for x in socks:
        x.close()
    time.sleep(0.3)
    status, _, _ = web.request(app.port, "GET", "/api/status", token=app.token, origin=None)
    assert out.startswith(b"HTTP/1.1 503"), out[:20]
    assert status == 200, "after they closed, the server answers again"


# ------------------------------------------------------------------ the browser, in order

@pytest.fixture(scope="module")
def page(web, app):
    """One headless Chromium for the browser tests below (quit, its driver stopped by PID)."""
    d = web.browser()
    d.uploads = app.up
    yield d
    pid = d.service.process.pid if d.service.process else None
    d.quit()
    if pid:
        smtest.stop_pid(pid)


def text(d, id_):
    return d.find_element(By.ID, id_).text


def button(d, name):
    return d.find_element(By.XPATH, f"//button[normalize-space()='{name}']")


def test_a_new_browser_sees_the_pairing_form_and_pairs_with_a_pin(web, app, page):
    d = page
    d.get(app.base + "/")
    assert web.wait_for(d, lambda: web.visible(d, "pair")), "the pairing form"
    d.find_element(By.ID, "pin").send_keys(web.new_pin())
    d.find_element(By.CSS_SELECTOR, "#pair-form button[type=submit]").click()
    assert web.wait_for(d, lambda: web.visible(d, "tabs") and web.visible(d, "timer")), "paired, it sees the timer"


def test_the_token_is_not_readable_by_the_pages_script(page):
    assert page.execute_script("return document.cookie") == ""


def test_every_control_has_an_accessible_name_and_the_time_is_a_role_timer(page):
    unnamed = page.execute_script("""return Array.from(document.querySelectorAll('button, input, select'))
        .filter(e => !(e.getAttribute('aria-label') || e.textContent.trim() || (e.id && document.querySelector('label[for="' + e.id + '"]')) || e.closest('label')))
        .map(e => e.outerHTML.slice(0, 60));""")
    assert unnamed == []
    assert len(page.find_elements(By.CSS_SELECTOR, "[role=timer]")) == 1


def test_chromium_finds_the_app_installable(page):
    installable = page.execute_cdp_cmd("Page.getInstallabilityErrors", {}).get("installabilityErrors")
    manifest = page.execute_cdp_cmd("Page.getAppManifest", {})
    assert installable == [] and manifest.get("errors") == [], (installable, manifest.get("errors"))


def test_start_a_timer_its_remaining_time_is_pushed(web, page):
    d = page
    web.wait_for(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#t-gong option")) > 0)
    for id_, value in (("t-duration", "2"), ("t-preparation", "0")):
        e = d.find_element(By.ID, id_)
        e.clear()
        e.send_keys(value)
    button(d, "Start").click()
    assert web.wait_for(d, lambda: web.visible(d, "now")), "the session shows"
    first = web.wait_for(d, lambda: (lambda t: t if t and t != "0:00" else None)(text(d, "time")))
    second = web.wait_for(d, lambda: (lambda t: t if t and t != first else None)(text(d, "time")), timeout=5)
    assert first and second and second < first, (first, second)
    assert web.daemon_status().get("source") == "timer", "the daemon runs the timer the page started"


def test_pause_the_time_stands_and_the_daemon_is_paused(web, page):
    d = page
    button(d, "Pause").click()
    assert web.wait_for(d, lambda: "Paused" in text(d, "phase")), "the page says Paused"
    time.sleep(1.0)
    t1 = text(d, "time")
    time.sleep(2.0)
    page.t2 = text(d, "time")
    assert t1 == page.t2 and web.daemon_status().get("paused") is True, (t1, page.t2)


def test_resume_the_time_runs_again(web, page):
    d = page
    button(d, "Resume").click()
    assert web.wait_for(d, lambda: text(d, "time") != page.t2, timeout=5), text(d, "time")


def test_stop_the_session_view_closes_and_the_daemon_is_idle(web, page):
    d = page
    button(d, "Stop").click()
    assert web.wait_for(d, lambda: not web.visible(d, "now")), "the session view closes"
    time.sleep(1.5)
    assert web.daemon_status().get("state") == "idle"


def test_an_mp3_uploaded_with_hostile_tags_is_added_and_shown_as_text(web, page):
    d = page
    page.mp3 = os.path.join(web.DIR, "Evening Sit.mp3")
    web.make_mp3(page.mp3, 40, "<script>window.pwned=1</script><b>Evening</b>", "<img src=x onerror=window.pwned=2>")
    button(d, "Library").click()
    d.find_element(By.ID, "files").send_keys(page.mp3)
    button(d, "Upload").click()
    assert web.wait_for(d, lambda: "added" in text(d, "upload-results"), timeout=30), text(d, "upload-results")
    listed = [m["name"] for m in json.loads(web.sm("list", "--json").stdout)]
    assert listed == ["<script>window.pwned=1</script><b>Evening</b>"], "`stillmoment list` has it"
    names = web.wait_for(d, lambda: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#list .name")])
    assert names and names[0] == "<script>window.pwned=1</script><b>Evening</b>", names
    assert d.execute_script("return window.pwned === undefined && "
                            "document.querySelectorAll('#list script, #list b, #list img').length === 0"), \
        "no tag from the file became an element, nothing ran"
    assert os.listdir(page.uploads) == [], "the uploaded file's temporary copy is gone"


def test_uploading_it_again_says_it_is_already_in_the_library(web, page):
    d = page
    d.find_element(By.ID, "files").send_keys(page.mp3)
    button(d, "Upload").click()
    assert web.wait_for(d, lambda: "already in the library" in text(d, "upload-results"), timeout=30)


def test_play_the_meditation_from_the_library(web, page):
    d = page
    play = web.wait_for(d, lambda: d.find_elements(By.XPATH, "//button[normalize-space()='Play']"))
    play[0].click()
    assert web.wait_for(d, lambda: web.visible(d, "now") and "Evening" in text(d, "what"), timeout=10), text(d, "what")
    assert web.daemon_status().get("source") == "guided"


def test_preview_plays_ten_seconds(web, page):
    time.sleep(1)
    page.find_elements(By.XPATH, "//button[normalize-space()='Preview']")[0].click()
    played = web.wait_for(page, lambda: web.daemon_status().get("source") == "preview", timeout=10)
    web.sm("stop")
    assert played


def test_delete_asks_first_dismissed_the_meditation_stays(web, page):
    d = page
    d.find_element(By.XPATH, "//li[@data-id]//summary").click()
    button(d, "Delete").click()
    alert = web.wait_for(d, lambda: d.switch_to.alert)
    assert alert is not None and "Delete" in alert.text, "Delete asks first"
    alert.dismiss()
    time.sleep(0.5)
    assert len(json.loads(web.sm("list", "--json").stdout)) == 1, "dismissed: the meditation stays"


def test_delete_accepted_it_is_gone_from_the_page_the_catalog_and_the_folder(web, page):
    d = page
    button(d, "Delete").click()
    alert = web.wait_for(d, lambda: d.switch_to.alert)
    if alert:
        alert.accept()
    assert web.wait_for(d, lambda: "empty" in text(d, "list"), timeout=10), text(d, "list")
    assert json.loads(web.sm("list", "--json").stdout) == []
    assert os.listdir(os.path.join(web.HOME, "Meditations")) == []


def test_practice_lists_the_sits_with_totals(web, page):
    d = page
    button(d, "Practice").click()
    entries = web.wait_for(d, lambda: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entries li")
                                       if "No sits" not in e.text] or None)
    assert entries and any("Stopped" in e for e in entries), entries
    assert all(re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d · ", e) for e in entries), entries
    assert "Today" in text(d, "stats")


def test_practice_says_where_sync_stands_a_hub_for_one_device(web, app, page):
    d = page
    status, _, body = web.request(app.port, "POST", "/api/sync/pair", {"pin": web.new_pin(), "name": "pi-bedroom"}, origin=None)
    assert status == 200 and body["token"], body
    button(d, "Schedule").click()
    button(d, "Practice").click()
    line = web.wait_for(d, lambda: (lambda t: t if "hub for 1 device" in t else None)(text(d, "sync-state")))
    assert line, text(d, "sync-state")


def test_library_lists_a_meditation_arriving_from_another_device(web, app, page):
    """A device's meditation reaches this hub as a row first: the Library lists it under
    "Arriving from the sync hub", with no play button, until its file is here."""
    d = page
    status, _, body = web.request(app.port, "POST", "/api/sync/pair", {"pin": web.new_pin(), "name": "pi-hall"}, origin=None)
    assert status == 200, body
    node = "cccccccc-0000-4000-8000-00000000000c"
    rid = "dddddddd-0000-4000-8000-00000000000d"
    stamp = f"{int(time.time() * 1000):015d}-00000-{node}"
    facts = {"hash": "ab" * 16, "size": 12_345_678, "ext": "mp3", "frames": 44_100 * 600, "rate": 44_100, "gain": -1.5,
             "original": "walk.mp3", "added": int(time.time() * 1000)}
    changes = [{"k": "meditation", "i": rid, "f": "file", "v": json.dumps(facts), "h": stamp},
               {"k": "meditation", "i": rid, "f": "name", "v": json.dumps("Walking far"), "h": stamp},
               {"k": "meditation", "i": rid, "f": "teacher", "v": json.dumps("Ajahn"), "h": stamp}]
    status, _, body = web.request(app.port, "POST", "/api/sync/push", {"node": node, "changes": changes}, origin=None,
                                  headers={"Authorization": "Bearer " + body["token"]})
    assert status == 200, body
    button(d, "Schedule").click()
    button(d, "Library").click()
    line = web.wait_for(d, lambda: (lambda t: t if "Walking far" in t else None)(
        " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, "#arriving li"))))
    assert line and "Ajahn" in line and "0 of 12 MB" in line, line
    assert "Arriving from the sync hub" in text(d, "list")
    assert not d.find_elements(By.CSS_SELECTOR, "#arriving button")


def schedule_enabled(web):
    return json.loads(web.sm("schedule", "list", "--json").stdout)["entries"][0]["enabled"]


def test_schedule_an_entry_from_the_cli_is_listed_on(web, page):
    d = page
    r = web.sm("schedule", "add", "weekdays", "06:30", "--bell", "clear-strike", "--name", "Morning bell")
    button(d, "Schedule").click()
    box = web.wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#schedules input[type=checkbox]"))
    assert r.returncode == 0 and box and box[0].is_selected() and "Morning bell" in text(d, "schedules"), r.stderr


def test_schedule_switched_off_and_on_from_the_page(web, page):
    d = page
    d.find_element(By.CSS_SELECTOR, "#schedules input[type=checkbox]").click()
    assert web.wait_for(d, lambda: not schedule_enabled(web)), "switched off: `schedule list` says off"
    d.find_element(By.CSS_SELECTOR, "#schedules input[type=checkbox]").click()
    assert web.wait_for(d, lambda: schedule_enabled(web)), "and on again"


def test_schedule_ring_now_rings_the_bell(web, page):
    button(page, "Ring now").click()
    rang = web.wait_for(page, lambda: web.daemon_status().get("source") == "bell"
                        or "bell" in json.dumps(web.daemon_status().get("lastEnded", {})), timeout=10)
    web.sm("stop")
    assert rang, web.daemon_status()


def test_offline_the_cached_shell_loads_and_says_so_and_back_online_it_reconnects(web, page):
    d = page
    button(d, "Timer").click()
    web.wait_for(d, lambda: d.execute_script("return !!(navigator.serviceWorker && navigator.serviceWorker.controller)")
                 or (d.refresh() and False), timeout=10)
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    d.refresh()
    offline = web.wait_for(d, lambda: "Offline" in text(d, "net"), timeout=10)
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    assert offline, text(d, "net")
    assert web.wait_for(d, lambda: web.visible(d, "tabs") and text(d, "net") == "", timeout=15), "back online it reconnects by itself"


def test_no_browser_connected_the_web_app_uses_no_cpu(web, app, page):
    """Once the closed browser's connections are gone; every thread's wake-ups (the main
    thread's alone showed 0 while a Dispatch thread, once an upload had used the global
    queue, woke every second)."""
    pid = page.service.process.pid if page.service.process else None
    page.quit()
    if pid:
        smtest.stop_pid(pid)
    ticks, woke = web.quiet_cost(app.web.pid, 5)
    assert ticks == 0 and woke == 0, f"{ticks} ticks, woken {woke} times in 5 s"


# ------------------------------------------------------------------ other browsers

def test_at_200_percent_zoom_the_page_fits_its_width(web, app, browser):
    """A 412-px phone at 200 % is a 206-px-wide page: nothing may need sideways scrolling.
    (The first render's time and the memory budget are `make bench`'s: bench/web.py.)"""
    d = browser()
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 206, "height": 458, "deviceScaleFactor": 2, "mobile": True})
    d.get(app.base + "/")
    web.wait_for(d, lambda: web.visible(d, "pair"))
    over = d.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert over <= 1, f"overflow {over} px"


def test_a_german_browser_gets_german(web, app, browser):
    """The page from the browser's language, and the API's messages (a translation check)."""
    d = browser(lang="de-DE")
    d.get(app.base + "/")
    assert web.wait_for(d, lambda: web.visible(d, "pair") and text(d, "pair-h") == "Dieses Gerät koppeln"), text(d, "pair-h")
    d.find_element(By.ID, "pin").send_keys(web.new_pin())
    d.find_element(By.CSS_SELECTOR, "#pair-form button[type=submit]").click()
    web.wait_for(d, lambda: web.visible(d, "timer"))
    buttons = [b.text for b in d.find_elements(By.CSS_SELECTOR, "button") if b.text]
    assert "Starten" in buttons and "Bibliothek" in buttons and d.execute_script("return document.documentElement.lang") == "de", buttons
    status, _, body = web.request(app.port, "POST", "/api/seek", {"by": 1000}, token=app.token, headers={"Accept-Language": "de-DE"})
    assert status == 409 and body["error"]["code"] == "no-session" and "nichts" in body["error"]["message"], body


def test_wrong_pins_five_then_a_lockout_even_for_the_right_pin(web, app):
    codes = [web.request(app.port, "POST", "/api/pair", {"pin": "000000" if i % 2 else "999999", "name": "x"})[0] for i in range(5)]
    status, _, _ = web.request(app.port, "POST", "/api/pair", {"pin": web.new_pin(), "name": "x"})
    assert codes == [403] * 4 + [429] and status == 429, (codes, status)


# ------------------------------------------------------------------ HTTPS

@pytest.fixture(scope="module")
def tls(web, app):
    """--tls CERT KEY with a self-signed certificate made here with openssl."""
    t = type("TLS", (), {})()
    t.cert, t.key = certificate(web, "tls")
    t.other = os.path.join(web.DIR, "other.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", t.other],
                   check=True, capture_output=True)
    t.web, t.port = web.start_web("--tls", t.cert, t.key)
    yield t
    if t.web.poll() is None:
        smtest.stop_pid(t.web.pid)
        t.web.wait()


def test_a_key_that_does_not_match_the_certificate_is_one_line(web, tls):
    r = web.sm("web", "--listen", "127.0.0.1:0", "--tls", tls.cert, tls.other, timeout=10)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "key" in r.stderr, r


def test_tls_with_one_file_exits_2(web, tls):
    assert web.sm("web", "--listen", "127.0.0.1:0", "--tls", tls.cert, timeout=10).returncode == 2


def test_https_serves_the_shell(tls):
    c = http.client.HTTPSConnection("127.0.0.1", tls.port, timeout=10, context=tls_context())
    c.request("GET", "/")
    rr = c.getresponse()
    page = rr.read()
    c.close()
    assert rr.status == 200 and b"Still Moment" in page, rr.status
    assert "default-src 'none'" in (rr.getheader("Content-Security-Policy") or "")


def test_https_pairing_the_cookie_is_secure(web, tls):
    """From another client address: 127.0.0.1 is locked out by the wrong PINs above, for
    every web app on this catalog (the count is on disk)."""
    c = http.client.HTTPSConnection("127.0.0.1", tls.port, timeout=10, context=tls_context(), source_address=("127.0.0.5", 0))
    c.request("POST", "/api/pair", body=json.dumps({"pin": web.new_pin(), "name": "tls"}),
              headers={"Origin": f"https://127.0.0.1:{tls.port}", "Content-Type": "application/json"})
    rr = c.getresponse()
    rr.read()
    cookie = rr.getheader("Set-Cookie") or ""
    c.close()
    assert rr.status == 200 and "; Secure" in cookie and "HttpOnly" in cookie, (rr.status, cookie)


def test_plain_http_to_the_https_port_gets_no_page(web, tls):
    assert not web.raw_exchange(tls.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", wait=3).startswith(b"HTTP/1.1 200")


def test_tls_1_1_and_older_are_refused_by_the_server(tls):
    """The server's refusal (a protocol-version alert), not our own OpenSSL declining to
    offer TLS 1.0/1.1 at all ("no protocols available": then nothing was tried)."""
    warnings.simplefilter("ignore", DeprecationWarning)
    ctx = tls_context(ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1)
    why = ""
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", tls.port), timeout=5))
        s.close()
        old_ok = True
    except (ssl.SSLError, OSError) as e:
        old_ok = False
        why = getattr(e, "reason", None) or str(e)
    assert not old_ok and "NO_PROTOCOLS_AVAILABLE" not in why.upper() and "PROTOCOL" in why.upper(), why


def test_after_all_that_the_https_server_still_answers(tls):
    c = http.client.HTTPSConnection("127.0.0.1", tls.port, timeout=10, context=tls_context())
    c.request("GET", "/api/status")
    status = c.getresponse().status
    c.close()
    assert status == 401 and tls.web.poll() is None


def test_openssl_is_loaded_by_the_https_server_only(app, tls):
    with open(f"/proc/{app.web.pid}/maps") as f:
        plain_maps = f.read()
    with open(f"/proc/{tls.web.pid}/maps") as f:
        tls_maps = f.read()
    assert "libssl" not in plain_maps and "libssl" in tls_maps


def test_sigterm_stops_the_web_app_at_once(app):
    app.web.send_signal(signal.SIGTERM)
    assert app.web.wait(timeout=5) == 0
