"""Per-thread-kind CPU time and context switches of a process, from /proc,
for a benchmark to say where a server's CPU per request goes (workers,
gRPC's callback threads, the HTTP server's threads...) and how often each
kind of thread sleeps and is preempted.

snapshot(pid) reads every thread's name (comm), CPU time (schedstat: ns on
a CPU, exact, not clock ticks) and voluntary and involuntary context
switches; per_request(before, after, requests) groups the difference by
thread kind (the name less its trailing digits and separators:
manypy-worker-0 and manypy-worker-1 are one kind "manypy-worker") and
divides by the requests served between the two snapshots. Threads that
came or went between them count from zero or not at all.
"""
import os
import re


def _read(path):
    with open(path) as f:
        return f.read()


def snapshot(pid):
    """{tid: (kind, cpu_ns, voluntary, involuntary)} of process `pid` now."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            comm = _read(f"{base}/{tid}/comm").strip()
            cpu_ns = int(_read(f"{base}/{tid}/schedstat").split()[0])
            status = _read(f"{base}/{tid}/status")
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        vol = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M)
        nonvol = re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M)
        kind = re.sub(r"[-_ ]*\d+$", "", comm) or comm
        out[tid] = (kind, cpu_ns, int(vol.group(1)) if vol else 0,
                    int(nonvol.group(1)) if nonvol else 0)
    return out


def per_request(before, after, requests):
    """{kind: {"threads", "cpu_us", "voluntary", "involuntary"}}, each per
    request (threads: how many of that kind ran), over `requests`."""
    kinds = {}
    for tid, (kind, cpu, vol, nonvol) in after.items():
        _, cpu0, vol0, nonvol0 = before.get(tid, (kind, 0, 0, 0))
        k = kinds.setdefault(kind, {"threads": 0, "cpu_us": 0.0, "voluntary": 0.0,
                                    "involuntary": 0.0})
        if cpu - cpu0 > 0:
            k["threads"] += 1
        k["cpu_us"] += (cpu - cpu0) / 1e3
        k["voluntary"] += vol - vol0
        k["involuntary"] += nonvol - nonvol0
    n = max(1, requests)
    return {kind: {"threads": k["threads"], "cpu_us": k["cpu_us"] / n,
                   "voluntary": k["voluntary"] / n, "involuntary": k["involuntary"] / n}
            for kind, k in sorted(kinds.items()) if k["cpu_us"] > 0 or k["voluntary"] > 0}
