#include "interpreters/pool.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "interpreters/pool_state.h"
#include "interpreters/thread_policy.h"
#include "interpreters/torch_hooks.h"
#include "interpreters/torch_version.h"

namespace manypy {
namespace detail {
std::shared_ptr<ReplicatedState> MakeReplicatedState(std::shared_ptr<PoolState> pool,
                                                     ReplicatedObject::Factory factory);
}  // namespace detail

namespace {

std::string DefaultCacheDir() {
  if (const char* dir = getenv("MANYPY_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/manypy";
  if (const char* home = getenv("HOME"); home && *home) return std::string(home) + "/.cache/manypy";
  return "/tmp/manypy-cache";
}

std::string DefaultShimLibrary() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = exe.parent_path().parent_path() / "lib" / "libmanypy_shim.so";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return MANYPY_BUILD_SHIM_LIBRARY;
}

// libtorch's dispatcher is process-wide: the first interpreter of the process
// makes the Python-level operator registrations (torch.library) and later
// interpreters, in any pool, must not repeat them.
std::atomic<bool> g_registrations_claimed{false};

PoolOptions WithDefaults(PoolOptions o) {
  if (o.interpreters == 0) o.interpreters = HardwareCores();
  if (o.cache_dir.empty()) o.cache_dir = DefaultCacheDir();
  if (o.compile_cache_dir.empty()) {
    const char* env = getenv("TORCHINDUCTOR_CACHE_DIR");
    o.compile_cache_dir = env != nullptr && *env ? env : o.cache_dir + "/inductor";
  }
  if (o.libpython.empty()) o.libpython = MANYPY_DEFAULT_LIBPYTHON;
  if (o.python_executable.empty()) o.python_executable = MANYPY_DEFAULT_PYTHON;
  if (o.shim_library.empty()) o.shim_library = DefaultShimLibrary();
  if (o.intra_op_threads <= 0) o.intra_op_threads = DefaultIntraOpThreads(o.interpreters);
  return o;
}

}  // namespace

StatusOr<std::unique_ptr<InterpreterPool>> InterpreterPool::Create(PoolOptions options) {
  options = WithDefaults(std::move(options));
  MANYPY_RETURN_IF_ERROR(CheckTorchHooksActive());
  // Process-wide, read by each interpreter's os.environ when it starts
  // (before its torch._inductor reads it), so all share one cache.
  setenv("TORCHINDUCTOR_CACHE_DIR", options.compile_cache_dir.c_str(), 1);
  // AOTAutograd's cache in the same folder, off by default in PyTorch 2.6
  // (torch/_functorch/config.py:36, read at import): on a hit a warm start
  // skips tracing the graph through AOTAutograd and Inductor's passes: each
  // interpreter's first call of bench-compile's small model compiled without
  // freezing took 0.21 s of CPU instead of 0.52 (docs/debian13.md, trap 24).
  // 2.6 bypasses it for a graph compiled with freezing
  // (_functorch/_aot_autograd/autograd_cache.py:209). An operator's
  // TORCHINDUCTOR_AUTOGRAD_CACHE=0 is kept.
  setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "1", 0);
  // Process-wide: every interpreter shares libtorch's intra-op thread pool.
  at::set_num_threads(options.intra_op_threads);

  auto state = std::make_shared<detail::PoolState>(options.interpreters);
  auto preparer = ImagePreparer::Create({options.cache_dir, options.libpython,
                                         options.shim_library, "patchelf"});
  if (!preparer.ok()) return preparer.status();
  state->preparer = std::move(*preparer);

