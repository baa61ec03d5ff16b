#include "server/metrics/prometheus_observer.h"

#include <array>
#include <mutex>

namespace manypy {
namespace {

using prometheus::Labels;

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5,     10,
                                              30,     60};
  return buckets;
}

const std::vector<double>& BatchBuckets() {
  static const std::vector<double> buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  return buckets;
}

constexpr std::array<const char*, 9> kOutcomes = {
    "success",           "invalid_argument",  "not_found",   "unavailable", "resource_exhausted",
    "deadline_exceeded", "model_error",       "cancelled",   "other"};

size_t OutcomeIndex(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 1;
    case StatusCode::kNotFound: return 2;
    case StatusCode::kUnavailable: return 3;
    case StatusCode::kResourceExhausted: return 4;
    case StatusCode::kDeadlineExceeded: return 5;
    case StatusCode::kInternal: return 6;
    case StatusCode::kCancelled: return 7;
    default: return 8;
  }
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b < a) return 0;
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

struct PrometheusObserver::ModelMetrics {
  Labels labels;
  std::array<prometheus::Counter*, kOutcomes.size()> requests{};
  prometheus::Counter* inferences = nullptr;
  prometheus::Counter* executions = nullptr;
  prometheus::Histogram* request_duration = nullptr;
  prometheus::Histogram* queue_duration = nullptr;
  prometheus::Histogram* compute_duration = nullptr;
  prometheus::Histogram* batch_size = nullptr;
  // Response cache series: added at the version's first lookup, so a model
  // without the cache has none.
  std::once_flag cache_once;
  prometheus::Counter* cache_hits = nullptr;
  prometheus::Counter* cache_misses = nullptr;
  prometheus::Counter* cache_hit_seconds = nullptr;
  prometheus::Counter* cache_miss_seconds = nullptr;
};

const char* PrometheusObserver::Outcome(const Status& status) {
  return kOutcomes[OutcomeIndex(status)];
}

