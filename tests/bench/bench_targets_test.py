#!/usr/bin/python3
"""The benchmarks' verdicts (bench_targets.py, paired_rounds.py) and make
bench's report (bench_report.py): each target judged from its paired rounds
holds, misses or is inconclusive as its interval says, the report shows all
three, and only a miss makes the command fail."""
import contextlib
import io
import json
import os
import random
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_report  # noqa: E402
import bench_targets  # noqa: E402
from paired_rounds import bootstrap_interval, verdict  # noqa: E402


def noisy(level, spread, n=7, seed=1):
    """n rounds scattered uniformly within +-spread around level."""
    rng = random.Random(seed)
    return [level * rng.uniform(1 - spread, 1 + spread) for _ in range(n)]


class PairedRoundsTest(unittest.TestCase):
    def test_the_interval_contains_the_median_and_narrows_with_less_noise(self):
        wide, narrow = noisy(1.0, 0.2), noisy(1.0, 0.02)
        for values in (wide, narrow):
            low, high = bootstrap_interval(values)
            self.assertLessEqual(low, sorted(values)[len(values) // 2])
            self.assertGreaterEqual(high, sorted(values)[len(values) // 2])
        self.assertLess(bootstrap_interval(narrow)[1] - bootstrap_interval(narrow)[0],
                        bootstrap_interval(wide)[1] - bootstrap_interval(wide)[0])

    def test_the_three_verdicts_either_way(self):
        self.assertEqual(verdict(noisy(1.2, 0.03), 1.0, True)["verdict"], "holds")
        self.assertEqual(verdict(noisy(0.8, 0.03), 1.0, True)["verdict"], "misses")
        self.assertEqual(verdict(noisy(1.0, 0.2), 1.0, True)["verdict"], "inconclusive")
        self.assertEqual(verdict(noisy(0.8, 0.03), 1.0, False)["verdict"], "holds")
        self.assertEqual(verdict(noisy(1.2, 0.03), 1.0, False)["verdict"], "misses")
        self.assertEqual(verdict(noisy(1.0, 0.2), 1.0, False)["verdict"], "inconclusive")


class JudgeTest(unittest.TestCase):
    def test_rounds_pair_by_index(self):
        self.assertEqual(bench_targets.paired_ratios([2, 4, 6], [1, 2, 0]), [2.0, 2.0])

    def test_fewer_rounds_than_a_verdict_needs_is_inconclusive_not_judged(self):
        row = bench_targets.judge("t", "m", [5.0, 5.0, 5.0], 1.0, True)
        self.assertEqual(row["verdict"]["verdict"], "inconclusive")
        self.assertIn("fewer than the 5", bench_targets.describe(row))

    def test_describe_prints_the_median_and_interval(self):
        row = bench_targets.judge("t", "m", [0.9, 0.95, 1.0, 1.05, 1.1], 0.95, True)
        self.assertRegex(bench_targets.describe(row), r"^1\.00x \[0\.\d\d, 1\.\d\d\], 5 rounds$")


def serving_record(model, server, c, rounds):
    """A serving.json record whose headline is the median round's."""
    rs = [{"infer_per_s": t, "p50_ms": 1000 / t, "p99_ms": 2000 / t,
           "server_cpu_us_per_infer": cpu, "peak_rss_bytes": rss} for t, cpu, rss in rounds]
    head = sorted(rs, key=lambda r: r["infer_per_s"])[len(rs) // 2]
    return {"model": model, "server": server, "concurrency": c, **head, "errors": 0,
            "rounds": rs, "rounds_infer_per_s": [r["infer_per_s"] for r in rs]}


def serving_run(ts_throughput):
    """mlp_loop c=16 (holds), resnet50 against TorchScript at ts_throughput
    (peak and p50), resnet50's RSS (holds)."""
    mib = 2**20
    out = [
        serving_record("mlp_loop", "manypy", 16, [(6000 + 50 * i, 200, 500 * mib) for i in range(5)]),
        serving_record("mlp_loop", "python-processes", 16,
                       [(1800 + 20 * i, 900, 900 * mib) for i in range(5)]),
        serving_record("mlp_loop", "python-grpc", 16, [(300 + i, 3000, 300 * mib) for i in range(5)]),
    ]
    for c in (1, 16, 64):
        out.append(serving_record("resnet50", "manypy", c,
                                  [(10.0 * c ** 0.3, 1, 700 * mib) for _ in range(5)]))
        out.append(serving_record("resnet50", "manypy-torchscript", c,
                                  [(t * c ** 0.3, 1, 650 * mib) for t in ts_throughput]))
    out.append(serving_record("resnet50", "python-processes", 16,
                              [(9.0, 1, 1500 * mib) for _ in range(5)]))
    return out


class ServingTargetsTest(unittest.TestCase):
    def rows(self, ts):
        return {r["target"]: r["verdict"] for r in bench_targets.serving_targets(serving_run(ts))}

    def test_every_target_of_a_good_run_holds(self):
        rows = self.rows([10.0, 10.1, 9.9, 10.0, 10.05])
        self.assertEqual(len(rows), 6, rows)
        for name, v in rows.items():
            self.assertEqual(v["verdict"], "holds", (name, v))

    def test_torchscript_far_ahead_misses_and_a_level_race_is_inconclusive(self):
        ahead = self.rows([12.0, 12.2, 11.9, 12.1, 12.0])
        self.assertEqual(ahead["resnet50: peak throughput over the sweep >= 0.95x "
                               "manypy-torchscript"]["verdict"], "misses")
        self.assertEqual(ahead["resnet50 c=1: p50 within 1.1x manypy-torchscript"]["verdict"],
                         "misses")
        race = self.rows([9.0, 11.0, 10.2, 10.9, 9.6])
        self.assertEqual(race["resnet50: peak throughput over the sweep >= 0.95x "
                              "manypy-torchscript"]["verdict"], "inconclusive")

    def test_the_peak_is_each_rounds_best_level(self):
        run = [r for r in serving_run([10.0] * 5) if r["model"] == "resnet50"]
        for r in run:  # manypy's best level is c=1 in round 0 only
            if r["server"] == "manypy" and r["concurrency"] == 1:
                r["rounds"][0]["infer_per_s"] = 1000.0
        v = {x["target"]: x["verdict"] for x in bench_targets.serving_targets(run)}
        peak = v["resnet50: peak throughput over the sweep >= 0.95x manypy-torchscript"]
        self.assertEqual(peak["rounds"], 5)
        self.assertAlmostEqual(peak["median"], 1.0)

    def test_the_round_plan_measures_every_side_a_target_reads(self):
        levels = [1, 4, 16, 64]
        self.assertEqual(bench_targets.serving_round_plan("mlp_loop", 16, levels),
                         ({"manypy", "python-processes", "python-grpc"}, False))
        self.assertEqual(bench_targets.serving_round_plan("mlp_loop", 4, levels), (set(), False))
        self.assertEqual(bench_targets.serving_round_plan("vit_small", 4, levels),
                         ({"manypy", "manypy-torchscript"}, False))
        self.assertEqual(bench_targets.serving_round_plan("resnet50", 16, levels),
                         ({"manypy", "manypy-torchscript", "python-processes"}, True))
        self.assertEqual(bench_targets.serving_round_plan("resnet50", 64, levels),
                         ({"manypy", "manypy-torchscript"}, False))


class OtherBenchmarksTest(unittest.TestCase):
    def test_memory_growth_and_ratio_come_from_the_same_rounds(self):
        mib = 2**20
        pool1 = [360 * mib + i * mib for i in range(5)]
        pool4 = [x + 3 * 68 * mib for x in pool1]  # 68 MiB per extra interpreter, every round
        small1 = [230 * mib] * 5
        small4 = [230 * mib + 3 * 55 * mib] * 5
        records = [
            {"model": "resnet50", "mode": "interpreters", "workers": 1, "rss_bytes": pool1[2],
             "rounds_rss_bytes": pool1, "weight_bytes": 100 * mib},
            {"model": "resnet50", "mode": "interpreters", "workers": 4, "rss_bytes": pool4[2],
             "rounds_rss_bytes": pool4, "weight_bytes": 100 * mib},
            {"model": "resnet50", "mode": "processes", "workers": 4, "rss_bytes": 1480 * mib,
             "rounds_rss_bytes": [1480 * mib] * 5, "weight_bytes": 100 * mib},
            {"model": "mlp_loop", "mode": "interpreters", "workers": 1, "rss_bytes": small1[0],
             "rounds_rss_bytes": small1},
            {"model": "mlp_loop", "mode": "interpreters", "workers": 4, "rss_bytes": small4[0],
             "rounds_rss_bytes": small4},
            {"model": "repository", "mode": "server", "workers": 2, "ready_seconds": 9.0,
             "models_ready": 14, "rounds_ready_seconds": [8.0, 12.0, 9.0, 8.5, 11.0]},
        ]
        v = [r["verdict"] for r in bench_targets.memory_targets(records)]
        self.assertEqual([x["verdict"] for x in v], ["holds", "holds", "misses", "inconclusive"])
        self.assertAlmostEqual(v[1]["median"], 0.68)
        self.assertAlmostEqual(v[2]["median"], 55.0)

    def test_batching_pairs_each_window_with_the_other_sides(self):
        def rec(c, on, tps):
            return {"model": "mlp_loop", "concurrency": c, "batching": on,
                    "infer_per_s": tps[2], "p50_ms": 1000 / tps[2],
                    "rounds": [{"infer_per_s": t, "p50_ms": 1000 / t, "p99_ms": 1} for t in tps]}
        rows = bench_targets.batching_targets(
            [rec(64, True, [3000, 3500, 3200, 3300, 3400]), rec(64, False, [600] * 5),
             rec(1, True, [250] * 5), rec(1, False, [240] * 5)])
        self.assertEqual([r["verdict"]["verdict"] for r in rows], ["holds", "holds"])

    def test_pool_targets_judge_the_rounds(self):
        def rec(model, mode, t, rounds):
            return {"model": model, "mode": mode, "threads": t, "calls_per_s": rounds[0],
                    "rounds_calls_per_s": rounds}
        rows = bench_targets.pool_targets([
            rec("small", "interpreters", 1, [10000] * 5),
            rec("small", "interpreters", 2, [19000, 20000, 21000, 19500, 20500]),
            rec("small", "shared_interpreter", 2, [6000] * 5)])
        self.assertEqual([(r["target"], r["verdict"]["verdict"]) for r in rows], [
            ("small: interpreters T=2 >= 1.8x interpreters T=1 (calls/s)", "holds"),
            ("small: interpreters T=2 >= 4.0x shared_interpreter T=2 (calls/s)", "misses")])

    def test_generate_targets_are_judged_on_the_cpp_client_and_the_python_client_reported(self):
        """The C++ load generator's ratios are the targets; the Python gRPC
        client's, however far below, are reported and fail nothing."""
        def side(tokens, ttft, lost=None):
            return {"tokens_per_s": tokens, "ttft_p50_ms": ttft, "lost_or_reordered": lost}

        def level(cpp_batched, ttft):
            rounds = [{"batched_cpp": side(cpp_batched * f, ttft), "unbatched_cpp": side(1000, 50),
                       "batched": side(2000 * f, 4 * ttft, 0), "unbatched": side(1000, 60, 0),
                       "batched_openai": side(3000, ttft, 0)}
                      for f in (0.97, 0.99, 1.0, 1.01, 1.03)]
            entry = {"rounds": rounds}
            for name in rounds[0]:
                for figure in ("tokens_per_s", "ttft_p50_ms"):
                    entry[f"{name}_{figure}"] = rounds[2][name][figure]
            return entry
        rows = bench_targets.generate_targets({"levels": {"1": level(1000, 2.0),
                                                          "16": level(5000, 3.0)}})
        self.assertEqual([(r["target"].split(":")[0], r["verdict"]["verdict"]) for r in rows], [
            ("llama_decoder 16 streams, C++ client (manypy-perf)", "holds"),
            ("llama_decoder with continuous batching, C++ client (manypy-perf)", "holds"),
            ("llama_decoder 16 streams, Python gRPC client", "reported"),
            ("llama_decoder with continuous batching, Python gRPC client", "reported"),
            ("llama_decoder", "holds")])
        self.assertFalse(bench_targets.any_missed(rows))
        self.assertEqual(bench_targets.describe(rows[2]).split(" [")[0], "2.00x")


class CommandsTest(unittest.TestCase):
    """The report and the command line: all three kinds shown; exit 1 only on a miss."""

    def run_report(self, ts_throughput, extra_inconclusive=True):
        folder = tempfile.mkdtemp(prefix="bench_targets_test_")
        with open(os.path.join(folder, "serving.json"), "w") as f:
            json.dump(serving_run(ts_throughput), f)
        if extra_inconclusive:  # vit_small: TorchScript level with manypy, +-10% per round
            with open(os.path.join(folder, "serving.json")) as f:
                records = json.load(f)
            records += [serving_record("vit_small", "manypy", 1, [(17, 1, 1)] * 5),
                        serving_record("vit_small", "manypy-torchscript", 1,
                                       [(t, 1, 1) for t in (15.5, 18.7, 16.2, 18.0, 17.3)])]
            with open(os.path.join(folder, "serving.json"), "w") as f:
                json.dump(records, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            sys.argv = ["bench_report.py", "--results", folder]
            status = bench_report.main()
        with open(os.path.join(folder, "report.md")) as f:
            return status, f.read(), out.getvalue(), folder

    def test_a_report_with_one_of_each_shows_them_and_fails_for_the_miss(self):
        status, report, printed, folder = self.run_report([12.0, 12.2, 11.9, 12.1, 12.0])
        self.assertEqual(status, 1)
        for kind in ("holds", "misses", "inconclusive"):
            self.assertIn(f"| **{kind}** |", report)
        self.assertIn("5 hold, 2 miss, 1 inconclusive.", report)
        self.assertRegex(report, r"\| resnet50: peak throughput over the sweep >= 0\.95x "
                                 r"manypy-torchscript \| 34\.8 vs 41\.8 infer/s \| "
                                 r"0\.83x \[0\.8\d, 0\.8\d\], 5 rounds \| \*\*misses\*\* \|")
        self.assertIn("inconclusive", printed)
        self.assertEqual(bench_targets.main(["--results", folder, "--only", "serving"]), 1)

    def test_holds_and_inconclusive_alone_pass(self):
        status, report, _, folder = self.run_report([10.0, 10.1, 9.9, 10.0, 10.05])
        self.assertEqual(status, 0)
        self.assertIn("| **inconclusive** |", report)
        self.assertNotIn("| **misses** |", report)
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(bench_targets.main(["--results", folder]), 0)
            self.assertEqual(bench_targets.main(["--results", folder, "--only", "pool"]), 2)


if __name__ == "__main__":
    unittest.main()
