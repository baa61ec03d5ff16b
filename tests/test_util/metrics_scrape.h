// MetricValue: one Prometheus counter or gauge of the server's /metrics, read
// over HTTP, for end-to-end tests. Each call opens its own connection:
// thread-safe.
#pragma once

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "tests/test_util/http_client.h"

namespace manypy::testing {

/// The value of `metric` for `model` (empty: any) on the /metrics page at
/// `port`, summed over its series that also carry `label` (e.g.
/// `outcome="success"`; empty: all); 0 when there is none.
inline double MetricValue(int port, const std::string& metric, const std::string& model,
                          const std::string& label = "") {
  HttpConnection connection(port);
  std::istringstream lines(connection.Send("GET", "/metrics").body);
  double sum = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(metric + "{", 0) == 0 &&
        (model.empty() || line.find("model=\"" + model + "\"") != std::string::npos) &&
        (label.empty() || line.find(label) != std::string::npos)) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

/// MetricValue once it equals `value`, or after 5 s whatever it is: a request's
/// outcome is counted just after its reply is sent.
inline double MetricValueOnce(int port, const std::string& metric, const std::string& model,
                              const std::string& label, double value) {
  double seen = MetricValue(port, metric, model, label);
  for (int i = 0; i < 500 && seen != value; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = MetricValue(port, metric, model, label);
  }
  return seen;
}

}  // namespace manypy::testing
