// manypy-bench-pool: the interpreter pool's headline measurement (the multipy
// paper's experiment). The same model is called from T C++ threads in three ways:
//
//   shared_interpreter  all T threads call Python in interpreter 0 (one GIL)
//   interpreters        thread t calls Python in interpreter t (no shared GIL)
//   torchscript         the model traced to TorchScript, forward() from C++
//
// for T = 1..cores, on a Python-overhead-bound model ("small") and a
// compute-bound one ("resnet18"). Every mode runs libtorch with one intra-op
// thread, so all parallelism comes from the T threads. Prints a table and
// writes a JSON list of records (see WriteJson), each with its rounds' calls/s,
// from which tests/bench/bench_targets.py judges the targets (make bench-pool).
//
// Usage: manypy-bench-pool --out PATH [--seconds S] [--models small,resnet18]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>  // torch::jit::load: the only reason for a torch/ header here
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_output.h"
#include "interpreters/pool.h"
#include "interpreters/run_python.h"
#include "interpreters/thread_policy.h"

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// CPU seconds used so far by this process (all threads) and by the whole
/// machine (all processes, from /proc/stat): their difference over a run is
/// what other processes took from it.
struct CpuSample {
  double process_s = 0;
  double machine_s = 0;
};

CpuSample SampleCpu() {
  CpuSample sample;
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  sample.process_s = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  if (FILE* f = fopen("/proc/stat", "r")) {
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                       steal = 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle,
               &iowait, &irq, &softirq, &steal) == 8) {
      sample.machine_s = static_cast<double>(user + nice + system + irq + softirq + steal) /
                         static_cast<double>(sysconf(_SC_CLK_TCK));
    }
    fclose(f);
  }
  return sample;
}

// ---------------------------------------------------------------------------
// The models, as the Python a model author would write. Executed once in each
// interpreter; build(name) returns run(x), which carries the module and an
// example input so interpreter 0 can also trace it for the torchscript mode.
constexpr const char* kModelSource = R"PY(
import torch
# Python-overhead bound: 20 tiny layers applied in a Python loop (the model
# make bench-overhead packages too).
from small_net_model import SmallNet

def build(name):
    torch.manual_seed(0)  # the same weights in every interpreter
    if name == "small":
        model, example = SmallNet(), torch.randn(1, 8)
    elif name == "resnet18":
        import torchvision
        model, example = torchvision.models.resnet18(weights=None), torch.randn(1, 3, 224, 224)
    else:
        raise ValueError(f"unknown model {name!r}")
    model.eval()

    def run(x):
        with torch.inference_mode():
            return model(x)

    run.model, run.example = model, example
    return run

def share_weights(run, state):
    """Makes the model's parameters and buffers the given tensors, so every
    interpreter runs on the same weights in memory, as manypy serves archives."""
    for name, tensor in state.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = run.model.get_submodule(owner_name) if owner_name else run.model
        if leaf in owner._parameters:
            owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
        else:
            owner._buffers[leaf] = tensor

def state_of(run):
    return dict(run.model.state_dict())

def save_traced(run, path):
    # Traced as is: no freeze / optimize_for_inference, so both sides run the same graph.
    with torch.no_grad():
        torch.jit.trace(run.model, run.example).save(path)
)PY";

struct ModelSpec {
  std::string name;
  std::vector<int64_t> input_shape;
  double seconds_factor;  ///< measured duration = --seconds x this
  int warmup_calls;       ///< per thread, before each timed run (thread state, caches)
};

const std::vector<ModelSpec>& KnownModels() {
  static const std::vector<ModelSpec> models = {
      {"small", {1, 8}, 1.0, 20},
      {"resnet18", {1, 3, 224, 224}, 2.0, 1},
  };
  return models;
}

// ---------------------------------------------------------------------------
// Timing: T threads call `call(thread_index)` in a loop for a fixed wall time.

