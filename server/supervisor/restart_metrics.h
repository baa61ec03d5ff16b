// AddRestartMetrics: manypy_server_restarts_total{signal=...} on /metrics,
// the restarts of the serving process the supervisor made before this one
// (by the signal that ended the one before), and manypy_server_reloads_total,
// its SIGHUP replacements (this one included when SIGHUP started it). Two
// families because an alert fires on the first (a crash) and not on the
// second (an operator's reload). Call once at start.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace manypy {

/// Registers both families (restarts present with no series when nothing
/// restarted) and sets each signal's count and the reloads'.
void AddRestartMetrics(prometheus::Registry* registry,
                       const std::vector<std::pair<std::string, int64_t>>& restarts,
                       int64_t reloads);

}  // namespace manypy
