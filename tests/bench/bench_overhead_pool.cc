// manypy-bench-overhead-pool: the pool side of `make bench-overhead` (the
// driver, tests/bench/bench_overhead.py, measures the server side and
// alternates the two). It loads one archive in a pool of N interpreters, as
// manypy-server does (PythonModel::Load, the server's intra-op thread
// default), and then, for each line "SECONDS" read from stdin, runs the model
// from N threads, thread i on interpreter i, calling PythonModel::Run (the
// very call a server worker makes, with an interrupt hook as it has, without
// the request path around it) for that long; it answers one JSON line per
// window:
//
//   {"calls": C, "seconds": S, "cpu_seconds": T}
//
// cpu_seconds is this process's user + system CPU over the window
// (getrusage), so calls / cpu_seconds is comparable with the server's
// inferences per CPU second. End of input ends the program. Single-threaded
// apart from each window's N callers, which share nothing but a stop flag.
//
// Usage: manypy-bench-overhead-pool --archive PATH --interpreters N
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "interpreters/pool.h"
#include "interpreters/thread_policy.h"
#include "server/inference/executable.h"
#include "server/lifecycle/python_model.h"
#include "server/lifecycle/warmup.h"

namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr, "manypy-bench-overhead-pool: %s\nusage: manypy-bench-overhead-pool --archive PATH "
          "--interpreters N\n", why.c_str());
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string archive;
  size_t interpreters = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    if (flag == "--archive") {
      archive = argv[++i];
    } else if (flag == "--interpreters") {
      interpreters = static_cast<size_t>(std::atoi(argv[++i]));
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (archive.empty() || interpreters == 0) Usage("--archive and --interpreters N > 0 are required");

  try {
    manypy::PoolOptions options;
    options.interpreters = interpreters;
    options.intra_op_threads = manypy::DefaultIntraOpThreads(interpreters);  // the server's default
    auto pool = manypy::InterpreterPool::Create(options);
    if (!pool.ok()) Usage("the pool failed to start: " + pool.status().ToString());
    auto model = manypy::PythonModel::Load(pool->get(), archive);
    if (!model.ok()) Usage(model.status().ToString());
    const std::vector<manypy::Value> inputs = manypy::SignatureInputs((*model)->manifest());
    for (size_t slot = 0; slot < interpreters; ++slot) {  // warm, as the server's warm-up does
      manypy::InterruptHook hook;
      for (int n = 0; n < 50; ++n) {
        auto out = (*model)->Run(slot, inputs, &hook);
        if (!out.ok()) Usage("warm-up: " + out.status().ToString());
      }
    }
    printf("ready\n");
    fflush(stdout);

    std::string line;
    while (std::getline(std::cin, line)) {
      double seconds = std::atof(line.c_str());
      if (seconds <= 0) Usage("a window is a number of seconds > 0, got '" + line + "'");
      std::atomic<bool> stop{false};
      std::atomic<bool> failed{false};
      std::vector<long> calls(interpreters, 0);
      double cpu_start = CpuSeconds();
      auto start = Clock::now();
      std::vector<std::thread> threads;
      for (size_t slot = 0; slot < interpreters; ++slot) {
        threads.emplace_back([&, slot] {
          // Armed and disarmed around each call, as a server worker's is.
          manypy::InterruptHook hook;
          while (!stop.load(std::memory_order_relaxed)) {
            if (!(*model)->Run(slot, inputs, &hook).ok()) failed = true;
            ++calls[slot];
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      for (auto& t : threads) t.join();
      double wall = std::chrono::duration<double>(Clock::now() - start).count();
      double cpu = CpuSeconds() - cpu_start;
      if (failed) Usage("a call failed during the window");
      long total = 0;
      for (long c : calls) total += c;
      printf("{\"calls\": %ld, \"seconds\": %.6f, \"cpu_seconds\": %.6f}\n", total, wall, cpu);
      fflush(stdout);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "manypy-bench-overhead-pool: %s\n", e.what());
    return 1;
  }
  return 0;
}
