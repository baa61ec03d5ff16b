#include "clients/cpp/inference_client.h"

#include <grpcpp/grpcpp.h>

#include "clients/cpp/bearer_token.h"
#include "clients/cpp/contents_codec.h"
#include "clients/cpp/grpc_status.h"

namespace manypy::client {

using inference::GRPCInferenceService;

StatusOr<std::unique_ptr<InferenceClient>> InferenceClient::Create(const std::string& address,
                                                                   Options options) {
  if (address.empty()) return InvalidArgument("empty server address");
  if (options.max_message_size <= 0) return InvalidArgument("max_message_size must be positive");
  if (options.default_timeout.count() < 0) return InvalidArgument("default_timeout is negative");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_size);
  args.SetMaxSendMessageSize(options.max_message_size);
  if (options.dedicated_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls.on()) {
    auto pem = ReadTlsFiles(options.tls);
    if (!pem.ok()) return pem.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem->ca;  // empty: gRPC's default roots
    ssl.pem_private_key = pem->key;
    ssl.pem_cert_chain = pem->cert;
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(address, credentials, args);
  if (!channel) return Internal("could not create a channel to " + address);
  return std::unique_ptr<InferenceClient>(new InferenceClient(address, options, std::move(channel)));
}

InferenceClient::InferenceClient(std::string address, Options options,
                                 std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(GRPCInferenceService::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

void InferenceClient::PrepareContext(grpc::ClientContext* ctx,
                                     std::chrono::milliseconds timeout) const {
  if (timeout.count() == 0) timeout = options_.default_timeout;
  if (timeout.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!options_.bearer_token.empty()) {
    ctx->AddMetadata("authorization", BearerAuthorization(options_.bearer_token));
  }
}

namespace {

// One unary call with the default deadline; returns the response or the converted error.
template <typename Stub, typename Request, typename Response>
StatusOr<Response> Call(Stub* stub,
                        grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                     Response*),
                        const Request& request, grpc::ClientContext* ctx) {
  Response response;
  grpc::Status s = (stub->*method)(ctx, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

}  // namespace

#define MANYPY_CLIENT_CALL(stub, Method, request)                            \
  [&]() {                                                                    \
    grpc::ClientContext ctx;                                                 \
    PrepareContext(&ctx, std::chrono::milliseconds(0));                      \
    return Call(stub.get(), &std::remove_reference_t<decltype(*stub)>::Method, request, \
                &ctx);                                                       \
  }()

Status InferenceClient::WaitForConnection(std::chrono::milliseconds timeout) const {
  if (channel_->WaitForConnected(std::chrono::system_clock::now() + timeout)) return Status::Ok();
  return Unavailable("could not connect to " + address_ + " within " +
                     std::to_string(timeout.count()) + " ms");
}

StatusOr<bool> InferenceClient::ServerLive() const {
  auto r = MANYPY_CLIENT_CALL(stub_, ServerLive, inference::ServerLiveRequest());
  if (!r.ok()) return r.status();
  return r->live();
}

StatusOr<bool> InferenceClient::ServerReady() const {
  auto r = MANYPY_CLIENT_CALL(stub_, ServerReady, inference::ServerReadyRequest());
  if (!r.ok()) return r.status();
  return r->ready();
}

StatusOr<bool> InferenceClient::ModelReady(const std::string& model,
                                           const std::string& version) const {
  inference::ModelReadyRequest req;
  req.set_name(model);
  req.set_version(version);
  auto r = MANYPY_CLIENT_CALL(stub_, ModelReady, req);
  if (!r.ok()) return r.status();
  return r->ready();
}

StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> InferenceClient::Health(
    const std::string& service) const {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  auto r = MANYPY_CLIENT_CALL(health_, Check, req);
  if (!r.ok()) return r.status();
  return r->status();
}

StatusOr<inference::ServerMetadataResponse> InferenceClient::ServerMetadata() const {
  return MANYPY_CLIENT_CALL(stub_, ServerMetadata, inference::ServerMetadataRequest());
}

StatusOr<inference::ModelMetadataResponse> InferenceClient::ModelMetadata(
    const std::string& model, const std::string& version) const {
  inference::ModelMetadataRequest req;
  req.set_name(model);
  req.set_version(version);
  return MANYPY_CLIENT_CALL(stub_, ModelMetadata, req);
}

StatusOr<inference::ModelConfigResponse> InferenceClient::ModelConfig(
    const std::string& model, const std::string& version) const {
  inference::ModelConfigRequest req;
  req.set_name(model);
  req.set_version(version);
  return MANYPY_CLIENT_CALL(stub_, ModelConfig, req);
}

StatusOr<inference::ModelStatisticsResponse> InferenceClient::ModelStatistics(
    const std::string& model, const std::string& version) const {
  inference::ModelStatisticsRequest req;
  req.set_name(model);
  req.set_version(version);
  return MANYPY_CLIENT_CALL(stub_, ModelStatistics, req);
}

StatusOr<inference::RepositoryIndexResponse> InferenceClient::RepositoryIndex(
    bool ready_only) const {
  inference::RepositoryIndexRequest req;
  req.set_ready(ready_only);
  return MANYPY_CLIENT_CALL(stub_, RepositoryIndex, req);
}

Status InferenceClient::LoadModel(const std::string& model) const {
  inference::RepositoryModelLoadRequest req;
  req.set_model_name(model);
  return MANYPY_CLIENT_CALL(stub_, RepositoryModelLoad, req).status();
}

Status InferenceClient::UnloadModel(const std::string& model) const {
  inference::RepositoryModelUnloadRequest req;
  req.set_model_name(model);
  return MANYPY_CLIENT_CALL(stub_, RepositoryModelUnload, req).status();
}

StatusOr<inference::ModelInferRequest> InferenceClient::MakeRequest(
    const InferInputs& inputs, const InferOptions& options) const {
  if (options.model_name.empty()) return InvalidArgument("InferOptions.model_name is empty");
  inference::ModelInferRequest req;
  req.set_model_name(options.model_name);
  req.set_model_version(options.model_version);
  req.set_id(options.request_id);
  for (const InferInput& in : inputs) {
    auto* t = req.add_inputs();
    t->set_name(in.name);
    t->set_datatype(in.datatype);
    for (int64_t d : in.shape) t->add_shape(d);
    if (options.raw_inputs) {
      req.add_raw_input_contents(in.raw);
    } else {
      Status s = RawToContents(in.datatype, in.raw, t->mutable_contents());
      if (!s.ok()) return Status(s.code(), "input '" + in.name + "': " + s.message());
    }
  }
  for (const std::string& name : options.requested_outputs) {
    auto* o = req.add_outputs();
    o->set_name(name);
    (*o->mutable_parameters())["binary_data"].set_bool_param(options.raw_outputs);
  }
  if (options.requested_outputs.empty() && !options.raw_outputs) {
    return InvalidArgument("typed (non-raw) outputs need requested_outputs to name them");
  }
  return req;
}

StatusOr<InferResult> InferenceClient::Infer(const InferInputs& inputs,
                                             const InferOptions& options) const {
  StatusOr<inference::ModelInferRequest> req = MakeRequest(inputs, options);
  if (!req.ok()) return req.status();
  grpc::ClientContext ctx;
  PrepareContext(&ctx, options.timeout);
  inference::ModelInferResponse response;
  grpc::Status s = stub_->ModelInfer(&ctx, *req, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return InferResult::FromResponse(std::move(response));
}

Status InferenceClient::GenerateStream(const InferInputs& inputs, const InferOptions& options,
                                       const std::function<void(InferResult&&)>& on_response) const {
  StatusOr<inference::ModelInferRequest> req = MakeRequest(inputs, options);
  if (!req.ok()) return req.status();
  // Triton's decoupled protocol: the empty final response says where the stream ends.
  (*req->mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  grpc::ClientContext ctx;
  PrepareContext(&ctx, options.timeout);
  auto stream = stub_->ModelStreamInfer(&ctx);
  if (!stream->Write(*req)) return FromGrpcStatus(stream->Finish());
  stream->WritesDone();
  inference::ModelStreamInferResponse response;
  Status result = Status::Ok();
  while (stream->Read(&response)) {
    if (!response.error_message().empty()) {
      result = StatusFromStreamMessage(response.error_message());
      break;
    }
    const auto& params = response.infer_response().parameters();
    auto final = params.find("triton_final_response");
    bool last = final == params.end() || final->second.bool_param();
    bool empty = response.infer_response().outputs_size() == 0;
    if (!(last && empty)) {
      StatusOr<InferResult> r = InferResult::FromResponse(std::move(*response.mutable_infer_response()));
      if (!r.ok()) {
        result = r.status();
        break;
      }
      on_response(std::move(*r));
    }
    if (last) break;
  }
  ctx.TryCancel();  // done reading: a stream cut short stops the model
  grpc::Status finished = stream->Finish();
  if (result.ok() && !finished.ok() && finished.error_code() != grpc::StatusCode::CANCELLED) {
    return FromGrpcStatus(finished);
  }
  return result;
}

}  // namespace manypy::client
