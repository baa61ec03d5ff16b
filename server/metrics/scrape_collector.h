// ScrapeCollector: the series read at scrape time rather than counted per
// event: each model version's queued requests and running calls (asked of the
// Dispatcher), the process's memory, CPU time and file descriptors, and build
// info. Thread-safe (the Dispatcher locks; /proc is read per scrape).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "server/inference/dispatcher.h"

namespace manypy {

class ScrapeCollector final : public prometheus::Collectable {
 public:
  /// `dispatcher` must outlive the collector's registration.
  explicit ScrapeCollector(const Dispatcher* dispatcher) : dispatcher_(dispatcher) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Dispatcher* const dispatcher_;
};

}  // namespace manypy