struct RunResult {
  size_t calls = 0;
  double wall_s = 0;
  double calls_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  /// Our CPU seconds / wall seconds: ~T when T threads really ran in parallel
  /// (less in shared_interpreter, whose GIL waiters sleep).
  double cpu_cores = 0;
  /// Other processes' CPU seconds / wall seconds: cores they took from the run.
  double other_cores = 0;
  std::vector<double> latencies_us;  ///< every call's latency, sorted
};

/// Nearest-rank percentile of sorted samples (q in [0, 1]).
double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

/// Starts `threads` threads; each makes `warmup_calls` untimed calls, then all
/// start together and call until `seconds` have passed, timing every call.
/// calls_per_s divides by the wall time until the last thread's last call ends,
/// so a long final call (resnet18) is not counted for free. Rethrows the first
/// exception a thread hit.
RunResult TimedRun(size_t threads, double seconds, int warmup_calls,
                   const std::function<void(size_t)>& call) {
  std::mutex mu;
  std::condition_variable cv;
  size_t ready = 0;          // guarded by mu
  bool go = false;           // guarded by mu
  Clock::time_point start;   // written before go is set, read after
  CpuSample cpu_start;       // likewise
  std::exception_ptr error;  // guarded by mu
  std::vector<std::vector<double>> latencies_us(threads);
  std::vector<Clock::time_point> ends(threads);

  auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = e;
  };
  auto body = [&](size_t t) {
    std::vector<double>& mine = latencies_us[t];
    mine.reserve(1 << 15);  // allocate before the clock starts
    bool ok = true;
    try {
      for (int i = 0; i < warmup_calls; ++i) call(t);
    } catch (...) {
      fail(std::current_exception());
      ok = false;
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      ++ready;
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    }
    const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
    try {
      while (ok) {
        Clock::time_point t0 = Clock::now();
        if (t0 >= deadline) break;
        call(t);
        mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    } catch (...) {
      fail(std::current_exception());
    }
    ends[t] = Clock::now();
  };

  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) workers.emplace_back(body, t);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready == threads; });
    cpu_start = SampleCpu();
    start = Clock::now();
    go = true;
  }
  cv.notify_all();
  for (auto& th : workers) th.join();
  const CpuSample cpu_end = SampleCpu();
  if (error) std::rethrow_exception(error);

  std::vector<double> all;
  for (const auto& l : latencies_us) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  RunResult r;
  r.calls = all.size();
  r.wall_s = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - start).count();
  r.calls_per_s = r.wall_s > 0 ? static_cast<double>(r.calls) / r.wall_s : 0;
  r.p50_us = Percentile(all, 0.50);
  r.p99_us = Percentile(all, 0.99);
  if (r.wall_s > 0) {
    const double ours = cpu_end.process_s - cpu_start.process_s;
    r.cpu_cores = ours / r.wall_s;
    r.other_cores = std::max(0.0, (cpu_end.machine_s - cpu_start.machine_s - ours) / r.wall_s);
  }
  r.latencies_us = std::move(all);
  return r;
}

// Each configuration runs this many times, and reports all its runs pooled.
// Many short runs, interleaved across modes, beat a few long ones on a shared
// VM whose speed drifts by tens of percent for seconds at a time.
constexpr int kRepetitions = 15;
constexpr int kModes = 3;  // shared_interpreter, interpreters, torchscript

// ---------------------------------------------------------------------------
// Noise: the benchmark shares a small machine with builds and tests. A run
// during which other processes took a core measures them, not the pool, so it
// is run again once the machine is quiet; a budget bounds the time spent.

/// Other processes may use this many cores during a run and leave it valid
/// (idle daemons stay far below; /proc/stat counts in 10 ms ticks).
constexpr double kBusyOtherCores = 0.10;

bool Disturbed(const RunResult& r) { return r.other_cores > kBusyOtherCores; }

/// Waits until other processes leave the machine idle for a second, or
/// `max_seconds` pass. Returns the seconds waited.
double WaitForQuiet(double max_seconds) {
  auto start = Clock::now();
  while (SecondsSince(start) < max_seconds) {
    CpuSample a = SampleCpu();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    CpuSample b = SampleCpu();
    if ((b.machine_s - a.machine_s) - (b.process_s - a.process_s) < kBusyOtherCores) break;
  }
  return SecondsSince(start);
}

