#include "clients/perf/http_sender.h"

#include <google/protobuf/util/json_util.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/http.hpp>

#include "clients/cpp/bearer_token.h"

namespace manypy::perf {
namespace {

namespace http = boost::beast::http;
namespace net = boost::asio;

// The HTTP status the server maps each manypy status to, back (see server/http/http_status.h).
Status FromHttp(int code, const std::string& body) {
  StatusCode s = code == 400   ? StatusCode::kInvalidArgument
                 : code == 404 ? StatusCode::kNotFound
                 : code == 409 ? StatusCode::kAlreadyExists
                 : code == 413 || code == 429 ? StatusCode::kResourceExhausted
                 : code == 503 ? StatusCode::kUnavailable
                 : code == 504 ? StatusCode::kDeadlineExceeded
                 : code == 499 ? StatusCode::kCancelled
                               : StatusCode::kInternal;
  return Status(s, "HTTP " + std::to_string(code) + ": " + body.substr(0, 300));
}

std::string ModelPath(const std::string& model, const std::string& version) {
  return "/v2/models/" + model + (version.empty() ? "" : "/versions/" + version);
}

template <typename Message>
StatusOr<Message> Parse(const std::string& json) {
  Message m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto s = google::protobuf::util::JsonStringToMessage(json, &m, options);
  if (!s.ok()) return InvalidArgument("cannot read the server's JSON: " + s.ToString());
  return m;
}

// One request written and its reply read, on a plain or a TLS stream.
template <typename Stream>
void Exchange(Stream& stream, const http::request<http::string_body>& req, boost::beast::flat_buffer& buffer,
              http::response_parser<http::string_body>& parser, boost::system::error_code& ec) {
  http::write(stream, req, ec);
  if (!ec) http::read(stream, buffer, parser, ec);
}

}  // namespace

HttpSender::HttpSender(std::string url, int timeout_ms, std::shared_ptr<net::ssl::context> tls,
                       std::string bearer_token)
    : host_(url.substr(0, url.rfind(':'))),
      port_(url.rfind(':') == std::string::npos ? (tls ? "443" : "80") : url.substr(url.rfind(':') + 1)),
      timeout_ms_(timeout_ms),
      tls_(std::move(tls)),
      authorization_(bearer_token.empty() ? "" : client::BearerAuthorization(bearer_token)) {}

Status HttpSender::Connect() {
  boost::system::error_code ec;
  net::ip::tcp::resolver resolver(io_);
  auto endpoints = resolver.resolve(host_, port_, ec);
  if (ec) return Unavailable("cannot resolve " + host_ + ": " + ec.message());
  auto socket = std::make_unique<net::ip::tcp::socket>(io_);
  net::connect(*socket, endpoints, ec);
  if (ec) return Unavailable("cannot connect to " + host_ + ":" + port_ + ": " + ec.message());
  socket->set_option(net::ip::tcp::no_delay(true));
  // Synchronous reads and writes (the TLS handshake too) give up after the request timeout.
  timeval tv{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(socket->native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  buffer_.clear();
  if (tls_ == nullptr) {
    socket_ = std::move(socket);
    return Status::Ok();
  }
  auto stream = std::make_unique<net::ssl::stream<net::ip::tcp::socket>>(std::move(*socket), *tls_);
  SSL_set_tlsext_host_name(stream->native_handle(), host_.c_str());  // SNI
  stream->set_verify_callback(net::ssl::host_name_verification(host_));
  stream->handshake(net::ssl::stream_base::client, ec);
  if (ec) return Unavailable("TLS handshake with " + host_ + ":" + port_ + " failed: " + ec.message());
  tls_stream_ = std::move(stream);
  return Status::Ok();
}

void HttpSender::Disconnect() {
  socket_.reset();
  tls_stream_.reset();  // no close_notify: the server reads a truncated stream and closes too
}

StatusOr<std::pair<int, std::string>> HttpSender::Send(const char* method, const std::string& target,
                                                       const std::string& body,
                                                       std::optional<size_t> json_length) {
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, host_);
  req.set(http::field::content_type, json_length ? "application/octet-stream" : "application/json");
  if (json_length) req.set("Inference-Header-Content-Length", std::to_string(*json_length));
  if (!authorization_.empty()) req.set(http::field::authorization, authorization_);
  req.body() = body;
  req.prepare_payload();
  for (int attempt = 0; attempt < 2; ++attempt) {  // once more after a closed keep-alive connection
    if (!connected()) MANYPY_RETURN_IF_ERROR(Connect());
    boost::system::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 31);
    if (tls_stream_ != nullptr) {
      Exchange(*tls_stream_, req, buffer_, parser, ec);
    } else {
      Exchange(*socket_, req, buffer_, parser, ec);
    }
    if (!ec) {
      auto& res = parser.get();
      if (!res.keep_alive()) Disconnect();
      return std::make_pair(static_cast<int>(res.result_int()), std::move(res.body()));
    }
    Disconnect();
    if (ec == net::error::would_block || ec == net::error::timed_out) {
      return Status(StatusCode::kDeadlineExceeded, "no reply within " + std::to_string(timeout_ms_) + " ms");
    }
    if (attempt == 1) return Unavailable("HTTP: " + ec.message());
  }
  return Unavailable("HTTP: no reply");
}

StatusOr<inference::ModelMetadataResponse> HttpSender::ModelMetadata(const std::string& model,
                                                                     const std::string& version) {
  auto reply = Send("GET", ModelPath(model, version), "", std::nullopt);
  if (!reply.ok()) return reply.status();
  if (reply->first != 200) return FromHttp(reply->first, reply->second);
  return Parse<inference::ModelMetadataResponse>(reply->second);
}

StatusOr<inference::ModelConfigResponse> HttpSender::ModelConfig(const std::string& model,
                                                                 const std::string& version) {
  auto reply = Send("GET", ModelPath(model, version) + "/config", "", std::nullopt);
  if (!reply.ok()) return reply.status();
  if (reply->first != 200) return FromHttp(reply->first, reply->second);
  auto config = Parse<inference::ModelConfig>(reply->second);
  if (!config.ok()) return config.status();
  inference::ModelConfigResponse response;
  *response.mutable_config() = std::move(*config);
  return response;
}

void HttpSender::SetInferRequest(const std::string& model, const std::string& version,
                                 const client::InferInputs& inputs) {
  infer_target_ = ModelPath(model, version) + "/infer";
  std::string json = R"({"parameters":{"binary_data_output":true},"inputs":[)";
  std::string binary;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    std::string shape;
    for (int64_t d : in.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    // Input names and datatypes come from the model's metadata: no characters to escape.
    json += (i ? "," : "") + std::string(R"({"name":")") + in.name + R"(","datatype":")" + in.datatype +
            R"(","shape":[)" + shape + R"(],"parameters":{"binary_data_size":)" +
            std::to_string(in.raw.size()) + "}}";
    binary += in.raw;
  }
  json += "]}";
  infer_json_length_ = json.size();
  infer_body_ = json + binary;
}

Status HttpSender::Infer() {
  auto reply = Send("POST", infer_target_, infer_body_, infer_json_length_);
  if (!reply.ok()) return reply.status();
  return reply->first == 200 ? Status::Ok() : FromHttp(reply->first, reply->second);
}

}  // namespace manypy::perf
