#include "server/lifecycle/python_model.h"

#include <ATen/Context.h>

#include <algorithm>
#include <thread>

#include "interpreters/python_kernels.h"
#include "interpreters/torch_version.h"
#include "server/lifecycle/archive_traceback.h"
#include "server/lifecycle/memory_release.h"
#include "server/lifecycle/model_python_errors.h"
#include "server/lifecycle/model_runtime.h"
#include "server/lifecycle/python_heap_measurements.h"
#include "server/lifecycle/unloaded_model_memory.h"
#include "server/log.h"

namespace manypy {
namespace {

// Runs `call(session)` on interpreter `slot` of `pool`, which `hook` may
// interrupt while it runs; returns what `call` returns.
template <typename Call>
auto CallInterruptibly(InterpreterPool* pool, size_t slot, InterruptHook* hook, Call&& call) {
  InterpreterSession session = pool->AcquireAt(slot);
  const uint64_t token = session.BeginInterruptible();
  hook->Arm([pool, slot, token] { pool->Interrupt(slot, token); });
  auto result = call(session);
  hook->Disarm();
  session.EndInterruptible(token);
  return result;
}

constexpr const char* kRuntimeModule = "manypy_model_runtime";
constexpr const char* kUsesCompileEntry = "manypy/uses_torch_compile";

Value EntryPointValue(const EntryPoint& e) {
  return Value::Dict({
      {Value("kind"), Value(e.kind)},
      {Value("package"), Value(e.package)},
      {Value("resource"), Value(e.resource)},
      {Value("module"), Value(e.module)},
      {Value("function"), Value(e.function)},
      {Value("weights_package"), Value(e.weights_package)},
      {Value("weights_resource"), Value(e.weights_resource)},
  });
}

Value StorageValues(const MappedStorages& storages) {
  Value::DictItems items;
  for (const auto& [name, tensor] : storages.tensors()) items.emplace_back(Value(name), Value(tensor));
  return Value::Dict(std::move(items));
}

Value OutputNames(const Manifest& m) {
  Value::Items names;
  for (const auto& o : m.outputs) names.emplace_back(o.name);
  return Value::List(std::move(names));
}

// Runs `work(i)` for every interpreter of `pool` at once, each in a thread of
// its own (for when nothing else runs on them yet); the first failure, if any.
template <typename Work>
Status OnEveryInterpreterAtOnce(InterpreterPool* pool, Work work) {
  std::vector<Status> results(pool->size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pool->size(); ++i) {
    threads.emplace_back([&, i] { results[i] = work(i); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    if (!r.ok()) return r;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<PythonModel>> PythonModel::Load(InterpreterPool* pool,
                                                            const std::string& archive_path) {
  auto archive = PackageArchive::Open(archive_path);
  if (!archive.ok()) return archive.status();
  return Load(pool, std::move(*archive));
}

StatusOr<std::unique_ptr<PythonModel>> PythonModel::Load(
    InterpreterPool* pool, std::unique_ptr<PackageArchive> archive) {
  auto opened = Open(pool, std::move(archive));
  if (!opened.ok()) return opened.status();
  std::unique_ptr<PythonModel> model = std::move(*opened);
  MANYPY_RETURN_IF_ERROR(
      OnEveryInterpreterAtOnce(pool, [&](size_t i) { return model->Prepare(i); }));
  return model;
}

Status PythonModel::PrepareInterpreters(InterpreterPool* pool) {
  return OnEveryInterpreterAtOnce(pool, [pool](size_t i) {
    return pool->RunAt(
        i,
        [](InterpreterSession& session) {
          DefineModelRuntime(session);
          session.Global("gc", "freeze").Call();
        },
        [i](const PythonError& e) {
          return Internal("interpreter " + std::to_string(i) +
                          ": the model runtime failed to import: " + e.what());
        });
  });
}

StatusOr<std::unique_ptr<PythonModel>> PythonModel::Open(
    InterpreterPool* pool, std::unique_ptr<PackageArchive> archive) {
  const std::string archive_path = archive->path();
  if (archive->manifest().platform != kPythonPlatform)
    return InvalidArgument(archive_path + ": platform '" + archive->manifest().platform +
                           "' is not run by the interpreters (load it with LoadArchive)");
  MANYPY_RETURN_IF_ERROR(
      CheckPackagedTorch(archive->manifest(), RunningTorchVersion(), archive_path));
  auto storages = MappedStorages::Map(*archive);
  if (!storages.ok()) return storages.status();
  struct stat file {};
  fstat(archive->fd(), &file);  // the file Map just copied and checked

  const Manifest& manifest = archive->manifest();
  if (manifest.device != "cpu" && !at::hasCUDA()) {
    return FailedPrecondition("model '" + manifest.name + "' asks for device '" + manifest.device +
                              "', but this server's libtorch was built without CUDA");
  }
  Value path(archive_path);
  // Python reads the archive's code and pickles from the same sealed copy the
  // weights live in, not from the path, which may be replaced or rewritten.
  Value copy_path((*storages)->copy_path());
  Value name(manifest.name);
  Value entry = EntryPointValue(manifest.entry_point);
  Value device(manifest.device);
  Value shared = StorageValues(**storages);
  ReplicatedObject model = pool->Replicate([=](InterpreterSession& s) {
    return DefineModelRuntime(s)
        .Attr("load")
        .Call({path, entry, shared, device, copy_path, name});
  });
  Value method(manifest.method);
  Value names = OutputNames(manifest);
  Value batched(manifest.max_batch_size > 0);
  const char* run = manifest.streaming ? "start_stream" : "infer";
  ReplicatedObject runner = pool->Replicate([=](InterpreterSession& s) {
    Obj infer = DefineModelRuntime(s).Attr(run);
    return s.Global("functools", "partial").CallWith({infer, model.In(s), s.FromValue(method),
                                                      s.FromValue(names), s.FromValue(device),
                                                      s.FromValue(batched)});
  });
  ReplicatedObject batch = pool->Replicate([=](InterpreterSession& s) {
    return DefineModelRuntime(s).Attr("start_batch").CallWith(
        {model.In(s), s.FromValue(method), s.FromValue(names), s.FromValue(device),
         s.FromValue(batched)});
  });
  std::string heap_key = PythonHeapMeasurements::Key(archive_path, file);
  return std::unique_ptr<PythonModel>(new PythonModel(pool, std::move(archive), std::move(*storages),
                                                      std::move(model), std::move(runner),
                                                      std::move(batch), std::move(heap_key)));
}

Status PythonModel::Prepare(size_t slot) {
  // An operator this model defines from Python (torch.library, custom_op)
  // that another model defined differently is refused naming both.
  const Manifest& manifest = archive_->manifest();
  ScopedOperatorDefiner definer("model '" + manifest.name + "' version " +
                                std::to_string(manifest.version) + " (" + archive_->path() + ")");
  auto load = [&](InterpreterSession& session) {
    // tracemalloc counts only this interpreter's Python allocator (each has
    // its own libpython), so requests running on the other interpreters meanwhile
    // do not blur the figure, as they would an RSS or malloc-wide delta. A
    // model that traces memory itself is left alone (its figure is then 0).
    // Measured once per archive file (python_heap_measurements.h).
    // An archive whose code calls torch.compile says so (SCHEMA.md): torch's
    // compiler is imported before the heap is measured (the model runtime).
    const auto& entries = archive_->entries();
    if (std::find(entries.begin(), entries.end(), kUsesCompileEntry) != entries.end()) {
      DefineModelRuntime(session).Attr("import_compiler").Call();
    }
    PythonHeapMeasurements& measured = PythonHeapMeasurements::Shared();
    std::optional<int64_t> known = measured.Find(heap_key_);
    bool trace = !known.has_value() &&
                 !session.Global("tracemalloc", "is_tracing").Call().ToValue().to_bool();
    if (trace) session.Global("tracemalloc", "start").Call();
    runner_.In(session);
    int64_t python_bytes = known.value_or(0);
    if (trace) {
      python_bytes = session.Global("tracemalloc", "get_traced_memory").Call().ToValue()
                         .items()[0].to_int();
      session.Global("tracemalloc", "stop").Call();
      measured.Record(heap_key_, python_bytes);
      // tracemalloc's tables (an entry per live block: 6 MiB for an import
      // that builds a 20,000-entry table) are freed now, but would stay
      // resident in the allocator until the next unload returned them: the
      // peak of make bench-many-models was such a first load.
      ReturnFreeMemoryToSystem();
    }
    int64_t tensor_bytes = DefineModelRuntime(session)
                               .Attr("owned_tensor_bytes")
                               .CallWith({model_.In(session), session.FromValue(StorageValues(*storages_))})
                               .ToValue()
                               .to_int();
    if (manifest.streaming) {
      // A bad continuous_batching declaration fails the load, naming it.
      int64_t size = DefineModelRuntime(session)
                         .Attr("batch_size")
                         .CallWith({model_.In(session)})
                         .ToValue()
                         .to_int();
      if (size > 0) batch_.In(session);
      continuous_batching_ = static_cast<size_t>(size);
    }
    if (DefineModelRuntime(session)
            .Attr("is_compiled")
            .CallWith({model_.In(session)})
            .ToValue()
            .to_bool()) {
      compiled_ = true;
    }
    MutexLock lock(released_mu_);
    slot_bytes_[slot] = python_bytes + tensor_bytes;
  };
  return pool_->RunAt(slot, load,
                      [&](const PythonError& e) { return LoadRaised(archive_->path(), e); });
}

MemoryFootprint PythonModel::Memory() const {
  MutexLock lock(released_mu_);
  return {static_cast<int64_t>(storages_->size()), slot_bytes_};
}

void PythonModel::DropSequenceStates(size_t slot, const std::vector<std::string>& keys) {
  {
    MutexLock lock(released_mu_);
    if (released_[slot]) return;
  }
  Value::Items names;
  for (const auto& k : keys) names.emplace_back(k);
  Status dropped = pool_->RunAt(slot, [&](InterpreterSession& session) {
    session.Global(kRuntimeModule, "drop_sequence_states")
        .Call({Value(SequenceStateLoad(*this)), Value::List(std::move(names))});
  });
  if (!dropped.ok()) {
    // A state's own __del__ raising: the state is gone either way.
    Log(LogLevel::kWarning,
        "model '" + manifest().name + "': dropping sequence states: " + dropped.message());
  }
}

void PythonModel::Release(size_t slot) {
  {
    InterpreterSession session = pool_->AcquireAt(slot);
    // Every state of this load's sequences in this interpreter: they end with
    // it. Its failure is no news: nothing to drop where the runtime never
    // loaded (a failed Prepare).
    static_cast<void>(RunPython([&] {
      session.Global(kRuntimeModule, "drop_sequence_states")
          .Call({Value(SequenceStateLoad(*this)), Value()});
    }));
    runner_.DropIn(session);
    batch_.DropIn(session);
    model_.DropIn(session);
  }
  CollectGarbage(slot);
  MutexLock lock(released_mu_);
  released_[slot] = true;
}

PythonModel::~PythonModel() {
  // A packaged model's modules, classes and functions form reference cycles
  // (function -> module globals -> function), so dropping the last reference
  // frees nothing until that interpreter's cyclic collector runs, which an idle
  // interpreter may never do: each reload kept ~12 MiB resident until some
  // later allocation happened to trigger a full collection (make soak).
  {
    ReplicatedObject runner = std::move(runner_), batch = std::move(batch_),
                     model = std::move(model_);
  }
  MutexLock lock(released_mu_);
  for (size_t i = 0; i < pool_->size(); ++i) {
    if (!released_[i]) CollectGarbage(i);
  }
}

void PythonModel::CollectGarbage(size_t slot) {
  // Called from a destructor: must not throw (RunAt converts every failure).
  // Collection only returns memory sooner; the model is unloaded either way.
  static_cast<void>(pool_->RunAt(slot, ReturnUnloadedModelMemory));
}

StatusOr<std::vector<Value>> PythonModel::Call(const std::vector<Value>& inputs) const {
  std::string error_type;
  return RunPython([&] { return runner_.Call({Value::List(inputs)}).items(); },
                   [&](const PythonError& e) {
                     return ModelRaised(manifest().name, e, &error_type);
                   });
}

StatusOr<std::vector<Value>> PythonModel::Run(size_t slot, const std::vector<Value>& inputs,
                                                InterruptHook* hook) {
  std::string ignored;
  return RunReportingError(slot, inputs, hook, &ignored);
}

StatusOr<std::vector<Value>> PythonModel::RunReportingError(size_t slot,
                                                              const std::vector<Value>& inputs,
                                                              InterruptHook* hook,
                                                              std::string* error_type) {
  return CallInterruptibly(pool_, slot, hook, [&](InterpreterSession& session) {
    return RunPython(
        [&] { return runner_.In(session).Call({Value::List(inputs)}).ToValue().items(); },
        [&](const PythonError& e) { return ModelRaised(manifest().name, e, error_type); });
  });
}

Status PythonModel::RunStream(size_t slot, const std::vector<Value>& inputs, InterruptHook* hook,
                              const ResponseSink& sink, std::string* error_type) {
  if (!manifest().streaming) return Executable::RunStream(slot, inputs, hook, sink, error_type);
  InterpreterSession session = pool_->AcquireAt(slot);
  uint64_t token = session.BeginInterruptible();
  auto arm = [&] { hook->Arm([pool = pool_, slot, token] { pool->Interrupt(slot, token); }); };
  auto stream_outputs = [&] {
    arm();
    Obj stream = runner_.In(session).Call({Value::List(inputs)});
    Obj next = stream.Attr("next");
    for (;;) {
      Value outputs = next.Call().ToValue();
      if (outputs.is_none()) return Status::Ok();
      // Waiting for the client to read is not the model's time: an interrupt
      // now would land in whatever Python runs next, not in the model.
      hook->Disarm();
      std::vector<Value> items = outputs.items();
      Status sent = sink(items);
      if (!sent.ok()) {
        // The stream ends with the sink's reason either way; the model's
        // cleanup failing is the operator's to see.
        static_cast<void>(RunPython(
            [&] { stream.Attr("close").Call(); },  // GeneratorExit at the model's yield
            [&](const PythonError& e) {
              Log(LogLevel::kWarning, "model '" + manifest().name + "' raised " + e.what() +
                                          " while its stream was closed" +
                                          DescribeArchiveFrames(e.traceback()));
              return Status::Ok();
            }));
        return sent;
      }
      arm();
    }
  };
  Status status = RunPython(stream_outputs, [&](const PythonError& e) {
    return ModelRaised(manifest().name, e, error_type);
  });
  hook->Disarm();
  session.EndInterruptible(token);
  return status;
}

Status PythonModel::StartBatchedStream(size_t slot, uint64_t key, const std::vector<Value>& inputs,
                                       InterruptHook* hook, std::string* error_type) {
  return CallInterruptibly(pool_, slot, hook, [&](InterpreterSession& session) {
    return RunPython(
        [&] {
          batch_.In(session).Attr("start").Call(
              {Value(static_cast<int64_t>(key)), Value::List(inputs)});
        },
        [&](const PythonError& e) { return ModelRaised(manifest().name, e, error_type); });
  });
}

StatusOr<std::vector<StreamStep>> PythonModel::StepBatchedStreams(size_t slot,
                                                                  const std::vector<uint64_t>& keys,
                                                                  InterruptHook* hook,
                                                                  std::string* error_type) {
  Value::Items key_values;
  for (uint64_t k : keys) key_values.emplace_back(static_cast<int64_t>(k));
  StatusOr<Value> result = CallInterruptibly(pool_, slot, hook, [&](InterpreterSession& session) {
    return RunPython(
        [&] {
          return batch_.In(session).Attr("step").Call({Value::List(std::move(key_values))}).ToValue();
        },
        [&](const PythonError& e) { return ModelRaised(manifest().name, e, error_type); });
  });
  if (!result.ok()) return result.status();
  // The runtime answers [outputs or None, finished, error or None] per key.
  std::vector<StreamStep> steps;
  for (const Value& entry : result->items()) {
    const Value::Items& parts = entry.items();
    StreamStep step;
    if (!parts[0].is_none()) {
      step.responded = true;
      step.outputs = parts[0].items();
    }
    step.finished = parts[1].to_bool();
    if (!parts[2].is_none()) {
      step.error = Internal("model '" + manifest().name + "' raised " + parts[2].to_str() +
                            " in step() for this request");
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

void PythonModel::EndBatchedStreams(size_t slot, const std::vector<uint64_t>& keys) {
  Value::Items key_values;
  for (uint64_t k : keys) key_values.emplace_back(static_cast<int64_t>(k));
  Status dropped = pool_->RunAt(slot, [&](InterpreterSession& session) {
    batch_.In(session).Attr("drop").Call({Value::List(std::move(key_values))});
  });
  if (!dropped.ok()) {  // a state's own __del__ raising: the state is gone either way
    Log(LogLevel::kWarning, "model '" + manifest().name + "': dropping stream states: " +
                                dropped.message());
  }
}

}  // namespace manypy
