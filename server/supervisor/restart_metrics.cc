#include "server/supervisor/restart_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

namespace manypy {

void AddRestartMetrics(prometheus::Registry* registry,
                       const std::vector<std::pair<std::string, int64_t>>& restarts) {
  auto& family = prometheus::BuildCounter()
                     .Name("manypy_server_restarts_total")
                     .Help("Restarts of the serving process by its supervisor, by the signal "
                           "that ended the process before (since the supervisor started)")
                     .Register(*registry);
  for (const auto& [signal, count] : restarts) {
    family.Add({{"signal", signal}}).Increment(static_cast<double>(count));
  }
}

}  // namespace manypy
