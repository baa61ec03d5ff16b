"""The real manypy-server as a child process, for the Python tests.

ManypyServer(args) starts `MANYPY_SERVER_BINARY` (default build/bin/manypy-server)
with `args`, waits for its last start-up line ("manypy-server: listening on
HOST:PORT, N model(s) ready, ..."; the HTTP and metrics lines come before it,
all in one flush) and reads every address from what it printed: .grpc,
.http and .metrics ("HOST:PORT" to connect to, so 127.0.0.1 where the
server listens on every address; None where that port is off). Its stderr
goes to a file (.stderr() reads it), stdout is drained so the server never
blocks on a full pipe. stop() sends SIGTERM and returns the exit status.
One object per server; its methods are called from the test's thread."""
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
import weakref

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("MANYPY_SERVER_BINARY", os.path.join(REPO, "build", "bin", "manypy-server"))
READY_LINE = re.compile(rb"manypy-server: listening on ([\d.]+:\d+),[^\n]*\n")


def _connectable(address):
    host, port = address.rsplit(":", 1)
    return f"{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"


class ManypyServer:
    def __init__(self, args, env=None, start_timeout_s=300, binary=SERVER):
        self.log = tempfile.NamedTemporaryFile(prefix="manypy-server-", suffix=".log", delete=False)
        weakref.finalize(self, os.unlink, self.log.name)  # readable after stop(), gone with self
        self.started = time.monotonic()
        self.process = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=self.log,
                                        env=dict(os.environ, **(env or {})))
        text = b""
        deadline = time.monotonic() + start_timeout_s
        while not READY_LINE.search(text):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("manypy-server did not start: " + text.decode(errors="replace") +
                                   self.stderr()[-4000:])
            if select.select([self.process.stdout], [], [], 0.2)[0]:
                text += os.read(self.process.stdout.fileno(), 4096)
        self.ready_seconds = time.monotonic() - self.started
        out = text.decode(errors="replace")
        self.grpc = _connectable(READY_LINE.search(text).group(1).decode())
        found = re.search(r"HTTP listening on ([\d.]+:\d+)", out)
        self.http = _connectable(found.group(1)) if found else None
        found = re.search(r"metrics listening on http://([\d.]+:\d+)/metrics", out)
        self.metrics = _connectable(found.group(1)) if found else None
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self):
        while os.read(self.process.stdout.fileno(), 4096):
            pass

    def stderr(self):
        """What the server has written to stderr so far."""
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM, then the exit status (a kill after 60 s without an exit)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def stop_expecting_clean_exit(self):
        """stop(), failing the test unless the server exited 0 (a clean drain)."""
        code = self.stop()
        if code != 0:
            raise AssertionError(f"manypy-server exited with status {code} after SIGTERM; "
                                 f"its stderr ends: {self.stderr()[-3000:]}")
