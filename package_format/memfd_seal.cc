#include "package_format/memfd_seal.h"

#include <errno.h>
#include <fcntl.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace manypy {

Status SealAgainstChanges(int memfd, const std::string& what) {
  // The kernel refuses the write seal (EBUSY) while a page of the copy still
  // has a reference beyond the page cache's, which passes: loads under
  // make bench-many-models's churn failed so before the retries
  // (docs/benchmarks.md, bench-many-models).
  constexpr int kAttempts = 10;
  for (int attempt = 0;; ++attempt) {
    if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0) {
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    if (errno != EBUSY || attempt + 1 == kAttempts) {
      return Internal(what + ": sealing the in-memory copy failed: " + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << attempt));
  }
}

}  // namespace manypy