PrometheusObserver::PrometheusObserver(prometheus::Registry* registry, size_t interpreters)
    : requests_(prometheus::BuildCounter()
                    .Name("manypy_requests_total")
                    .Help("Inference requests answered, by model, version and outcome")
                    .Register(*registry)),
      inferences_(prometheus::BuildCounter()
                      .Name("manypy_inferences_total")
                      .Help("Inferences run: batch rows, counting every row of a batch")
                      .Register(*registry)),
      executions_(prometheus::BuildCounter()
                      .Name("manypy_executions_total")
                      .Help("Model calls (one per batch)")
                      .Register(*registry)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("manypy_request_duration_seconds")
                            .Help("End-to-end request time in the server, received to answered, "
                                  "of requests that reached a loaded model version")
                            .Register(*registry)),
      queue_duration_(prometheus::BuildHistogram()
                          .Name("manypy_queue_duration_seconds")
                          .Help("Time requests waited in their model's queue before running")
                          .Register(*registry)),
      compute_duration_(prometheus::BuildHistogram()
                            .Name("manypy_compute_duration_seconds")
                            .Help("Time of one model call (a batch), inputs joined to outputs")
                            .Register(*registry)),
      batch_size_(prometheus::BuildHistogram()
                      .Name("manypy_batch_size")
                      .Help("Rows per model call")
                      .Register(*registry)),
      exceptions_(prometheus::BuildCounter()
                      .Name("manypy_model_exceptions_total")
                      .Help("Python exceptions raised by models, by exception type (the first "
                            "32 types seen; later ones are 'other')")
                      .Register(*registry)),
      ready_(prometheus::BuildGauge()
                 .Name("manypy_model_ready")
                 .Help("1 while the model version is loaded and serving, else 0")
                 .Register(*registry)),
      load_duration_(prometheus::BuildGauge()
                         .Name("manypy_model_load_duration_seconds")
                         .Help("Time the last load of the version took, warm-up excluded")
                         .Register(*registry)),
      warmup_duration_(prometheus::BuildGauge()
                           .Name("manypy_model_warmup_duration_seconds")
                           .Help("Time the last warm-up of the version took")
                           .Register(*registry)),
      load_failures_(prometheus::BuildCounter()
                         .Name("manypy_model_load_failures_total")
                         .Help("Loads (including warm-up) of the version that failed")
                         .Register(*registry)),
      memory_(prometheus::BuildGauge()
                  .Name("manypy_model_memory_bytes")
                  .Help("Memory a loaded version holds, measured at load: kind=weights, its "
                        "archive's mapped copy (once per process); kind=python, what its load "
                        "added in the interpreters (Python heap and tensors not from the "
                        "archive), summed")
                  .Register(*registry)),
      cold_loads_(prometheus::BuildCounter()
                      .Name("manypy_model_cold_loads_total")
                      .Help("Loads started by an inference request (on-demand mode)")
                      .Register(*registry)),
      evictions_(prometheus::BuildCounter()
                     .Name("manypy_model_evictions_total")
                     .Help("Idle versions unloaded to fit the memory budget")
                     .Register(*registry)),
      evicted_bytes_(prometheus::BuildCounter()
                         .Name("manypy_model_evicted_bytes_total")
                         .Help("Memory (as measured at load) freed by evictions")
                         .Register(*registry)),
      cache_hits_(prometheus::BuildCounter()
                      .Name("manypy_cache_hits_total")
                      .Help("Requests answered from the response cache")
                      .Register(*registry)),
      cache_misses_(prometheus::BuildCounter()
                        .Name("manypy_cache_misses_total")
                        .Help("Requests of a caching model not found in the response cache")
                        .Register(*registry)),
      cache_hit_seconds_(prometheus::BuildCounter()
                             .Name("manypy_cache_hit_duration_seconds_total")
                             .Help("Time hits spent on their key, lookup and copy out")
                             .Register(*registry)),
      cache_miss_seconds_(prometheus::BuildCounter()
                              .Name("manypy_cache_miss_duration_seconds_total")
                              .Help("Time misses spent on their key, lookup and insert")
                              .Register(*registry)) {
  auto& in_flight = prometheus::BuildGauge()
                        .Name("manypy_interpreter_in_flight_executions")
                        .Help("Model calls running on the interpreter now (0 or 1)")
                        .Register(*registry);
  auto& busy = prometheus::BuildCounter()
                   .Name("manypy_interpreter_busy_seconds_total")
                   .Help("Time the interpreter spent running model calls")
                   .Register(*registry);
  for (size_t slot = 0; slot < interpreters; ++slot) {
    Labels labels{{"interpreter", std::to_string(slot)}};
    slot_in_flight_.push_back(&in_flight.Add(labels));
    slot_busy_.push_back(&busy.Add(labels));
  }
}

PrometheusObserver::~PrometheusObserver() = default;

PrometheusObserver::ModelMetrics& PrometheusObserver::For(const std::string& name,
                                                          int64_t version) {
  std::pair<std::string, int64_t> key{name, version};
  {
    ReaderLock lock(mu_);
    auto it = models_.find(key);
    if (it != models_.end()) return *it->second;
  }
  WriterLock lock(mu_);
  auto& entry = models_[key];
  if (entry == nullptr) {
    entry = std::make_unique<ModelMetrics>();
    Labels labels{{"model", name}, {"version", version > 0 ? std::to_string(version) : ""}};
    entry->labels = labels;
    for (size_t i = 0; i < kOutcomes.size(); ++i) {
      Labels with = labels;
      with["outcome"] = kOutcomes[i];
      entry->requests[i] = &requests_.Add(with);
    }
    if (version > 0) {
      entry->inferences = &inferences_.Add(labels);
      entry->executions = &executions_.Add(labels);
      entry->request_duration = &request_duration_.Add(labels, DurationBuckets());
      entry->queue_duration = &queue_duration_.Add(labels, DurationBuckets());
      entry->compute_duration = &compute_duration_.Add(labels, DurationBuckets());
      entry->batch_size = &batch_size_.Add(labels, BatchBuckets());
    }
  }
  return *entry;
}

