// manypy-perf: measures throughput and latency of one model on any Open
// Inference Protocol gRPC server. See PerfUsage() (--help) for the flags.
#include <fstream>
#include <iostream>

#include "clients/cpp/inference_client.h"
#include "clients/perf/input_data.h"
#include "clients/perf/load_runner.h"
#include "clients/perf/perf_options.h"
#include "clients/perf/report.h"

namespace {

int Fail(const manypy::Status& s) {
  std::cerr << "manypy-perf: " << s.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace manypy;
  StatusOr<perf::PerfOptions> parsed = perf::ParsePerfOptions(argc, argv);
  if (!parsed.ok()) return Fail(parsed.status()) + 1;
  const perf::PerfOptions& options = *parsed;
  if (options.help) {
    std::cout << perf::PerfUsage();
    return 0;
  }
  auto created = client::InferenceClient::Create(options.url);
  if (!created.ok()) return Fail(created.status());
  const client::InferenceClient& client = **created;

  auto metadata = client.ModelMetadata(options.model, options.model_version);
  if (!metadata.ok()) return Fail(metadata.status());
  // Servers without ModelConfig (or models without one) are taken as not batching.
  auto config = client.ModelConfig(options.model, options.model_version);
  bool batching = config.ok() && config->config().max_batch_size() > 0;
  auto inputs = perf::MakeInputs(*metadata, batching, options);
  if (!inputs.ok()) return Fail(inputs.status());

  perf::LoadRunner runner(&client, std::move(*inputs), options);
  std::vector<perf::StepSummary> steps;
  if (!options.rates.empty()) {
    for (double rate : options.rates) steps.push_back(runner.RunOpenLoop(rate));
  } else {
    for (int c : options.concurrency) steps.push_back(runner.RunClosedLoop(c));
  }

  if (options.csv_path.empty()) {
    perf::WriteCsv(steps, std::cout);
  } else {
    std::ofstream csv(options.csv_path);
    perf::WriteCsv(steps, csv);
    if (!csv) return Fail(Internal("cannot write " + options.csv_path));
  }
  if (!options.json_path.empty()) {
    std::ofstream json(options.json_path);
    perf::WriteJson(steps, json);
    if (!json) return Fail(Internal("cannot write " + options.json_path));
  }
  return 0;
}
