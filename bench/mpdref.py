"""MPD as a reference of the benchmarks: a private instance (its own folder, a Unix socket,
no system service) playing one MP3 to a PulseAudio server. bench/deps-mpd.sh installs it;
`start` returns None when it is not installed."""
import os
import shutil
import socket
import time


class MPD:
    def __init__(self, harness, mp3, pulse, name="mpd"):
        """Starts mpd with `mp3` in its music folder (harness: webharness, whose spawn and
        cleanup stop it by its PID)."""
        d = os.path.join(harness.DIR, name)
        music = os.path.join(d, "music")
        os.makedirs(music)
        shutil.copy(mp3, os.path.join(music, "talk.mp3"))
        sock = os.path.join(d, "mpd.sock")
        with open(os.path.join(d, "mpd.conf"), "w") as f:
            f.write(f'music_directory "{music}"\ndb_file "{d}/db"\nstate_file "{d}/state"\nbind_to_address "{sock}"\n'
                    f'audio_output {{\n type "pulse"\n name "bench"\n server "{pulse}"\n}}\n')
        self.proc = harness.spawn(["mpd", "--no-daemon", "--stderr", os.path.join(d, "mpd.conf")],
                                  dict(os.environ, PULSE_SERVER=pulse), name)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)
        self.f = self.sock.makefile("rw")
        self.f.readline()
        self.cmd("update")
        for _ in range(100):
            if not any(line.startswith("updating_db") for line in self.cmd("status")):
                break
            time.sleep(0.1)
        self.cmd("add talk.mp3")

    @staticmethod
    def installed():
        return shutil.which("mpd") is not None

    def cmd(self, c):
        self.f.write(c + "\n")
        self.f.flush()
        lines = []
        while True:
            line = self.f.readline()
            if not line or line.startswith("OK") or line.startswith("ACK"):
                return lines + [line]
            lines.append(line)

    def close(self):
        try:
            self.cmd("stop")
        finally:
            self.sock.close()
