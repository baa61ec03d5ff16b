// PythonServices: what a model's Python may ask of the server through the `manypy` module
// (nested inference, the running request, log lines), registered as host services while
// it lives. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "common/mutex.h"
#include "interpreters/pool.h"
#include "server/lifecycle/model_manager.h"

namespace manypy {

/// What every interpreter's `manypy` module (manypy_module.py) asks of the server:
///   manypy.infer / manypy.submit: a nested inference of another loaded model,
///     through that model's scheduler like any request (its instance limit,
///     statistics, metrics), tensors handed over without a copy, the caller's
///     remaining deadline and its clients' leaving passed on;
///   manypy.request: the running request's id, parameters, seconds left and
///     whether every client has left;
///   manypy.log: lines in the server's log, in its format;
///   manypy.trace: the model's own spans and attributes on the running
///     request's trace span (when tracing is on and the request is sampled).
/// Registers those host services (interpreters/host_services.h) while it lives.
class PythonServices {
 public:
  /// `models` and `dispatcher` must outlive it. Create it before any model loads.
  PythonServices(ModelManager* models, Dispatcher* dispatcher);
  ~PythonServices();
  PythonServices(const PythonServices&) = delete;
  PythonServices& operator=(const PythonServices&) = delete;

  /// Defines the `manypy` module in every interpreter of `pool` (before any
  /// archive loads: archives extern it); INTERNAL naming the interpreter
  /// and the Python exception when the module fails to import.
  static Status Install(InterpreterPool* pool);

  /// Nested calls submitted and not yet waited for (for tests).
  size_t pending() const;

 private:
  struct NestedCall;
  /// Prepares and queues a nested request (`wake_worker`: Dispatcher::Submit's).
  StatusOr<std::shared_ptr<NestedCall>> Start(size_t interpreter, const Value& request,
                                              bool wake_worker);
  /// `looked_up` (the callee's lookup failing), or in on-demand mode for a
  /// repository model that is not loaded, NOT_FOUND saying why this call
  /// does not load it and what to do.
  Status NotLoadedForNestedCall(const Status& looked_up, const std::string& name) const;
  /// manypy.infer: Start, then Finish at once.
  StatusOr<Value> Call(size_t interpreter, const Value& request);
  /// manypy.submit's Future.result(): Finish the call a handle names.
  StatusOr<Value> Wait(size_t interpreter, const Value& request);
  /// Waits for `call` (running it here if it is still queued); its outputs by name.
  StatusOr<Value> Finish(size_t interpreter, const std::shared_ptr<NestedCall>& call);
  StatusOr<Value> Request(size_t interpreter, const Value& request) const;
  StatusOr<Value> LogLine(size_t interpreter, const Value& request) const;
  /// manypy.trace: a span or an attribute on the running request's span.
  StatusOr<Value> Trace(size_t interpreter, const Value& request) const;

  ModelManager* const models_;
  Dispatcher* const dispatcher_;
  mutable Mutex mu_;
  int64_t next_handle_ GUARDED_BY(mu_) = 1;
  std::map<int64_t, std::shared_ptr<NestedCall>> pending_ GUARDED_BY(mu_);
};

}  // namespace manypy
