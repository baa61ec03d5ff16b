// ScrapeCollector: the series read at scrape time rather than counted per
// event: each model version's queued requests and running calls (asked of the
// Dispatcher), the process's memory, CPU time and file descriptors, and build
// info, and the response cache's size and evictions. Thread-safe (the Dispatcher locks; /proc is read per scrape).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "server/inference/dispatcher.h"
#include "server/inference/response_cache.h"

namespace manypy {

class ScrapeCollector final : public prometheus::Collectable {
 public:
  /// `dispatcher` and `response_cache` (null: none) must outlive the collector's registration.
  explicit ScrapeCollector(const Dispatcher* dispatcher, const ResponseCache* response_cache = nullptr)
      : dispatcher_(dispatcher), response_cache_(response_cache) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Dispatcher* const dispatcher_;
  const ResponseCache* const response_cache_;
};

}  // namespace manypy
