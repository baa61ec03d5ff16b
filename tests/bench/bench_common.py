"""What the benchmark drivers share: starting manypy-server on free ports,
running one measurement window of manypy-perf, and a process's CPU time
and memory."""
import json
import os
import re
import subprocess
import tempfile

CLK_TCK = os.sysconf("SC_CLK_TCK")


def no_supervisor(binary):
    """["--no-supervisor"] when `binary` has a supervisor (older builds, which
    bench_builds compares, do not): a benchmark reads the serving process's
    CPU and memory from /proc/PID, which must be that process, not its parent."""
    if binary not in _SUPERVISED:
        shown = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
        _SUPERVISED[binary] = "--no-supervisor" in shown
    return ["--no-supervisor"] if _SUPERVISED[binary] else []


_SUPERVISED = {}


def start_manypy(binary, repository, models, interpreters, extra=()):
    """Starts manypy-server (explicit model control, `models` loaded, every
    port picked by the kernel, no metrics); returns (process, {"grpc": port,
    "http": port}) once it is listening."""
    args = [binary, f"--model-repository={repository}", "--grpc-address=127.0.0.1",
            "--grpc-port=0", "--http-port=0", "--no-metrics", "--model-control-mode=explicit",
            *no_supervisor(binary),
            f"--interpreters={interpreters}", "--log-level=warning", *extra]
    args += [f"--load-model={m}" for m in models]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    ports = {}
    for line in proc.stdout:
        found = re.search(r"manypy-server: HTTP listening on [^:]+:(\d+)", line)
        if found:
            ports["http"] = int(found.group(1))
        found = re.search(r"manypy-server: listening on [^:]+:(\d+)", line)  # gRPC's, the last
        if found:
            ports["grpc"] = int(found.group(1))
            return proc, ports
    raise SystemExit(f"manypy-server {' '.join(extra)} did not start")


def perf_window(perf, port, model, concurrency, seconds, protocol="grpc", warmup=0.5, extra=()):
    """One manypy-perf window; its JSON record. Stops the run on any error.
    `extra`: more manypy-perf flags (e.g. --async)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([perf, *extra, "-m", model, "-i", protocol, "-u", f"127.0.0.1:{port}",
                        "--concurrency", str(concurrency), "--warmup-seconds", str(warmup),
                        "--window-seconds", str(seconds), "--max-windows", "1",
                        "--json", out.name, "--csv", os.devnull],
                       check=True, stderr=subprocess.DEVNULL)
        record = json.load(open(out.name))[0]
    if record.get("errors"):
        raise SystemExit(f"{model} {protocol} c={concurrency}: errors {record.get('errors_by_code')}")
    return record


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def status_bytes(pid, field):
    """A memory field of /proc/PID/status ("VmRSS", "VmHWM", "RssAnon"...) in
    bytes; 0 where the process has no such field."""
    with open(f"/proc/{pid}/status") as f:
        found = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    return int(found.group(1)) * 1024 if found else 0
