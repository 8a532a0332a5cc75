"""A real Home Assistant core for the Home Assistant test (test_home_assistant.py): the
venv scripts/haenv.sh makes (.build/ha-venv, homeassistant==2024.3.3), a private config
folder with an MQTT config entry in its .storage (the broker given), a user with a long-lived
token (a JWT signed here with its key), onboarding done and a stub `frontend` custom
component (else Home Assistant sets up its default integrations, whose requirements are not
installed, and falls into recovery mode). Started headless with --skip-pip on loopback;
stopped by its PID."""
import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request

import smtest
from mqttharness import free_port

VENV = os.path.join(smtest.ROOT, ".build", "ha-venv")
HASS = os.path.join(VENV, "bin", "hass")


def missing():
    if not os.access(HASS, os.X_OK):
        return f"no Home Assistant at {HASS} (make test-home makes it: scripts/haenv.sh)"
    return None


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(issuer, key):
    now = int(time.time())
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps({"iss": issuer, "iat": now - 60, "exp": now + 10 * 365 * 86400}).encode())
    sig = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


def _store(folder, key, data, version=1, minor=1):
    with open(os.path.join(folder, ".storage", key), "w") as f:
        json.dump({"version": version, "minor_version": minor, "key": key, "data": data}, f)


class HomeAssistant:
    def __init__(self, folder, broker_port):
        self.folder = str(folder)
        self.port = free_port()
        self.proc = None
        os.makedirs(os.path.join(self.folder, ".storage"), exist_ok=True)
        os.makedirs(os.path.join(self.folder, "custom_components", "frontend"), exist_ok=True)
        with open(os.path.join(self.folder, "custom_components", "frontend", "manifest.json"), "w") as f:
            json.dump({"domain": "frontend", "name": "Frontend (stub)", "version": "1.0.0", "documentation": "",
                       "dependencies": [], "codeowners": [], "requirements": []}, f)
        with open(os.path.join(self.folder, "custom_components", "frontend", "__init__.py"), "w") as f:
            f.write("async def async_setup(hass, config):\n    return True\n")
        with open(os.path.join(self.folder, "configuration.yaml"), "w") as f:
            f.write(f"""homeassistant:
  name: Test
  latitude: 52.5
  longitude: 13.4
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: DE
http:
  server_host: 127.0.0.1
  server_port: {self.port}
api:
logger:
  default: warning
  logs:
    homeassistant.components.mqtt: info
""")
        _store(self.folder, "core.config_entries", {"entries": [{
            "entry_id": "stillmomentmqtt", "version": 1, "minor_version": 1, "domain": "mqtt", "title": "mosquitto",
            "data": {"broker": "127.0.0.1", "port": broker_port, "discovery": True, "discovery_prefix": "homeassistant"},
            "options": {}, "pref_disable_new_entities": False, "pref_disable_polling": False, "source": "user",
            "unique_id": None, "disabled_by": None}]})
        _store(self.folder, "onboarding", {"done": ["user", "core_config", "analytics", "integration"]}, version=4)
        token_id, key = secrets.token_hex(16), secrets.token_hex(64)
        _store(self.folder, "auth", {
            "users": [{"id": "tester", "group_ids": ["system-admin"], "is_owner": True, "is_active": True,
                       "name": "tester", "system_generated": False, "local_only": False}],
            "groups": [{"id": "system-admin", "name": "Administrators"}],
            "credentials": [],
            "refresh_tokens": [{"id": token_id, "user_id": "tester", "client_id": None, "client_name": "pytest",
                                "client_icon": None, "token_type": "long_lived_access_token",
                                "created_at": "2024-01-01T00:00:00+00:00", "access_token_expiration": 315360000.0,
                                "token": secrets.token_hex(64), "jwt_key": key, "last_used_at": None,
                                "last_used_ip": None, "credential_id": None, "version": "2024.3.3"}]})
        self.token = jwt(token_id, key)

    def start(self, home, seconds=240):
        """Starts it (tracked by `home` to be stopped by PID) and waits for its API and MQTT."""
        log = open(os.path.join(self.folder, "hass.out"), "ab")
        self.proc = home.track(subprocess.Popen([HASS, "-c", self.folder, "--skip-pip"], stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL))
        log.close()
        t0 = time.monotonic()
        ok = smtest.wait_for(lambda: self.proc.poll() is None and self._running(), seconds, 0.5)
        assert ok, f"Home Assistant did not start:\n{self.log()[-3000:]}"
        return time.monotonic() - t0

    def _running(self):
        try:
            return self.api("GET", "/api/config").get("state") == "RUNNING"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            smtest.stop_pid(self.proc.pid, timeout=60)
        if self.proc:
            self.proc.wait()

    def log(self):
        out = ""
        for name in ("home-assistant.log", "hass.out"):
            p = os.path.join(self.folder, name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += f.read()
        return out

    def api(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        return json.loads(text) if text.startswith(("{", "[")) else text

    def template(self, text):
        return self.api("POST", "/api/template", {"template": text})

    def states(self):
        return {s["entity_id"]: s for s in self.api("GET", "/api/states")}
