// Which BLAS libtorch calls in this process, read from the loaded libraries
// (Debian's libtorch calls the generic libblas.so.3, whichever alternative
// provides it). Pure function of the process state; thread-safe.
#pragma once

#include <string>

namespace manypy {

struct BlasInfo {
  std::string path;     ///< the libblas.so.3 (or other BLAS) mapped, resolved; empty if none
  std::string name;     ///< "OpenBLAS (openmp)", "BLIS", "reference BLAS (netlib)", ...
  bool reference = false;  ///< the unoptimized netlib BLAS
  int threads = 0;         ///< the BLAS's own thread count where it tells (0: unknown)
  /// Takes each calling thread's OpenMP thread count, which libtorch sets to
  /// its intra-op thread count in every thread that runs a model.
  bool follows_openmp = false;
};

/// Caps a BLAS with a thread pool of its own (OpenBLAS's pthread build) at
/// `threads`; an OpenMP one follows libtorch's setting already.
void LimitBlasThreads(int threads);

BlasInfo DetectBlas();

}  // namespace manypy
