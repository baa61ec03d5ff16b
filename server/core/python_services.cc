#include "server/core/python_services.h"

#include <algorithm>

#include "interpreters/host_services.h"
#include "server/core/manypy_module_source.h"
#include "server/inference/execution_context.h"
#include "server/inference/prepare_values.h"
#include "server/inference/sequence_scheduler.h"
#include "server/log.h"

namespace manypy {
namespace {

constexpr const char* kCall = "infer.call";
constexpr const char* kSubmit = "infer.submit";
constexpr const char* kWait = "infer.wait";
constexpr const char* kRequest = "request";
constexpr const char* kLog = "log";
constexpr const char* kTrace = "trace";

const Value* Field(const Value& request, const char* key) {
  return request.kind() == Value::Kind::kDict ? request.Find(key) : nullptr;
}

std::string StringField(const Value& request, const char* key) {
  const Value* v = Field(request, key);
  return v != nullptr && v->kind() == Value::Kind::kStr ? v->to_str() : "";
}

// The running execution of `interpreter`'s worker, or why there is none.
StatusOr<const ExecutionContext*> Caller(size_t interpreter, const char* what) {
  const ExecutionContext* caller = CurrentExecution();
  if (caller == nullptr || caller->slot != interpreter) {
    return FailedPrecondition(std::string(what) +
                              " works only while a model runs a request (not while it is "
                              "imported, loaded or warmed up, nor from a thread of its own)");
  }
  return caller;
}

// The models of the calls `caller` runs inside, outermost first, and its own
// last: the request's callers travel with it, whichever worker runs it.
std::vector<std::string> CallChain(const ExecutionContext* caller) {
  std::vector<std::string> chain = caller->requests->front()->callers;
  chain.push_back(caller->model->manifest().name);
  return chain;
}

std::string Join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : " -> ") + n;
  return text;
}

}  // namespace

struct PythonServices::NestedCall {
  std::shared_ptr<Model> model;
  const InferenceRequest* request = nullptr;  // compared only, while unanswered
  Mutex mu;
  bool answered GUARDED_BY(mu) = false;
  Status status GUARDED_BY(mu);
  std::vector<Value> outputs GUARDED_BY(mu);  // manifest order
};

PythonServices::PythonServices(ModelManager* models, Dispatcher* dispatcher)
    : models_(models), dispatcher_(dispatcher) {
  RegisterHostService(kCall, [this](size_t i, const Value& r) { return Call(i, r); });
  RegisterHostService(kSubmit, [this](size_t i, const Value& r) -> StatusOr<Value> {
    auto call = Start(i, r, /*wake_worker=*/true);
    if (!call.ok()) return call.status();
    MutexLock lock(mu_);
    int64_t handle = next_handle_++;
    pending_[handle] = std::move(*call);
    return Value(handle);
  });
  RegisterHostService(kWait, [this](size_t i, const Value& r) { return Wait(i, r); });
  RegisterHostService(kRequest, [this](size_t i, const Value& r) { return Request(i, r); });
  RegisterHostService(kLog, [this](size_t i, const Value& r) { return LogLine(i, r); });
  RegisterHostService(kTrace, [this](size_t i, const Value& r) { return Trace(i, r); });
}

PythonServices::~PythonServices() {
  for (const char* s : {kCall, kSubmit, kWait, kRequest, kLog, kTrace}) UnregisterHostService(s);
}

Status PythonServices::Install(InterpreterPool* pool) {
  for (size_t i = 0; i < pool->size(); ++i) {
    MANYPY_RETURN_IF_ERROR(pool->RunAt(
        i,
        [](InterpreterSession& session) { session.DefineModule("manypy", kManypyModuleSource); },
        [i](const PythonError& e) {
          return Internal("interpreter " + std::to_string(i) +
                          ": the manypy module failed to import: " + e.what());
        }));
  }
  return Status::Ok();
}

size_t PythonServices::pending() const {
  MutexLock lock(mu_);
  return pending_.size();
}

