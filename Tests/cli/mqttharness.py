"""A private mosquitto (Debian's) on loopback for the MQTT tests, a subscriber that
records what the broker carries, and a publisher that keeps one connection (bench/home.py
and the rig time a press through it: no process start counted). Every process is stopped by its PID (by the Home that
tracks it, or by Broker.stop)."""
import os
import pwd
import socket
import struct
import subprocess
import time

import smtest


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def mosquitto_missing():
    for tool in ("mosquitto", "mosquitto_sub", "mosquitto_pub", "mosquitto_passwd"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/sbin", "/usr/bin")):
            return f"{tool} is not installed (make deps-test: mosquitto, mosquitto-clients)"
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libmosquitto.so.1") and \
            not any(os.path.exists(f"/usr/lib/{a}/libmosquitto.so.1") for a in ("aarch64-linux-gnu", "arm-linux-gnueabihf")):
        return "libmosquitto1 is not installed"
    return None


def tool(name):
    for d in ("/usr/sbin", "/usr/bin"):
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return name


class Broker:
    """mosquitto on 127.0.0.1:port, in `folder`; `users` {name: password} turns
    anonymous access off."""

    def __init__(self, folder, users=None, port=None, tls=False, netns=None):
        self.folder = str(folder)
        self.port = port or free_port()
        self.users = users
        self.proc = None
        self.ca = self._certificates() if tls else None
        # In a network namespace of its own (roomsharness.Site): listening on every address
        # there, its tools run there too.
        self.netns = netns
        self.prefix = ["ip", "netns", "exec", netns] if netns else []

    def _certificates(self):
        """A CA and the broker's certificate for 127.0.0.1 (openssl); the CA's path."""
        f = self.folder
        def ssl(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=f)
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=stillmoment test CA")
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=127.0.0.1")
        with open(os.path.join(f, "san.ext"), "w") as e:
            e.write("subjectAltName=IP:127.0.0.1\n")
        ssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker.pem", "-days", "2", "-extfile", "san.ext")
        return os.path.join(f, "ca.pem")

    def start(self):
        conf = os.path.join(self.folder, "mosquitto.conf")
        # As root, mosquitto would drop to the user `mosquitto`, who cannot read our folder.
        lines = [f"listener {self.port} {'0.0.0.0' if self.netns else '127.0.0.1'}", "persistence false", f"user {pwd.getpwuid(os.getuid()).pw_name}"]
        if self.ca:
            lines += [f"cafile {self.ca}", f"certfile {self.folder}/broker.pem", f"keyfile {self.folder}/broker.key"]
        if self.users:
            pw = os.path.join(self.folder, "passwd")
            open(pw, "w").close()
            for name, password in self.users.items():
                subprocess.run([tool("mosquitto_passwd"), "-b", pw, name, password], check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines.append("allow_anonymous true")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = open(os.path.join(self.folder, "mosquitto.log"), "ab")
        self.proc = subprocess.Popen([*self.prefix, tool("mosquitto"), "-c", conf], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        assert smtest.wait_for(self._listening, 10), "mosquitto did not start"
        return self

    def _listening(self):
        if self.netns:
            return subprocess.run([*self.prefix, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{self.port}"],
                                  capture_output=True).returncode == 0
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            smtest.stop_pid(self.proc.pid)
        if self.proc:
            self.proc.wait()
        self.proc = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def auth(self):
        out = ["--cafile", self.ca] if self.ca else []
        if not self.users:
            return out
        name, password = next(iter(self.users.items()))
        return out + ["-u", name, "-P", password]

    def publish(self, topic, payload, retain=False):
        args = [*self.prefix, tool("mosquitto_pub"), "-h", "127.0.0.1", "-p", str(self.port), *self.auth(), "-t", topic]
        args += ["-n"] if payload == "" else ["-m", payload]
        if retain:
            args.append("-r")
        subprocess.run(args, check=True, timeout=10)

    def publish_file(self, topic, path):
        subprocess.run([*self.prefix, tool("mosquitto_pub"), "-h", "127.0.0.1", "-p", str(self.port), *self.auth(),
                        "-t", topic, "-f", path], check=True, timeout=10)

    def retained(self, pattern, seconds=1):
        """{topic: payload} of the retained messages under `pattern` (an empty retained
        message is no message: the broker deletes it). A single topic returns with its
        message; a pattern waits `seconds` (whole seconds: mosquitto_sub's -W)."""
        single = "#" not in pattern and "+" not in pattern
        p = subprocess.run([*self.prefix, tool("mosquitto_sub"), "-h", "127.0.0.1", "-p", str(self.port), *self.auth(), "-t", pattern,
                            "--retained-only", "-W", str(max(1, int(seconds))), "-F", "%t\t%p", *(["-C", "1"] if single else [])],
                           capture_output=True, timeout=seconds + 10)
        out = {}
        for line in p.stdout.decode("utf-8", "replace").splitlines():
            topic, _, payload = line.partition("\t")
            out[topic] = payload
        return out

    def subscriber(self, home, pattern="#"):
        return Subscriber(self, home, pattern)


class Subscriber:
    """mosquitto_sub in the background: every message as (time, topic, payload)."""

    def __init__(self, broker, home, pattern):
        self.path = os.path.join(broker.folder, f"sub-{time.monotonic_ns()}.log")
        out = open(self.path, "wb")
        self.proc = home.track(subprocess.Popen(
            [tool("mosquitto_sub"), "-h", "127.0.0.1", "-p", str(broker.port), *broker.auth(), "-t", pattern,
             "-F", "%U\t%t\t%p"], stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        out.close()
        time.sleep(0.3)

    def messages(self):
        out = []
        with open(self.path, "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                parts = line.split("\t", 2)
                if len(parts) == 3:
                    out.append((float(parts[0]), parts[1], parts[2]))
        return out

    def wait(self, match, seconds=10):
        """The first message (time, topic, payload) for which match(topic, payload) holds."""
        def find():
            for m in self.messages():
                if match(m[1], m[2]):
                    return m
            return None
        return smtest.wait_for(find, seconds, 0.05)

    def stop(self):
        if self.proc.poll() is None:
            smtest.stop_pid(self.proc.pid)
        self.proc.wait()


# ------------------------------------------------------------------ a publisher without a process per message

def mqtt_packet(kind, body):
    n, length = len(body), b""
    while True:
        byte, n = n % 128, n // 128
        length += bytes([byte | (0x80 if n else 0)])
        if not n:
            return bytes([kind]) + length + body


def mqtt_string(s):
    b = s.encode()
    return struct.pack("!H", len(b)) + b


class Publisher:
    """One MQTT connection to the broker, kept open: CONNECT (clean session, no keepalive, a
    client id of its own: the broker would drop the daemon for one it has already),
    then QoS 0 PUBLISHes, each one write."""

    def __init__(self, port, client_id="stillmoment-test-publisher", host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = mqtt_string("MQTT") + bytes([4, 0x02]) + struct.pack("!H", 0) + mqtt_string(client_id)
        self.sock.sendall(mqtt_packet(0x10, body))
        ack = self.sock.recv(4)
        if ack != b"\x20\x02\x00\x00":
            self.sock.close()
            raise RuntimeError(f"the broker refused the publisher: {ack!r}")

    def publish(self, topic, payload):
        self.sock.sendall(mqtt_packet(0x30, mqtt_string(topic) + payload.encode()))

    def close(self):
        try:
            self.sock.sendall(b"\xe0\x00")    # DISCONNECT
        except OSError:
            pass
        self.sock.close()
