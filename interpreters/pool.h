// InterpreterPool: N isolated CPython interpreters in one process sharing one
// libtorch. The front door of interpreters/. Thread-safe: any thread may
// acquire sessions concurrently; each session holds one interpreter's GIL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "interpreters/replicated_object.h"
#include "interpreters/run_python.h"
#include "interpreters/session.h"

namespace manypy {

struct PoolOptions {
  /// Number of interpreters; 0 means one per CPU core.
  size_t interpreters = 0;
  /// Where prepared library copies are cached. Empty: $MANYPY_CACHE_DIR, else
  /// $XDG_CACHE_HOME/manypy, else $HOME/.cache/manypy.
  std::string cache_dir;
  /// Inductor's on-disk caches (torch.compile, PyTorch 2.x: compiled kernels,
  /// FX graphs and AOTAutograd's graphs, whose cache the pool turns on unless
  /// TORCHINDUCTOR_AUTOGRAD_CACHE says otherwise), shared by every interpreter
  /// and kept across restarts: set as TORCHINDUCTOR_CACHE_DIR before the
  /// interpreters start. Empty:
  /// $TORCHINDUCTOR_CACHE_DIR if the environment sets it, else
  /// <cache_dir>/inductor.
  std::string compile_cache_dir;
  /// The system libpython the copies are made from.
  std::string libpython;
  /// The Python whose prefix (stdlib, dist-packages) the interpreters use.
  std::string python_executable;
  /// The shim library; empty: ../lib/libmanypy_shim.so beside the program, else the build tree's.
  std::string shim_library;
  /// Intra-op threads for libtorch (process-wide); 0: max(1, cores / interpreters)
  /// so interpreters x threads never oversubscribes the cores.
  int intra_op_threads = 0;
  /// Start interpreters 1..N-1 together, beside interpreter 0 once what it must do first is
  /// done (pool.cc: PyTorch 2.x, its torch version checked; 1.x, its whole start). Else serial.
  bool parallel_start = true;
  /// Cache freed obmalloc arenas (see arena_cache.h). Off only for measurements.
  bool arena_cache = true;
  /// Appended to every interpreter's sys.path.
  std::vector<std::string> extra_sys_path;
  /// Imported by every interpreter at start. torch must be the first: on PyTorch 1.x
  /// interpreter 0's `import torch` makes the process-global operator registrations the
  /// others rely on, so it finishes before they import it (2.x: see parallel_start).
  std::vector<std::string> preload_modules{"torch"};
  /// Imported lazily in every interpreter: `import torch.onnx` (which `import
  /// torch` does) gives a module whose code runs only when an attribute it
  /// does not have yet is read, or a submodule of it is imported; an
  /// interpreter pays for it (heap, import time) only once a model uses it.
  /// Source packages only; a name that is an extension module is imported as
  /// usual. Not numpy itself: libtorch_python imports it inside a C++ function-local
  /// static initialiser (is_numpy_available, on the first call with a Scalar
  /// argument), where an import that releases the GIL deadlocks a second
  /// thread of the interpreter; and every model's first call needs it anyway.
  /// The rest are what `import torch` (and numpy's own __init__) pull in for
  /// export, distributions, downloads, profiling, quantization, masked
  /// tensors, random numbers and FFTs in numpy, none of which eager inference
  /// of a float model calls: together about 10 MiB of heap and library copies
  /// per interpreter (make bench-memory). Modules that `import torch` reads
  /// from at once (torch.jit, torch.testing, torch.multiprocessing) would run
  /// anyway, so they are not listed. torchvision's datasets and io (which
  /// `import torchvision` runs for every model of it) only load data; lazy,
  /// they save about 15 MiB per interpreter (requests, chardet, urllib3 and
  /// 40 dataset classes) and 1 s of import. torchvision.models' detection,
  /// segmentation, video... stay eager: running them registers their model
  /// builders, which torchvision.models.list_models/get_model look up.
  /// torch.utils.checkpoint (activation checkpointing, a training tool):
  /// torchvision.models.densenet imports it, and on PyTorch 2.x it imports
  /// torch._functorch, torch.fx's symbolic shapes and with them sympy: 490
  /// modules and about 30 MiB of heap per interpreter for every torchvision
  /// model (docs/debian13.md, trap 18).
  std::vector<std::string> lazy_modules{
      "torch.utils.data",   "torch.onnx",        "torch.hub",       "torch.distributions",
      "torch.profiler",     "torch.quantization", "torch.nn.quantizable", "torch.nn.quantized",
      "torch.nn.qat",       "torch.nn.intrinsic", "torch.masked",    "torch.quasirandom",
      "numpy.ma",           "numpy.polynomial",  "numpy.random",    "numpy.fft",
      "torchvision.datasets", "torchvision.io", "torch.utils.checkpoint"};
  /// Functions ("module.function") that libraries import at their own import
  /// from a module that is costly to run but call only on rare paths:
  /// `from module import function` gets a stand-in that runs the module (and
  /// its parent packages, all imported lazily until then) at its first call.
  /// torchvision 0.21's roi_align imports torch._dynamo's
  /// is_compile_supported, calling it only when torchvision's C++ operators
  /// are missing; running torch._dynamo (PyTorch 2.x) at `import torchvision`
  /// costs about 0.7 s of import per interpreter (docs/debian13.md, trap 7).
  /// torch.utils.cpp_extension's GeneratedFileCleaner: see lazy_values.
  std::vector<std::string> lazy_functions{
      "torch._dynamo.utils.is_compile_supported",
      "torch.utils.hipify.hipify_python.GeneratedFileCleaner"};
  /// Objects other than functions that libraries import at their own import
  /// but use only on rare paths: `from module import name` gets a stand-in
  /// whose first use (attribute, item, `in`, iteration, len, call) runs the
  /// module, as lazy_functions do; every use is the real object's, but the
  /// stand-in is not the object (`is`, isinstance and type() tell), so only
  /// names whose users just use them belong here. On PyTorch 2.x importing
  /// Inductor (every torch.compile'd model, in every interpreter) imports
  /// torch.utils.hipify.hipify_python's CUDA-to-HIP tables, whose build costs
  /// 0.23 s of CPU per interpreter at every start; Inductor uses them only on
  /// a ROCm build of torch (2.6 torch/_inductor/codegen/aoti_hipify_utils.py:
  /// maybe_hipify_code_wrapper returns first when torch.version.hip is None).
  std::vector<std::string> lazy_values{"torch.utils.hipify.hipify_python.PYTORCH_MAP",
                                       "torch.utils.hipify.hipify_python.PYTORCH_TRIE"};
};

class InterpreterPool {
 public:
  /// Prepares and starts the interpreters; any failure is a status naming it.
  static StatusOr<std::unique_ptr<InterpreterPool>> Create(PoolOptions options = {});
  /// Finalizes every interpreter. No session may be open; replicated objects
  /// still alive keep the interpreters until they go.
  ~InterpreterPool();