Status PythonServices::NotLoadedForNestedCall(const Status& looked_up,
                                              const std::string& name) const {
  // On demand, a model the repository has but that is not loaded: a client's
  // request would load it, this call cannot. A load runs on every
  // interpreter in turn, the caller's among them, which stays busy until
  // this call returns: waiting for it here would wait for itself.
  if (looked_up.code() != StatusCode::kNotFound || !models_->LoadsOnRequest(name, looked_up)) {
    return looked_up;  // unknown, or loading or failed (UNAVAILABLE with its reason)
  }
  return NotFound("model '" + name + "' is not loaded, and manypy.infer does not load a model on "
                  "demand (the load would wait for the interpreter this call holds): pin the "
                  "models that other models call with --load-model");
}

StatusOr<std::shared_ptr<PythonServices::NestedCall>> PythonServices::Start(size_t interpreter,
                                                                             const Value& r,
                                                                             bool wake_worker) {
  auto caller = Caller(interpreter, "manypy.infer");
  if (!caller.ok()) return caller.status();
  const std::string name = StringField(r, "model");
  const std::string version = StringField(r, "version");
  std::vector<std::string> chain = CallChain(*caller);
  if (std::find(chain.begin(), chain.end(), name) != chain.end()) {
    chain.push_back(name);
    return FailedPrecondition("model '" + chain[chain.size() - 2] + "' calls model '" + name +
                              "', which is already running this call (" + Join(chain) +
                              "): a cycle, refused (it could wait for itself)");
  }
  StatusOr<std::shared_ptr<Model>> found = models_->Get(name, version);
  if (!found.ok()) return NotLoadedForNestedCall(found.status(), name);
  auto call = std::make_shared<NestedCall>();
  call->model = std::move(*found);
  const Manifest& m = call->model->manifest();
  if (m.streaming) {
    return InvalidArgument("model '" + name + "' streams its responses; manypy.infer takes one "
                           "response (call a model that returns its outputs)");
  }
  if (call->model->queue()->sequences().enabled) {
    // Its sequences are pinned to interpreters: the caller's worker could
    // not run the callee here, and might wait on itself.
    return InvalidArgument("model '" + name + "' keeps stateful sequences; manypy.infer cannot "
                           "call it (a client's sequence requests can)");
  }

  auto request = std::make_unique<InferenceRequest>();
  request->times.received = Clock::now();
  const InferenceRequest& outer = *(*caller)->requests->front();
  request->id = outer.id.empty() ? name : outer.id + "/" + name;
  request->callers = chain;
  // A child of the caller's span: the caller's trace, the caller's sampling.
  if (RequestTracer* tracer = GetRequestTracer(); tracer != nullptr && outer.span != nullptr) {
    request->span = tracer->Start(outer.span->ChildParent(), name, request->times.received);
    if (request->span != nullptr) {
      request->span->SetAttribute("manypy.request.id", request->id);
      request->span->SetAttribute("manypy.caller", chain.back());
    }
  }
  // The caller's remaining time, or less.
  Clock::time_point deadline = (*caller)->deadline;
  if (const Value* t = Field(r, "timeout"); t != nullptr && !t->is_none()) {
    double seconds = t->to_double();
    if (seconds <= 0) return InvalidArgument("manypy.infer: timeout must be > 0 seconds");
    auto limit = request->times.received +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    deadline = std::min(deadline, limit);
  }
  if (const Value* p = Field(r, "parameters"); p != nullptr && p->kind() == Value::Kind::kDict) {
    request->parameters = *p;
  }
  Status prepared = PrepareValueRequest(Field(r, "inputs") ? *Field(r, "inputs") : Value(), m,
                                        call->model->settings().default_timeout, deadline,
                                        request.get());
  request->times.prepared = Clock::now();
  // Its clients are the caller's: valid while the caller runs, which waits
  // for every call it submitted before it returns (manypy_module.py).
  std::vector<std::function<bool()>> clients;
  for (const auto& req : *(*caller)->requests) {
    if (req->cancelled) clients.push_back(req->cancelled);
  }
  if (!clients.empty()) {
    request->cancelled = [clients] {
      return std::all_of(clients.begin(), clients.end(), [](const auto& left) { return left(); });
    };
  }
  request->encode = [call](std::vector<Value>& outputs) {
    MutexLock lock(call->mu);
    call->outputs = std::move(outputs);  // the tensors themselves: no copy
    return Status::Ok();
  };
  Dispatcher* dispatcher = dispatcher_;
  request->reply = [call, dispatcher](const Status& status) {
    {
      MutexLock lock(call->mu);
      call->status = status;
      call->answered = true;
    }
    dispatcher->NestedAnswered();
  };
  call->request = request.get();
  if (!prepared.ok()) {
    call->model->Reject(std::move(request), prepared);  // counted once, like any refusal
  } else {
    // A version that left meanwhile hands the request back: look again.
    for (int attempt = 0; (request = call->model->Infer(std::move(request), wake_worker)) != nullptr;
         ++attempt) {
      StatusOr<std::shared_ptr<Model>> again = models_->Get(name, version);
      if (!again.ok() || attempt == 3) {
        return again.ok() ? Unavailable("model '" + name + "' kept being replaced; retry")
                          : again.status();
      }
      call->model = std::move(*again);
    }
  }
  return call;
}

