// AddRestartMetrics: manypy_server_restarts_total{signal=...} on /metrics,
// the restarts of the serving process the supervisor made before this one
// (by the signal that ended the one before). Call once at start.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace manypy {

/// Registers the family (present with no series when nothing restarted)
/// and sets each signal's count.
void AddRestartMetrics(prometheus::Registry* registry,
                       const std::vector<std::pair<std::string, int64_t>>& restarts);

}  // namespace manypy