  bool owner = !g_registrations_claimed.exchange(true);
  const bool torch_first =
      !options.preload_modules.empty() && options.preload_modules[0] == "torch";
  auto start = [&](size_t i, std::function<void(const std::string&)> on_torch_version) {
    Interpreter::Options o;
    o.index = static_cast<int>(i);
    o.owns_registrations = owner && i == 0;
    o.python_executable = options.python_executable;
    o.extra_sys_path = options.extra_sys_path;
    o.preload_modules = options.preload_modules;
    o.lazy_modules = options.lazy_modules;
    o.lazy_functions = options.lazy_functions;
    o.lazy_values = options.lazy_values;
    o.arena_cache = options.arena_cache;
    o.on_torch_version = std::move(on_torch_version);
    return Interpreter::Start(state->preparer.get(), o);
  };
  // Interpreter 0 starts first and alone until the others may join it.
  // What must come first, once per process: its shim's dlopen loads the
  // process's first copy of libtorch_python, whose static initializers make
  // the C++ registrations later copies find (torch_hooks.cc skips their
  // repeats) and make it torch's main interpreter (the one PoolState never
  // finalizes); and the torch the interpreters import must be one the pool
  // is safe on, checked before a second copy of libtorch_python loads.
  // PyTorch 1.x: its whole `import torch` too, whose torch.library
  // registrations the others' no-op Library relies on (boot.py), so they
  // join once it has started and its torch.__version__ passed. PyTorch 2.x:
  // every interpreter registers its own Python kernels and a repeated
  // definition is the same operator (python_kernels.h), so the others join
  // as soon as interpreter 0's `import torch` has read torch/version.py
  // (torch/__init__.py imports it before torch._C) and the version passed:
  // their starts then overlap the rest of its `import torch` (docs/debian13.md,
  // trap 24).
  std::vector<StatusOr<std::unique_ptr<Interpreter>>> started;
  for (size_t i = 0; i < options.interpreters; ++i) started.push_back(Internal("not started"));
  std::optional<Status> reported;  // set on interpreter 0's boot thread, read after its Start
  std::promise<Status> joinable;   // Ok: the others may start; set once
  std::atomic<bool> join_decided{false};
  auto decide = [&](const Status& may_join) {
    if (!join_decided.exchange(true)) joinable.set_value(may_join);
  };
  std::thread first([&] {
    started[0] = start(0, [&](const std::string& version) {
      if (!torch_first || reported) return;
      reported = CheckReportedTorch(version);
      decide(*reported);
    });
    if (started[0].ok() && torch_first) {
      Status torch_ok = Status::Ok();
      if (reported) {
        torch_ok = *reported;
      } else {  // PyTorch 1.x: read once its import has finished
        shim::InterpreterShim& shim = (*started[0])->shim();
        int gil = shim.AcquireGil();
        torch_ok = CheckImportedTorch(shim);
        shim.ReleaseGil(gil);
      }
      if (!torch_ok.ok()) started[0] = torch_ok;
    }
    decide(started[0].status());  // unless the version decided already
  });
  if (options.parallel_start) {
    Status may_join = joinable.get_future().get();
    std::vector<std::thread> threads;
    if (may_join.ok()) {
      for (size_t i = 1; i < options.interpreters; ++i) {
        threads.emplace_back([&, i] { started[i] = start(i, nullptr); });
      }
    }
    first.join();
    for (auto& t : threads) t.join();
  } else {
    first.join();
    for (size_t i = 1; i < options.interpreters && started[0].ok(); ++i) {
      started[i] = start(i, nullptr);
    }
  }
  if (owner && !started[0].ok()) g_registrations_claimed = false;  // let a later pool try
  for (auto& s : started) {
    if (!s.ok()) return s.status();  // started interpreters are finalized with `state`
    state->interpreters.push_back(std::move(*s));
  }
  for (auto& interpreter : state->interpreters) {
    state->interrupters.push_back(std::make_unique<Interrupter>(&interpreter->shim()));
  }
  return std::unique_ptr<InterpreterPool>(new InterpreterPool(std::move(options), std::move(state)));
}

InterpreterPool::~InterpreterPool() = default;

size_t InterpreterPool::size() const { return state_->interpreters.size(); }

InterpreterSession InterpreterPool::Acquire() {
  return detail::OpenSession(state_, state_->balancer.Acquire());
}

InterpreterSession InterpreterPool::AcquireAt(size_t index) {
  if (index >= size()) {
    throw std::out_of_range("interpreter index " + std::to_string(index) + " out of range (pool has " +
                            std::to_string(size()) + ")");
  }
  state_->balancer.AcquireAt(index);
  return detail::OpenSession(state_, index);
}

void InterpreterPool::Interrupt(size_t index, uint64_t token) {
  if (index < state_->interrupters.size()) state_->interrupters[index]->Interrupt(token);
}

ReplicatedObject InterpreterPool::Replicate(ReplicatedObject::Factory factory) {
  return ReplicatedObject(detail::MakeReplicatedState(state_, std::move(factory)));
}

}  // namespace manypy