StatusOr<Value> PythonServices::Call(size_t interpreter, const Value& r) {
  // Its caller waits for it at once: no other worker is woken to take it,
  // the caller's own worker runs it (WaitNested), a function call.
  auto call = Start(interpreter, r, /*wake_worker=*/false);
  if (!call.ok()) return call.status();
  return Finish(interpreter, *call);
}

StatusOr<Value> PythonServices::Wait(size_t interpreter, const Value& r) {
  const Value* h = Field(r, "handle");
  if (h == nullptr || h->kind() != Value::Kind::kInt) return InvalidArgument("infer.wait needs a handle");
  std::shared_ptr<NestedCall> call;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(h->to_int());
    if (it == pending_.end()) return NotFound("no pending manypy.submit call " + h->DebugString());
    call = it->second;
    pending_.erase(it);
  }
  return Finish(interpreter, call);
}

StatusOr<Value> PythonServices::Finish(size_t interpreter, const std::shared_ptr<NestedCall>& call) {
  auto answered = [call] {
    MutexLock lock(call->mu);
    return call->answered;
  };
  if (!answered()) {
    auto caller = Caller(interpreter, "waiting for manypy.submit");
    if (!caller.ok()) return caller.status();
    dispatcher_->WaitNested(interpreter, call->model->queue(), call->request, answered);
  }
  MutexLock lock(call->mu);
  if (!call->status.ok()) return call->status;
  const Manifest& m = call->model->manifest();
  Value::DictItems outputs;
  for (size_t i = 0; i < m.outputs.size() && i < call->outputs.size(); ++i) {
    outputs.emplace_back(Value(m.outputs[i].name), std::move(call->outputs[i]));
  }
  return Value::Dict(std::move(outputs));
}

StatusOr<Value> PythonServices::Request(size_t interpreter, const Value&) const {
  auto caller = Caller(interpreter, "manypy.request");
  if (!caller.ok()) return caller.status();
  const auto& requests = *(*caller)->requests;
  const InferenceRequest& first = *requests.front();
  Clock::time_point now = Clock::now();
  bool left = std::all_of(requests.begin(), requests.end(), [&](const RequestPtr& req) {
    return req->ClientLeft() || now >= req->client_deadline;
  });
  Value seconds_left;
  if ((*caller)->deadline != Clock::time_point::max()) {
    seconds_left = Value(std::chrono::duration<double>((*caller)->deadline - now).count());
  }
  Value::Items ids;
  for (const auto& req : requests) ids.emplace_back(req->id);
  const DispatchedModel& model = *(*caller)->model;
  const Manifest& m = model.manifest();
  // The sequence's key, which with the load names its state (none: no state).
  Value sequence;
  if (model.sequences().enabled) {
    StatusOr<SequenceScheduler::Params> p = SequenceScheduler::ParamsOf(first, m.name);
    if (p.ok() && !p->key.empty()) sequence = Value(p->key);
  }
  return Value::Dict({
      {Value("sequence"), sequence},
      {Value("load"), Value(SequenceStateLoad(model.executable()))},
      {Value("id"), Value(first.id)},
      {Value("ids"), Value::List(std::move(ids))},
      {Value("parameters"), first.parameters},
      {Value("seconds_left"), seconds_left},
      {Value("client_left"), Value(left)},
      {Value("model"), Value(m.name)},
      {Value("version"), Value(m.version)},
      {Value("calls"), Value(Join(CallChain(*caller)))},
      {Value("trace_id"), first.span != nullptr ? Value(first.span->TraceId()) : Value()},
  });
}

