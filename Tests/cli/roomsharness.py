"""Several rooms on one machine for the tests and the benchmark: a private PulseAudio whose
one null sink `rooms` has a channel per room (aux0, aux1, …), each room a remap sink onto its
channel, so that one capture of the sink's monitor hears every node at once; daemons in
private homes, each playing to its room's sink and on one mosquitto; onsets found per
channel in the capture."""
import array
import os
import socket
import subprocess
import time

import smtest

RATE = 48000


class RoomsPulse:
    """A PulseAudio with the null sink `rooms` (a channel per room) and a remap sink per room."""

    def __init__(self, folder, rooms):
        self.folder = str(folder)
        self.rooms = list(rooms)
        self.proc = None

    def start(self):
        pa = self.folder
        os.makedirs(pa + "/run", mode=0o700, exist_ok=True)
        os.makedirs(pa + "/home", mode=0o700, exist_ok=True)
        self.sock = pa + "/pulse.sock"
        n = len(self.rooms)
        aux = ",".join(f"aux{k}" for k in range(n))
        args = ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                "-L", f"module-null-sink sink_name=rooms channels={n} channel_map={aux} rate={RATE}",
                "-L", f"module-native-protocol-unix socket={self.sock} auth-anonymous=1"]
        for k, room in enumerate(self.rooms):
            args += ["-L", f"module-remap-sink sink_name={room} master=rooms channels=1 channel_map=mono "
                           f"master_channel_map=aux{k} remix=no"]
        self.proc = subprocess.Popen(args, env=dict(os.environ, HOME=pa + "/home", XDG_RUNTIME_DIR=pa + "/run"),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("PulseAudio did not start within 5 s")

    @property
    def env(self):
        return {"PULSE_SERVER": f"unix:{self.sock}"}

    def record(self, home, path):
        """parec of the monitor (every room's channel) into `path`, tracked by `home`."""
        out = open(path, "wb")
        p = home.track(subprocess.Popen(
            ["parec", "-d", "rooms.monitor", "--raw", "--format=s16le", f"--rate={RATE}",
             f"--channels={len(self.rooms)}", "--channel-map=" + ",".join(f"aux{k}" for k in range(len(self.rooms))),
             "--latency-msec=20"],
            env=dict(os.environ, **self.env), stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        out.close()
        return p

    def stop(self):
        if self.proc and self.proc.poll() is None:
            smtest.stop_pid(self.proc.pid)
            self.proc.wait()


def channels(path, n):
    """The capture as n lists of samples."""
    a = array.array("h")
    with open(path, "rb") as f:
        data = f.read()
    a.frombytes(data[: len(data) // (2 * n) * 2 * n])
    return [a[k::n] for k in range(n)]


def onsets(samples, threshold=2000, quiet=400, since=0):
    """The frames where a sound starts: the first sample over `threshold` in a rise that
    began (over `quiet`) after at least 50 ms under `quiet`, within 50 ms of it (a gong's
    attack rises through `quiet` before it passes `threshold`)."""
    out = []
    need = RATE // 20
    last_loud = since - 10 * need
    rise = None
    for i in range(since, len(samples)):
        v = abs(samples[i])
        if v >= quiet:
            if i - last_loud > need:
                rise = i
            last_loud = i
        if v > threshold and rise is not None:
            if i - rise <= need:
                out.append(i)
            rise = None
    return out


def onsets_fast(samples, threshold=2000, quiet=400):
    """onsets(), found fast on a long capture (minutes): 10-ms blocks' peaks first (at C
    speed), then sample by sample only in a block that rises after 40 ms of quiet."""
    block = RATE // 100
    peaks = [max(map(abs, samples[i:i + block]), default=0) for i in range(0, len(samples), block)]
    out = []
    for k in range(5, len(peaks)):
        # The block where the peak first passes the threshold (block k-1 may hold the start
        # of the rise), after four quiet ones.
        if peaks[k] > threshold >= peaks[k - 1] and all(p < quiet for p in peaks[k - 5:k - 1]):
            start = (k - 1) * block
            for i in range(start, min(len(samples), start + 2 * block)):
                if abs(samples[i]) > threshold:
                    out.append(i)
                    break
    return out


def lag(a, b, at, around=0, length=RATE // 10, span=RATE // 200):
    """How many frames later the sound of `a` from frame `at` (for `length` frames) comes in
    `b`, within `around` ± `span`: the lag of the largest normalised cross-correlation
    (every 4th lag, then each around the best). The timing of one sound in two channels
    where their first ms may differ (an onset's first sample over a threshold moves by a
    whole cycle then). A ring is nearly periodic, so the search is kept near `around` (the
    onsets' difference) and each window's energy is divided out (else a decaying ring's
    louder, earlier cycle wins)."""
    ref = a[at:at + length]

    def score(k):
        seg = b[at + k:at + k + length]
        energy = sum(y * y for y in seg)
        return sum(x * y for x, y in zip(ref, seg)) / (energy ** 0.5 or 1)
    coarse = max(range(around - span, around + span + 1, 4), key=score)
    return max(range(coarse - 4, coarse + 5), key=score)


def first_onset(samples, since=0, threshold=2000):
    """The first frame over `threshold` at or after `since` (None: silent)."""
    for i in range(since, len(samples)):
        if abs(samples[i]) > threshold:
            return i
    return None


def stop_recording(p):
    if p.poll() is None:
        smtest.stop_pid(p.pid)
    p.wait()


class Site:
    """Network namespaces for several nodes on one machine: the broker's, and one per node,
    each node on its own veth link to the broker's (10.77.K.2 ↔ 10.77.K.1/24): the nodes
    reach each other only through the broker, as machines on a LAN would, and a node's
    link can be cut and healed. Needs root (ip netns); everything is deleted by `down`."""

    def __init__(self, nodes):
        self.tag = f"{os.getpid() % 100000}"
        self.broker = f"smb{self.tag}"
        self.nodes = [f"smn{k}x{self.tag}" for k in range(nodes)]

    @staticmethod
    def available():
        """None when network namespaces can be made here, else why not (not root; or
        STILLMOMENT_TEST_NO_NETNS set, to try the loopback set-up as root)."""
        if os.environ.get("STILLMOMENT_TEST_NO_NETNS"):
            return "STILLMOMENT_TEST_NO_NETNS is set"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = f"smprobe{os.getpid()}"
        r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if r.returncode != 0:
            return f"ip netns add: {r.stderr.strip()}"
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
        return None

    def _ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def up(self):
        self._ip("netns", "add", self.broker)
        self._ip("-n", self.broker, "link", "set", "lo", "up")
        for k, ns in enumerate(self.nodes):
            self._ip("netns", "add", ns)
            self._ip("-n", ns, "link", "set", "lo", "up")
            a, b = f"smv{k}a{self.tag}", f"smv{k}b{self.tag}"
            self._ip("link", "add", a, "type", "veth", "peer", "name", b)
            self._ip("link", "set", a, "netns", self.broker)
            self._ip("link", "set", b, "netns", ns)
            self._ip("-n", self.broker, "addr", "add", f"10.77.{k}.1/24", "dev", a)
            self._ip("-n", ns, "addr", "add", f"10.77.{k}.2/24", "dev", b)
            self._ip("-n", self.broker, "link", "set", a, "up")
            self._ip("-n", ns, "link", "set", b, "up")
        return self

    def prefix(self, k):
        return ["ip", "netns", "exec", self.nodes[k]]

    def broker_address(self, k, port):
        """The broker as node k reaches it."""
        return f"10.77.{k}.1:{port}"

    def cut(self, k):
        self._ip("-n", self.nodes[k], "link", "set", f"smv{k}b{self.tag}", "down")

    def heal(self, k):
        self._ip("-n", self.nodes[k], "link", "set", f"smv{k}b{self.tag}", "up")

    def down(self):
        for ns in [*self.nodes, self.broker]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
