#include "server/supervisor/restart_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

namespace manypy {

void AddRestartMetrics(prometheus::Registry* registry,
                       const std::vector<std::pair<std::string, int64_t>>& restarts,
                       int64_t reloads) {
  auto& family = prometheus::BuildCounter()
                     .Name("manypy_server_restarts_total")
                     .Help("Restarts of the serving process by its supervisor, by the signal "
                           "that ended the process before (since the supervisor started)")
                     .Register(*registry);
  for (const auto& [signal, count] : restarts) {
    family.Add({{"signal", signal}}).Increment(static_cast<double>(count));
  }
  prometheus::BuildCounter()
      .Name("manypy_server_reloads_total")
      .Help("SIGHUP replacements of the serving process by its supervisor (a new process "
            "with the binary, packages and --config read again), this one included when "
            "SIGHUP started it (since the supervisor started)")
      .Register(*registry)
      .Add({})
      .Increment(static_cast<double>(reloads));
}

}  // namespace manypy
