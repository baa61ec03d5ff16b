// manypy-perf: measures throughput and latency of one model on any Open
// Inference Protocol server, over gRPC or HTTP/REST (-i http). See PerfUsage() (--help) for the flags.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include "clients/cpp/inference_client.h"
#include "clients/cpp/bearer_token.h"
#include "clients/perf/async_grpc_load.h"
#include "clients/perf/client_tls_context.h"
#include "clients/perf/http_sender.h"
#include "clients/perf/input_data.h"
#include "clients/perf/load_runner.h"
#include "clients/perf/perf_options.h"
#include "clients/perf/report.h"

namespace {

int Fail(const manypy::Status& s) {
  std::cerr << "manypy-perf: " << s.ToString() << "\n";
  return 1;
}

// How long a gRPC connection may take to come up: the request deadline, at most
// 10 s (a stopped server then fails the run in 10 s, not at the deadline).
std::chrono::milliseconds ConnectTimeout(const manypy::perf::PerfOptions& options) {
  return std::chrono::milliseconds(std::min(options.timeout_ms, 10000));
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
  // The model's signature and batching, then one sender per sender thread.
  StatusOr<inference::ModelMetadataResponse> metadata = Internal("no metadata");
  StatusOr<inference::ModelConfigResponse> config = Internal("no config");
  std::unique_ptr<client::InferenceClient> grpc_client;
  std::string token;
  if (!options.auth_token_file.empty()) {
    auto read = client::ReadBearerTokenFile(options.auth_token_file);
    if (!read.ok()) return Fail(read.status());
    token = std::move(*read);
  }
  std::shared_ptr<boost::asio::ssl::context> http_tls;  // shared by every HTTP sender
  if (options.protocol == "http" && options.tls.on()) {
    auto made = perf::MakeClientTlsContext(options.tls);
    if (!made.ok()) return Fail(made.status());
    http_tls = std::move(*made);
  }
  if (options.protocol == "http") {
    perf::HttpSender probe(options.url, options.timeout_ms, http_tls, token);
    metadata = probe.ModelMetadata(options.model, options.model_version);
    config = probe.ModelConfig(options.model, options.model_version);
  } else {
    client::InferenceClient::Options probe;
    probe.tls = options.tls;
    probe.bearer_token = token;
    auto created = client::InferenceClient::Create(options.url, probe);
    if (!created.ok()) return Fail(created.status());
    grpc_client = std::move(*created);
    if (Status up = grpc_client->WaitForConnection(ConnectTimeout(options)); !up.ok()) {
      return Fail(up);
    }
    metadata = grpc_client->ModelMetadata(options.model, options.model_version);
    config = grpc_client->ModelConfig(options.model, options.model_version);
  }
  if (!metadata.ok()) return Fail(metadata.status());
  // Servers without ModelConfig (or models without one) are taken as not batching.
  bool batching = config.ok() && config->config().max_batch_size() > 0;
  auto made = perf::MakeInputSets(*metadata, batching, options);
  if (!made.ok()) return Fail(made.status());
  // One set unless an --input is given several times; each sender thread
  // cycles through them from its own offset (InputSetFor).
  const std::vector<client::InferInputs> input_sets = std::move(*made);
  const client::InferInputs& inputs = input_sets.front();
  const size_t sets = input_sets.size();

  perf::SenderFactory senders;
  if (options.protocol == "http") {
    senders = [&](int worker) -> perf::Sender {
      auto sender =
          std::make_shared<perf::HttpSender>(options.url, options.timeout_ms, http_tls, token);
      sender->SetInferRequest(options.model, options.model_version, inputs);
      if (sets == 1) return [sender](perf::SendFigures*) { return sender->Infer(); };
      // Several sets: the request's body is rebuilt for each request's set.
      return [&, sender, worker, k = uint64_t{0}](perf::SendFigures*) mutable {
        sender->SetInferRequest(options.model, options.model_version,
                                input_sets[perf::InputSetFor(worker, k++, sets)]);
        return sender->Infer();
      };
    };
  } else {
    client::InferOptions infer;
    infer.model_name = options.model;
    infer.model_version = options.model_version;
    infer.timeout = std::chrono::milliseconds(options.timeout_ms);
    // One connection per concurrent stream, as that many independent clients would have.
    senders = [&, infer](int worker) -> perf::Sender {
      client::InferenceClient::Options own;
      own.dedicated_connection = true;
      own.tls = options.tls;
      own.bearer_token = token;
      auto created = client::InferenceClient::Create(options.url, own);
      std::shared_ptr<client::InferenceClient> stream(created.ok() ? std::move(*created) : nullptr);
      // Connected before the stream is handed out, so before anything is measured
      // (LoadRunner makes every sender first): see WaitForConnection.
      Status failed = stream ? stream->WaitForConnection(ConnectTimeout(options)) : created.status();
      if (!failed.ok()) return [failed](perf::SendFigures*) { return failed; };
      // This thread's k-th request sends set InputSetFor(worker, k) (set 0 when one).
      if (options.streaming) {
        return [&, infer, stream, worker, k = uint64_t{0}](perf::SendFigures* figures) mutable {
          figures->responses = 0;
          const client::InferInputs& these = input_sets[perf::InputSetFor(worker, k++, sets)];
          return stream->GenerateStream(these, infer, [figures](client::InferResult&&) {
            if (figures->responses++ == 0) figures->first_response = std::chrono::steady_clock::now();
          });
        };
      }
      return [&, infer, stream, worker, k = uint64_t{0}](perf::SendFigures*) mutable {
        return stream->Infer(input_sets[perf::InputSetFor(worker, k++, sets)], infer).status();
      };
    };
  }
  perf::LoadRunner runner(senders, options);
  std::shared_ptr<perf::AsyncGrpcLoad> async_load;
  if (options.async) {
    client::InferOptions infer;
    infer.model_name = options.model;
    infer.model_version = options.model_version;
    StatusOr<inference::ModelInferRequest> request = grpc_client->MakeRequest(inputs, infer);
    if (!request.ok()) return Fail(request.status());
    async_load = std::make_shared<perf::AsyncGrpcLoad>(
        [&]() {
          client::InferenceClient::Options own;
          own.dedicated_connection = true;  // one connection per stream, as with threads
          own.tls = options.tls;
          own.bearer_token = token;
          return client::InferenceClient::Create(options.url, own);
        },
        std::move(*request), std::chrono::milliseconds(options.timeout_ms), ConnectTimeout(options));
    runner.set_closed_loop_driver(
        {[async_load](int streams) { return async_load->Connect(streams); },
         [async_load](perf::Recorder* recorder, const std::atomic<bool>& stop) {
           async_load->Run(recorder, stop);
         }});
  }
  std::ofstream window_log;
  if (!options.window_log_path.empty()) {
    window_log.open(options.window_log_path, std::ios::app);
    if (!window_log) return Fail(Internal("cannot write " + options.window_log_path));
    runner.set_window_observer([&](const perf::StepSummary& w) {
      perf::WriteJsonLine(w, window_log, options.protocol);
    });
  }
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
    perf::WriteJson(steps, json, options.protocol);
    if (!json) return Fail(Internal("cannot write " + options.json_path));
  }
  return 0;
}
