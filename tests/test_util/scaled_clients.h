// ScaledClients: 4 client threads calling the test repository's `scaled` model
// (2 over gRPC, 2 over HTTP with a connection per request) until stopped, and
// the Tally of their answers by kind; for end-to-end tests of restarts.
// Tally is thread-safe; ScaledClients is started and stopped by one thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy::testing {

/// Answers by kind from many client threads.
class Tally {
 public:
  void Count(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[kind];
  }
  int Of(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[kind];
  }
  std::string ToString() {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream out;
    for (const auto& [kind, count] : counts_) out << kind << "=" << count << " ";
    return out.str();
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

/// 4 clients call `scaled` (2 over gRPC, 2 over HTTP with a connection per
/// request, so that a refused connection would show) until stopped.
class ScaledClients {
 public:
  ScaledClients(const std::string& grpc_address, int http_port) {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this, grpc_address] {
        auto stub = GRPCInferenceService::NewStub(
            grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials()));
        while (!stop_) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          ctx.set_wait_for_ready(true);  // a restart is a wait, not a failure
          ModelInferResponse out;
          grpc::Status s = stub->ModelInfer(&ctx, FloatRequest("scaled", {1.5f, 4.f}), &out);
          bool right = s.ok() && FromRaw<float>(out.raw_output_contents(0)) == std::vector<float>{3.f, 8.f};
          tally.Count(right ? "grpc ok"
                      : s.error_code() == grpc::StatusCode::UNAVAILABLE ? "grpc unavailable"
                                                                        : "grpc other: " + s.error_message());
        }
      });
      threads_.emplace_back([this, http_port] {
        const std::string body =
            R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[2],"data":[1.5,4]}]})";
        while (!stop_) {
          std::unique_ptr<HttpConnection> connection;
          try {
            connection = std::make_unique<HttpConnection>(http_port);
          } catch (const std::exception& e) {
            tally.Count(std::string("http refused: ") + e.what());
            continue;
          }
          HttpReply reply = connection->Send("POST", "/v2/models/scaled/infer", body);
          tally.Count(reply.status == 200 && reply.body.find("[3.0,8.0]") != std::string::npos ? "http ok"
                      : reply.status == 0                                      ? "http closed"
                      : reply.status == 503 ? "http unavailable"
                                            : "http other: " + std::to_string(reply.status));
        }
      });
    }
  }
  ~ScaledClients() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  Tally tally;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace manypy::testing
