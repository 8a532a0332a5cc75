"""Shared pieces of the web app's tests and benchmark: a private folder, processes
stopped by their PID, a private PulseAudio null sink (paced), the web server on a free
port, plain HTTP requests, and headless Chromium through Selenium."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import http.client

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.path.abspath(os.environ.get("BIN", os.path.join(ROOT, ".build/debug/stillmoment")))

from smtest import report  # noqa: E402,F401  (the bench line's one writer)
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

procs = []
DIR = tempfile.mkdtemp(prefix="sm-web-")


def spawn(argv, env, name):
    out = open(os.path.join(DIR, name + ".out"), "w")
    err = open(os.path.join(DIR, name + ".err"), "w")
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    out.close()
    err.close()
    p.err_path = err.name
    procs.append(p)
    return p


def cleanup():
    for p in reversed(procs):
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
    # A daemon started on demand: its PID from its lock file.
    try:
        with open(os.path.join(RUN, "stillmoment", "daemon.lock")) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        pass
    shutil.rmtree(DIR, ignore_errors=True)


HOME = os.path.join(DIR, "home")
RUN = os.path.join(DIR, "run")
os.mkdir(RUN, 0o700)
ENV = dict(os.environ, STILLMOMENT_HOME=HOME, XDG_RUNTIME_DIR=RUN, LANG="C.UTF-8")
for k in ("LC_ALL", "LC_MESSAGES", "STILLMOMENT_IDLE_EXIT", "PULSE_SERVER"):
    ENV.pop(k, None)


def sm(*args, timeout=30):
    return subprocess.run([BIN, *args], env=ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def start_pulse():
    """A private PulseAudio with a null sink: the daemon plays in real time on it."""
    pa_run = os.path.join(DIR, "pulse-run")
    os.mkdir(pa_run, 0o700)
    pa_home = os.path.join(DIR, "pulse-home")
    os.mkdir(pa_home, 0o700)
    sock = os.path.join(DIR, "pulse.sock")
    env = dict(os.environ, HOME=pa_home, XDG_RUNTIME_DIR=pa_run)
    p = spawn(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
               "-L", "module-null-sink sink_name=sm",
               "-L", f"module-native-protocol-unix socket={sock} auth-anonymous=1"], env, "pulse")
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if p.poll() is not None:
            break
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return f"unix:{sock}"
        except OSError:
            time.sleep(0.05)
    sys.exit("pulseaudio did not start: the paced device is needed")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_wakeups(pid):
    """Context switches so far of each thread, {tid: (name, count)} (/proc/PID/status counts
    the main thread only): a thread that never wakes adds none."""
    out = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{task}/status") as f:
                n = sum(int(line.split()[1]) for line in f
                        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")))
            out[task] = (name, n)
        except OSError:
            pass
    return out


def wakeups(pid):
    """Context switches so far, of every thread: a process that never wakes adds none."""
    return sum(n for _, n in thread_wakeups(pid).values())


def sockets(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def quiet_cost(pid, seconds):
    """CPU ticks and wake-ups of the web app over `seconds`, measured once the closed
    browsers' connections (and their 2-s lingering close) are gone: only the listening
    socket is left."""
    end = time.monotonic() + 15
    while sockets(pid) > 1 and time.monotonic() < end:
        time.sleep(0.2)
    time.sleep(2)  # the last close's own work (its code pages are released then)
    c0, p0 = cpu_ticks(pid), thread_wakeups(pid)
    time.sleep(seconds)
    p1 = thread_wakeups(pid)
    if os.environ.get("WEB_THREADS"):      # WEB_THREADS=1: print each thread's wake-ups
        print("threads:", {t: (name, n - p0.get(t, (name, 0))[1]) for t, (name, n) in p1.items()}, flush=True)
    return cpu_ticks(pid) - c0, sum(n for _, n in p1.values()) - sum(n for _, n in p0.values())


def start_web(*extra):
    p = spawn([BIN, "web", "--listen", "127.0.0.1:0", *extra], ENV, f"web{len(procs)}")
    end = time.monotonic() + 15
    while time.monotonic() < end:
        with open(p.err_path) as f:
            m = re.search(r"serving the web app on https?://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    with open(p.err_path) as f:
        sys.exit("the web server did not start: " + f.read())


def request(port, method, path, body=None, headers=None, token=None, origin=True, source=None):
    """One request; `source` binds the client to that local address (127.0.0.x: another client)."""
    h = dict(headers or {})
    if origin is True:
        h["Origin"] = f"http://127.0.0.1:{port}"
    elif origin:
        h["Origin"] = origin
    if token:
        h["Cookie"] = f"sm_token={token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        h.setdefault("Content-Type", "application/json")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0) if source else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), payload


def new_pin():
    r = sm("web", "pair")
    m = re.search(r"\b(\d{6})\b", r.stdout)
    assert m, f"web pair printed no PIN: {r.stdout!r} {r.stderr!r}"
    return m.group(1)


def pair_http(port, name="test client"):
    status, headers, _ = request(port, "POST", "/api/pair", {"pin": new_pin(), "name": name})
    m = re.search(r"sm_token=([0-9a-f]{64})", headers.get("set-cookie", ""))
    return status, (m.group(1) if m else None), headers.get("set-cookie", "")


def raw_exchange(port, data, wait=5.0, shut=False):
    """Sends raw bytes, returns what came back until the server closed (or `wait` passed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    end = time.monotonic() + wait
    try:
        while time.monotonic() < end:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out


def make_mp3(path, seconds, title, artist):
    wav = path + ".wav"
    subprocess.run(["sox", "-n", "-r", "44100", "-c", "1", wav, "synth", str(seconds), "sine", "330", "vol", "0.3"], check=True)
    subprocess.run(["lame", "--quiet", "-b", "64", "--tt", title, "--ta", artist, wav, path], check=True)
    os.unlink(wav)


def browser(lang="en-US", width=412, height=915):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--lang={lang}",
              f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(a)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chrome-', dir=DIR)}")
    options.add_experimental_option("prefs", {"intl.accept_languages": lang})
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver",
                      log_output=os.path.join(DIR, "chromedriver.log"))
    d = webdriver.Chrome(options=options, service=service)
    procs.append(service.process)
    d.set_page_load_timeout(30)
    return d


