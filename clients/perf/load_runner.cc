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
  Status status = send();
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  recorder->Add({ns, StatusCodeName(status.code())});
}

StepSummary LoadRunner::Measure(Recorder* recorder, const std::string& label) const {
  SleepSeconds(options_.warmup_seconds);
  recorder->Take();  // warm-up traffic is not measured
  std::vector<std::vector<RequestRecord>> windows;
  std::vector<double> seconds, rates;
  bool stable = false;
  while (static_cast<int>(windows.size()) < options_.max_windows && !stable) {
    Clock::time_point begin = Clock::now();
    SleepSeconds(options_.window_seconds);
    windows.push_back(recorder->Take());
    seconds.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    StepSummary w = Summarize(windows.back(), seconds.back(), options_.batch_size);
    rates.push_back(w.requests_per_s);
    if (rates.size() >= 2) {
      double a = rates[rates.size() - 2], b = rates.back();
      double top = std::max(a, b);
      stable = top == 0 || std::fabs(a - b) / top * 100.0 <= options_.stability_percent;
    }
    fprintf(stderr,
            "[manypy-perf] %s window %zu: %.1f infer/s, p50 %.2f ms, p99 %.2f ms, %lld errors%s\n",
            label.c_str(), windows.size(), w.infer_per_s, w.p50_ms, w.p99_ms,
            static_cast<long long>(w.errors), stable ? " (stable)" : "");
  }
  // Report the last two windows together (the agreeing pair when stable).
  std::vector<RequestRecord> last;
  double total_seconds = 0;
  for (size_t i = windows.size() >= 2 ? windows.size() - 2 : 0; i < windows.size(); ++i) {
    last.insert(last.end(), windows[i].begin(), windows[i].end());
    total_seconds += seconds[i];
  }
  StepSummary s = Summarize(last, total_seconds, options_.batch_size);
  s.windows = static_cast<int>(windows.size());
  s.stable = stable;
  return s;
}

StepSummary LoadRunner::RunClosedLoop(int concurrency) {
  Recorder recorder;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&] {
      Sender send = senders_();
      while (!stop.load(std::memory_order_relaxed)) SendOne(send, &recorder, Clock::now());
    });
  }
  StepSummary s = Measure(&recorder, "concurrency " + std::to_string(concurrency));
  stop = true;
  for (auto& t : threads) t.join();
  s.concurrency = concurrency;
  return s;
}

StepSummary LoadRunner::RunOpenLoop(double rate) {
  Recorder recorder;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Clock::time_point> due;  // scheduled send times; guarded by mutex
  bool stop = false;                  // guarded by mutex
  std::vector<std::thread> senders;
  for (int i = 0; i < options_.max_threads; ++i) {
    senders.emplace_back([&] {
      Sender send = senders_();
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
  StepSummary s = Measure(&recorder, label);
  done = true;
  dispatcher.join();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  ready.notify_all();
  for (auto& t : senders) t.join();
  s.concurrency = options_.max_threads;
  s.request_rate = rate;
  return s;
}

}  // namespace manypy::perf
