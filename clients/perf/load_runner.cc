#include "clients/perf/load_runner.h"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <random>
#include <thread>

namespace manypy::perf {
namespace {

void SleepSeconds(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace

void LoadRunner::SendOne(const Sender& send, Recorder* recorder, Clock::time_point start) {
  SendFigures figures;
  Status status = send(&figures);
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  RequestRecord record{ns, StatusCodeName(status.code())};
  if (figures.responses >= 0) {
    record.responses = figures.responses;
    record.first_response_ns =
        figures.responses > 0
            ? std::chrono::duration_cast<std::chrono::nanoseconds>(figures.first_response - start).count()
            : ns;
  }
  if (status.ok()) {
    recorder->Add(record);
  } else {
    recorder->AddFailure(record, status.message());
  }
}

StepSummary LoadRunner::Measure(Recorder* recorder, const std::string& label, int concurrency,
                                double rate) const {
  SleepSeconds(options_.warmup_seconds);
  recorder->Take();  // warm-up traffic is not measured
  // A driver that samples the server (CPU, memory) around the measured windows
  // alone, not the warm-up, starts at this line (tests/bench/bench_serving.py).
  fprintf(stderr, "[manypy-perf] %s: warm-up done, measuring\n", label.c_str());
  std::vector<RecordedWindow> windows;
  std::vector<double> seconds, rates;
  bool stable = false;
  while (static_cast<int>(windows.size()) < options_.max_windows && !stable) {
    Clock::time_point begin = Clock::now();
    SleepSeconds(options_.window_seconds);
    windows.push_back(recorder->Take());
    seconds.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    StepSummary w = Summarize({&windows.back()}, seconds.back(), options_.batch_size);
    w.concurrency = concurrency;
    w.request_rate = rate;
    w.windows = static_cast<int>(windows.size());
    rates.push_back(w.requests_per_s);
    // --stability-percent 0 measures every one of --max-windows.
    if (rates.size() >= 2 && options_.stability_percent > 0) {
      double a = rates[rates.size() - 2], b = rates.back();
      double top = std::max(a, b);
      stable = top == 0 || std::fabs(a - b) / top * 100.0 <= options_.stability_percent;
    }
    w.stable = stable;
    std::string first_error;
    if (!w.error_messages.empty()) {
      const auto& [code, message] = *w.error_messages.begin();
      first_error = " (" + code + ": " + message + ")";
    }
    fprintf(stderr,
            "[manypy-perf] %s window %zu: %.1f infer/s, p50 %.2f ms, p99 %.2f ms, %lld errors%s%s\n",
            label.c_str(), windows.size(), w.infer_per_s, w.p50_ms, w.p99_ms,
            static_cast<long long>(w.errors), first_error.c_str(), stable ? " (stable)" : "");
    if (observer_) observer_(w);
  }
  // Report the last two windows together (the agreeing pair when stable).
  std::vector<const RecordedWindow*> last;
  double total_seconds = 0;
  for (size_t i = windows.size() >= 2 ? windows.size() - 2 : 0; i < windows.size(); ++i) {
    last.push_back(&windows[i]);
    total_seconds += seconds[i];
  }
  StepSummary s = Summarize(last, total_seconds, options_.batch_size);
  s.concurrency = concurrency;
  s.request_rate = rate;
  s.windows = static_cast<int>(windows.size());
  s.stable = stable;
  return s;
}

std::vector<Sender> LoadRunner::MakeSenders(int count) const {
  std::vector<Sender> made;
  for (int i = 0; i < count; ++i) made.push_back(senders_(i));
  return made;
}

StepSummary LoadRunner::RunClosedLoop(int concurrency) {
  Recorder recorder;
  std::atomic<bool> stop{false};
  if (driver_.run) {
    Status connected = driver_.connect(concurrency);
    std::thread driver;
    if (connected.ok()) {
      driver = std::thread([&] { driver_.run(&recorder, stop); });
    } else {
      recorder.AddFailure({0, StatusCodeName(connected.code())}, connected.message());
    }
    StepSummary s = Measure(&recorder, "concurrency " + std::to_string(concurrency), concurrency, 0);
    stop = true;
    if (driver.joinable()) driver.join();
    return s;
  }
  std::vector<Sender> made = MakeSenders(concurrency);
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&, send = std::move(made[i])] {
      while (!stop.load(std::memory_order_relaxed)) SendOne(send, &recorder, Clock::now());
    });
  }
  StepSummary s = Measure(&recorder, "concurrency " + std::to_string(concurrency), concurrency, 0);
  stop = true;
  for (auto& t : threads) t.join();
  return s;
}

StepSummary LoadRunner::RunOpenLoop(double rate) {
  Recorder recorder;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Clock::time_point> due;  // scheduled send times; guarded by mutex
  bool stop = false;                  // guarded by mutex
  std::vector<Sender> made = MakeSenders(options_.max_threads);
  std::vector<std::thread> senders;
  for (int i = 0; i < options_.max_threads; ++i) {
    senders.emplace_back([&, send = std::move(made[i])] {
      for (;;) {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return stop || !due.empty(); });
        if (stop) return;
        Clock::time_point scheduled = due.front();
        due.pop_front();
        lock.unlock();
        SendOne(send, &recorder, scheduled);
      }
    });
  }
  std::atomic<bool> done{false};
  std::thread dispatcher([&] {
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> gap(rate);
    Clock::time_point next = Clock::now();
    while (!done.load()) {
      std::this_thread::sleep_until(next);
      {
        std::lock_guard<std::mutex> lock(mutex);
        due.push_back(next);
      }
      ready.notify_one();
      double seconds = options_.poisson ? gap(rng) : 1.0 / rate;
      next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }
  });
  char label[64];
  snprintf(label, sizeof(label), "rate %g/s", rate);
  StepSummary s = Measure(&recorder, label, options_.max_threads, rate);
  done = true;
  dispatcher.join();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  ready.notify_all();
  for (auto& t : senders) t.join();
  return s;
}

}  // namespace manypy::perf
