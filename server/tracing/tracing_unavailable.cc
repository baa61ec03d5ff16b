// Tracing on a build without opentelemetry-cpp (Debian 12 has no package
// for it): the flags are refused with the reason CMake recorded.
#include "server/tracing/tracing.h"

namespace manypy {

bool TracingBuiltIn() { return false; }

std::string TracingUnavailableReason() { return MANYPY_TRACING_UNAVAILABLE_REASON; }

StatusOr<std::unique_ptr<Tracing>> StartTracing(const TracingOptions&) {
  return FailedPrecondition("tracing is not built into this manypy-server: " +
                            TracingUnavailableReason());
}

}  // namespace manypy
