"""Models that call other models (manypy.infer / manypy.submit), for
composition_e2e_test.cc; packaged into composition/ by
make_server_test_models.py with their callee `double`.

double: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1], x * 2 (the trivial callee).
calls_double: the same signature, double(x) + 1, one nested call.
fan_out: the same signature, the sum of double(x + k) for k = 0..3, four
  calls submitted at once and then waited for.
cycle_a / cycle_b: each calls the other (refused).
probe: MODE BYTES [1], INPUT__0 FP32 [-1] -> RESULT BYTES [1]: what a
  model sees of the server, as JSON text, by MODE: "unknown" (a call of a
  model that does not exist), "bad_input" (double with a wrong input name),
  "wrong_dtype" (double with int64), "request" (manypy.request), "log" (a
  manypy.log.info line with fields), "timeout" (a call with a tiny timeout
  on slow_double), "leak" (a submit never waited for), "metric" (its
  module-level counter probe_calls_total{mode} and histogram probe_seconds),
  "metric_twice" (probe_calls_total declared again as a gauge),
  "slow_chain" (twenty slow_double calls in turn: 6 s).
slow_double: as double, after sleeping 0.3 s.
calls_aoti: X FP32 [-1, 3] -> SUM FP32 [-1, 1], the rows' sums from
  double_sum_aoti (an AOTInductor archive, platform torch_aoti) plus 1:
  packaged into aoti/ with its callee, on PyTorch >= 2.6.
"""
import json
import time

import manypy
import torch
from torch import nn

CALLS = manypy.metrics.counter("probe_calls_total", "probe's calls by mode", labels=["mode"])
SECONDS = manypy.metrics.histogram("probe_seconds", "probe's time per call",
                                   buckets=[0.001, 0.01, 0.1, 1])


class Double(nn.Module):
    def forward(self, x):
        return x * 2


class SlowDouble(nn.Module):
    def forward(self, x):
        time.sleep(0.3)
        return x * 2


class CallsDouble(nn.Module):
    def forward(self, x):
        return manypy.infer("double", {"INPUT__0": x})["OUTPUT__0"] + 1


class CallsAoti(nn.Module):
    def forward(self, x):
        return manypy.infer("double_sum_aoti", {"X": x})["SUM"] + 1


class FanOut(nn.Module):
    def forward(self, x):
        calls = [manypy.submit("double", {"INPUT__0": x + k}) for k in range(4)]
        return sum(c.result()["OUTPUT__0"] for c in calls)


class CycleA(nn.Module):
    def forward(self, x):
        return manypy.infer("cycle_b", {"INPUT__0": x})["OUTPUT__0"]


class CycleB(nn.Module):
    def forward(self, x):
        return manypy.infer("cycle_a", {"INPUT__0": x})["OUTPUT__0"]


def _error(e):
    return {"status": e.status, "message": e.message, "type": type(e).__name__}


class Probe(nn.Module):
    def forward(self, mode, x):
        mode = mode[0] if isinstance(mode, list) else mode
        mode = mode[0] if isinstance(mode, list) else mode
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        out = {}
        try:
            if mode == "unknown":
                manypy.infer("no_such_model", {"INPUT__0": x})
            elif mode == "bad_input":
                manypy.infer("double", {"WRONG": x})
            elif mode == "wrong_dtype":
                manypy.infer("double", {"INPUT__0": x.long()})
            elif mode == "request":
                r = manypy.request
                out = {"id": r.id, "parameters": r.parameters, "seconds_left": r.seconds_left,
                       "client_left": r.client_left}
            elif mode == "state":  # no sequences here: None for both
                out = {"state": manypy.request.state, "sequence_id": manypy.request.sequence_id}
            elif mode == "double_in_sequence":  # refused when double keeps sequences
                manypy.infer("double", {"INPUT__0": x})
                out = {"called": True}
            elif mode == "log":
                manypy.log.info("probe says hello", answer=42, who="probe")
                out = {"logged": True}
            elif mode == "timeout":
                manypy.infer("slow_double", {"INPUT__0": x}, timeout=0.05)
            elif mode == "metric":
                CALLS.labels(mode=mode).inc()
                SECONDS.observe(0.005)
                out = {"counted": True}
            elif mode == "metric_twice":
                try:
                    manypy.metrics.gauge("probe_calls_total", "again", labels=["mode"])
                except ValueError as e:
                    out = {"ValueError": str(e)}
            elif mode == "slow_chain":
                for _ in range(20):
                    manypy.infer("slow_double", {"INPUT__0": x})
                out = {"finished": True}
            elif mode == "leak":
                manypy.submit("slow_double", {"INPUT__0": x})
                out = {"submitted": True}
            else:  # the warm-up's "manypy"
                out = {"mode": mode}
        except manypy.InferenceError as e:
            out = _error(e)
        return [json.dumps(out).encode()]
