// Prepares, and caches on disk, the private copies of libpython and of every
// shared object that references the CPython API that one interpreter needs.
// Thread-safe (one internal mutex); safe when several processes share a cache.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/elf_object.h"

namespace manypy {

/// The two objects an interpreter starts from; everything else is prepared on import.
struct InterpreterImage {
  int slot = 0;           ///< process-unique: each live interpreter needs distinct files
  std::string libpython;  ///< private libpython copy with a unique soname
  std::string shim;       ///< private shim copy linked against the copies above
};

class ImagePreparer {
 public:
  struct Options {
    std::string cache_dir;
    std::string libpython;  ///< the system libpython (libpython3.11.so.1.0 on Debian 12, 3.13 on 13)
    std::string shim_library;
    std::string patchelf = "patchelf";
  };

  /// Checks that the inputs exist and the cache directory is usable.
  static StatusOr<std::unique_ptr<ImagePreparer>> Create(Options options);

  /// A new process-unique slot number (each live interpreter owns one).
  static int NewSlot();

  StatusOr<InterpreterImage> PrepareInterpreter(int slot);

  /// The copy of the extension module (or any shared object) at `origin` for
  /// interpreter `slot`: DT_NEEDED on the slot's libpython, Python-dependent
  /// dependencies replaced by their copies, GNU_UNIQUE symbols made GLOBAL,
  /// $ORIGIN in its search path pinned to the original directory.
  StatusOr<std::string> PrepareObject(int slot, const std::string& origin);

 private:
  explicit ImagePreparer(Options options) : options_(std::move(options)) {}

  StatusOr<std::string> PrepareLocked(int slot, const std::string& origin) REQUIRES(mu_);
  StatusOr<std::string> PrepareLibpythonLocked(int slot) REQUIRES(mu_);
  /// Where the dynamic linker would find `needed` for an object with `info` at `origin`.
  std::string ResolveNeeded(const std::string& needed, const ElfDynamicInfo& info,
                            const std::string& origin) const;
  StatusOr<bool> IsPythonDependent(const std::string& path) REQUIRES(mu_);

  // Constant after construction.
  const Options options_;
  std::string libpython_soname_;
  std::vector<std::string> system_dirs_;

  Mutex mu_;
  std::map<std::pair<int, std::string>, std::string> prepared_ GUARDED_BY(mu_);
  std::map<std::string, bool> python_dependent_ GUARDED_BY(mu_);
};

}  // namespace manypy