/// Time allowed for re-runs and waits over the whole benchmark.
class RetryBudget {
 public:
  explicit RetryBudget(double seconds) : left_s_(seconds) {}
  /// True (after waiting for quiet) if a disturbed run of `run_seconds` may run again.
  bool WaitToRetry(const RunResult& r, double run_seconds) {
    if (!Disturbed(r) || left_s_ < run_seconds) return false;
    left_s_ -= WaitForQuiet(std::min(20.0, left_s_ - run_seconds)) + run_seconds;
    return true;
  }

 private:
  double left_s_;
};

/// All runs of one configuration taken together: calls over summed wall time,
/// percentiles over every call. The runs of all configurations alternate in
/// short windows, so each configuration samples the machine's fast and slow
/// spells alike; pooling then compares them over the same mix.
RunResult PooledRuns(const std::vector<RunResult>& runs) {
  RunResult pooled;
  double cpu_s = 0, other_s = 0;
  for (const RunResult& r : runs) {
    pooled.calls += r.calls;
    pooled.wall_s += r.wall_s;
    cpu_s += r.cpu_cores * r.wall_s;
    other_s += r.other_cores * r.wall_s;
    pooled.latencies_us.insert(pooled.latencies_us.end(), r.latencies_us.begin(),
                               r.latencies_us.end());
  }
  std::sort(pooled.latencies_us.begin(), pooled.latencies_us.end());
  if (pooled.wall_s > 0) {
    pooled.calls_per_s = static_cast<double>(pooled.calls) / pooled.wall_s;
    pooled.cpu_cores = cpu_s / pooled.wall_s;
    pooled.other_cores = other_s / pooled.wall_s;
  }
  pooled.p50_us = Percentile(pooled.latencies_us, 0.50);
  pooled.p99_us = Percentile(pooled.latencies_us, 0.99);
  return pooled;
}

// ---------------------------------------------------------------------------
// Output.

struct Record {
  std::string model;
  std::string mode;
  size_t threads;
  size_t interpreters;  ///< interpreters in use; 0 for torchscript
  RunResult result;
  std::vector<double> rounds_calls_per_s;  ///< each repetition's run, in the order run
};

void PrintTable(const std::vector<Record>& records) {
  // cpu / others: cores this process / other processes kept busy during the run.
  printf("%-10s %-20s %7s %12s %12s %10s %10s %8s %5s %6s\n", "model", "mode", "threads",
         "interpreters", "calls/s", "p50 us", "p99 us", "calls", "cpu", "others");
  for (const auto& r : records) {
    printf("%-10s %-20s %7zu %12zu %12.1f %10.1f %10.1f %8zu %5.2f %6.2f\n", r.model.c_str(),
           r.mode.c_str(), r.threads, r.interpreters, r.result.calls_per_s, r.result.p50_us,
           r.result.p99_us, r.result.calls, r.result.cpu_cores, r.result.other_cores);
  }
}

/// The ratios the pool is meant to deliver, for a reader of the table.
void PrintRatios(const std::vector<Record>& records) {
  auto find = [&](const std::string& model, const std::string& mode, size_t t) -> const Record* {
    for (const auto& r : records) {
      if (r.model == model && r.mode == mode && r.threads == t) return &r;
    }
    return nullptr;
  };
  for (const auto& r : records) {
    if (r.mode != "interpreters") continue;
    const Record* one = find(r.model, "interpreters", 1);
    const Record* shared = find(r.model, "shared_interpreter", r.threads);
    const Record* ts = find(r.model, "torchscript", r.threads);
    printf("%s T=%zu: interpreters vs T=1 %.2fx", r.model.c_str(), r.threads,
           one ? r.result.calls_per_s / one->result.calls_per_s : 0.0);
    if (shared) printf(", vs shared_interpreter %.2fx", r.result.calls_per_s / shared->result.calls_per_s);
    if (ts) printf(", vs torchscript %.2fx", r.result.calls_per_s / ts->result.calls_per_s);
    printf("\n");
  }
}

