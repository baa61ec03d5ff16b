// manypy-bench-model-call: one archive of any platform (Python, TorchScript,
// AOTInductor) loaded as manypy-server loads it -- a pool of N interpreters
// with the server's intra-op thread default, the archive's platform loader
// (PythonModel::Load, else LoadArchive: TorchScriptModel, AotiModel) -- and
// called from N threads, thread i on slot i, with the very call a server
// worker makes (Executable::Run), without the request path around it. For
// each line "SECONDS" read from stdin it runs that long and answers one JSON
// line:
//
//   {"calls": C, "seconds": S, "cpu_seconds": T, "peak_rss_bytes": B}
//
// peak_rss_bytes is the process's VmHWM so far. End of input ends the
// program. tests/bench/bench_aoti.py alternates several of these processes
// (one per platform, so each one's memory is its own).
//
// Usage: manypy-bench-model-call --archive PATH --threads N [--intra-op-threads M]
// (M: libtorch's intra-op threads; default the server's, max(1, cores / N))
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "interpreters/pool.h"
#include "interpreters/thread_policy.h"
#include "package_format/archive.h"
#include "server/inference/executable.h"
#include "server/lifecycle/archive_loader.h"
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

long long PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long long kib = 0;
  while (status >> key) {
    if (key == "VmHWM:") {
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  return -1;
}

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr, "manypy-bench-model-call: %s\nusage: manypy-bench-model-call --archive PATH "
          "--threads N [--intra-op-threads M]\n", why.c_str());
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string archive;
  size_t threads = 0;
  int intra_op_threads = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    if (flag == "--archive") {
      archive = argv[++i];
    } else if (flag == "--threads") {
      threads = static_cast<size_t>(std::atoi(argv[++i]));
    } else if (flag == "--intra-op-threads") {
      intra_op_threads = std::atoi(argv[++i]);
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (archive.empty() || threads == 0) Usage("--archive and --threads N > 0 are required");

  try {
    // The server's pool whatever the platform: a server serving only compiled
    // models still starts its interpreters, and they are part of its memory.
    manypy::PoolOptions options;
    options.interpreters = threads;
    options.intra_op_threads = intra_op_threads > 0 ? intra_op_threads
                                                    : manypy::DefaultIntraOpThreads(threads);
    auto pool = manypy::InterpreterPool::Create(options);
    if (!pool.ok()) Usage("the pool failed to start: " + pool.status().ToString());
    auto opened = manypy::PackageArchive::Open(archive);
    if (!opened.ok()) Usage(opened.status().ToString());
    const bool python = (*opened)->manifest().platform == manypy::kPythonPlatform;
    opened->reset();
    std::shared_ptr<manypy::Executable> model;
    manypy::Manifest manifest;
    if (python) {
      auto loaded = manypy::PythonModel::Load(pool->get(), archive);  // every interpreter
      if (!loaded.ok()) Usage(loaded.status().ToString());
      manifest = (*loaded)->manifest();
      model = std::move(*loaded);
    } else {
      auto loaded = manypy::LoadArchive(pool->get(), archive, &manifest);
      if (!loaded.ok()) Usage(loaded.status().ToString());
      model = std::move(*loaded);
    }
    const std::vector<manypy::Value> inputs = manypy::SignatureInputs(manifest);
    // Warm every slot at once, as concurrent requests would: an AOTInductor
    // model makes its second runner here, not in a measured window.
    std::vector<std::thread> warmers;
    std::atomic<bool> warm_failed{false};
    for (size_t slot = 0; slot < threads; ++slot) {
      warmers.emplace_back([&, slot] {
        manypy::InterruptHook hook;
        for (int n = 0; n < 20; ++n) {
          if (!model->Run(slot, inputs, &hook).ok()) warm_failed = true;
        }
      });
    }
    for (auto& t : warmers) t.join();
    if (warm_failed) Usage("a warm-up call failed");
    printf("ready\n");
    fflush(stdout);

    std::string line;
    while (std::getline(std::cin, line)) {
      double seconds = std::atof(line.c_str());
      if (seconds <= 0) Usage("a window is a number of seconds > 0, got '" + line + "'");
      std::atomic<bool> stop{false};
      std::atomic<bool> failed{false};
      std::vector<long> calls(threads, 0);
      double cpu_start = CpuSeconds();
      auto start = Clock::now();
      std::vector<std::thread> callers;
      for (size_t slot = 0; slot < threads; ++slot) {
        callers.emplace_back([&, slot] {
          manypy::InterruptHook hook;
          while (!stop.load(std::memory_order_relaxed)) {
            if (!model->Run(slot, inputs, &hook).ok()) failed = true;
            ++calls[slot];
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      for (auto& t : callers) t.join();
      double wall = std::chrono::duration<double>(Clock::now() - start).count();
      double cpu = CpuSeconds() - cpu_start;
      if (failed) Usage("a call failed during the window");
      long total = 0;
      for (long c : calls) total += c;
      printf("{\"calls\": %ld, \"seconds\": %.6f, \"cpu_seconds\": %.6f, \"peak_rss_bytes\": %lld}\n",
             total, wall, cpu, PeakRssBytes());
      fflush(stdout);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "manypy-bench-model-call: %s\n", e.what());
    return 1;
  }
  return 0;
}
