"""serve_lib: start and stop a real `tern serve` on an ephemeral loopback port
for the tests, plus TAP output. Every server is killed at exit; every wait
is bounded."""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TERN = os.environ.get("TERN_BIN", "build/app/tern")
MODEL = os.environ.get("TERN_TEST_MODEL",
                       os.path.expanduser("~/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf"))

# Every wait and timeout of the serve tests is multiplied by this: 1 in a
# plain build; meson sets it under sanitizers (TSan runs the engine 5-20x
# slower), and a person can on a loaded machine.
TIME_SCALE = float(os.environ.get("TERN_TEST_TIME_SCALE", "1") or 1)

_n = 0
_failed = 0


def ok(cond, name):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print(("ok" if cond else "not ok"), _n, "-", name, flush=True)
    return cond


def diag(msg):
    for line in str(msg).splitlines():
        print("#", line, flush=True)


SANITIZER_MARKS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:")


def done():
    # a server's sanitizer reports go to its own stderr, not to the test's:
    # every server this test started must have none
    for s in _servers:
        try:
            text = s.log()
        except OSError:
            continue
        marks = [m for m in SANITIZER_MARKS if m in text]
        if not ok(not marks, f"no sanitizer report in the stderr of server pid {s.proc.pid}"):
            i = min(text.find(m) for m in marks)
            diag(text[max(0, i - 200):i + 3000])
    print(f"1..{_n}", flush=True)
    sys.exit(1 if _failed else 0)


_servers = []


def _kill_all():
    for s in _servers:
        s.kill()


atexit.register(_kill_all)


class Server:
    """One tern serve process. args: extra command-line options."""

    def __init__(self, args=(), history=False, env=None):
        self.dir = tempfile.mkdtemp(prefix="tern-serve-")
        self.access_log = os.path.join(self.dir, "access.log")
        self.db = os.path.join(self.dir, "history.db")
        cmd = [TERN, "serve", "-m", MODEL, "--port", "0", "-t", "1",
               "--access-log", self.access_log]
        cmd += ["--db", self.db] if history else ["--no-history"]
        cmd += list(args)
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self.err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err,
                                     env=dict(os.environ, **(env or {})))
        _servers.append(self)
        self.port = None
        end = time.time() + 60 * TIME_SCALE
        while time.time() < end and self.proc.poll() is None:
            m = re.search(r"listening on http://[\d.]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                if "ready:" in self.log():
                    break
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{self.port}"

    def log(self):
        with open(self.stderr_path) as f:
            return f.read()

    def ready(self):
        return self.port is not None and "ready:" in self.log()

    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout * TIME_SCALE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def access(self):
        try:
            with open(self.access_log) as f:
                return [json.loads(l) for l in f if l.strip()]
        except FileNotFoundError:
            return []

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1])
        return 0


def request(base, method, path, body=None, headers=None, timeout=60):
    """(status, headers, body bytes); never raises on HTTP errors."""
    timeout *= TIME_SCALE
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    if data is not None and "Content-Type" not in (headers or {}):
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def metrics(base):
    """/metrics parsed by prometheus_client's text parser: {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families
    st, _, body = request(base, "GET", "/metrics")
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))
            out[(s.name, labels)] = s.value
    return out


def metric_types(base):
    """/metrics parsed by prometheus_client's text parser: ({family: type},
    {sample name: its family's type}, the raw text)."""
    from prometheus_client.parser import text_string_to_metric_families
    st, _, body = request(base, "GET", "/metrics")
    fams, samples = {}, {}
    for fam in text_string_to_metric_families(body.decode()):
        if fam.samples:  # a TYPE line its samples do not match leaves an empty family
            fams[fam.name] = fam.type
        for s in fam.samples:
            samples[s.name] = fam.type
    return fams, samples, body.decode()


def metric(m, name, **labels):
    return m.get((name, tuple(sorted(labels.items()))), 0.0)