/// Names the reported runs that other processes disturbed even after re-runs.
void WarnAboutBusyMachine(const std::vector<Record>& records) {
  for (const auto& r : records) {
    if (Disturbed(r.result)) {
      fprintf(stderr,
              "WARNING: %s %s T=%zu: other processes kept %.2f cores busy during the run; "
              "rerun when the machine is idle\n",
              r.model.c_str(), r.mode.c_str(), r.threads, r.result.other_cores);
    }
  }
}

bool WriteJson(const std::string& path, const std::vector<Record>& records) {
  FILE* f = manypy::bench::OpenOutputFile(path);
  if (f == nullptr) return false;
  fprintf(f, "[\n");
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    // Names are our own identifiers: nothing to escape.
    fprintf(f,
            "  {\"model\": \"%s\", \"mode\": \"%s\", \"threads\": %zu, \"interpreters\": %zu, "
            "\"calls_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, "
            "\"rounds_calls_per_s\": [",
            r.model.c_str(), r.mode.c_str(), r.threads, r.interpreters, r.result.calls_per_s,
            r.result.p50_us, r.result.p99_us);
    for (size_t k = 0; k < r.rounds_calls_per_s.size(); ++k) {
      fprintf(f, "%s%.1f", k ? ", " : "", r.rounds_calls_per_s[k]);
    }
    fprintf(f, "]}%s\n", i + 1 < records.size() ? "," : "");
  }
  fprintf(f, "]\n");
  return fclose(f) == 0;
}

// ---------------------------------------------------------------------------
// Flags.

struct Flags {
  std::string out;
  double seconds = 0.5;  ///< one run of small; resnet18's runs last twice this
  std::vector<const ModelSpec*> models;
};

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr,
          "manypy-bench-pool: %s\n"
          "usage: manypy-bench-pool --out PATH [--seconds S] [--models small,resnet18]\n"
          "  --seconds S  measured seconds per run for small (resnet18: 2 S); default 2\n",
          why.c_str());
  exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  std::string models = "small,resnet18";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--out") {
      flags.out = value();
    } else if (arg == "--seconds") {
      std::string v = value();
      char* end = nullptr;
      flags.seconds = strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(flags.seconds > 0)) Usage("bad --seconds " + v);
    } else if (arg == "--models") {
      models = value();
    } else {
      Usage("unknown flag " + arg);
    }
  }
  if (flags.out.empty()) Usage("--out is required");
  size_t pos = 0;
  while (pos <= models.size()) {
    size_t comma = std::min(models.find(',', pos), models.size());
    std::string name = models.substr(pos, comma - pos);
    auto it = std::find_if(KnownModels().begin(), KnownModels().end(),
                           [&](const ModelSpec& m) { return m.name == name; });
    if (it == KnownModels().end()) Usage("unknown model '" + name + "' (known: small, resnet18)");
    flags.models.push_back(&*it);
    pos = comma + 1;
  }
  return flags;
}

// ---------------------------------------------------------------------------
// One model in all three modes.

/// Traces the model inside interpreter 0 and loads the result in C++.
torch::jit::Module LoadTraced(manypy::InterpreterPool& pool, const manypy::ReplicatedObject& run,
                              const std::string& name) {
  auto path = std::filesystem::temp_directory_path() /
              ("manypy-bench-" + std::to_string(getpid()) + "-" + name + ".pt");
  {
    manypy::InterpreterSession s = pool.AcquireAt(0);
    s.Eval("save_traced").CallWith({run.In(s), s.FromValue(path.string())});
  }
  torch::jit::Module module = torch::jit::load(path.string());
  std::filesystem::remove(path);
  module.eval();
  return module;
}

