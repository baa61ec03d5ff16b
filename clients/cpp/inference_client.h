// InferenceClient: a synchronous client for any Open Inference Protocol
// (KServe v2 / Triton) gRPC server. Thread-safe: one client may serve many threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clients/cpp/infer_input.h"
#include "clients/cpp/infer_result.h"
#include "clients/cpp/tls_options.h"
#include "common/status.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace manypy::client {

/// How one inference is asked for.
struct InferOptions {
  std::string model_name;
  std::string model_version;  // empty: the server's choice
  std::string request_id;     // echoed back by the server
  /// Outputs wanted, in order; empty: all of them.
  std::vector<std::string> requested_outputs;
  /// Send inputs as raw_input_contents (true) or typed contents (false).
  bool raw_inputs = true;
  /// Ask for outputs as raw bytes (true) or typed contents (false).
  bool raw_outputs = true;
  /// Deadline of this call; zero: the client's default timeout.
  std::chrono::milliseconds timeout{0};
};

class InferenceClient {
 public:
  struct Options {
    /// Largest message sent or received, in bytes.
    int max_message_size = 64 << 20;
    /// Deadline of each call that does not set its own; zero: none.
    std::chrono::milliseconds default_timeout{60000};
    /// A TCP connection of this client's own. gRPC otherwise shares one
    /// connection among the channels to an address with the same arguments,
    /// so N clients would look like one to a server (and to SO_REUSEPORT).
    bool dedicated_connection = false;
    /// TLS to the server (verified with tls.ca_file); plain text by default.
    TlsOptions tls;
    /// Sent with every call as `authorization: Bearer <token>` when not empty
    /// (servers started with --auth-token-file; bearer_token.h reads one).
    std::string bearer_token;
  };

  /// Connects lazily to `address` ("host:port"); fails only on bad arguments
  /// (unreadable TLS files included). With TLS, the server's certificate must
  /// name the host of `address`.
  static StatusOr<std::unique_ptr<InferenceClient>> Create(const std::string& address,
                                                           Options options);
  static StatusOr<std::unique_ptr<InferenceClient>> Create(const std::string& address) {
    return Create(address, Options());
  }

  /// Connects now instead of at the first call, waiting up to `timeout` for
  /// the connection: OK once it is up, UNAVAILABLE naming the address if not.
  /// A failed attempt is retried (after gRPC's reconnect backoff, 1 s at
  /// first) within `timeout`. Load generators call it before measuring: gRPC
  /// 1.51 (Debian 12) sometimes fails a connect() still in progress with a
  /// stale errno ("No such file or directory"), and calls made in the backoff
  /// that follows fail at once with UNAVAILABLE (grpc/grpc#35064, fixed in
  /// later versions).
  Status WaitForConnection(std::chrono::milliseconds timeout) const;

  StatusOr<bool> ServerLive() const;
  StatusOr<bool> ServerReady() const;
  StatusOr<bool> ModelReady(const std::string& model, const std::string& version = "") const;
  /// grpc.health.v1 Check of `service` ("" = the whole server).
  StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "") const;
  StatusOr<inference::ServerMetadataResponse> ServerMetadata() const;
  StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                           const std::string& version = "") const;
  StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                       const std::string& version = "") const;
  /// Empty `model`: every model.
  StatusOr<inference::ModelStatisticsResponse> ModelStatistics(
      const std::string& model = "", const std::string& version = "") const;
  StatusOr<inference::RepositoryIndexResponse> RepositoryIndex(bool ready_only = false) const;
  Status LoadModel(const std::string& model) const;
  Status UnloadModel(const std::string& model) const;

  /// One inference; an error carries the server's code and message.
  StatusOr<InferResult> Infer(const InferInputs& inputs, const InferOptions& options) const;
  /// One request on ModelStreamInfer: `on_response` gets each response as it
  /// arrives (a streaming model's, one per value it yields; an ordinary
  /// model's one), on this thread, until the stream's final flag. The error
  /// that ended the stream, if any (the responses before it were handed on).
  Status GenerateStream(const InferInputs& inputs, const InferOptions& options,
                        const std::function<void(InferResult&&)>& on_response) const;

  const std::string& address() const { return address_; }

  /// For callers that drive calls themselves (gRPC's asynchronous API, as
  /// manypy-perf --async does): the ModelInferRequest Infer would send for
  /// `inputs` and `options`, the client's channel, and a call's context set
  /// up as Infer's (the deadline: `timeout`, or the default when zero; the token).
  StatusOr<inference::ModelInferRequest> MakeRequest(const InferInputs& inputs,
                                                     const InferOptions& options) const;
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  void PrepareContext(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const;

 private:
  InferenceClient(std::string address, Options options, std::shared_ptr<grpc::Channel> channel);

  // Constant after construction; the stubs are thread-safe.
  const std::string address_;
  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace manypy::client
