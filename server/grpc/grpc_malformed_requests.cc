#include "server/grpc/grpc_malformed_requests.h"

#include <grpcpp/support/status.h>

namespace manypy {
namespace {

using grpc::experimental::InterceptionHookPoints;

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  MalformedRequestInterceptor(const char* method,
                              const std::function<void(const std::string&)>* on_refused)
      : method_(method), on_refused_(on_refused) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* batch) override {
    // A unary call's one message: null here means protobuf could not parse it.
    if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        batch->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (unparsed_ && batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        batch->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      const std::string method = method_ != nullptr ? method_ : "the method";
      batch->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "the request to " + method + " is not a valid protobuf message of its type: malformed, "
          "or nested deeper than the limit of " + std::to_string(kProtobufRecursionLimit) +
          " levels of messages and groups"));
      (*on_refused_)(method);
    }
    batch->Proceed();
  }

 private:
  const char* const method_;
  const std::function<void(const std::string&)>* const on_refused_;
  bool unparsed_ = false;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::function<void(const std::string&)> on_refused)
      : on_refused_(std::move(on_refused)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Streams read many messages, and a null one there is the client's end.
    if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) return nullptr;
    return new MalformedRequestInterceptor(info->method(), &on_refused_);
  }

 private:
  const std::function<void(const std::string&)> on_refused_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MalformedRequestRefusals(
    std::function<void(const std::string& method)> on_refused) {
  return std::make_unique<Factory>(std::move(on_refused));
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MalformedRequestRefusals(InferenceServer* core) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> list;
  list.push_back(MalformedRequestRefusals([core](const std::string& method) {
    if (method != "/inference.GRPCInferenceService/ModelInfer") return;
    core->Refuse("", "", InvalidArgument("the ModelInferRequest could not be parsed"),
                 [](const Status&) {});
  }));
  return list;
}

}  // namespace manypy