void BenchModel(manypy::InterpreterPool& pool, const ModelSpec& spec, double base_seconds,
                size_t cores, RetryBudget* retries, std::vector<Record>* records) {
  auto t0 = Clock::now();
  // Interpreter 0 builds the weights; the others run on the very same tensors
  // (one copy per process, as the server does with an archive's storages), so
  // no mode gets more cache pressure than another.
  manypy::Value shared_state;
  manypy::ReplicatedObject run = pool.Replicate([&](manypy::InterpreterSession& s) {
    s.Exec(kModelSource);
    manypy::Obj built = s.Eval("build").Call({spec.name});
    if (s.interpreter_index() != 0) {
      s.Eval("share_weights").CallWith({built, s.FromValue(shared_state)});
    }
    return built;
  });
  {
    manypy::InterpreterSession s = pool.AcquireAt(0);
    manypy::Obj built = run.In(s);  // runs the model source first
    shared_state = s.Eval("state_of").CallWith({built}).ToValue();
  }
  // Build the model in every interpreter now, so no timed run pays for it.
  for (size_t i = 0; i < pool.size(); ++i) {
    manypy::InterpreterSession s = pool.AcquireAt(i);
    run.In(s);
  }
  torch::jit::Module traced = LoadTraced(pool, run, spec.name);
  fprintf(stderr, "[%s] built in %zu interpreters and traced in %.1f s\n", spec.name.c_str(),
          pool.size(), SecondsSince(t0));

  // One input per thread (each thread owns its tensor, as a server request would).
  std::vector<manypy::Value> inputs;
  std::vector<c10::IValue> ivalues;
  at::manual_seed(0);
  for (size_t t = 0; t < cores; ++t) {
    at::Tensor x = at::randn(spec.input_shape);
    inputs.emplace_back(x);
    ivalues.emplace_back(x.clone());
  }

  auto python_call = [&](bool shared) {
    return [&, shared](size_t t) {
      manypy::InterpreterSession s = pool.AcquireAt(shared ? 0 : t);
      manypy::Value out = run.In(s).Call({inputs[t]}).ToValue();
    };
  };
  auto torchscript_call = [&](size_t t) {
    c10::InferenceMode guard;  // what the Python side's torch.inference_mode() does
    at::Tensor out = traced.forward({ivalues[t]}).toTensor();
  };

  // Both sides must compute the same thing, or the comparison means nothing.
  {
    at::Tensor py;
    {
      manypy::InterpreterSession s = pool.AcquireAt(0);
      py = run.In(s).Call({inputs[0]}).ToValue().to_tensor();
    }
    c10::InferenceMode guard;
    at::Tensor ts = traced.forward({ivalues[0]}).toTensor();
    if (!at::allclose(py, ts, 1e-4, 1e-5)) {
      fprintf(stderr, "[%s] WARNING: TorchScript output differs from Python's (max abs diff %g)\n",
              spec.name.c_str(), (py - ts).abs().max().item<double>());
    }
  }

  enum class Uses { kNoInterpreter, kOneInterpreter, kOnePerThread };
  struct Mode {
    const char* name;
    std::function<void(size_t)> call;
    Uses uses;
  };
  const std::vector<Mode> modes = {
      {"shared_interpreter", python_call(true), Uses::kOneInterpreter},
      {"interpreters", python_call(false), Uses::kOnePerThread},
      {"torchscript", torchscript_call, Uses::kNoInterpreter},
  };
  const double seconds = base_seconds * spec.seconds_factor;
  const double warmup_seconds = seconds / 4;

  // Every (thread count, mode) pair is one configuration.
  struct Config {
    size_t threads;
    const Mode* mode;
    std::vector<RunResult> runs;
  };
  std::vector<Config> configs;
  for (size_t threads = 1; threads <= cores; ++threads) {
    for (const Mode& mode : modes) configs.push_back({threads, &mode, {}});
  }
  // Warm each configuration first, untimed: TorchScript's profiling executor
  // specializes on its first calls, allocators and caches settle.
  for (const Config& c : configs) {
    TimedRun(c.threads, warmup_seconds, spec.warmup_calls, c.mode->call);
  }
  // Each repetition runs every configuration once, so a slow phase of the
  // (shared, virtual) machine lands on all of them alike rather than on one
  // mode or thread count; each configuration then reports its runs pooled,
  // and each repetition is one paired round for the targets: forward, then
  // backward, so that which side of a pair runs first alternates.
  // A run that other processes disturbed is run again (at most twice more,
  // within the budget); the last attempt counts.
  for (int rep = 0; rep < kRepetitions; ++rep) {
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[rep % 2 == 0 ? k : configs.size() - 1 - k];
      RunResult r;
      for (int attempt = 0; attempt < 3; ++attempt) {
        if (attempt > 0 && !retries->WaitToRetry(r, seconds)) break;
        r = TimedRun(c.threads, seconds, spec.warmup_calls, c.mode->call);
        fprintf(stderr,
                "[%s] %-18s T=%zu rep %d/%d: %9.1f calls/s  p50 %8.1f us  p99 %8.1f us  "
                "cpu %.2f  others %.2f%s\n",
                spec.name.c_str(), c.mode->name, c.threads, rep + 1, kRepetitions, r.calls_per_s,
                r.p50_us, r.p99_us, r.cpu_cores, r.other_cores, Disturbed(r) ? "  (disturbed)" : "");
      }
      c.runs.push_back(r);
    }
  }
  for (const Config& c : configs) {
    size_t used = c.mode->uses == Uses::kOnePerThread    ? c.threads
                  : c.mode->uses == Uses::kOneInterpreter ? 1
                                                          : 0;
    std::vector<double> rounds;
    for (const RunResult& r : c.runs) rounds.push_back(r.calls_per_s);
    records->push_back({spec.name, c.mode->name, c.threads, used, PooledRuns(c.runs), rounds});
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  auto start = Clock::now();
  const size_t cores = manypy::HardwareCores();

  manypy::PoolOptions options;
  options.interpreters = cores;  // one per thread in the "interpreters" mode
  options.extra_sys_path = {MANYPY_BENCH_PYTHON_DIR};  // small_net_model.py
  options.intra_op_threads = 1;  // parallelism comes from threads, not intra-op (all modes)
  auto pool = manypy::InterpreterPool::Create(options);
  if (!pool.ok()) {
    fprintf(stderr, "manypy-bench-pool: the interpreter pool failed to start: %s\n",
            pool.status().ToString().c_str());
    return 1;
  }
  fprintf(stderr, "started %zu interpreters in %.1f s; libtorch intra-op threads: %d\n",
          (*pool)->size(), SecondsSince(start), at::get_num_threads());

  std::vector<Record> records;
  // Re-runs may take up to twice the planned measuring time (~110 s at the
  // defaults on 2 cores), so even a busy machine finishes well within 10 minutes.
  double planned_s = 0;
  for (const ModelSpec* spec : flags.models) {
    planned_s += kRepetitions * kModes * static_cast<double>(cores) * flags.seconds *
                 spec->seconds_factor;
  }
  RetryBudget retries(2 * planned_s);
  manypy::Status benched = manypy::RunPython(
      [&] {
        for (const ModelSpec* spec : flags.models) {
          BenchModel(**pool, *spec, flags.seconds, cores, &retries, &records);
        }
      },
      [](const manypy::PythonError& e) {
        return manypy::Internal(std::string(e.what()) + "\n" + e.traceback());
      });
  if (!benched.ok()) {
    fprintf(stderr, "manypy-bench-pool: %s", benched.message().c_str());
    return 1;
  }

  PrintTable(records);
  PrintRatios(records);
  WarnAboutBusyMachine(records);
  if (!WriteJson(flags.out, records)) {
    fprintf(stderr, "manypy-bench-pool: cannot write %s\n", flags.out.c_str());
    return 1;
  }
  fprintf(stderr, "wrote %s (%zu records) in %.0f s total\n", flags.out.c_str(), records.size(),
          SecondsSince(start));
  return 0;
}