namespace {

// A model's attribute value as OpenTelemetry takes it (else its repr).
TraceValue TraceValueOf(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kBool: return v.to_bool();
    case Value::Kind::kInt: return v.to_int();
    case Value::Kind::kFloat: return v.to_double();
    case Value::Kind::kStr: return v.to_str();
    default: return v.DebugString();
  }
}

TraceAttributes TraceAttributesOf(const Value* fields) {
  TraceAttributes attributes;
  if (fields == nullptr || fields->kind() != Value::Kind::kDict) return attributes;
  for (const auto& [key, value] : fields->dict_items()) {
    if (key.kind() == Value::Kind::kStr) attributes.emplace_back(key.to_str(), TraceValueOf(value));
  }
  return attributes;
}

}  // namespace

StatusOr<Value> PythonServices::Trace(size_t interpreter, const Value& r) const {
  // Outside a request (import, load, warm-up) there is no span: nothing to
  // record, and a model's tracing never fails its load.
  auto caller = Caller(interpreter, "manypy.trace");
  if (!caller.ok()) return Value(false);
  // The batch's first request is the one manypy.request names and whose
  // span a nested call joins: a model's own spans go there too.
  const std::shared_ptr<RequestSpan>& span = (*caller)->requests->front()->span;
  if (span == nullptr || !span->recording()) return Value(false);
  const std::string op = StringField(r, "op");
  if (op == "attribute") {
    const Value* value = Field(r, "value");
    const std::string key = StringField(r, "key");
    if (key.empty() || value == nullptr) return InvalidArgument("manypy.trace.set_attribute needs a key and a value");
    for (const auto& req : *(*caller)->requests) {
      if (req->span != nullptr) req->span->SetAttribute(key, TraceValueOf(*value));
    }
    return Value(true);
  }
  if (op == "span") {
    const Value* start = Field(r, "start_ns");
    const Value* end = Field(r, "end_ns");
    const std::string name = StringField(r, "name");
    if (name.empty() || start == nullptr || end == nullptr || start->kind() != Value::Kind::kInt ||
        end->kind() != Value::Kind::kInt) {
      return InvalidArgument("manypy.trace.span needs a name and its start and end (monotonic ns)");
    }
    // time.monotonic_ns() and steady_clock both read CLOCK_MONOTONIC.
    auto at = [](int64_t ns) {
      return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
    };
    span->AddChild(name, at(start->to_int()), at(end->to_int()), TraceAttributesOf(Field(r, "attributes")),
                   StringField(r, "error"));
    return Value(true);
  }
  return InvalidArgument("manypy.trace: unknown operation '" + op + "'");
}

StatusOr<Value> PythonServices::LogLine(size_t, const Value& r) const {
  std::string level = StringField(r, "level");
  LogLevel l = level == "error"     ? LogLevel::kError
               : level == "warning" ? LogLevel::kWarning
               : level == "verbose" ? LogLevel::kVerbose
                                    : LogLevel::kInfo;
  if (!LogEnabled(l)) return Value();
  std::string model = StringField(r, "model");
  std::string text = "model '" + model + "': " + StringField(r, "message");
  std::string json = "\"model\": " + JsonString(model);
  if (const Value* fields = Field(r, "fields"); fields != nullptr && fields->kind() == Value::Kind::kDict) {
    for (const auto& [key, value] : fields->dict_items()) {
      if (key.kind() != Value::Kind::kStr) continue;
      std::string v = value.kind() == Value::Kind::kStr ? value.to_str() : value.DebugString();
      text += " " + key.to_str() + "=" + v;
      json += ", " + JsonString(key.to_str()) + ": " +
              (value.kind() == Value::Kind::kInt || value.kind() == Value::Kind::kFloat ||
                       value.kind() == Value::Kind::kBool
                   ? (value.kind() == Value::Kind::kBool ? (value.to_bool() ? "true" : "false") : v)
                   : JsonString(v));
    }
  }
  LogFields(l, text, json);
  return Value();
}

}  // namespace manypy
