#include "server/metrics/scrape_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <tuple>

#ifndef MANYPY_VERSION
#define MANYPY_VERSION "unknown"
#endif
#ifndef MANYPY_TORCH_VERSION
#define MANYPY_TORCH_VERSION "unknown"
#endif
#ifndef MANYPY_PYTHON_VERSION
#define MANYPY_PYTHON_VERSION "unknown"
#endif

namespace manypy {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void AddValue(MetricFamily* f, double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

size_t OpenFds() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(dir);
    if (n > 0) --n;  // the directory stream itself
  }
  return n;
}

// /proc/self/stat fields after the command: utime stime (14, 15), starttime
// (22), vsize (23), rss pages (24).
void AddProcess(std::vector<MetricFamily>* out) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(stat.substr(close + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s;) f.push_back(s);
  if (f.size() < 22) return;  // f[0] is field 3 (state)
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  double vsize = std::stod(f[20]);
  double rss = std::stod(f[21]) * page;
  double boot = 0;
  std::ifstream kstat("/proc/stat");
  for (std::string line; std::getline(kstat, line);) {
    if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
  }
  double start = boot + std::stod(f[19]) / ticks;

  auto c = Family("process_cpu_seconds_total", "User and system CPU time of the process",
                  MetricType::Counter);
  AddValue(&c, cpu);
  out->push_back(std::move(c));
  auto r = Family("process_resident_memory_bytes", "Resident memory of the process",
                  MetricType::Gauge);
  AddValue(&r, rss);
  out->push_back(std::move(r));
  auto v = Family("process_virtual_memory_bytes", "Virtual memory of the process",
                  MetricType::Gauge);
  AddValue(&v, vsize);
  out->push_back(std::move(v));
  auto s = Family("process_start_time_seconds", "Start of the process since the Unix epoch",
                  MetricType::Gauge);
  AddValue(&s, start);
  out->push_back(std::move(s));
  auto fds = Family("process_open_fds", "Open file descriptors", MetricType::Gauge);
  AddValue(&fds, static_cast<double>(OpenFds()));
  out->push_back(std::move(fds));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    auto max = Family("process_max_fds", "Limit of open file descriptors", MetricType::Gauge);
    AddValue(&max, static_cast<double>(limit.rlim_cur));
    out->push_back(std::move(max));
  }
}

// The server's response cache as a whole (its hits and misses are per model,
// counted as requests finish: prometheus_observer.cc).
void AddResponseCache(const ResponseCache& cache, std::vector<MetricFamily>* out) {
  const ResponseCache::Totals t = cache.totals();
  for (auto [name, help, type, value] :
       {std::tuple{"manypy_cache_capacity_bytes", "Size of the response cache (--response-cache-bytes)",
                   MetricType::Gauge, static_cast<double>(t.capacity_bytes)},
        std::tuple{"manypy_cache_bytes", "Bytes the response cache holds now", MetricType::Gauge,
                   static_cast<double>(t.bytes)},
        std::tuple{"manypy_cache_entries", "Responses the response cache holds now",
                   MetricType::Gauge, static_cast<double>(t.entries)},
        std::tuple{"manypy_cache_evictions_total",
                   "Responses evicted (least recently used) to make room", MetricType::Counter,
                   static_cast<double>(t.evictions)}}) {
    auto f = Family(name, help, type);
    AddValue(&f, value);
    out->push_back(std::move(f));
  }
}

}  // namespace

std::vector<MetricFamily> ScrapeCollector::Collect() const {
  std::vector<MetricFamily> out;
  auto queued = Family("manypy_queued_requests", "Requests waiting in the model version's queue",
                       MetricType::Gauge);
  auto running = Family("manypy_in_flight_executions",
                        "Calls of the model version running now", MetricType::Gauge);
  auto streams = Family("manypy_active_streams",
                        "Streaming requests of the model version running now (in running "
                        "batches or alone)", MetricType::Gauge);
  for (const auto& load : dispatcher_->Loads()) {
    std::vector<ClientMetric::Label> labels{{"model", load.name},
                                            {"version", std::to_string(load.version)}};
    AddValue(&queued, static_cast<double>(load.queued), labels);
    AddValue(&running, static_cast<double>(load.running), labels);
    AddValue(&streams, static_cast<double>(load.streams), labels);
  }
  out.push_back(std::move(queued));
  out.push_back(std::move(running));
  out.push_back(std::move(streams));
  auto interpreters = Family("manypy_interpreters", "Interpreters in the pool", MetricType::Gauge);
  AddValue(&interpreters, static_cast<double>(dispatcher_->slots()));
  out.push_back(std::move(interpreters));
  auto build = Family("manypy_build_info", "Always 1; labels: manypy, libtorch and Python versions",
                      MetricType::Gauge);
  AddValue(&build, 1,
           {{"libtorch", MANYPY_TORCH_VERSION},
            {"python", MANYPY_PYTHON_VERSION},
            {"version", MANYPY_VERSION}});
  out.push_back(std::move(build));
  if (response_cache_ != nullptr) AddResponseCache(*response_cache_, &out);
  AddProcess(&out);
  return out;
}

}  // namespace manypy
