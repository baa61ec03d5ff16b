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
};

BlasInfo DetectBlas();

}  // namespace manypy