  size_t size() const;
  const PoolOptions& options() const { return options_; }

  /// A session on an idle (else the least busy) interpreter.
  InterpreterSession Acquire();
  /// A session on interpreter `index` (blocks while another thread holds its GIL).
  InterpreterSession AcquireAt(size_t index);

  /// Runs `work(session)` with a session on interpreter `index` (released
  /// before `describe` runs) and returns its result, or what it raised as
  /// `describe` words it: RunPython (run_python.h), the way code outside
  /// interpreters/ runs Python.
  template <typename Work, typename Describe = Status (*)(const PythonError&)>
  auto RunAt(size_t index, Work&& work, Describe&& describe = InternalStatus) {
    return RunPython(
        [&] {
          InterpreterSession session = AcquireAt(index);
          return work(session);
        },
        std::forward<Describe>(describe));
  }

  ReplicatedObject Replicate(ReplicatedObject::Factory factory);

  /// Raises _manypy.ExecutionInterrupted (a BaseException) in the Python code
  /// running in interpreter `index` under `token` (InterpreterSession::
  /// BeginInterruptible), if that scope is still open. Returns at once; the
  /// exception fires at the code's next bytecode. Native code that never
  /// returns to Python cannot be interrupted.
  void Interrupt(size_t index, uint64_t token);

 private:
  InterpreterPool(PoolOptions options, std::shared_ptr<detail::PoolState> state)
      : options_(std::move(options)), state_(std::move(state)) {}
  const PoolOptions options_;
  std::shared_ptr<detail::PoolState> state_;
};

}  // namespace manypy
