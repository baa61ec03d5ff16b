#include "server/supervisor/serving_binary.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace manypy {

StatusOr<std::string> ServingBinary() {
  char self[PATH_MAX];
  if (realpath("/proc/self/exe", self) == nullptr) {
    return NotFound("cannot find the serving binary: /proc/self/exe cannot be read");
  }
  std::string prefix = self;
  for (int up = 0; up < 2; ++up) prefix = prefix.substr(0, prefix.rfind('/'));  // .../bin/manypy-server
  // MANYPY_LIBEXEC_DIR: CMake's CMAKE_INSTALL_LIBEXECDIR ("libexec").
  const std::string path = prefix + "/" MANYPY_LIBEXEC_DIR "/manypy-serving";
  if (access(path.c_str(), X_OK) != 0) {
    return NotFound("the serving binary " + path + " is missing or not executable (manypy-server " +
                    "is a launcher that runs it: install both, keeping bin/ and " MANYPY_LIBEXEC_DIR
                    "/ side by side)");
  }
  return path;
}

}  // namespace manypy
