#include "server/metrics/python_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <regex>

#include "interpreters/host_services.h"
#include "server/inference/execution_context.h"

namespace manypy {
namespace {

constexpr const char* kDeclare = "metrics.declare";
constexpr const char* kUpdate = "metrics.update";

const std::regex& MetricName() {
  static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  return re;
}
const std::regex& LabelName() {
  static const std::regex re("[a-zA-Z_][a-zA-Z0-9_]*");
  return re;
}

std::string Str(const Value& request, const char* key) {
  const Value* v = request.kind() == Value::Kind::kDict ? request.Find(key) : nullptr;
  return v != nullptr && v->kind() == Value::Kind::kStr ? v->to_str() : "";
}

std::vector<std::string> Strings(const Value& request, const char* key) {
  std::vector<std::string> out;
  const Value* v = request.kind() == Value::Kind::kDict ? request.Find(key) : nullptr;
  if (v == nullptr || (v->kind() != Value::Kind::kList && v->kind() != Value::Kind::kTuple)) return out;
  for (const auto& item : v->items()) {
    out.push_back(item.kind() == Value::Kind::kStr ? item.to_str() : item.DebugString());
  }
  return out;
}

}  // namespace

struct PythonMetrics::Family {
  std::string kind;
  std::string help;
  std::vector<std::string> labels;
  std::vector<double> buckets;
  prometheus::Family<prometheus::Counter>* counter = nullptr;
  prometheus::Family<prometheus::Gauge>* gauge = nullptr;
  prometheus::Family<prometheus::Histogram>* histogram = nullptr;
  LabelLimiter label_sets{kMaxLabelSets};
};

PythonMetrics::PythonMetrics(prometheus::Registry* registry)
    : own_registry_(registry == nullptr ? std::make_shared<prometheus::Registry>() : nullptr),
      registry_(registry != nullptr ? registry : own_registry_.get()) {
  RegisterHostService(kDeclare, [this](size_t, const Value& r) -> StatusOr<Value> {
    MANYPY_RETURN_IF_ERROR(Declare(r));
    return Value();
  });
  RegisterHostService(kUpdate, [this](size_t, const Value& r) -> StatusOr<Value> {
    MANYPY_RETURN_IF_ERROR(Update(r));
    return Value();
  });
}

PythonMetrics::~PythonMetrics() {
  UnregisterHostService(kDeclare);
  UnregisterHostService(kUpdate);
}

Status PythonMetrics::Declare(const Value& r) {
  const std::string name = Str(r, "name"), help = Str(r, "help"), kind = Str(r, "kind");
  std::vector<std::string> labels = Strings(r, "labels");
  if (!std::regex_match(name, MetricName())) {
    return InvalidArgument("metric name '" + name + "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  if (name.rfind("manypy_", 0) == 0) {
    return InvalidArgument("metric name '" + name + "': names starting manypy_ are the server's");
  }
  if (kind != "counter" && kind != "gauge" && kind != "histogram") {
    return InvalidArgument("metric '" + name + "': unknown kind '" + kind + "'");
  }
  for (const auto& label : labels) {
    if (!std::regex_match(label, LabelName()) || label.rfind("__", 0) == 0) {
      return InvalidArgument("metric '" + name + "': label name '" + label +
                             "' is not [a-zA-Z_][a-zA-Z0-9_]* (and not starting __)");
    }
    if (label == "model" || label == "version") {
      return InvalidArgument("metric '" + name + "': label '" + label +
                             "' is the server's (it adds model and version to every sample)");
    }
  }
  std::vector<double> buckets;
  if (const Value* b = r.Find("buckets"); b != nullptr && !b->is_none()) {
    for (const auto& v : b->items()) buckets.push_back(v.to_double());
  }
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    const Family& f = *it->second;
    if (f.kind != kind) {
      return InvalidArgument("metric '" + name + "' is declared already as a " + f.kind +
                             ", not a " + kind);
    }
    if (f.labels != labels) {
      return InvalidArgument("metric '" + name + "' is declared already with other labels");
    }
    return Status::Ok();  // the same declaration again: another interpreter's, a reload's
  }
  auto f = std::make_unique<Family>();
  f->kind = kind;
  f->help = help;
  f->labels = labels;
  f->buckets = buckets.empty() ? std::vector<double>{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
                               : buckets;
  try {
    if (kind == "counter") f->counter = &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
    if (kind == "gauge") f->gauge = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
    if (kind == "histogram") {
      f->histogram = &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
    }
  } catch (const std::exception& e) {
    return InvalidArgument("metric '" + name + "': " + e.what());
  }
  families_[name] = std::move(f);
  return Status::Ok();
}

Status PythonMetrics::Update(const Value& r) {
  const std::string name = Str(r, "name"), op = Str(r, "op");
  std::vector<std::string> values = Strings(r, "labels");
  const Value* v = r.Find("value");
  double value = v != nullptr && !v->is_none() ? v->to_double() : 1.0;
  // The model and version of the call running on this thread; else what the
  // model's Python says (its import, a thread of its own).
  std::string model = Str(r, "model"), version;
  if (const ExecutionContext* c = CurrentExecution(); c != nullptr) {
    model = c->model->manifest().name;
    version = std::to_string(c->model->manifest().version);
  }
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return NotFound("metric '" + name + "' was never declared");
  Family& f = *it->second;
  if (values.size() != f.labels.size()) {
    return InvalidArgument("metric '" + name + "' has " + std::to_string(f.labels.size()) +
                           " label(s), got " + std::to_string(values.size()) + " value(s)");
  }
  std::string joined;
  for (const auto& s : values) joined += s + '\x1f';
  bool bounded = f.label_sets.Bound(model + '\x1f' + version + '\x1f' + joined) == "other";
  std::map<std::string, std::string> labels{{"model", model}, {"version", version}};
  for (size_t i = 0; i < values.size(); ++i) labels[f.labels[i]] = bounded ? "other" : values[i];
  if (f.kind == "counter") {
    if (op != "inc") return InvalidArgument("a counter ('" + name + "') only goes up: inc()");
    if (value < 0) return InvalidArgument("counter '" + name + "' cannot go down (inc(" + std::to_string(value) + "))");
    f.counter->Add(labels).Increment(value);
  } else if (f.kind == "gauge") {
    auto& g = f.gauge->Add(labels);
    if (op == "inc") g.Increment(value);
    else if (op == "dec") g.Decrement(value);
    else if (op == "set") g.Set(value);
    else return InvalidArgument("a gauge ('" + name + "') takes inc, dec or set");
  } else {
    if (op != "observe") return InvalidArgument("a histogram ('" + name + "') takes observe()");
    f.histogram->Add(labels, prometheus::Histogram::BucketBoundaries(f.buckets)).Observe(value);
  }
  return Status::Ok();
}

}  // namespace manypy
