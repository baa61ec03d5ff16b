#include "server/blas_info.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>

namespace manypy {

BlasInfo DetectBlas() {
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string file = std::filesystem::path(path).filename().string();
    if (file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0 ||
        file.rfind("libblis", 0) == 0 || file.rfind("libmkl_rt", 0) == 0) {
      std::error_code ec;
      auto real = std::filesystem::canonical(path, ec);
      info.path = ec ? path : real.string();
      break;
    }
  }
  const std::string& p = info.path;
  if (p.empty()) {
    info.name = "none loaded";
  } else if (p.find("openblas") != std::string::npos) {
    std::string variant = p.find("openmp") != std::string::npos    ? "openmp"
                          : p.find("pthread") != std::string::npos ? "pthread"
                          : p.find("serial") != std::string::npos  ? "serial"
                                                                   : "";
    info.name = "OpenBLAS" + (variant.empty() ? "" : " (" + variant + ")");
    using ThreadsFn = int (*)();
    if (auto fn = reinterpret_cast<ThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) {
      info.threads = fn();
    }
    info.follows_openmp = variant == "openmp";
  } else if (p.find("blis") != std::string::npos) {
    info.name = "BLIS";
  } else if (p.find("atlas") != std::string::npos) {
    info.name = "ATLAS";
  } else if (p.find("mkl") != std::string::npos) {
    info.name = "MKL";
  } else {
    info.name = "reference BLAS (netlib)";
    info.reference = true;
  }
  return info;
}

void LimitBlasThreads(int threads) {
  using SetThreadsFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

}  // namespace manypy
