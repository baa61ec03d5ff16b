#!/usr/bin/python3
"""Packages the server-test models into DIR: echo_all, failing, slow, spin,
batched_double.

    /usr/bin/python3 tests/server/models/make_server_test_models.py --out DIR
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python")]

import manypy.package  # noqa: E402
import server_test_models as m  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    specs = [(f"IN_{dt}", dt, [-1]) for dt in m.DATATYPES]
    manypy.package.export(m.EchoAll(), os.path.join(out, "echo_all.mpk"), name="echo_all",
                          inputs=specs, outputs=[(f"OUT_{dt}", dt, [-1]) for dt in m.DATATYPES])
    manypy.package.export(m.Failing(), os.path.join(out, "failing.mpk"), name="failing",
                          inputs=[("INPUT__0", "FP32", [-1])], outputs=[("OUTPUT__0", "FP32", [-1])])
    manypy.package.export(m.Slow(), os.path.join(out, "slow.mpk"), name="slow",
                          inputs=[("MS", "INT64", [1])], outputs=[("MS", "INT64", [1])],
                          max_batch_size=8)
    manypy.package.export(m.Spin(), os.path.join(out, "spin.mpk"), name="spin",
                          inputs=[("INPUT__0", "FP32", [-1])], outputs=[("OUTPUT__0", "FP32", [-1])])
    manypy.package.export(m.BatchedDouble(), os.path.join(out, "batched_double.mpk"),
                          name="batched_double", inputs=[("X", "FP32", [2])],
                          outputs=[("Y", "FP32", [2])], max_batch_size=16,
                          batching={"dynamic": True, "max_queue_delay_microseconds": 2000})
    # Its own folder: a model this server's CPU-only libtorch must refuse to load.
    os.makedirs(os.path.join(out, "cuda"), exist_ok=True)
    manypy.package.export(m.Failing(), os.path.join(out, "cuda", "needs_cuda.mpk"),
                          name="needs_cuda", inputs=[("INPUT__0", "FP32", [-1])],
                          outputs=[("OUTPUT__0", "FP32", [-1])], device="cuda")
    print(f"wrote echo_all, failing, slow, spin, batched_double, cuda/needs_cuda to {out}")


if __name__ == "__main__":
    main()
