"""The real manypy-server serving the OpenAI test models
(tests/server/models/openai_models.py, the repository's openai/ folder),
for test_openai_http.py and test_openai_client.py."""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "tests", "clients", "python"))
sys.dont_write_bytecode = True

from test_client import REPOSITORY, ServerProcess  # noqa: E402

MODELS = ("byte_writer", "one_shot", "embedder")


def start(extra_args=()):
    """The server with the three models loaded; its HTTP address is .http_address."""
    return ServerProcess(extra_args=("--no-metrics", *extra_args),
                         repository=os.path.join(REPOSITORY, "openai"), load=MODELS)


def token_file(token):
    """A file holding `token`, for --auth-token-file (removed by the caller)."""
    f = tempfile.NamedTemporaryFile("w", suffix=".token", delete=False)
    f.write(token + "\n")
    f.close()
    return f.name


def marker_path():
    """A fresh file name the slow model appends "closed" to when its generator closes."""
    fd, path = tempfile.mkstemp(suffix=".marker")
    os.close(fd)
    return path


def wait_closed(path, timeout_s=15):
    """Whether the slow model wrote "closed" to `path` within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path) as f:
            if "closed" in f.read():
                return True
        time.sleep(0.05)
    return False


def histogram(text):
    """The embedder's embedding of `text`."""
    counts = [0.0] * 8
    for b in text.encode():
        counts[b % 8] += 1.0
    return counts