def wait_for(d, fn, timeout=10, what="condition"):
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.1).until(lambda _: fn())
    except Exception:
        return None


def visible(d, id_):
    e = d.find_elements(By.ID, id_)
    return bool(e) and e[0].is_displayed()


def daemon_status():
    r = sm("status", "--json")
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}




def start_daemon():
    """`stillmoment daemon` in the foreground (its PID is ours to stop), once it listens."""
    p = spawn([BIN, "daemon"], ENV, "daemon")
    for _ in range(400):
        if os.path.exists(os.path.join(RUN, "stillmoment", "control.sock")):
            return p
        time.sleep(0.025)
    sys.exit("the daemon did not listen within 10 s")


def first_paint(url, cpu_rate, latency_ms=5, bytes_per_s=2_500_000):
    """First contentful paint (ms) of a cold load (a new browser profile, no cache, no
    service worker), the CPU throttled `cpu_rate` times, over a LAN of `latency_ms`."""
    d = browser()
    try:
        d.execute_cdp_cmd("Network.enable", {})
        d.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": latency_ms,
                                                               "downloadThroughput": bytes_per_s, "uploadThroughput": bytes_per_s})
        d.execute_cdp_cmd("Emulation.setCPUThrottlingRate", {"rate": cpu_rate})
        d.get(url)
        return wait_for(d, lambda: d.execute_script(
            "const e = performance.getEntriesByName('first-contentful-paint')[0]; return e ? e.startTime : null;"), timeout=30)
    finally:
        d.quit()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
