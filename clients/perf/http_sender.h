// HttpSender: manypy-perf's `-i http`: one synchronous keep-alive HTTP/1.1
// connection (Boost.Beast), plain or TLS, for metadata, config and binary-data inference.
// One per sender thread; not thread-safe.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <memory>
#include <optional>
#include <string>

#include "clients/cpp/infer_input.h"
#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy::perf {

class HttpSender {
 public:
  /// `url` is HOST:PORT. Connects lazily (and again after a broken connection).
  /// With `tls` (client_tls_context.h), over TLS, the server's certificate
  /// checked against HOST. A non-empty `bearer_token` goes with every request
  /// as `Authorization: Bearer <token>`.
  HttpSender(std::string url, int timeout_ms, std::shared_ptr<boost::asio::ssl::context> tls = nullptr,
             std::string bearer_token = "");

  StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                           const std::string& version);
  StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                       const std::string& version);

  /// Prepares the body that Infer() sends: every input as binary data, every
  /// output asked back as binary data.
  void SetInferRequest(const std::string& model, const std::string& version,
                       const client::InferInputs& inputs);
  /// One inference; the status the HTTP code maps to (the body is read, not decoded).
  Status Infer();

 private:
  /// Sends one request; the reply's HTTP status and body.
  StatusOr<std::pair<int, std::string>> Send(const char* method, const std::string& target,
                                             const std::string& body,
                                             std::optional<size_t> json_length);
  Status Connect();
  bool connected() const { return socket_ != nullptr || tls_stream_ != nullptr; }
  void Disconnect();

  const std::string host_, port_;
  const int timeout_ms_;
  boost::asio::io_context io_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
  const std::string authorization_;                        // empty: no Authorization header
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;  // plain HTTP
  std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_stream_;  // HTTPS
  boost::beast::flat_buffer buffer_;
  std::string infer_target_, infer_body_;
  size_t infer_json_length_ = 0;
};

}  // namespace manypy::perf