void PrometheusObserver::OnRequestFinished(const std::string& name, int64_t version,
                                           const std::string&, const Status& status,
                                           const RequestTimes& times, int64_t) {
  ModelMetrics& m = For(version > 0 ? name : unknown_models_.Bound(name), version);
  m.requests[OutcomeIndex(status)]->Increment();
  if (version > 0 && times.cache != RequestTimes::Cache::kNone) {
    std::call_once(m.cache_once, [&] {
      m.cache_hits = &cache_hits_.Add(m.labels);
      m.cache_misses = &cache_misses_.Add(m.labels);
      m.cache_hit_seconds = &cache_hit_seconds_.Add(m.labels);
      m.cache_miss_seconds = &cache_miss_seconds_.Add(m.labels);
    });
    const double seconds = std::chrono::duration<double>(times.cache_time).count();
    const bool hit = times.cache == RequestTimes::Cache::kHit;
    (hit ? m.cache_hits : m.cache_misses)->Increment();
    (hit ? m.cache_hit_seconds : m.cache_miss_seconds)->Increment(seconds);
  }
  // A request whose client left was never answered: its time is not a latency.
  if (version <= 0 || status.code() == StatusCode::kCancelled) return;
  m.request_duration->Observe(Seconds(times.received, times.finished));
  if (times.started != Clock::time_point{}) {
    m.queue_duration->Observe(Seconds(times.prepared, times.started));
  }
}

void PrometheusObserver::OnExecutionStarted(const std::string&, int64_t, size_t slot) {
  if (slot < slot_in_flight_.size()) slot_in_flight_[slot]->Increment();
}

void PrometheusObserver::OnExecutionFinished(const std::string& name, int64_t version, size_t slot,
                                             int64_t rows, Clock::time_point started,
                                             Clock::time_point ended,
                                             const std::string& error_type) {
  ModelMetrics& m = For(name, version);
  double seconds = Seconds(started, ended);
  m.executions->Increment();
  m.inferences->Increment(static_cast<double>(rows));
  m.compute_duration->Observe(seconds);
  m.batch_size->Observe(static_cast<double>(rows));
  if (slot < slot_in_flight_.size()) {
    slot_in_flight_[slot]->Decrement();
    slot_busy_[slot]->Increment(seconds);
  }
  if (!error_type.empty()) {
    Labels labels = m.labels;
    labels["type"] = exception_types_.Bound(error_type);
    exceptions_.Add(labels).Increment();
  }
}

void PrometheusObserver::OnModelLoaded(const std::string& name, int64_t version,
                                       double load_seconds, double warmup_seconds) {
  Labels labels{{"model", name}, {"version", std::to_string(version)}};
  load_duration_.Add(labels).Set(load_seconds);
  warmup_duration_.Add(labels).Set(warmup_seconds);
  For(name, version);  // its series exist (at zero) from now on
  WriterLock lock(mu_);
  ready_.Add(labels).Set(++loads_[{name, version}] > 0 ? 1 : 0);
}

void PrometheusObserver::OnModelLoadFailed(const std::string& name, int64_t version,
                                           const Status&) {
  load_failures_.Add({{"model", name}, {"version", std::to_string(version)}}).Increment();
}

void PrometheusObserver::OnModelRetired(const std::string& name, int64_t version) {
  Labels labels{{"model", name}, {"version", std::to_string(version)}};
  WriterLock lock(mu_);
  // A version reloaded in place is loaded again before the old load retires.
  int& loads = loads_[{name, version}];
  if (loads > 0) --loads;
  ready_.Add(labels).Set(loads > 0 ? 1 : 0);
  if (loads == 0) {  // a version that holds nothing any more has no memory series
    for (const char* kind : {"weights", "python"}) {
      Labels with_kind = labels;
      with_kind["kind"] = kind;
      memory_.Remove(&memory_.Add(with_kind));
    }
  }
}

void PrometheusObserver::OnModelMemory(const std::string& name, int64_t version,
                                       int64_t weights_bytes, int64_t python_bytes) {
  std::string v = std::to_string(version);
  memory_.Add({{"model", name}, {"version", v}, {"kind", "weights"}})
      .Set(static_cast<double>(weights_bytes));
  memory_.Add({{"model", name}, {"version", v}, {"kind", "python"}})
      .Set(static_cast<double>(python_bytes));
}

void PrometheusObserver::OnModelColdLoaded(const std::string& name, int64_t, double) {
  cold_loads_.Add({{"model", name}}).Increment();
}

void PrometheusObserver::OnModelEvicted(const std::string& name, int64_t, int64_t bytes) {
  evictions_.Add({{"model", name}}).Increment();
  evicted_bytes_.Add({{"model", name}}).Increment(static_cast<double>(bytes));
}

}  // namespace manypy
