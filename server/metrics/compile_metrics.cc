#include "server/metrics/compile_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "interpreters/host_services.h"
#include "server/inference/execution_context.h"
#include "server/log.h"

namespace manypy {
namespace {

constexpr const char* kRecompiled = "compile.recompiled";

std::string Str(const Value& request, const char* key) {
  const Value* v = request.kind() == Value::Kind::kDict ? request.Find(key) : nullptr;
  return v != nullptr && v->kind() == Value::Kind::kStr ? v->to_str() : "";
}

prometheus::Family<prometheus::Counter>* Register(prometheus::Registry& registry) {
  return &prometheus::BuildCounter()
              .Name("manypy_model_recompiles_total")
              .Help("Recompilations of a torch.compile'd model while it served (its warm-up "
                    "compiled it; each of these compiled again on a request)")
              .Register(registry);
}

}  // namespace

CompileMetrics::CompileMetrics(prometheus::Registry* registry)
    : own_registry_(registry == nullptr ? std::make_shared<prometheus::Registry>() : nullptr),
      recompiles_(Register(registry != nullptr ? *registry : *own_registry_)) {
  RegisterHostService(kRecompiled, [this](size_t, const Value& r) -> StatusOr<Value> {
    MANYPY_RETURN_IF_ERROR(Recompiled(r));
    return Value();
  });
}

CompileMetrics::~CompileMetrics() { UnregisterHostService(kRecompiled); }

Status CompileMetrics::Recompiled(const Value& r) {
  // The call running on this thread says which model; else what the runtime says.
  std::string model = Str(r, "model"), version = Str(r, "version");
  if (const ExecutionContext* c = CurrentExecution(); c != nullptr) {
    model = c->model->manifest().name;
    version = std::to_string(c->model->manifest().version);
  }
  if (model.empty()) return InvalidArgument("compile.recompiled needs the model");
  const std::string reason = Str(r, "reason");
  recompiles_->Add({{"model", model}, {"version", version}}).Increment();
  bool first;
  {
    MutexLock lock(mu_);
    first = logged_.insert(model + '\x1f' + version + '\x1f' + reason).second;
  }
  if (first) {
    Log(LogLevel::kWarning, "model '" + model + "' version " + version +
                                " was compiled again while serving (torch.compile; later "
                                "recompilations for the same reason are only counted, "
                                "manypy_model_recompiles_total): " +
                                (reason.empty() ? "no reason given" : reason));
  }
  return Status::Ok();
}

}  // namespace manypy
